package sim

import (
	"fmt"
	"math"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// Profile is a simulated device: the datasheet figures a scheduler is told
// (Nominal) and the hidden true behaviour the simulator draws durations
// from, which differs from the datasheet the way real devices do (small
// matmuls far below peak, launch overheads above the quoted figure, noise,
// spikes, a first-run warm-up). A Profile is a value; the package's
// profiles are returned as copies, so a caller may change one freely.
//
// The true compute duration of an op, before noise, is
//
//	LaunchUs + max(FLOPs / rate(op, shape), (bytes + BWHalfBytes) / (PeakMemGBps·BWEff))
//
// where rate is PeakGFLOPS · MatEff · sat(m, TileM) · sat(n, TileN) ·
// sat(k, TileK) for matrix ops (sat(x, c) = (x+1) / (x+c): a
// dimension far below the tile size wastes most of each tile) and PeakGFLOPS · VecEff
// for the others (PeakGFLOPS and PeakMemGBps default to the datasheet's
// figures). A sample multiplies it by lognormal noise of mean 1
// (σ = Sigma of ln), by SpikeFactor with probability SpikeProb, and by
// WarmupFactor on the first run of each kernel (op and dtype; an opaque
// op's name and dtype) on the device. Warm-up is per kernel, not per
// shape: on an H100 (cmd/replay/testdata/h100-decode.md) a kernel's first
// run took a median 1.4× its later runs and a new shape of a kernel
// already run 1.07×; a module loads, and a library picks its heuristics,
// once per kernel. Per shape, every decode step's attention (a new KV
// length) would pay the warm-up again.
type Profile struct {
	Name    string
	Kind    backends.Kind
	Model   string // product name, for Info
	Arch    string
	Threads int   // CPU threads; 0 for GPUs
	Memory  int64 // device memory in bytes; 0 when it shares host memory
	// Shared is true when the device reads host memory directly (CPUs,
	// integrated GPUs): moving data to or from it costs nothing.
	Shared bool
	// Nominal are the datasheet figures: what the scheduler is told.
	Nominal backends.Nominal

	// The true behaviour, hidden from every policy but the oracle.
	// PeakGFLOPS and PeakMemGBps are the hardware's real peaks, which the
	// efficiencies below apply to (0: the datasheet's, Nominal).
	PeakGFLOPS, PeakMemGBps float64
	LaunchUs                float64 // per-op launch, dispatch and synchronisation, µs (the Serial model)
	// The Async and Synchronous models split LaunchUs into what each side
	// pays (Timeline): the host's time to issue one op or copy through
	// the runtime, the device's time per op beyond its work (command
	// fetch, kernel start and end, its timing events), and the host's
	// time to resume after waiting for work, µs. The figures and their
	// sources are beside each profile's, in launchCosts.
	IssueUs, GapUs, SyncUs float64
	// GatherIssueUs is the host's time per op gathered into a step that is
	// launched at once (backends.Recorder): no launch and no events of its
	// own, µs; 0 on a device that does not gather (CPUs). GatherLaunchUs
	// is the host's time per launch of a gathering. The figures and their
	// sources are in launchCosts.
	GatherIssueUs, GatherLaunchUs float64
	MatEff                        float64 // fraction of PeakGFLOPS a large f32 matmul reaches
	TileM, TileN, TileK           float64 // half-saturation dimensions of the matmul efficiency
	VecEff                        float64 // fraction of PeakGFLOPS reached by non-matrix ops
	BWEff                         float64 // fraction of PeakMemGBps a large streaming op reaches
	BWHalfBytes                   float64 // bytes at which half the achievable bandwidth is reached
	LinkGBps                      float64 // achieved host↔device bandwidth, GB/s (0 when Shared)
	LinkLatencyUs                 float64 // achieved host↔device copy latency, µs
	Sigma                         float64 // run-to-run σ of ln(duration)
	SpikeProb                     float64 // probability that one run is a spike
	SpikeFactor                   float64 // a spike's slowdown (×)
	WarmupFactor                  float64 // the first run of each kernel is this much slower (×)
}

// The profiles. Nominal figures are vendor datasheet numbers (cited);
// true-behaviour figures are modelling assumptions in the range that
// published measurements of such devices report, chosen so that the
// datasheet is optimistic where real devices disappoint: fp32 GEMM reaches
// 40–75% of peak on GPUs and only at large shapes, kernel launches plus the
// synchronisation a scheduler waits for cost 5–20 µs rather than the
// 2–5 µs of a bare launch, and a PCIe link delivers about 80% of its raw
// rate.
var profiles = []Profile{
	{
		// AMD Instinct MI300X datasheet (amd.com/en/products/accelerators/
		// instinct/mi300/mi300x.html): 163.4 TFLOP/s FP32 matrix,
		// 5.3 TB/s HBM3, 192 GB; host link PCIe 5.0 x16 (64 GB/s raw per
		// direction, ~50 GB/s achieved).
		Name: "mi300x", Kind: backends.GPU, Model: "AMD Instinct MI300X", Arch: "gfx942", Memory: 192 << 30,
		Nominal:  backends.Nominal{GFLOPS: 163400, MemGBps: 5300, DispatchUs: 5, LinkGBps: 64, LinkLatencyUs: 5},
		LaunchUs: 12, MatEff: 0.45, TileM: 32, TileN: 64, TileK: 64, VecEff: 0.2,
		BWEff: 0.75, BWHalfBytes: 4 << 20, LinkGBps: 50, LinkLatencyUs: 10,
		Sigma: 0.06, SpikeProb: 0.002, SpikeFactor: 8, WarmupFactor: 4,
	},
	{
		// AMD Instinct MI250 datasheet (amd.com/en/products/accelerators/
		// instinct/mi200/mi250.html): 45.3 TFLOP/s FP32 vector, 90.5 TFLOP/s
		// FP32 matrix, 3.2 TB/s HBM2e, 128 GB; PCIe 4.0 x16 (32 GB/s raw,
		// ~25 GB/s achieved).
		Name: "mi250", Kind: backends.GPU, Model: "AMD Instinct MI250", Arch: "gfx90a", Memory: 128 << 30,
		Nominal:  backends.Nominal{GFLOPS: 90500, MemGBps: 3277, DispatchUs: 5, LinkGBps: 32, LinkLatencyUs: 5},
		LaunchUs: 14, MatEff: 0.4, TileM: 32, TileN: 64, TileK: 64, VecEff: 0.25,
		BWEff: 0.7, BWHalfBytes: 4 << 20, LinkGBps: 25, LinkLatencyUs: 12,
		Sigma: 0.07, SpikeProb: 0.002, SpikeFactor: 8, WarmupFactor: 4,
	},
	{
		// AMD Radeon RX 7900 XTX specifications (amd.com/en/products/
		// graphics/amd-radeon-rx-7900xtx): 61.4 TFLOP/s FP32 (dual-issue),
		// 960 GB/s GDDR6, 24 GB; PCIe 4.0 x16. Dual issue is rarely reached
		// by GEMM, hence the low MatEff.
		Name: "rx7900xtx", Kind: backends.GPU, Model: "AMD Radeon RX 7900 XTX", Arch: "gfx1100", Memory: 24 << 30,
		Nominal:  backends.Nominal{GFLOPS: 61400, MemGBps: 960, DispatchUs: 5, LinkGBps: 32, LinkLatencyUs: 5},
		LaunchUs: 10, MatEff: 0.35, TileM: 16, TileN: 64, TileK: 32, VecEff: 0.15,
		BWEff: 0.8, BWHalfBytes: 2 << 20, LinkGBps: 25, LinkLatencyUs: 10,
		Sigma: 0.08, SpikeProb: 0.003, SpikeFactor: 8, WarmupFactor: 4,
	},
	{
		// NVIDIA H100 SXM5 datasheet (nvidia.com/en-us/data-center/h100):
		// 67 TFLOP/s FP32, 3.35 TB/s HBM3, 80 GB; PCIe 5.0 x16.
		Name: "h100", Kind: backends.GPU, Model: "NVIDIA H100 SXM5", Arch: "sm_90", Memory: 80 << 30,
		Nominal:  backends.Nominal{GFLOPS: 67000, MemGBps: 3350, DispatchUs: 3, LinkGBps: 64, LinkLatencyUs: 5},
		LaunchUs: 8, MatEff: 0.75, TileM: 16, TileN: 64, TileK: 32, VecEff: 0.3,
		BWEff: 0.85, BWHalfBytes: 2 << 20, LinkGBps: 50, LinkLatencyUs: 8,
		Sigma: 0.05, SpikeProb: 0.002, SpikeFactor: 8, WarmupFactor: 4,
	},
	{
		// AMD Radeon 780M (Ryzen 7040 iGPU, 12 RDNA3 CUs at 2.9 GHz):
		// 8.9 TFLOP/s FP32 (dual-issue); shares dual-channel DDR5-5600
		// host memory, 89.6 GB/s (amd.com product page of the Ryzen 9
		// 7940HS). No link: it reads host memory.
		Name: "igpu", Kind: backends.GPU, Model: "AMD Radeon 780M", Arch: "gfx1103", Shared: true,
		Nominal:  backends.Nominal{GFLOPS: 8900, MemGBps: 89.6, DispatchUs: 5},
		LaunchUs: 15, MatEff: 0.3, TileM: 8, TileN: 32, TileK: 32, VecEff: 0.15,
		BWEff: 0.7, BWHalfBytes: 256 << 10,
		Sigma: 0.1, SpikeProb: 0.005, SpikeFactor: 6, WarmupFactor: 4,
	},
	{
		// An RX 7900 XTX in a Thunderbolt 3 enclosure: PCIe 3.0 x4 tunnel,
		// 32 Gbit/s raw (4 GB/s nominal), about 2.5 GB/s and 30 µs per copy
		// as eGPU users measure it.
		Name: "slowlink", Kind: backends.GPU, Model: "AMD Radeon RX 7900 XTX (Thunderbolt 3)", Arch: "gfx1100", Memory: 24 << 30,
		Nominal:  backends.Nominal{GFLOPS: 61400, MemGBps: 960, DispatchUs: 5, LinkGBps: 4, LinkLatencyUs: 10},
		LaunchUs: 14, MatEff: 0.35, TileM: 16, TileN: 64, TileK: 32, VecEff: 0.15,
		BWEff: 0.8, BWHalfBytes: 2 << 20, LinkGBps: 2.5, LinkLatencyUs: 30,
		Sigma: 0.1, SpikeProb: 0.003, SpikeFactor: 8, WarmupFactor: 4,
	},
	{
		// The offload profiles: consumer GPUs on the links people have,
		// each with its card's memory, beside a desktop CPU (desktop16).
		// PCIe effective bandwidth: 8 GT/s × 128b/130b per lane for PCIe
		// 3.0 (7.88 GB/s raw at x8), 16 GT/s for 4.0 (31.5 GB/s at x16),
		// 32 GT/s for 5.0 (63 GB/s at x16) (PCI-SIG specifications); pinned
		// host→device copies reach about 80% of raw (TLP and DMA overhead),
		// as bandwidthTest-style measurements of such cards report.
		// NVIDIA GeForce RTX 3090 (nvidia.com RTX 3090 specifications and
		// the GA102 whitepaper): 35.6 TFLOP/s FP32, 936 GB/s GDDR6X, 24 GB;
		// in a PCIe 3.0 slot running at x8 (a second slot, or an older
		// board): 6.3 GB/s achieved.
		Name: "pcie3x8", Kind: backends.GPU, Model: "NVIDIA GeForce RTX 3090 (PCIe 3.0 x8)", Arch: "sm_86", Memory: 24 << 30,
		Nominal:  backends.Nominal{GFLOPS: 35600, MemGBps: 936, DispatchUs: 5, LinkGBps: 7.88, LinkLatencyUs: 10},
		LaunchUs: 10, MatEff: 0.55, TileM: 16, TileN: 64, TileK: 32, VecEff: 0.15,
		BWEff: 0.8, BWHalfBytes: 2 << 20, LinkGBps: 6.3, LinkLatencyUs: 12,
		Sigma: 0.06, SpikeProb: 0.002, SpikeFactor: 8, WarmupFactor: 4,
	},
	{
		// NVIDIA GeForce RTX 4090 (nvidia.com RTX 4090 specifications):
		// 82.6 TFLOP/s FP32, 1,008 GB/s GDDR6X, 24 GB; PCIe 4.0 x16,
		// 25 GB/s achieved.
		Name: "pcie4x16", Kind: backends.GPU, Model: "NVIDIA GeForce RTX 4090", Arch: "sm_89", Memory: 24 << 30,
		Nominal:  backends.Nominal{GFLOPS: 82600, MemGBps: 1008, DispatchUs: 5, LinkGBps: 31.5, LinkLatencyUs: 8},
		LaunchUs: 9, MatEff: 0.5, TileM: 16, TileN: 64, TileK: 32, VecEff: 0.15,
		BWEff: 0.8, BWHalfBytes: 2 << 20, LinkGBps: 25, LinkLatencyUs: 10,
		Sigma: 0.06, SpikeProb: 0.002, SpikeFactor: 8, WarmupFactor: 4,
	},
	{
		// NVIDIA GeForce RTX 5090 (nvidia.com RTX 5090 specifications):
		// 104.8 TFLOP/s FP32, 1,792 GB/s GDDR7, 32 GB; PCIe 5.0 x16,
		// 50 GB/s achieved.
		Name: "pcie5x16", Kind: backends.GPU, Model: "NVIDIA GeForce RTX 5090", Arch: "sm_120", Memory: 32 << 30,
		Nominal:  backends.Nominal{GFLOPS: 104800, MemGBps: 1792, DispatchUs: 5, LinkGBps: 63, LinkLatencyUs: 6},
		LaunchUs: 8, MatEff: 0.5, TileM: 16, TileN: 64, TileK: 32, VecEff: 0.15,
		BWEff: 0.8, BWHalfBytes: 2 << 20, LinkGBps: 50, LinkLatencyUs: 8,
		Sigma: 0.06, SpikeProb: 0.002, SpikeFactor: 8, WarmupFactor: 4,
	},
	{
		// This project's CI machine: a 2-core AMD EPYC VM. Nominal figures
		// are what a start-up calibration measures there: ~120 GFLOP/s
		// OpenBLAS sgemm on both cores, ~20 GB/s streaming, ~2 µs to fan
		// an op out to the worker pool.
		Name: "cpu2", Kind: backends.CPU, Model: "AMD EPYC (2 cores)", Arch: "amd64", Threads: 2, Shared: true,
		Nominal:  backends.Nominal{GFLOPS: 120, MemGBps: 20, DispatchUs: 2},
		LaunchUs: 2, MatEff: 0.9, TileM: 2, TileN: 8, TileK: 16, VecEff: 0.1,
		BWEff: 0.8, BWHalfBytes: 16 << 10,
		Sigma: 0.15, SpikeProb: 0.005, SpikeFactor: 5, WarmupFactor: 1.5,
	},
	{
		// AMD EPYC 9554 (amd.com product page): 64 Zen 4 cores at
		// 3.1 GHz base, two 256-bit FMA pipes per core = 32 FP32 FLOP per
		// cycle per core, 6.3 TFLOP/s peak; 12 channels of DDR5-4800,
		// 460.8 GB/s. Zen 4 sustains well below that under AVX-512 load.
		Name: "cpu64", Kind: backends.CPU, Model: "AMD EPYC 9554", Arch: "amd64", Threads: 64, Shared: true,
		Nominal:  backends.Nominal{GFLOPS: 6350, MemGBps: 460.8, DispatchUs: 5},
		LaunchUs: 8, MatEff: 0.65, TileM: 16, TileN: 32, TileK: 32, VecEff: 0.05,
		BWEff: 0.75, BWHalfBytes: 2 << 20,
		Sigma: 0.12, SpikeProb: 0.005, SpikeFactor: 5, WarmupFactor: 1.5,
	},
	{
		// AMD Ryzen 9 7950X (amd.com product page): 16 Zen 4 cores at
		// 4.5 GHz base, AVX-512 on two 256-bit FMA pipes = 32 FP32 FLOP
		// per cycle per core, 2.3 TFLOP/s peak; two channels of
		// DDR5-5200, 83.2 GB/s. The host of the offload profiles.
		Name: "desktop16", Kind: backends.CPU, Model: "AMD Ryzen 9 7950X", Arch: "amd64", Threads: 16, Shared: true,
		Nominal:  backends.Nominal{GFLOPS: 2300, MemGBps: 83.2, DispatchUs: 3},
		LaunchUs: 4, MatEff: 0.6, TileM: 8, TileN: 32, TileK: 32, VecEff: 0.05,
		BWEff: 0.75, BWHalfBytes: 256 << 10,
		Sigma: 0.1, SpikeProb: 0.005, SpikeFactor: 4, WarmupFactor: 1.5,
	},
}

// Profiles returns the names of every profile, in the order GPUs then CPUs.
func Profiles() []string {
	names := make([]string, len(profiles))
	for i, p := range profiles {
		names[i] = p.Name
	}
	return names
}

// GPUProfiles returns the names of the GPU profiles.
func GPUProfiles() []string {
	var names []string
	for _, p := range profiles {
		if p.Kind == backends.GPU {
			names = append(names, p.Name)
		}
	}
	return names
}

// LookupProfile returns a copy of the profile called name, or an error
// wrapping ErrUnknownProfile that lists the known names.
func LookupProfile(name string) (*Profile, error) {
	for _, p := range profiles {
		if p.Name == name {
			c := p
			return &c, nil
		}
	}
	return nil, fmt.Errorf("%w %q (known: %v)", ErrUnknownProfile, name, Profiles())
}

// MustProfile is LookupProfile for names known at compile time; it panics
// on an unknown name, a programmer error.
func MustProfile(name string) *Profile {
	p, err := LookupProfile(name)
	if err != nil {
		panic(err)
	}
	return p
}

// Validate reports the first impossible figure of p.
func (p *Profile) Validate() error {
	bad := func(what string, v float64) error {
		return fmt.Errorf("%w: profile %q: %s is %v", ErrInvalidProfile, p.Name, what, v)
	}
	pos := []struct {
		n string
		v float64
	}{
		{"Nominal.GFLOPS", p.Nominal.GFLOPS}, {"Nominal.MemGBps", p.Nominal.MemGBps},
		{"MatEff", p.MatEff}, {"VecEff", p.VecEff}, {"BWEff", p.BWEff},
	}
	for _, f := range pos {
		if !(f.v > 0) || math.IsInf(f.v, 0) {
			return bad(f.n, f.v)
		}
	}
	nonneg := []struct {
		n string
		v float64
	}{
		{"LaunchUs", p.LaunchUs}, {"TileM", p.TileM}, {"TileN", p.TileN}, {"TileK", p.TileK},
		{"BWHalfBytes", p.BWHalfBytes}, {"PeakGFLOPS", p.PeakGFLOPS}, {"PeakMemGBps", p.PeakMemGBps}, {"LinkLatencyUs", p.LinkLatencyUs}, {"Sigma", p.Sigma},
		{"SpikeProb", p.SpikeProb}, {"Nominal.DispatchUs", p.Nominal.DispatchUs},
		{"IssueUs", p.IssueUs}, {"GapUs", p.GapUs}, {"SyncUs", p.SyncUs}, {"GatherIssueUs", p.GatherIssueUs}, {"GatherLaunchUs", p.GatherLaunchUs},
	}
	for _, f := range nonneg {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			return bad(f.n, f.v)
		}
	}
	if p.SpikeProb > 1 {
		return bad("SpikeProb", p.SpikeProb)
	}
	if p.SpikeProb > 0 && !(p.SpikeFactor >= 1) {
		return bad("SpikeFactor", p.SpikeFactor)
	}
	if !(p.WarmupFactor == 0 || p.WarmupFactor >= 1) {
		return bad("WarmupFactor", p.WarmupFactor)
	}
	if !p.Shared && !(p.LinkGBps > 0) {
		return bad("LinkGBps (a device that does not share host memory needs a link)", p.LinkGBps)
	}
	return nil
}

