package sim

import (
	"fmt"

	"github.com/adaptsched/adaptsched/kernels"
)

// Arm is one simulated device of an evaluation run: a profile and the
// events scheduled on it. An evaluation harness replays Throttle and
// Contention (their At counts the workload's ops); error events are
// injected by Device only.
type Arm struct {
	Profile *Profile
	Events  []Event
	// table, when set, replaces the profile's compute model by measured
	// means: column col of a perf table (Table.Arms).
	table *Table
	col   int
}

// Truth returns the ground truth of spec on the arm: its noise-free mean
// duration in µs, spikes excluded (multiply by Profile.SpikeMean for the
// expected one), and σ of ln(duration). A table arm answers from its
// measurements and fails for a shape the table lacks; a profile arm from
// its roofline, and fails for an opaque op.
func (a Arm) Truth(spec kernels.Spec) (baseUs, sigma float64, err error) {
	switch {
	case a.table != nil:
		m, sg, ok := a.table.truth(spec, a.col)
		if !ok {
			return 0, 0, fmt.Errorf("%w: %v has no measurement on %s", ErrInvalidSetup, spec, a.Profile.Name)
		}
		return m / a.Profile.SpikeMean(), sg, nil
	case spec.Op == kernels.Opaque:
		return 0, 0, fmt.Errorf("%w: opaque op %v cannot run on profile %s", ErrInvalidSetup, spec, a.Profile.Name)
	}
	w := spec.Work()
	return a.Profile.baseUs(spec, float64(w.FLOPs), float64(w.Bytes())), a.Profile.Sigma, nil
}

// TruthIn is Truth under the execution model m: for a profile arm the
// time the op occupies the device (Profile.OpUs) rather than BaseUs; a
// table arm's measured means are what they are under every model.
func (a Arm) TruthIn(spec kernels.Spec, m ExecModel) (baseUs, sigma float64, err error) {
	base, sigma, err := a.Truth(spec)
	if err != nil || a.table != nil || m == Serial {
		return base, sigma, err
	}
	return base - a.Profile.LaunchUs + a.Profile.GapUs, sigma, nil
}
