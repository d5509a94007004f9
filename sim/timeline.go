package sim

import (
	"fmt"
	"slices"
	"sync"
)

// ExecModel is how a Timeline charges the host and the devices for work.
type ExecModel uint8

// The execution models.
const (
	// Serial is the model before queues: each op costs its profile's
	// LaunchUs ("launch, dispatch and synchronisation") plus its work,
	// copies their link time, all one after another. It reproduces the
	// figures recorded before the Async model, and is the zero value:
	// what a device opened alone runs.
	Serial ExecModel = iota
	// Async is how GPU runtimes run: the host pays each profile's IssueUs
	// per op or copy it enqueues and goes on; each device runs its queue
	// in order, GapUs plus the op's work per op; copies occupy the
	// device's link (a copy engine) beside its compute queue; the host
	// pays SyncUs only where it waits for work that has not ended. A
	// step's time is its makespan, the critical path.
	Async
	// Synchronous is Async with the host waiting for every op and copy as
	// it is issued: IssueUs + GapUs + work + SyncUs per op, one after
	// another.
	Synchronous
)

var _ fmt.Stringer = Serial

// String returns the model's name, or ExecModel(n) for an unknown value.
func (m ExecModel) String() string {
	switch m {
	case Async:
		return "async"
	case Synchronous:
		return "sync"
	case Serial:
		return "serial"
	}
	return fmt.Sprintf("ExecModel(%d)", uint8(m))
}

