package peer

import (
	"fmt"
	"runtime"
	"time"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// Device is one implementation as an adaptsched backend: it runs f32
// MatMul [M×K K×N] through peerkern.c's peer_exec, on the calling
// goroutine, and times it with the same monotonic clock reading that the
// StarPU program records. A Device is not safe for concurrent use: the
// benchmark drives it from one goroutine, as StarPU's one CPU worker runs
// its tasks.
type Device struct {
	impl   Impl
	empty  bool            // run the empty probe instead of the kernel
	delays map[Shape]int64 // the drift in force: ns of busy-wait per shape (nil: none)
	info   backends.Info
}

var _ backends.Backend = (*Device)(nil)

// NewDevice returns implementation impl as a backend named impl.String().
// With empty set it runs nothing (the per-task overhead probe) for any
// matmul it is handed. It fails with an error wrapping ErrNoBLAS when
// OpenBLAS cannot be loaded.
func NewDevice(impl Impl, empty bool) (*Device, error) {
	if impl >= numImpls {
		return nil, fmt.Errorf("peer: unknown implementation %v", impl)
	}
	if err := Load(); err != nil {
		return nil, err
	}
	return &Device{impl: impl, empty: empty, info: backends.Info{
		Name: impl.String(), Kind: backends.CPU, Platform: "host", Arch: runtime.GOARCH,
		Runtime: "peerkern", Threads: 1, SharedMemory: true,
	}}, nil
}

// SetDrift slows the device's kernels from now on: after a kernel on a
// shape of delays it busy-waits that shape's delay (nil: no drift). The
// device keeps delays; the caller must not change it afterwards.
func (d *Device) SetDrift(delays map[Shape]int64) { d.delays = delays }

// Info implements backends.Backend. Nominal figures are zero: the
// benchmark's Scheduler takes the documented CPU defaults for both
// implementations, so that neither starts favoured.
func (d *Device) Info() backends.Info { return d.info }

// Supports implements backends.Backend: f32 MatMul of two matrices.
func (d *Device) Supports(s kernels.Spec) error {
	if s.Op != kernels.MatMul || s.DType != kernels.F32 || len(s.In) != 2 || len(s.In[0]) != 2 || len(s.In[1]) != 2 {
		return fmt.Errorf("%w: %s: only f32 MatMul of two matrices", backends.ErrUnsupported, d.info.Name)
	}
	return s.Validate()
}

// Alloc implements backends.Backend.
func (d *Device) Alloc(n int64) (backends.Buffer, error) {
	if n < 0 {
		return nil, &backends.DeviceError{Backend: d.info.Name, Op: "alloc", Err: backends.ErrOutOfMemory}
	}
	return backends.NewHostBuffer(d, n), nil
}

// MapHost implements backends.HostMapper: the kernels read and write b.
func (d *Device) MapHost(b []byte) (backends.Buffer, error) { return backends.WrapHost(d, b) }

var _ backends.HostMapper = (*Device)(nil)

// Write implements backends.Backend.
func (d *Device) Write(dst backends.Buffer, src []byte) (backends.Timing, error) {
	b, err := backends.HostBytes(d, dst)
	if err != nil || len(b) != len(src) {
		return backends.Timing{}, &backends.DeviceError{Backend: d.info.Name, Op: "write", Err: kernels.ErrBufferSize}
	}
	start := time.Now()
	copy(b, src)
	return backends.Timing{Duration: time.Since(start), Clock: backends.WallClock}, nil
}

// Read implements backends.Backend.
func (d *Device) Read(dst []byte, src backends.Buffer) (backends.Timing, error) {
	b, err := backends.HostBytes(d, src)
	if err != nil || len(b) != len(dst) {
		return backends.Timing{}, &backends.DeviceError{Backend: d.info.Name, Op: "read", Err: kernels.ErrBufferSize}
	}
	start := time.Now()
	copy(dst, b)
	return backends.Timing{Duration: time.Since(start), Clock: backends.WallClock}, nil
}

// Run implements backends.Backend for a spec that Supports accepted (it
// checks only the op's form and the buffers' sizes, not Validate again:
// the Scheduler validated the spec). The timing is peer_exec's own: the
// kernel plus the drift's busy-wait.
func (d *Device) Run(s kernels.Spec, in []backends.Buffer, out backends.Buffer) (backends.Timing, error) {
	if s.Op != kernels.MatMul || len(s.In) != 2 || len(s.In[0]) != 2 || len(s.In[1]) != 2 || len(in) != 2 {
		return backends.Timing{}, &backends.DeviceError{Backend: d.info.Name, Op: "run", Err: kernels.ErrBufferSize}
	}
	a, ea := backends.HostBytes(d, in[0])
	b, eb := backends.HostBytes(d, in[1])
	c, ec := backends.HostBytes(d, out)
	if ea != nil || eb != nil || ec != nil {
		return backends.Timing{}, &backends.DeviceError{Backend: d.info.Name, Op: "run", Err: backends.ErrForeignBuffer}
	}
	if int64(len(a)) != s.InBytes(0) || int64(len(b)) != s.InBytes(1) || int64(len(c)) != s.OutBytes() {
		return backends.Timing{}, &backends.DeviceError{Backend: d.info.Name, Op: "run", Err: kernels.ErrBufferSize}
	}
	sh := Shape{M: s.In[0][0], K: s.In[0][1], N: s.In[1][1]}
	ns := execKernel(d.impl, d.empty, d.delays[sh], sh, kernels.AsF32(a), kernels.AsF32(b), kernels.AsF32(c))
	return backends.Timing{Duration: time.Duration(ns), Clock: backends.WallClock}, nil
}

// Close implements backends.Backend.
func (d *Device) Close() error { return nil }
