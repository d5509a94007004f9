package adaptive

import (
	"sync"

	"github.com/adaptsched/adaptsched/kernels"
)

// PlacementPolicy chooses the backend of every op for a Placement
// strategy: a baseline placement (eval.Placement adapts eval's static
// rules and oracle) run through the Scheduler and the Executor, so that
// it can be compared with Automatic on real work (DESIGN.md § Evaluation).
type PlacementPolicy interface {
	// Name names the policy.
	Name() string
	// Place returns the index in Config.Backends of the backend that
	// should run spec, of bucket id, with its inputs where res says.
	// spec's shapes must not be kept. (By value: pointers handed to an
	// interface make every Select's spec and residency escape to the
	// heap, 2 allocations an op under every strategy.)
	Place(spec kernels.Spec, res Residency, bucket BucketID) int
	// Observed reports the measured compute duration in µs of an op of
	// bucket that ran on backend.
	Observed(bucket BucketID, backend int, us float64)
}

// Placement runs every op where the policy p says. A choice the Scheduler
// may make (the backend can run the op and is not excluded) has Reason
// UserPreference; any other (an index out of range, an incapable or
// excluded backend) falls back to the bandit's choice among the allowed
// backends with Reason Unsupported (or the caller's MemoryConstraint or
// Fallback). Observe feeds the bucket's posterior as for every strategy
// and reports the compute duration to p.Observed.
//
// p needs not be safe for concurrent use: the Scheduler calls it under one
// lock of its own, so a Placement strategy serialises its Selects. p must
// not be shared with another Scheduler.
func Placement(p PlacementPolicy) Strategy { return Strategy{kind: placement, policy: p} }

// placer holds a Placement policy and its lock.
type placer struct {
	mu sync.Mutex
	p  PlacementPolicy
}

// placeDecide applies a Placement strategy (b.mu held).
func (s *Scheduler) placeDecide(spec *kernels.Spec, res *Residency, b *bucket, allowed Mask, extra *[MaxBackends]float64, d *Decision) choice {
	pl := s.place
	pl.mu.Lock()
	arm := pl.p.Place(*spec, *res, b.id)
	pl.mu.Unlock()
	d.placed = true
	if arm >= 0 && arm < s.n && allowed.Has(arm) {
		s.e.means(b, allowed, extra, &d.Estimates)
		return choice{arm: arm, reason: UserPreference}
	}
	c := s.e.choose(b, allowed, extra, &d.Estimates)
	c.reason = Unsupported
	return c
}

// observe reports a decision's compute duration to the policy.
func (pl *placer) observe(d *Decision, us float64) {
	pl.mu.Lock()
	pl.p.Observed(d.Bucket, d.Backend, us)
	pl.mu.Unlock()
}
