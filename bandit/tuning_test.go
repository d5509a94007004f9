package bandit_test

import (
	"fmt"
	"testing"

	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/bandit/bandittest"
)

// tuningWorlds is BenchmarkTuning's synthetic workload (DESIGN.md § The
// bandit, defaults): a drift bucket (arm 0 is 3× throttled for decisions
// 3,000–6,000, then recovers), a near tie (3%) and a clear 1.5× gap, each
// 10,000 decisions, σ = 0.2, priors wrong by 2× toward the worse arm.
func tuningWorlds() []struct {
	w     bandittest.World
	prior []float64
} {
	drift := func(t, arm int) float64 {
		if arm == 0 && t >= 3000 && t < 6000 {
			return 300
		}
		return []float64{100, 200}[arm]
	}
	return []struct {
		w     bandittest.World
		prior []float64
	}{
		{bandittest.World{Mean: drift, Sigma: 0.2}, []float64{200, 100}},
		{bandittest.World{Mean: bandittest.Static(100, 103), Sigma: 0.2}, []float64{200, 100}},
		{bandittest.World{Mean: bandittest.Static(100, 150), Sigma: 0.2}, []float64{200, 75}},
	}
}

// BenchmarkTuning measures regret % (against the per-decision best arm)
// and switches per 10,000 decisions over hysteresis × discount, 8 seeds
// per cell; run with -benchtime=1x. The figures are quoted beside the
// defaults in config.go.
func BenchmarkTuning(b *testing.B) {
	for _, h := range []float64{-1, 0.05, 0.1, 0.15, 0.2, 0.5, 1.0} {
		for _, g := range []float64{1, 0.999, 0.995, 0.99, 0.95} {
			name := fmt.Sprintf("h=%g/gamma=%g", max(h, 0), g)
			b.Run(name, func(b *testing.B) {
				cfg := bandit.Config{Hysteresis: h, Discount: g}
				if err := cfg.Validate(); err != nil {
					b.Fatal(err)
				}
				var regret, switches float64
				runs := 0
				for b.Loop() {
					for seed := uint64(1); seed <= 8; seed++ {
						for _, s := range tuningWorlds() {
							ch, _ := runBucket(cfg, s.w, s.prior, 10_000, seed)
							regret += s.w.Regret(ch, 2)
							switches += float64(bandittest.Switches(ch))
							runs++
						}
					}
				}
				b.ReportMetric(100*regret/float64(runs), "regret%")
				b.ReportMetric(switches/float64(runs), "switches/10k")
			})
		}
	}
}
