package eval

import (
	"math"
	"slices"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/sim"
)

// clock times one run on a sim.Timeline of the Env's execution model:
// each arm's compute queue, and its link where it has one. It gives
// every op its place on the critical path (DESIGN.md § Execution models).
type clock struct {
	tl         *sim.Timeline
	serial     bool      // sim.Serial: nothing overlaps, so the Timeline is skipped
	busy       []float64 // under serial: per lane (comp, then link), µs
	profs      []*sim.Profile
	comp, link []int     // lanes per arm; link -1 where the arm shares host memory
	ends       []float64 // end of each op run so far, µs (not under serial)
	arms       []int8    // the arm each op ran on
	linkF      []float64 // per arm, the link slowdown of the op being run (Env.linkF)
}

func newClock(m sim.ExecModel, arms []sim.Arm, ops int) *clock {
	c := &clock{tl: sim.NewTimeline(m), serial: m == sim.Serial, arms: make([]int8, ops)}
	if !c.serial {
		c.ends = make([]float64, ops)
	}
	for _, a := range arms {
		c.profs = append(c.profs, a.Profile)
		c.comp = append(c.comp, c.tl.Lane(a.Profile.Name))
		l := -1
		if !a.Profile.Shared {
			l = c.tl.Lane(a.Profile.Name + " link")
		}
		c.link = append(c.link, l)
	}
	return c
}

// input is one group of an op's inputs: the op that produced them (-1:
// none, host memory), the arm it ran on (-1: host) and their bytes.
type input struct {
	op, arm int
	bytes   int64
}

// inputs returns op t's input groups (opInputs), each with the arm its
// op ran on.
func (c *clock) inputs(t int, o *opRec, afters [][]int, buf *[adaptive.MaxInputs]input) []input {
	ins := opInputs(t, o, afters, buf)
	for i := range ins {
		if ins[i].op >= 0 {
			ins[i].arm = int(c.arms[ins[i].op])
		}
	}
	return ins
}

// opInputs returns op t's input groups, their arm unset (-1): one per op
// it reads (sim.Op.After; the op just before when After is nil), its
// activation bytes split evenly among them. An op with no activations
// has none.
func opInputs(t int, o *opRec, afters [][]int, buf *[adaptive.MaxInputs]input) []input {
	if o.act <= 0 {
		return buf[:0]
	}
	var after []int
	if o.after > 0 {
		after = afters[o.after]
	}
	n := max(len(after), 1)
	n = min(n, adaptive.MaxInputs)
	share := o.act / int64(n)
	for i := range n {
		back := 1
		if len(after) > 0 {
			back = after[i]
		}
		in := input{op: max(t-back, -1), arm: -1, bytes: share}
		if i == n-1 {
			in.bytes = o.act - share*int64(n-1)
		}
		buf[i] = in
	}
	return buf[:n]
}

// flow is one input group as the oracle reads it: the other op (the
// producer of an op's input, or the consumer of its output; -1: host
// memory) and the bytes.
type flow struct {
	op    int32
	bytes int64
}

// flows fills e.ins and e.outs: each op's input groups as Run charges
// them (opInputs), and the groups other ops read from it.
func (e *Env) flows() {
	n := len(e.ops)
	e.inStart, e.outStart = make([]int32, n+1), make([]int32, n+1)
	var buf [adaptive.MaxInputs]input
	for t := range e.ops {
		ins := opInputs(t, &e.ops[t], e.afters, &buf)
		for _, in := range ins {
			e.ins = append(e.ins, flow{op: int32(in.op), bytes: in.bytes})
			if in.op >= 0 {
				e.outStart[in.op+1]++
			}
		}
		e.inStart[t+1] = int32(len(e.ins))
	}
	for t := range n {
		e.outStart[t+1] += e.outStart[t]
	}
	e.outs = make([]flow, e.outStart[n])
	fill := slices.Clone(e.outStart[:n])
	for t := range n {
		for _, f := range e.ins[e.inStart[t]:e.inStart[t+1]] {
			if f.op >= 0 {
				e.outs[fill[f.op]] = flow{op: int32(t), bytes: f.bytes}
				fill[f.op]++
			}
		}
	}
}

// queueWait fills res.QueueUs: each arm's expected wait before the op
// could start there beyond the earliest start on any arm. The start is
// StarPU dmda's expected start: the later of the arm's queue being free
// and the op's inputs being ready (the copies are priced apart, as
// Select prices transfers); without the inputs a chain of ops behind a
// busy GPU would see an idle CPU as free, though the CPU must wait for
// the same input. Only the differences order the arms, and a wait that
// every arm shares would drown the hysteresis margin, which scales with
// the cost (TestQueueWaitRelative).
func (c *clock) queueWait(res *adaptive.Residency, ins []input) {
	if c.tl.Model() == sim.Serial {
		return // the host waits for every op: no queue is ever busy
	}
	ready := 0.0
	for _, in := range ins {
		if in.op >= 0 {
			ready = max(ready, c.ends[in.op])
		}
	}
	ready -= c.tl.HostUs()
	var wait [adaptive.MaxBackends]float64
	least := math.Inf(1)
	for a, l := range c.comp {
		wait[a] = max(c.tl.FreeInUs(l), ready)
		least = min(least, wait[a])
	}
	for a := range c.comp {
		res.QueueUs[a] = float32(wait[a] - least)
	}
}