// ParseExecModel returns the model named s: async, sync or serial.
func ParseExecModel(s string) (ExecModel, error) {
	for _, m := range []ExecModel{Async, Synchronous, Serial} {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("%w: execution model %q (async, sync, serial)", ErrInvalidSetup, s)
}

// Timeline is the virtual clock that the simulated devices of one run
// share: one host, which issues work and waits for it, and one lane per
// device queue (compute, and a link for devices with one), each running
// its work in order. Nothing sleeps: times are µs of virtual time. A
// Timeline is safe for concurrent use; its callers share one host clock,
// as the threads of one process issuing work do.
type Timeline struct {
	mu    sync.Mutex
	model ExecModel
	host  float64 // the host's clock
	end   float64 // the latest end of any work
	issue float64 // host time spent issuing
	sync  float64 // host time spent in synchronisation
	syncs int64
	lanes []lane
}

type lane struct {
	name       string
	free, busy float64
	// held is the lane's work, in order, from its first work that a loss
	// may still fail (Timeline.mayFail) on: what such a loss moves
	// (lane.replace). base is the lane's end before held[0].
	held []*work
	base float64
}

// NewTimeline returns an empty Timeline of model m, at time 0.
func NewTimeline(m ExecModel) *Timeline { return &Timeline{model: m} }

// Model returns the Timeline's execution model.
func (t *Timeline) Model() ExecModel { return t.model }

// Lane adds a queue called name (a device's compute queue or its link)
// and returns its index for Enqueue.
func (t *Timeline) Lane(name string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lanes = append(t.lanes, lane{name: name})
	return len(t.lanes) - 1
}

// Enqueue charges one op or copy of durUs on lane l that may start once
// afterUs has passed (the end of the work it depends on) and returns its
// start and end. Async: the host pays issueUs, and the work starts when
// the host has issued it, the lane is free and afterUs has passed.
// Synchronous: the same, then the host waits for its end and pays syncUs.
// Serial: the work starts when the host is free and the host waits for
// it; issueUs and syncUs are not charged (the profile's LaunchUs, inside
// durUs, stands for them).
func (t *Timeline) Enqueue(l int, issueUs, afterUs, durUs, syncUs float64) (start, end float64) {
	return t.EnqueueWaiting(l, issueUs, afterUs, nil, durUs, syncUs)
}

// Waited is work of another device that a queue waits for itself before
// it runs its next work (a CPU's worker blocked on a GPU's event): its
// end, and what the waiter pays to resume after it, µs.
type Waited struct{ EndUs, SyncUs float64 }

// EnqueueWaiting is Enqueue for work whose queue first waits, in order,
// for each of waits: once the queue reaches the work (as Enqueue would
// start it), each awaited work that has not ended by then holds it until
// its end plus its SyncUs; one that has ended costs nothing.
//
// Rule: the queue that waits pays the resume, as the host does
// (Timeline.Wait). Reason: backends/cpu's worker waits for a GPU's event
// through that event's Wait, the synchronisation the host pays SyncUs
// for; a lane that started at the event's end resumed for free where the
// host would have paid 10 µs on an AMD GPU
// (TestCPUWaitsForGPUResumes).
func (t *Timeline) EnqueueWaiting(l int, issueUs, afterUs float64, waits []Waited, durUs, syncUs float64) (start, end float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, start, end = t.enqueueLocked(l, issueUs, afterUs, waits, durUs, syncUs)
	return start, end
}

// afterWaits returns when work that its queue reaches at startUs starts,
// once the queue has waited for waits in order (EnqueueWaiting).
func afterWaits(startUs float64, waits []Waited) float64 {
	for _, w := range waits {
		if w.EndUs > startUs {
			startUs = w.EndUs + w.SyncUs
		}
	}
	return startUs
}

// enqueueWork places w on its lane as EnqueueWaiting does, unless one of
// roots (work.roots) is lost: it then returns that loss and places
// nothing. w becomes a dependent of each root that has not ended by the
// host's clock, which a loss met later fails with it (Device.lose). The
// lane holds w (lane.held) when such a loss may fail or move it; afterUs
// leaves out the work before w on its lane, whose end the lane's order
// keeps before w's start however a loss moves it.
func (t *Timeline) enqueueWork(w *work, issueUs, afterUs float64, waits []Waited, roots []*work, durUs float64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range roots {
		if e := r.lost.Load(); e != nil {
			return e
		}
	}
	ln := &t.lanes[w.lane]
	n := 0 // the held work that no loss can move now: none before it may fail
	for n < len(ln.held) && !t.mayFail(ln.held[n]) {
		ln.base = ln.held[n].end
		n++
	}
	clear(ln.held[:n])
	ln.held = ln.held[n:]
	from := ln.free
	var ready float64
	ready, w.start, w.end = t.enqueueLocked(w.lane, issueUs, afterUs, waits, durUs, w.syncUs)
	for _, r := range roots {
		if r.end > t.host && !slices.Contains(w.roots, r) {
			w.roots = append(w.roots, r)
			r.dependents = append(r.dependents, w)
		}
	}
	if len(w.roots) > 0 || len(ln.held) > 0 {
		if len(ln.held) == 0 {
			ln.base = from
		}
		w.ready, w.waits, w.durUs = ready, waits, durUs
		ln.held = append(ln.held, w)
	}
	return nil
}

// mayFail reports whether a loss met now may fail w (t.mu held): one of
// its roots had not ended by the host's clock, nor failed it already.
func (t *Timeline) mayFail(w *work) bool {
	if w.gone() {
		return false
	}
	for _, r := range w.roots {
		if r.end > t.host {
			return true
		}
	}
	return false
}

// enqueueLocked is EnqueueWaiting with t.mu held; ready is when the host
// had issued the work and afterUs had passed, its start on an idle lane
// with nothing to wait for.
func (t *Timeline) enqueueLocked(l int, issueUs, afterUs float64, waits []Waited, durUs, syncUs float64) (ready, start, end float64) {
	ln := &t.lanes[l]
	if t.model == Serial {
		ready = max(t.host, afterUs)
		start = ready
	} else {
		t.host += issueUs
		t.issue += issueUs
		ready = max(t.host, afterUs)
		start = max(ready, ln.free)
	}
	start = afterWaits(start, waits)
	end = start + durUs
	if t.model == Serial {
		t.host = end
	}
	ln.free = max(ln.free, end)
	ln.busy += durUs
	t.end = max(t.end, end)
	if t.model == Synchronous {
		t.waitLocked(end, syncUs)
	}
	return ready, start, end
}

// Issue adds us of issuing to the host's clock: work gathered now and
// placed on a lane later (Enqueue with no issue of its own).
func (t *Timeline) Issue(us float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.host += us
	t.issue += us
}

// Wait makes the host wait for work that ends at endUs: when it has not
// ended by the host's clock, the host resumes at endUs + syncUs. Waiting
// for work that has ended costs nothing.
func (t *Timeline) Wait(endUs, syncUs float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.waitLocked(endUs, syncUs)
}

func (t *Timeline) waitLocked(endUs, syncUs float64) {
	if endUs <= t.host {
		return
	}
	t.host = endUs + syncUs
	t.sync += syncUs
	t.syncs++
	t.end = max(t.end, t.host)
}

// waitFor is Wait for placed work w, unless w will never end (its
// device was lost: Timeline.lose).
func (t *Timeline) waitFor(w *work) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !w.gone() {
		t.waitLocked(w.end, w.syncUs)
	}
}

// ended reports whether placed work w has ended by the host's clock.
func (t *Timeline) ended(w *work) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return w.end <= t.host
}

// span is work placed on a lane.
type span struct {
	lane       int
	start, end float64
}

