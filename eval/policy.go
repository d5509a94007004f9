package eval

import (
	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// Task is what a policy is told of one op: the op itself, where its inputs
// live, its bucket, and the work the static cost models reason about.
// Tasks are built by the caller (the harness, replay, Placement), never by
// a policy, and are valid only during the call they are passed to.
type Task struct {
	// Bucket is the dense index of the op's bucket (op × dtype × size
	// class), assigned by the caller and stable for the policy's lifetime.
	Bucket int
	// Spec is the op. It is nil where the caller knows only the work
	// (Placement's Observe).
	Spec *kernels.Spec
	// Res is where the op's inputs live, as the Executor reports it to
	// adaptive.Scheduler.Select (bit i of a Mask is arm i).
	Res adaptive.Residency
	// Op is the op's name as the catalogue spells it ("MatMul"), or an
	// opaque op's name in its source.
	Op       string
	Class    kernels.Class
	Elements int64   // elements of the output
	FLOPs    float64 // floating-point operations
	// BytesRead and BytesWritten are the op's memory traffic in bytes.
	BytesRead, BytesWritten float64
	// Transfer[i] is the bytes of input that are not resident on arm i and
	// must be moved there before the op runs (nil: everything resident).
	Transfer []float64
}

// Figures are an arm's nominal (datasheet or calibrated) figures, the
// inputs of the cost-model baselines.
type Figures struct {
	GFLOPS        float64 // sgemm throughput, GFLOP/s
	MemGBps       float64 // memory bandwidth, GB/s
	DispatchUs    float64 // per-op launch or dispatch overhead, µs
	RoundTripUs   float64 // host↔device synchronisation round trip, µs (0 for CPUs)
	LinkGBps      float64 // host↔device link bandwidth, GB/s (0 for CPUs)
	LinkLatencyUs float64 // host↔device copy latency, µs
}

// Arm is one backend a policy chooses among: what a policy may know of
// it (its Info), never its true behaviour.
type Arm struct {
	Name    string
	GPU     bool
	Nominal Figures
	// Info is the backend's description, which thompson's Scheduler
	// builds its cost model and links from.
	Info backends.Info
}

// Policy places ops on arms. Choose returns the index of the arm (in the
// slice the policy was built with) that should run t; Observe reports the
// measured compute duration of t on that arm, in µs. Policies are not safe
// for concurrent use unless their doc says so.
type Policy interface {
	Name() string
	Choose(t *Task) int
	Observe(t *Task, arm int, us float64)
}

// TransferObserver is an optional capability of a Policy that learns its
// links: the harness reports each copy it charges (bytes over arm's link,
// toDevice for host→device), as the Executor reports measured copies to
// adaptive.Scheduler.ObserveTransfer. Policies without it are not told.
type TransferObserver interface {
	ObserveTransfer(arm int, toDevice bool, bytes int64, us float64)
}

// Explorer is an optional capability of a Policy: Explored reports whether
// its last Choose was made to learn (thompson: reason Explore or Prior;
// egreedy: a random pick; calibrate: a forced sample; ucb1: an arm other
// than the best mean). The harness counts these as LearnPct; policies
// without it never explore.
type Explorer interface {
	Explored() bool
}

// ArmOf returns the Arm a policy sees for a backend: its name, kind and
// Nominal figures (zero where the backend reports none, as an uncalibrated
// CPU does). A GPU's round trip is two copy latencies, or two dispatches
// for a GPU that shares host memory, as the RLX cost model counts it.
func ArmOf(info backends.Info) Arm {
	n := info.Nominal
	f := Figures{GFLOPS: n.GFLOPS, MemGBps: n.MemGBps, DispatchUs: n.DispatchUs,
		LinkGBps: n.LinkGBps, LinkLatencyUs: n.LinkLatencyUs}
	gpu := info.Kind == backends.GPU
	if gpu {
		f.RoundTripUs = 2 * n.LinkLatencyUs
		if info.SharedMemory {
			f.RoundTripUs = 2 * n.DispatchUs
		}
	}
	return Arm{Name: info.Name, GPU: gpu, Nominal: f, Info: info}
}

// ArmsOf returns ArmOf of each backend's Info, in order. The caller owns
// the returned slice.
func ArmsOf(bes []backends.Backend) []Arm {
	arms := make([]Arm, len(bes))
	for i, b := range bes {
		arms[i] = ArmOf(b.Info())
	}
	return arms
}

// NewTask returns the Task of spec in bucket, everything resident: its
// work as describe fills it. The Task keeps spec.
func NewTask(bucket int, spec *kernels.Spec) Task {
	t := Task{Bucket: bucket}
	describe(&t, spec)
	return t
}

// describe fills t's work from spec: the op's name (an opaque op's source
// name), class, output elements, FLOPs and bytes.
func describe(t *Task, spec *kernels.Spec) {
	w := spec.Work()
	t.Spec = spec
	t.Op = spec.Op.String()
	if spec.Op == kernels.Opaque && spec.Params.Name != "" {
		t.Op = spec.Params.Name
	}
	t.Class = spec.Op.Class()
	t.Elements = spec.OutShape().Elements()
	t.FLOPs, t.BytesRead, t.BytesWritten = float64(w.FLOPs), float64(w.BytesRead), float64(w.BytesWritten)
}
