// Package eval measures placement policies against the oracle (DESIGN.md §
// Evaluation): the regret harness, the oracle, and the baselines that
// adaptsched replaces. It drives the same adaptive.Scheduler that the
// Executor runs, so the regret it reports is that of production's code.
//
//   - Env replays a sim workload over sim arms under any Policy and
//     reports total time, the oracle's, regret, switches, the share of
//     decisions made to learn (ExplorePct) and of those off the oracle's
//     backend (OffOraclePct), per-bucket decisions and regret over time.
//   - Thompson is adaptsched itself: Choose is Scheduler.Select of the op
//     with the Residency of its inputs, Observe is Scheduler.Observe, and
//     the copies the harness charges reach Scheduler.ObserveTransfer.
//   - The baselines keep their sources' constants: static2x
//     (HybridScheduler), pcie5x and thresholds (BackendSelector), roofline
//     (the RLX cost model), calibrate (StarPU's history model), egreedy
//     and ucb1 (textbook bandits), the oracle and fixed placements.
//     Placement runs any of them through the Scheduler on real work.
//
// # Usage
//
//	w, _ := sim.MixedServing(sim.Llama32_1B, 200_000, 1, sim.ServingOptions{})
//	env, _ := eval.NewEnv(w, []sim.Arm{
//		{Profile: sim.MustProfile("h100")},
//		{Profile: sim.MustProfile("cpu2")},
//	}, eval.EnvOptions{})
//	ps, _ := eval.Policies(env.Arms(), env.Truth, adaptive.Config{Seed: 1})
//	defer ps[0].(*eval.Thompson).Close()
//	for _, p := range ps {
//		r, _ := env.Run(p, 1)
//		fmt.Printf("%-10s regret %.2f%%\n", r.Policy, r.RegretPct)
//	}
package eval
