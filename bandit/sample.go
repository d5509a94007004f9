package bandit

import (
	"math"
	"math/rand/v2"
)

// maxExp caps exponents before exp so that a wild draw gives a huge
// finite cost rather than +Inf.
const maxExp = 700

// NewPrior returns the prior that the cost model's estimate implies
// (DESIGN.md § The bandit): its lognormal mean is predictedUs, strength is
// how much the estimate is trusted in pseudo-observations (κ0) and spread
// is the expected run-to-run standard deviation of ln(duration) (s0).
// α0 = 3 and β0 = (α0−1)·s0², so E[1/τ] = s0². DESIGN.md allows α0 = 2–3;
// 3 gives the noise variance a lighter tail: with α0 = 2, draws of a small
// τ made a prior 20× slower than the incumbent sample below it often
// enough to cost igpu 13% regret in the simulator (sim targets, 50,000
// mixed-serving ops), against 0.1% with α0 = 3.
func NewPrior(predictedUs, strength, spread float64) NormalGamma {
	return NewPriorLn(math.Log(max(predictedUs, minPredictedUs)), strength, spread)
}

// minPredictedUs floors a prior's predicted µs (NewPrior, NewPriorLn).
const minPredictedUs = 1e-3

// NewPriorLn is NewPrior of exp(lnPredictedUs): for a caller that holds
// the estimate's logarithm (a model's ln µs plus a learned ln ratio),
// which so takes neither the exponential nor the logarithm back.
func NewPriorLn(lnPredictedUs, strength, spread float64) NormalGamma {
	const alpha0 = 3
	return NormalGamma{
		Mu:    max(lnPredictedUs, lnMinPredictedUs) - spread*spread/2,
		Kappa: strength,
		Alpha: alpha0,
		Beta:  (alpha0 - 1) * spread * spread,
	}
}

// lnMinPredictedUs is ln(minPredictedUs).
var lnMinPredictedUs = math.Log(minPredictedUs)

// Variance returns the posterior's expected noise variance of y, E[1/τ].
func (p NormalGamma) Variance() float64 {
	if p.Alpha <= 1 {
		return p.Beta / p.Alpha // the mode's inverse: E[1/τ] is infinite
	}
	return p.Beta / (p.Alpha - 1)
}

// MeanUs returns the posterior's point estimate of the expected duration
// in µs: the lognormal mean exp(μ + E[1/τ]/2).
func (p NormalGamma) MeanUs() float64 {
	return expCapped(p.Mu + p.Variance()/2)
}

// expCapped returns exp(min(x, maxExp)); a plain comparison, since
// math.Min is an assembly call on amd64 and NaN passes through either way.
func expCapped(x float64) float64 {
	if x > maxExp {
		x = maxExp
	}
	return exp(x)
}

// Sample draws a Thompson sample of the expected duration in µs:
// τ ~ Gamma(α, rate β), m ~ N(μ, 1/(κτ)), and returns exp(m + 1/(2τ)),
// the lognormal mean: scoring by the median exp(m) would favour
// high-variance arms.
func (p NormalGamma) Sample(r *rand.Rand) float64 {
	// v = 1/τ, at most 1e300 (τ ≥ 1e-300), with τ = g/β and g ~
	// Gamma(α, 1): one division on the way from the draw to the cost.
	v := p.Beta / gammaRand(r, p.Alpha)
	if !(v <= 1e300) {
		v = 1e300
	}
	m := p.Mu + r.NormFloat64()*math.Sqrt(v*(1/p.Kappa))
	return expCapped(m + v/2)
}

// gammaRand draws from Gamma(shape alpha > 0, rate 1) by Marsaglia and
// Tsang's method ("A simple method for generating gamma variables", ACM
// TOMS 26(3), 2000) with its squeeze, boosting alpha < 1 as
// Gamma(alpha+1)·U^(1/alpha). It is distuv.Gamma's method for alpha ≥ 0.2
// written out: distuv.Gamma.Rand wraps the source in a new rand.Rand and
// checks its parameters on every call, 18 ns of a draw that Select makes
// once per arm (TestGammaRand checks the moments against distuv's).
func gammaRand(r *rand.Rand, alpha float64) float64 {
	boost := 1.0
	if alpha < 1 {
		boost = math.Pow(r.Float64(), 1/alpha)
		alpha++
	}
	d := alpha - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := r.Float64()
		x2 := x * x
		if u < 1-0.0331*x2*x2 || log(u) < 0.5*x2+d*(1-v+log(v)) {
			return boost * d * v
		}
	}
}
