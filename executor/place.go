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

// choose is the Scheduler's decision for an op (decide), written to d,
// by h when not nil: the op holds its output's write lock, which orders
// the uses of its site's handle. n numbers the decision among the
// output's (Tensor.decisions); one in latencyEvery is timed.
func (e *Executor) choose(d *adaptive.Decision, h *adaptive.Handle, n uint64, s *kernels.Spec, res *adaptive.Residency, exclude adaptive.Mask, why adaptive.Reason) error {
	if n%latencyEvery == 0 {
		return e.decideTimed(d, h, s, res, exclude, why)
	}
	return e.decide(d, h, s, res, exclude, why)
}

// decideTimed is decide, timed for Stats' DecisionLatency.
func (e *Executor) decideTimed(d *adaptive.Decision, h *adaptive.Handle, s *kernels.Spec, res *adaptive.Residency, exclude adaptive.Mask, why adaptive.Reason) error {
	start := time.Now()
	err := e.decide(d, h, s, res, exclude, why)
	e.latency.record(time.Since(start))
	return err
}

// decide is SelectExcept (by h, the handle on the op's site, when there
// is one), or with a Placer, SelectOn the backend it places the op on;
// an op the Placer leaves to the Strategy (Learned) is decided as without
// one, and a LearnedSeer is told the choice. The common case, a handle
// and no Placer, stays apart from the rest (decideBySpec), so that the
// code an op runs through is small (BenchmarkExecutorOnly).
func (e *Executor) decide(d *adaptive.Decision, h *adaptive.Handle, s *kernels.Spec, res *adaptive.Residency, exclude adaptive.Mask, why adaptive.Reason) error {
	if h == nil || e.cfg.Placer != nil {
		return e.decideBySpec(d, h, s, res, exclude, why)
	}
	err := h.SelectInto(d, res, exclude, why)
	if err == nil && e.seer != nil {
		e.sawLearned(d)
	}
	return err
}

// decideBySpec is decide without a handle, or with a Placer.
func (e *Executor) decideBySpec(d *adaptive.Decision, h *adaptive.Handle, s *kernels.Spec, res *adaptive.Residency, exclude adaptive.Mask, why adaptive.Reason) (err error) {
	arm := Learned
	if p := e.cfg.Placer; p != nil {
		var b adaptive.BucketID
		if h != nil {
			b = h.Bucket()
		} else if b, err = e.s.Bucket(*s); err != nil {
			return err
		}
		e.placeMu.Lock()
		arm = p.Place(*s, *res, b)
		e.placeMu.Unlock()
	}
	switch {
	case arm != Learned && h != nil:
		err = h.SelectOnInto(d, res, arm, exclude, why)
	case arm != Learned:
		*d, err = e.s.SelectOn(*s, *res, arm, exclude, why)
	case h != nil:
		err = h.SelectInto(d, res, exclude, why)
	default:
		*d, err = e.s.SelectExcept(*s, *res, exclude, why)
	}
	if arm == Learned && err == nil && e.seer != nil {
		e.sawLearned(d)
	}
	return err
}

// sawLearned tells the LearnedSeer where the Strategy placed an op.
func (e *Executor) sawLearned(d *adaptive.Decision) {
	e.placeMu.Lock()
	e.seer.SawLearned(d.Bucket, d.Backend)
	e.placeMu.Unlock()
}

// placerObserved tells the Placer an op's timing, which the Scheduler
// took.
func (e *Executor) placerObserved(d *adaptive.Ticket, tm backends.Timing) {
	e.placeMu.Lock()
	e.cfg.Placer.Observed(d.Bucket, d.Backend, tm.Micros())
	e.placeMu.Unlock()
}
