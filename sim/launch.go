package sim

// launchCost is a profile's split of an op's fixed cost between the host
// and the device (Profile.IssueUs, GapUs, SyncUs), and the host's cost of
// a gathered op and of a gathering's launch (Profile.GatherIssueUs and
// GatherLaunchUs; 0: the device does not gather), µs.
type launchCost struct{ issue, gap, sync, gather, gatherLaunch float64 }

// The figures, each from a measurement; none was chosen to meet a target.
//
// NVIDIA (h100 and the pcie* cards, one CUDA runtime and one backend),
// measured by this project through its own Executor and GPU backend on an
// NVIDIA H200 (CUDA 13.0, driver 580.159.04; BENCHMARKS.md, real-GPU rows):
//   - issue 12.6: the host's time per queued op. infer's 100M-parameter
//     decode at batch 1, only:rocm, queued: 374–403 tokens/s at 204 ops
//     per step, 12.2–13.1 µs per op; backends/rocm BenchmarkGPUCalls
//     splits the backend's 8–12 µs of it (RunAsync): a launch 4.9 µs (the
//     4–6 µs published for a CUDA launch: susun-blog.com/blog/
//     pegainfer-3-cuda-graph; github.com/intel/torch-xpu-ops/issues/1016),
//     two event records 3.4 µs, the rest bookkeeping.
//   - gap 5: the shortest CUDA-event time of a trivial kernel (Add,
//     RMSNorm, RoPE, SwiGLU over 768–2048 floats: 4.86–5.28 µs on an H100
//     80GB in cmd/replay/testdata/h100-decode-b1.jsonl.gz), start and end
//     events included, as the queued backend times every op.
//   - sync 0: the same decode run synchronously (-sync) took 18.0–18.9 µs
//     per op, 5–6 µs over the queued run: the gap and the op's own time,
//     which the synchronous model already charges after the issue: the
//     wait itself adds nothing measurable.
//   - gather 4.0 and gatherLaunch 20: a CPU profile of that decode on
//     an H100 80GB (driver 580.159.04; bench/gpu-device.sh's host
//     profile: 999 gathered steps of 207 ops, 11,985 launches), where the
//     host's decode steps took 1.07 s of CPU, 0.24 s of it in the
//     launches: (1.07 − 0.24) s / 206,793 ops is 4.0 µs an op, 0.24 s /
//     11,985 launches 20 µs a launch (graph arguments updated, the graph
//     launched, two events recorded). With them this model gives that
//     decode at batch 1, 128 tokens, 706.3 tokens/s under the segments of
//     backends.SegmentLimit, where the H100 ran 680–750 (median 713.5).
//     The figures before, 7.36 and 7.9, were the H200's wall time per op
//     (an upper bound, the device's time inside it) and a launch priced
//     as a kernel's, and gave 575.
//   - the device's gap under a graph is kept at 5: the graphs' device
//     time averaged 5.65 µs a kernel, the work included, as the gap and
//     work the model already charges.
//
// AMD GPUs (mi300x, mi250, rx7900xtx, slowlink, igpu), from the HSA
// runtime's own figures (github.com/HSAFoundation/HSA-Drivers-Linux-AMD/
// issues/18, measured on an APU): batched dispatch 6 µs per kernel on
// average, a synchronous dispatch up to 21 µs. No HIP graph has been
// measured here: the AMD profiles do not gather (gather 0).
//   - issue 6: the batched dispatch's 6 µs.
//   - gap 5: the H100's measured floor; no AMD per-kernel floor has been
//     measured here, so this is the one figure taken from another vendor.
//   - sync 10: the synchronous dispatch's 21 µs less issue and gap.
//
// CPUs (cpu2, cpu64): the host hands an op to the backend's workers.
//   - issue 0.44: the Executor's synchronous overhead per op, 437 ns when
//     this profile was set (executor `ExecutorOverhead/sync`; BENCHMARKS.md
//     has its latest figure).
//   - gap = LaunchUs: the fan-out to the worker pool and back, which the
//     start-up calibration measures as the dispatch cost (2 µs on cpu2;
//     cpu64's 8 µs is its profile's assumption, not a measurement).
//   - sync 0: the fan-out's measured round trip already holds the
//     hand-back the host waits for.
var launchCosts = map[string]launchCost{
	"h100":      {issue: 12.6, gap: 5, sync: 0, gather: 4.0, gatherLaunch: 20},
	"mi300x":    {issue: 6, gap: 5, sync: 10},
	"mi250":     {issue: 6, gap: 5, sync: 10},
	"rx7900xtx": {issue: 6, gap: 5, sync: 10},
	"slowlink":  {issue: 6, gap: 5, sync: 10},
	"igpu":      {issue: 6, gap: 5, sync: 10},
	"cpu2":      {issue: 0.44, gap: 2, sync: 0},
	"cpu64":     {issue: 0.44, gap: 8, sync: 0},
	"pcie3x8":   {issue: 12.6, gap: 5, sync: 0, gather: 4.0, gatherLaunch: 20},
	"pcie4x16":  {issue: 12.6, gap: 5, sync: 0, gather: 4.0, gatherLaunch: 20},
	"pcie5x16":  {issue: 12.6, gap: 5, sync: 0, gather: 4.0, gatherLaunch: 20},
	"desktop16": {issue: 0.44, gap: 4, sync: 0},
}

func init() {
	for i := range profiles {
		p := &profiles[i]
		c, ok := launchCosts[p.Name]
		if !ok {
			panic("sim: profile " + p.Name + " has no launch costs")
		}
		p.IssueUs, p.GapUs, p.SyncUs = c.issue, c.gap, c.sync
		p.GatherIssueUs, p.GatherLaunchUs = c.gather, c.gatherLaunch
	}
}
