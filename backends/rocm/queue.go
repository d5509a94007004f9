//go:build cgo

package rocm

// Queued work: every op and copy is enqueued on a stream between two
// events from the device's event pool, and its Timing is read once the
// end event has completed, when a query finds it so or at the next
// synchronisation point (Wait, Sync, Close), never right after launch.

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/adaptsched/adaptsched/backends"
)

var (
	_ backends.Queuer = (*Device)(nil)
	_ backends.Event  = (*event)(nil)
)

// event is one op or copy queued on the device. Its fields other than
// done and reported are guarded by the device's mutex until done is set,
// and read-only afterwards.
type event struct {
	d          *Device
	op         string
	stream     uintptr
	start, end uintptr   // from the event pool, returned when retired
	stage      []byte    // pinned staging memory of a copy
	dst        []byte    // a read's destination, filled from stage when retired
	release    []uintptr // device memory freed while queued, pooled when retired
	timing     backends.Timing
	err        error
	done       atomic.Bool
	reported   atomic.Bool
	// A gathered op (graph.go) has no events of its own: gathered is its
	// gathering's Launched, whole the work event of the gathering once
	// launched, which completes its members.
	gathered chan struct{}
	whole    *event
	members  []*event
	kernels  int // a gathering's work event: the kernels it launched
	planFor  int // and the size of gathering they were planned for
}

// Done implements backends.Event: it queries the end event (without
// blocking) and, once complete, retires the work: reads its timing,
// fills a read's destination and returns the events and staging memory
// to their pools.
func (e *event) Done() bool {
	if e.done.Load() {
		return true
	}
	_ = e.d.gated(func() error {
		if w := e.work(); w != nil {
			e.d.poll(w)
		}
		return nil
	})
	return e.done.Load()
}

// work is the event whose completion completes e: e itself, or the
// gathering e belongs to once it has been launched; nil before (under do).
func (e *event) work() *event {
	if e.gathered == nil {
		return e
	}
	return e.whole
}

// Wait implements backends.Event. It blocks in the runtime's event
// synchronisation without holding the device, so other goroutines keep
// enqueuing meanwhile.
func (e *event) Wait() (backends.Timing, error) {
	t, err := e.wait()
	if err != nil {
		e.reported.Store(true)
	}
	return t, err
}

// wait is Wait without marking the error reported (Sync's wait).
func (e *event) wait() (backends.Timing, error) {
	if !e.done.Load() {
		d := e.d
		var end uintptr
		var w *event
		if err := d.gated(func() error {
			if e.done.Load() {
				return nil
			}
			if w = e.work(); w == nil {
				// Waiting for a gathered op launches its gathering.
				err := d.launchGathered()
				if w = e.work(); w == nil {
					return err
				}
			}
			if !w.done.Load() {
				end = w.end
			}
			return nil
		}); err == nil && end != 0 {
			code := d.syncEvent(end)
			_ = d.gated(func() error {
				d.retire(w, fEventSync, code)
				d.trimRetired()
				return nil
			})
		}
		// After Close every event has been retired (Close drains).
	}
	return e.timing, e.err
}

// gated runs f under do unless the device is closed, even once it is
// lost: completing queued work must go on after a sticky error.
func (d *Device) gated(f func() error) error {
	d.gate.RLock()
	defer d.gate.RUnlock()
	if d.closed {
		return ErrClosed
	}
	return d.do(f)
}

