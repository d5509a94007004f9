package bandit

import (
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// tInv returns the u-quantile of Student's t with nu degrees of freedom
// (location 0, scale 1), 0 < u < 1: by symmetry from the lower half,
// where it is Newton's method on the CDF from the Cornish–Fisher
// expansion about the normal quantile (Abramowitz and Stegun 26.7.5), to
// a step of 1e-14 of max(|x|, 1) (or where the CDF's precision stops it,
// 1e-9, as at 10⁵ degrees); where that does not settle within
// tInvSteps steps it is gonum's Quantile. The CDF is convex below 0, so
// each Newton step lands at or right of the root and the rest close in
// on it from there (TestTInv). Rule: not gonum's Quantile first.
// Reason: its inverse incomplete beta costs 6 times as much in the tail
// and 3 times in the body (at 7.3 degrees: BenchmarkTInv), a skipped
// decision whose uniform falls in a challenger's tail takes one per
// challenger it must draw (NormalGamma.sampleAt), and it is off by 2e-5
// of the value at 300 degrees and u = 1e-12.
func tInv(u, nu float64) float64 {
	switch {
	case !(u > 0 && u < 1 && nu >= 1):
		return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: nu}.Quantile(u)
	case u > 0.5:
		return -tInv(1-u, nu) // 1−u is exact here
	case u == 0.5:
		return 0
	}
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: nu}
	z := -math.Sqrt2 * math.Erfcinv(2*u)
	z2 := z * z
	g1 := (z2 + 1) * z / 4
	g2 := ((5*z2+16)*z2 + 3) * z / 96
	g3 := (((3*z2+19)*z2+17)*z2 - 15) * z / 384
	g4 := ((((79*z2+776)*z2+1482)*z2-1920)*z2 - 945) * z / 92160
	x := z + (g1+(g2+(g3+g4/nu)/nu)/nu)/nu
	if !(x < 0) {
		x = z
	}
	// The density's constant, once: Γ((ν+1)/2) / (Γ(ν/2)·√(νπ)).
	la, _ := math.Lgamma((nu + 1) / 2)
	lb, _ := math.Lgamma(nu / 2)
	c := math.Exp(la-lb) / math.Sqrt(nu*math.Pi)
	var step float64
	for range tInvSteps {
		pdf := c * math.Pow(1+x*x/nu, -(nu+1)/2)
		step = (t.CDF(x) - u) / pdf
		x -= step
		if !(x < 0) {
			return t.Quantile(u)
		}
		if math.Abs(step) <= 1e-14*math.Max(-x, 1) {
			return x
		}
	}
	if math.Abs(step) <= 1e-9*math.Max(-x, 1) {
		return x // as close as the CDF's own precision lets it come
	}
	return t.Quantile(u)
}

// tInvSteps bounds tInv's Newton steps.
const tInvSteps = 12
