package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/executor"
	"github.com/adaptsched/adaptsched/fleet"
	"github.com/adaptsched/adaptsched/history"
)

// Sources of the metrics, read at each scrape; a nil one (no -db, no
// fleet) exports nothing.
type (
	scheduler interface{ Telemetry() adaptive.Telemetry }
	execStats interface{ Stats() executor.Stats }
	storeStat interface{ Stats() history.Stats }
	fleetStat interface{ Stats() fleet.Stats }
)

// metricSources are what -metrics exports: the Scheduler's Telemetry, the
// Executor's Stats, the store's and the fleet node's counters.
type metricSources struct {
	sched scheduler
	exec  execStats
	store storeStat
	fleet fleetStat
}

// metricsHostPort splits -metrics's addr as serveMetrics listens on it:
// a bare PORT is ":PORT", and no host is loopback.
func metricsHostPort(addr string) (host, port string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = "", addr
	}
	if host == "" {
		host = fleet.DefaultHost
	}
	return host, port
}

// checkMetricsAddr is checkFlags' check of -metrics: a port that is no
// port (":99999") is a bad flag, caught before anything is opened or
// created (TestFlagErrorsOnce).
func checkMetricsAddr(addr string) error {
	if addr == "" {
		return nil
	}
	if _, port := metricsHostPort(addr); port != "" {
		if _, err := net.LookupPort("tcp", port); err != nil {
			return fmt.Errorf("infer: -metrics %q: %w", addr, err)
		}
	}
	return nil
}

// listenMetrics listens on addr for -metrics (nil for ""). run listens
// before it creates -trace's file or -cpuprofile's, so that an address
// it cannot bind leaves them as they were (TestBadFlagKeepsTrace).
func listenMetrics(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(metricsHostPort(addr)))
	if err != nil {
		return nil, fmt.Errorf("infer: -metrics: %w", err)
	}
	return l, nil
}

// serveMetrics serves src's metrics, the Go runtime's and the process's at
// /metrics on addr (loopback unless addr names a host) until the returned
// stop; at is where it listens ("" for addr "": nowhere).
func serveMetrics(addr string, src metricSources, log zerolog.Logger) (at string, stop func(), err error) {
	l, err := listenMetrics(addr)
	if err != nil {
		return "", nil, err
	}
	at, stop = serveMetricsOn(l, src, log)
	return at, stop, nil
}

// serveMetricsOn serves src's metrics on l (nowhere for nil) until the
// returned stop, which closes l; at is l's address.
func serveMetricsOn(l net.Listener, src metricSources, log zerolog.Logger) (at string, stop func()) {
	if l == nil {
		return "", func() {}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(&collector{src: src}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn().Err(err).Msg("infer: metrics server stopped")
		}
	}()
	return l.Addr().String(), func() { srv.Close() }
}

// startMetrics serves the metrics of src and node (nil: no fleet) on
// l, listenMetrics' (nil: nowhere), and says on stderr where: with ":0"
// the port is the system's pick.
func startMetrics(l net.Listener, src metricSources, node *fleet.Node, log zerolog.Logger, stderr io.Writer) (stop func()) {
	if node != nil {
		src.fleet = node
	}
	at, stop := serveMetricsOn(l, src, log)
	if at != "" {
		fmt.Fprintf(stderr, "infer: metrics at http://%s/metrics\n", at)
	}
	return stop
}

// metric is one family: its name and help, Prometheus' conventions
// (adaptsched_ prefix, _total for counters, base units).
type metric struct {
	desc *prometheus.Desc
	kind prometheus.ValueType
}

func newMetric(name, help string, kind prometheus.ValueType, labels ...string) metric {
	return metric{desc: prometheus.NewDesc("adaptsched_"+name, help, labels, nil), kind: kind}
}

var (
	counter, gauge = prometheus.CounterValue, prometheus.GaugeValue

	mDecisions    = newMetric("decisions_total", "Ops the Scheduler placed on the backend (Select), by its reason (explore, exploit, prior, ...).", counter, "backend", "reason")
	mExplorations = newMetric("explorations_total", "Decisions on the backend whose reason was Explore.", counter, "backend")
	mOps          = newMetric("ops_total", "Ops observed on the backend.", counter, "backend")
	mOpSeconds    = newMetric("op_seconds_total", "Observed compute time of ops on the backend.", counter, "backend")
	mSwitches     = newMetric("switches_total", "Incumbent switches of a bucket to the backend.", counter, "backend")
	mLatency      = newMetric("decision_latency_seconds", "Time of the Scheduler's decisions, one in 64 timed (a histogram).", counter)
	mFallbacks    = newMetric("fallbacks_total", "Ops that ran elsewhere than first chosen, after a failure.", counter)
	mFailures     = newMetric("backend_failures_total", "Failed allocations, copies and ops on the backend.", counter, "backend")
	mHealthy      = newMetric("backend_healthy", "1 when the backend is not in back-off after failures.", gauge, "backend")
	mXferBytes    = newMetric("transfer_bytes_total", "Bytes copied into the backend's memory.", counter, "backend")
	mXferCopies   = newMetric("transfers_total", "Copies into the backend's memory.", counter, "backend")
	mXferSeconds  = newMetric("transfer_seconds_total", "Time of copies into and out of the backend, as it timed them.", counter, "backend")
	mLinkLatency  = newMetric("link_latency_seconds", "The Scheduler's model of the link's copy latency.", gauge, "backend", "direction")
	mLinkBW       = newMetric("link_bandwidth_bytes_per_second", "The Scheduler's model of the link's bandwidth.", gauge, "backend", "direction")
	mStoreFlush   = newMetric("store_flushes_total", "Posterior store flushes that wrote records.", counter)
	mStoreFailed  = newMetric("store_flush_errors_total", "Posterior store flushes that failed (retried).", counter)
	mStorePending = newMetric("store_pending_records", "Posterior records waiting for the next flush.", gauge)
	mFleetPeers   = newMetric("fleet_peers", "Other nodes of the fleet whose evidence is held.", gauge)
	mFleetSynced  = newMetric("fleet_synced", "1 once the node has read its own previous values and publishes.", gauge)
	mFleetUp      = newMetric("fleet_connected", "1 while the connection to the fleet's server is up.", gauge)
	mFleetPub     = newMetric("fleet_published_total", "Values this node put.", counter)
	mFleetRecv    = newMetric("fleet_received_total", "Other nodes' values folded in.", counter)
	mFleetErrors  = newMetric("fleet_errors_total", "Failed set-ups and puts.", counter)
)

