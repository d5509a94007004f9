package cost

import "github.com/adaptsched/adaptsched/backends"

// Figures returns a backend's cost-model figures: its Nominal, with the
// zero figures of a CPU measured by the backend (backends.Calibrator)
// unless noCalibration, and the others defaulted per kind (DefaultGPU,
// DefaultCPU). A failed calibration takes DefaultCPU and is returned as
// err beside the figures, for the caller to report.
func Figures(b backends.Backend, info backends.Info, noCalibration bool) (nom backends.Nominal, err error) {
	nom = info.Nominal
	if info.Kind == backends.GPU {
		return Fill(nom, DefaultGPU), nil
	}
	c, ok := b.(backends.Calibrator)
	if !ok || noCalibration || nom.GFLOPS > 0 && nom.MemGBps > 0 && nom.DispatchUs > 0 {
		return Fill(nom, DefaultCPU), nil
	}
	cal, err := c.Calibrate()
	if err != nil {
		cal = DefaultCPU
	}
	return Fill(nom, cal), err
}
