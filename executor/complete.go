package executor

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

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
	deps     []*rec           // the queued work it runs after
	after    []backends.Event // their events
	state    atomic.Int32
	observed atomic.Bool // the observer has handled it (Executor.obs)
	ran      atomic.Bool // on an ownQueue: it has run (its Event; ranN)
	ranN     *notifier
	tm       backends.Timing
	err      error

	// The call: an op's output buffer, or a copy's device buffer and its
	// host memory.
	dev  backends.Buffer
	host []byte

	op bool
	// An op: its spec, inputs and output, as the caller gave them, and
	// the device buffers it runs on.
	spec    kernels.Spec
	in      []backends.Buffer
	bufs    []backends.Buffer
	out     *Tensor
	d       adaptive.Decision
	restore bool
	copies  []*rec // the copies of its inputs (their time goes to its trace event)
	failedN int64  // its backend's failures when it was queued (health.failedN)
	predUs  float64
	endAt   int64   // expected completion, ns since the Executor's epoch
	endV    float64 // a simulated device's end of the work (backends.VirtualSpan), µs

	// A copy: its tensor and direction (over backend a's link); a
	// staging copy fills a buffer of its own (dev) that the op reading it
	// frees once it has completed (a weight the cache does not keep).
	t        *Tensor
	toDevice bool
	staging  bool

	before  tensorState // the changed tensor (out, or t) before the change
	cascade bool        // recovery's mark (under the gate's write lock)

	// Storage of the slices above for the common op, so that queueing
	// it allocates one rec: sized for inArrN inputs (ops with more
	// allocate their slices), since every byte of a rec is allocated,
	// zeroed and scanned once per op (BenchmarkExecutorStep).
	depArr   [4]*rec
	afterArr [4]backends.Event
	inArr    [inArrN]backends.Buffer
	bufArr   [inArrN]backends.Buffer
	shapeArr [inArrN]kernels.Shape
	dimArr   [3 * inArrN]int
}

// inArrN is the inputs a rec holds without allocating: every op of the
// catalogue takes at most 3 (Attention: 3 of up to 3 dimensions); only
// Opaque ops may take more.
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
	clear(r.afterArr[:])
	r.deps, r.after = nil, nil
	r.before = tensorState{}
}

// lane is one backend's queue, and for a backends.Queuer the goroutine
// that waits for its work in queue order.
type lane struct {
	q   backends.Queuer
	own *ownQueue // the Executor's queue for a backend without Queuer

	mu    sync.Mutex // serialises enqueueing: watch order is queue order
	watch chan *rec
	last  *rec
	// lastV is the lane's simulated work that ends last: a simulated
	// device's link runs beside its kernels, so it need not be last.
	lastV *rec
	// poke wakes the watcher waiting for simulated work to be Done: the
	// host's virtual clock moves when work is issued or waited for.
	poke chan struct{}
}

// startLanes builds each backend's lane and the goroutines that watch
// them and observe what completes.
func (e *Executor) startLanes() {
	e.epoch = time.Now()
	e.completed = make(chan *rec, ownQueueDepth)
	e.obs, e.ran = newNotifier(), newNotifier()
	groups := map[string]int{}
	for a, be := range e.bes {
		l := &e.lanes[a]
		l.poke = make(chan struct{}, 1)
		if q, ok := be.(backends.Queuer); ok {
			l.q = q
			l.watch = make(chan *rec, ownQueueDepth)
			e.watchers.Add(1)
			go e.watchLane(l)
		} else {
			l.own = newOwnQueue(be, e.completed, e.ran)
		}
		g := len(groups)
		if hg, ok := be.(backends.HardwareGroup); ok {
			name := hg.HardwareGroup()
			if old, seen := groups[name]; seen {
				g = old
			} else {
				groups[name] = g
			}
		} else {
			groups[fmt.Sprintf("\x00%d", a)] = g
		}
		e.groupOf[a] = g
	}
	e.loads = make([]load, len(groups))
	e.observer.Add(1)
	go e.observeQueued()
}

// stopLanes ends the goroutines once everything queued has been observed.
func (e *Executor) stopLanes() {
	for a := range e.bes {
		l := &e.lanes[a]
		if l.own != nil {
			l.own.close()
		} else {
			close(l.watch)
		}
	}
	e.watchers.Wait()
	close(e.completed)
	e.observer.Wait()
}

