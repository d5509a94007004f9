package bandit_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/bandit/bandittest"
)

// A bucket with a CPU arm whose cost model says 100 µs and a GPU arm said
// to be 300 µs, although the GPU really takes 30 µs (a prior wrong by 10×,
// DESIGN.md § The bandit): the bandit learns.
func ExampleBucket() {
	cfg := bandit.DefaultConfig()
	b := bandit.NewBucket([]bandit.NormalGamma{
		bandit.NewPrior(100, cfg.PriorStrength, cfg.PriorSpread),
		bandit.NewPrior(300, cfg.PriorStrength, cfg.PriorSpread),
	})
	r := rand.New(rand.NewPCG(1, 2))
	costs := make([]float64, 2)
	trueUs := []float64{100, 30}
	gpu := 0
	for i := range 2000 {
		arm, _ := b.Choose(&cfg, nil, r, costs)
		b.Observe(&cfg, arm, bandittest.LogNormal(r, trueUs[arm], 0.2))
		if i >= 1000 && arm == 1 {
			gpu++
		}
	}
	fmt.Println("GPU share of the last 1000 ≥ 0.97:", gpu >= 970)
	// Output: GPU share of the last 1000 ≥ 0.97: true
}
