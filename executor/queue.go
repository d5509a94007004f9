package executor

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/adaptsched/adaptsched/backends"
)

// errDependency marks queued work that did not run because work it was
// queued after failed: the failure travels down the dependencies, so that
// nothing overwrites the inputs of an op that will be run again.
var errDependency = errors.New("executor: work it depended on failed")

// ownQueue is the queue the Executor gives a backend that does not queue
// work itself (no backends.Queuer): one goroutine runs the backend's
// synchronous calls in the order they were queued, each after the work
// it depends on (Executor.enqueue), and hands each to the observer as it
// completes. The work's Event is its rec.
type ownQueue struct {
	be       backends.Backend
	jobs     chan *rec
	observer chan<- *rec
	ran      *notifier
	done     chan struct{}
	stop     sync.Once
}

// ownQueueDepth is how many pieces of work a queue holds before the
// caller queueing one more waits: enough for several decode steps.
const ownQueueDepth = 4096

func newOwnQueue(be backends.Backend, observer chan<- *rec, ran *notifier) *ownQueue {
	q := &ownQueue{be: be, jobs: make(chan *rec, ownQueueDepth), observer: observer, ran: ran, done: make(chan struct{})}
	go q.work()
	return q
}

// work runs the queue until it is closed.
func (q *ownQueue) work() {
	defer close(q.done)
	for r := range q.jobs {
		r.tm, r.err = q.run(r)
		q.ran.set(&r.ran)
		q.observer <- r
	}
}

// run waits for r's dependencies, then makes its call.
func (q *ownQueue) run(r *rec) (backends.Timing, error) {
	for _, d := range r.deps {
		if _, err := d.ev.Wait(); err != nil {
			return backends.Timing{}, fmt.Errorf("%w: %w", errDependency, err)
		}
	}
	switch {
	case r.op:
		return q.be.Run(*r.spec, r.bufs, r.dev)
	case r.toDevice:
		return q.be.Write(r.dev, r.host)
	}
	return q.be.Read(r.host, r.dev)
}

// close stops the worker once it has run what is queued.
func (q *ownQueue) close() {
	q.stop.Do(func() { close(q.jobs) })
	<-q.done
}

// Done implements backends.Event for work on an ownQueue.
func (r *rec) Done() bool { return r.ran.Load() }

// Wait implements backends.Event for work on an ownQueue.
func (r *rec) Wait() (backends.Timing, error) {
	r.ranN.wait(&r.ran)
	return r.tm, r.err
}

// notifier wakes the goroutines waiting for a flag of queued work to be
// set (it has run; it has been observed). One condition variable serves
// all the work: waiters are few (a Read, a Sync, a queue waiting for
// another device), and setting a flag nobody waits for takes no lock.
type notifier struct {
	mu      sync.Mutex
	cond    sync.Cond
	waiters atomic.Int32
}

func newNotifier() *notifier {
	n := &notifier{}
	n.cond.L = &n.mu
	return n
}

// wait returns once flag is set.
func (n *notifier) wait(flag *atomic.Bool) {
	if flag.Load() {
		return
	}
	n.waiters.Add(1)
	n.mu.Lock()
	for !flag.Load() {
		n.cond.Wait()
	}
	n.mu.Unlock()
	n.waiters.Add(-1)
}

// set sets flag and wakes its waiters: a waiter counted before it looked
// at the flag holds mu until it waits, so the broadcast cannot miss it.
func (n *notifier) set(flag *atomic.Bool) {
	flag.Store(true)
	if n.waiters.Load() > 0 {
		n.mu.Lock()
		n.cond.Broadcast()
		n.mu.Unlock()
	}
}