// Info returns what a backend driving p reports.
func (p *Profile) Info() backends.Info {
	return backends.Info{
		Name: "sim:" + p.Name, Kind: p.Kind, Platform: "sim", Model: p.Model, Arch: p.Arch,
		Runtime: "sim", Threads: p.Threads, Memory: p.Memory, SharedMemory: p.Shared, Nominal: p.Nominal,
	}
}

// WithNominalScale returns a copy of p whose datasheet figures are wrong by
// the factor f: throughputs (GFLOPS, memory and link bandwidth) multiplied
// by f, latencies divided by f. The true behaviour is unchanged, so a
// policy's prior is off by f. f must be positive.
func (p *Profile) WithNominalScale(f float64) *Profile {
	c := *p
	c.PeakGFLOPS, c.PeakMemGBps = p.peaks()
	c.Nominal.GFLOPS *= f
	c.Nominal.MemGBps *= f
	c.Nominal.LinkGBps *= f
	c.Nominal.DispatchUs /= f
	c.Nominal.LinkLatencyUs /= f
	return &c
}

// WithSpikes returns a copy of p whose runs are spikes with probability
// prob, each factor times slower.
func (p *Profile) WithSpikes(prob, factor float64) *Profile {
	c := *p
	c.SpikeProb, c.SpikeFactor = prob, factor
	return &c
}

