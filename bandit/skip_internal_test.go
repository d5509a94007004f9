package bandit

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/stat"
)

// TestWindowBound checks windowBound (skip.go) by sampling: for
// posteriors grown from a prior by random observations, at several
// discounts s across the window, the share of Thompson costs below the
// floor is at most skipTail (plus 4 binomial standard errors), and the
// ln-mean and variance of the mean are at least their bounds.
func TestWindowBound(t *testing.T) {
	const draws = 200_000
	r := rand.New(rand.NewPCG(3, 3))
	prior := NewPrior(100, 0.2, 0.2)
	sK := powInt(0.999, skipWindow)
	checked := 0
	for trial := range 40 {
		p := prior
		n := 2 + r.IntN(60)
		mu, sd := math.Log(50+r.Float64()*200), 0.05+0.4*r.Float64()
		for range n {
			p.Update(mu + sd*r.NormFloat64())
		}
		if trial%5 == 0 {
			p.Widen(prior) // a widened arm: no evidence, a moved mean
		}
		bd, _, ok := windowBound(p, prior, sK)
		if !ok {
			continue
		}
		checked++
		for _, s := range []float64{1, 0.99, math.Sqrt(sK), sK} {
			q := p
			q.Discount(prior, s)
			below := 0
			for range draws {
				if q.Sample(r) < float64(bd.floor) {
					below++
				}
			}
			if lim := skipTail + 4*math.Sqrt(skipTail/draws); float64(below)/draws > lim {
				t.Errorf("trial %d, s=%.4f: %d of %d draws below the floor %.3g, want ≤ %.5f", trial, s, below, draws, bd.floor, lim)
			}
			if l := q.Mu + q.Variance()/2; l < float64(bd.lnMean) {
				t.Errorf("trial %d, s=%.4f: ln mean %v below its bound %v", trial, s, l, bd.lnMean)
			}
			if v := q.Beta / (q.Alpha * q.Kappa); v < float64(bd.vmean) {
				t.Errorf("trial %d, s=%.4f: variance of the mean %v below its bound %v", trial, s, v, bd.vmean)
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d of 40 posteriors had a bound", checked)
	}
}

// TestSampleAbove checks sampleAbove's law against the inversion that
// drawByInversion uses in the tail: m = F⁻¹(u), u uniform on [q, 1),
// then τ | m. Every cost is at least exp(F⁻¹(q)), and the two agree in
// the mean and the quartiles of ln cost to within sampling error
// (q = 0.3, so that the conditioning shows).
func TestSampleAbove(t *testing.T) {
	const draws = 100_000
	const q = 0.3
	r := rand.New(rand.NewPCG(5, 5))
	p := NewPrior(100, 0.2, 0.2)
	for _, y := range []float64{4.9, 5.1, 4.7} {
		p.Update(y)
	}
	lo := p.marginal().Quantile(q)
	a, b := make([]float64, draws), make([]float64, draws)
	for i := range draws {
		a[i] = math.Log(p.sampleAbove(r, q))
		if a[i] < lo {
			t.Fatalf("draw %d: ln cost %v below ln of the floor %v", i, a[i], lo)
		}
		m := p.marginal().Quantile(q + (1-q)*r.Float64())
		d := m - p.Mu
		b[i] = m + (p.Beta+p.Kappa*d*d/2)/gammaRand(r, p.Alpha+0.5)/2
	}
	slices.Sort(a)
	slices.Sort(b)
	sd := stat.StdDev(b, nil)
	tol := 5 * sd * math.Sqrt(2.0/draws) * 2 // quantiles' error is about twice the mean's here
	for _, at := range []float64{0.25, 0.5, 0.75} {
		qa, qb := a[int(at*draws)], b[int(at*draws)]
		if math.Abs(qa-qb) > tol {
			t.Errorf("ln cost's %.2f quantile: %v by rejection, %v by inversion (tolerance %.3g)", at, qa, qb, tol)
		}
	}
	if ma, mb := stat.Mean(a, nil), stat.Mean(b, nil); math.Abs(ma-mb) > 5*sd*math.Sqrt(2.0/draws) {
		t.Errorf("mean ln cost %v by rejection, %v by inversion", ma, mb)
	}
}
