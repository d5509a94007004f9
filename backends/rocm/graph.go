//go:build cgo

package rocm

// Gathering (backends.Recorder): between Record and Flush, RunAsync does
// not launch an op's kernels but appends them to a kernel list, with no
// events of their own. The list is launched in segments as it grows
// (backends.SegmentPlanner, from what gathering has cost so far:
// gatherCosts), at Flush, or earlier when something needs its
// work on the device: a wait for one of its ops, a copy or a library call
// queued meanwhile, Sync, Close. Each segment of a step runs as a graph
// of kernel nodes in a chain when the runtime has graphs: the segment's
// graph of the step before is replayed when the kernels and their
// dimensions are the same, the nodes whose arguments changed (a decode
// step's position, its count of keys) given theirs first; kernels new to
// the segment are launched one by one in one call, and get a graph the
// second time they come. Without graphs, or where building one fails,
// every segment is launched one by one: still no events per op. Either
// way a segment is timed by one pair of events.

import (
	"fmt"
	"slices"
	"time"

	"github.com/adaptsched/adaptsched/backends"
)

var (
	_ backends.Recorder = (*Device)(nil)
	_ backends.Deferred = (*event)(nil)
)

// gathering is the kernels and ops gathered since Record or the last
// launch (under the device's mutex).
type gathering struct {
	k        kernelList
	ops      []*event      // the gathered ops' events, in queue order
	launched chan struct{} // closed when the list has been launched
}

// maxGraphs bounds the graphs kept, one per segment of a step.
const maxGraphs = 256

// replay is a segment's graph: the kernel list it was built from, its
// nodes and its executable form; exec is 0 for kernels seen once, not
// yet built.
type replay struct {
	graph, exec uintptr
	nodes       []uint64
	k           kernelList
}

// closedChan is the Launched of work launched when queued.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Launched implements backends.Deferred.
func (e *event) Launched() <-chan struct{} {
	if e.gathered == nil {
		return closedChan
	}
	return e.gathered
}

// Launch implements backends.Deferred: it launches e's gathering if it
// has not been launched.
func (e *event) Launch() error {
	if e.gathered == nil {
		return nil
	}
	select {
	case <-e.gathered:
		return nil
	default:
	}
	return e.d.gated(func() error {
		if e.whole == nil && !e.done.Load() {
			return e.d.launchGathered()
		}
		return nil
	})
}

// Record implements backends.Recorder: ops queued from now on are
// gathered until Flush.
func (d *Device) Record() error {
	return d.call(func() error {
		if d.gather == nil {
			d.gather = &gathering{launched: make(chan struct{}), k: d.spareKernels}
			d.spareKernels = kernelList{}
		}
		d.segment, d.gatheredSince = 0, 0
		host, dev, launch := d.costs.estimates()
		d.planner.Plan(d.lastGathering, host, dev, launch, min(d.costs.hostKernels, d.costs.deviceKernels))
		d.costs.window = gatherWindow{}
		return nil
	})
}

// gatherCosts are what gathering has cost so far, by the host's clock
// and the gatherings' events: the host's time from a gathering's first
// op to its last less the launches between them, over the kernels
// gathered after the first; a launch's host time; the device's time per
// kernel gathered. Their means plan the segments
// (backends.SegmentPlanner): over the whole run, so that a plan, and
// the graphs replayed for its segments, stay the same step after step.
// Rule: from the first op to the last, not Record to Flush. Reason: a
// decode step reads its token before its Flush, and that wait, the whole
// step's device time, would count as the host's (TestFakeGatherCosts).
type gatherCosts struct {
	window                  gatherWindow // this gathering's
	hostNs, hostKernels     int64
	launchNs, launches      int64
	deviceNs, deviceKernels int64
}

// gatherWindow is a gathering's span so far: its first op's time and
// kernels gathered then, its last op's, and the launches' host time
// before each.
type gatherWindow struct {
	first, last             time.Time
	firstKernels, kernels   int
	firstLaunchNs, launchNs int64 // launches' time before the first op, and before the last
	launchesNs              int64 // every launch's since Record
}

// gathered notes an op gathered now, kernels having been gathered since
// Record with it.
func (w *gatherWindow) gathered(kernels int) {
	now := time.Now()
	if w.first.IsZero() {
		w.first, w.firstKernels, w.firstLaunchNs = now, kernels, w.launchesNs
	}
	w.last, w.kernels, w.launchNs = now, kernels, w.launchesNs
}

