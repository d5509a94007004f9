package backends

import (
	"math"
	"slices"

	"github.com/adaptsched/adaptsched/kernels"
)

// Event is the completion of one piece of queued work (a kernel or a copy).
// It is safe for concurrent use.
type Event interface {
	// Done reports, without blocking, whether the work has completed
	// (successfully or not).
	Done() bool
	// Wait blocks until the work has completed and returns its Timing, or the
	// error the work failed with (wrapping a *DeviceError naming the op).
	Wait() (Timing, error)
}

// VirtualSpan is implemented by Events of simulated devices: the work's
// start and end on the simulation's virtual clock, in µs.
type VirtualSpan interface {
	Span() (startUs, endUs float64)
}

// Queuer is the optional capability of a backend that queues work on its
// device: each call enqueues the work after the events in after (which may
// belong to other backends; a nil one is no dependency) and returns at
// once. A backend without it is
// driven through its synchronous methods. The synchronous methods of a
// Queuer behave as the queued call followed by Wait. Implementations must
// not retain after once the call returns (as io.Writer must not retain
// its p): the caller reuses its storage (the Executor's lanes).
type Queuer interface {
	// RunAsync enqueues s with inputs in and output out, as Run does;
	// s's shapes must not be modified before the event is Done (a CPU
	// backend's queue reads them when the kernel runs).
	RunAsync(s kernels.Spec, in []Buffer, out Buffer, after []Event) (Event, error)
	// WriteAsync enqueues the copy of src (host memory) into dst, as Write
	// does; src must not be modified before the event is Done.
	WriteAsync(dst Buffer, src []byte, after []Event) (Event, error)
	// ReadAsync enqueues the copy of src into dst (host memory), as Read
	// does; dst must not be read by the caller before the event is Done.
	ReadAsync(dst []byte, src Buffer, after []Event) (Event, error)
	// Sync waits for all work queued so far and returns the first error of
	// queued work that no Wait has reported yet.
	Sync() error
}

// HardwareGroup is the optional capability of backends that run on the
// same hardware as other backends (cpu and cpu1 share the host's cores).
// HardwareGroup returns a name equal for backends that share hardware;
// a backend without the capability shares with none.
type HardwareGroup interface {
	HardwareGroup() string
}

// Recorder is the optional capability of a Queuer that gathers the ops
// queued between Record and Flush and launches them at once, as a GPU
// graph replayed with new arguments when the next gathering has the same
// kernels: the host then pays one launch per step instead of one per op,
// as llama.cpp and PyTorch replay CUDA graphs. Gathered ops have no
// timings of their own (Clock Gathered, Duration 0). Their Events are
// Deferred: waiting for one launches the gathering; so does any work
// that cannot join it (a copy, a library call, Sync).
type Recorder interface {
	Queuer
	// Record starts gathering.
	Record() error
	// Flush launches what was gathered and stops gathering.
	Flush() error
}

// Deferred is implemented by Events of work that may be gathered and not
// yet launched. Launched is closed once the work is on the device: an
// observer that must not launch it early (a watcher that would end the
// gathering at its first op) waits there before Wait. Launch launches
// the gathering now if it has not been, without waiting for it: what a
// host that is about to wait for the work does.
type Deferred interface {
	Launched() <-chan struct{}
	Launch() error
}

// Gathering's segments where none are planned (SegmentPlanner): a
// Recorder launches what it has gathered once the
// n-th segment since Record holds SegmentLimit(n, done, last) ops, where
// done were gathered since Record before it and last in the whole of
// the previous gathering (0 if none). The device then starts on a step's
// first segment while the host gathers the next instead of idling until
// the whole step is gathered. A launch costs the host 10–20 µs (a graph
// launch and two event records: backends/rocm BenchmarkGPUCalls on an
// H200, 20 in the H100's decode profile, sim/launch.go) and 32 ops take
// it 128 µs or more to gather (4.0 µs an op there), so launches stay a
// small share of its work; the first segments are
// smaller (4, 8, 16), so that the device starts early, and so are the
// last (half of what the previous gathering had left), so that little
// device work is left when the host has gathered the last op.
const (
	segmentMax   = 32
	segmentFirst = 4
)

// SegmentLimit is the size of gathering's n-th segment (see above).
func SegmentLimit(n, done, last int) int {
	l := segmentMax
	if n < 3 {
		l = min(l, segmentFirst<<n)
	}
	if left := last - done; last > 0 && left > 0 {
		l = min(l, max(segmentFirst, left/2))
	}
	return l
}

