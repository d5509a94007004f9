package executor

import (
	"context"
	"sync/atomic"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// States of a rec.
const (
	recPending    int32 = iota // queued, not yet handled by the observer
	recSucceeded               // completed; its effects stand
	recFailed                  // failed (or a dependency did); awaiting recovery
	recSuperseded              // failed and handled: re-run, or its output marked lost
)

// rec is one piece of queued work (an op or a copy) the Executor keeps
// until it has completed: what it waits for, where it runs, and the state
// of the tensor it changes from before it, so that a failure can be
// undone and the work run again (Executor.recoverFailed).
type rec struct {
	a        int // the backend whose queue runs it
	ev       backends.Event
	deps     []*rec // the queued work it runs after
	state    atomic.Int32
	observed atomic.Bool // the observer has handled it (Executor.obs)
	ran      atomic.Bool // on an ownQueue: it has run (its Event; ranN)

	// Small fields together, so that they share words (see depArr).
	op       bool    // an op; else a copy
	restore  bool    // an op that recomputes its output's lost version
	toDevice bool    // a copy into a device's copy
	staging  bool    // a copy into a buffer of its own
	cascade  bool    // recovery's mark (under the gate's write lock)
	failedN  int32   // its backend's failures when it was queued (health.failedN, truncated)
	predUs   float32 // the op's predicted duration, µs

	ranN *notifier
	tm   backends.Timing
	err  error

	// The call: an op's output buffer, or a copy's device buffer and its
	// host memory.
	dev  backends.Buffer
	host []byte

	// An op: its spec (never changed: its site's known spec, or its own
	// copy), input and output tensors, and the device buffers it runs
	// on; its decision's Ticket, what Observe reads.
	spec   *kernels.Spec
	in     []*Tensor
	bufs   []backends.Buffer
	out    *Tensor
	tk     adaptive.Ticket
	copies *copyList // the copies of its inputs, nil for none
	endAt  int64     // expected completion, ns since the Executor's epoch
	endV   float64   // a simulated device's end of the work (backends.VirtualSpan), µs

	// A copy: its tensor (over backend a's link, to the device when
	// toDevice); a staging copy fills a buffer of its own (dev) that the
	// op reading it frees once it has completed (a weight the cache does
	// not keep).
	t *Tensor

	before tensorState // the changed tensor (out, or t) before the change
	// lin is an op's output's lineage from before the op, when undoing
	// the op may need it (keptLineage); nil otherwise.
	lin *lineage

	// Storage of the slices above for the common op, so that queueing
	// it allocates one rec: sized for inArrN inputs (ops with more
	// allocate their slices). Rule: a rec fits the allocator's 512-byte
	// size class (TestRecSize). Reason: every byte of a rec is
	// allocated, zeroed and scanned once per op; from 1,000 bytes to 504
	// cut a queued op's host cost by about 30% (BenchmarkExecutorStep).
	depArr [4]*rec
	inArr  [inArrN]*Tensor
	bufArr [inArrN]backends.Buffer
}

// copyList is an op's copies of its inputs: their time goes to its
// trace event, and the op frees their staging buffers. It is allocated
// with the first copy, apart from the rec (most ops need none), and
// holds two without allocating more.
type copyList struct {
	list []*rec
	arr  [2]*rec
}

// addCopy notes c, a copy of one of op r's inputs.
func (r *rec) addCopy(c *rec) {
	if r.copies == nil {
		r.copies = &copyList{}
		r.copies.list = r.copies.arr[:0]
	}
	r.copies.list = append(r.copies.list, c)
}

// copiesOf returns r's copies, in the order they were noted.
func (r *rec) copiesOf() []*rec {
	if r.copies == nil {
		return nil
	}
	return r.copies.list
}

// inArrN is the inputs a rec holds without allocating, of up to 4
// dimensions each: every op of the catalogue takes at most 3 (a
// decoder's attention: [B, heads, S, headDim] each); only Opaque ops may
// take more.
const inArrN = 3

// tensorState is what a rec changes in a tensor's bookkeeping.
type tensorState struct {
	valid   adaptive.Mask
	version uint64
	ready   [locs]*rec
}

// live reports whether later work must be queued after r: it has not
// been seen to succeed, and has not been superseded by its re-run.
func (r *rec) live() bool {
	if r == nil {
		return false
	}
	s := r.state.Load()
	return s == recPending || s == recFailed
}

// dep adds x to the work r runs after, when it is live and not there yet.
func (r *rec) dep(x *rec) {
	if !x.live() || x == r {
		return
	}
	for _, d := range r.deps {
		if d == x {
			return
		}
	}
	if r.deps == nil {
		r.deps = r.depArr[:0]
	}
	r.deps = append(r.deps, x)
}

// forget drops what only recovery reads of r (the work it ran after, the
// tensor's state before it) once recovery can no longer reach it: left,
// each rec kept every older one reachable through them, and a long run
// held all the work it ever queued (BenchmarkExecutorStep's heap).
func (r *rec) forget() {
	clear(r.depArr[:])
	r.deps = nil
	r.before = tensorState{}
	r.lin = nil
}

// await waits until r has been observed. For simulated work the host
// waits for it first (Event.Wait), which moves the virtual clock.
func (e *Executor) await(r *rec) {
	launch(r)
	e.hostWait(r)
	e.obs.wait(&r.observed)
}

// hostWait has the host wait for simulated work r (Event.Wait moves the
// virtual clock to its end) and observes the simulated work Done by then.
func (e *Executor) hostWait(r *rec) {
	if _, ok := r.ev.(backends.VirtualSpan); ok {
		if !r.ev.Done() {
			_, _ = r.ev.Wait() // its error reaches the observer through observeVirtual
		}
		e.observeVirtual()
	}
}

// observeQueued handles completed work in completion order, off the callers'
// path: timings reach the Scheduler and the link model, counters and the
// trace; a failure is left for recovery.
func (e *Executor) observeQueued() {
	defer e.observer.Done()
	for r := range e.completed {
		if r.op {
			e.unload(r)
			r.freeStaged()
		}
		if r.err != nil {
			r.state.Store(recFailed)
			e.pendingFail.Store(true)
			e.obs.set(&r.observed)
			continue
		}
		r.state.Store(recSucceeded)
		if r.tm.Clock == backends.Simulated {
			e.simulated.Or(uint32(adaptive.Backend(r.a)))
		}
		if !r.op {
			e.observeCopy(r.a, r.toDevice, r.t.size, r.tm)
			e.obs.set(&r.observed)
			continue
		}
		if r.failedN == int32(e.health.failedN[r.a].Load()) {
			e.healthy(r.a) // no failure of its backend since it was queued
		}
		var xferUs float64
		for _, c := range r.copiesOf() {
			// Copies complete before the op that waits for them, but on
			// another lane their watcher may not have taken their Timing
			// yet (c.tm): read it from the event, safe for concurrent use.
			tm, _ := c.ev.Wait()
			xferUs += tm.Micros()
		}
		e.finished(r.spec, &r.tk, r.tm, xferUs)
		e.obs.set(&r.observed)
	}
}

// awaitCtx waits until r has been observed or ctx ends.
func (e *Executor) awaitCtx(ctx context.Context, r *rec) error {
	if r.observed.Load() {
		return nil
	}
	launch(r)
	if ctx.Done() == nil {
		e.obs.wait(&r.observed)
		return nil
	}
	ch := make(chan struct{})
	go func() { // ends once r is observed, which the queues guarantee
		e.obs.wait(&r.observed)
		close(ch)
	}()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// logAppend adds r to the log of queued work, dropping the work at its
// head seen to succeed.
func (e *Executor) logAppend(r *rec) {
	e.logMu.Lock()
	for len(e.log) > 0 && e.log[0].state.Load() == recSucceeded {
		e.log[0].forget()
		e.log[0] = nil
		e.log = e.log[1:]
	}
	e.log = append(e.log, r)
	e.logMu.Unlock()
}

// drain waits until every piece of work queued so far has been observed.
func (e *Executor) drain(ctx context.Context) error {
	for a := range e.bes {
		l := &e.lanes[a]
		l.mu.Lock()
		work := [2]*rec{l.last, l.lastV}
		l.mu.Unlock()
		for _, r := range work {
			if r == nil {
				continue
			}
			e.hostWait(r)
			if err := e.awaitCtx(ctx, r); err != nil {
				return err
			}
		}
	}
	return nil
}
