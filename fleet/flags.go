package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/adaptsched/adaptsched/hardware"
)

// Flags are the command-line flags of a program that joins a fleet
// (cmd/infer, cmd/replay): -fleet, -fleet-serve, -fleet-dir, -fleet-node,
// -fleet-creds, -fleet-password-file, -fleet-nkey, -fleet-ca, -fleet-cert,
// -fleet-key, -fleet-serve-users, -fleet-serve-cert, -fleet-serve-key,
// -fleet-serve-ca, -fleet-optional, -fleet-interval, -fleet-max-peer-keys.
// Register them, then Validate and Start after parsing.
type Flags struct {
	url, serve, dir, node  string
	creds, ca, cert, key   string
	passwordFile, nkeySeed string
	serveUsers             string
	serveCert, serveKey    string
	serveCA                string
	optional               bool
	interval               time.Duration
	maxPeerKeys            int
	refused                *refusal // an authorisation refused while running
}

// refusal keeps the first authorisation error the server reported to a
// running node.
type refusal struct {
	mu  sync.Mutex
	err error
}

func (r *refusal) set(err error) {
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.mu.Unlock()
}

// Err returns the first authorisation error the server reported while
// the node ran (a put on keys its credentials do not cover): the program
// should end with it, non-zero. With -fleet-optional it returns nil (the
// error was logged).
func (f *Flags) Err() error {
	if f.refused == nil || f.optional {
		return nil
	}
	f.refused.mu.Lock()
	defer f.refused.mu.Unlock()
	return f.refused.err
}

// Register defines the flags on fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "fleet", "", "share posteriors through the NATS JetStream server at nats://HOST:PORT")
	fs.StringVar(&f.serve, "fleet-serve", "", "run an embedded JetStream server listening on ADDR (HOST:PORT, :PORT or PORT; loopback unless a host is given; port 0 picks a free one) and share through it")
	fs.StringVar(&f.dir, "fleet-dir", "", "data directory of -fleet-serve (default: the user cache dir's adaptsched/nats)")
	fs.StringVar(&f.node, "fleet-node", "", "this node's ID, the same across restarts (default: one kept in the user cache dir's adaptsched/fleet-node; give each process on one machine its own)")
	fs.StringVar(&f.creds, "fleet-creds", "", "NATS credentials file (JWT) for -fleet")
	fs.StringVar(&f.passwordFile, "fleet-password-file", "", "file holding this node's password: it signs in as its node ID (-fleet-node)")
	fs.StringVar(&f.nkeySeed, "fleet-nkey", "", "file holding this node's nkey seed (SU…): it signs in with it")
	fs.StringVar(&f.serveUsers, "fleet-serve-users", "", "users of -fleet-serve, one \"NODE PASSWORD\" or \"NODE NKEY\" a line: each node may write only its own keys (without it the server takes anyone and listens on loopback only)")
	fs.StringVar(&f.serveCert, "fleet-serve-cert", "", "TLS certificate (PEM) of -fleet-serve (with -fleet-serve-key)")
	fs.StringVar(&f.serveKey, "fleet-serve-key", "", "TLS key (PEM) of -fleet-serve")
	fs.StringVar(&f.serveCA, "fleet-serve-ca", "", "CA (PEM) that -fleet-serve verifies the clients' certificates against")
	fs.BoolVar(&f.optional, "fleet-optional", false, "go on alone when the fleet refuses this node (credentials, TLS, no JetStream) rather than stop")
	fs.StringVar(&f.ca, "fleet-ca", "", "CA certificate (PEM) that -fleet's server certificate is checked against")
	fs.StringVar(&f.cert, "fleet-cert", "", "client certificate (PEM) for -fleet (with -fleet-key)")
	fs.StringVar(&f.key, "fleet-key", "", "client key (PEM) for -fleet (with -fleet-cert)")
	fs.DurationVar(&f.interval, "fleet-interval", DefaultInterval, "how often this node's evidence is published (others' is folded in as it arrives)")
	fs.IntVar(&f.maxPeerKeys, "fleet-max-peer-keys", DefaultMaxPeerKeys, "the most records (bucket × backend) this node holds of each other node, 70–90 bytes each (about 500 where no other node names them): the rest of a larger node's evidence is left out, with a warning")
}

