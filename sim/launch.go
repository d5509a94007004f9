package sim

// launchCost is a profile's split of an op's fixed cost between the host
// and the device (Profile.IssueUs, GapUs, SyncUs), µs.
type launchCost struct{ issue, gap, sync float64 }

// The figures, each from a measurement; none was chosen to meet a target.
//
// NVIDIA (h100), measured by this project on an H100 80GB with CUDA 13
// (cmd/replay/testdata/h100-decode.md, BENCHMARKS.md):
//   - gap 5: the shortest CUDA-event time of a trivial kernel (Add,
//     RMSNorm, RoPE, SwiGLU over 768–2048 floats: 4.86–5.28 µs in
//     h100-decode-b1.jsonl.gz), start and end events included, as the
//     queued backend times every op.
//   - issue 5: a launch through the CUDA runtime costs the host 4–6 µs
//     (susun-blog.com/blog/pegainfer-3-cuda-graph, CUDA 13.0; "about
//     6 µs", github.com/intel/torch-xpu-ops/issues/1016).
//   - sync 11.6: the synchronous executor decoded the 100M-parameter
//     model at 192 tokens/s at best, 5,208 µs per step, of which the
//     device reported 2,191 µs (1,934 of ops, 257 of copies, the
//     only:rocm session of h100-decode-b1.jsonl.gz): 16.6 µs per op
//     beyond the device's time, less the issue cost. It also holds the
//     executor's own work per op, so it is an upper estimate.
//
// AMD GPUs (mi300x, mi250, rx7900xtx, slowlink, igpu), from the HSA
// runtime's own figures (github.com/HSAFoundation/HSA-Drivers-Linux-AMD/
// issues/18, measured on an APU): batched dispatch 6 µs per kernel on
// average, a synchronous dispatch up to 21 µs.
//   - issue 6: the batched dispatch's 6 µs.
//   - gap 5: the H100's measured floor; no AMD per-kernel floor has been
//     measured here, so this is the one figure taken from another vendor.
//   - sync 10: the synchronous dispatch's 21 µs less issue and gap.
//
// CPUs (cpu2, cpu64): the host hands an op to the backend's workers.
//   - issue 0.44: the Executor's overhead per op, 437 ns (BENCHMARKS.md,
//     executor `ExecutorOverhead`).
//   - gap = LaunchUs: the fan-out to the worker pool and back, which the
//     start-up calibration measures as the dispatch cost (2 µs on cpu2;
//     cpu64's 8 µs is its profile's assumption, not a measurement).
//   - sync 0: the fan-out's measured round trip already holds the
//     hand-back the host waits for.
var launchCosts = map[string]launchCost{
	"h100":      {issue: 5, gap: 5, sync: 11.6},
	"mi300x":    {issue: 6, gap: 5, sync: 10},
	"mi250":     {issue: 6, gap: 5, sync: 10},
	"rx7900xtx": {issue: 6, gap: 5, sync: 10},
	"slowlink":  {issue: 6, gap: 5, sync: 10},
	"igpu":      {issue: 6, gap: 5, sync: 10},
	"cpu2":      {issue: 0.44, gap: 2, sync: 0},
	"cpu64":     {issue: 0.44, gap: 8, sync: 0},
	"pcie3x8":   {issue: 5, gap: 5, sync: 11.6},
	"pcie4x16":  {issue: 5, gap: 5, sync: 11.6},
	"pcie5x16":  {issue: 5, gap: 5, sync: 11.6},
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
	}
}
