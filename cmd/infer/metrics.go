package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/fleet"
	"github.com/adaptsched/adaptsched/metrics"
)

// serveMetrics serves s's Prometheus collectors at /metrics on addr
// (loopback unless addr names a host) until the returned stop; at is
// where it listens ("" for addr "": nowhere).
func serveMetrics(addr string, s *adaptive.Scheduler, log zerolog.Logger) (at string, stop func(), err error) {
	if addr == "" {
		return "", func() {}, nil
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
		return "", nil, fmt.Errorf("infer: -metrics: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.Collectors(s)...)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn().Err(err).Msg("infer: metrics server stopped")
		}
	}()
	log.Info().Str("addr", l.Addr().String()).Msg("infer: serving metrics at /metrics")
	return l.Addr().String(), func() { srv.Close() }, nil
}
