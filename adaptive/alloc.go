package adaptive

import "github.com/adaptsched/adaptsched/bandit"

// slabBuckets is how many buckets engine.alloc takes from the heap at a
// time (20 KiB, and as many posteriors and counters).
const slabBuckets = 64

// alloc returns a zero bucket whose bb.Arms, bb.Priors and per are n long
// (e.famMu held). Buckets, their posteriors and their counters are handed
// out of slabs in first-sight order, so that an inference loop, which
// replays its ops in that order, walks each slab in address order, as it
// walks the shape table's entries: the hardware prefetches them.
func (e *engine) alloc() *bucket {
	if len(e.slab) == 0 {
		e.slab = new(bucketSlab).b[:]
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

// bucketSlab is slabBuckets buckets after a pad. Rule: the buckets start
// on a 64-byte boundary, as their size is a whole number of lines
// (TestBucketLayout checks the addresses). Reason: the runtime puts an
// 8-byte type header at the start of an allocation of over 512 bytes
// that holds pointers, so in a plain []bucket every bucket started 8
// bytes into a line: its four hot lines spanned five, and its last word
// shared a line with the next bucket's lock, which the goroutine that
// decides there writes (BenchmarkSelectObserve's parallel cases).
type bucketSlab struct {
	_ [64 - mallocHeader]byte
	b [slabBuckets]bucket
}

// mallocHeader is the runtime's type header before a pointerful object
// of over 512 bytes (Go 1.22 on).
const mallocHeader = 8
