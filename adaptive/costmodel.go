package adaptive

import (
	"math"

	"github.com/adaptsched/adaptsched/backends"
)

// Documented defaults for figures a backend leaves at zero (DESIGN.md §
// Priors). GPU figures are the RLX cost model's ROCm defaults (10 TFLOP/s
// sgemm, 800 GB/s, 3 µs dispatch) and BackendSelector's PCIe link
// (32 GB/s); the link latency is a typical pinned-memory copy. CPU figures
// are used only when calibration is disabled or fails: a modest
// multi-core AVX2 machine.
var (
	defaultGPU = backends.Nominal{GFLOPS: 10000, MemGBps: 800, DispatchUs: 3, LinkGBps: 32, LinkLatencyUs: 10}
	defaultCPU = backends.Nominal{GFLOPS: 100, MemGBps: 20, DispatchUs: 1}
)

// roofline is the static compute model of one backend (DESIGN.md § Priors):
//
//	compute(flops, bytes) = dispatch + max(flops / flops_b, bytes / membw_b)
type roofline struct {
	flopsPerUs float64 // GFLOP/s × 1e3
	bytesPerUs float64 // GB/s × 1e3
	dispatchUs float64
}

func newRoofline(gflops, memGBps, dispatchUs float64) roofline {
	return roofline{flopsPerUs: gflops * 1e3, bytesPerUs: memGBps * 1e3, dispatchUs: dispatchUs}
}

// computeUs returns the model's duration of an op in µs.
func (r roofline) computeUs(flops, bytes float64) float64 {
	return r.dispatchUs + math.Max(flops/r.flopsPerUs, bytes/r.bytesPerUs)
}

// fillNominal returns n with every zero figure replaced by def's.
func fillNominal(n, def backends.Nominal) backends.Nominal {
	pick := func(v, d float64) float64 {
		if v > 0 {
			return v
		}
		return d
	}
	return backends.Nominal{
		GFLOPS:        pick(n.GFLOPS, def.GFLOPS),
		MemGBps:       pick(n.MemGBps, def.MemGBps),
		DispatchUs:    pick(n.DispatchUs, def.DispatchUs),
		LinkGBps:      pick(n.LinkGBps, def.LinkGBps),
		LinkLatencyUs: pick(n.LinkLatencyUs, def.LinkLatencyUs),
	}
}

// correctionMax caps a learned |ln(actual/predicted)| (prior.go): a factor
// of about 1100.
const correctionMax = 7.0

// neighbourWeight is the weight, in the corrections a prior takes from its
// family (prior.go), of a bucket dc size classes away: half per octave.
func neighbourWeight(dc int) float64 {
	if dc < 0 {
		dc = -dc
	}
	return math.Exp2(-float64(dc) / 2)
}