// syncEvent blocks until ev has completed and returns the status,
// binding the calling thread to the device but without the device's
// mutex (the runtimes are thread-safe; the mutex only serialises this
// package's bookkeeping). A handle recycled meanwhile only makes the
// wait longer: the retire that follows sees the event done.
func (d *Device) syncEvent(ev uintptr) int {
	d.gate.RLock()
	defer d.gate.RUnlock()
	if d.closed {
		return 0
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if d.ctx != 0 {
		d.s.call(fCtxSetCurrent, d.ctx)
	} else {
		d.s.setDevice(d.opts.Device)
	}
	return d.s.call(fEventSync, ev)
}

// poll queries e's end event and retires e if it has completed (under do).
func (d *Device) poll(e *event) {
	if !e.done.Load() {
		d.retire(e, fEventQuery, d.s.call(fEventQuery, e.end))
	}
}

// retire completes e given the status of call (a query or
// synchronisation) on its end event (under do); notReady leaves it
// queued. The elapsed time is read here, the end event being complete.
func (d *Device) retire(e *event, call fn, code int) {
	if e.done.Load() || code == notReady {
		return
	}
	var err error
	if code != 0 {
		err = d.check(call, code)
	} else {
		ms, c := d.s.eventElapsed(e.start, e.end)
		if err = d.check(fEventElapsed, c); err == nil {
			e.timing = backends.Timing{Duration: time.Duration(float64(ms) * float64(time.Millisecond)), Clock: backends.DeviceEvents}
			copy(e.dst, e.stage)
		}
	}
	d.events = append(d.events, e.start, e.end)
	e.start, e.end = 0, 0
	if e.stage != nil {
		d.putPinned(e.stage)
		e.stage = nil
	}
	d.releaseFreed(e)
	if err != nil {
		e.err = &backends.DeviceError{Backend: d.info.Name, Op: e.op, Err: err}
		if e.members == nil {
			d.failed = append(d.failed, e)
		}
	}
	if e.members != nil && err == nil {
		d.graphStats.DeviceNs += int64(e.timing.Duration)
		d.costs.deviceNs += int64(e.timing.Duration)
		d.costs.deviceKernels += int64(e.kernels)
		d.planner.Ran(e.planFor, float64(e.timing.Duration)/1e3, int64(e.kernels))
	}
	for _, m := range e.members {
		d.releaseFreed(m)
		m.timing = backends.Timing{Clock: backends.Gathered}
		if err != nil {
			m.err = &backends.DeviceError{Backend: d.info.Name, Op: m.op, Err: err}
			d.failed = append(d.failed, m)
		}
		m.done.Store(true)
	}
	e.members = nil
	e.done.Store(true)
}

// releaseFreed returns to the pool the device memory freed while e was
// queued (under do).
func (d *Device) releaseFreed(e *event) {
	for _, p := range e.release {
		d.pool.put(p)
	}
	e.release = nil
}

// retireCompleted retires the queued work that has completed, oldest
// first, stopping at the first that has not (under do).
func (d *Device) retireCompleted() {
	n := 0
	for _, e := range d.inflight {
		d.poll(e)
		if !e.done.Load() {
			break
		}
		n++
	}
	d.inflight = slices.Delete(d.inflight, 0, n)
}

// trimRetired drops the retired work at the head of the queue (under do).
func (d *Device) trimRetired() {
	n := 0
	for n < len(d.inflight) && d.inflight[n].done.Load() {
		n++
	}
	d.inflight = slices.Delete(d.inflight, 0, n)
}

// takeEvent returns an event handle from the pool, creating one when the
// pool is empty (under do).
func (d *Device) takeEvent() (uintptr, error) {
	if n := len(d.events); n > 0 {
		ev := d.events[n-1]
		d.events = d.events[:n-1]
		return ev, nil
	}
	ev, code := d.s.create(fEventCreate)
	return ev, d.check(fEventCreate, code)
}

// enqueue records a start event on stream, runs launch (which enqueues
// the work itself on stream), records the end event and returns the
// work's event (under do). The work first waits, on the device, for the
// last work on another stream that used one of bufs (a copy before the
// kernel reading its buffer, a kernel before the copy reading its output)
// and for the events in after. Each buffer then remembers the work as
// its last user.
func (d *Device) enqueue(op string, stream uintptr, bufs []*buffer, after []*event, launch func() error) (*event, error) {
	// Work that cannot join a gathering launches it first: it may depend
	// on gathered ops, which need their whole's events.
	if err := d.launchGathered(); err != nil {
		return nil, err
	}
	d.retireCompleted()
	if err := d.waitForAll(stream, bufs, after); err != nil {
		return nil, err
	}
	start, err := d.takeEvent()
	if err != nil {
		return nil, err
	}
	end, err := d.takeEvent()
	if err != nil {
		d.events = append(d.events, start)
		return nil, err
	}
	err = d.check(fEventRecord, d.s.eventRecord(start, stream))
	if err == nil {
		err = launch()
	}
	if err == nil {
		err = d.check(fEventRecord, d.s.eventRecord(end, stream))
	}
	if err != nil {
		d.events = append(d.events, start, end)
		return nil, err
	}
	e := &event{d: d, op: op, stream: stream, start: start, end: end}
	for _, b := range bufs {
		b.last = e
	}
	d.inflight = append(d.inflight, e)
	return e, nil
}

// waitFor makes later work on stream wait, on the device, for l: for
// nothing when l is nil, done or on stream; for its gathering's end when
// l is a gathered op (nothing before the gathering is launched: it runs
// ahead of everything queued after it on the compute stream).
func (d *Device) waitFor(stream uintptr, l *event) error {
	if l != nil && l.gathered != nil {
		l = l.whole
	}
	if l == nil || l.done.Load() || l.stream == stream {
		return nil
	}
	if err := d.bind(); err != nil {
		return err
	}
	return d.check(fStreamWait, d.s.streamWaitEvent(stream, l.end))
}

// waitForAll is waitFor for the last users of bufs and the events in
// after.
func (d *Device) waitForAll(stream uintptr, bufs []*buffer, after []*event) error {
	for _, b := range bufs {
		if err := d.waitFor(stream, b.last); err != nil {
			return err
		}
	}
	for _, l := range after {
		if err := d.waitFor(stream, l); err != nil {
			return err
		}
	}
	return nil
}

// awaitForeign waits, on the calling goroutine, for the events in after
// that are not this device's (another backend's work: the host thread
// that enqueues waits, as a CPU op's output must be complete before a
// copy reads it), and returns this device's own, which the device waits
// for itself. It returns the error of the first dependency known to have
// failed: a foreign one, or one of this device's already retired. The
// device's own are appended to own.
func (d *Device) awaitForeign(after []backends.Event, own []*event) ([]*event, error) {
	for i, a := range after {
		var err error
		if a == nil {
			continue // no dependency (backends.Queuer)
		} else if e, ok := a.(*event); ok && e.d == d {
			if e.done.Load() {
				err = e.err
			}
			own = append(own, e)
		} else {
			_, err = a.Wait()
		}
		if err != nil {
			return nil, fmt.Errorf("dependency %d failed: %w", i, err)
		}
	}
	return own, nil
}

// failedEvent returns the event of work that did not run because a
// dependency failed: done, with a DeviceError naming op and wrapping the
// dependency's error, which Sync reports if no Wait does.
func (d *Device) failedEvent(op string, dep error) (backends.Event, error) {
	e := &event{d: d, op: op, err: &backends.DeviceError{Backend: d.info.Name, Op: op, Err: dep}}
	err := d.gated(func() error {
		d.failed = append(d.failed, e)
		return nil
	})
	if err != nil {
		return nil, &backends.DeviceError{Backend: d.info.Name, Op: op, Err: err}
	}
	e.done.Store(true)
	return e, nil
}

// Sync implements backends.Queuer: it waits for every op and copy queued
// so far and returns the first error of queued work that no Wait has
// reported (the others are dropped). After Close it fails with ErrClosed.
func (d *Device) Sync() error {
	// Waiting for the last work queued on each stream is waiting for all;
	// the rest is then retired by queries that find it complete.
	var last [2]*event
	if err := d.gated(func() error {
		_ = d.launchGathered() // a failed launch fails its ops, reported below
		for _, e := range d.inflight {
			if e.stream == d.stream {
				last[0] = e
			} else {
				last[1] = e
			}
		}
		return nil
	}); err != nil {
		return err
	}
	for _, e := range last {
		if e != nil {
			_, _ = e.wait()
		}
	}
	var first error
	err := d.gated(func() error {
		d.retireCompleted()
		first = d.takeFailed()
		return nil
	})
	if err != nil {
		return err
	}
	return first
}

// takeFailed returns the first error of retired work that no Wait has
// reported, and forgets the failed work (under do).
func (d *Device) takeFailed() error {
	failed := d.failed
	d.failed = nil
	for _, e := range failed {
		if !e.reported.Swap(true) {
			return e.err
		}
	}
	return nil
}

// drainQueue waits for all queued work and retires it, then waits for
// both streams (work left by a launch that failed half-way), under do at
// Close. It returns the first unreported error of queued work.
func (d *Device) drainQueue() error {
	_ = d.launchGathered() // a failed launch fails its ops, reported below
	d.gather = nil
	for _, e := range d.inflight {
		if !e.done.Load() {
			d.retire(e, fEventSync, d.s.call(fEventSync, e.end))
		}
	}
	d.inflight = nil
	var errs []error
	for _, st := range []uintptr{d.stream, d.copyStream} {
		if st != 0 {
			if code := d.s.call(fStreamSync, st); code != 0 {
				errs = append(errs, d.check(fStreamSync, code))
			}
		}
	}
	d.dropGraphs()
	return errors.Join(append([]error{d.takeFailed()}, errs...)...)
}
