package cpu

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// workKind says what a queued task does.
type workKind uint8

const (
	workRun workKind = iota
	workWrite
	workRead
)

// task is one piece of queued work: what to run, on which buffers, after
// which events, and the event that reports its completion.
// The buffers' memory is resolved when the task is queued: a buffer
// freed afterwards stays valid for it (its memory is the garbage
// collector's), as GPU memory stays reserved for work already queued.
type task struct {
	kind  workKind
	spec  kernels.Spec
	in    [][]byte
	out   []byte // the kernel's output, or the copy's buffer side
	host  []byte // the copy's host side
	after []backends.Event
	ev    *event // evMem
	// Storage for ev and the slices above when they fit, so that
	// queueing a task allocates it alone, not five objects (executor's
	// BenchmarkExecutorOverhead/queued). Once
	// the task has run it lets go of everything but its event (done).
	evMem    event
	inMem    [3][]byte
	afterMem [4]backends.Event
}

// setAfter sets t.after to a copy of after, in t's storage when it fits.
func (t *task) setAfter(after []backends.Event) {
	if len(after) > len(t.afterMem) {
		t.after = slices.Clone(after)
		return
	}
	t.after = t.afterMem[:copy(t.afterMem[:], after)]
}

// done drops what t refers to once it has run: its event keeps t in
// memory while anyone holds the event, and left, each task would keep
// its inputs' memory and the events it ran after, and through them
// every earlier task, reachable.
func (t *task) done() {
	t.spec = kernels.Spec{}
	t.in, t.out, t.host, t.after = nil, nil, nil, nil
	clear(t.inMem[:])
	clear(t.afterMem[:])
}

// op names the task in its errors: the kernel's op, "write" or "read".
func (t *task) op() string {
	switch t.kind {
	case workWrite:
		return "write"
	case workRead:
		return "read"
	}
	return t.spec.Op.String()
}

// event is the completion of one task of a CPU backend's queue. It is
// part of its task, and waits by a WaitGroup rather than a channel, so
// that it costs no allocation of its own.
type event struct {
	q        *queue
	ended    atomic.Bool    // the task has completed
	wg       sync.WaitGroup // done when the task has completed
	timing   backends.Timing
	err      error
	reported atomic.Bool // a Wait or Sync has returned err
}

var _ backends.Event = (*event)(nil)

// Done implements backends.Event.
func (e *event) Done() bool { return e.ended.Load() }

// Wait implements backends.Event: the Timing is the worker's clock
// around the kernel or copy alone, the wait for dependencies excluded.
func (e *event) Wait() (backends.Timing, error) {
	e.wg.Wait()
	if e.err != nil {
		e.reported.Store(true)
	}
	return e.timing, e.err
}

// queue runs a backend's queued work in order. No goroutine waits on an
// empty queue: the first task queued on an idle queue starts one that
// drains the queue and exits when it is empty, and a synchronous call on
// an idle queue runs its task on the caller's own goroutine. Either way
// one task runs at a time, in queue order.
type queue struct {
	mu      sync.Mutex
	pending []*task
	running bool   // a goroutine is draining the queue, or runs a kernel inline
	last    *event // the last task queued: Sync waits for it
	failed  []*event
	closed  bool
	// inline: a synchronous Run runs its kernel on the caller's goroutine
	// with no task (runInline); idle is signalled when it ends, for Sync
	// and close (its L is mu). bufs is its inputs' memory, reused: one
	// runs at a time.
	inline bool
	idle   sync.Cond
	bufs   [][]byte
}

// enqueue queues t. With inline set and the queue idle, it runs t on the
// calling goroutine before returning; otherwise a draining goroutine runs
// it. It fails with ErrClosed after close.
func (q *queue) enqueue(b *Backend, t *task, inline bool) error {
	t.ev = &t.evMem
	t.ev.q = q
	t.ev.wg.Add(1)
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	q.last = t.ev
	if q.running {
		q.pending = append(q.pending, t)
		q.mu.Unlock()
		return nil
	}
	q.running = true
	if !inline {
		q.pending = append(q.pending, t)
		q.mu.Unlock()
		go q.drain(b)
		return nil
	}
	q.mu.Unlock()
	q.finish(b, t)
	// Work queued meanwhile by other callers goes to a goroutine: the
	// caller returns as soon as its own task is done.
	q.mu.Lock()
	more := len(q.pending) > 0
	q.running = more
	q.mu.Unlock()
	if more {
		go q.drain(b)
	}
	return nil
}

