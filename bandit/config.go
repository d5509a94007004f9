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
// 1.5× gap), σ = 0.2, priors 2× wrong, κ0 = 0.2, α0 = 3, CUSUM K = 0.5,
// H = 10 on residuals clipped to ±3, a displaced incumbent re-checked
// from 16 decisions on (bucket.go):
//
//	h \ γ    1              0.999          0.995          0.99           0.95
//	0        3.39% /  159   0.87% /  543   0.86% / 1045   1.15% / 1332   2.83% / 1988
//	0.05     4.01% /   16   1.05% /   52   0.76% /  175   0.96% /  306   2.49% /  998
//	0.1      2.98% /   13   1.21% /   31   0.93% /  105   1.02% /  184   2.36% /  704
//	0.15     3.37% /   11   1.45% /   24   0.94% /   85   1.12% /  147   2.30% /  542
//	0.2      3.41% /    9   2.02% /   20   1.10% /   69   1.11% /  121   2.38% /  441
//	0.5      7.84% /    1   17.2% /    4   15.3% /   14   11.1% /   27   12.1% /  108
//	1        34.2% /    0   34.2% /    0   34.2% /    0   34.2% /    0   34.2% /    0
//
// (With the re-checks from 64 decisions on, the defaults' cell was 1.04% /
// 24: this 3,000-decision throttle is a long change, which early re-checks
// probe in vain; the shared CPU's slow spells are short, and there they pay:
// bucket.go.)
//
// No forgetting (γ = 1) never notices the recovery; h ≥ 0.5 cannot leave a
// 1.5× slower incumbent; γ = 0.95 re-explores too often. γ = 0.995 has
// the lowest regret, but its re-exploration floor (every arm decays toward
// its prior) leaves the best of three arms 1.2× apart only 94.7% of the
// last 1,000 decisions (TestConvergence needs 97%); γ = 0.999 keeps it
// above 97%. With γ = 0.999, h = 0.15 is the smallest margin that keeps a
// 3% tie within 20 switches per 10,000 decisions on every seed
// (TestHysteresis; 1,000 seeds: mean 5.8, max 20; h = 0.12: mean 7.4, 7
// above 20, max 32; h = 0.1: mean 9.1, 25 above 20), given that Choose
// holds a challenger to the incumbent's posterior mean as well as to its
// draw (measured 2026-11-23, table above). On its draw alone, with
// the re-checks, winsorizing and alarmEvidence of bucket.go, 1,000 seeds
// gave mean 9.1, 21 above 20, max 39, and the defaults' cell 1.24% / 26
// (64 seeds a world rather than 8: 1.58% without the mean, 1.62% with).
// Its price is inside the margin, which it makes firm: a worse arm that
// wins the bucket keeps it until the discount widens the better one. Two
// arms 10% apart, 20,000 decisions, TestConvergence's priors (10× wrong),
// 40 seeds: the better arm's share of the last 1,000 fell from 0.88–0.97
// to 0.72–0.81 and regret rose from 0.2–2.6% to 1.8–4.3% (three arms
// 1.1× apart: 0.95–0.99 → 0.93–0.96, 0.1–2.6% → 0.7–3.3%); 1.2× apart
// and wider (TestConvergence) moved by at most 0.02 of share.
//
// The CUSUM threshold was 5 (DESIGN.md's starting point) until measured:
// its false alarms (average run length ≈ 470 decisions, two-sided) each
// widened the incumbent and reopened the tie, which caused most switches
// (3% tie, h = 0.1: 493 switches over 5 seeds with H = 5, 119 with H = 10,
// which raises no alarm there). H = 10 still catches TestDrift's 3×
// slowdown (5.5σ) in 3 observations and a 2σ shift in 7 (H = 5: 2 and 4);
// with the residuals clipped to ±3, which keeps a lone outlier from
// alarming, the 3× slowdown takes 5.
//
// Thompson's regret in the simulator (BenchmarkTargets): h = 0.1, H = 5
// → h = 0.15, H = 10 → residuals clipped:
//
//	mi300x 0.36 → 0.07 → 0.16%, mi250 0.08 → 0.17 → 0.47%,
//	rx7900xtx −0.24 → −0.11 → 0.00%, h100 −0.05 → −0.04 → −0.04%,
//	igpu 0.24 → 0.27 → 0.27%, slowlink −0.31 → −0.30 → −0.13%,
//	h100 prior ×10 0.42 → 0.16 → 0.24%, throttle −0.60 → −0.60 → −0.60%.
//
// Choose's mean bar left it where the changes since had put it (the code
// just before → with it, same day): mi300x −0.104 → −0.104%, mi250
// −0.098 → −0.091%, rx7900xtx −0.217 → −0.217%, h100 0.016 → 0.016%,
// igpu 0.231 → 0.219%, slowlink −0.229 → −0.229%, h100 prior ×10 0.098
// → 0.097%, throttle −0.545 → −0.590%; decode on cpu+cpu1
// (DecodePaired, 5 alternating runs at batch 1, 3 at batch 16): auto/best
// medians 0.998 → 0.996 and 1.12 → 1.10, within the runs' spread.
//
// The clip costs the simulator up to 0.3 points of regret; on real CPUs
// it pays: decode on cpu+cpu1 at batch 16 (infer -backends cpu,cpu1
// -batch 16 -tokens 120, 21.8M parameters, alternating runs) went from
// 589, 600, 632 to 633, 618, 655 tokens/s, with fewer switches (178, 166,
// 179 → 161, 155, 152), since the timings of a shared 2-core machine are
// heavy tailed and each false alarm reopened a settled bucket.
const (
	// DefaultHysteresis is the margin a challenger must undercut by.
	DefaultHysteresis = 0.15
	// DefaultDiscount is γ per observation of the bucket: a memory of
	// about 1/(1−γ) = 1,000 observations.
	DefaultDiscount = 0.999
	// DefaultPriorStrength is κ0 in pseudo-observations, chosen in the
	// simulator (sim targets: 50,000 mixed-serving Llama-3.2-1B ops, each
	// GPU profile with cpu2; α0 = 3, h = 0.1, γ = 0.999), thompson's regret
	// against the oracle:
	//
	//	κ0      mi300x mi250 rx7900xtx h100  igpu  slowlink  h100 prior ×0.1 / ×10
	//	0.05    3.66%  2.43% 2.90%     68.3% 13.4% 31.8%     1.50% / 3.36%   (α0 = 2: igpu 18.5%)
	//	0.15    1.35%  1.10% 0.64%     1.01% 3.48% 1.77%     0.86% / 1.24%
	//	0.2     1.34%  1.07% 0.51%     1.00% 0.08% 1.07%     0.52% / 1.31%
	//	0.5     1.25%  0.90% 0.49%     0.60% -0.1% 0.42%     0.52% / 1.07%
	//	1       1.10%  0.89% 0.32%     0.57% -0.2% 0.30%     0.52% / 1.02%
	//
	// A weak prior lets Thompson sampling try a CPU arm that the model
	// rightly says is 20–400× slower, once per large bucket, and one such
	// try costs more than the bucket's whole regret budget. A strong prior
	// never tries an arm the model wrongly says is 10× slower: with κ0 ≥
	// 0.5 TestConvergence's "inverted" case (the best arm predicted 10×
	// slower) gets share 0. 0.2 is the strongest prior that still
	// overturns that case.
	DefaultPriorStrength = 0.2
	// DefaultPriorSpread is s0, the run-to-run standard deviation of
	// ln(duration).
	DefaultPriorSpread = 0.2
	// DefaultCUSUMK and DefaultCUSUMH are the change detector's slack and
	// threshold in standard deviations: a 2σ shift is caught in about 7
	// observations, a 5.5σ one in 5 (residuals are clipped to ±3 first,
	// bucket.go); on N(0, 1) residuals a false alarm
	// comes once in tens of thousands of observations (Siegmund's
	// approximation: about 70,000; see above).
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
