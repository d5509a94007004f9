// Package sim simulates the devices adaptsched schedules onto and the
// workloads it schedules, so that the scheduler, the executor and every
// comparison of DESIGN.md § Evaluation (package eval) run end to end
// without a GPU.
//
//   - Profiles (mi300x, mi250, rx7900xtx, h100, igpu, slowlink, the
//     offload GPUs pcie3x8, pcie4x16 and pcie5x16, and the CPUs cpu2,
//     cpu64 and desktop16; Profiles lists them) hold each device's
//     datasheet figures, which the policies see,
//     and its hidden true behaviour, which the simulator draws durations
//     from: shape-dependent matmul efficiency, launch overhead, achievable
//     bandwidth, the host link, lognormal noise, heavy-tailed spikes and a
//     first-run warm-up.
//   - Device implements backends.Backend on host memory, registered as
//     "sim:<profile>": Run computes with the reference kernels (or skips
//     that) and reports the modelled duration without sleeping; scheduled
//     Events throttle it, load it with a second tenant, or make it fail
//     (transient errors, out of memory, device lost).
//   - Workloads are deterministic op streams of real models (Llama-3-8B,
//     Llama-3.2-1B, Qwen2.5-0.5B): Decode, Prefill, MixedServing; and perf
//     tables, whose rows become a Zipf-distributed stream: a CSV as users
//     have it (LoadTable: free-text shapes, BOM, blank counts, hardware
//     figures per backend in "# backend LABEL:" lines) or StarPU's own
//     history-based models, format 45 (LoadStarPU, LoadStarPUDir).
//   - A Timeline is the virtual clock of one run: the host issues work,
//     each device runs its queue in order, and a step's time is its
//     makespan (Async), or every op waits for its end (Synchronous), or
//     durations add up as before queues (Serial, the default of a device
//     opened alone). Device implements backends.Queuer on it; the
//     profiles' issue, gap and synchronisation costs are cited in
//     launch.go. Op.After gives a workload's dependencies: the Qwen1.5
//     MoE model's experts are independent branches.
//   - Arm pairs a profile (or a perf table's column) with scheduled
//     events for an evaluation; Arm.Truth is its ground truth per op,
//     which only the evaluation's oracle sees.
//
// # Usage
//
// ExampleOpen (example_test.go) opens a simulated H100 that slows down
// three times from its 1000th op; backends.Open("sim:h100") gives one
// too.
//
// Everything is deterministic by seed; durations are reported, never
// slept, so 200,000 ops replay in milliseconds.
package sim
