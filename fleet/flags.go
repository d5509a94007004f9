package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/adaptsched/adaptsched/hardware"
)

// Flags are the command-line flags of a program that joins a fleet
// (cmd/infer, cmd/replay): -fleet, -fleet-serve, -fleet-dir, -fleet-node,
// -fleet-creds, -fleet-ca, -fleet-cert, -fleet-key, -fleet-interval.
// Register them, then Validate and Start after parsing.
type Flags struct {
	url, serve, dir, node string
	creds, ca, cert, key  string
	interval              time.Duration
}

// Register defines the flags on fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "fleet", "", "share posteriors through the NATS JetStream server at nats://HOST:PORT")
	fs.StringVar(&f.serve, "fleet-serve", "", "run an embedded JetStream server listening on ADDR (HOST:PORT, :PORT or PORT; loopback unless a host is given; port 0 picks a free one) and share through it")
	fs.StringVar(&f.dir, "fleet-dir", "", "data directory of -fleet-serve (default: the user cache dir's adaptsched/nats)")
	fs.StringVar(&f.node, "fleet-node", "", "this node's ID, the same across restarts (default: one kept in the user cache dir's adaptsched/fleet-node; give each process on one machine its own)")
	fs.StringVar(&f.creds, "fleet-creds", "", "NATS credentials file for -fleet")
	fs.StringVar(&f.ca, "fleet-ca", "", "CA certificate (PEM) that -fleet's server certificate is checked against")
	fs.StringVar(&f.cert, "fleet-cert", "", "client certificate (PEM) for -fleet (with -fleet-key)")
	fs.StringVar(&f.key, "fleet-key", "", "client key (PEM) for -fleet (with -fleet-cert)")
	fs.DurationVar(&f.interval, "fleet-interval", DefaultInterval, "how often this node's evidence is published (others' is folded in as it arrives)")
}

// Validate reports flags that do not go together.
func (f *Flags) Validate() error {
	switch {
	case (f.cert == "") != (f.key == ""):
		return fmt.Errorf("%w: -fleet-cert and -fleet-key go together", ErrOptions)
	case f.url == "" && (f.creds != "" || f.ca != "" || f.cert != ""):
		return fmt.Errorf("%w: -fleet-creds, -fleet-ca and -fleet-cert need -fleet", ErrOptions)
	case f.interval <= 0:
		return fmt.Errorf("%w: -fleet-interval %v", ErrOptions, f.interval)
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
// (up to 10 s) until the node has read the fleet's evidence, which the
// relay it is given to folds in as it starts. stop closes the node, the
// connection and the server, in that order: close the relay first.
// Without -fleet or -fleet-serve it returns a nil Node and a stop that
// does nothing.
func (f *Flags) Start(fp hardware.Fingerprint, log zerolog.Logger) (node *Node, stop func(), err error) {
	if !f.Enabled() {
		return nil, func() {}, nil
	}
	var ns *server.Server
	down := func() {}
	if f.serve != "" {
		dir := f.dir
		if dir == "" {
			c, err := os.UserCacheDir()
			if err != nil {
				return nil, nil, fmt.Errorf("fleet: -fleet-dir: %w", err)
			}
			dir = filepath.Join(c, "adaptsched", "nats")
		}
		var err error
		if ns, err = Serve(f.serve, dir); err != nil {
			return nil, nil, err
		}
		log.Info().Str("addr", ns.Addr().String()).Str("dir", dir).Msg("fleet: serving JetStream")
		down = func() { ns.Shutdown(); ns.WaitForShutdown() }
	}
	url, opts := f.url, []nats.Option{}
	if url == "" {
		url, opts = nats.DefaultURL, append(opts, InProcess(ns))
	}
	if f.creds != "" {
		opts = append(opts, nats.UserCredentials(f.creds))
	}
	if f.ca != "" {
		opts = append(opts, nats.RootCAs(f.ca))
	}
	if f.cert != "" {
		opts = append(opts, nats.ClientCert(f.cert, f.key))
	}
	nc, err := Connect(url, log, opts...)
	if err != nil {
		down()
		return nil, nil, err
	}
	id := f.node
	if id == "" {
		if id, err = DefaultNodeID(); err != nil {
			nc.Close()
			down()
			return nil, nil, err
		}
	}
	node, err = Start(nc, DefaultOptions(id, fp).WithInterval(f.interval).WithLogger(log))
	if err != nil {
		nc.Close()
		down()
		return nil, nil, err
	}
	if nc.IsConnected() {
		// Start from the fleet's evidence: the relay, and then the first
		// Select, come next.
		ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
		defer cancel()
		if err := node.WaitSynced(ctx); err != nil {
			log.Warn().Err(err).Msg("fleet: not synced yet; starting on local evidence")
		}
	}
	return node, func() { node.Close(); nc.Close(); down() }, nil
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
