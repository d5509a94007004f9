package bandit_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/adaptsched/adaptsched/bandit"
)

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.12g, want %.12g (±%g)", what, got, want, tol)
	}
}

func eqNG(t *testing.T, what string, got, want bandit.NormalGamma, tol float64) {
	t.Helper()
	near(t, what+".Mu", got.Mu, want.Mu, tol)
	near(t, what+".Kappa", got.Kappa, want.Kappa, tol)
	near(t, what+".Alpha", got.Alpha, want.Alpha, tol)
	near(t, what+".Beta", got.Beta, want.Beta, tol)
}

// TestUpdateClosedForm checks the update of DESIGN.md § The bandit against
// numbers worked out by hand. Prior NG(μ0=0, κ0=1, α0=2, β0=1), y = 1, 2, 3:
//
//	y=1: κ=2, μ=(0+1)/2=0.5, α=2.5, β=1+1·1²/(2·2)=1.25
//	y=2: κ=3, μ=(2·0.5+2)/3=1,  α=3,   β=1.25+2·1.5²/(2·3)=2
//	y=3: κ=4, μ=(3·1+3)/4=1.5,  α=3.5, β=2+3·2²/(2·4)=3.5
//
// and from the sufficient statistics n=3, ȳ=2, S=Σ(y−ȳ)²=2:
// κ=κ0+n=4, μ=(κ0μ0+nȳ)/κ=1.5, α=α0+n/2=3.5,
// β=β0+S/2+κ0·n·(ȳ−μ0)²/(2κ)=1+1+12/8=3.5.
func TestUpdateClosedForm(t *testing.T) {
	p := bandit.NormalGamma{Mu: 0, Kappa: 1, Alpha: 2, Beta: 1}
	want := []bandit.NormalGamma{{0.5, 2, 2.5, 1.25}, {1, 3, 3, 2}, {1.5, 4, 3.5, 3.5}}
	for i, y := range []float64{1, 2, 3} {
		p.Update(y)
		eqNG(t, "after y="+string(rune('1'+i)), p, want[i], 1e-12)
	}
}

// TestDiscountClosedForm: Update(1), Discount(γ=0.5), Update(2) from the
// same prior equals the posterior of weighted data w=(0.5, 1), worked out
// by hand: n=1.5, Σwy=2.5, ȳ=5/3, Σw(y−ȳ)²=0.5·4/9+1/9=1/3; κ=2.5, μ=1,
// α=2.75, β=1+(1/3)/2+1·1.5·(5/3)²/(2·2.5)=1+1/6+5/6=2.
func TestDiscountClosedForm(t *testing.T) {
	prior := bandit.NormalGamma{Mu: 0, Kappa: 1, Alpha: 2, Beta: 1}
	p := prior
	p.Update(1)
	p.Discount(prior, 0.5)
	p.Update(2)
	eqNG(t, "discounted", p, bandit.NormalGamma{Mu: 1, Kappa: 2.5, Alpha: 2.75, Beta: 2}, 1e-12)
	q := p
	q.Discount(prior, 1)
	eqNG(t, "γ=1", q, p, 1e-12)
}

// TestMergeEqualsSequential: posteriors are sufficient statistics
// (DESIGN.md § Persistence), so the Merge of two partial posteriors equals
// one posterior that saw every observation, one at a time.
func TestMergeEqualsSequential(t *testing.T) {
	prior := bandit.NewPrior(150, 0.5, 0.3)
	r := rand.New(rand.NewPCG(1, 1))
	all, a, b := prior, prior, prior
	for i := range 200 {
		y := math.Log(100) + 0.3*r.NormFloat64()
		all.Update(y)
		if i%3 == 0 {
			a.Update(y)
		} else {
			b.Update(y)
		}
	}
	eqNG(t, "merge", bandit.Merge(prior, a, b), all, 1e-9)
}

// TestNewPrior: the prior's lognormal mean is the estimate (DESIGN.md §
// The bandit: μ0 = ln(estimate) − s0²/2, β0 = (α0−1)s0²; with α0 = 3 and
// s0 = 0.2, β0 = 2·0.04 = 0.08).
func TestNewPrior(t *testing.T) {
	p := bandit.NewPrior(100, 1, 0.2)
	near(t, "Mu", p.Mu, math.Log(100)-0.02, 1e-12)
	near(t, "Alpha", p.Alpha, 3, 0)
	near(t, "Beta", p.Beta, 0.08, 1e-12)
	near(t, "MeanUs", p.MeanUs(), 100, 1e-9)
	// NewPriorLn takes the logarithm: the same prior, the same floor.
	for _, us := range []float64{1e-6, 1e-3, 0.5, 100, 3e7} {
		q, want := bandit.NewPriorLn(math.Log(us), 1, 0.2), bandit.NewPrior(us, 1, 0.2)
		near(t, "NewPriorLn Mu", q.Mu, want.Mu, 1e-12)
		if q.Kappa != want.Kappa || q.Alpha != want.Alpha || q.Beta != want.Beta {
			t.Errorf("NewPriorLn(ln %v) = %+v, want %+v", us, q, want)
		}
	}
}

