package sim

import (
	"cmp"
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
	return t.enqueueLocked(l, issueUs, afterUs, waits, durUs, syncUs)
}

// enqueueWork places w on its lane as EnqueueWaiting does, unless one of
// roots (work.roots) is lost: it then returns that loss and places
// nothing. w becomes a dependent of each root that has not ended by the
// host's clock, which a loss met later fails with it (Device.lose).
func (t *Timeline) enqueueWork(w *work, issueUs, afterUs float64, waits []Waited, roots []*work, durUs float64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range roots {
		if e := r.lost.Load(); e != nil {
			return e
		}
	}
	w.from = t.lanes[w.lane].free
	w.start, w.end = t.enqueueLocked(w.lane, issueUs, afterUs, waits, durUs, w.syncUs)
	for _, r := range roots {
		if r.end > t.host && !slices.Contains(w.roots, r) {
			w.roots = append(w.roots, r)
			r.dependents = append(r.dependents, w)
		}
	}
	return nil
}

// enqueueLocked is EnqueueWaiting with t.mu held.
func (t *Timeline) enqueueLocked(l int, issueUs, afterUs float64, waits []Waited, durUs, syncUs float64) (start, end float64) {
	ln := &t.lanes[l]
	if t.model == Serial {
		start = max(t.host, afterUs)
	} else {
		t.host += issueUs
		t.issue += issueUs
		start = max(t.host, ln.free, afterUs)
	}
	for _, w := range waits {
		if w.EndUs > start {
			start = w.EndUs + w.SyncUs
		}
	}
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
	return start, end
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

// waitUnless is Wait, unless gone reports, under the lock, that the work
// will never end (its device was lost: Timeline.lose).
func (t *Timeline) waitUnless(endUs, syncUs float64, gone func() bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !gone() {
		t.waitLocked(endUs, syncUs)
	}
}

// span is work placed on a lane; from is the lane's end before it.
type span struct {
	lane             int
	from, start, end float64
}

// lose ends lanes ls, those of a device lost now, at the host's clock: f
// runs under the lock (nothing moves the clock meanwhile) with the clock,
// and returns the work of those lanes that had not ended by then, and
// the work of other lanes that waited for it; the time each ran after
// the clock leaves its lane's busy time, the lanes ls end at the clock
// or before, another lane whose last work is gone ends where it did
// before that work, and the makespan ends with the latest lane.
func (t *Timeline) lose(ls []int, f func(hostUs float64) []span) {
	t.mu.Lock()
	defer t.mu.Unlock()
	gone := f(t.host)
	for _, s := range gone {
		t.lanes[s.lane].busy -= s.end - max(s.start, t.host)
	}
	for _, l := range ls {
		t.lanes[l].free = min(t.lanes[l].free, t.host)
	}
	// Latest first: a lane's ends grow in its order. The lanes ls, at the
	// clock now, end before any gone work.
	slices.SortFunc(gone, func(a, b span) int { return cmp.Compare(b.end, a.end) })
	for _, s := range gone {
		if ln := &t.lanes[s.lane]; ln.free == s.end {
			ln.free = s.from
		}
	}
	t.end = t.host // the latest of the host's clock and every lane's end
	for _, ln := range t.lanes {
		t.end = max(t.end, ln.free)
	}
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
