//go:build cgo

package rocm

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// Device is one GPU driven through HIP (AMD) or CUDA (NVIDIA). Vendor
// calls run on the caller's own OS thread, locked to it for the call and
// bound to the device first (the vendor runtimes keep the current device
// or context per thread), one caller at a time under a mutex: a
// dedicated device thread would cost two cross-thread wake-ups per op,
// more than a short op's device time (BenchmarkGPULaunch). Work is queued
// (queue.go): ops on one stream, copies on another, each in call order.
// Device is safe for concurrent use.
type Device struct {
	l    *loaded
	s    *shim
	v    *vendor
	opts Options
	info backends.Info
	arch string // the compiler's target: full gcnArchName or sm_XY

	gate   sync.RWMutex // held for reading by calls, for writing by Close
	closed bool
	lost   atomic.Bool

	// mu serialises vendor calls; it guards everything below.
	mu sync.Mutex
	// ctx is the NVIDIA primary context (0 on AMD); bound says the device
	// is initialised, so do binds each caller's thread to it.
	ctx   uintptr
	bound bool
	// unbound says a doUnbound section has not bound its thread yet:
	// bind must come before its first vendor call.
	unbound   bool
	blas      uintptr
	modules   map[string]uintptr
	functions map[string]uintptr

	// stream runs kernels; copyStream runs copies, the same stream when
	// the device has no copy engine.
	stream, copyStream uintptr
	events             []uintptr                  // the event pool: handles not in use
	pinned             map[int64][]unsafe.Pointer // free pinned staging blocks by size class
	pinnedCached       int64                      // their bytes
	inflight           []*event                   // queued work not yet retired, in queue order
	failed             []*event                   // retired work that failed, not yet reported by Sync
	gather             *gathering                 // ops gathered, not yet launched; nil when not gathering
	graphs             []*replay                  // the graph of each segment of a gathered step
	segment            int                        // launches since Record: the next segment's graph
	gatheredSince      int                        // kernels launched since Record
	lastGathering      int                        // kernels of the last gathering, Record to Flush
	spareKernels       kernelList                 // the last gathering's storage, for the next Record
	graphStats         GraphStats
	costs              gatherCosts             // what gathering has cost, for the planner
	planner            backends.SegmentPlanner // the sizes of a gathering's segments

	pool *pool
}

var _ backends.Backend = (*Device)(nil)

// Open opens device o.Device of the first platform (AMD, then NVIDIA,
// unless o.Platform picks one) whose libraries load and which has that
// device. It returns a *backends.UnavailableError naming every library
// tried and why it failed, or the device count that came back; it never
// crashes the process for a missing library or device.
func Open(o Options) (*Device, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	platforms := []Platform{AMD, NVIDIA}
	if o.Platform != Auto {
		platforms = []Platform{o.Platform}
	}
	var reasons []string
	for _, p := range platforms {
		d, reason, err := open(vendorFor(p), o)
		if err != nil {
			return nil, err
		}
		if d != nil {
			return d, nil
		}
		reasons = append(reasons, reason)
	}
	return nil, &backends.UnavailableError{Backend: "rocm", Reason: strings.Join(reasons, "; ")}
}

// open returns a device, or the reason the platform is unavailable, or an
// error for a device that exists but failed to initialise.
func open(v *vendor, o Options) (*Device, string, error) {
	d := &Device{v: v, opts: o, modules: map[string]uintptr{}, functions: map[string]uintptr{}, pinned: map[int64][]unsafe.Pointer{}}
	var reason string
	err := d.do(func() error {
		l, _, r := loadRuntime(v, o)
		if l == nil {
			reason = r
			return nil
		}
		if r := l.loadCompiler(o.LibDirs); r != "" {
			reason = r
			return nil
		}
		d.l, d.s = l, l.s
		return d.initDevice()
	})
	if err != nil || d.s == nil {
		return nil, reason, err
	}
	d.pool = newPool(d.allocDevice, d.freeDevice)
	if !o.NoBLAS && d.l.loadBLAS(o.LibDirs) {
		if err := d.initBLAS(); err != nil {
			d.Close()
			return nil, "", err
		}
	} else if o.NoBLAS {
		d.l.blasReason = "disabled by Options.NoBLAS"
	}
	return d, "", nil
}

// check maps a vendor status: 0 is nil; allocation failures wrap
// backends.ErrOutOfMemory; sticky errors wrap backends.ErrDeviceLost and
// mark the device lost; anything else is a *CallError.
func (d *Device) check(f fn, code int) error {
	if code == 0 {
		return nil
	}
	ce := &CallError{Call: d.symName(f), Code: code, Msg: d.s.errorString(code)}
	switch {
	case code == d.v.oom:
		return fmt.Errorf("%w: %w", backends.ErrOutOfMemory, ce)
	case slices.Contains(d.v.deviceLost, code):
		d.lost.Store(true)
		return fmt.Errorf("%w: %w", backends.ErrDeviceLost, ce)
	}
	return ce
}