// TestSampleMoments: ln(Sample) = m + 1/(2τ) has mean μ + β/(2(α−1))
// (E[m]=μ, E[1/τ]=β/(α−1)); 200,000 draws, tolerance 5 standard errors.
func TestSampleMoments(t *testing.T) {
	p := bandit.NormalGamma{Mu: 4, Kappa: 3, Alpha: 6, Beta: 0.5}
	r := rand.New(rand.NewPCG(2, 2))
	const n = 200_000
	var s, s2 float64
	for range n {
		x := math.Log(p.Sample(r))
		s += x
		s2 += x * x
	}
	mean := s / n
	se := math.Sqrt((s2/n - mean*mean) / n)
	near(t, "E[ln Sample]", mean, 4+0.5/(2*5), 5*se)
}

// TestWiden: Widen keeps the mean and E[1/τ], resets κ and α to the
// prior's, and a later Discount moves smoothly toward the prior.
func TestWiden(t *testing.T) {
	prior := bandit.NewPrior(100, 0.05, 0.2)
	p := prior
	for range 50 {
		p.Update(math.Log(300))
	}
	mu, v := p.Mu, p.Variance()
	p.Widen(prior)
	near(t, "Mu", p.Mu, mu, 1e-12)
	near(t, "Variance", p.Variance(), v, 1e-12)
	near(t, "Kappa", p.Kappa, prior.Kappa, 0)
	near(t, "Alpha", p.Alpha, prior.Alpha, 0)
	q := p
	q.Discount(prior, 0.9)
	if !(q.Mu < mu && q.Mu > prior.Mu) {
		t.Errorf("discounted widened Mu = %v, want between prior %v and %v", q.Mu, prior.Mu, mu)
	}
	near(t, "Mu after discount", q.Mu, prior.Mu+0.9*(mu-prior.Mu), 1e-9)
}

// TestChooseHysteresis checks DESIGN.md § The bandit, hysteresis, with
// posteriors so tight that samples equal their lognormal means.
func TestChooseHysteresis(t *testing.T) {
	tight := func(us float64) bandit.NormalGamma {
		return bandit.NormalGamma{Mu: math.Log(us), Kappa: 1e12, Alpha: 1e12, Beta: 1e-12}
	}
	arms := []bandit.NormalGamma{tight(100), tight(95)}
	r := rand.New(rand.NewPCG(1, 2))
	costs := make([]float64, 2)
	cases := []struct {
		inc      int
		h        float64
		extra    []float64
		arm      int
		held     bool
		wantCost float64 // costs[1]
	}{
		{-1, 0.1, nil, 1, false, 95},            // no incumbent: cheapest
		{0, 0.1, nil, 1, false, 95},             // 95 ≥ 0.9·100, but surely cheaper: switch
		{0, 0.01, nil, 1, false, 95},            // 95 < 0.99·100: switch
		{0, 0, []float64{0, 10}, 0, false, 105}, // transfer makes arm 1 dearer
		{1, 0.5, nil, 1, false, 95},             // incumbent is cheapest
		{0, 1, nil, 0, true, 95},                // h=1 never leaves
	}
	for i, c := range cases {
		arm, held := bandit.Choose(arms, c.inc, c.h, c.extra, r, costs)
		if arm != c.arm || held != c.held {
			t.Errorf("case %d: Choose = (%d, %v), want (%d, %v)", i, arm, held, c.arm, c.held)
		}
		near(t, "costs[1]", costs[1], c.wantCost, 1e-6)
	}
	// The incumbent's posterior mean bars a challenger too: against a
	// wide incumbent (mean cost 102 µs) a tight challenger at 95 µs never
	// undercuts 0.9 × 102, however high the incumbent draws (it draws
	// above 105.6, which would hand it over on its draw alone, about a
	// third of the time); one at 85 µs does whenever it undercuts both.
	wide := []bandit.NormalGamma{{Mu: math.Log(100), Kappa: 1, Alpha: 3, Beta: 0.08}, tight(95)}
	overDraw := 0
	for range 1000 {
		if arm, _ := bandit.Choose(wide, 0, 0.1, nil, r, costs); arm != 0 {
			t.Fatalf("a challenger at 95 µs took the bucket from an incumbent whose mean is %.1f µs", wide[0].MeanUs())
		}
		if costs[1] < 0.9*costs[0] {
			overDraw++
		}
	}
	if overDraw < 100 {
		t.Errorf("the incumbent drew above 95/0.9 µs %d times in 1000, want ≥ 100 for the check to mean anything", overDraw)
	}
	wide[1] = tight(85)
	switched := 0
	for range 1000 {
		arm, _ := bandit.Choose(wide, 0, 0.1, nil, r, costs)
		if want := costs[1] < 0.9*min(costs[0], wide[0].MeanUs()); (arm == 1) != want {
			t.Fatalf("challenger at 85 µs, incumbent drew %.1f (mean %.1f): chose %d", costs[0], wide[0].MeanUs(), arm)
		}
		if arm == 1 {
			switched++
		}
	}
	if switched < 500 {
		t.Errorf("a challenger at 85 µs took the bucket %d times in 1000, want ≥ 500", switched)
	}
}

