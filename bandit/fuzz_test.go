package bandit_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/adaptsched/adaptsched/bandit"
)

// FuzzPosterior checks the bandit's invariant (CONVENTIONS.md 14): any
// sequence of finite positive durations, discounts and widens keeps every
// posterior parameter finite and positive, through Bucket.Observe too.
// Each 9-byte record is an op byte and a float64.
func FuzzPosterior(f *testing.F) {
	rec := func(op byte, v float64) []byte {
		b := []byte{op}
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	f.Add(append(rec(0, 100), rec(1, 0.5)...))
	f.Add(append(append(rec(0, 1e300), rec(2, 0)...), rec(0, 5e-324)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := bandit.Config{}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		prior := bandit.NewPrior(100, cfg.PriorStrength, cfg.PriorSpread)
		p := prior
		b := bandit.NewBucket([]bandit.NormalGamma{prior, bandit.NewPrior(50, 1, 0.3)})
		r := rand.New(rand.NewPCG(1, 2))
		costs := make([]float64, 2)
		for len(data) >= 9 {
			op, v := data[0], math.Float64frombits(binary.LittleEndian.Uint64(data[1:9]))
			data = data[9:]
			switch op % 3 {
			case 0:
				if !(v > 0) || math.IsInf(v, 0) {
					continue
				}
				p.Update(math.Log(v))
				arm, _ := b.Choose(&cfg, nil, r, costs)
				b.Observe(&cfg, arm, v)
			case 1:
				g := math.Abs(v)
				if !(g > 0 && g <= 1) {
					continue
				}
				p.Discount(prior, g)
			case 2:
				p.Widen(prior)
			}
			for _, q := range append([]bandit.NormalGamma{p}, b.Arms...) {
				for _, x := range []float64{q.Kappa, q.Alpha, q.Beta} {
					if !(x > 0) || math.IsInf(x, 0) {
						t.Fatalf("parameter not finite positive: %+v", q)
					}
				}
				if math.IsNaN(q.Mu) || math.IsInf(q.Mu, 0) {
					t.Fatalf("Mu not finite: %+v", q)
				}
				if s := q.Sample(r); !(s > 0) || math.IsInf(s, 0) {
					t.Fatalf("Sample = %v from %+v", s, q)
				}
			}
		}
	})
}