// estimates returns the means, µs (0: none yet): the host's per kernel
// gathered, a launch's, the device's per kernel.
func (c *gatherCosts) estimates() (host, device, launch float64) {
	mean := func(ns, n int64) float64 {
		if n <= 0 {
			return 0
		}
		return float64(ns) / float64(n) / 1e3
	}
	return mean(c.hostNs, c.hostKernels), mean(c.deviceNs, c.deviceKernels), mean(c.launchNs, c.launches)
}

// Flush implements backends.Recorder: it launches what was gathered and
// stops gathering. A launch error is the gathered ops' (their Waits and
// Sync report it) and is returned here too.
func (d *Device) Flush() error {
	return d.gated(func() error {
		err := d.launchGathered()
		if d.gatheredSince > 0 {
			d.lastGathering = d.gatheredSince
			if w := &d.costs.window; w.kernels > w.firstKernels {
				d.costs.hostNs += int64(w.last.Sub(w.first)) - (w.launchNs - w.firstLaunchNs)
				d.costs.hostKernels += int64(w.kernels - w.firstKernels)
			}
		}
		d.costs.window = gatherWindow{}
		if d.gather != nil {
			d.spareKernels = d.gather.k.reset()
		}
		d.gather, d.segment, d.gatheredSince = nil, 0, 0
		return err
	})
}

// Graphs returns the device's counts of gatherings.
func (d *Device) Graphs() GraphStats {
	var s GraphStats
	_ = d.gated(func() error {
		s = d.graphStats
		return nil
	})
	return s
}

// gatherOp appends the op's kernels to the gathering and returns its
// event, not yet launched (under do). Dependencies on this device's other
// stream are waited for on the device now, before the gathering's launch
// in stream order; bufs remember the op as their last user.
func (d *Device) gatherOp(op string, l *launch, fn uintptr, bufs []*buffer, after []*event) (*event, error) {
	g := d.gather
	if err := d.waitForAll(d.stream, bufs, after); err != nil {
		return nil, err
	}
	g.k.fns = append(g.k.fns, uint64(fn))
	g.k.dims = append(g.k.dims, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2])
	if len(g.k.off) == 0 {
		g.k.off = append(g.k.off, 0)
	}
	g.k.args = l.slots(g.k.args, bufs)
	g.k.off = append(g.k.off, int32(len(g.k.args)))
	e := &event{d: d, op: op, stream: d.stream, gathered: g.launched}
	limit := d.planner.Limit(d.segment, d.gatheredSince, d.lastGathering)
	if g.ops == nil { // room for the segment: its launch keeps the list
		g.ops = make([]*event, 0, limit)
	}
	g.ops = append(g.ops, e)
	for _, b := range bufs {
		b.last = e
	}
	d.costs.window.gathered(d.gatheredSince + g.k.len())
	if g.k.len() >= limit {
		// A launch failure fails the gathered ops, e among them: their
		// Waits report it.
		_ = d.launchGathered()
	}
	return e, nil
}

// launchGathered launches the gathering's kernels, between one pair of
// events whose work event (queued like any other) completes its ops
// (under do). Gathering goes on afterwards with an empty list.
func (d *Device) launchGathered() error {
	g := d.gather
	if g == nil || len(g.ops) == 0 {
		return nil
	}
	if err := d.bind(); err != nil {
		return err
	}
	began := time.Now()
	// The next gathering reuses the kernel list, which nothing reads
	// once launched (a graph keeps copies).
	d.gather = &gathering{launched: make(chan struct{}), k: g.k.reset()}
	defer close(g.launched)
	n := g.k.len()
	k := g.k
	whole, err := d.enqueueWhole(fmt.Sprintf("%d gathered ops", len(g.ops)), func() error {
		if n == 0 {
			return nil
		}
		return d.launchKernels(&k)
	})
	if err != nil {
		err = &backends.DeviceError{Backend: d.info.Name, Op: g.ops[0].op, Err: fmt.Errorf("launching %d gathered ops: %w", len(g.ops), err)}
		for _, e := range g.ops {
			d.releaseFreed(e)
			e.err = &backends.DeviceError{Backend: d.info.Name, Op: e.op, Err: err}
			d.failed = append(d.failed, e)
			e.done.Store(true)
		}
		return err
	}
	whole.members, whole.kernels, whole.planFor = g.ops, n, d.lastGathering
	for _, e := range g.ops {
		e.whole = whole
	}
	ns := int64(time.Since(began))
	d.costs.launchNs += ns
	d.costs.launches++
	d.costs.window.launchesNs += ns
	d.graphStats.Launches++
	d.graphStats.Kernels += int64(n)
	d.segment++
	d.gatheredSince += n
	return nil
}