// TestCUSUM: a 2σ shift alarms on the 4th residual (S = 1.5, 3, 4.5, 6 > 5)
// either way (DESIGN.md § The bandit); standard normal residuals give a
// false alarm every few hundred (two-sided ARL ≈ 465 for k=0.5, h=5;
// accepted 250–900 over 400,000 draws).
func TestCUSUM(t *testing.T) {
	for _, z := range []float64{2, -2} {
		d := bandit.CUSUM{K: 0.5, H: 5}
		for i := 1; i <= 4; i++ {
			if got := d.Add(z); got != (i == 4) {
				t.Errorf("z=%v: alarm at %d = %v", z, i, got)
			}
		}
	}
	d := bandit.CUSUM{K: 0.5, H: 5}
	r := rand.New(rand.NewPCG(5, 5))
	alarms := 0
	const n = 400_000
	for range n {
		if d.Add(r.NormFloat64()) {
			alarms++
		}
	}
	arl := float64(n) / float64(alarms)
	t.Logf("in-control run length %.0f", arl)
	if arl < 250 || arl > 900 {
		t.Errorf("in-control run length %.0f, want 250–900", arl)
	}
}

// TestCUSUMDefaults: the defaults (K = 0.5, H = 10; config.go says why)
// catch a 2σ shift on the 7th residual (S = 10.5 > 10) and a 5.5σ one
// (TestDrift's 3× slowdown at σ = 0.2) on the 3rd, and false-alarm rarely:
// Siegmund's approximation gives a two-sided run length near 70,000;
// accepted ≥ 25,000 over 2,000,000 standard normal draws.
func TestCUSUMDefaults(t *testing.T) {
	cfg := defaultCfg(t)
	for _, c := range []struct {
		z  float64
		at int
	}{{2, 7}, {-2, 7}, {5.5, 3}} {
		d := bandit.CUSUM{K: cfg.CUSUMK, H: cfg.CUSUMH}
		for i := 1; i <= c.at; i++ {
			if got := d.Add(c.z); got != (i == c.at) {
				t.Errorf("z=%v: alarm at %d = %v, want the alarm at %d", c.z, i, got, c.at)
			}
		}
	}
	d := bandit.CUSUM{K: cfg.CUSUMK, H: cfg.CUSUMH}
	r := rand.New(rand.NewPCG(6, 6))
	alarms := 0
	const n = 2_000_000
	for range n {
		if d.Add(r.NormFloat64()) {
			alarms++
		}
	}
	t.Logf("%d false alarms in %d draws", alarms, n)
	if alarms > n/25_000 {
		t.Errorf("%d false alarms in %d draws, want ≤ %d (run length ≥ 25,000)", alarms, n, n/25_000)
	}
}

// TestConfigValidate: zero fields take the defaults, impossible values
// are rejected with ErrConfig.
func TestConfigValidate(t *testing.T) {
	c := bandit.Config{}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Hysteresis != bandit.DefaultHysteresis || c.Discount != bandit.DefaultDiscount ||
		c.PriorStrength != bandit.DefaultPriorStrength || c.CUSUMH != bandit.DefaultCUSUMH {
		t.Errorf("defaults not filled: %+v", c)
	}
	for _, bad := range []bandit.Config{
		{Discount: 1.5}, {Discount: -0.1}, {Hysteresis: 2}, {PriorStrength: 9},
		{PriorSpread: -1}, {CUSUMK: -1}, {CUSUMH: -5}, {Discount: math.NaN()},
	} {
		if err := bad.Validate(); !errors.Is(err, bandit.ErrConfig) {
			t.Errorf("Validate(%+v) = %v, want ErrConfig", bad, err)
		}
	}
}

// TestRebaseWidened: a widened posterior keeps its learned mean at the
// prior's strength (Widen), N 0 with a non-zero Σy; Rebase carries that
// evidence over as any other: onto its own prior it is unchanged, and
// onto another of the same strength its mean moves with the prior's.
func TestRebaseWidened(t *testing.T) {
	from := bandit.NewPrior(100, 0.05, 0.2)
	p := from
	for range 50 {
		p.Update(math.Log(400))
	}
	p.Widen(from)
	eqNG(t, "onto its own prior", bandit.Rebase(from, p, from), p, 1e-9)
	to := bandit.NewPrior(120, 0.05, 0.2)
	got := bandit.Rebase(from, p, to)
	near(t, "Mu onto another prior", got.Mu, to.Mu+(p.Mu-from.Mu), 1e-9)
}
