package executor

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/adaptsched/adaptsched/backends"
)

// lane is one backend's queue, and for a backends.Queuer the goroutine
// that waits for its work in queue order (watchLane).
type lane struct {
	q   backends.Queuer
	own *ownQueue // the Executor's queue for a backend without Queuer

	mu sync.Mutex // serialises enqueueing: watch order is queue order
	// queued is the work enqueued and not yet taken by the watcher, in
	// queue order; the watcher takes it all at once. Rule: enqueueing
	// wakes the watcher only when it waits for work (idle), not while
	// it waits for a gathering to be launched or for earlier work. Why:
	// a wake-up per op (a channel send to a parked goroutine) was a
	// tenth of a gathered op's host time (BenchmarkExecutorStep), and
	// nothing can complete a gathered op before its gathering launches.
	queued  []*rec
	idle    bool
	closing bool      // stopLanes: no more work comes
	room    sync.Cond // on mu: an enqueuer waits while queued is full
	last    *rec
	// lastV is the lane's simulated work that ends last: a simulated
	// device's link runs beside its kernels, so it need not be last.
	lastV *rec
	// wake wakes the watcher: work for an idle watcher, or the close.
	// Simulated work never reaches the watcher (observeVirtual).
	wake chan struct{}
	// after is enqueue's storage of the events a call runs after (on mu):
	// a Queuer keeps no reference to them (backends.Queuer).
	after [4]backends.Event
}

// laneDepth is how much work a lane holds not yet taken by its watcher
// before the caller queueing more waits: as an ownQueue's.
const laneDepth = ownQueueDepth

// signal wakes l's watcher if it sleeps.
func (l *lane) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
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
		l.wake = make(chan struct{}, 1)
		l.room.L = &l.mu
		if q, ok := be.(backends.Queuer); ok {
			l.q = q
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
	e.endVirtual()
	for a := range e.bes {
		l := &e.lanes[a]
		if l.own != nil {
			l.own.close()
			continue
		}
		l.mu.Lock()
		l.closing = true
		l.mu.Unlock()
		l.signal()
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
	var batch []*rec // work taken from l.queued
	var held []*rec  // gathered work, from the first not yet launched
	for {
		l.mu.Lock()
		batch, l.queued = l.queued, batch[:0]
		closing := l.closing
		l.idle = false
		l.room.Broadcast()
		l.mu.Unlock()
		for i, r := range batch {
			switch {
			case len(held) > 0 || !isLaunched(r):
				held = append(held, r)
			default:
				r.tm, r.err = r.ev.Wait()
				e.completed <- r
			}
			batch[i] = nil
		}
		held = e.completeLaunched(held)
		if closing && len(held) > 0 && !isLaunched(held[0]) {
			// The lane is closing: nothing will launch the rest.
			_ = held[0].ev.(backends.Deferred).Launch()
		}
		if closing && len(batch) == 0 && len(held) == 0 {
			return
		}
		var launched <-chan struct{}
		if len(held) > 0 {
			launched = held[0].ev.(backends.Deferred).Launched()
		}
		l.mu.Lock()
		if (len(held) == 0 && len(l.queued) > 0) || len(l.queued) >= laneDepth || l.closing != closing {
			l.mu.Unlock()
			continue
		}
		l.idle = len(held) == 0 // with work held, what comes waits behind it
		l.mu.Unlock()
		select {
		case <-launched:
		case <-l.wake:
		}
	}
}

// completeLaunched hands the work at the head of held whose gathering has
// been launched to the observer, in order, and returns the rest.
func (e *Executor) completeLaunched(held []*rec) []*rec {
	n := 0
	for n < len(held) && isLaunched(held[n]) {
		r := held[n]
		r.tm, r.err = r.ev.Wait()
		e.completed <- r
		held[n] = nil
		n++
	}
	if n == len(held) {
		return held[:0]
	}
	return held[n:]
}

// observeVirtual hands the simulated work (backends.VirtualSpan) that is
// Done by the simulated host's clock to the observer, in the order it
// ended (queue order among equal ends), and waits until it is observed.
// The host's thread calls it before each decision and after each wait,
// where the virtual clock stands still: a decision then sees what ended
// before it on the virtual clock and nothing else, however the process's
// goroutines run, so a simulated run repeats exactly
// (TestSimulatedRunRepeats). Any Done work goes, not only the oldest: a
// simulated device runs copies on its link beside its kernels, so a copy
// queued after a long kernel can end first (TestVirtualCopyPassesKernel).
func (e *Executor) observeVirtual() {
	e.virtMu.Lock()
	done, kept := e.virtDone[:0], e.virt[:0]
	for _, r := range e.virt {
		if !r.ev.Done() {
			kept = append(kept, r)
			continue
		}
		if _, end := r.ev.(backends.VirtualSpan).Span(); end > r.endV {
			r.endV = end // gathered work is placed when launched, after it was queued
		}
		done = append(done, r)
	}
	clear(e.virt[len(kept):])
	e.virt = kept
	if len(done) == 0 {
		e.virtMu.Unlock()
		return
	}
	slices.SortStableFunc(done, func(a, b *rec) int { return cmp.Compare(a.endV, b.endV) })
	for _, r := range done {
		maxFloat(&e.doneV, r.endV)
		r.tm, r.err = r.ev.Wait()
		e.completed <- r
	}
	last := done[len(done)-1]
	clear(done)
	e.virtDone = done[:0]
	e.virtMu.Unlock()
	e.obs.wait(&last.observed) // the observer takes work in the order it was sent
}

// endVirtual has the host wait for the simulated work still queued (at
// Close, after settle has waited for it all, normally none) and observes it.
func (e *Executor) endVirtual() {
	e.virtMu.Lock()
	rest := slices.Clone(e.virt)
	e.virtMu.Unlock()
	for _, r := range rest {
		launch(r)
		_, _ = r.ev.Wait() // its error reaches the observer through observeVirtual
	}
	e.observeVirtual()
}

// enqueue queues r on its backend's lane after r's dependencies: on an
// ownQueue, or through the backend's Queuer, handing it to the lane's
// watcher. An error is the backend's refusal to queue it.
func (e *Executor) enqueue(r *rec) error {
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
	for len(l.queued) >= laneDepth {
		l.signal() // the watcher takes work even behind a gathering
		l.room.Wait()
	}
	after := l.after[:0] // the deps' events, in the lane's storage when they fit
	for _, d := range r.deps {
		after = append(after, d.ev)
	}
	var ev backends.Event
	var err error
	switch {
	case r.op:
		ev, err = l.q.RunAsync(*r.spec, r.bufs, r.dev, after)
	case r.toDevice:
		ev, err = l.q.WriteAsync(r.dev, r.host, after)
	default:
		ev, err = l.q.ReadAsync(r.host, r.dev, after)
	}
	clear(l.after[:]) // holds no event past the call
	if err != nil {
		return err
	}
	r.ev = ev
	vs, virtual := ev.(backends.VirtualSpan)
	if virtual {
		_, r.endV = vs.Span()
		if l.lastV == nil || r.endV >= l.lastV.endV {
			l.lastV = r
		}
		maxFloat(&e.loads[e.groupOf[r.a]].freeV, r.endV)
		e.virtual.Store(true)
	}
	e.logAppend(r)
	l.last = r
	if virtual { // observed by the host's thread (observeVirtual)
		e.virtMu.Lock()
		e.virt = append(e.virt, r)
		e.virtMu.Unlock()
		return nil
	}
	l.queued = append(l.queued, r)
	if l.idle {
		l.idle = false
		l.signal()
	}
	return nil
}
