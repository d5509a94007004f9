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
// ExampleBucket (example_test.go) validates a Config, builds a bucket
// from two priors, and chooses and observes until the bandit has learned
// that its model of the GPU was 10× wrong.
package bandit
