package bandit

import (
	"fmt"
	"math"
)

// Defaults filled in by Config.Validate (DESIGN.md § The bandit). Each
// names the test that holds it; the tables they were chosen from are in
// docs/TUNING.md, whose hysteresis × discount table `make bench` writes
// from BenchmarkTuning (tuning_test.go).
const (
	// DefaultHysteresis is the margin a challenger must undercut by: the
	// smallest that keeps two arms 3% apart within 20 switches per 10,000
	// decisions on every seed (TestHysteresis). Its price is inside the
	// margin: arms 10% apart settle on the better one less firmly.
	// BenchmarkTuning; docs/TUNING.md.
	DefaultHysteresis = 0.15
	// DefaultDiscount is γ per observation of the bucket: a memory of
	// about 1/(1−γ) = 1,000 observations, short enough to notice a
	// recovery, long enough that the best of three arms 1.2× apart keeps
	// 97% of the last decisions (TestConvergence; γ = 0.995 does not).
	// BenchmarkTuning; docs/TUNING.md.
	DefaultDiscount = 0.999
	// DefaultPriorStrength is κ0 in pseudo-observations: the strongest
	// prior that still overturns a model wrong by 10× (TestConvergence's
	// inverted case), since a weaker one pays for trying CPU arms the
	// model rightly calls 20–400× slower. Simulator table in
	// docs/TUNING.md.
	DefaultPriorStrength = 0.2
	// DefaultPriorSpread is s0, the run-to-run standard deviation of
	// ln(duration).
	DefaultPriorSpread = 0.2
	// DefaultCUSUMK and DefaultCUSUMH are the change detector's slack and
	// threshold in standard deviations: a 2σ shift is caught in about 7
	// observations, a 3× slowdown in 5 (TestDrift; residuals are clipped
	// to ±3 first, bucket.go), and on N(0, 1) residuals a false alarm,
	// which reopens a settled tie, comes about once in 70,000
	// observations (Siegmund's approximation). docs/TUNING.md.
	DefaultCUSUMK = 0.5
	DefaultCUSUMH = 10
)

// Limits on Config.PriorStrength (DESIGN.md: κ0 is clamped to [0.05, 5]).
const (
	MinPriorStrength = 0.05
	MaxPriorStrength = 5
)

// Config holds the bandit's tuning. A zero field takes its default; call
// Validate before use. Validate is idempotent.
type Config struct {
	// Hysteresis is the fraction of the incumbent's cost that a
	// challenger must undercut to replace it: a challenger wins when its
	// sampled cost < (1 − Hysteresis) × both the incumbent's sampled cost
	// and its posterior mean cost (Choose). Dimensionless, in [0, 1]
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
func (c *Config) margin() float64 { return pos0(c.Hysteresis) }
