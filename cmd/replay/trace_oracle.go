package main

import (
	"fmt"
	"io"
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

// solveOracle sets every compared bucket's oracle: the backend of the
// least total over its ops in hindsight, on the durations pass 2 charges
// (a fixed backend never beats it), and mean to those totals per op, the
// oracle policy's truth.
func (s *scanner) solveOracle(c *opCosts) error {
	sum := make([][maxArms]float64, len(s.buckets))
	sr, err := s.spool.reader()
	if err != nil {
		return err
	}
	var meas []measurement
	for rec := int64(0); ; rec++ {
		var idx int32
		idx, meas, err = sr.next(meas)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if int(idx) >= len(s.entries) {
			return fmt.Errorf("%w: op %d of %d", errSpool, idx, len(s.entries))
		}
		ent := s.entries[idx]
		b := s.buckets[ent.task.Bucket]
		if b.excluded {
			continue
		}
		c.fill(s, rec, b, ent, meas)
		for a := range s.arms {
			sum[ent.task.Bucket][a] += c.us[a]
		}
	}
	for i, b := range s.buckets {
		if b.excluded || b.ops == 0 {
			continue
		}
		best := math.Inf(1)
		for a := range s.arms {
			b.mean[a] = sum[i][a] / float64(b.ops)
			if sum[i][a] < best {
				best, b.oracle = sum[i][a], a
			}
		}
	}
	return nil
}
