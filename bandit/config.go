package bandit

import (
	"fmt"
	"math"
)

// Defaults filled in by Config.Validate (DESIGN.md § The bandit).
//
// Hysteresis and discount come from BenchmarkTuning (tuning_test.go; go
// test -run X -bench Tuning -benchtime 1x ./bandit): regret % against the
// per-decision best arm and switches per 10,000 decisions, mean of 8 seeds
// × 3 buckets (3× throttle for 3,000 decisions then recovery; a 3% tie; a
// 1.5× gap), σ = 0.2, priors 2× wrong, κ0 = 0.05:
//
//	h \ γ      1            0.999        0.995        0.99         0.95
//	0       4.07% / 533  1.35% / 627  0.78% / 1021 0.98% / 1246 2.26% / 1802
//	0.05    5.36% /  75  1.01% / 119  0.72% /  270 0.82% /  436 2.08% / 1177
//	0.1     6.58% /  37  1.56% /  58  0.66% /  137 0.82% /  229 1.94% /  804
//	0.2     6.83% /  19  2.15% /  29  0.89% /   75 1.08% /  129 1.89% /  477
//	0.5     9.16% /   7  10.4% /  10  9.80% /   24 9.68% /   39 8.85% /  162
//	1       32.1% /   0  32.1% /   0  32.1% /    0 32.1% /    0 32.1% /    0
//
// No forgetting (γ = 1) never notices the recovery; h ≥ 0.5 cannot leave a
// 1.5× slower incumbent; γ = 0.95 re-explores too often. γ = 0.995 has
// the lowest regret, but its re-exploration floor (every arm decays toward
// its prior) leaves the best of three arms 1.2× apart only 94.7% of the
// last 1,000 decisions (TestConvergence needs 97%); γ = 0.999 gives 98.8%
// there at 1.56% regret here, so the defaults are h = 0.1, γ = 0.999.
const (
	// DefaultHysteresis is the margin a challenger must undercut by.
	DefaultHysteresis = 0.1
	// DefaultDiscount is γ per observation of the bucket: a memory of
	// about 1/(1−γ) = 1,000 observations.
	DefaultDiscount = 0.999
	// DefaultPriorStrength is κ0 in pseudo-observations: DESIGN.md's
	// s0²/s_model² for a cost model that can be 10× wrong (s_model ≈ 1.2)
	// is below the clamp, so the clamp's floor. With κ0 = 1 a prior that
	// says the best arm is 10× slower than it is never lets that arm be
	// tried (TestConvergence, "inverted": share 0).
	DefaultPriorStrength = 0.05
	// DefaultPriorSpread is s0, the run-to-run standard deviation of
	// ln(duration).
	DefaultPriorSpread = 0.2
	// DefaultCUSUMK and DefaultCUSUMH are the change detector's slack and
	// threshold in standard deviations: a 2σ shift is caught in about 4
	// observations.
	DefaultCUSUMK = 0.5
	DefaultCUSUMH = 5
)

// Limits on Config.PriorStrength (DESIGN.md: κ0 is clamped to [0.05, 5]).
const (
	MinPriorStrength = 0.05
	MaxPriorStrength = 5
)

// Config holds the bandit's tuning. A zero field takes its default; call
// Validate before use. Validate is idempotent.
type Config struct {
	// Hysteresis is the fraction of the incumbent's sampled cost that a
	// challenger must undercut to replace it: a challenger wins when its
	// cost < (1 − Hysteresis) × the incumbent's. Dimensionless, in [0, 1]
	// (1 never switches; the static schedulers' "2× cheaper" rule is 0.5).
	// 0 takes DefaultHysteresis; a negative value means no margin at all.
	Hysteresis float64
	// Discount is γ, applied to every arm of a bucket per observation of
	// that bucket: evidence is scaled toward the prior by γ, so the memory
	// is about 1/(1−γ) observations. In (0, 1]; 1 never forgets.
	Discount float64
	// PriorStrength is κ0, how much the cost model's estimate is trusted,
	// in pseudo-observations, in [MinPriorStrength, MaxPriorStrength].
	PriorStrength float64
	// PriorSpread is s0, the expected run-to-run standard deviation of
	// ln(duration_us) (dimensionless, > 0).
	PriorSpread float64
	// CUSUMK is the change detector's slack and CUSUMH its threshold, in
	// standard deviations of the incumbent's predictive distribution.
	// CUSUMK ≥ 0; CUSUMH > 0, +Inf turns the detector off.
	CUSUMK, CUSUMH float64
}

// DefaultConfig returns a Config with every field at its default.
func DefaultConfig() Config {
	c := Config{}
	_ = c.Validate() // cannot fail on zero fields
	return c
}

// Validate fills zero fields with the defaults and rejects impossible
// values with an error wrapping ErrConfig that names the field.
func (c *Config) Validate() error {
	fill := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	fill(&c.Hysteresis, DefaultHysteresis)
	fill(&c.Discount, DefaultDiscount)
	fill(&c.PriorStrength, DefaultPriorStrength)
	fill(&c.PriorSpread, DefaultPriorSpread)
	fill(&c.CUSUMK, DefaultCUSUMK)
	fill(&c.CUSUMH, DefaultCUSUMH)
	switch {
	case math.IsNaN(c.Hysteresis) || c.Hysteresis > 1:
		return fmt.Errorf("%w: Hysteresis %v not ≤ 1", ErrConfig, c.Hysteresis)
	case !(c.Discount > 0 && c.Discount <= 1):
		return fmt.Errorf("%w: Discount %v not in (0, 1]", ErrConfig, c.Discount)
	case !(c.PriorStrength >= MinPriorStrength && c.PriorStrength <= MaxPriorStrength):
		return fmt.Errorf("%w: PriorStrength %v not in [%v, %v] pseudo-observations",
			ErrConfig, c.PriorStrength, MinPriorStrength, MaxPriorStrength)
	case !(c.PriorSpread > 0) || math.IsInf(c.PriorSpread, 0):
		return fmt.Errorf("%w: PriorSpread %v not a finite positive number", ErrConfig, c.PriorSpread)
	case !(c.CUSUMK >= 0) || math.IsInf(c.CUSUMK, 0):
		return fmt.Errorf("%w: CUSUMK %v not a finite number ≥ 0", ErrConfig, c.CUSUMK)
	case !(c.CUSUMH > 0):
		return fmt.Errorf("%w: CUSUMH %v not > 0", ErrConfig, c.CUSUMH)
	}
	return nil
}

// margin returns the hysteresis Choose applies: negative means none.
func (c *Config) margin() float64 { return math.Max(c.Hysteresis, 0) }
