package bandit

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
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

// TestTailQuantile checks tTailQuantile to a relative 1e-12 (1e-10 at
// 10⁵ degrees) against
// closed forms (1 and 2 degrees: −1/tan(πu) and (2u − 1)/√(2u(1 − u)))
// and against quantiles found by bisection of the regularized incomplete
// beta in 50-digit arithmetic (mpmath 1.3), across the degrees and tail
// probabilities a skipped draw meets. gonum's Quantile is off by 2e-5 of
// the value at 300 degrees and u = 1e-12, where this is not.
func TestTailQuantile(t *testing.T) {
	cases := [][3]float64{
		{2.5, 1e-12, -55306.174076515815467},
		{2.5, 1e-6, -220.17342917823684138},
		{2.5, 1e-4, -34.867969321114772774},
		{2.5, 9.99e-4, -13.827782046908788331},
		{6, 1e-12, -179.75335991079195723},
		{6, 1e-6, -17.830314500655491418},
		{6, 1e-4, -8.0247927731163755232},
		{6, 9.99e-4, -5.2086592596531490051},
		{6.4, 1e-12, -141.26930371781465624},
		{6.4, 1e-6, -16.142328237678999247},
		{6.4, 1e-4, -7.5840679068042219118},
		{6.4, 9.99e-4, -5.0174183416833567475},
		{7.3, 1e-12, -91.094866593897542777},
		{7.3, 1e-6, -13.493523060744642292},
		{7.3, 1e-4, -6.850381320312296105},
		{7.3, 9.99e-4, -4.6896938838243946347},
		{12, 1e-12, -28.687656649331750493},
		{12, 1e-6, -8.504302718054583137},
		{12, 1e-4, -5.2632730078259667131},
		{12, 9.99e-4, -3.9301870957489537033},
		{40, 1e-12, -9.987885004868848985},
		{40, 1e-6, -5.5539697518150394064},
		{40, 1e-4, -4.0942071027306823724},
		{40, 9.99e-4, -3.3072355569044578351},
		{300, 1e-12, -7.3413238421787726765},
		{300, 1e-6, -4.8485143011100248926},
		{300, 1e-4, -3.7654932071859858295},
		{300, 9.99e-4, -3.117924119507276849},
		{2000, 1e-12, -7.0791146899569917068},
		{2000, 1e-6, -4.7674801453936221678},
		{2000, 1e-4, -3.7259225661998718659},
		{2000, 9.99e-4, -3.0946105304626572985},
		{100000, 1e-12, -7.0353717423935763416},
		{100000, 1e-6, -4.7537047163912882536},
		{100000, 1e-4, -3.7191543826413443596},
		{100000, 9.99e-4, -3.0906109601793021054},
	}
	for _, u := range []float64{1e-12, 1e-6, 1e-4, 1e-3, 0.01} {
		cases = append(cases, [3]float64{1, u, -1 / math.Tan(math.Pi*u)},
			[3]float64{2, u, (2*u - 1) / math.Sqrt(2*u*(1-u))})
	}
	for _, c := range cases {
		nu, u, want := c[0], c[1], c[2]
		tol := 1e-12
		if nu > 2000 {
			tol = 1e-10 // gonum's CDF is no closer at 10⁵ degrees
		}
		if got := tTailQuantile(u, nu); math.Abs(got-want) > tol*math.Abs(want) {
			t.Errorf("ν=%v, u=%v: %v, want %v", nu, u, got, want)
		}
	}
}

// BenchmarkTailQuantile compares tTailQuantile with gonum's Quantile at
// a skipped draw's tail (u < skipTail, 7.3 degrees).
func BenchmarkTailQuantile(b *testing.B) {
	for _, c := range []struct {
		name string
		f    func(u float64) float64
	}{
		{"newton", func(u float64) float64 { return tTailQuantile(u, 7.3) }},
		{"gonum", func(u float64) float64 { return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: 7.3}.Quantile(u) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			var sum float64
			i := 0
			for b.Loop() {
				sum += c.f(skipTail * float64(1+i%997) / 1000)
				i++
			}
			if sum == 0 {
				b.Fatal("no quantiles")
			}
		})
	}
}