// sat is the efficiency of a dimension x against a tile of size c: a
// GEMV (x = 1) still keeps 2/(1+c) of the units busy, since its kernels
// are written for that shape.
func sat(x, c float64) float64 { return (x + 1) / (x + c) }

// matDims returns the m, n, k of a matrix op (a batched matmul's batch
// folded into m; attention as its score matmul).
func matDims(s kernels.Spec) (m, n, k float64) {
	switch s.Op {
	case kernels.MatMul, kernels.QuantizedMatMul:
		a := s.In[0]
		k = float64(a[len(a)-1])
		m = float64(kernels.Shape(a[:len(a)-1]).Elements())
		out := s.OutShape()
		n = float64(out[len(out)-1])
	case kernels.Attention:
		q := s.In[0]
		m = float64(q[0] * q[1] * q[2])
		n = float64(s.AttentionKeys())
		k = float64(q[3])
	}
	return
}

// BaseUs returns the true noise-free duration of s on p in µs, before
// warm-up, spikes and scheduled events: the mean of a sample is
// BaseUs·(1 + SpikeProb·(SpikeFactor−1)). s must be valid.
func (p *Profile) BaseUs(s kernels.Spec) float64 {
	w := s.Work()
	return p.baseUs(s, float64(w.FLOPs), float64(w.Bytes()))
}

