package main

import (
	"math"
	"math/rand/v2"
)

// opCosts are one op's durations on every backend: its measurements, and
// for each backend without one a counterfactual draw from a stream seeded
// by the seed and the op's place in the trace. Every policy that puts the
// op on a backend is charged the same duration there (common random
// numbers), and the oracle is judged on the same durations.
type opCosts struct {
	seed uint64
	pcg  *rand.PCG
	r    *rand.Rand
	us   [maxArms]float64
	src  [maxArms]source
	have [maxArms]bool
}

func newOpCosts(seed uint64) *opCosts {
	pcg := rand.NewPCG(seed, 0)
	return &opCosts{seed: seed, pcg: pcg, r: rand.New(pcg)}
}

// fill sets the costs of the rec-th spooled event, ent of bucket b.
func (c *opCosts) fill(s *scanner, rec int64, b *bucketState, ent *specEntry, meas []measurement) {
	c.have = [maxArms]bool{}
	for _, m := range meas {
		c.us[m.arm], c.src[m.arm], c.have[m.arm] = m.us, m.src, true
	}
	c.pcg.Seed(c.seed, uint64(rec))
	for a := range s.arms {
		if !c.have[a] {
			c.us[a], c.src[a] = drawCounterfactual(b, ent, a, c.r)
		}
	}
}

// hindsight is a trace's oracle, solved as pass 2 goes: per bucket and
// backend, the total of the durations that every policy is charged. The
// oracle of a bucket is the backend of the least total, in hindsight: no
// fixed backend beats it. Its cumulative cost at a checkpoint is that of
// the ops so far, each bucket on its best backend over them (the oracle
// had the trace ended there); at the end, the oracle's total.
type hindsight struct {
	arms    int
	sum     [][maxArms]float64
	src     [][maxArms][numSources]int64 // where those durations came from
	ops     []int64
	best    []float64 // per bucket, min over backends of sum
	totalUs float64   // Σ best
	points  []point
}

func newHindsight(buckets, arms int) *hindsight {
	return &hindsight{arms: arms, sum: make([][maxArms]float64, buckets), src: make([][maxArms][numSources]int64, buckets),
		ops: make([]int64, buckets), best: make([]float64, buckets)}
}

// add counts one op of bucket b at costs c.
func (h *hindsight) add(b int, c *opCosts) {
	sum := &h.sum[b]
	m := math.Inf(1)
	for a := range h.arms {
		sum[a] += c.us[a]
		h.src[b][a][c.src[a]]++
		m = min(m, sum[a])
	}
	h.ops[b]++
	h.totalUs += m - h.best[b]
	h.best[b] = m
}

// point records the oracle's cumulative cost before op op.
func (h *hindsight) point(op int64) {
	h.points = append(h.points, point{op: op, policyUs: h.totalUs, oracle: h.totalUs})
}

// finish sets b's oracle (and its mean per op on each backend, the
// oracle policy's truth) and returns it, -1 for a bucket not compared.
func (h *hindsight) finish(i int, b *bucketState) int {
	b.oracle = -1
	if b.excluded || h.ops[i] == 0 {
		return -1
	}
	for a := range h.arms {
		b.mean[a] = h.sum[i][a] / float64(h.ops[i])
		if b.oracle < 0 || h.sum[i][a] < h.sum[i][b.oracle] {
			b.oracle = a
		}
	}
	return b.oracle
}

// offOracle counts the decisions of perBucket not on the oracle's backend.
func (h *hindsight) offOracle(perBucket [][]int64) int64 {
	var n int64
	for b, counts := range perBucket {
		o := h.oracleOf(b)
		for a, c := range counts {
			if a != o {
				n += c
			}
		}
	}
	return n
}

// oracleOf is bucket b's best backend, -1 when it ran no op.
func (h *hindsight) oracleOf(b int) int {
	if h.ops[b] == 0 {
		return -1
	}
	best := 0
	for a := 1; a < h.arms; a++ {
		if h.sum[b][a] < h.sum[b][best] {
			best = a
		}
	}
	return best
}

// run is the oracle policy's run over ops: every op of a bucket on its
// best backend, which costs the oracle's total.
func (h *hindsight) run(ops int64, arms int) policyRun {
	r := policyRun{name: "oracle", totalUs: h.totalUs, oracleUs: h.totalUs, ops: ops,
		counts: make([]int64, arms), perBucket: make([][]int64, len(h.ops)), points: h.points}
	for b := range h.ops {
		r.perBucket[b] = make([]int64, arms)
		if o := h.oracleOf(b); o >= 0 {
			r.perBucket[b][o] = h.ops[b]
			r.counts[o] += h.ops[b]
			for s, n := range h.src[b][o] {
				r.sources[s] += n
			}
		}
	}
	return r
}