// watchLane waits for each piece of l's work in queue order and hands it
// to the observer as it completes. Work gathered by a Recorder and not
// yet launched is held, in order, until its gathering is launched: a
// wait would launch it at its first op.
func (e *Executor) watchLane(l *lane) {
	defer e.watchers.Done()
	var pending []*rec // simulated work not yet Done, in queue order
	var held []*rec    // gathered work, from the first not yet launched
	for watch := l.watch; watch != nil || len(pending) > 0 || len(held) > 0; {
		var launched <-chan struct{}
		if len(held) > 0 {
			launched = held[0].ev.(backends.Deferred).Launched()
		}
		select {
		case r, ok := <-watch:
			switch {
			case !ok:
				watch = nil
			case isVirtual(r):
				pending = append(pending, r)
			case len(held) > 0 || !isLaunched(r):
				held = append(held, r)
			default:
				r.tm, r.err = r.ev.Wait()
				e.completed <- r
			}
		case <-launched:
			n := 0
			for n < len(held) && isLaunched(held[n]) {
				r := held[n]
				r.tm, r.err = r.ev.Wait()
				e.completed <- r
				n++
			}
			held = held[n:]
		case <-l.poke:
		}
		if watch == nil && len(held) > 0 && !isLaunched(held[0]) {
			// The lane is closing: nothing will launch the rest.
			_ = held[0].ev.(backends.Deferred).Launch()
		}
		pending = e.completeDone(pending)
	}
}

// isVirtual reports whether r is simulated work, taken once it is Done:
// waiting would advance the simulated host's clock, as a synchronisation
// does.
func isVirtual(r *rec) bool {
	_, ok := r.ev.(backends.VirtualSpan)
	return ok
}

// completeDone hands the simulated work of pending that is Done to the
// observer and returns the rest. Any Done work goes, not only the oldest:
// a simulated device runs copies on its link beside its kernels, so a copy
// queued after a long kernel can end first, and a host waiting for that
// copy (Read) must see it observed (TestVirtualCopyPassesKernel).
func (e *Executor) completeDone(pending []*rec) []*rec {
	kept := pending[:0]
	for _, r := range pending {
		if !r.ev.Done() {
			kept = append(kept, r)
			continue
		}
		if _, end := r.ev.(backends.VirtualSpan).Span(); end > r.endV {
			r.endV = end // gathered work is placed when launched, after it was queued
		}
		maxFloat(&e.doneV, r.endV)
		r.tm, r.err = r.ev.Wait()
		e.completed <- r
	}
	return kept
}

// poke wakes the watchers of simulated work.
func (e *Executor) poke() {
	if !e.virtual.Load() {
		return
	}
	for a := range e.bes {
		select {
		case e.lanes[a].poke <- struct{}{}:
		default:
		}
	}
}

// await waits until r has been observed. For simulated work the host
// waits for it first (Event.Wait), which moves the virtual clock.
func (e *Executor) await(r *rec) {
	launch(r)
	e.hostWait(r)
	e.obs.wait(&r.observed)
}

// hostWait has the host wait for simulated work r (Event.Wait moves the
// virtual clock to its end) and wakes the watchers: r, or work that an
// ownQueue's worker waited for, may be Done with its watcher asleep.
func (e *Executor) hostWait(r *rec) {
	if _, ok := r.ev.(backends.VirtualSpan); ok {
		if !r.ev.Done() {
			_, _ = r.ev.Wait() // its error reaches the observer through the watcher
		}
		e.poke()
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
		if r.failedN == e.health.failedN[r.a].Load() {
			e.healthy(r.a) // no failure of its backend since it was queued
		}
		var xferUs float64
		for _, c := range r.copies {
			// Copies complete before the op that waits for them, but on
			// another lane their watcher may not have taken their Timing
			// yet (c.tm): read it from the event, safe for concurrent use.
			tm, _ := c.ev.Wait()
			xferUs += tm.Micros()
		}
		e.finished(&r.spec, &r.d, r.tm, xferUs)
		e.obs.set(&r.observed)
	}
}

// enqueue queues r on its backend's lane after r's dependencies: on an
// ownQueue, or through the backend's Queuer, handing it to the lane's
// watcher. An error is the backend's refusal to queue it.
func (e *Executor) enqueue(r *rec) error {
	r.after = r.afterArr[:0]
	for _, d := range r.deps {
		r.after = append(r.after, d.ev)
	}
	l := &e.lanes[r.a]
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.own != nil {
		r.ranN = e.ran
		r.ev = r
		e.logAppend(r)
		l.last = r
		l.own.jobs <- r
		return nil
	}
	var ev backends.Event
	var err error
	switch {
	case r.op:
		ev, err = l.q.RunAsync(r.spec, r.bufs, r.dev, r.after)
	case r.toDevice:
		ev, err = l.q.WriteAsync(r.dev, r.host, r.after)
	default:
		ev, err = l.q.ReadAsync(r.host, r.dev, r.after)
	}
	if err != nil {
		return err
	}
	r.ev = ev
	if vs, ok := ev.(backends.VirtualSpan); ok {
		_, r.endV = vs.Span()
		if l.lastV == nil || r.endV >= l.lastV.endV {
			l.lastV = r
		}
		maxFloat(&e.loads[e.groupOf[r.a]].freeV, r.endV)
		e.virtual.Store(true)
	}
	e.logAppend(r)
	l.last = r
	l.watch <- r
	e.poke() // issuing moved the simulated host's clock
	return nil
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
