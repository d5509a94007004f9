package cpu

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/internal/host"
	"github.com/adaptsched/adaptsched/kernels"
)

// Backend runs ops on the host CPU: the kernels package's parallel kernels
// on a worker pool of its own, matmul through a CBLAS loaded at run time or
// gonum. Buffers are host memory (backends.HostBuffer). Work runs in
// queue order (backends.Queuer); the synchronous methods queue and wait.
// Backend is safe for concurrent use.
type Backend struct {
	name string
	pool *kernels.Pool
	cpu  *kernels.CPU
	path blasPath
	info backends.Info

	calFile string // the calibration file; "" for none
	calMu   sync.Mutex
	cal     backends.Nominal // Calibrate's result; zero until it succeeds

	q         queue
	closeOnce sync.Once
}

var _ backends.Backend = (*Backend)(nil)

// New opens a CPU backend called name (its Info.Name). It fails only on
// invalid options (ErrInvalidOptions): without a CBLAS it runs on gonum
// and says why (Backend.BLAS; and to the first Logger given, once per
// process).
func New(name string, opts Options) (*Backend, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: empty backend name", ErrInvalidOptions)
	}
	threads, err := opts.threads()
	if err != nil {
		return nil, err
	}
	path := selectPath(opts.Gonum)
	logPath(opts.Logger, path)
	pool := kernels.NewPool(threads)
	b := &Backend{
		name:    name,
		calFile: opts.calibrationFile(),
		pool:    pool,
		cpu:     kernels.NewCPU(pool, panelGemm(pool, path.serial, splitMACs)),
		path:    path,
		info: backends.Info{
			Name:         name,
			Kind:         backends.CPU,
			Platform:     "host",
			Model:        host.CPUModel(),
			Arch:         runtime.GOARCH,
			Runtime:      path.runtime,
			Threads:      pool.Threads(),
			SharedMemory: true,
		},
	}
	b.q.idle.L = &b.q.mu
	return b, nil
}

// BLAS returns the matmul path in use: "OpenBLAS (libopenblas.so.0)"
// ("OpenBLAS (libopenblas.so.0, 64-bit integers)" for an ILP64 build), or
// "gonum (pure Go): " followed by why no CBLAS runs.
func (b *Backend) BLAS() string { return b.path.String() }

// Info implements backends.Backend. Nominal figures are left zero: the
// scheduler asks Calibrate for them.
func (b *Backend) Info() backends.Info { return b.info }

// Supports implements backends.Backend: every op of the catalogue except
// Opaque, at every size and dtype that kernels.Spec.Validate accepts.
func (b *Backend) Supports(s kernels.Spec) error {
	if s.Op == kernels.Opaque {
		return fmt.Errorf("%w: %s: %v is not executable", backends.ErrUnsupported, b.name, s.Op)
	}
	if err := s.Validate(); err != nil {
		return fmt.Errorf("%w: %s: %w", backends.ErrUnsupported, b.name, err)
	}
	return nil
}

// Alloc implements backends.Backend. A negative size, or one beyond the
// machine's physical memory, fails with ErrOutOfMemory.
func (b *Backend) Alloc(n int64) (backends.Buffer, error) {
	if n < 0 || n > maxAlloc() {
		return nil, &backends.DeviceError{Backend: b.name, Op: "alloc",
			Err: fmt.Errorf("%w: %d bytes (physical memory %d)", backends.ErrOutOfMemory, n, maxAlloc())}
	}
	return backends.NewHostBuffer(b, n), nil
}

// MapHost implements backends.HostMapper: the kernels run on b in place.
func (b *Backend) MapHost(data []byte) (backends.Buffer, error) {
	h, err := backends.WrapHost(b, data)
	if err != nil {
		return nil, &backends.DeviceError{Backend: b.name, Op: "map", Err: err}
	}
	return h, nil
}

var _ backends.HostMapper = (*Backend)(nil)

// Write implements backends.Backend: WriteAsync and its Wait. On an idle
// queue the copy runs on the caller's goroutine.
func (b *Backend) Write(dst backends.Buffer, src []byte) (backends.Timing, error) {
	ev, err := b.copyAsync(workWrite, dst, src, nil, true)
	if err != nil {
		return backends.Timing{}, err
	}
	return ev.Wait()
}

// Read implements backends.Backend: ReadAsync and its Wait.
func (b *Backend) Read(dst []byte, src backends.Buffer) (backends.Timing, error) {
	ev, err := b.copyAsync(workRead, src, dst, nil, true)
	if err != nil {
		return backends.Timing{}, err
	}
	return ev.Wait()
}

// Run implements backends.Backend: RunAsync and its Wait. On an idle
// queue the kernel runs on the caller's goroutine, with no task queued
// (queue.runInline). The timing is the monotonic clock around the kernel
// alone, buffer checks excluded.
func (b *Backend) Run(s kernels.Spec, in []backends.Buffer, out backends.Buffer) (backends.Timing, error) {
	if tm, err, ran := b.q.runInline(b, s, in, out); ran {
		return tm, err
	}
	t, err := b.runTask(s, in, out, nil)
	if err != nil {
		return backends.Timing{}, err
	}
	if err := b.q.enqueue(b, t, true); err != nil {
		return backends.Timing{}, &backends.DeviceError{Backend: b.name, Op: s.Op.String(), Err: err}
	}
	return t.ev.Wait()
}

// Close implements backends.Backend: it waits for the queued work, then
// stops the worker pool. It returns the first error of queued work that
// no Wait or Sync has reported. Later calls fail with ErrClosed; Close
// is idempotent.
func (b *Backend) Close() error {
	err := b.q.close()
	b.closeOnce.Do(b.pool.Close)
	return err
}
