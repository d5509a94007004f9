package sim_test

import (
	"fmt"
	"os"

	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/sim"
)

// A perf table replayed under two fixed policies and the oracle.
func ExampleEnv_Run() {
	f, err := os.Open("testdata/small.csv")
	if err != nil {
		panic(err)
	}
	defer f.Close()
	tab, err := sim.LoadTable(f, "small.csv")
	if err != nil {
		panic(err)
	}
	w, err := tab.Workload(10_000, 1.1, 1)
	if err != nil {
		panic(err)
	}
	env, err := sim.NewEnv(w, w.Arms(), sim.EnvOptions{})
	if err != nil {
		panic(err)
	}
	arms := env.Arms()
	for _, p := range []bandit.Policy{bandit.NewFixed(arms, 0), bandit.NewFixed(arms, 1), bandit.NewOracle(arms, env.Truth)} {
		r, err := env.Run(p, 1)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%-6s on GPU %3.0f%%, regret %6.1f%%\n", r.Policy, r.Share[0]*100, r.RegretPct)
	}
	// Output:
	// gpu    on GPU 100%, regret    1.9%
	// cpu    on GPU   0%, regret 10482.8%
	// oracle on GPU  77%, regret    0.0%
}

// A simulated GPU as a backend, slowed down three times from its 1000th op.
func ExampleOpen() {
	dev, err := sim.Open("h100", sim.DefaultOptions().WithSeed(7).
		WithEvents(sim.Event{At: 1000, Kind: sim.Throttle, Factor: 3}))
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	fmt.Println(dev.Info().Name, dev.Info().Kind, dev.Info().Nominal.GFLOPS)
	// Output: sim:h100 gpu 67000
}