// run places op t, of us µs on arm a, on the timeline after its inputs
// have reached a (each copy on the links it crosses), and makes the
// host wait for it when wait is set.
//
// Rule: on a GPU arm, the host waits for an input made on another arm
// (its op's end, or the copy that brought it to host memory) before it
// issues the copy onto a or the op; a CPU arm's queue waits for such an
// input itself and pays its resume (sim.Timeline.EnqueueWaiting).
// Reason: the devices the harness stands for do so (sim.Device,
// backends/rocm's awaitForeign, backends/cpu's workers); waited for on
// the lane alone, a handoff between a CPU and a GPU cost no host time
// and no resume (TestGPUWaitsForCPUOnHost, TestCPUWaitsForGPUResumes).
func (c *clock) run(t int, ins []input, a int, us float64, wait bool) {
	c.arms[t] = int8(a)
	if c.serial {
		c.runSerial(ins, a, us)
		return
	}
	p := c.profs[a]
	ready := 0.0
	var buf [adaptive.MaxInputs]sim.Waited
	waits := buf[:0]
	for _, in := range ins {
		r := 0.0
		if in.op >= 0 {
			r = c.ends[in.op]
		}
		moved := in.arm != a && in.bytes > 0
		if moved {
			r = c.copyOver(in.arm, in.bytes, r)
		}
		other := in.op >= 0 && in.arm != a // made on another arm
		if other && p.Kind == backends.GPU {
			c.tl.Wait(r, c.profs[in.arm].SyncUs)
		}
		if moved {
			r = c.copyOver(a, in.bytes, r)
		}
		if other && p.Kind != backends.GPU && c.link[a] < 0 { // the CPU's worker waits for it
			waits = append(waits, sim.Waited{EndUs: r, SyncUs: c.profs[in.arm].SyncUs})
			continue
		}
		ready = max(ready, r)
	}
	_, end := c.tl.EnqueueWaiting(c.comp[a], p.IssueUs, ready, waits, us, p.SyncUs)
	c.ends[t] = end
	if wait {
		c.tl.Wait(end, p.SyncUs)
	}
}

// runSerial accounts an op under sim.Serial, where the makespan is the
// sum of the durations: only each lane's busy time is kept, and the
// regret runs skip the Timeline's work per op.
func (c *clock) runSerial(ins []input, a int, us float64) {
	if c.busy == nil {
		c.busy = make([]float64, 2*len(c.comp))
	}
	c.busy[a] += us
	for _, in := range ins {
		if in.arm == a || in.bytes <= 0 {
			continue
		}
		for _, x := range [2]int{in.arm, a} {
			if x >= 0 && c.link[x] >= 0 {
				c.busy[len(c.comp)+x] += c.linkUs(x, in.bytes)
			}
		}
	}
}

// copyOver queues a copy of bytes over arm a's link after readyUs and
// returns its end; an arm without a link (or the host, -1) costs nothing.
func (c *clock) copyOver(a int, bytes int64, readyUs float64) float64 {
	if a < 0 || c.link[a] < 0 {
		return readyUs
	}
	p := c.profs[a]
	_, end := c.tl.Enqueue(c.link[a], p.IssueUs, readyUs, c.linkUs(a, bytes), p.SyncUs)
	return end
}

// linkUs is a copy of bytes over arm a's link, slowed by its link factor
// (1 before the Env sets one).
func (c *clock) linkUs(a int, bytes int64) float64 {
	us := c.profs[a].LinkUs(bytes)
	if c.linkF != nil {
		us *= c.linkF[a]
	}
	return us
}

// finish fills res's timing figures once the run is over.
func (c *clock) finish(res *Result) {
	if c.serial {
		res.Model, res.MakespanUs = sim.Serial, res.TotalUs
		res.BusyUs = make([]float64, len(c.comp))
		copy(res.BusyUs, c.busy)
		for _, b := range c.busy {
			res.BoundUs = max(res.BoundUs, b)
		}
		return
	}
	s := c.tl.Stats()
	res.Model = s.Model
	res.MakespanUs, res.BoundUs = s.MakespanUs, s.BoundUs()
	res.IssueUs, res.SyncUs = s.IssueUs, s.SyncUs
	res.BusyUs = make([]float64, len(c.comp))
	for a, l := range c.comp {
		res.BusyUs[a] = s.Lanes[l].BusyUs
	}
}

// residency fills t's Res and Transfer from its input groups: where each
// group lies (host memory for the workload's first inputs) and the bytes
// each arm lacks.
func (e *Env) residency(t *Task, ins []input) {
	t.Res = adaptive.Residency{}
	for a := range e.nA {
		t.Transfer[a] = 0
	}
	for _, in := range ins {
		on := adaptive.Host
		if in.arm >= 0 {
			on = adaptive.Backend(in.arm)
		}
		t.Res.Add(on, in.bytes)
		for a := range e.nA {
			if e.linkUs(in.bytes, in.arm, a, 0) > 0 { // whether a link is crossed
				t.Transfer[a] += float64(in.bytes)
			}
		}
	}
}

// afterIndex returns the index of after in e.afters, adding it.
func (e *Env) afterIndex(after []int) int32 {
	if len(after) == 0 {
		return 0
	}
	if e.afterOf == nil {
		e.afters, e.afterOf = [][]int{nil}, map[*int]int32{}
	}
	i, ok := e.afterOf[&after[0]]
	if !ok || len(e.afters[i]) != len(after) {
		i = int32(len(e.afters))
		e.afters = append(e.afters, after)
		e.afterOf[&after[0]] = i
	}
	return i
}