// lose ends lanes ls, those of a device lost now, at the host's clock: f
// runs under the lock (nothing moves the clock meanwhile) with the clock,
// and returns the work of those lanes that had not ended by then, and
// the work of other lanes that waited for it; the time each ran after
// the clock leaves its lane's busy time, the lanes ls end at the clock
// or before, the work of another lane behind gone work moves up
// (lane.replace), and the makespan ends with the latest lane.
func (t *Timeline) lose(ls []int, f func(hostUs float64) []span) {
	t.mu.Lock()
	defer t.mu.Unlock()
	gone := f(t.host)
	for _, s := range gone {
		t.lanes[s.lane].busy -= s.end - max(s.start, t.host)
	}
	for _, l := range ls {
		ln := &t.lanes[l]
		ln.free = min(ln.free, t.host)
		clear(ln.held)
		ln.held = ln.held[:0]
	}
	for i := range t.lanes {
		t.lanes[i].replace(t.host)
	}
	t.end = t.host // the latest of the host's clock and every lane's end
	for _, ln := range t.lanes {
		t.end = max(t.end, ln.free)
	}
}

// replace places the lane's held work again once a loss at hostUs has
// failed some of it (t.mu held): the failed work takes no time, and the
// work behind it starts as its own dependencies and the lane allow,
// keeping its length. Failed work leaves the lane when its queue reaches
// it, but not before hostUs: nothing moves before the loss. Work of
// other lanes that waited for the work moved keeps its place.
//
// Rule: a CPU's work failed by another device's loss gives its place on
// the queue to the work behind it. Reason: backends/cpu's worker, once
// it reaches a task, waits in its dependency's Wait until the loss fails
// it, and goes on to the next task without running it; the independent
// work behind a failed op kept the start that op's end gave it, and the
// run its time (TestLostDependencyFreesCPUQueue).
func (ln *lane) replace(hostUs float64) {
	i := slices.IndexFunc(ln.held, (*work).gone)
	if i < 0 {
		return
	}
	free := ln.base
	if i > 0 {
		free = ln.held[i-1].end
	}
	kept := ln.held[:i]
	for _, w := range ln.held[i:] {
		if w.gone() {
			free = max(free, w.ready, hostUs)
			continue
		}
		w.start = afterWaits(max(w.ready, free), w.waits)
		w.end = w.start + w.durUs
		free = w.end
		kept = append(kept, w)
	}
	clear(ln.held[len(kept):])
	ln.held = kept
	ln.free = free
}

// WaitLanes makes the host wait for everything queued on the lanes ls
// (Wait of their latest end).
func (t *Timeline) WaitLanes(syncUs float64, ls ...int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	end := 0.0
	for _, l := range ls {
		end = max(end, t.lanes[l].free)
	}
	t.waitLocked(end, syncUs)
}

// Done reports whether work ending at endUs has ended by the host's clock.
func (t *Timeline) Done(endUs float64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return endUs <= t.host
}

// HostUs returns the host's clock.
func (t *Timeline) HostUs() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.host
}

// FreeInUs returns how long after the host's clock lane l becomes free:
// the expected wait of work issued now (0 when it is idle).
func (t *Timeline) FreeInUs(l int) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return max(0, t.lanes[l].free-t.host)
}

// LaneStats is one lane's share of a Timeline.
type LaneStats struct {
	Name   string
	BusyUs float64 // the time its work ran
}

// TimelineStats are a Timeline's figures so far, in µs.
type TimelineStats struct {
	Model ExecModel
	// MakespanUs is when the last work ended or the host last resumed:
	// the run's time.
	MakespanUs float64
	HostUs     float64 // the host's clock
	IssueUs    float64 // host time spent issuing work
	SyncUs     float64 // host time spent synchronising
	Syncs      int64   // the waits that cost SyncUs
	Lanes      []LaneStats
}

// BoundUs returns the lower bound of the makespan for the placement
// that ran: the largest of the host's issue time and each lane's busy
// time (no schedule of that work can be shorter).
func (s TimelineStats) BoundUs() float64 {
	b := s.IssueUs
	for _, l := range s.Lanes {
		b = max(b, l.BusyUs)
	}
	return b
}

// Sub returns the figures of the work between before and s (both of one
// Timeline): times and counts subtracted, the makespan as the time the
// later state ends after the earlier one's.
func (s TimelineStats) Sub(before TimelineStats) TimelineStats {
	d := s
	d.MakespanUs -= before.MakespanUs
	d.HostUs -= before.HostUs
	d.IssueUs -= before.IssueUs
	d.SyncUs -= before.SyncUs
	d.Syncs -= before.Syncs
	d.Lanes = make([]LaneStats, len(s.Lanes))
	for i, l := range s.Lanes {
		d.Lanes[i] = l
		if i < len(before.Lanes) {
			d.Lanes[i].BusyUs -= before.Lanes[i].BusyUs
		}
	}
	return d
}

// Stats returns the figures so far. The caller owns Lanes.
func (t *Timeline) Stats() TimelineStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := TimelineStats{Model: t.model, MakespanUs: max(t.host, t.end), HostUs: t.host,
		IssueUs: t.issue, SyncUs: t.sync, Syncs: t.syncs}
	for _, l := range t.lanes {
		s.Lanes = append(s.Lanes, LaneStats{Name: l.name, BusyUs: l.busy})
	}
	return s
}