// Validate reports flags that do not go together.
func (f *Flags) Validate() error {
	switch {
	case (f.cert == "") != (f.key == ""):
		return fmt.Errorf("%w: -fleet-cert and -fleet-key go together", ErrOptions)
	case (f.serveCert == "") != (f.serveKey == ""):
		return fmt.Errorf("%w: -fleet-serve-cert and -fleet-serve-key go together", ErrOptions)
	case f.serve == "" && (f.serveUsers != "" || f.serveCert != "" || f.serveCA != ""):
		return fmt.Errorf("%w: -fleet-serve-users, -fleet-serve-cert and -fleet-serve-ca need -fleet-serve", ErrOptions)
	case f.url == "" && (f.creds != "" || f.ca != "" || f.cert != "" || f.passwordFile != "" || f.nkeySeed != ""):
		return fmt.Errorf("%w: -fleet-creds, -fleet-password-file, -fleet-nkey, -fleet-ca and -fleet-cert need -fleet", ErrOptions)
	case f.interval <= 0:
		return fmt.Errorf("%w: -fleet-interval %v", ErrOptions, f.interval)
	case f.maxPeerKeys < 1 || f.maxPeerKeys > maxMaxPeerKeys:
		return fmt.Errorf("%w: -fleet-max-peer-keys %d: want 1 to %d", ErrOptions, f.maxPeerKeys, maxMaxPeerKeys)
	}
	return nil
}

// Enabled reports whether the flags ask for a fleet (-fleet or
// -fleet-serve).
func (f *Flags) Enabled() bool { return f.url != "" || f.serve != "" }

// syncTimeout bounds how long Flags.Start waits for a reachable server's
// values.
const syncTimeout = 10 * time.Second

// Start does what the flags ask: it runs the embedded server of
// -fleet-serve, connects (to -fleet, or in process to that server), and
// starts a Node for hardware fp; when the server is reachable it waits
// (up to 10 s, or until ctx ends: Ctrl-C) until the node has read the
// fleet's evidence, which the relay it is given to folds in as it starts.
// stop closes the node, the connection and the server, in that order:
// close the relay first. Without -fleet or -fleet-serve it returns a nil
// Node and a stop that does nothing.
//
// Credentials or TLS the server refuses, and a server without JetStream,
// are errors (ErrAuth, ErrTLS, ErrNoJetStream) that stop the program;
// with -fleet-optional they are logged and Start returns a nil Node, the
// program going on alone. A server that is down is no error: the node
// retries in the background.
func (f *Flags) Start(ctx context.Context, fp hardware.Fingerprint, log zerolog.Logger) (node *Node, stop func(), err error) {
	if !f.Enabled() {
		return nil, func() {}, nil
	}
	node, stop, err = f.start(ctx, fp, log)
	if err != nil && f.optional && (errors.Is(err, ErrAuth) || errors.Is(err, ErrTLS) || errors.Is(err, ErrNoJetStream)) {
		log.Error().Err(err).Msg("fleet: refused; going on without the fleet (-fleet-optional)")
		return nil, func() {}, nil
	}
	return node, stop, err
}

func (f *Flags) start(ctx context.Context, fp hardware.Fingerprint, log zerolog.Logger) (*Node, func(), error) {
	id := f.node
	if id == "" {
		var err error
		if id, err = DefaultNodeID(); err != nil {
			return nil, nil, err
		}
	}
	url, opts, err := f.clientOptions(id)
	if err != nil {
		return nil, nil, err
	}
	down := func() {}
	if f.serve != "" {
		ns, local, err := f.startServer(id, log)
		if err != nil {
			return nil, nil, err
		}
		down = func() { ns.Shutdown(); ns.WaitForShutdown() }
		if url == "" {
			url, opts = nats.DefaultURL, append(local, InProcess(ns))
		}
	}
	f.refused = &refusal{}
	opts = append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if cerr := classify(err); cerr != nil {
			err = cerr
			if errors.Is(err, ErrAuth) {
				f.refused.set(fmt.Errorf("fleet: %s: %w", Redact(url), err))
			}
		}
		log.Error().Err(err).Str("url", Redact(url)).Msg("fleet: the server refused an action")
	}))
	nc, err := Connect(url, log, opts...)
	if err != nil {
		down()
		return nil, nil, err
	}
	if err := checkJetStream(ctx, nc); err != nil {
		nc.Close()
		down()
		return nil, nil, fmt.Errorf("fleet: %s: %w", Redact(url), err)
	}
	node, err := Start(nc, DefaultOptions(id, fp).WithInterval(f.interval).WithMaxPeerKeys(f.maxPeerKeys).WithLogger(log))
	if err != nil {
		nc.Close()
		down()
		return nil, nil, err
	}
	if nc.IsConnected() {
		// Start from the fleet's evidence: the relay, and then the first
		// Select, come next.
		wctx, cancel := context.WithTimeout(ctx, syncTimeout)
		defer cancel()
		if err := node.WaitSynced(wctx); err != nil {
			log.Warn().Err(err).Msg("fleet: not synced yet; starting on local evidence")
		}
	}
	return node, func() { node.Close(); nc.Close(); down() }, nil
}

