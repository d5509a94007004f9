package adaptive

import "github.com/adaptsched/adaptsched/bandit"

// slabBuckets is how many buckets engine.alloc takes from the heap at a
// time (28 KiB, and as many posteriors and counters).
const slabBuckets = 64

// alloc returns a zero bucket whose bb.Arms, bb.Priors and per are n long
// (e.famMu held). Buckets, their posteriors and their counters are handed
// out of slabs in first-sight order, so that an inference loop, which
// replays its ops in that order, walks each slab in address order, as it
// walks the shape table's entries: the hardware prefetches them.
func (e *engine) alloc() *bucket {
	if len(e.slab) == 0 {
		e.slab = make([]bucket, slabBuckets)
		e.ngSlab = make([]bandit.NormalGamma, 2*e.n*slabBuckets)
		e.cntSlab = make([]armCounts, e.n*slabBuckets)
		e.stateSlab = make([]bandit.ArmState, e.n*slabBuckets)
	}
	b := &e.slab[0]
	b.bb.Arms = e.ngSlab[:e.n:e.n]
	b.bb.Priors = e.ngSlab[e.n : 2*e.n : 2*e.n]
	b.per = e.cntSlab[:e.n:e.n]
	b.bb.UseState(e.stateSlab[:e.n:e.n])
	e.slab, e.ngSlab, e.cntSlab, e.stateSlab = e.slab[1:], e.ngSlab[2*e.n:], e.cntSlab[e.n:], e.stateSlab[e.n:]
	return b
}
