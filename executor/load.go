package executor

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/adaptsched/adaptsched/adaptive"
)

// load is the expected occupancy of one hardware group (backends that
// share hardware share one): the predicted µs of its queued work, and
// when it is expected to be free (StarPU dmda's expected finish time).
type load struct {
	mu       sync.Mutex
	inflight int
	pendUs   float64
	freeAt   atomic.Int64 // ns since the Executor's epoch
	// freeV is the latest end of the group's simulated work on its
	// virtual clock (µs, as float64 bits; 0: none): simulated devices
	// know when queued work ends, and their queues are priced with it.
	freeV atomic.Uint64
}

// since is the time since the Executor's epoch, in ns.
func (e *Executor) since() int64 { return int64(time.Since(e.epoch)) }

// queueWaits fills res.QueueUs: for each backend, how long after the op's
// inputs are expected ready (readyAt, ns since the epoch; readyV on the
// simulated devices' virtual clock, or the simulated host's time if
// later) its hardware is expected to be busy
// still, beyond the least of these waits. A backend whose timings are
// simulated but whose work has no virtual span is not priced: the wall
// clock says nothing of its queue.
func (e *Executor) queueWaits(res *adaptive.Residency, readyAt int64, readyV float64) {
	sim := adaptive.Mask(e.simulated.Load())
	if e.virtual.Load() {
		readyV = max(readyV, e.virtualNow())
	}
	for a := range e.bes {
		l := &e.loads[e.groupOf[a]]
		if v := math.Float64frombits(l.freeV.Load()); v > 0 {
			if w := v - readyV; w > 0 {
				res.QueueUs[a] = float32(w)
			}
			continue
		}
		if sim.Has(a) {
			continue
		}
		if w := l.freeAt.Load() - readyAt; w > 0 {
			res.QueueUs[a] = float32(float64(w) / 1e3)
		}
	}
	// Only the waits beyond the least one tell the backends apart: a wait
	// that all share delays the op wherever it runs, and added to every
	// arm it would only dilute the hysteresis's relative margin.
	least := res.QueueUs[0]
	for a := range e.bes {
		least = min(least, res.QueueUs[a])
	}
	if least > 0 {
		for a := range e.bes {
			res.QueueUs[a] -= least
		}
	}
}

// virtualNow returns a lower bound of the simulated host's clock: the
// latest end of simulated work that is Done (asking never moves the
// clock). Work that waits past it waits for its device; a device whose
// queue ended before it is idle, however late its last work ended
// (under a serial execution model, always).
func (e *Executor) virtualNow() float64 {
	now := math.Float64frombits(e.doneV.Load())
	for a := range e.bes {
		l := &e.lanes[a]
		l.mu.Lock()
		r := l.last
		l.mu.Unlock()
		if r != nil && r.endV > now && r.ev.Done() {
			now = r.endV
		}
	}
	maxFloat(&e.doneV, now)
	return now
}

// maxFloat raises the float64 in bits v to x.
func maxFloat(v *atomic.Uint64, x float64) {
	for {
		old := v.Load()
		if math.Float64frombits(old) >= x || v.CompareAndSwap(old, math.Float64bits(x)) {
			return
		}
	}
}

// reserve books r's predicted µs on its backend's hardware group: it
// starts when the group is free and its inputs are ready, and the group
// is busy until it ends. readyAt, read from the clock when the op was
// decided (decideOp), stands for now: the op is queued within a µs of
// it, and a clock read costs a tenth of the Executor's own work per op.
func (e *Executor) reserve(r *rec, readyAt int64) {
	l := &e.loads[e.groupOf[r.a]]
	l.mu.Lock()
	start := max(l.freeAt.Load(), readyAt)
	r.endAt = start + int64(float64(r.predUs)*1e3)
	l.freeAt.Store(r.endAt)
	l.pendUs += float64(r.predUs)
	l.inflight++
	l.mu.Unlock()
}

// unload ends r's booking: the group is expected free once the predicted
// µs of its remaining work have passed, from now (dmda's correction on
// completion).
func (e *Executor) unload(r *rec) {
	l := &e.loads[e.groupOf[r.a]]
	l.mu.Lock()
	l.inflight--
	l.pendUs -= float64(r.predUs)
	if l.inflight <= 0 {
		l.inflight, l.pendUs = 0, 0
	}
	l.freeAt.Store(e.since() + int64(l.pendUs*1e3))
	l.mu.Unlock()
}