// peaks returns the true peak throughput and bandwidth.
func (p *Profile) peaks() (gflops, gbps float64) {
	gflops, gbps = p.PeakGFLOPS, p.PeakMemGBps
	if gflops == 0 {
		gflops = p.Nominal.GFLOPS
	}
	if gbps == 0 {
		gbps = p.Nominal.MemGBps
	}
	return gflops, gbps
}

func (p *Profile) baseUs(s kernels.Spec, flops, bytes float64) float64 {
	gflops, gbps := p.peaks()
	peak := gflops * 1e3 // FLOP per µs
	rate := peak * p.VecEff
	switch s.Op {
	case kernels.MatMul, kernels.QuantizedMatMul, kernels.Attention:
		m, n, k := matDims(s)
		rate = peak * p.MatEff * sat(m, p.TileM) * sat(n, p.TileN) * sat(k, p.TileK)
		if s.Op == kernels.Attention {
			rate *= 0.5 // softmax between the two matmuls, and no tensor-core-style fusion
		}
	case kernels.Opaque:
		rate = peak * p.MatEff * 0.5
	}
	compute := flops / rate
	memory := (bytes + p.BWHalfBytes) / (gbps * 1e3 * p.BWEff) // bytes per µs
	return p.LaunchUs + max(compute, memory)
}

