// Package metrics serves a Scheduler's counters to Prometheus: the
// scheduler exposes them as data (adaptive.Scheduler.BackendTotals), and
// this package, which the commands import, turns them into collectors,
// so that the scheduler links no metrics library.
//
// # Usage
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(metrics.Collectors(s)...)
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// The program registers them on its own registry; this package never
// touches the default one.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/adaptsched/adaptsched/adaptive"
)

// Source is what the collectors read at each scrape
// (*adaptive.Scheduler).
type Source interface {
	BackendTotals() []adaptive.BackendTelemetry
}

// collector is one counter family per backend, read from the source's
// totals at scrape time: the hot path only bumps plain fields under the
// bucket's lock it already holds.
type collector struct {
	src  Source
	desc *prometheus.Desc
	get  func(b *adaptive.BackendTelemetry) float64
}

var _ prometheus.Collector = (*collector)(nil)

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	for _, b := range c.src.BackendTotals() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, c.get(&b), b.Name)
	}
}

// Collectors returns src's Prometheus collectors, counters labelled by
// backend: adaptsched_ops_total, adaptsched_op_seconds_total (observed
// compute time), adaptsched_switches_total (incumbent switches to the
// backend) and adaptsched_explorations_total. Each call returns new
// collectors.
func Collectors(src Source) []prometheus.Collector {
	label := []string{"backend"}
	mk := func(name, help string, get func(b *adaptive.BackendTelemetry) float64) prometheus.Collector {
		return &collector{src: src, desc: prometheus.NewDesc(name, help, label, nil), get: get}
	}
	return []prometheus.Collector{
		mk("adaptsched_ops_total", "Ops observed on the backend.",
			func(b *adaptive.BackendTelemetry) float64 { return float64(b.Ops) }),
		mk("adaptsched_op_seconds_total", "Observed compute time of ops on the backend, in seconds.",
			func(b *adaptive.BackendTelemetry) float64 { return b.ComputeUs * 1e-6 }),
		mk("adaptsched_switches_total", "Incumbent switches of a bucket to the backend.",
			func(b *adaptive.BackendTelemetry) float64 { return float64(b.Switches) }),
		mk("adaptsched_explorations_total", "Decisions that explored the backend (reason Explore).",
			func(b *adaptive.BackendTelemetry) float64 { return float64(b.Explorations) }),
	}
}
