package adaptive

// placeDecide applies a caller's choice of arm (SelectOn), b.mu held: arm
// when it may run the op (UserPreference, estimates at the posterior
// means), else the bandit's choice among the allowed arms (Unsupported).
func (s *Scheduler) placeDecide(arm int, b *bucket, allowed Mask, extra, est *[MaxBackends]float64) choice {
	if arm >= 0 && arm < s.n && allowed.Has(arm) {
		s.e.means(b, allowed, extra, est)
		return choice{arm: arm, reason: UserPreference}
	}
	c := s.e.choose(b, allowed, extra, est)
	c.reason = Unsupported
	return c
}
