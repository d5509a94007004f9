package eval_test

import (
	"fmt"
	"os"

	"github.com/adaptsched/adaptsched/eval"
	"github.com/adaptsched/adaptsched/sim"
)

// A perf table replayed under two fixed policies and the oracle.
func ExampleEnv_Run() {
	f, err := os.Open("../sim/testdata/small.csv")
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
	env, err := eval.NewEnv(w, w.Arms(), eval.EnvOptions{})
	if err != nil {
		panic(err)
	}
	arms := env.Arms()
	for _, p := range []eval.Policy{eval.NewFixed(arms, 0), eval.NewFixed(arms, 1), eval.NewOracle(arms, env.Truth)} {
		r, err := env.Run(p, 1)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%-6s on GPU %3.0f%%, regret %6.1f%%\n", r.Policy, r.Share[0]*100, r.RegretPct)
	}
	// Output:
	// gpu    on GPU 100%, regret    1.9%
	// cpu    on GPU   0%, regret 10496.7%
	// oracle on GPU  77%, regret    0.0%
}
