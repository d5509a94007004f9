package bandit

import (
	"math"
	"math/rand/v2"
	"testing"
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
		bd, ok := windowBound(p, prior, sK)
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
