package backends

import "github.com/adaptsched/adaptsched/kernels"

// Event is the completion of one piece of queued work (a kernel or a copy).
// It is safe for concurrent use.
type Event interface {
	// Done reports, without blocking, whether the work has completed
	// (successfully or not).
	Done() bool
	// Wait blocks until the work has completed and returns its Timing, or the
	// error the work failed with (wrapping a *DeviceError naming the op).
	Wait() (Timing, error)
}

// VirtualSpan is implemented by Events of simulated devices: the work's
// start and end on the simulation's virtual clock, in µs.
type VirtualSpan interface {
	Span() (startUs, endUs float64)
}

// Queuer is the optional capability of a backend that queues work on its
// device: each call enqueues the work after the events in after (which may
// belong to other backends) and returns at once. A backend without it is
// driven through its synchronous methods. The synchronous methods of a
// Queuer behave as the queued call followed by Wait.
type Queuer interface {
	// RunAsync enqueues s with inputs in and output out, as Run does.
	RunAsync(s kernels.Spec, in []Buffer, out Buffer, after []Event) (Event, error)
	// WriteAsync enqueues the copy of src (host memory) into dst, as Write
	// does; src must not be modified before the event is Done.
	WriteAsync(dst Buffer, src []byte, after []Event) (Event, error)
	// ReadAsync enqueues the copy of src into dst (host memory), as Read
	// does; dst must not be read by the caller before the event is Done.
	ReadAsync(dst []byte, src Buffer, after []Event) (Event, error)
	// Sync waits for all work queued so far and returns the first error of
	// queued work that no Wait has reported yet.
	Sync() error
}

// SharesHardware is the optional capability of backends that run on the
// same hardware as other backends (cpu and cpu1 share the host's cores).
// HardwareGroup returns a name equal for backends that share hardware;
// a backend without the capability shares with none.
type HardwareGroup interface {
	HardwareGroup() string
}

// Recorder is the optional capability of a Queuer that gathers the ops
// queued between Record and Flush and launches them at once, as a GPU
// graph replayed with new arguments when the next gathering has the same
// kernels: the host then pays one launch per step instead of one per op,
// as llama.cpp and PyTorch replay CUDA graphs. Gathered ops have no
// timings of their own (Clock Gathered, Duration 0). Their Events are
// Deferred: waiting for one launches the gathering; so does any work
// that cannot join it (a copy, a library call, Sync).
type Recorder interface {
	Queuer
	// Record starts gathering.
	Record() error
	// Flush launches what was gathered and stops gathering.
	Flush() error
}

// Deferred is implemented by Events of work that may be gathered and not
// yet launched. Launched is closed once the work is on the device: an
// observer that must not launch it early (a watcher that would end the
// gathering at its first op) waits there before Wait. Launch launches
// the gathering now if it has not been, without waiting for it: what a
// host that is about to wait for the work does.
type Deferred interface {
	Launched() <-chan struct{}
	Launch() error
}

// Gathering's segments: a Recorder launches what it has gathered once the
// n-th segment since Record holds SegmentLimit(n, done, last) ops, where
// done were gathered since Record before it and last in the whole of
// the previous gathering (0 if none). The device then starts on a step's
// first segment while the host gathers the next instead of idling until
// the whole step is gathered. A launch costs the host about 10 µs on an
// H200 (a graph launch and two event records: backends/rocm
// BenchmarkGPUCalls) and 32 ops take it 200 µs or more to gather, so
// launches stay a few per cent of its work; the first segments are
// smaller (4, 8, 16), so that the device starts early, and so are the
// last (half of what the previous gathering had left), so that little
// device work is left when the host has gathered the last op.
const (
	segmentMax   = 32
	segmentFirst = 4
)

// SegmentLimit is the size of gathering's n-th segment (see above).
func SegmentLimit(n, done, last int) int {
	l := segmentMax
	if n < 3 {
		l = min(l, segmentFirst<<n)
	}
	if left := last - done; last > 0 && left > 0 {
		l = min(l, max(segmentFirst, left/2))
	}
	return l
}