// runInline runs a synchronous Run's kernel on the calling goroutine
// when the queue is idle, with neither task nor event: ran is false when
// the queue is busy (the caller queues the kernel instead). Rule: an
// idle queue's synchronous kernel allocates nothing. Reason: the task,
// its event, the event's channel and the inputs' slice were four
// allocations per op behind every synchronous Executor op on a CPU
// (executor's BenchmarkExecutorOnly). Its failure is the caller's
// alone, as a Wait's is: Sync does not report it again.
func (q *queue) runInline(b *Backend, s kernels.Spec, in []backends.Buffer, out backends.Buffer) (tm backends.Timing, err error, ran bool) {
	if s.Op == kernels.Opaque {
		return tm, nil, false // runTask says why
	}
	q.mu.Lock()
	if q.running || q.closed {
		q.mu.Unlock()
		return tm, nil, false
	}
	q.running, q.inline = true, true
	q.mu.Unlock()
	bufs := q.bufs[:0]
	var o []byte
	for _, buf := range in {
		var d []byte
		if d, err = backends.HostBytes(b, buf); err != nil {
			break
		}
		bufs = append(bufs, d)
	}
	if err == nil {
		o, err = backends.HostBytes(b, out)
	}
	if err == nil && kernels.CheckBuffers(s, bufs, o) == nil {
		start := time.Now()
		if err = b.cpu.Run(s, bufs, o); err == nil {
			tm = backends.Timing{Duration: time.Since(start), Clock: backends.WallClock}
		} else {
			err = &backends.DeviceError{Backend: b.name, Op: s.Op.String(), Err: err}
		}
		ran = true
	}
	clear(bufs)
	q.mu.Lock()
	q.bufs = bufs[:0]
	q.inline = false
	more := len(q.pending) > 0
	q.running = more
	q.idle.Broadcast()
	q.mu.Unlock()
	if more {
		go q.drain(b)
	}
	if !ran {
		return backends.Timing{}, nil, false // bad arguments: runTask says why
	}
	return tm, err, true
}

// waitInline waits for a kernel run inline to end (q.mu held).
func (q *queue) waitInline() {
	for q.inline {
		q.idle.Wait()
	}
}

// drain runs queued tasks until the queue is empty, then lets go of it.
func (q *queue) drain(b *Backend) {
	for {
		q.mu.Lock()
		if len(q.pending) == 0 {
			q.running = false
			q.pending = nil
			q.mu.Unlock()
			return
		}
		t := q.pending[0]
		q.pending[0] = nil
		q.pending = q.pending[1:]
		q.mu.Unlock()
		q.finish(b, t)
	}
}

// finish runs t after its dependencies and completes its event.
func (q *queue) finish(b *Backend, t *task) {
	ev := t.ev
	ev.timing, ev.err = q.run(b, t)
	t.done()
	if ev.err != nil {
		q.mu.Lock()
		q.failed = append(q.failed, ev)
		q.mu.Unlock()
	}
	ev.ended.Store(true)
	ev.wg.Done()
}

// run waits for t's dependencies on other queues (this queue's own are
// done, the queue being in order), then runs t. A failed dependency, of
// this queue or another, fails t without running it.
func (q *queue) run(b *Backend, t *task) (backends.Timing, error) {
	for i, dep := range t.after {
		var err error
		if dep == nil {
			continue // no dependency (backends.Queuer)
		} else if e, ok := dep.(*event); ok && e.q == q {
			err = e.err // done: it ran before t
		} else {
			_, err = dep.Wait()
		}
		if err != nil {
			return backends.Timing{}, &backends.DeviceError{Backend: b.name, Op: t.op(),
				Err: fmt.Errorf("dependency %d failed: %w", i, err)}
		}
	}
	start := time.Now()
	switch t.kind {
	case workWrite:
		copy(t.out, t.host)
	case workRead:
		copy(t.host, t.out)
	default:
		if err := b.cpu.Run(t.spec, t.in, t.out); err != nil {
			return backends.Timing{}, &backends.DeviceError{Backend: b.name, Op: t.op(), Err: err}
		}
	}
	return backends.Timing{Duration: time.Since(start), Clock: backends.WallClock}, nil
}

// sync waits for every task queued so far and returns the first error of
// queued work that no Wait has reported, forgetting the others' errors.
func (q *queue) sync() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	q.waitInline()
	last := q.last
	q.mu.Unlock()
	return q.await(last)
}

