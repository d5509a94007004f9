package sim

// Gathering (backends.Recorder), as backends/rocm runs it: between Record
// and Flush, under the Async model, an op on a GPU costs the host
// GatherIssueUs instead of IssueUs, and each launch of what it gathered
// GatherLaunchUs. A gathered op is not on the device yet: it is placed on
// its lane when its gathering is launched (in segments that
// backends.SegmentPlanner sizes from the profile's host costs and the
// gathered ops' mean duration, at Flush, or when the host waits for it
// or queues a copy), the device starting no earlier than the launch. CPUs
// and the other models do not gather: Record and Flush are no-ops there.

import (
	"sync/atomic"

	"github.com/adaptsched/adaptsched/backends"
)

var _ backends.Recorder = (*Device)(nil)

// gathering is the ops gathered and not yet launched.
type gathering struct {
	ops    []*work
	placed chan struct{} // closed once every op has its span
}

// gathered is what a gathered op keeps until its gathering is launched.
type gathered struct {
	dev     *Device
	g       *gathering
	on      atomic.Bool // placed on its lane: start and end are set
	lane    int
	afterUs float64
	durUs   float64
}

// Gathers reports whether d gathers: a GPU with a gathering cost, under
// the Async model. Record and Flush do nothing on another.
func (d *Device) Gathers() bool {
	return d.prof.Kind == backends.GPU && d.prof.GatherIssueUs > 0 && d.tl.Model() == Async
}

// Record implements backends.Recorder.
func (d *Device) Record() error {
	if !d.Gathers() {
		return nil
	}
	d.mu.Lock()
	if d.gather == nil {
		d.gather = &gathering{placed: make(chan struct{})}
	}
	d.segments, d.gatheredSince = 0, 0
	devUs := 0.0
	if d.gatheredN > 0 {
		devUs = d.gatheredUs / float64(d.gatheredN)
	}
	d.planner.Plan(d.lastGathering, d.prof.GatherIssueUs, devUs, d.prof.GatherLaunchUs, int64(d.gatheredN))
	d.mu.Unlock()
	return nil
}

// Flush implements backends.Recorder.
func (d *Device) Flush() error {
	d.launchGathered(false)
	d.mu.Lock()
	if d.gatheredSince > 0 {
		d.lastGathering = d.gatheredSince
	}
	d.segments, d.gatheredSince = 0, 0
	d.mu.Unlock()
	return nil
}

// gatherWork gathers us of op's work on lane l after afterUs: the host
// pays GatherIssueUs now, the device runs it once it is launched.
func (d *Device) gatherWork(op string, l int, afterUs, us float64) *work {
	d.mu.Lock()
	g := d.gather
	if g == nil || d.lostErr != nil { // flushed meanwhile, or lost
		d.mu.Unlock()
		return d.enqueue(op, l, afterUs, nil, nil, us) // a GPU: its host waited for its roots
	}
	d.tl.Issue(d.prof.GatherIssueUs)
	w := &work{dev: d, tl: d.tl, op: op, lane: l, syncUs: d.prof.SyncUs, t: backends.Timing{Duration: micros(us), Clock: backends.Simulated},
		gathered: &gathered{dev: d, g: g, lane: l, afterUs: afterUs, durUs: us}}
	g.ops = append(g.ops, w)
	d.admit(w)
	d.gatheredUs += us
	d.gatheredN++
	full := len(g.ops) >= d.planner.Limit(d.segments, d.gatheredSince, d.lastGathering)
	d.mu.Unlock()
	if full {
		d.launchGathered(true)
	}
	return w
}

// launchGathered places the gathered ops on their lanes, in order, from
// the host's clock on; gathering goes on when more is true.
func (d *Device) launchGathered(more bool) {
	// One launch at a time: a gathering is placed whole before the next,
	// so that lane order is queue order.
	d.launching.Lock()
	defer d.launching.Unlock()
	d.mu.Lock()
	g := d.gather
	if g == nil {
		d.mu.Unlock()
		return
	}
	if len(g.ops) == 0 { // nothing to launch, as rocm's launchGathered: no launch cost
		if !more {
			d.gather = nil
			close(g.placed)
		}
		d.mu.Unlock()
		return
	}
	d.gather = nil
	d.segments++
	d.gatheredSince += len(g.ops)
	segUs := 0.0
	for _, w := range g.ops {
		segUs += w.gathered.durUs
	}
	d.planner.Ran(d.lastGathering, segUs, int64(len(g.ops))) // per segment, as rocm's events
	if more {
		d.gather = &gathering{placed: make(chan struct{})}
	}
	d.mu.Unlock()
	d.tl.Issue(d.prof.GatherLaunchUs)
	for _, w := range g.ops {
		x := w.gathered
		w.start, w.end = d.tl.Enqueue(x.lane, 0, x.afterUs, x.durUs, d.prof.SyncUs)
		x.on.Store(true)
	}
	close(g.placed)
}

// launchFirst launches what is gathered before work that cannot join it
// (a copy, Sync), which may depend on it, and waits for a launch under
// way on another goroutine.
//
// Rule: it waits even when nothing is left gathered. Reason: a Flush that
// had taken the gathering but not yet placed it left a copy after a
// gathered op unordered on the link, and Sync short of that op's end
// (TestGatheredDependencyUnderFlush).
func (d *Device) launchFirst() { d.launchGathered(true) }

// placed reports whether w is on its lane (work not gathered always is).
func (w *work) placed() bool { return w.gathered == nil || w.gathered.on.Load() }

// place launches w's gathering if it has not been, and waits until w is
// on its lane.
func (w *work) place() {
	if w.placed() {
		return
	}
	x := w.gathered
	x.dev.mu.Lock()
	current := x.dev.gather == x.g
	x.dev.mu.Unlock()
	if current {
		x.dev.launchGathered(true)
	}
	<-x.g.placed
}