// SegmentPlanner sizes the segments of a Recorder's gatherings from what
// each costs: hostUs, the host's time to gather one op; deviceUs, the
// device's time per gathered op; launchUs, the host's time per launch.
// SegmentLimit's fixed sizes fit neither side: where the device is slower
// per op than the host (a GPU of a few µs a kernel beside an Executor of
// a few µs an op: an H100 at batch 1, BENCHMARKS.md), its doubling first
// segments leave the device idle while the host gathers twice what it
// just ran; where the host is the slower, its segments of 32 leave the
// device a long tail after the last op is gathered. A plan cuts the
// gathering where the device ends soonest by these costs (planSegments):
// 7% sooner than SegmentLimit's for an H100's decode step, 4–6% where
// the host is the slower (backends TestSegmentPlanSooner). Until the
// costs come from planEvidence gathered ops, the segments are
// SegmentLimit's. A plan is kept while the gathering's size and each
// estimate stay within planSlack of those it was made with, so that a
// GPU replays the same graphs step after step (sim TestSegmentPlanDecode).
//
// The device's time per op comes from the gatherings of about the size
// planned for (within planSlack; Ran) once they hold planEvidence ops,
// else from the caller's mean over all: a program that alternates ways
// of running a step (cmd/infer's step modes on h100 at batch 1: the GPU
// alone, 71 ops at 5.83 µs, and a placement whose 26 GPU ops are its
// larger ones) otherwise plans each from a mean of both (6.02 µs), a
// launch too many for the first, 6 µs a step (TestSegmentPlanBySize).
// The records of planSizes sizes are kept, the one with the fewest ops
// dropped for a new size, so that a change back keeps its plan and
// replays its graphs.
type SegmentPlanner struct {
	plan  []int // the running gathering's
	sizes map[int]*sizeRecord
}

// sizeRecord is what a SegmentPlanner keeps for gatherings of about one
// size: the device's time of the ops run in them, and their plan with
// the estimates it was made from (sized: the device's from these ops).
type sizeRecord struct {
	deviceUs      float64
	ops           int64
	plan          []int
	planned       bool
	sized         bool
	host, dev, la float64
}

// planSlack is how far an estimate, or a gathering's size, may move
// before a plan is made anew; planEvidence, how many gathered ops the
// estimates must come from; planTie, how much sooner a plan of more
// launches must end to be chosen; planUnits, the most places a plan
// chooses its cuts among; planSizes, the sizes whose records are kept.
const (
	planSlack    = 0.2
	planEvidence = 256
	planTie      = 0.001
	planUnits    = 1024
	planSizes    = 8
)

// Plan sets the plan for a gathering of n ops (the previous one's) from
// the estimates (µs; non-positive or NaN: unknown), measured over
// evidence gathered ops; the device's, once gatherings of about n ops
// have run planEvidence (Ran), from theirs.
func (p *SegmentPlanner) Plan(n int, hostUs, deviceUs, launchUs float64, evidence int64) {
	if evidence < planEvidence {
		hostUs = 0 // unknown
	}
	r := p.record(n)
	sized := r.ops >= planEvidence
	if sized {
		deviceUs = r.deviceUs / float64(r.ops)
	}
	if !(r.planned && r.sized == sized && near(hostUs, r.host) && near(deviceUs, r.dev) && near(launchUs, r.la)) {
		r.plan, r.planned, r.sized = planSegments(n, hostUs, deviceUs, launchUs), true, sized
		r.host, r.dev, r.la = hostUs, deviceUs, launchUs
	}
	p.plan = r.plan
}

// Ran adds ops run on the device in deviceUs, of a gathering planned for
// n ops.
func (p *SegmentPlanner) Ran(n int, deviceUs float64, ops int64) {
	r := p.record(n)
	r.deviceUs += deviceUs
	r.ops += ops
}

// RanOps reports how many ops gatherings of about n ops have run (Ran).
func (p *SegmentPlanner) RanOps(n int) int64 {
	if r := p.find(n); r != nil {
		return r.ops
	}
	return 0
}

// find returns the record of the size nearest n within planSlack (the
// smaller of two as near), nil if there is none: a step whose size
// varies a little, as a mixture of experts' with its routing, keeps one
// plan.
func (p *SegmentPlanner) find(n int) *sizeRecord {
	best := -1
	for m := range p.sizes {
		if d, b := abs(n-m), abs(n-best); near(float64(n), float64(m)) && (best < 0 || d < b || d == b && m < best) {
			best = m
		}
	}
	if best < 0 {
		return nil
	}
	return p.sizes[best]
}

