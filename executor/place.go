package executor

import (
	"sync/atomic"
	"time"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// latencyEvery: one decision in latencyEvery is timed for Stats'
// DecisionLatency, so the two clock reads cost each decision about 1 ns
// on average rather than tens.
const latencyEvery = 64

// LatencyBoundsNs are the upper bounds, in ns, of DecisionLatency's
// buckets; a last bucket holds the slower decisions.
var LatencyBoundsNs = [...]float64{100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600}

// Latency is a histogram of sampled decision times.
type Latency struct {
	Count   uint64                           // decisions timed
	SumNs   int64                            // their total time
	Buckets [len(LatencyBoundsNs) + 1]uint64 // timed decisions by LatencyBoundsNs, not cumulative
}

// latency is Latency as the hot path fills it.
type latency struct {
	seen    atomic.Uint64 // decisions made: every latencyEvery-th is timed
	count   atomic.Uint64
	sumNs   atomic.Int64
	buckets [len(LatencyBoundsNs) + 1]atomic.Uint64
}

func (l *latency) record(d time.Duration) {
	ns := float64(d.Nanoseconds())
	i := 0
	for i < len(LatencyBoundsNs) && ns > LatencyBoundsNs[i] {
		i++
	}
	l.buckets[i].Add(1)
	l.sumNs.Add(d.Nanoseconds())
	l.count.Add(1)
}

func (l *latency) snapshot() Latency {
	out := Latency{Count: l.count.Load(), SumNs: l.sumNs.Load()}
	for i := range l.buckets {
		out.Buckets[i] = l.buckets[i].Load()
	}
	return out
}

// choose is the Scheduler's decision for an op (decide), one in
// latencyEvery of them timed.
func (e *Executor) choose(s kernels.Spec, res adaptive.Residency, exclude adaptive.Mask, why adaptive.Reason) (adaptive.Decision, error) {
	if e.latency.seen.Add(1)%latencyEvery != 0 {
		return e.decide(s, res, exclude, why)
	}
	start := time.Now()
	d, err := e.decide(s, res, exclude, why)
	e.latency.record(time.Since(start))
	return d, err
}

// decide is SelectExcept, or with a Placer, SelectOn the backend it
// places the op on.
func (e *Executor) decide(s kernels.Spec, res adaptive.Residency, exclude adaptive.Mask, why adaptive.Reason) (adaptive.Decision, error) {
	p := e.cfg.Placer
	if p == nil {
		return e.s.SelectExcept(s, res, exclude, why)
	}
	b, err := e.s.Bucket(s)
	if err != nil {
		return adaptive.Decision{}, err
	}
	e.placeMu.Lock()
	arm := p.Place(s, res, b)
	e.placeMu.Unlock()
	if arm == Learned {
		return e.s.SelectExcept(s, res, exclude, why)
	}
	return e.s.SelectOn(s, res, arm, exclude, why)
}

// observe feeds an op's timing to the Scheduler and, when it takes it,
// to the Placer.
func (e *Executor) observe(d adaptive.Decision, tm backends.Timing) {
	if err := e.s.Observe(d, tm); err != nil || e.cfg.Placer == nil {
		return
	}
	e.placeMu.Lock()
	e.cfg.Placer.Observed(d.Bucket, d.Backend, tm.Micros())
	e.placeMu.Unlock()
}