func (d *Device) symName(f fn) string {
	for _, s := range d.v.syms {
		if s.f == f {
			return s.names[0]
		}
	}
	return fmt.Sprintf("fn(%d)", f)
}

// initDevice makes the device current on this thread and reads what Info
// reports. It runs under do.
func (d *Device) initDevice() error {
	s, dev := d.s, d.opts.Device
	if err := d.check(fSetDevice, s.setDevice(dev)); err != nil {
		return err
	}
	info := backends.Info{Name: "rocm", Kind: backends.GPU, Platform: d.v.platform.String()}
	if d.v.platform == NVIDIA {
		if err := d.check(fInit, s.driverInit()); err != nil {
			return err
		}
		cudev, code := s.deviceGet(dev)
		if err := d.check(fDeviceGet, code); err != nil {
			return err
		}
		ctx, code := s.ctxRetain(cudev)
		if err := d.check(fCtxRetain, code); err != nil {
			return err
		}
		if err := d.check(fCtxSetCurrent, s.call(fCtxSetCurrent, ctx)); err != nil {
			return err
		}
		d.ctx = ctx
		major, code := s.deviceAttr(cuAttrCCMajor, cudev)
		if err := d.check(fDeviceAttr, code); err != nil {
			return err
		}
		minor, code := s.deviceAttr(cuAttrCCMinor, cudev)
		if err := d.check(fDeviceAttr, code); err != nil {
			return err
		}
		d.arch = fmt.Sprintf("sm_%d%d", major, minor)
		info.Arch = d.arch
		info.Model, _ = s.deviceName(cudev)
	} else {
		props, code := s.deviceProps(dev)
		if err := d.check(fDeviceProps, code); err != nil {
			return err
		}
		d.arch = scanArch(props)
		if d.arch == "" {
			return &CallError{Call: d.symName(fDeviceProps), Msg: "no gcnArchName in the device properties"}
		}
		info.Arch = baseArch(d.arch)
		if name, code := s.deviceName(dev); code == 0 && name != "" {
			info.Model = name
		} else {
			info.Model = strings.TrimRight(string(props[:256]), "\x00")
		}
	}
	if _, total, code := s.memGetInfo(); code == 0 {
		info.Memory = total
	}
	if ver, code := s.runtimeVersion(); code == 0 {
		info.Runtime = d.v.runtimeName(ver)
	}
	d.info = info
	var code int
	if d.stream, code = s.create(fStreamCreate); code != 0 {
		return d.check(fStreamCreate, code)
	}
	d.copyStream = d.stream
	if d.hasCopyEngine() {
		if d.copyStream, code = s.create(fStreamCreate); code != 0 {
			return d.check(fStreamCreate, code)
		}
	}
	d.graphStats.NoGraphs = d.graphsMissing()
	d.bound = true
	return nil
}

// hasCopyEngine reports whether copies can overlap kernels on a stream of
// their own: on NVIDIA when the driver counts an async engine
// (CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT); on AMD always, every GPU
// having SDMA engines (HIP documents its async-engine attribute as
// CUDA-only).
func (d *Device) hasCopyEngine() bool {
	if d.v.platform != NVIDIA {
		return true
	}
	cudev, code := d.s.deviceGet(d.opts.Device)
	if code != 0 {
		return false
	}
	n, code := d.s.deviceAttr(cuAttrAsyncEngineCount, cudev)
	return code == 0 && n > 0
}

// initBLAS checks that rocBLAS has kernels for this architecture and
// initialises it once in a child process (rocBLAS aborts its process when
// they are missing), then creates this process's handle on the stream.
// A failed check or probe leaves MatMul to the tiled kernel.
func (d *Device) initBLAS() error {
	if d.v.platform == AMD {
		if r := rocblasKernelsPresent(d.s.symPath(fBLASCreate), baseArch(d.arch)); r != "" {
			d.l.blasReason = r
			return nil
		}
		if r := probeBLAS(d.opts, d.l.paths[roleBLAS]); r != "" {
			d.l.blasReason = r
			return nil
		}
	}
	return d.do(func() error {
		h, code := d.s.create(fBLASCreate)
		if code != 0 {
			d.l.blasReason = fmt.Sprintf("%s returned %d", d.symName(fBLASCreate), code)
			return nil
		}
		if code := d.s.blasSetStream(h, d.stream); code != 0 {
			d.s.call(fBLASDestroy, h)
			d.l.blasReason = fmt.Sprintf("%s returned %d", d.symName(fBLASSetStream), code)
			return nil
		}
		d.blas = h
		return nil
	})
}

