// Package bandit is the pure mathematics of adaptsched's placement
// (DESIGN.md § The bandit): a Normal-Gamma posterior over ln(duration_us)
// per arm (NormalGamma), its Thompson draw scored by the lognormal mean,
// the choice with hysteresis (Choose), discounting and widening toward the
// prior, a CUSUM change detector, the per-bucket loop that wires them
// together (Bucket, which also winsorizes a settled arm's slow outliers
// and re-checks an incumbent a change displaced) and its tuning (Config).
// The baseline policies it is compared against live in package eval.
//
// The package does no I/O, reads no clock and takes its randomness from
// an injected *rand.Rand. Nothing in it is safe for concurrent use: the
// scheduler keeps one Bucket per bucket and one rand.Rand per shard.
//
// # Usage
//
//	cfg := bandit.Config{} // zero fields take the defaults
//	if err := cfg.Validate(); err != nil { ... }
//	b := bandit.NewBucket([]bandit.NormalGamma{
//		bandit.NewPrior(cpuPredictedUs, cfg.PriorStrength, cfg.PriorSpread),
//		bandit.NewPrior(gpuPredictedUs, cfg.PriorStrength, cfg.PriorSpread),
//	})
//	costs := make([]float64, 2)
//	r := rand.New(rand.NewPCG(1, 2))
//	arm, held := b.Choose(&cfg, transferUs, r, costs) // transferUs may be nil
//	... run the op on arm, measure us ...
//	b.Observe(&cfg, arm, us)
package bandit