// record returns find's record for n, else one made anew at n, in place
// of the one with the fewest ops when planSizes are kept.
func (p *SegmentPlanner) record(n int) *sizeRecord {
	if r := p.find(n); r != nil {
		return r
	}
	if p.sizes == nil {
		p.sizes = map[int]*sizeRecord{}
	}
	if len(p.sizes) >= planSizes {
		least := -1
		for m, r := range p.sizes {
			if l := p.sizes[least]; least < 0 || r.ops < l.ops || r.ops == l.ops && m < least {
				least = m
			}
		}
		delete(p.sizes, least)
	}
	r := &sizeRecord{}
	p.sizes[n] = r
	return r
}

func abs(x int) int { return max(x, -x) }

// near reports whether x is within planSlack of y.
func near(x, y float64) bool { return math.Abs(x-y) <= planSlack*math.Abs(y) }

// Limit is the size of the gathering's k-th segment: the plan's (past
// it, what is left goes at Flush, or in segments of segmentMax where the
// gathering outgrows the plan), else SegmentLimit(k, done, last).
func (p *SegmentPlanner) Limit(k, done, last int) int {
	switch {
	case k < len(p.plan):
		return p.plan[k]
	case p.plan != nil:
		return segmentMax
	}
	return SegmentLimit(k, done, last)
}

// planSegments returns the sizes of the segments launched before the
// last (which Flush launches) of a gathering of n ops: of the ways to
// cut it into segments of at most segmentMax ops, each but the last of
// at least segmentFirst (a step of n ops keeps at most n/segmentFirst
// graphs), the one by which the device ends soonest when the host
// gathers an op in hostUs and launches in launchUs and the device runs
// an op in deviceUs, both idle at the start; of those that end alike,
// within planTie, the one of fewest launches (an end sooner by less is
// within what the estimates can tell, and a launch costs the host's CPU
// for sure). It returns nil where an estimate is
// unknown (SegmentLimit's apply then, as Limit reads a nil plan).
//
// A cut is found by dynamic programming over (ops launched, launches):
// the host's clock is then fixed, and of two cuts that reach it the one
// whose device is free sooner is never worse, so each ops count keeps
// the cuts no other beats in both launches and device time. A plan of
// 207 ops takes 0.2–0.7 ms, of 1,600 to 8,192 (cut on units of 2 to 8)
// at most 2.5 ms (BenchmarkSegmentPlan), once; past 8,192 ops it
// returns nil.
func planSegments(n int, hostUs, deviceUs, launchUs float64) []int {
	if !(n > 1 && hostUs > 0 && deviceUs > 0 && launchUs >= 0) {
		return nil
	}
	// Past planUnits ops the cuts fall on units of g ops (the last unit
	// what is left), which keeps a plan's cost bounded; g, a power of two
	// up to segmentMax/segmentFirst, keeps segmentMax a whole number of
	// units.
	g := 1
	for g*planUnits < n {
		g *= 2
	}
	if g > segmentMax/segmentFirst {
		return nil
	}
	units, least, most := (n+g-1)/g, max(1, segmentFirst/g), segmentMax/g
	type cut struct {
		launches int
		freeUs   float64 // when the device has run the ops launched
		from     int     // the ops launched before the last segment
		prev     int     // the index of the cut that reached from
	}
	// front[i] is the cuts of the first i ops that no other beats in both
	// launches and freeUs.
	opsTo := func(u int) int { return min(n, u*g) }
	front := make([][]cut, units+1)
	front[0] = []cut{{}}
	for i := range units {
		for k, c := range front[i] {
			for s := 1; s <= most && i+s <= units; s++ {
				if s < least && i+s < units {
					continue
				}
				j := i + s
				host := float64(opsTo(j))*hostUs + float64(c.launches+1)*launchUs
				next := cut{launches: c.launches + 1, freeUs: max(c.freeUs, host) + float64(opsTo(j)-opsTo(i))*deviceUs, from: i, prev: k}
				if slices.ContainsFunc(front[j], func(o cut) bool { return o.launches <= next.launches && o.freeUs <= next.freeUs }) {
					continue
				}
				front[j] = append(slices.DeleteFunc(front[j], func(o cut) bool {
					return next.launches <= o.launches && next.freeUs <= o.freeUs
				}), next)
			}
		}
	}
	soonest := math.Inf(1)
	for _, c := range front[units] {
		soonest = min(soonest, c.freeUs)
	}
	best := -1
	for k, c := range front[units] {
		if c.freeUs <= soonest*(1+planTie) && (best < 0 || c.launches < front[units][best].launches) {
			best = k
		}
	}
	var sizes []int
	for i, k := units, best; i > 0; {
		c := front[i][k]
		sizes = append(sizes, opsTo(i)-opsTo(c.from))
		i, k = c.from, c.prev
	}
	slices.Reverse(sizes)
	return sizes[:len(sizes)-1]
}
