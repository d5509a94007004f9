package sim

import (
	"fmt"
	"sync/atomic"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

var (
	_ backends.Queuer      = (*Device)(nil)
	_ backends.Event       = (*work)(nil)
	_ backends.VirtualSpan = (*work)(nil)
)

// work is the Event of one op or copy queued on a simulated device. Its
// result is computed when it is queued (its inputs, queued earlier, are
// final by then); its time is virtual, on the device's Timeline.
type work struct {
	dev        *Device // the device it was queued on
	tl         *Timeline
	op         string  // what its errors name: the op, "write" or "read"
	lane       int     // its lane on tl
	start, end float64 // µs on tl
	syncUs     float64 // what the host pays to resume after waiting for it
	t          backends.Timing
	err        error                                // failed when queued
	lost       atomic.Pointer[backends.DeviceError] // failed by its device's loss, or a root's (Device.lose)
	reported   atomic.Bool                          // Wait returned its error, or Sync did
	gathered   *gathered                            // a gathered op's (gather.go); nil for work placed when queued
	// roots is the work of other devices with a DeviceLost event that the
	// work's queue waits for, directly or through the work it follows,
	// and that had not ended when it was placed; dependents is the work
	// whose roots hold this work. Both are set under its Timeline's lock
	// (Timeline.enqueueWork), which Device.lose holds while it fails the
	// dependents of lost work.
	roots, dependents []*work
	// ready, waits and durUs placed the work on its lane (its start is
	// afterWaits(max(ready, the lane's end), waits)), kept while it is
	// held there (lane.held): a loss of work before it moves it, under
	// the Timeline's lock, which its start and end are read under.
	ready, durUs float64
	waits        []Waited
}

// failure returns the work's error: its failure when queued, or its
// device's loss before it ended.
func (w *work) failure() error {
	if w.err != nil {
		return w.err
	}
	if e := w.lost.Load(); e != nil {
		return e
	}
	return nil
}

// gone reports whether the work will never end: its device, or that of
// work it waits for, was lost first.
func (w *work) gone() bool { return w.lost.Load() != nil }

// Done implements backends.Event: the host's clock has reached the work's
// end (the host waited for it or for later work), or the work failed
// (when it was queued, or its device was lost before it ended). Polling
// Done never advances the clock: an observer that must not hold the host
// up takes the timings of work that is Done.
func (w *work) Done() bool { return w.failure() != nil || w.placed() && w.tl.ended(w) }

// Wait implements backends.Event: the host waits for the work; when it
// had not ended by the host's clock, the host resumes at its end plus
// the profile's SyncUs (Timeline.Wait). Work that failed costs no wait.
func (w *work) Wait() (backends.Timing, error) {
	if err := w.failure(); err == nil {
		w.place()
		w.tl.waitFor(w)
	}
	if err := w.failure(); err != nil { // failed, or lost while placed
		w.reported.Store(true)
		return backends.Timing{}, err
	}
	return w.t, nil
}

// Span implements backends.VirtualSpan: zero for a gathered op not yet
// launched.
func (w *work) Span() (startUs, endUs float64) {
	if !w.placed() {
		return 0, 0
	}
	return w.span()
}

// span returns the start and end of placed work w, which a loss of work
// before it on its lane may have moved (lane.replace).
func (w *work) span() (startUs, endUs float64) {
	w.tl.mu.Lock()
	defer w.tl.mu.Unlock()
	return w.start, w.end
}

// afterUs returns when the work in after has ended, for work to queue on
// d's lane: the latest end of the simulated events but that of d's work
// on lane, which the lane's order keeps before it (Timeline.enqueueWork);
// events of other backends are waited for (their time is not the
// Timeline's). It returns the first failure among them: work
// queued after failed work does not run; and the candidates for the
// roots of the work to queue (work.roots), which may fail it later. Work
// gathered on d and not yet launched is followed in its lane's order: an
// op gathered after it joins its gathering or a later one, launched after
// it; an op placed at once waits in enqueue for a launch under way; a
// copy had it launched first (launchFirst). Other gathered work is
// launched first.
//
// Rule: a GPU's host waits for another device's work that it depends on
// (Timeline.Wait: its end, plus that device's SyncUs where it had not
// ended) before it issues the op or copy; a CPU's queue waits for it
// itself. Reason: backends/rocm's RunAsync, WriteAsync and ReadAsync wait
// on the calling thread for events that are not their device's
// (awaitForeign), while backends/cpu's workers wait for their
// dependencies. Waited for on the lane alone, a GPU op after a CPU op
// was issued while the CPU ran, and infer's auto on sim:cpu2 with
// sim:igpu read 1.42× the GPU alone at batch 1, a handoff no real run
// could make (TestGPUWaitsForOtherDevicesOnHost). The work a CPU's queue
// waits for is returned in waits, in order, for Timeline.EnqueueWaiting:
// the worker pays its resume after it (TestCPUWaitsForGPUResumes).
//
// Rule: a CPU's work waiting for work that its device's loss fails
// later fails too, without running (Timeline.enqueueWork, Device.lose).
// Reason: backends/cpu's worker fails a task whose dependency's Wait
// fails, as a lost GPU's does; the simulated op succeeded, the Executor
// counted and observed it, and the CPU's queue and the host waited for
// it (TestLostDependencyFailsCPUWork, TestLostInputFailsCPUOp).
func (d *Device) afterUs(after []backends.Event, lane int) (end float64, waits []Waited, roots []*work, err error) {
	for _, e := range after {
		if e == nil {
			continue
		}
		if w, ok := e.(*work); ok {
			if !w.placed() && w.failure() == nil {
				if w.gathered.dev == d {
					continue
				}
				w.place()
			}
			if d.prof.Kind == backends.GPU && w.dev != d && w.failure() == nil {
				w.tl.waitFor(w) // the host waits, as rocm's awaitForeign
			}
			if err := w.failure(); err != nil {
				return 0, nil, nil, fmt.Errorf("%w: %w", ErrDependency, err)
			}
			_, wEnd := w.span()
			switch {
			case w.dev == d && w.lane == lane: // before it on the lane (Timeline.enqueueWork)
			case w.dev == d || d.prof.Kind == backends.GPU:
				end = max(end, wEnd)
			default: // the CPU's worker waits, as backends/cpu's
				waits = append(waits, Waited{EndUs: wEnd, SyncUs: w.syncUs})
				if w.dev.losable {
					roots = append(roots, w)
				}
			}
			roots = append(roots, w.roots...)
			continue
		}
		if v, ok := e.(backends.VirtualSpan); ok {
			_, t := v.Span()
			end = max(end, t)
		}
		if !e.Done() {
			if _, err := e.Wait(); err != nil {
				return 0, nil, nil, fmt.Errorf("%w: %w", ErrDependency, err)
			}
		}
	}
	return end, waits, roots, nil
}

// enqueue puts us of op's work on lane l after afterUs and the work its
// queue waits for (Timeline.EnqueueWaiting), and returns its event; on a
// device already lost, or after roots of which one is, the event of its
// failure.
//
// Rule: work placed at once waits for a launch of d's gathered work under
// way. Reason: afterUs leaves out a dependency gathered on d, which the
// lane's order keeps before the work; a Flush on another goroutine that
// had taken the gathering but not yet placed it let an op that found no
// gathering take the lane first (TestGatheredDependencyUnderFlush).
func (d *Device) enqueue(op string, l int, afterUs float64, waits []Waited, roots []*work, us float64) *work {
	d.launching.Lock()
	defer d.launching.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lostErr != nil {
		return d.failedLocked(d.fail(op, d.lostErr))
	}
	w := &work{dev: d, tl: d.tl, op: op, lane: l, syncUs: d.prof.SyncUs,
		t: backends.Timing{Duration: micros(us), Clock: backends.Simulated}}
	if err := d.tl.enqueueWork(w, d.prof.IssueUs, afterUs, waits, roots, us); err != nil {
		return d.failedLocked(d.fail(op, fmt.Errorf("%w: %w", ErrDependency, err)))
	}
	d.admit(w)
	return w
}

// failedWork is the event of queued work that failed: Done at once, its
// error reported by Wait or by the next Sync.
func (d *Device) failedWork(err error) *work {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.failedLocked(err)
}

// failedLocked is failedWork with d.mu held.
func (d *Device) failedLocked(err error) *work {
	w := &work{dev: d, tl: d.tl, err: err}
	kept := d.failed[:0]
	for _, f := range d.failed { // those a Wait reported are done with
		if !f.reported.Load() {
			kept = append(kept, f)
		}
	}
	d.failed = append(kept, w)
	return w
}

// RunAsync implements backends.Queuer: it checks the buffers (an error
// here is returned at once), computes the result with kernels.Reference
// unless WithSkipCompute was set, and queues the op's modelled duration
// (Profile.OpUs of the Timeline's model, with noise, spikes, warm-up and
// the scheduled events) on the device's compute lane after the work in
// after. An injected failure is the failure of the queued work: Wait and
// Sync report it. Every call counts as one op for the scheduled events.
func (d *Device) RunAsync(s kernels.Spec, in []backends.Buffer, out backends.Buffer, after []backends.Event) (backends.Event, error) {
	op := s.Op.String()
	if err := d.Supports(s); err != nil {
		return nil, d.fail(op, err)
	}
	ins := make([][]byte, len(in))
	for i, b := range in {
		var err error
		if ins[i], err = d.bytesOf(b); err != nil {
			return nil, d.fail(op, fmt.Errorf("input %d: %w", i, err))
		}
	}
	ob, err := d.bytesOf(out)
	if err != nil {
		return nil, d.fail(op, fmt.Errorf("output: %w", err))
	}
	if err := kernels.CheckBuffers(s, ins, ob); err != nil {
		return nil, d.fail(op, err)
	}
	ready, waits, roots, err := d.afterUs(after, d.lanes[0])
	if err != nil {
		return d.failedWork(d.fail(op, err)), nil
	}
	d.mu.Lock()
	gather := d.gather != nil
	i := d.runs
	d.runs++
	err = d.lost(i)
	if err == nil {
		err = d.injected(i, false)
	}
	if err != nil {
		d.mu.Unlock()
		d.lose()
		return d.failedWork(d.fail(op, err)), nil
	}
	key := KernelKey(s)
	first := !d.seen[key] // the kernel's first run (Profile.WarmupFactor)
	d.seen[key] = true
	compute, _ := Slowdown(d.opt.events, i)
	us := d.prof.sample(d.rng, d.prof.OpUs(s, d.tl.Model())*compute, first)
	d.mu.Unlock()
	if !d.opt.skipCompute {
		if err := kernels.Reference(s, ins, ob); err != nil {
			return d.failedWork(d.fail(op, err)), nil
		}
	}
	if gather { // a GPU: its host waited for other devices' work
		return d.gatherWork(op, d.lanes[0], ready, us), nil
	}
	return d.enqueue(op, d.lanes[0], ready, waits, roots, us), nil
}

// Run implements backends.Backend: RunAsync, then Wait.
func (d *Device) Run(s kernels.Spec, in []backends.Buffer, out backends.Buffer) (backends.Timing, error) {
	ev, err := d.RunAsync(s, in, out, nil)
	if err != nil {
		return backends.Timing{}, err
	}
	return ev.Wait()
}

// copyLane returns the lane copies occupy: the link, or the compute
// queue of a device that shares host memory (a memcpy).
func (d *Device) copyLane() int { return d.lanes[len(d.lanes)-1] }

// copyAsync queues a copy of n bytes after after, once check passed.
//
// Rule: a GPU's copy of no bytes is done when it is queued, once the host
// has waited for other devices' work it follows: no issue, nothing on the
// link or the queue, nothing gathered launched. Reason: backends/rocm's
// copyAsync returns a done event for an empty buffer without calling the
// runtime; backends/cpu queues one as a task, which the general path
// charges its issue and no time (TestZeroByteCopy).
func (d *Device) copyAsync(what string, n int64, after []backends.Event, move func()) (backends.Event, error) {
	if n == 0 && d.prof.Kind == backends.GPU {
		return d.emptyCopy(what, after), nil
	}
	d.launchFirst()
	ready, waits, roots, err := d.afterUs(after, d.copyLane())
	if err != nil {
		return d.failedWork(d.fail(what, err)), nil
	}
	d.mu.Lock()
	err = d.lost(d.runs)
	var us float64
	if err == nil {
		us = float64(d.transfer(n).Duration) / 1e3
	}
	d.mu.Unlock()
	if err != nil {
		d.lose()
		return d.failedWork(d.fail(what, err)), nil
	}
	move()
	return d.enqueue(what, d.copyLane(), ready, waits, roots, us), nil
}

// emptyCopy is copyAsync's copy of no bytes on a GPU: an event done now.
func (d *Device) emptyCopy(what string, after []backends.Event) *work {
	if _, _, _, err := d.afterUs(after, d.copyLane()); err != nil {
		return d.failedWork(d.fail(what, err))
	}
	d.mu.Lock()
	err := d.lost(d.runs)
	d.mu.Unlock()
	if err != nil {
		d.lose()
		return d.failedWork(d.fail(what, err))
	}
	now := d.tl.HostUs()
	return &work{dev: d, tl: d.tl, start: now, end: now, t: backends.Timing{Clock: backends.Simulated}}
}

// WriteAsync implements backends.Queuer: the copy occupies the device's
// link (the time of Profile.LinkUs), or its queue when it shares host
// memory (a memcpy at its bandwidth); a GPU's copy of no bytes occupies
// neither and is done at once.
func (d *Device) WriteAsync(dst backends.Buffer, src []byte, after []backends.Event) (backends.Event, error) {
	b, err := d.bytesOf(dst)
	if err != nil {
		return nil, d.fail("write", err)
	}
	if len(b) != len(src) {
		return nil, d.fail("write", fmt.Errorf("%w: %d bytes into a buffer of %d", kernels.ErrBufferSize, len(src), len(b)))
	}
	return d.copyAsync("write", int64(len(src)), after, func() { copy(b, src) })
}

// ReadAsync implements backends.Queuer, as WriteAsync the other way.
func (d *Device) ReadAsync(dst []byte, src backends.Buffer, after []backends.Event) (backends.Event, error) {
	b, err := d.bytesOf(src)
	if err != nil {
		return nil, d.fail("read", err)
	}
	if len(b) != len(dst) {
		return nil, d.fail("read", fmt.Errorf("%w: buffer of %d bytes into %d", kernels.ErrBufferSize, len(b), len(dst)))
	}
	return d.copyAsync("read", int64(len(dst)), after, func() { copy(dst, b) })
}

// Write implements backends.Backend: WriteAsync, then Wait.
func (d *Device) Write(dst backends.Buffer, src []byte) (backends.Timing, error) {
	ev, err := d.WriteAsync(dst, src, nil)
	if err != nil {
		return backends.Timing{}, err
	}
	return ev.Wait()
}

// Read implements backends.Backend: ReadAsync, then Wait.
func (d *Device) Read(dst []byte, src backends.Buffer) (backends.Timing, error) {
	ev, err := d.ReadAsync(dst, src, nil)
	if err != nil {
		return backends.Timing{}, err
	}
	return ev.Wait()
}

// Sync implements backends.Queuer: the host waits for everything queued
// on the device (paying SyncUs when it had not all ended), and gets the
// first failure of queued work that no Wait reported.
func (d *Device) Sync() error {
	d.launchFirst()
	d.tl.WaitLanes(d.prof.SyncUs, d.lanes...)
	d.mu.Lock()
	now, kept := d.tl.HostUs(), d.pending[:0]
	for _, w := range d.pending {
		if !d.settled(w, now) {
			kept = append(kept, w)
		}
	}
	clear(d.pending[len(kept):])
	d.pending = kept
	failed := d.failed
	d.failed = nil
	d.mu.Unlock()
	for _, w := range failed {
		if !w.reported.Swap(true) {
			return w.failure()
		}
	}
	return nil
}