// enqueueWhole queues launch between a start and an end event on the
// compute stream, as enqueue does for one op, with no buffers.
func (d *Device) enqueueWhole(op string, launch func() error) (*event, error) {
	saved := d.gather
	d.gather = nil // enqueue launches a gathering first; this is that launch
	defer func() { d.gather = saved }()
	return d.enqueue(op, d.stream, nil, nil, launch)
}

// launchKernels launches k as a graph (replayed, or built anew) when the
// runtime has graphs, else kernel by kernel (under do).
func (d *Device) launchKernels(k *kernelList) error {
	if d.graphStats.NoGraphs == "" {
		launched, err := d.launchGraph(k)
		switch {
		case launched && err == nil:
			return nil
		case err != nil && d.lost.Load():
			return err
		case err != nil:
			// A runtime that cannot build or launch this graph (a platform
			// without kernel nodes for module functions) gets the kernels
			// one by one, from now on.
			d.graphStats.NoGraphs = err.Error()
			d.dropGraphs()
		}
	}
	d.graphStats.OneByOne++
	done, code := d.s.launchAll(k, d.stream)
	if code != 0 {
		return fmt.Errorf("kernel %d of %d: %w", done+1, k.len(), d.check(fLaunch, code))
	}
	return nil
}

// launchGraph replays the graph of this segment of the step (the n-th
// launch since Record) with k's arguments when k has its kernels and
// dimensions. A graph is built for kernels seen twice running in this
// segment: a decode step's segments repeat from step to step, a segment
// cut short by a copy mid-step need not, and building costs more than
// launching a few kernels. It returns false, having launched nothing,
// for kernels seen for the first time (under do).
func (d *Device) launchGraph(k *kernelList) (bool, error) {
	slot := min(d.segment, maxGraphs-1)
	for len(d.graphs) <= slot {
		d.graphs = append(d.graphs, nil)
	}
	r := d.graphs[slot]
	if r != nil && sameKernels(&r.k, k) && r.exec == 0 {
		g, exec, nodes, code := d.s.graphBuild(d.v.platform == AMD, k)
		if err := d.check(fGraphAddKernel, code); err != nil {
			return false, err
		}
		r.graph, r.exec, r.nodes = g, exec, nodes
		r.k.args = append(r.k.args[:0], k.args...)
		d.graphStats.Builds++
		return true, d.check(fGraphLaunch, d.s.graphLaunch(exec, d.stream))
	}
	if r != nil && sameKernels(&r.k, k) {
		for i := range k.len() {
			if slices.Equal(r.k.args[r.k.off[i]:r.k.off[i+1]], k.args[k.off[i]:k.off[i+1]]) {
				continue
			}
			if err := d.check(fGraphSetKernel, d.s.graphSet(d.v.platform == AMD, r.exec, r.nodes[i], k, i)); err != nil {
				return false, err
			}
			d.graphStats.Updated++
		}
		r.k.args = append(r.k.args[:0], k.args...)
		d.graphStats.Replays++
		return true, d.check(fGraphLaunch, d.s.graphLaunch(r.exec, d.stream))
	}
	d.dropGraph(slot)
	d.graphs[slot] = &replay{k: kernelList{
		fns: slices.Clone(k.fns), dims: slices.Clone(k.dims), args: slices.Clone(k.args), off: slices.Clone(k.off)}}
	return false, nil
}

// sameKernels reports whether a and b launch the same functions with the
// same dimensions and argument counts: b can replay a's graph.
func sameKernels(a, b *kernelList) bool {
	return slices.Equal(a.fns, b.fns) && slices.Equal(a.dims, b.dims) && slices.Equal(a.off, b.off)
}

// dropGraph destroys the graph of a segment (under do). A graph launched
// and not yet complete may be destroyed: the runtimes finish it first.
func (d *Device) dropGraph(slot int) {
	if slot >= len(d.graphs) {
		return
	}
	if r := d.graphs[slot]; r != nil {
		if r.exec != 0 {
			d.s.call(fGraphExecFree, r.exec)
			d.s.call(fGraphDestroy, r.graph)
		}
		d.graphs[slot] = nil
	}
}

// dropGraphs destroys every graph (under do).
func (d *Device) dropGraphs() {
	for i := range d.graphs {
		d.dropGraph(i)
	}
	d.graphs = nil
}

// graphsMissing says why the loaded runtime cannot run graphs, or "".
func (d *Device) graphsMissing() string {
	for _, f := range []fn{fGraphCreate, fGraphDestroy, fGraphAddKernel, fGraphInstance, fGraphExecFree, fGraphLaunch, fGraphSetKernel} {
		if !d.s.has(f) {
			return "the runtime lacks " + d.symName(f)
		}
	}
	return ""
}