var allMetrics = []metric{mDecisions, mExplorations, mOps, mOpSeconds, mSwitches, mLatency, mFallbacks, mFailures, mHealthy,
	mXferBytes, mXferCopies, mXferSeconds, mLinkLatency, mLinkBW, mStoreFlush, mStoreFailed, mStorePending,
	mFleetPeers, mFleetSynced, mFleetUp, mFleetPub, mFleetRecv, mFleetErrors}

// collector exports metricSources at scrape time: the hot path keeps its
// plain counters, and a scrape reads one snapshot of each.
type collector struct{ src metricSources }

var _ prometheus.Collector = (*collector)(nil)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range allMetrics {
		ch <- m.desc
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	emit := func(m metric, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, v, labels...)
	}
	if s := c.src.sched; s != nil {
		tel := s.Telemetry()
		for _, b := range tel.Backends {
			for _, r := range adaptive.Reasons() { // zeros too, so a rate is defined from the start
				emit(mDecisions, float64(b.Reasons[r]), b.Name, r.String())
			}
			emit(mExplorations, float64(b.Explorations), b.Name)
			emit(mOps, float64(b.Ops), b.Name)
			emit(mOpSeconds, b.Time.Seconds(), b.Name)
			emit(mSwitches, float64(b.Switches), b.Name)
		}
		for _, l := range tel.Links {
			dir := "from_device"
			if l.ToDevice {
				dir = "to_device"
			}
			emit(mLinkLatency, l.LatencyUs*1e-6, l.Backend, dir)
			emit(mLinkBW, l.GBps*1e9, l.Backend, dir)
		}
	}
	if e := c.src.exec; e != nil {
		st := e.Stats()
		ch <- latencyHistogram(st.DecisionLatency)
		emit(mFallbacks, float64(st.Fallbacks))
		for _, b := range st.Backends {
			emit(mFailures, float64(b.Failures), b.Name)
			emit(mHealthy, boolValue(b.Healthy), b.Name)
			emit(mXferBytes, float64(b.BytesIn), b.Name)
			emit(mXferCopies, float64(b.CopiesIn), b.Name)
			emit(mXferSeconds, b.Transfer.Seconds(), b.Name)
		}
	}
	if s := c.src.store; s != nil {
		st := s.Stats()
		emit(mStoreFlush, float64(st.Flushes))
		emit(mStoreFailed, float64(st.Failed))
		emit(mStorePending, float64(st.Pending))
	}
	if f := c.src.fleet; f != nil {
		st := f.Stats()
		emit(mFleetPeers, float64(st.Nodes))
		emit(mFleetSynced, boolValue(st.Synced))
		emit(mFleetUp, boolValue(st.Connected))
		emit(mFleetPub, float64(st.Published))
		emit(mFleetRecv, float64(st.Received))
		emit(mFleetErrors, float64(st.Errors))
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// loadedLine says what -db loaded: the posteriors of this hardware, those
// of other hardware offered as weakened priors, and what was skipped.
func loadedLine(dir string, st history.Stats) string {
	line := fmt.Sprintf("infer: -db %s: %d posteriors of this hardware loaded", dir, st.Records)
	if st.Records == 0 {
		line = fmt.Sprintf("infer: -db %s: no posterior of this hardware yet (a new store, or another machine's)", dir)
	}
	if st.Old > 0 {
		line += fmt.Sprintf("; %d of other hardware offered as weakened priors", st.Old)
	}
	if st.Skipped > 0 {
		line += fmt.Sprintf("; %d stored values skipped (undecodable)", st.Skipped)
	}
	return line
}

// latencyHistogram is the Executor's sampled decision times as a
// Prometheus histogram: cumulative counts by upper bound, in seconds.
func latencyHistogram(l executor.Latency) prometheus.Metric {
	buckets := make(map[float64]uint64, len(executor.LatencyBoundsNs))
	var cum uint64
	for i, ub := range executor.LatencyBoundsNs {
		cum += l.Buckets[i]
		buckets[ub/1e9] = cum
	}
	return prometheus.MustNewConstHistogram(mLatency.desc, l.Count, float64(l.SumNs)/1e9, buckets)
}
