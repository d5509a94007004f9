package bandit

import "fmt"

// Class mirrors kernels.Class (bandit imports nothing of kernels): how an
// op's cost grows, as the static schedulers classify it.
type Class uint8

// The op classes.
const (
	ElementWise Class = iota
	Reduction
	Matrix
)

// Task is what a policy is told of one op: its bucket and the work the
// static cost models reason about. Tasks are built by the caller (the
// scheduler, the simulator's harness, replay), never by a policy.
type Task struct {
	// Bucket is the dense index of the op's bucket (op × dtype × size
	// class), assigned by the caller and stable for the policy's lifetime.
	Bucket int
	// Op is the op's name as the catalogue spells it ("MatMul"), or an
	// opaque op's name in its source.
	Op       string
	Class    Class
	Elements int64   // elements of the output
	FLOPs    float64 // floating-point operations
	// BytesRead and BytesWritten are the op's memory traffic in bytes.
	BytesRead, BytesWritten float64
	// Transfer[i] is the bytes of input that are not resident on arm i and
	// must be moved there before the op runs (nil: everything resident).
	Transfer []float64
}

// Figures are an arm's nominal (datasheet or calibrated) figures, the
// inputs of the cost-model baselines and of thompson's prior.
type Figures struct {
	GFLOPS        float64 // sgemm throughput, GFLOP/s
	MemGBps       float64 // memory bandwidth, GB/s
	DispatchUs    float64 // per-op launch or dispatch overhead, µs
	RoundTripUs   float64 // host↔device synchronisation round trip, µs (0 for CPUs)
	LinkGBps      float64 // host↔device link bandwidth, GB/s (0 for CPUs)
	LinkLatencyUs float64 // host↔device copy latency, µs
}

// Arm is one backend a policy chooses among.
type Arm struct {
	Name    string
	GPU     bool
	Nominal Figures
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

var _ fmt.Stringer = Matrix

// String returns the class's name, as kernels.Class spells it.
func (c Class) String() string {
	switch c {
	case ElementWise:
		return "elementwise"
	case Reduction:
		return "reduction"
	case Matrix:
		return "matrix"
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}
