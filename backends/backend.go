package backends

import (
	"fmt"
	"time"

	"github.com/adaptsched/adaptsched/kernels"
)

// Kind is the class of device a backend drives. The scheduler treats every
// GPU alike, whatever its platform.
type Kind uint8

// The device kinds.
const (
	CPU Kind = iota
	GPU
)

var _ fmt.Stringer = GPU

// String returns "cpu" or "gpu".
func (k Kind) String() string {
	switch k {
	case CPU:
		return "cpu"
	case GPU:
		return "gpu"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Info describes the device behind a backend: what the hardware
// fingerprint of the posterior store and the static cost model are made of.
type Info struct {
	Name     string // the backend's registered name: "cpu", "cpu1", "sim:mi300x", "rocm"
	Kind     Kind
	Platform string // "amd" or "nvidia" for GPUs; "host" for CPUs; "sim" for simulated devices
	Model    string // CPU model name or GPU product name
	Arch     string // gcnArchName, "sm_90", or the CPU's GOARCH
	Runtime  string // runtime or library version ("hip 5.2", "openblas"), empty if none
	Threads  int    // CPU worker threads; 0 for GPUs
	Memory   int64  // device memory in bytes; 0 when it shares host memory
	// SharedMemory is true when the device reads host memory directly
	// (CPUs, integrated GPUs): inputs need no transfer to reach it.
	SharedMemory bool
	// Nominal holds the device's datasheet figures where the backend knows
	// them; zero fields are unknown, and the scheduler then asks a
	// Calibrator or uses its documented defaults per kind.
	Nominal Nominal
}

// Nominal are a device's datasheet figures: the static cost model's inputs.
type Nominal struct {
	GFLOPS        float64 // peak f32 matmul throughput, GFLOP/s
	MemGBps       float64 // memory bandwidth, GB/s
	DispatchUs    float64 // per-op launch or dispatch overhead, µs
	LinkGBps      float64 // host↔device link bandwidth, GB/s (0: shares host memory)
	LinkLatencyUs float64 // host↔device copy latency, µs
}

// Clock says how a Timing was measured.
type Clock uint8

// The clocks.
const (
	WallClock    Clock = iota // the monotonic clock around the call (CPU backends)
	DeviceEvents              // events recorded on the device's stream (GPU backends)
	Simulated                 // a simulated device's model, not slept
	// Gathered: the op ran inside a gathering launched at once (Recorder),
	// which measures the whole, not the op: Duration is 0.
	Gathered
)

var _ fmt.Stringer = DeviceEvents

// String returns "wall", "events", "sim" or "gathered".
func (c Clock) String() string {
	switch c {
	case WallClock:
		return "wall"
	case DeviceEvents:
		return "events"
	case Simulated:
		return "sim"
	case Gathered:
		return "gathered"
	}
	return fmt.Sprintf("Clock(%d)", uint8(c))
}

// Timing is the measured duration of one kernel or transfer: the
// actual_duration_us of DESIGN.md, and how it was measured.
type Timing struct {
	Duration time.Duration
	Clock    Clock
}

// Micros returns the duration in microseconds.
func (t Timing) Micros() float64 { return float64(t.Duration) / float64(time.Microsecond) }

// Buffer is memory owned by one backend. Its contents are reached only
// through that backend's Write, Read and Run.
type Buffer interface {
	// Size returns the buffer's length in bytes.
	Size() int64
	// Free releases the buffer; using it afterwards is a programmer error.
	// Free is idempotent.
	Free()
}

// Backend runs ops on one device. Implementations are safe for concurrent
// use unless their doc says otherwise.
type Backend interface {
	// Info describes the device.
	Info() Info
	// Supports returns nil when the backend can run s, or an error wrapping
	// ErrUnsupported that says why. s must be valid.
	Supports(s kernels.Spec) error
	// Alloc returns a buffer of n bytes, or an error wrapping
	// ErrOutOfMemory.
	Alloc(n int64) (Buffer, error)
	// Write copies src (host memory) into dst, which must be len(src)
	// bytes, and returns the transfer's timing.
	Write(dst Buffer, src []byte) (Timing, error)
	// Read copies src into dst (host memory), which must be src.Size()
	// bytes, and returns the transfer's timing.
	Read(dst []byte, src Buffer) (Timing, error)
	// Run executes s with inputs in and output out, all buffers of this
	// backend sized as s requires, and returns the kernel's timing.
	Run(s kernels.Spec, in []Buffer, out Buffer) (Timing, error)
	// Close releases the device. Buffers must not be used afterwards.
	Close() error
}

// HostMapper is implemented by backends whose kernels work on host memory
// in place (CPU backends). A caller that keeps its data in host memory,
// as the adaptive Executor does, hands that memory to such a backend
// instead of copying it into a buffer of the backend's own: an op on the
// CPU then costs no copy in and none out.
type HostMapper interface {
	// MapHost returns a buffer of this backend that aliases b (4-byte
	// aligned): Run reads and writes b itself. Freeing the buffer leaves
	// b to its owner. It fails with an error wrapping ErrUnsupported when
	// the backend cannot, and ErrForeignBuffer when b is misaligned.
	MapHost(b []byte) (Buffer, error)
}

// Calibrator is implemented by backends that can measure their own
// cost-model figures (the CPU backend). The adaptive Scheduler calls
// Calibrate once, in New, for a CPU backend whose Info().Nominal lacks
// GFLOPS, MemGBps or DispatchUs, and fills those from its result. A
// backend without it, one whose Calibrate fails (logged), and every
// backend under adaptive.Config.NoCalibration take the Scheduler's
// documented defaults for the figures they lack.
type Calibrator interface {
	// Calibrate returns the device's measured figures: at least GFLOPS,
	// MemGBps and DispatchUs, all positive. It may run kernels for a few
	// tens of milliseconds, timed by the real clock, and may cache its
	// result; it is safe for concurrent use.
	Calibrate() (Nominal, error)
}
