package eval

import (
	"math"
	"slices"

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
	e.factor = make([][]float64, len(cuts))
	for s, at := range cuts {
		e.factor[s] = make([]float64, e.nA)
		for a, arm := range e.arms {
			e.factor[s][a], _ = sim.Slowdown(arm.Events, at)
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
// to arm to: every non-shared end's link is crossed once.
func (e *Env) linkUs(bytes int64, from, to int) float64 {
	if from == to || bytes <= 0 {
		return 0
	}
	var us float64
	if from >= 0 {
		us += e.arms[from].Profile.LinkUs(bytes)
	}
	if to >= 0 {
		us += e.arms[to].Profile.LinkUs(bytes)
	}
	return us
}

// mean is the expected compute cost of op t on arm a in segment s.
func (e *Env) mean(o opRec, s, a int) float64 {
	return e.keys[o.key].base[a] * e.arms[a].Profile.SpikeMean() * e.factor[s][a]
}

// solveOracle finds the oracle's assignment per segment × bucket, its
// expected cost at every checkpoint, and the per-shape oracle's total.
func (e *Env) solveOracle() {
	nb := len(e.bNames)
	unit, assign, marginal := e.solve(nb, func(o opRec) int { return int(o.bucket) })
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
	unit, assign, _ = e.solve(nk, func(o opRec) int { return int(o.key) })
	e.shapeOracleUs = e.expected(unit, assign, nk, nil)
}

// solve assigns an arm to each unit, a segment × one of ng groups (group
// of an op), by coordinate descent from the compute-optimal start, and
// returns each op's unit, the assignment and each unit's mean cost per
// op on each arm, the others fixed.
func (e *Env) solve(ng int, group func(opRec) int) (unit, assign []int32, marginal []float64) {
	nA, n := e.nA, len(e.ops)
	nu := len(e.bounds) * ng
	// ops of each unit (segment × group), CSR.
	start := make([]int, nu+1)
	unit = make([]int32, n)
	seg := 0
	for t, o := range e.ops {
		seg = e.segOf(int64(t), seg)
		unit[t] = int32(seg*ng + group(o))
		start[unit[t]+1]++
	}
	for u := range nu {
		start[u+1] += start[u]
	}
	members := make([]int32, n)
	fill := slices.Clone(start[:nu])
	for t := range n {
		members[fill[unit[t]]] = int32(t)
		fill[unit[t]]++
	}
	assign = make([]int32, nu)
	marginal = make([]float64, nu*nA)
	cost := make([]float64, nA)
	// unitCost fills cost[a]: the unit's total if it moved to a, the others fixed.
	unitCost := func(u int) {
		s := u / ng
		for a := range nA {
			cost[a] = 0
		}
		for _, t := range members[start[u]:start[u+1]] {
			o := e.ops[t]
			prevUnit := int32(-1)
			if t > 0 {
				prevUnit = unit[t-1]
			}
			nextUnit := int32(-1)
			if int(t)+1 < n {
				nextUnit = unit[t+1]
			}
			for a := range nA {
				c := e.mean(o, s, a)
				from := -1
				if prevUnit >= 0 {
					from = int(assign[prevUnit])
					if prevUnit == int32(u) {
						from = a
					}
				}
				c += e.linkUs(o.act, from, a)
				if nextUnit >= 0 && nextUnit != int32(u) {
					c += e.linkUs(e.ops[t+1].act, a, int(assign[nextUnit]))
				}
				cost[a] += c
			}
		}
	}
	for u := range nu { // compute-optimal start
		s := u / ng
		best, bestC := 0, math.Inf(1)
		for a := range nA {
			var c float64
			for _, t := range members[start[u]:start[u+1]] {
				c += e.mean(e.ops[t], s, a)
			}
			if c < bestC {
				best, bestC = a, c
			}
		}
		assign[u] = int32(best)
	}
	for range 20 {
		changed := false
		for u := range nu {
			if start[u] == start[u+1] {
				continue
			}
			unitCost(u)
			cur := int(assign[u])
			best := cur
			for a := range nA {
				if cost[a] < cost[best]*(1-1e-12) {
					best = a
				}
			}
			if best != cur {
				assign[u] = int32(best)
				changed = true
			}
		}
		if !changed {
			break
		}
	}
	for u := range nu {
		if m := start[u+1] - start[u]; m > 0 {
			unitCost(u)
			for a := range nA {
				marginal[u*nA+a] = cost[a] / float64(m)
			}
		}
	}
	return unit, assign, marginal
}

// expected returns the expected cost of running each op t on
// assign[unit[t]], op by op, warm-up and transfers included; each (nil:
// none) sees every op with its arm and the total before it.
func (e *Env) expected(unit, assign []int32, ng int, each func(t int, o opRec, a int, total float64)) float64 {
	nA := e.nA
	warm := make([]bool, len(e.kernels)*nA)
	var total float64
	loc := -1
	for t, o := range e.ops {
		a := int(assign[unit[t]])
		if each != nil {
			each(t, o, a, total)
		}
		c := e.mean(o, int(unit[t])/ng, a)
		if w := &warm[int(e.keys[o.key].kernel)*nA+a]; !*w {
			*w = true
			if f := e.arms[a].Profile.WarmupFactor; f > 1 {
				c *= f
			}
		}
		total += c + e.linkUs(o.act, loc, a)
		loc = a
	}
	return total
}
