package eval

import (
	"math/rand/v2"

	"github.com/adaptsched/adaptsched/adaptive"
)

// EpsilonGreedyRate is egreedy's exploration probability in Policies.
const EpsilonGreedyRate = 0.05

// PolicyNames lists the policies Policies returns, in its order.
var PolicyNames = []string{"thompson", "static2x", "pcie5x", "thresholds", "roofline", "calibrate", "egreedy", "ucb1", "oracle", "cpu", "gpu"}

// Policies returns every policy of DESIGN.md § Evaluation, built for arms,
// in the order of PolicyNames: thompson (NewThompson with th: its Bandit,
// Seed and Store), the static baselines, the StarPU-style calibrate, the
// textbook egreedy (ε = EpsilonGreedyRate, seeded by th.Seed) and ucb1,
// the oracle (given truth: Env.Truth), and everything on the first CPU arm
// and on the first GPU arm. cpu or gpu is left out when no arm is of that
// kind. It fails only when thompson's Scheduler rejects th or the arms.
// The caller closes the first policy (thompson) when done.
func Policies(arms []Arm, truth func(bucket, arm int) float64, th adaptive.Config) ([]Policy, error) {
	tp, err := NewThompson(th, arms)
	if err != nil {
		return nil, err
	}
	ps := []Policy{
		tp,
		NewStatic2x(arms),
		NewPCIe5x(arms),
		NewThresholds(arms),
		NewRoofline(arms),
		NewCalibrate(arms),
		NewEpsilonGreedy(arms, EpsilonGreedyRate, rand.New(rand.NewPCG(th.Seed, 0xe9))),
		NewUCB1(arms),
		NewOracle(arms, truth),
	}
	for _, gpu := range []bool{false, true} {
		for i, a := range arms {
			if a.GPU == gpu {
				ps = append(ps, NewFixed(arms, i))
				break
			}
		}
	}
	return ps, nil
}
