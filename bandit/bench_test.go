package bandit_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/adaptsched/adaptsched/bandit"
)

// BenchmarkChoose measures Choose (one Thompson draw per arm) for 2 and 4
// arms: the scheduler's Select budget is ≤ 150 ns with Observe.
func BenchmarkChoose(b *testing.B) {
	for _, n := range []int{2, 4} {
		b.Run(fmt.Sprintf("arms=%d", n), func(b *testing.B) {
			arms := make([]bandit.NormalGamma, n)
			for i := range arms {
				arms[i] = bandit.NewPrior(100*float64(i+1), 1, 0.2)
			}
			costs := make([]float64, n)
			r := rand.New(rand.NewPCG(1, 2))
			b.ReportAllocs()
			for b.Loop() {
				bandit.Choose(arms, 0, 0.1, nil, r, costs)
			}
		})
	}
}

// BenchmarkBucket measures one Bucket.Choose + Bucket.Observe round (the
// scheduler's Select + Observe) for 2 and 4 arms.
func BenchmarkBucket(b *testing.B) {
	for _, n := range []int{2, 4} {
		b.Run(fmt.Sprintf("arms=%d", n), func(b *testing.B) {
			cfg := bandit.DefaultConfig()
			pri := make([]bandit.NormalGamma, n)
			for i := range pri {
				pri[i] = bandit.NewPrior(100*float64(i+1), cfg.PriorStrength, cfg.PriorSpread)
			}
			bk := bandit.NewBucket(pri)
			costs := make([]float64, n)
			r := rand.New(rand.NewPCG(1, 2))
			b.ReportAllocs()
			for b.Loop() {
				arm, _ := bk.Choose(&cfg, nil, r, costs)
				bk.Observe(&cfg, arm, 100)
			}
		})
	}
}
