package executor

import (
	"errors"
	"fmt"
	"sync"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// errDependency marks queued work that did not run because work it was
// queued after failed: the failure travels down the dependencies, so that
// nothing overwrites the inputs of an op that will be run again.
var errDependency = errors.New("executor: work it depended on failed")

// ownQueue is the queue the Executor gives a backend that does not queue
// work itself (no backends.Queuer): one goroutine runs the backend's
// synchronous calls in the order they were queued, each after the events
// it depends on. It implements backends.Queuer; the Executor hands it
// slices it owns and does not reuse, so it keeps them without copying.
type ownQueue struct {
	be   backends.Backend
	jobs chan *job

	mu   sync.Mutex
	last *job // the most recent job queued: Sync waits for it
	done chan struct{}
}

// job is one call queued on an ownQueue and its Event.
type job struct {
	after []backends.Event
	call  func() (backends.Timing, error)

	fin chan struct{} // closed when tm and err are set
	tm  backends.Timing
	err error
}

// ownQueueDepth is how many calls an ownQueue holds before the caller
// queueing one more waits: enough for several decode steps.
const ownQueueDepth = 4096

func newOwnQueue(be backends.Backend) *ownQueue {
	q := &ownQueue{be: be, jobs: make(chan *job, ownQueueDepth), done: make(chan struct{})}
	go q.work()
	return q
}

// work runs the jobs in order until the queue is closed.
func (q *ownQueue) work() {
	defer close(q.done)
	for j := range q.jobs {
		var err error
		for _, ev := range j.after {
			if _, derr := ev.Wait(); derr != nil {
				err = fmt.Errorf("%w: %w", errDependency, derr)
				break
			}
		}
		if err == nil {
			j.tm, j.err = j.call()
		} else {
			j.err = err
		}
		close(j.fin)
	}
}

// close stops the worker once it has run what is queued.
func (q *ownQueue) close() {
	close(q.jobs)
	<-q.done
}

func (q *ownQueue) push(after []backends.Event, call func() (backends.Timing, error)) *job {
	j := &job{after: after, call: call, fin: make(chan struct{})}
	q.mu.Lock()
	q.last = j
	q.jobs <- j // in queue order: pushes are serialised by mu
	q.mu.Unlock()
	return j
}

// RunAsync implements backends.Queuer.
func (q *ownQueue) RunAsync(s kernels.Spec, in []backends.Buffer, out backends.Buffer, after []backends.Event) (backends.Event, error) {
	return q.push(after, func() (backends.Timing, error) { return q.be.Run(s, in, out) }), nil
}

// WriteAsync implements backends.Queuer.
func (q *ownQueue) WriteAsync(dst backends.Buffer, src []byte, after []backends.Event) (backends.Event, error) {
	return q.push(after, func() (backends.Timing, error) { return q.be.Write(dst, src) }), nil
}

// ReadAsync implements backends.Queuer.
func (q *ownQueue) ReadAsync(dst []byte, src backends.Buffer, after []backends.Event) (backends.Event, error) {
	return q.push(after, func() (backends.Timing, error) { return q.be.Read(dst, src) }), nil
}

// Sync implements backends.Queuer: it waits for the last job queued. The
// Executor reads each job's error through its Event, so Sync reports
// none.
func (q *ownQueue) Sync() error {
	q.mu.Lock()
	j := q.last
	q.mu.Unlock()
	if j == nil {
		return nil
	}
	<-j.fin
	return nil
}

// Done implements backends.Event.
func (j *job) Done() bool {
	select {
	case <-j.fin:
		return true
	default:
		return false
	}
}

// Wait implements backends.Event.
func (j *job) Wait() (backends.Timing, error) {
	<-j.fin
	return j.tm, j.err
}
