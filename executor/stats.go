package executor

import (
	"time"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/trace"
)

// record hands one trace event to the Recorder. The bucket's name comes
// with the Decision: looking it up (Scheduler.BucketName) would take the
// bucket registry's lock on every op.
func (e *Executor) record(s kernels.Spec, d adaptive.Ticket, tm backends.Timing, xferUs float64) {
	ev := trace.EventOf(s)
	ev.Seq = e.seq.Add(1)
	ev.Bucket = d.BucketName
	ev.Backend = e.s.BackendName(d.Backend)
	ev.Reason = d.Reason.String()
	ev.ActualUs = tm.Micros()
	ev.TransferUs = xferUs
	e.cfg.Recorder.Record(ev)
}

// Stats is a snapshot of what an Executor did.
type Stats struct {
	Backends []BackendStats // in Config.Backends order
	// Fallbacks counts ops that ran on a backend other than the first one
	// chosen, after a failure; MemoryRetries counts out-of-memory
	// failures; Evictions counts copies evicted for memory; Recoveries
	// counts tensors recomputed after a device was lost; Invalidated
	// counts copies dropped with a lost device.
	Fallbacks, MemoryRetries, Evictions, Recoveries, Invalidated int64
	// DecisionLatency is the time of the Scheduler's decisions (Placer's
	// included), one decision in 64 timed.
	DecisionLatency Latency
}

// BackendStats is one backend's share of an Executor's work.
type BackendStats struct {
	Name       string
	Ops        int64         // ops that ran here
	Failures   int64         // failed allocations, copies and ops
	CopiesIn   int64         // copies into the backend's memory
	BytesIn    int64         // bytes of those copies
	Transfer   time.Duration // time of copies in and out, as the backend timed them
	Healthy    bool          // not in back-off
	LastError  string        // the failure that started the current back-off
	ResidentMB float64       // MB of buffers the Executor holds here
}

// Stats returns a snapshot of the Executor's counters. It is safe for
// concurrent use.
func (e *Executor) Stats() Stats {
	st := Stats{Fallbacks: e.fallbacks.Load(), MemoryRetries: e.memRetries.Load(),
		Evictions: e.evictions.Load(), Recoveries: e.recoveries.Load(), Invalidated: e.invalidated.Load(),
		DecisionLatency: e.latency.snapshot()}
	sick := adaptive.Mask(e.health.sick.Load())
	for a := range e.bes {
		b := BackendStats{Name: e.s.BackendName(a), Ops: e.ops[a].Load(), Failures: e.failures[a].Load(),
			CopiesIn: e.copiesIn[a].Load(), BytesIn: e.bytesIn[a].Load(),
			Transfer: time.Duration(e.transferNs[a].Load()), Healthy: !sick.Has(a)}
		e.health.mu.Lock()
		if err := e.health.state[a].lastErr; err != nil && sick.Has(a) {
			b.LastError = err.Error()
		}
		e.health.mu.Unlock()
		var bytes int64
		for _, t := range e.residentOn(a) {
			bytes += t.size
		}
		b.ResidentMB = float64(bytes) / 1e6
		st.Backends = append(st.Backends, b)
	}
	return st
}
