package bandit

import (
	"math"
	"math/rand/v2"
	"testing"

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

// TestTInv checks tInv to 1e-12 of the value plus 1e-10 (1e-10 plus
// 1e-8 at 10⁵ degrees): near the median the CDF's own precision bounds
// it, as it bounds gonum's Quantile (off by 4e-5 of the value at 10⁵
// degrees and u = 0.4999). The references are closed forms (1
// and 2 degrees: −1/tan(πu) and (2u − 1)/√(2u(1 − u))) and against
// quantiles found by bisection of the regularized incomplete beta in
// 50-digit arithmetic (mpmath 1.3), below the median and, by symmetry,
// above it (where 1 − u is close enough to exact), across the degrees a
// posterior has (2α ≥ 6) and beyond.
// gonum's Quantile is off by 2e-5 of the value at 300 degrees and u =
// 1e-12, where tInv is not.
func TestTInv(t *testing.T) {
	lower := [][3]float64{
		{2.5, 1e-12, -55306.174076515815467},
		{2.5, 1e-6, -220.17342917823684138},
		{2.5, 1e-4, -34.867969321114772774},
		{2.5, 9.99e-4, -13.827782046908788331},
		{2.5, 0.2, -1.0101638747222387178},
		{2.5, 0.4999, -0.00027638913918030395504},
		{6, 1e-12, -179.75335991079195723},
		{6, 1e-6, -17.830314500655491418},
		{6, 1e-4, -8.0247927731163755232},
		{6, 9.99e-4, -5.2086592596531490051},
		{6, 0.2, -0.90570328518053146695},
		{6, 0.4999, -0.00026127890936510796618},
		{6.4, 1e-12, -141.26930371781465624},
		{6.4, 1e-6, -16.142328237678999247},
		{6.4, 1e-4, -7.5840679068042219118},
		{6.4, 9.99e-4, -5.0174183416833567475},
		{6.4, 0.2, -0.90144940492712757177},
		{6.4, 0.4999, -0.00026060781107628468026},
		{7.3, 1e-12, -91.094866593897542777},
		{7.3, 1e-6, -13.493523060744642292},
		{7.3, 1e-4, -6.850381320312296105},
		{7.3, 9.99e-4, -4.6896938838243946347},
		{7.3, 0.2, -0.89367135718022695934},
		{7.3, 0.4999, -0.00025936867024039206161},
		{12, 1e-12, -28.687656649331750493},
		{12, 1e-6, -8.504302718054583137},
		{12, 1e-4, -5.2632730078259667131},
		{12, 9.99e-4, -3.9301870957489537033},
		{12, 0.2, -0.87260929158813794084},
		{12, 0.4999, -0.00025593362884945139371},
		{40, 1e-12, -9.987885004868848985},
		{40, 1e-6, -5.5539697518150394064},
		{40, 1e-4, -4.0942071027306823724},
		{40, 9.99e-4, -3.3072355569044578351},
		{40, 0.2, -0.8506997957904542996},
		{40, 0.4999, -0.00025223421475791672173},
		{300, 1e-12, -7.3413238421787726765},
		{300, 1e-6, -4.8485143011100248926},
		{300, 1e-4, -3.7654932071859858295},
		{300, 9.99e-4, -3.117924119507276849},
		{300, 0.2, -0.84282101116139372083},
		{300, 0.4999, -0.00025087180246567282747},
		{2000, 1e-12, -7.0791146899569917068},
		{2000, 1e-6, -4.7674801453936221678},
		{2000, 1e-4, -3.7259225661998718659},
		{2000, 9.99e-4, -3.0946105304626572985},
		{2000, 0.2, -0.84180099094874078368},
		{2000, 0.4999, -0.00025069416490084472114},
		{100000, 1e-12, -7.0353717423935763416},
		{100000, 1e-6, -4.7537047163912882536},
		{100000, 1e-4, -3.7191543826413443596},
		{100000, 9.99e-4, -3.0906109601793021054},
		{100000, 0.2, -0.84162482799690084684},
		{100000, 0.4999, -0.00025066345674593300485},
	}
	var cases [][3]float64
	for _, c := range lower {
		cases = append(cases, c)
		if c[1] >= 1e-3 { // 1 − u rounds by at most 1e-13 of u
			cases = append(cases, [3]float64{c[0], 1 - c[1], -c[2]})
		}
	}
	for _, u := range []float64{1e-12, 1e-6, 1e-3, 0.2, 0.4999, 0.5, 0.7, 0.999} {
		cases = append(cases, [3]float64{2, u, (2*u - 1) / math.Sqrt(2*u*(1-u))})
		if u < 0.5 {
			cases = append(cases, [3]float64{1, u, -1 / math.Tan(math.Pi*u)})
		}
	}
	for _, c := range cases {
		nu, u, want := c[0], c[1], c[2]
		rel, abs := 1e-12, 1e-10
		if nu > 2000 {
			rel, abs = 1e-10, 1e-8
		}
		if got := tInv(u, nu); math.Abs(got-want) > rel*math.Abs(want)+abs {
			t.Errorf("ν=%v, u=%v: %v, want %v", nu, u, got, want)
		}
	}
}

// BenchmarkTInv compares tInv with gonum's Quantile at a skipped draw's
// tail (u < skipTail, 7.3 degrees) and in the body (u in [0.3, 0.97)).
func BenchmarkTInv(b *testing.B) {
	for _, q := range []struct {
		name   string
		lo, hi float64
	}{{"tail", 0, skipTail}, {"body", 0.3, 0.97}} {
		for _, c := range []struct {
			name string
			f    func(u float64) float64
		}{
			{"newton", func(u float64) float64 { return tInv(u, 7.3) }},
			{"gonum", func(u float64) float64 { return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: 7.3}.Quantile(u) }},
		} {
			b.Run(q.name+"/"+c.name, func(b *testing.B) {
				var sum float64
				i := 0
				for b.Loop() {
					sum += c.f(q.lo + (q.hi-q.lo)*float64(1+i%997)/1000)
					i++
				}
				if sum == 0 {
					b.Fatal("no quantiles")
				}
			})
		}
	}
}

