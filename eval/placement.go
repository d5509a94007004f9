package eval

import (
	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/kernels"
)

// Placement adapts p, built over arms (ArmsOf of the Executor's
// Config.Backends, in order), to executor.Config.Placer: a baseline run
// through the Scheduler and the Executor on real work. Each op's Task is
// built as the harness builds it: Bucket the Scheduler's BucketID, the
// work of the Spec, Res as given, and Transfer[i] the bytes of input not
// resident on backend i, by the Scheduler's own rule
// (adaptive.Residency.Lacking: host memory and a shared-memory backend's
// copy count as resident on every shared-memory backend). Observed hands
// p a Task that carries only the Bucket.
func Placement(p Policy, arms []Arm) *Placer {
	pl := &Placer{p: p, n: len(arms)}
	for i, a := range arms {
		if a.Info.SharedMemory || !a.GPU {
			pl.shared |= adaptive.Backend(i)
		}
	}
	return pl
}

// Placer is a Policy as an Executor's Placer (Placement). It is not safe
// for concurrent use: the Executor serialises it.
type Placer struct {
	p      Policy
	n      int
	shared adaptive.Mask
	task   Task
	xfer   [adaptive.MaxBackends]float64
}

// Name is the policy's name.
func (pl *Placer) Name() string { return pl.p.Name() }

// Place asks the policy for spec's backend.
func (pl *Placer) Place(spec kernels.Spec, res adaptive.Residency, bucket adaptive.BucketID) int {
	pl.task = Task{Bucket: int(bucket), Res: res}
	describe(&pl.task, &spec)
	if res.N > 0 {
		pl.xfer = res.Lacking(pl.shared, pl.n)
		pl.task.Transfer = pl.xfer[:pl.n]
	}
	arm := pl.p.Choose(&pl.task)
	pl.task.Spec = nil // Place must not keep spec
	return arm
}

// Observed tells the policy an op's measured duration.
func (pl *Placer) Observed(bucket adaptive.BucketID, backend int, us float64) {
	pl.task = Task{Bucket: int(bucket)}
	pl.p.Observe(&pl.task, backend, us)
}