// Info implements backends.Backend.
func (d *Device) Info() backends.Info { return d.info }

// BLAS reports the BLAS library MatMul runs on, or "" and the reason none
// is used (MatMul then runs the tiled HIP kernel).
func (d *Device) BLAS() (path, reason string) {
	if d.blas != 0 {
		return d.l.paths[roleBLAS], ""
	}
	return "", d.l.blasReason
}

// Libraries returns the paths the runtime, driver (NVIDIA), compiler and
// BLAS were loaded from, keyed "runtime", "driver", "compiler", "blas".
func (d *Device) Libraries() map[string]string {
	m := map[string]string{}
	for r, p := range d.l.paths {
		if p != "" {
			m[roleNames[r]] = p
		}
	}
	return m
}

// Supports implements backends.Backend.
func (d *Device) Supports(s kernels.Spec) error {
	_, err := planOp(s, d.blas != 0)
	return err
}

// Run implements backends.Backend: RunAsync and its Wait. The first use
// of a kernel compiles its source (or loads it from the disk cache)
// before the op is enqueued; the Timing is the device time between
// events recorded around the op's launches (or its BLAS call) on the
// stream.
func (d *Device) Run(s kernels.Spec, in []backends.Buffer, out backends.Buffer) (backends.Timing, error) {
	e, err := d.RunAsync(s, in, out, nil)
	if err != nil {
		return backends.Timing{}, err
	}
	return e.Wait()
}

// sgemm runs a row-major GEMM on the column-major BLAS by the operand
// swap: Cᵀ = Bᵀ·Aᵀ, so B is passed first with the dimensions exchanged.
func (d *Device) sgemm(g *gemm, a, b, c uintptr) error {
	for i := range g.batch {
		ai := a + uintptr(int64(i)*g.strideA*4)
		bi := b + uintptr(int64(i)*g.strideB*4)
		ci := c + uintptr(int64(i)*g.strideC*4)
		code := d.s.blasSgemm(d.blas, d.v.opN, d.v.opN, g.n, g.m, g.k, 1, bi, g.n, ai, g.k, 0, ci, g.n)
		if code == d.v.blasAllocFailed {
			return fmt.Errorf("%w: %s: status %d", backends.ErrOutOfMemory, d.symName(fBLASSgemm), code)
		}
		if code != 0 {
			return &CallError{Call: d.symName(fBLASSgemm), Code: code}
		}
	}
	return nil
}

// Close implements backends.Backend: it waits for the queued work, then
// releases the pool's memory, the staging memory, modules, events,
// streams and BLAS handle. Libraries stay loaded. It returns the first
// error of queued work that no Wait or Sync reported, with any teardown
// error. Close is idempotent.
func (d *Device) Close() error {
	d.gate.Lock()
	defer d.gate.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	var queued error
	if d.bound {
		queued = d.do(func() error { return d.drainQueue() })
	}
	if d.pool != nil {
		d.pool.drain()
	}
	err := d.do(func() error {
		s := d.s
		var errs []error
		if d.blas != 0 {
			if code := s.call(fBLASDestroy, d.blas); code != 0 {
				errs = append(errs, fmt.Errorf("%s: status %d", d.symName(fBLASDestroy), code))
			}
		}
		for _, l := range d.pinned {
			for _, p := range l {
				errs = append(errs, d.check(fHostFree, s.hostFree(p)))
			}
		}
		d.pinned = nil
		for _, m := range d.modules {
			errs = append(errs, d.check(fModuleUnload, s.call(fModuleUnload, m)))
		}
		for _, e := range d.events {
			errs = append(errs, d.check(fEventDestroy, s.call(fEventDestroy, e)))
		}
		d.events = nil
		if d.copyStream != 0 && d.copyStream != d.stream {
			errs = append(errs, d.check(fStreamDestroy, s.call(fStreamDestroy, d.copyStream)))
		}
		if d.stream != 0 {
			errs = append(errs, d.check(fStreamDestroy, s.call(fStreamDestroy, d.stream)))
		}
		return errors.Join(errs...)
	})
	return errors.Join(queued, err)
}

// Pool returns the bytes of device memory in live buffers and the bytes
// the pool keeps cached for reuse.
func (d *Device) Pool() (live, cached int64) { return d.pool.stats() }

// Trim releases the pool's cached blocks to the driver.
// It does nothing after Close.
func (d *Device) Trim() {
	d.gate.RLock()
	defer d.gate.RUnlock()
	if !d.closed {
		d.pool.trim()
	}
}

func init() {
	if os.Getenv(probeEnv) != "" {
		os.Exit(runProbe())
	}
}

func openBackend(o Options) (backends.Backend, error) {
	d, err := Open(o)
	if err != nil {
		return nil, err
	}
	return d, nil
}
