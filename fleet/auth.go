package fleet

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Errors that stop a run joining a fleet (unless the fleet is optional):
// they will not heal by retrying, unlike a server that is down.
var (
	// ErrAuth reports credentials the server refused (authentication), or
	// an action they do not permit (authorisation).
	ErrAuth = errors.New("fleet: authentication failed")
	// ErrTLS reports a TLS handshake that failed: a certificate that does
	// not verify, TLS asked of a server without it or the reverse.
	ErrTLS = errors.New("fleet: TLS failed")
	// ErrNoJetStream reports a server without JetStream, where there is no
	// key-value bucket to share through.
	ErrNoJetStream = errors.New("fleet: the server has no JetStream")
)

// Credential lets one node into the embedded server (ServeOptions.Users):
// its node ID is its user name, with a password (plain, or a bcrypt hash
// "$2a$…", which nats-server compares) or an nkey (the public user key,
// "U…": the node signs in with its seed).
type Credential struct {
	Node     string
	Password string
	NKey     string
}

// ServeOptions are the embedded server's security. With Users, only those
// nodes get in, and each may write only its own keys (NATS subject
// permissions on the bucket's subjects, and a bucket that refuses
// rollups: bucketStream): a node cannot overwrite another's evidence or
// delete the bucket. Without Users the server authenticates
// no one and listens on loopback only. TLS, when set, is the server's
// certificate (and its ClientCAs, when set, verify the clients').
type ServeOptions struct {
	Users  []Credential
	TLS    *tls.Config
	Bucket string // the key-value bucket the permissions name; default DefaultBucket
}

// nodePermissions are what node may do on the key-value bucket: put its
// own keys (FINGERPRINT.NODE.sNN, whatever the fingerprint), read and
// watch all, create the bucket; the JetStream API calls of the key-value
// client for that bucket only, and replies on its inboxes.
func nodePermissions(bucket, node string) *server.Permissions {
	stream := "KV_" + bucket
	return &server.Permissions{
		Publish: &server.SubjectPermission{Allow: []string{
			"$KV." + bucket + ".*." + node + ".>",
			"$JS.API.INFO",
			"$JS.API.STREAM.INFO." + stream,
			"$JS.API.STREAM.CREATE." + stream,
			"$JS.API.STREAM.MSG.GET." + stream,
			"$JS.API.DIRECT.GET." + stream + ".>",
			"$JS.API.CONSUMER.CREATE." + stream,
			"$JS.API.CONSUMER.CREATE." + stream + ".>",
			"$JS.API.CONSUMER.INFO." + stream + ".>",
			"$JS.API.CONSUMER.DELETE." + stream + ".>",
			"$JS.FC." + stream + ".>",
		}},
		Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>"}},
	}
}

// serverSecurity fills opts's users, nkeys and TLS from so; it refuses a
// listener beyond loopback without credentials.
func serverSecurity(opts *server.Options, so ServeOptions) error {
	bucket := so.Bucket
	if bucket == "" {
		bucket = DefaultBucket
	}
	for _, c := range so.Users {
		if !idRE.MatchString(c.Node) {
			return fmt.Errorf("%w: user %q: a user is a node ID, 1 to 64 of A-Z a-z 0-9 _ -", ErrOptions, c.Node)
		}
		perm := nodePermissions(bucket, c.Node)
		switch {
		case c.NKey != "":
			opts.Nkeys = append(opts.Nkeys, &server.NkeyUser{Nkey: c.NKey, Permissions: perm})
		case c.Password != "":
			opts.Users = append(opts.Users, &server.User{Username: c.Node, Password: c.Password, Permissions: perm})
		default:
			return fmt.Errorf("%w: user %q has neither a password nor an nkey", ErrOptions, c.Node)
		}
	}
	if so.TLS != nil {
		opts.TLS, opts.TLSConfig = true, so.TLS
		opts.TLSVerify = so.TLS.ClientCAs != nil
	}
	if len(so.Users) == 0 && !opts.DontListen && !isLoopback(opts.Host) {
		return fmt.Errorf("%w: serving on %s without credentials would let anyone who reaches it read and write every node's evidence: give users (-fleet-serve-users), or listen on loopback", ErrOptions, opts.Host)
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ReadUsers reads a file of credentials for ServeOptions.Users: one node
// a line, "NODE PASSWORD" or "NODE NKEY" (a public user nkey, "U…"),
// blank lines and '#' comments skipped. Errors name the file and line,
// never a secret.
func ReadUsers(path string) ([]Credential, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("fleet: users: %w", err)
	}
	defer f.Close()
	var out []Credential
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		t := strings.TrimSpace(sc.Text())
		if t == "" || t[0] == '#' {
			continue
		}
		fs := strings.Fields(t)
		if len(fs) != 2 || !idRE.MatchString(fs[0]) {
			return nil, fmt.Errorf("%w: %s:%d: want \"NODE PASSWORD\" or \"NODE NKEY\", NODE 1 to 64 of A-Z a-z 0-9 _ -", ErrOptions, path, line)
		}
		c := Credential{Node: fs[0]}
		if len(fs[1]) == 56 && fs[1][0] == 'U' {
			c.NKey = fs[1]
		} else {
			c.Password = fs[1]
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("fleet: users: %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s lists no users", ErrOptions, path)
	}
	return out, nil
}

// ServerTLS returns the TLS configuration of a server certificate and
// key (PEM files), verifying clients' certificates against ca when given.
func ServerTLS(cert, key, ca string) (*tls.Config, error) {
	c, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("fleet: server certificate: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{c}, MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("fleet: client CA: %w", err)
		}
		cfg.ClientCAs = x509.NewCertPool()
		if !cfg.ClientCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: client CA %s holds no PEM certificate", ErrOptions, ca)
		}
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// Redact returns a server URL (or a comma-separated list of them) with
// any password replaced by "xxxxx", for logs and errors.
func Redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			if _, ok := u.User.Password(); ok {
				parts[i] = u.Redacted()
			}
		} else if err != nil && strings.Contains(p, "@") {
			parts[i] = "(a URL that does not parse)"
		}
	}
	return strings.Join(parts, ",")
}

// classify wraps a connection error that retrying will not heal in
// ErrAuth, ErrTLS or ErrNoJetStream, and returns nil for any other (a
// server down or unreachable).
func classify(err error) error {
	if err == nil {
		return nil
	}
	var cve *tls.CertificateVerificationError
	var uae x509.UnknownAuthorityError
	var he x509.HostnameError
	var rhe tls.RecordHeaderError
	msg := strings.ToLower(err.Error())
	switch {
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired), errors.Is(err, nats.ErrAuthRevoked),
		errors.Is(err, nats.ErrAccountAuthExpired), errors.Is(err, nats.ErrNkeysNotSupported),
		strings.Contains(msg, "authorization violation"), strings.Contains(msg, "authentication"),
		strings.Contains(msg, "permissions violation"), strings.Contains(msg, "nkey"), strings.Contains(msg, "credentials"):
		return fmt.Errorf("%w: %w", ErrAuth, err)
	case errors.Is(err, nats.ErrSecureConnRequired), errors.Is(err, nats.ErrSecureConnWanted),
		errors.As(err, &cve), errors.As(err, &uae), errors.As(err, &he), errors.As(err, &rhe),
		strings.Contains(msg, "tls:"), strings.Contains(msg, "x509:"):
		return fmt.Errorf("%w: %w", ErrTLS, err)
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return fmt.Errorf("%w (start it with -js): %w", ErrNoJetStream, err)
	}
	return nil
}
