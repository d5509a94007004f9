package adaptive

import "github.com/adaptsched/adaptsched/backends"

// figures returns the backend's cost-model figures: its Nominal, with
// zero figures of a CPU measured by the backend (backends.Calibrator)
// unless Config.NoCalibration, and the others defaulted per kind.
func (s *Scheduler) figures(b backends.Backend, info backends.Info) backends.Nominal {
	nom := info.Nominal
	if info.Kind == backends.GPU {
		return fillNominal(nom, defaultGPU)
	}
	c, ok := b.(backends.Calibrator)
	if !ok || s.cfg.NoCalibration || nom.GFLOPS > 0 && nom.MemGBps > 0 && nom.DispatchUs > 0 {
		return fillNominal(nom, defaultCPU)
	}
	cal, err := c.Calibrate()
	if err != nil {
		s.log.Warn("adaptive: calibration failed; using default CPU figures", "err", err, "backend", info.Name)
		cal = defaultCPU
	}
	return fillNominal(nom, cal)
}