// await waits for last and collects the unreported errors of the tasks
// completed so far.
func (q *queue) await(last *event) error {
	if last != nil {
		last.wg.Wait()
	}
	q.mu.Lock()
	failed := q.failed
	q.failed = nil
	q.mu.Unlock()
	for _, e := range failed {
		if !e.reported.Swap(true) {
			return e.err
		}
	}
	return nil
}

// close refuses further work and waits for the work already queued. It
// returns the first error of queued work that no Wait has reported.
func (q *queue) close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	q.waitInline()
	last := q.last
	q.mu.Unlock()
	return q.await(last)
}

var (
	_ backends.Queuer        = (*Backend)(nil)
	_ backends.HardwareGroup = (*Backend)(nil)
)

// HardwareGroup implements backends.HardwareGroup: every CPU backend of
// the process runs on the host's cores, "cpu" and "cpu1" alike.
func (b *Backend) HardwareGroup() string { return "host" }

// RunAsync implements backends.Queuer: s runs on the backend's queue
// after the events in after (of any backend). Bad arguments (an invalid
// or Opaque op, a foreign or freed buffer, wrong sizes) fail here,
// at once; failures of the kernel or of a dependency come from the
// event's Wait, and from Sync.
func (b *Backend) RunAsync(s kernels.Spec, in []backends.Buffer, out backends.Buffer, after []backends.Event) (backends.Event, error) {
	t, err := b.runTask(s, in, out, after)
	if err != nil {
		return nil, err
	}
	if err := b.q.enqueue(b, t, false); err != nil {
		return nil, &backends.DeviceError{Backend: b.name, Op: s.Op.String(), Err: err}
	}
	return t.ev, nil
}

// WriteAsync implements backends.Queuer: src is copied into dst on the
// backend's queue; src must stay unchanged until the event is done.
func (b *Backend) WriteAsync(dst backends.Buffer, src []byte, after []backends.Event) (backends.Event, error) {
	return b.copyAsync(workWrite, dst, src, after, false)
}

// ReadAsync implements backends.Queuer: src is copied into dst on the
// backend's queue.
func (b *Backend) ReadAsync(dst []byte, src backends.Buffer, after []backends.Event) (backends.Event, error) {
	return b.copyAsync(workRead, src, dst, after, false)
}

// Sync implements backends.Queuer. After Close it fails with ErrClosed.
func (b *Backend) Sync() error { return b.q.sync() }

// runTask checks a kernel's arguments and returns its task.
func (b *Backend) runTask(s kernels.Spec, in []backends.Buffer, out backends.Buffer, after []backends.Event) (*task, error) {
	fail := func(err error) (*task, error) {
		return nil, &backends.DeviceError{Backend: b.name, Op: s.Op.String(), Err: err}
	}
	if s.Op == kernels.Opaque {
		return fail(fmt.Errorf("%w: %q has no kernel", kernels.ErrNotExecutable, s.Params.Name))
	}
	t := &task{kind: workRun, spec: s}
	bufs := t.inMem[:0]
	if len(in) > len(t.inMem) {
		bufs = make([][]byte, 0, len(in))
	}
	bufs = bufs[:len(in)]
	for i, buf := range in {
		d, err := backends.HostBytes(b, buf)
		if err != nil {
			return fail(fmt.Errorf("input %d: %w", i, err))
		}
		bufs[i] = d
	}
	o, err := backends.HostBytes(b, out)
	if err != nil {
		return fail(fmt.Errorf("output: %w", err))
	}
	if err := kernels.CheckBuffers(s, bufs, o); err != nil {
		return fail(err)
	}
	t.in, t.out = bufs, o
	t.setAfter(after)
	return t, nil
}

// copyAsync checks a copy's arguments and queues it.
func (b *Backend) copyAsync(kind workKind, buf backends.Buffer, host []byte, after []backends.Event, inline bool) (*event, error) {
	t := &task{kind: kind, host: host}
	t.setAfter(after)
	d, err := backends.HostBytes(b, buf)
	if err == nil && len(d) != len(host) {
		err = fmt.Errorf("%w: buffer of %d bytes, host memory of %d", kernels.ErrBufferSize, len(d), len(host))
	}
	if err == nil {
		t.out = d
		err = b.q.enqueue(b, t, inline)
	}
	if err != nil {
		return nil, &backends.DeviceError{Backend: b.name, Op: t.op(), Err: err}
	}
	return t.ev, nil
}
