package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/fleet"
	"github.com/adaptsched/adaptsched/history"
)

// fleetFlags are the flags of fleet learning (issue 22) and of the
// metrics endpoint.
type fleetFlags struct {
	url, serve, dir, node string
	creds, ca, cert, key  string
	metrics               string
	interval              time.Duration
}

func (f *fleetFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "fleet", "", "share posteriors through the NATS JetStream server at nats://HOST:PORT")
	fs.StringVar(&f.serve, "fleet-serve", "", "run an embedded JetStream server listening on ADDR (HOST:PORT, :PORT or PORT; loopback unless a host is given) and share through it")
	fs.StringVar(&f.dir, "fleet-dir", "", "data directory of -fleet-serve (default: the user cache dir's adaptsched/nats)")
	fs.StringVar(&f.node, "fleet-node", "", "this node's ID, the same across restarts (default: one kept in the user cache dir's adaptsched/fleet-node; give each process on one machine its own)")
	fs.StringVar(&f.creds, "fleet-creds", "", "NATS credentials file for -fleet")
	fs.StringVar(&f.ca, "fleet-ca", "", "CA certificate (PEM) that -fleet's server certificate is checked against")
	fs.StringVar(&f.cert, "fleet-cert", "", "client certificate (PEM) for -fleet (with -fleet-key)")
	fs.StringVar(&f.key, "fleet-key", "", "client key (PEM) for -fleet (with -fleet-cert)")
	fs.DurationVar(&f.interval, "fleet-interval", fleet.DefaultInterval, "how often the fleet's evidence is published and folded in")
	fs.StringVar(&f.metrics, "metrics", "", "serve Prometheus metrics over HTTP on ADDR (HOST:PORT, :PORT or PORT; loopback unless a host is given) at /metrics")
}

func (f *fleetFlags) validate() error {
	if (f.cert == "") != (f.key == "") {
		return errors.New("infer: -fleet-cert and -fleet-key go together")
	}
	if f.url == "" && (f.creds != "" || f.ca != "" || f.cert != "") {
		return errors.New("infer: -fleet-creds, -fleet-ca and -fleet-cert need -fleet")
	}
	return nil
}

// startFleet connects s to the fleet as the flags ask (nothing without
// -fleet or -fleet-serve) and returns what stops it.
func startFleet(f fleetFlags, s *adaptive.Scheduler, fp history.Fingerprint, log zerolog.Logger) (*fleet.Node, func(), error) {
	if f.url == "" && f.serve == "" {
		return nil, func() {}, nil
	}
	var ns *server.Server
	stop := func() {}
	if f.serve != "" {
		dir := f.dir
		if dir == "" {
			c, err := os.UserCacheDir()
			if err != nil {
				return nil, nil, fmt.Errorf("infer: -fleet-dir: %w", err)
			}
			dir = filepath.Join(c, "adaptsched", "nats")
		}
		var err error
		if ns, err = fleet.Serve(f.serve, dir); err != nil {
			return nil, nil, err
		}
		log.Info().Str("addr", ns.Addr().String()).Str("dir", dir).Msg("fleet: serving JetStream")
		stop = func() { ns.Shutdown(); ns.WaitForShutdown() }
	}
	url, opts := f.url, []nats.Option{}
	if url == "" {
		url, opts = nats.DefaultURL, append(opts, fleet.InProcess(ns))
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
	nc, err := fleet.Connect(url, log, opts...)
	if err != nil {
		stop()
		return nil, nil, err
	}
	id := f.node
	if id == "" {
		if id, err = defaultNodeID(); err != nil {
			nc.Close()
			stop()
			return nil, nil, err
		}
	}
	node, err := fleet.Start(nc, s, fleet.DefaultOptions(id, fp).WithInterval(f.interval).WithLogger(log))
	if err != nil {
		nc.Close()
		stop()
		return nil, nil, err
	}
	return node, func() { node.Close(); nc.Close(); stop() }, nil
}

// defaultNodeID returns the node ID kept in the user cache directory,
// making one (random) on first use.
func defaultNodeID() (string, error) {
	c, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("infer: -fleet-node: %w", err)
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
		return "", fmt.Errorf("infer: -fleet-node: %w", err)
	}
	if err := os.WriteFile(path, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("infer: -fleet-node: %w", err)
	}
	return id, nil
}

// serveMetrics serves s's Prometheus collectors at /metrics on addr
// (loopback unless addr names a host) until the returned stop.
func serveMetrics(addr string, s *adaptive.Scheduler, log zerolog.Logger) (func(), error) {
	if addr == "" {
		return func() {}, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = "", addr
	}
	if host == "" {
		host = fleet.DefaultHost
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("infer: -metrics: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Collectors()...)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn().Err(err).Msg("infer: metrics server stopped")
		}
	}()
	log.Info().Str("addr", l.Addr().String()).Msg("infer: serving metrics at /metrics")
	return func() { srv.Close() }, nil
}
