package bandit

// ProbeOdds is probeOdds, for TestProbe.
const ProbeOdds = probeOdds

// SetNoSkip makes b always draw (TestSkipSameChoices).
func SetNoSkip(b *Bucket, on bool) { b.noSkip = on }

// DeadArms returns the challengers that b's next decision finds dead and
// live, and those of its bounds that are probeable (skip.go), b settled
// and its bounds computed anew.
func DeadArms(b *Bucket, cfg *Config, extra []float64) (dead, live, probed uint8) {
	b.refreshBounds(cfg)
	dead, live, _ = b.deadArms(cfg, extra, nil, cfg.margin())
	return dead, live, b.probed
}
