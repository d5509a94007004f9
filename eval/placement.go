package eval

import (
	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/kernels"
)

// Placement adapts p, built over arms (ArmsOf of the Scheduler's
// Config.Backends, in order), to adaptive.Placement: a baseline run
// through the Scheduler and the Executor on real work. Each op's Task is
// built as the harness builds it: Bucket the Scheduler's BucketID, the
// work of the Spec, Res as given, and Transfer[i] the bytes of input not
// resident on backend i (host memory and a shared-memory backend's copy
// count as resident on every shared-memory backend). Observed hands p a
// Task that carries only the Bucket.
func Placement(p Policy, arms []Arm) adaptive.PlacementPolicy {
	pl := &placement{p: p, n: len(arms)}
	for i, a := range arms {
		if a.Info.SharedMemory || !a.GPU {
			pl.shared |= adaptive.Backend(i)
		}
	}
	return pl
}

type placement struct {
	p      Policy
	n      int
	shared adaptive.Mask
	task   Task
	xfer   [adaptive.MaxBackends]float64
}

func (pl *placement) Name() string { return pl.p.Name() }

func (pl *placement) Place(spec kernels.Spec, res adaptive.Residency, bucket adaptive.BucketID) int {
	pl.task = Task{Bucket: int(bucket), Res: res}
	describe(&pl.task, &spec)
	if res.N > 0 {
		pl.nonResident(&res)
		pl.task.Transfer = pl.xfer[:pl.n]
	}
	arm := pl.p.Choose(&pl.task)
	pl.task.Spec = nil // Place must not keep spec
	return arm
}

func (pl *placement) Observed(bucket adaptive.BucketID, backend int, us float64) {
	pl.task = Task{Bucket: int(bucket)}
	pl.p.Observe(&pl.task, backend, us)
}

// nonResident writes into pl.xfer, per backend, the bytes of res's inputs
// not resident there.
func (pl *placement) nonResident(res *adaptive.Residency) {
	pl.xfer = [adaptive.MaxBackends]float64{}
	for i := range min(res.N, adaptive.MaxInputs) {
		in := res.Inputs[i]
		if in.Bytes <= 0 {
			continue
		}
		on := in.On
		if on == 0 {
			on = adaptive.Host
		}
		for a := range pl.n {
			if on.Has(a) || pl.shared.Has(a) && on&(adaptive.Host|pl.shared) != 0 {
				continue
			}
			pl.xfer[a] += float64(in.Bytes)
		}
	}
}
