package adaptive

import "github.com/adaptsched/adaptsched/kernels"

// SelectOn is SelectExcept with the backend named by the caller: a
// baseline placement run through the Executor (executor.Config.Placer),
// compared with the bandit on real work (DESIGN.md § Evaluation). arm
// stands, with Reason UserPreference and each backend's posterior mean
// as its estimate, when the Scheduler may run the op there (an index in
// Config.Backends, capable, not excluded); otherwise the bandit chooses
// among the allowed backends, with Reason Unsupported (or why, as
// SelectExcept). Under Only, Only's backend stands whatever arm is.
// Observe learns from its decision as from any.
func (s *Scheduler) SelectOn(spec kernels.Spec, res Residency, arm int, exclude Mask, why Reason) (d Decision, err error) {
	err = s.selectInto(&d, &spec, &res, exclude, why, true, arm)
	return d, err
}

// Bucket returns the bucket of spec, making it on first sight as Select
// does: the bucket a placement is told of (SelectOn). An invalid spec
// returns Validate's error.
func (s *Scheduler) Bucket(spec kernels.Spec) (BucketID, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	var k shapeKey
	if !k.set(&spec) {
		ent, err := s.miss(spec, nil, nil, 0)
		return ent.id, err
	}
	h := k.hash()
	sh := &s.shards[h>>32&s.shardMask]
	if ent, ok := sh.tab.Load().find(&k, h); ok {
		return ent.id, nil
	}
	ent, err := s.miss(spec, sh, &k, h)
	return ent.id, err
}

// placeDecide applies a caller's choice of arm (SelectOn), b.mu held: arm
// when it may run the op (UserPreference, estimates at the posterior
// means), else the bandit's choice among the allowed arms (Unsupported).
func (s *Scheduler) placeDecide(arm int, b *bucket, allowed Mask, extra, copies, est *[MaxBackends]float64) choice {
	if s.only >= 0 {
		arm = s.only // the one backend Only allows (TestSelectOnUnderOnly)
	}
	if arm >= 0 && arm < s.n && allowed.Has(arm) {
		s.e.means(b, allowed, extra, est)
		return choice{arm: arm, reason: UserPreference}
	}
	c := s.e.choose(b, allowed, extra, copies, est)
	c.reason = Unsupported
	return c
}
