package bandit

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// TestGammaRand checks the hand-written Gamma sampler (DESIGN.md § The
// bandit, Thompson draw) against distuv.Gamma, whose method it writes
// out: for shapes below 1 (boosted), at 1, at the prior's 3 and at the
// ~500 of a bucket with a full memory, the mean and variance of 200,000
// draws within 5 standard errors of distuv's, and the Kolmogorov–Smirnov
// distance to distuv's CDF below 1.63/√n (the 1% critical value).
// Fixed seed.
func TestGammaRand(t *testing.T) {
	const n = 200000
	r := rand.New(rand.NewPCG(7, 8))
	xs := make([]float64, n)
	for _, c := range []struct{ alpha, beta float64 }{{0.3, 1}, {1, 2}, {3, 0.08}, {3.7, 5}, {503, 20}} {
		ref := distuv.Gamma{Alpha: c.alpha, Beta: c.beta}
		var sum float64
		for i := range xs {
			xs[i] = gammaRand(r, c.alpha) / c.beta
			sum += xs[i]
		}
		mean := sum / n
		var ss float64
		for _, x := range xs {
			ss += (x - mean) * (x - mean)
		}
		variance := ss / (n - 1)
		sd := math.Sqrt(ref.Variance())
		if se := sd / math.Sqrt(n); math.Abs(mean-ref.Mean()) > 5*se {
			t.Errorf("Gamma(%v, %v): mean %.6g, distuv %.6g (±%.2g)", c.alpha, c.beta, mean, ref.Mean(), 5*se)
		}
		// Var(s²) ≈ σ⁴(2 + 6/α)/n: the Gamma's excess kurtosis is 6/α.
		if se := ref.Variance() * math.Sqrt((2+6/c.alpha)/n); math.Abs(variance-ref.Variance()) > 5*se {
			t.Errorf("Gamma(%v, %v): variance %.6g, distuv %.6g (±%.2g)", c.alpha, c.beta, variance, ref.Variance(), 5*se)
		}
		slices.Sort(xs)
		var d float64
		for i, x := range xs {
			f := ref.CDF(x)
			d = max(d, math.Abs(f-float64(i)/n), math.Abs(f-float64(i+1)/n))
		}
		if crit := 1.63 / math.Sqrt(n); d > crit {
			t.Errorf("Gamma(%v, %v): KS distance %.4g to distuv's CDF, want < %.4g", c.alpha, c.beta, d, crit)
		}
	}
}
