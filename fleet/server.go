package fleet

import (
	"fmt"
	"net"
	"strconv"
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
// and only this process reaches it (InProcess). The caller shuts it down
// (Shutdown, then WaitForShutdown).
func Serve(addr, dir string) (*server.Server, error) {
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
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("fleet: server: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("fleet: server on %q did not start", addr)
	}
	return ns, nil
}

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
// credentials and TLS: nats.UserCredentials, nats.RootCAs,
// nats.ClientCert, or InProcess) for a Node: a server that is down at
// start is not an error — the connection retries in the background, with
// Backoff, for ever, as it does when the server is lost later; each loss
// and recovery is logged at warn and info.
func Connect(url string, log zerolog.Logger, opts ...nats.Option) (*nats.Conn, error) {
	base := []nats.Option{
		nats.Name("adaptsched"),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(Backoff),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err != nil && !nc.IsClosed() { // nil: closed by its owner
				log.Warn().Err(err).Str("url", url).Msg("fleet: disconnected; retrying")
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info().Str("url", nc.ConnectedUrlRedacted()).Msg("fleet: reconnected")
		}),
	}
	nc, err := nats.Connect(url, append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("fleet: connecting to %s: %w", url, err)
	}
	if !nc.IsConnected() {
		log.Warn().Str("url", url).Msg("fleet: server unreachable; scheduling on local evidence, retrying")
	}
	return nc, nil
}
