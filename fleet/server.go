package fleet

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// DefaultHost is the host an address without one listens on: loopback.
const DefaultHost = "127.0.0.1"

// Serve starts a NATS server with JetStream embedded in this process,
// keeping its data in dir, so that a single machine or a demo needs no
// other program. addr is where it listens: "HOST:PORT", ":PORT" or
// "PORT" (both on loopback, DefaultHost), port 0 meaning a free port, as
// net.Listen takes it (nats-server would take 0 for its default, 4222,
// and two servers asked for port 0 would collide); "" listens nowhere,
// and only this process reaches it (InProcess). It authenticates no one,
// so it listens on loopback only (ServeWith takes credentials). The
// caller shuts it down (Shutdown, then WaitForShutdown).
func Serve(addr, dir string) (*server.Server, error) { return ServeWith(addr, dir, ServeOptions{}) }

// ServeWith is Serve with the credentials and TLS of so.
func ServeWith(addr, dir string, so ServeOptions) (*server.Server, error) {
	opts := &server.Options{ServerName: "adaptsched", JetStream: true, StoreDir: dir, NoSigs: true, NoLog: true}
	if addr == "" {
		opts.DontListen = true
	} else {
		host, port, err := splitAddr(addr)
		if err != nil {
			return nil, err
		}
		opts.Host, opts.Port = host, port
		if port == 0 {
			opts.Port = server.RANDOM_PORT
		}
	}
	if err := serverSecurity(opts, so); err != nil {
		return nil, err
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("fleet: server: %w", err)
	}
	why := &startLog{}
	ns.SetLoggerV2(why, false, false, false)
	go ns.Start()
	deadline := time.Now().Add(10 * time.Second)
	for !ns.ReadyForConnections(50 * time.Millisecond) {
		if why.fatal.Load() || time.Now().After(deadline) {
			ns.Shutdown()
			return nil, fmt.Errorf("fleet: server on %q did not start: %s", addr, why.last())
		}
	}
	return ns, nil
}

// startLog keeps the last error the embedded server logged, for the
// error of a server that did not start.
type startLog struct {
	mu    sync.Mutex
	msg   string
	fatal atomic.Bool // it logged a fatal error: it will not start
}

func (l *startLog) last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.msg == "" {
		return "it logged no error"
	}
	return l.msg
}

func (l *startLog) keep(format string, v ...any) {
	l.mu.Lock()
	l.msg = fmt.Sprintf(format, v...)
	l.mu.Unlock()
}

func (l *startLog) Errorf(format string, v ...any) { l.keep(format, v...) }
func (l *startLog) Fatalf(format string, v ...any) { l.keep(format, v...); l.fatal.Store(true) }
func (*startLog) Noticef(string, ...any)           {}
func (*startLog) Warnf(string, ...any)             {}
func (*startLog) Debugf(string, ...any)            {}
func (*startLog) Tracef(string, ...any)            {}

// splitAddr parses an address of Serve; the host defaults to loopback.
func splitAddr(addr string) (string, int, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		host, ps = "", addr
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("%w: address %q: want HOST:PORT, :PORT or PORT", ErrOptions, addr)
	}
	if host == "" {
		host = DefaultHost
	}
	return host, port, nil
}

// InProcess returns the option that connects a client to ns inside this
// process, without a socket.
func InProcess(ns *server.Server) nats.Option { return nats.InProcessServer(ns) }

// Backoff is the reconnection delay after attempts failed tries: 250 ms
// doubling to 30 s.
func Backoff(attempts int) time.Duration {
	if attempts > 7 {
		return maxBackoff
	}
	return min(minBackoff<<attempts, maxBackoff)
}

// Connect connects to the NATS server at url (nats://HOST:PORT; opts add
// credentials and TLS: nats.UserCredentials, nats.UserInfo, nats.RootCAs,
// nats.ClientCert, or InProcess) for a Node: a server that is down at
// start is not an error — the connection retries in the background, with
// Backoff, for ever, as it does when the server is lost later; each loss
// and recovery is logged at warn and info. Credentials or TLS that the
// server refuses are an error wrapping ErrAuth or ErrTLS: retrying would
// not heal them. URLs are logged with their passwords redacted.
func Connect(url string, log zerolog.Logger, opts ...nats.Option) (*nats.Conn, error) {
	shown := Redact(url)
	base := []nats.Option{
		nats.Name("adaptsched"),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(Backoff),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err != nil && !nc.IsClosed() { // nil: closed by its owner
				log.Warn().Err(err).Str("url", shown).Msg("fleet: disconnected; retrying")
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if cerr := classify(err); cerr != nil {
				err = cerr // an authorisation violation, named as such
			}
			log.Warn().Err(err).Str("url", shown).Msg("fleet: server reported an error")
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info().Str("url", nc.ConnectedUrlRedacted()).Msg("fleet: reconnected")
		}),
	}
	base = append(base, opts...)
	nc, err := nats.Connect(url, base...)
	if err == nil {
		return nc, nil
	}
	if cerr := classify(err); cerr != nil {
		return nil, fmt.Errorf("fleet: connecting to %s: %w", shown, cerr)
	}
	nc, err = nats.Connect(url, append(base, nats.RetryOnFailedConnect(true))...)
	if err != nil {
		return nil, fmt.Errorf("fleet: connecting to %s: %w", shown, err)
	}
	if !nc.IsConnected() {
		log.Warn().Str("url", shown).Msg("fleet: server unreachable; scheduling on local evidence, retrying")
	}
	return nc, nil
}