// clientOptions returns -fleet's URL and the options of its credentials
// and TLS; node id signs in under its own name.
func (f *Flags) clientOptions(id string) (string, []nats.Option, error) {
	var opts []nats.Option
	if f.creds != "" {
		opts = append(opts, nats.UserCredentials(f.creds))
	}
	if f.passwordFile != "" {
		b, err := os.ReadFile(f.passwordFile)
		if err != nil {
			return "", nil, fmt.Errorf("fleet: -fleet-password-file: %w", err)
		}
		opts = append(opts, nats.UserInfo(id, strings.TrimSpace(string(b))))
	}
	if f.nkeySeed != "" {
		o, err := nats.NkeyOptionFromSeed(f.nkeySeed)
		if err != nil {
			return "", nil, fmt.Errorf("%w: -fleet-nkey: %w", ErrAuth, err)
		}
		opts = append(opts, o)
	}
	if f.ca != "" {
		opts = append(opts, nats.RootCAs(f.ca))
	}
	if f.cert != "" {
		opts = append(opts, nats.ClientCert(f.cert, f.key))
	}
	return f.url, opts, nil
}

// startServer runs -fleet-serve's server, and returns the options of this
// node's own in-process connection: with users, a password made here
// (never shown) under its node ID, which gets a node's permissions.
func (f *Flags) startServer(id string, log zerolog.Logger) (*server.Server, []nats.Option, error) {
	dir := f.dir
	if dir == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			return nil, nil, fmt.Errorf("fleet: -fleet-dir: %w", err)
		}
		dir = filepath.Join(c, "adaptsched", "nats")
	}
	var so ServeOptions
	var local []nats.Option
	if f.serveUsers != "" {
		users, err := ReadUsers(f.serveUsers)
		if err != nil {
			return nil, nil, err
		}
		var r [24]byte
		_, _ = rand.Read(r[:])
		pw := hex.EncodeToString(r[:])
		so.Users = append([]Credential{{Node: id, Password: pw}}, slices.DeleteFunc(users, func(c Credential) bool { return c.Node == id })...)
		local = append(local, nats.UserInfo(id, pw))
	}
	if f.serveCert != "" {
		var err error
		if so.TLS, err = ServerTLS(f.serveCert, f.serveKey, f.serveCA); err != nil {
			return nil, nil, err
		}
	}
	ns, err := ServeWith(f.serve, dir, so)
	if err != nil {
		return nil, nil, err
	}
	ev := log.Info()
	if len(so.Users) == 0 {
		ev = log.Warn().Str("auth", "none")
	}
	ev.Str("addr", ns.Addr().String()).Str("dir", dir).Int("users", len(so.Users)).Bool("tls", so.TLS != nil).
		Msg(map[bool]string{true: "fleet: serving JetStream", false: "fleet: serving JetStream without authentication, on loopback only: any local user can read and write the evidence (-fleet-serve-users)"}[len(so.Users) > 0])
	return ns, local, nil
}

// checkJetStream asks the server for JetStream: ErrNoJetStream (through
// classify) when it has none. A server that does not answer in time is
// left to the node's retries.
func checkJetStream(ctx context.Context, nc *nats.Conn) error {
	if !nc.IsConnected() {
		return nil
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	_, err = js.AccountInfo(cctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return classify(err)
}

// DefaultNodeID returns the node ID kept in the user cache directory
// (adaptsched/fleet-node), making one (the host name and a random
// suffix) on first use. Processes of one user on one machine share it:
// give each its own with -fleet-node.
func DefaultNodeID() (string, error) {
	c, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("fleet: -fleet-node: %w", err)
	}
	path := filepath.Join(c, "adaptsched", "fleet-node")
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	var r [6]byte
	_, _ = rand.Read(r[:])
	host, _ := os.Hostname()
	id := "n-" + hex.EncodeToString(r[:])
	if h := strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			return c
		}
		return '-'
	}, host); h != "" {
		id = (h + "-" + hex.EncodeToString(r[:]))[:min(64, len(h)+13)]
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("fleet: -fleet-node: %w", err)
	}
	if err := os.WriteFile(path, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("fleet: -fleet-node: %w", err)
	}
	return id, nil
}
