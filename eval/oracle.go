package eval

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/sim"
)

// segments splits the stream where an event starts or ends.
func (e *Env) segments() {
	n := int64(len(e.ops))
	cuts := []int64{0}
	for _, a := range e.arms {
		for _, ev := range a.Events {
			cuts = append(cuts, ev.At)
			if ev.Span > 0 {
				cuts = append(cuts, ev.At+ev.Span)
			}
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	for len(cuts) > 1 && cuts[len(cuts)-1] >= n {
		cuts = cuts[:len(cuts)-1]
	}
	e.bounds = cuts
	e.factor, e.linkF = make([][]float64, len(cuts)), make([][]float64, len(cuts))
	for s, at := range cuts {
		e.factor[s], e.linkF[s] = make([]float64, e.nA), make([]float64, e.nA)
		for a, arm := range e.arms {
			e.factor[s][a], e.linkF[s][a] = sim.Slowdown(arm.Events, at)
		}
	}
}

// segOf returns the segment of op t, advancing from hint.
func (e *Env) segOf(t int64, hint int) int {
	for hint+1 < len(e.bounds) && t >= e.bounds[hint+1] {
		hint++
	}
	return hint
}

// linkUs is the true time to move bytes from arm from (-1: host memory)
// to arm to in segment s: every non-shared end's link is crossed once.
//
// Rule: each end's link is slowed by its arm's link factor in s
// (sim.Slowdown: Contention slows the link as well as compute). Reason:
// the harness accepts contention events as sim.Device replays them, and
// charged their compute alone, a throttle's effect under another name
// (TestContentionSlowsLinks).
func (e *Env) linkUs(bytes int64, from, to, s int) float64 {
	if from == to || bytes <= 0 {
		return 0
	}
	var us float64
	if from >= 0 {
		us += e.arms[from].Profile.LinkUs(bytes) * e.linkF[s][from]
	}
	if to >= 0 {
		us += e.arms[to].Profile.LinkUs(bytes) * e.linkF[s][to]
	}
	return us
}

// draw samples, for seed, every op's multiplicative noise on every arm
// (lognormal with the shape's σ, times SpikeFactor with SpikeProb) and
// solves the oracle on those draws. Every policy run with seed is scored
// on the same draws (common random numbers), so a fixed assignment costs
// the same whichever policy plays it, and none beats the oracle's.
func (e *Env) draw(seed uint64) {
	if e.drawn && e.drawSeed == seed {
		return
	}
	r := rand.New(rand.NewPCG(seed, 0xa7e5))
	n := len(e.ops) * e.nA
	if cap(e.noise) < n {
		e.noise = make([]float64, n)
	}
	e.noise = e.noise[:n]
	for t, o := range e.ops {
		k := &e.keys[o.key]
		for a, arm := range e.arms {
			z := 1.0
			if sg := k.sigma[a]; sg > 0 {
				z = math.Exp(sg*r.NormFloat64() - sg*sg/2)
			}
			if p := arm.Profile; p.SpikeProb > 0 && r.Float64() < p.SpikeProb {
				z *= p.SpikeFactor
			}
			e.noise[t*e.nA+a] = z
		}
	}
	e.drawSeed, e.drawn = seed, true
	e.solveOracle()
}

// cost is op t's drawn compute µs on arm a in segment s, before warm-up.
func (e *Env) cost(t, s, a int) float64 {
	return e.keys[e.ops[t].key].base[a] * e.factor[s][a] * e.noise[t*e.nA+a]
}

// warmUs is the warm-up surcharge of op t on arm a: its first run of its
// kernel there costs WarmupFactor × its drawn duration.
func (e *Env) warmUs(t, s, a int) float64 {
	if f := e.arms[a].Profile.WarmupFactor; f > 1 {
		return (f - 1) * e.cost(t, s, a)
	}
	return 0
}

// solveOracle finds the oracle's assignment per segment × bucket on the
// drawn durations, its cost at every checkpoint, and the per-shape
// oracle's total (started from the bucket oracle's assignment too, so it
// is never above it).
func (e *Env) solveOracle() {
	nb := len(e.bNames)
	bucketOf := func(t int) int { return int(e.ops[t].bucket) }
	unit, assign, marginal := e.solve(nb, bucketOf, nil)
	e.assign, e.marginal = assign, marginal
	e.oShare = make([]int64, e.nA)
	e.oBucket = make([][]int64, nb)
	for b := range e.oBucket {
		e.oBucket[b] = make([]int64, e.nA)
	}
	e.oracle = e.oracle[:0]
	e.oracleUs = e.expected(unit, assign, nb, func(t int, o opRec, a int, total float64) {
		if int64(t)%e.every == 0 {
			e.oracle = append(e.oracle, total)
		}
		e.oShare[a]++
		e.oBucket[o.bucket][a]++
	})
	e.oracle = append(e.oracle, e.oracleUs)
	nk := len(e.keys)
	keyBucket := make([]int32, nk)
	for _, o := range e.ops {
		keyBucket[o.key] = o.bucket
	}
	fromBuckets := func(u int) int32 { return assign[(u/nk)*nb+int(keyBucket[u%nk])] }
	unit, kassign, _ := e.solve(nk, func(t int) int { return int(e.ops[t].key) }, fromBuckets)
	e.shapeOracleUs = e.expected(unit, kassign, nk, nil)
}

// unitSet is a partition of the ops into units (segment × group), each
// with its ops in time order, and, per kernel, the units that run it and
// their first op of it: what the warm-up of an assignment depends on.
type unitSet struct {
	ng, nu  int
	unit    []int32 // per op
	start   []int   // CSR over members
	members []int32
	// kernels[u] are the kernels of unit u; firsts[k] the (unit, first op)
	// pairs of kernel k.
	kernels [][]int32
	firsts  [][][2]int32
}

func (e *Env) units(ng int, group func(t int) int) *unitSet {
	n := len(e.ops)
	us := &unitSet{ng: ng, nu: len(e.bounds) * ng, unit: make([]int32, n), members: make([]int32, n)}
	us.start = make([]int, us.nu+1)
	seg := 0
	for t := range e.ops {
		seg = e.segOf(int64(t), seg)
		us.unit[t] = int32(seg*ng + group(t))
		us.start[us.unit[t]+1]++
	}
	for u := range us.nu {
		us.start[u+1] += us.start[u]
	}
	fill := slices.Clone(us.start[:us.nu])
	for t := range n {
		us.members[fill[us.unit[t]]] = int32(t)
		fill[us.unit[t]]++
	}
	if !e.warms {
		return us // unitCost needs no kernels
	}
	us.kernels = make([][]int32, us.nu)
	us.firsts = make([][][2]int32, len(e.kernels))
	for u := range us.nu {
		for _, t := range us.members[us.start[u]:us.start[u+1]] {
			k := e.keys[e.ops[t].key].kernel
			if !slices.Contains(us.kernels[u], k) {
				us.kernels[u] = append(us.kernels[u], k)
				us.firsts[k] = append(us.firsts[k], [2]int32{int32(u), t})
			}
		}
	}
	return us
}

// solve assigns an arm to each unit (segment × one of ng groups, group of
// op t) by coordinate descent on the drawn durations: from the
// compute-optimal assignment, from each arm for every unit, and from
// start(u) when given, keeping the cheapest result. Each move is a
// unit's exact change of the total (compute, transfers in and out,
// warm-up), so the result costs no more than any of its starts: no fixed
// arm beats the oracle. It returns each op's unit, the assignment and
// each unit's cost per op on each arm, the others fixed.
func (e *Env) solve(ng int, group func(t int) int, start func(u int) int32) (unit, assign []int32, marginal []float64) {
	us := e.units(ng, group)
	var starts [][]int32
	opt := make([]int32, us.nu)
	for u := range us.nu { // compute-optimal
		s, best, bestC := u/ng, 0, math.Inf(1)
		for a := range e.nA {
			var c float64
			for _, t := range us.members[us.start[u]:us.start[u+1]] {
				c += e.cost(int(t), s, a)
			}
			if c < bestC {
				best, bestC = a, c
			}
		}
		opt[u] = int32(best)
	}
	starts = append(starts, opt)
	for a := range e.nA {
		c := make([]int32, us.nu)
		for u := range c {
			c[u] = int32(a)
		}
		starts = append(starts, c)
	}
	if start != nil {
		c := make([]int32, us.nu)
		for u := range c {
			c[u] = start(u)
		}
		starts = append(starts, c)
	}
	// Descend from the compute-optimal start; another start is descended
	// from only when it is cheaper as it stands (a fixed arm can be, where
	// transfers or warm-up dominate), which keeps the result no dearer
	// than any start at a fraction of the descents.
	assign = starts[0]
	e.descend(us, assign)
	best := e.expected(us.unit, assign, ng, nil)
	for _, st := range starts[1:] {
		if e.expected(us.unit, st, ng, nil) >= best {
			continue
		}
		e.descend(us, st)
		if total := e.expected(us.unit, st, ng, nil); total < best {
			best, assign = total, st
		}
	}
	marginal = make([]float64, us.nu*e.nA)
	cost := make([]float64, e.nA)
	for u := range us.nu {
		if m := us.start[u+1] - us.start[u]; m > 0 {
			e.unitCost(us, assign, u, cost)
			for a := range e.nA {
				marginal[u*e.nA+a] = cost[a] / float64(m)
			}
		}
	}
	return us.unit, assign, marginal
}

// descend moves units of assign to the arm that lowers the total until
// none does (or 50 sweeps).
func (e *Env) descend(us *unitSet, assign []int32) {
	cost := make([]float64, e.nA)
	for range 50 {
		changed := false
		for u := range us.nu {
			if us.start[u] == us.start[u+1] {
				continue
			}
			e.unitCost(us, assign, u, cost)
			cur := int(assign[u])
			best := cur
			for a := range e.nA {
				if cost[a] < cost[best] && cost[a] < cost[cur]-1e-9*math.Abs(cost[cur]) {
					best = a
				}
			}
			if best != cur {
				assign[u] = int32(best)
				changed = true
			}
		}
		if !changed {
			return
		}
	}
}

// unitCost fills cost[a] with unit u's share of the total if it moved to
// arm a, the others fixed: its ops' compute, the transfers into them and
// out of them to another unit, and the change of its kernels' warm-up.
func (e *Env) unitCost(us *unitSet, assign []int32, u int, cost []float64) {
	s := u / us.ng
	for a := range e.nA {
		cost[a] = 0
	}
	for _, t := range us.members[us.start[u]:us.start[u+1]] {
		ins := e.ins[e.inStart[t]:e.inStart[t+1]]
		outs := e.outs[e.outStart[t]:e.outStart[t+1]]
		for a := range e.nA {
			c := e.cost(int(t), s, a)
			for _, f := range ins {
				from := -1
				if f.op >= 0 {
					from = int(assign[us.unit[f.op]])
					if us.unit[f.op] == int32(u) {
						from = a
					}
				}
				c += e.linkUs(f.bytes, from, a, s)
			}
			for _, f := range outs { // copied when the reader runs, in its segment
				if v := us.unit[f.op]; v != int32(u) {
					c += e.linkUs(f.bytes, a, int(assign[v]), int(v)/us.ng)
				}
			}
			cost[a] += c
		}
	}
	if !e.warms {
		return
	}
	for _, k := range us.kernels[u] {
		cur := e.warmOf(us, assign, k, u, int(assign[u]))
		for a := range e.nA {
			cost[a] += e.warmOf(us, assign, k, u, a) - cur
		}
	}
}

// warmOf is kernel k's warm-up surcharge over the whole stream under
// assign with unit u on arm a: on each arm, its first op there pays.
func (e *Env) warmOf(us *unitSet, assign []int32, k int32, u, a int) float64 {
	var first [adaptive.MaxBackends]int32
	for i := range e.nA {
		first[i] = -1
	}
	for _, f := range us.firsts[k] {
		arm := int(assign[f[0]])
		if int(f[0]) == u {
			arm = a
		}
		if first[arm] < 0 || f[1] < first[arm] {
			first[arm] = f[1]
		}
	}
	var w float64
	for arm := range e.nA {
		if t := first[arm]; t >= 0 {
			w += e.warmUs(int(t), int(us.unit[t])/us.ng, arm)
		}
	}
	return w
}

// expected returns the drawn cost of running each op t on
// assign[unit[t]], op by op, warm-up and transfers included; each (nil:
// none) sees every op with its arm and the total before it.
func (e *Env) expected(unit, assign []int32, ng int, each func(t int, o opRec, a int, total float64)) float64 {
	nA := e.nA
	warm := make([]bool, len(e.kernels)*nA)
	var total float64
	for t, o := range e.ops {
		a := int(assign[unit[t]])
		if each != nil {
			each(t, o, a, total)
		}
		s := int(unit[t]) / ng
		c := e.cost(t, s, a)
		if w := &warm[int(e.keys[o.key].kernel)*nA+a]; !*w {
			*w = true
			if f := e.arms[a].Profile.WarmupFactor; f > 1 {
				c *= f // as Run charges it, to the last bit
			}
		}
		var x float64
		for _, f := range e.ins[e.inStart[t]:e.inStart[t+1]] {
			from := -1
			if f.op >= 0 {
				from = int(assign[unit[f.op]])
			}
			x += e.linkUs(f.bytes, from, a, s)
		}
		total += c + x
	}
	return total
}
