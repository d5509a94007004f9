package eval

import (
	"math"

	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/sim"
)

// firstArm returns the first arm of the kind wanted (GPU or not). When the
// arm set has no GPU the GPU-choosing rules fall back to the first CPU arm,
// and a set with no CPU arm gives its first arm.
func firstArm(arms []Arm, gpu bool) int {
	for i, a := range arms {
		if a.GPU == gpu {
			return i
		}
	}
	return 0
}

// staticPolicy is a rule that needs no feedback: Observe does nothing.
type staticPolicy struct {
	name     string
	gpu, cpu int // the arms the rule picks from (first of each kind)
	gpuRule  func(t *Task) bool
}

func (p *staticPolicy) Name() string { return p.name }

func (p *staticPolicy) Choose(t *Task) int {
	if p.gpuRule(t) {
		return p.gpu
	}
	return p.cpu
}

func (p *staticPolicy) Observe(*Task, int, float64) {}

func newStatic(name string, arms []Arm, rule func(t *Task) bool) *staticPolicy {
	return &staticPolicy{name: name, gpu: firstArm(arms, true), cpu: firstArm(arms, false), gpuRule: rule}
}

// static2xBaseUs is HybridScheduler's base latency per op type in µs.
var static2xBaseUs = map[string]float64{
	"MatMul": 10, "QuantizedMatMul": 5, "Softmax": 5, "Attention": 20,
	"Add": 1, "Scale": 1, "Dequantize": 2,
}

// static2xDefaultUs is the base for ops outside HybridScheduler's table:
// the element-wise figure (1 µs). The choice cannot change a decision,
// since both backends share the base.
const static2xDefaultUs = 1

// Static2xCosts returns HybridScheduler's estimates for t in µs: base µs
// per op type (by t.Op) × max(1, log2(t.Elements)) on the GPU, and 10%
// more on the CPU for its "transfer".
func Static2xCosts(t *Task) (gpuUs, cpuUs float64) {
	base, ok := static2xBaseUs[t.Op]
	if !ok {
		base = static2xDefaultUs
	}
	gpuUs = base * math.Max(1, math.Log2(float64(t.Elements)))
	return gpuUs, gpuUs * 1.1
}

// NewStatic2x returns "static2x", HybridScheduler's rule (DESIGN.md § What
// it replaces): the CPU only when its estimate (Static2xCosts) is below
// half the GPU's. Both estimates share one base, so the CPU never wins
// while a GPU arm exists: that is the source's behaviour. It picks the
// first GPU arm, or the first CPU arm when there is no GPU.
func NewStatic2x(arms []Arm) Policy {
	return newStatic("static2x", arms, func(t *Task) bool {
		g, c := Static2xCosts(t)
		return !(c < g/2)
	})
}

// BackendSelector's constants: PCIe bandwidth and GPU throughput.
const (
	pcieBytesPerS = 32e9
	gpuFLOPPerS   = 20e12
)

// NewPCIe5x returns "pcie5x", BackendSelector's rule: the GPU when the
// compute time at 20 TFLOP/s exceeds 5 × the time to move the op's bytes
// (read + written) over 32 GB/s PCIe; otherwise the CPU. It picks the
// first arm of the kind chosen.
func NewPCIe5x(arms []Arm) Policy {
	return newStatic("pcie5x", arms, func(t *Task) bool {
		compute := t.FLOPs / gpuFLOPPerS
		transfer := (t.BytesRead + t.BytesWritten) / pcieBytesPerS
		return compute > 5*transfer
	})
}

// BackendSelector's per-complexity GPU thresholds, in output elements.
const (
	reductionGPUElements = 100_000
	matrixGPUElements    = 10_000
)

// NewThresholds returns "thresholds", BackendSelector's per-complexity
// element thresholds on t.Class and t.Elements: element-wise ops never go
// to the GPU, reductions above 100K elements and matrix ops above 10K do.
// Its SIMD and scalar tiers both map to the first CPU arm.
func NewThresholds(arms []Arm) Policy {
	return newStatic("thresholds", arms, func(t *Task) bool {
		switch t.Class {
		case kernels.Reduction:
			return t.Elements > reductionGPUElements
		case kernels.Matrix:
			return t.Elements > matrixGPUElements
		}
		return false
	})
}

// RLXGPU are the RLX cost model's compute defaults for a ROCm GPU
// (sim.RLXROCm, its round trip two copy latencies), used by roofline in
// place of a GPU arm's nominal compute figures; the link figures still
// come from the arm.
var RLXGPU = Figures{GFLOPS: sim.RLXROCm.GFLOPS, MemGBps: sim.RLXROCm.MemGBps,
	DispatchUs: sim.RLXROCm.DispatchUs, RoundTripUs: 2 * sim.RLXROCm.LinkLatencyUs}

type roofline struct {
	arms []Arm
	figs []Figures
	link []Figures // the link an arm's transfers cross
}

// NewRoofline returns "roofline", the RLX cost model: per arm, round trip
// + dispatch + work + transfer in µs, and the cheapest arm wins (ties to
// the lower index). Work is FLOPs / sgemm throughput for matrix-class ops
// (matmul, attention, opaque) and bytes (read + written) / memory
// bandwidth for everything else. GPU arms use RLXGPU, CPU arms their
// Nominal (their calibration). Transfer is t.Transfer[i] bytes over the
// arm's link (LinkLatencyUs + bytes / LinkGBps), or the first GPU's link
// for an arm without one; with no link anywhere it costs nothing. Each op
// is its own RLX graph, so the round trip is paid per op.
func NewRoofline(arms []Arm) Policy {
	p := &roofline{arms: arms, figs: make([]Figures, len(arms)), link: make([]Figures, len(arms))}
	var gpuLink Figures
	for _, a := range arms {
		if a.GPU && a.Nominal.LinkGBps > 0 {
			gpuLink = a.Nominal
			break
		}
	}
	for i, a := range arms {
		p.figs[i] = a.Nominal
		if a.GPU {
			p.figs[i] = RLXGPU
		}
		p.link[i] = a.Nominal
		if a.Nominal.LinkGBps <= 0 {
			p.link[i] = gpuLink
		}
	}
	return p
}

func (p *roofline) Name() string { return "roofline" }

// rate divides work by a throughput given in units per µs, +Inf when the
// throughput is unknown.
func rate(work, perUs float64) float64 {
	if work <= 0 {
		return 0
	}
	if !(perUs > 0) {
		return math.Inf(1)
	}
	return work / perUs
}

// Cost returns the RLX estimate of t on arm i in µs.
func (p *roofline) Cost(t *Task, i int) float64 {
	f := p.figs[i]
	c := f.RoundTripUs + f.DispatchUs
	if t.Class == kernels.Matrix {
		c += rate(t.FLOPs, f.GFLOPS*1e3) // 1 GFLOP/s = 1e3 FLOP/µs
	} else {
		c += rate(t.BytesRead+t.BytesWritten, f.MemGBps*1e3) // 1 GB/s = 1e3 B/µs
	}
	if i < len(t.Transfer) && t.Transfer[i] > 0 && p.link[i].LinkGBps > 0 {
		c += p.link[i].LinkLatencyUs + t.Transfer[i]/(p.link[i].LinkGBps*1e3)
	}
	return c
}

func (p *roofline) Choose(t *Task) int {
	best, bestC := 0, math.Inf(1)
	for i := range p.arms {
		if c := p.Cost(t, i); c < bestC {
			best, bestC = i, c
		}
	}
	return best
}

func (p *roofline) Observe(*Task, int, float64) {}
