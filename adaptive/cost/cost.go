// Package cost is the static cost model of a backend (DESIGN.md §
// Priors): the roofline of its datasheet figures (or, for a CPU without
// them, of a start-up calibration; else of documented defaults), which
// gives every bucket's prior its centre before anything is measured.
//
// # Usage
//
//	nom, err := cost.Figures(b, b.Info(), false) // err: calibration failed, defaults used
//	r := cost.NewRoofline(nom.GFLOPS, nom.MemGBps, nom.DispatchUs)
//	us := r.ComputeUs(flops, bytes)
package cost

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
	DefaultGPU = backends.Nominal{GFLOPS: 10000, MemGBps: 800, DispatchUs: 3, LinkGBps: 32, LinkLatencyUs: 10}
	DefaultCPU = backends.Nominal{GFLOPS: 100, MemGBps: 20, DispatchUs: 1}
)

// Roofline is the static compute model of one backend (DESIGN.md §
// Priors):
//
//	compute(flops, bytes) = dispatch + max(flops / flops_b, bytes / membw_b)
type Roofline struct {
	flopsPerUs float64 // GFLOP/s × 1e3
	bytesPerUs float64 // GB/s × 1e3
	dispatchUs float64
}

// NewRoofline returns the model of a backend of gflops GFLOP/s, memGBps
// GB/s and dispatchUs µs of launch overhead.
func NewRoofline(gflops, memGBps, dispatchUs float64) Roofline {
	return Roofline{flopsPerUs: gflops * 1e3, bytesPerUs: memGBps * 1e3, dispatchUs: dispatchUs}
}

// ComputeUs returns the model's duration in µs of an op of flops
// floating-point operations that moves bytes.
func (r Roofline) ComputeUs(flops, bytes float64) float64 {
	return r.dispatchUs + math.Max(flops/r.flopsPerUs, bytes/r.bytesPerUs)
}

// Fill returns n with every zero figure replaced by def's.
func Fill(n, def backends.Nominal) backends.Nominal {
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
