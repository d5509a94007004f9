package bandit_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/adaptsched/adaptsched/bandit"
)

// TestLazyDiscount checks the lazy discount (DESIGN.md § The bandit,
// Bucket's doc) against closed-form numbers: an arm observed once, at y,
// then left alone for k observations of the other arm has paid k+1
// discounts, so its evidence is w = γ^(k+1) and
//
//	κ = κ0 + w, μ = (κ0μ0 + w·y)/κ, α = α0 + w/2,
//	β = β0 + (w·y² + κ0μ0² − κμ²)/2.
func TestLazyDiscount(t *testing.T) {
	cfg := bandit.Config{Discount: 0.99}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p0, p1 := bandit.NewPrior(100, 0.2, 0.3), bandit.NewPrior(300, 0.2, 0.3)
	b := bandit.NewBucket([]bandit.NormalGamma{p0, p1})
	const y, k = 5.0, 37
	b.ObserveLn(&cfg, 1, y)
	for range k {
		b.ObserveLn(&cfg, 0, math.Log(100))
	}
	b.Settle(&cfg)
	w := math.Pow(cfg.Discount, k+1)
	kappa := p1.Kappa + w
	mu := (p1.Kappa*p1.Mu + w*y) / kappa
	want := bandit.NormalGamma{Mu: mu, Kappa: kappa, Alpha: p1.Alpha + w/2,
		Beta: p1.Beta + (w*y*y+p1.Kappa*p1.Mu*p1.Mu-kappa*mu*mu)/2}
	if !nearNG(b.Arms[1], want, 1e-12) {
		t.Errorf("arm 1 after %d others' observations: %+v, want %+v", k, b.Arms[1], want)
	}
	// Settling again owes nothing.
	before := b.Arms[1]
	b.Settle(&cfg)
	if b.Arms[1] != before {
		t.Errorf("a second Settle changed arm 1: %+v to %+v", before, b.Arms[1])
	}
}

// TestLazyDiscountMatchesEager replays random interleaved observations
// into a Bucket and into posteriors discounted eagerly (every arm at
// every observation, as NormalGamma.Discount defines it), reading the bucket
// at random moments: the posteriors agree to 1e-9 (β is recovered from
// Σy² − κμ², which cancels: both ways round off ~1e-12 of κμ² in it).
func TestLazyDiscountMatchesEager(t *testing.T) {
	cfg := bandit.Config{Discount: 0.995}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	priors := []bandit.NormalGamma{bandit.NewPrior(100, 0.2, 0.3), bandit.NewPrior(120, 0.2, 0.3), bandit.NewPrior(90, 0.2, 0.3)}
	b := bandit.NewBucket(priors)
	eager := append([]bandit.NormalGamma(nil), priors...)
	r := rand.New(rand.NewPCG(7, 7))
	for i := range 5000 {
		arm := r.IntN(3)
		if r.IntN(10) < 7 { // mostly one arm, as a settled bucket
			arm = 0
		}
		// Within a standard deviation of the arm's mean: no winsorizing,
		// no alarm, which the reference does not model.
		y := eager[arm].Mu + 0.05*r.NormFloat64()
		if b.ObserveLn(&cfg, arm, y) {
			t.Fatalf("observation %d raised an alarm", i)
		}
		eager[arm].Update(y)
		for a := range eager {
			eager[a].Discount(priors[a], cfg.Discount)
		}
		if r.IntN(50) == 0 {
			a := r.IntN(3)
			b.SettleArm(&cfg, a)
			if !nearNG(b.Arms[a], eager[a], 1e-9) {
				t.Fatalf("observation %d: arm %d %+v, eager %+v", i, a, b.Arms[a], eager[a])
			}
		}
	}
	b.Settle(&cfg)
	for a := range eager {
		if !nearNG(b.Arms[a], eager[a], 1e-9) {
			t.Errorf("arm %d %+v, eager %+v", a, b.Arms[a], eager[a])
		}
	}
}

// nearNG reports whether p and q agree to a relative tol in every parameter.
func nearNG(p, q bandit.NormalGamma, tol float64) bool {
	c := func(x, y float64) bool { return math.Abs(x-y) <= tol*math.Max(1, math.Abs(y)) }
	return c(p.Mu, q.Mu) && c(p.Kappa, q.Kappa) && c(p.Alpha, q.Alpha) && c(p.Beta, q.Beta)
}
