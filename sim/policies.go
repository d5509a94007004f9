package sim

import (
	"math/rand/v2"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/bandit"
)

// EpsilonGreedyRate is egreedy's exploration probability in Policies.
const EpsilonGreedyRate = 0.05

// PolicyNames lists the policies Policies returns, in its order.
var PolicyNames = []string{"thompson", "static2x", "pcie5x", "thresholds", "roofline", "calibrate", "egreedy", "ucb1", "oracle", "cpu", "gpu"}

// Policies returns every policy of DESIGN.md § Evaluation, built for arms,
// in the order of PolicyNames: thompson (adaptive's, default bandit.Config,
// seeded by seed), the static baselines, the StarPU-style calibrate, the
// textbook egreedy (ε = EpsilonGreedyRate, seeded by seed) and ucb1, the
// oracle (given truth: Env.Truth), and everything on the first CPU arm and
// on the first GPU arm. cpu or gpu is left out when no arm is of that kind.
// It returns an error only when thompson rejects the arms (none, or more
// than adaptive.MaxBackends).
func Policies(arms []bandit.Arm, truth func(bucket, arm int) float64, seed uint64) ([]bandit.Policy, error) {
	th, err := adaptive.NewThompsonSeed(bandit.Config{}, arms, seed)
	if err != nil {
		return nil, err
	}
	ps := []bandit.Policy{
		th,
		bandit.NewStatic2x(arms),
		bandit.NewPCIe5x(arms),
		bandit.NewThresholds(arms),
		bandit.NewRoofline(arms),
		bandit.NewCalibrate(arms),
		bandit.NewEpsilonGreedy(arms, EpsilonGreedyRate, rand.New(rand.NewPCG(seed, 0xe9))),
		bandit.NewUCB1(arms),
		bandit.NewOracle(arms, truth),
	}
	for _, gpu := range []bool{false, true} {
		for i, a := range arms {
			if a.GPU == gpu {
				ps = append(ps, bandit.NewFixed(arms, i))
				break
			}
		}
	}
	return ps, nil
}
