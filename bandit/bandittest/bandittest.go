// Package bandittest is a tiny synthetic-arm simulator for statistical
// tests of bandit policies, shared by bandit's own tests and eval's:
// arms with lognormal durations whose true means may
// change over time, a driver that runs a chooser against them, and the
// figures tests assert on (share, switches, regret).
//
// # Usage
//
//	w := bandittest.World{Mean: bandittest.Static(100, 200), Sigma: 0.2}
//	cfg := bandit.DefaultConfig()
//	c := bandittest.NewBucketChooser(bandit.NewBucket(priors), &cfg, r)
//	choices := w.Run(c, 20_000, r)
//	share := bandittest.Share(choices, 0, 19_000, 20_000)
package bandittest

import (
	"math"
	"math/rand/v2"

	"github.com/adaptsched/adaptsched/bandit"
)

// World is a synthetic bucket: the true mean duration of each arm at
// decision t, and lognormal noise around it.
type World struct {
	// Mean returns arm's true mean duration in µs at decision t.
	Mean func(t, arm int) float64
	// Sigma is the standard deviation of ln(duration).
	Sigma float64
	// Override, when not nil, replaces arm's nth measurement (counted from
	// 0 per arm) at decision t when ok is true: spikes, faults.
	Override func(t, arm, nth int) (us float64, ok bool)
}

// Static returns a Mean function with constant means (µs), one per arm.
func Static(means ...float64) func(t, arm int) float64 {
	return func(_, arm int) float64 { return means[arm] }
}

// Step returns a Mean function whose means switch from before to after at
// decision at.
func Step(at int, before, after []float64) func(t, arm int) float64 {
	return func(t, arm int) float64 {
		if t < at {
			return before[arm]
		}
		return after[arm]
	}
}

// LogNormal draws a duration (µs) whose mean is meanUs and whose
// logarithm has standard deviation sigma.
func LogNormal(r *rand.Rand, meanUs, sigma float64) float64 {
	return meanUs * math.Exp(sigma*r.NormFloat64()-sigma*sigma/2)
}

// Chooser is what World.Run drives: a choice per decision t and the
// measured duration of the arm chosen.
type Chooser interface {
	Choose(t int) int
	Observe(t, arm int, us float64)
}

// Run drives c for n decisions and returns the arm chosen at each.
func (w World) Run(c Chooser, n int, r *rand.Rand) []int {
	choices := make([]int, n)
	seen := make(map[int]int)
	for t := range n {
		arm := c.Choose(t)
		choices[t] = arm
		us, ok := 0.0, false
		if w.Override != nil {
			us, ok = w.Override(t, arm, seen[arm])
		}
		if !ok {
			us = LogNormal(r, w.Mean(t, arm), w.Sigma)
		}
		seen[arm]++
		c.Observe(t, arm, us)
	}
	return choices
}

// Regret returns (Σ true mean of the arms chosen − Σ lowest true mean) /
// Σ lowest true mean over the decisions, with the minimum taken per
// decision (a moving oracle, so drift counts); arms is the arm count.
func (w World) Regret(choices []int, arms int) float64 {
	var got, best float64
	for t, a := range choices {
		got += w.Mean(t, a)
		m := math.Inf(1)
		for i := range arms {
			m = math.Min(m, w.Mean(t, i))
		}
		best += m
	}
	return (got - best) / best
}

// Share returns the fraction of decisions in [from, to) that chose arm.
func Share(choices []int, arm, from, to int) float64 {
	return float64(Count(choices, arm, from, to)) / float64(to-from)
}

// Count returns how many decisions in [from, to) chose arm.
func Count(choices []int, arm, from, to int) int {
	n := 0
	for _, a := range choices[from:to] {
		if a == arm {
			n++
		}
	}
	return n
}

// Switches returns how many times consecutive decisions differ.
func Switches(choices []int) int {
	n := 0
	for i := 1; i < len(choices); i++ {
		if choices[i] != choices[i-1] {
			n++
		}
	}
	return n
}

// BucketChooser adapts a bandit.Bucket (thompson) to Chooser.
type BucketChooser struct {
	B     *bandit.Bucket
	Cfg   *bandit.Config
	R     *rand.Rand
	costs []float64
}

// NewBucketChooser returns a Chooser over b with cfg (validated) and r.
func NewBucketChooser(b *bandit.Bucket, cfg *bandit.Config, r *rand.Rand) *BucketChooser {
	return &BucketChooser{B: b, Cfg: cfg, R: r, costs: make([]float64, len(b.Arms))}
}

// Choose implements Chooser.
func (c *BucketChooser) Choose(int) int {
	arm, _ := c.B.Choose(c.Cfg, nil, c.R, c.costs)
	return arm
}

// Observe implements Chooser.
func (c *BucketChooser) Observe(_, arm int, us float64) { c.B.Observe(c.Cfg, arm, us) }

// Priors returns one prior per arm from predicted means (µs) under cfg.
func Priors(cfg *bandit.Config, predictedUs ...float64) []bandit.NormalGamma {
	p := make([]bandit.NormalGamma, len(predictedUs))
	for i, u := range predictedUs {
		p[i] = bandit.NewPrior(u, cfg.PriorStrength, cfg.PriorSpread)
	}
	return p
}

// SpikeWorld is the StarPU case (DESIGN.md § What it replaces): a GPU arm
// (0) at 190 µs and a CPU arm (1) at 400 µs, σ = 0.1, whose first `spikes`
// GPU measurements are 70–100 ms (a preempted GPU, a warm-up burst).
func SpikeWorld(spikes int) World {
	return World{
		Mean:  Static(190, 400),
		Sigma: 0.1,
		Override: func(_, arm, nth int) (float64, bool) {
			if arm == 0 && nth < spikes {
				return 70_000 + 30_000*float64(nth%4)/3, true
			}
			return 0, false
		},
	}
}
