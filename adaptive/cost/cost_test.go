package cost

import (
	"errors"
	"math"
	"testing"

	"github.com/adaptsched/adaptsched/backends"
)

// calibrating is a CPU backend whose Calibrate answers cal, err.
type calibrating struct {
	backends.Backend
	cal backends.Nominal
	err error
}

func (c calibrating) Calibrate() (backends.Nominal, error) { return c.cal, c.err }

// TestFigures: a GPU's zero figures take DefaultGPU; a CPU's are
// calibrated (unless told not to), and a failed calibration takes
// DefaultCPU and says so; given figures are kept.
func TestFigures(t *testing.T) {
	gpu := backends.Info{Kind: backends.GPU, Nominal: backends.Nominal{GFLOPS: 5000}}
	if got, err := Figures(nil, gpu, false); err != nil || got.GFLOPS != 5000 || got.MemGBps != DefaultGPU.MemGBps || got.LinkGBps != DefaultGPU.LinkGBps {
		t.Errorf("GPU: %+v, %v", got, err)
	}
	cpu := backends.Info{Kind: backends.CPU}
	measured := backends.Nominal{GFLOPS: 321, MemGBps: 45, DispatchUs: 0.5}
	if got, err := Figures(calibrating{cal: measured}, cpu, false); err != nil || got != measured {
		t.Errorf("calibrated CPU: %+v, %v, want %+v", got, err, measured)
	}
	if got, err := Figures(calibrating{cal: measured}, cpu, true); err != nil || got != DefaultCPU {
		t.Errorf("CPU without calibration: %+v, %v, want the defaults", got, err)
	}
	failed := errors.New("no timer")
	if got, err := Figures(calibrating{err: failed}, cpu, false); !errors.Is(err, failed) || got != DefaultCPU {
		t.Errorf("failed calibration: %+v, %v, want the defaults and the error", got, err)
	}
}

// TestRoofline: dispatch plus the larger of compute and memory time.
func TestRoofline(t *testing.T) {
	r := NewRoofline(100, 20, 1) // 1e5 FLOP/µs, 2e4 B/µs
	for _, c := range []struct{ flops, bytes, want float64 }{
		{1e7, 1e3, 1 + 100}, // compute-bound
		{1e3, 1e7, 1 + 500}, // memory-bound
		{0, 0, 1},           // dispatch alone
	} {
		if got := r.ComputeUs(c.flops, c.bytes); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("ComputeUs(%g, %g) = %g, want %g", c.flops, c.bytes, got, c.want)
		}
	}
}
