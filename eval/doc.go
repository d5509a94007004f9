// Package eval measures placement policies against the oracle (DESIGN.md §
// Evaluation): the regret harness, the oracle, and the baselines that
// adaptsched replaces. It drives the same adaptive.Scheduler that the
// Executor runs, so the regret it reports is that of production's code.
//
//   - Env replays a sim workload over sim arms under any Policy and
//     reports total time, the oracle's, regret, switches, the share of
//     decisions made to learn (LearnPct) and of those off the oracle's
//     backend (OffOraclePct), per-bucket decisions and regret over time.
//   - Thompson is adaptsched itself: Choose is Scheduler.Select of the op
//     with the Residency of its inputs, Observe is Scheduler.Observe, and
//     the copies the harness charges reach Scheduler.ObserveTransferAt.
//   - The baselines keep their sources' constants: static2x
//     (HybridScheduler), pcie5x and thresholds (BackendSelector), roofline
//     (the RLX cost model), calibrate (StarPU's history model), egreedy
//     and ucb1 (textbook bandits), the oracle and fixed placements.
//     Placement runs any of them through the Executor on real work
//     (executor.Config.Placer).
//
// # Usage
//
// ExampleEnv_Run (example_test.go) replays a simulator workload under
// every policy and prints each one's regret against the oracle;
// TestShapesLearnApart builds a scenario of its own (shapeSplit).
package eval