// DeviceUs returns the true noise-free time s occupies p's queue under
// the Async and Synchronous models: BaseUs with GapUs in place of
// LaunchUs (the host's issue and synchronisation are charged apart).
func (p *Profile) DeviceUs(s kernels.Spec) float64 { return p.BaseUs(s) - p.LaunchUs + p.GapUs }

// OpUs returns the true noise-free duration a device reports for s under
// model m: BaseUs for Serial, DeviceUs otherwise.
func (p *Profile) OpUs(s kernels.Spec, m ExecModel) float64 {
	if m == Serial {
		return p.BaseUs(s)
	}
	return p.DeviceUs(s)
}

// SpikeMean returns the mean factor that spikes add: 1 + SpikeProb·(SpikeFactor−1).
func (p *Profile) SpikeMean() float64 {
	if p.SpikeProb == 0 {
		return 1
	}
	return 1 + p.SpikeProb*(p.SpikeFactor-1)
}

// MeanUs returns the true expected duration of s on p in µs (noise and
// spikes included, warm-up and events excluded).
func (p *Profile) MeanUs(s kernels.Spec) float64 { return p.BaseUs(s) * p.SpikeMean() }

// LinkUs returns the true time to move n bytes between host memory and p
// (either direction): zero for a device that shares host memory.
func (p *Profile) LinkUs(n int64) float64 {
	if p.Shared || n <= 0 {
		return 0
	}
	return p.LinkLatencyUs + float64(n)/(p.LinkGBps*1e3)
}