// TestUpdateDiscounted checks updateDiscounted against Update then
// Discount: every parameter within 1e-12 relative, for posteriors grown
// from a prior by random observations and widened ones.
func TestUpdateDiscounted(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	prior := NewPrior(100, 0.2, 0.2)
	p := prior
	for i := range 5000 {
		y := math.Log(50+r.Float64()*200) + 0.3*r.NormFloat64()
		want := p
		want.Update(y)
		want.Discount(prior, 0.999)
		got := p
		got.updateDiscounted(prior, y, 0.999)
		for _, c := range [][2]float64{{got.Mu, want.Mu}, {got.Kappa, want.Kappa}, {got.Alpha, want.Alpha}, {got.Beta, want.Beta}} {
			if math.Abs(c[0]-c[1]) > 1e-12*math.Abs(c[1]) {
				t.Fatalf("step %d: got %+v, want %+v", i, got, want)
			}
		}
		p = want
		if i%500 == 499 {
			p.Widen(prior)
		}
	}
}

// TestTQuantile checks tQuantile's interpolated quantile against
// gonum's on a grid of degrees from 1 to 1,100: at or above it (the
// floors it gives are conservative), at or below the quantile at the
// tabulated degrees below, and within 2% of it from 6 to 1,024 degrees
// (a posterior grown from NewPrior has at least 6).
func TestTQuantile(t *testing.T) {
	for nu := 1.0; nu <= 1100; nu += 0.01 * math.Max(1, nu/10) {
		exact := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: nu}.Quantile(1 - skipTail)
		got, _ := tQuantile(nu)
		j := len(tNus) - 1
		for tNus[j] > nu {
			j--
		}
		if got < exact || got > tQuantiles[j] {
			t.Fatalf("%g degrees: interpolated %v, want between the exact %v and %v at %g degrees", nu, got, exact, tQuantiles[j], tNus[j])
		}
		if nu >= 6 && nu <= 1024 && got > 1.02*exact {
			t.Errorf("%g degrees: interpolated %v, more than 2%% above the exact %v", nu, got, exact)
		}
	}
	if _, ok := tQuantile(0.5); ok {
		t.Errorf("0.5 degrees: ok, want none below the table's least")
	}
}
