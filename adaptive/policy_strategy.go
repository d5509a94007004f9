package adaptive

import (
	"sync"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/kernels"
)

// Placement runs every op where the policy p says: the way to run a
// baseline placement (bandit.NewStatic2x, bandit.NewPCIe5x, an oracle, or
// any bandit.Policy) through the Scheduler and the Executor, so that it
// can be compared with Automatic on real work (DESIGN.md § Evaluation).
// Build p over ArmsOf(Config.Backends): arm i is Config.Backends[i].
//
// Select builds the op's bandit.Task as the simulator's harness does
// (Bucket: the BucketID; Op: the op's name, an Opaque op's Params.Name;
// Class; Elements of the output; FLOPs; bytes read and written; Transfer[i]:
// bytes of input not resident on backend i, per the Residency) and asks
// p.Choose, or OpChooser.ChooseOp when p implements it. A choice the
// Scheduler may make (the backend can run the op and is not excluded) has
// Reason UserPreference; any other (an arm out of range, an incapable or
// excluded backend) falls back to the bandit's choice among the allowed
// backends with Reason Unsupported (or the caller's MemoryConstraint or
// Fallback). Observe feeds the bucket's posterior as for every strategy and
// reports the compute duration to p.Observe with the same Task (Transfer
// nil).
//
// p needs not be safe for concurrent use: the Scheduler calls it under one
// lock of its own, so a Placement strategy serialises its Selects. p must
// not be shared with another Scheduler.
func Placement(p bandit.Policy) Strategy { return Strategy{kind: placement, policy: p} }

// OpChooser is an optional capability of a Placement policy that needs
// the op itself, not only its Task: an oracle that knows each backend's
// true duration of each shape. When the policy implements it, Select calls
// ChooseOp instead of Choose; res is the op's Residency (bit i of a Mask is
// arm i, Host is host memory) and t its Task, which ChooseOp must not keep.
type OpChooser interface {
	ChooseOp(spec kernels.Spec, res Residency, t *bandit.Task) int
}

// ArmOf returns the bandit.Arm a policy sees for a backend: its name, kind
// and Nominal figures (zero where the backend reports none, as an
// uncalibrated CPU does). A GPU's round trip is two copy latencies, or two
// dispatches for a GPU that shares host memory, as sim.Profile.Arm counts
// it.
func ArmOf(info backends.Info) bandit.Arm {
	n := info.Nominal
	f := bandit.Figures{GFLOPS: n.GFLOPS, MemGBps: n.MemGBps, DispatchUs: n.DispatchUs,
		LinkGBps: n.LinkGBps, LinkLatencyUs: n.LinkLatencyUs}
	gpu := info.Kind == backends.GPU
	if gpu {
		f.RoundTripUs = 2 * n.LinkLatencyUs
		if info.SharedMemory {
			f.RoundTripUs = 2 * n.DispatchUs
		}
	}
	return bandit.Arm{Name: info.Name, GPU: gpu, Nominal: f}
}

// ArmsOf returns ArmOf of each backend's Info, in order: the arms to build
// a Placement policy over. The caller owns the returned slice.
func ArmsOf(bes []backends.Backend) []bandit.Arm {
	arms := make([]bandit.Arm, len(bes))
	for i, b := range bes {
		arms[i] = ArmOf(b.Info())
	}
	return arms
}

// placeWork is the part of an op's Task that Observe hands back to the
// policy; ok is false for decisions of other strategies.
type placeWork struct {
	ok                    bool
	class                 bandit.Class
	op                    string
	elements              int64
	flops, bytesR, bytesW float64
}

// placer holds a Placement policy and its lock.
type placer struct {
	mu   sync.Mutex
	p    bandit.Policy
	op   OpChooser // p, when it implements OpChooser
	task bandit.Task
	xfer [MaxBackends]float64
	n    int
}

func newPlacer(p bandit.Policy, n int) *placer {
	pl := &placer{p: p, n: n}
	pl.op, _ = p.(OpChooser)
	return pl
}

// fill returns the Task of an op (pl.mu held), valid until the lock is
// released.
func (pl *placer) fill(w placeWork, bucket BucketID, xfer bool) *bandit.Task {
	pl.task = bandit.Task{Bucket: int(bucket), Op: w.op, Class: w.class, Elements: w.elements,
		FLOPs: w.flops, BytesRead: w.bytesR, BytesWritten: w.bytesW}
	if xfer {
		pl.task.Transfer = pl.xfer[:pl.n]
	}
	return &pl.task
}

// workOf describes spec for a policy.
func workOf(spec *kernels.Spec) placeWork {
	w := spec.Work()
	name := spec.Op.String()
	if spec.Op == kernels.Opaque && spec.Params.Name != "" {
		name = spec.Params.Name
	}
	return placeWork{ok: true, class: bandit.Class(spec.Op.Class()), op: name,
		elements: spec.OutShape().Elements(), flops: float64(w.FLOPs),
		bytesR: float64(w.BytesRead), bytesW: float64(w.BytesWritten)}
}

// nonResident writes into x, per backend, the bytes of res's inputs not
// resident there: host memory and any shared-memory backend's copy count as
// resident on every shared-memory backend.
func (s *Scheduler) nonResident(res *Residency, x *[MaxBackends]float64) {
	*x = [MaxBackends]float64{}
	for i := range min(res.N, MaxInputs) {
		in := res.Inputs[i]
		if in.Bytes <= 0 {
			continue
		}
		on := in.On
		if on == 0 {
			on = Host
		}
		for a := range s.n {
			if on.Has(a) || s.shared.Has(a) && on&(Host|s.shared) != 0 {
				continue
			}
			x[a] += float64(in.Bytes)
		}
	}
}

// placeDecide applies a Placement strategy (b.mu held).
func (s *Scheduler) placeDecide(spec *kernels.Spec, res *Residency, b *bucket, allowed Mask, extra *[MaxBackends]float64, d *Decision) choice {
	pl := s.place
	d.work = workOf(spec)
	pl.mu.Lock()
	if res.N > 0 {
		s.nonResident(res, &pl.xfer)
	}
	t := pl.fill(d.work, b.id, res.N > 0)
	var arm int
	if pl.op != nil {
		arm = pl.op.ChooseOp(*spec, *res, t)
	} else {
		arm = pl.p.Choose(t)
	}
	pl.mu.Unlock()
	if arm >= 0 && arm < s.n && allowed.Has(arm) {
		s.e.means(b, allowed, extra, &d.Estimates)
		return choice{arm: arm, reason: UserPreference}
	}
	c := s.e.choose(b, allowed, extra, &d.Estimates)
	c.reason = Unsupported
	return c
}

// observe reports a decision's compute duration to the policy.
func (pl *placer) observe(d *Decision, us float64) {
	pl.mu.Lock()
	pl.p.Observe(pl.fill(d.work, d.Bucket, false), d.Backend, us)
	pl.mu.Unlock()
}
