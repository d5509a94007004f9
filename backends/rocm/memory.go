//go:build cgo

package rocm

// Device memory: the caching pool's buffers, the pinned staging pool, and
// transfers through it, queued on the copy stream (queue.go).

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// buffer is device memory from the pool.
type buffer struct {
	d     *Device
	ptr   uintptr
	size  int64
	freed atomic.Bool
	last  *event // the last queued work that used it (guarded by d.mu)
}

var _ backends.Buffer = (*buffer)(nil)

// Size implements backends.Buffer.
func (b *buffer) Size() int64 { return b.size }

// Free implements backends.Buffer: the memory goes back to the device's
// pool, once the queued work that uses it has completed (until then no
// allocation can reuse it). Free is idempotent.
func (b *buffer) Free() {
	if b.ptr == 0 || b.freed.Swap(true) {
		return
	}
	d := b.d
	d.mu.Lock()
	if l := b.last; l != nil && !l.done.Load() {
		l.release = append(l.release, b.ptr)
		d.mu.Unlock()
		return
	}
	d.mu.Unlock()
	d.pool.put(b.ptr)
}

func (d *Device) allocDevice(n int64) (uintptr, error) {
	var p uintptr
	err := d.do(func() error {
		var code int
		p, code = d.s.malloc(n)
		return d.check(fMalloc, code)
	})
	return p, err
}

func (d *Device) freeDevice(p uintptr) {
	_ = d.do(func() error { return d.check(fFree, d.s.free(p)) })
}

// Alloc implements backends.Backend: memory comes from a caching pool
// (released cached blocks are retried before ErrOutOfMemory is returned).
func (d *Device) Alloc(n int64) (backends.Buffer, error) {
	if n < 0 {
		return nil, &backends.DeviceError{Backend: d.info.Name, Op: "alloc", Err: fmt.Errorf("%w: %d bytes", kernels.ErrBufferSize, n)}
	}
	d.gate.RLock()
	defer d.gate.RUnlock()
	if d.closed {
		return nil, ErrClosed
	}
	if d.lost.Load() {
		return nil, &backends.DeviceError{Backend: d.info.Name, Op: "alloc", Err: backends.ErrDeviceLost}
	}
	if n == 0 {
		return &buffer{d: d}, nil
	}
	p, _, err := d.pool.get(n)
	if err != nil {
		return nil, &backends.DeviceError{Backend: d.info.Name, Op: "alloc", Err: err}
	}
	return &buffer{d: d, ptr: p, size: n}, nil
}

// errFreed is the error of using a freed buffer.
var errFreed = fmt.Errorf("%w: it was freed", backends.ErrForeignBuffer)

func (d *Device) own(b backends.Buffer) (*buffer, error) {
	db, ok := b.(*buffer)
	if !ok || db.d != d {
		return nil, backends.ErrForeignBuffer
	}
	if db.freed.Load() {
		return nil, errFreed
	}
	return db, nil
}

// Write implements backends.Backend: WriteAsync and its Wait. src goes
// through pinned staging memory and an asynchronous copy on the copy
// stream, timed by events.
func (d *Device) Write(dst backends.Buffer, src []byte) (backends.Timing, error) {
	e, err := d.WriteAsync(dst, src, nil)
	if err != nil {
		return backends.Timing{}, err
	}
	return e.Wait()
}

// Read implements backends.Backend: ReadAsync and its Wait.
func (d *Device) Read(dst []byte, src backends.Buffer) (backends.Timing, error) {
	e, err := d.ReadAsync(dst, src, nil)
	if err != nil {
		return backends.Timing{}, err
	}
	return e.Wait()
}

// WriteAsync implements backends.Queuer: src is copied at once into
// pinned staging memory (src may be reused as soon as WriteAsync
// returns), then onto the device on the copy stream.
func (d *Device) WriteAsync(dst backends.Buffer, src []byte, after []backends.Event) (backends.Event, error) {
	return d.copyAsync("write", dst, src, after)
}

// ReadAsync implements backends.Queuer: the device copies src into pinned
// staging memory on the copy stream; dst is filled from it when the copy
// is retired (Done, Wait, Sync).
func (d *Device) ReadAsync(dst []byte, src backends.Buffer, after []backends.Event) (backends.Event, error) {
	return d.copyAsync("read", src, dst, after)
}

// copyAsync queues a write (host → b) or read (b → host).
func (d *Device) copyAsync(op string, b backends.Buffer, host []byte, after []backends.Event) (backends.Event, error) {
	fail := func(err error) (backends.Event, error) {
		return nil, &backends.DeviceError{Backend: d.info.Name, Op: op, Err: err}
	}
	db, err := d.own(b)
	if err != nil {
		return fail(err)
	}
	if int64(len(host)) != db.size {
		return fail(fmt.Errorf("%w: host %d bytes, buffer %d", kernels.ErrBufferSize, len(host), db.size))
	}
	deps, err := d.awaitForeign(after, nil)
	if err != nil {
		return d.failedEvent(op, err)
	}
	var e *event
	err = d.call(func() error {
		if db.size == 0 {
			e = &event{d: d, op: op, timing: backends.Timing{Clock: backends.DeviceEvents}}
			e.done.Store(true)
			return nil
		}
		stage, err := d.takePinned(db.size)
		if err != nil {
			return err
		}
		src, dst, kind := uintptr(unsafe.Pointer(unsafe.SliceData(stage))), db.ptr, hostToDevice
		if op == "write" {
			copy(stage, host)
		} else {
			src, dst, kind = db.ptr, src, deviceToHost
		}
		e, err = d.enqueue(op, d.copyStream, []*buffer{db}, deps, func() error {
			return d.check(fMemcpyAsync, d.s.memcpyAsync(dst, src, db.size, kind, d.copyStream))
		})
		if err != nil {
			d.putPinned(stage)
			return err
		}
		e.stage = stage
		if op == "read" {
			e.dst = host
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	return e, nil
}

// takePinned returns pinned host memory of n bytes from the staging pool,
// allocating a block of n's size class when none is free (under do).
func (d *Device) takePinned(n int64) ([]byte, error) {
	c := classSize(n)
	if l := d.pinned[c]; len(l) > 0 {
		p := l[len(l)-1]
		d.pinned[c] = l[:len(l)-1]
		d.pinnedCached -= c
		return unsafe.Slice((*byte)(p), c)[:n], nil
	}
	p, code := d.s.hostMalloc(c)
	if err := d.check(fHostMalloc, code); err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), c)[:n], nil
}

// maxPinnedCache bounds the pinned staging memory kept for reuse: a model
// upload of many large tensors would otherwise keep a block of each size
// pinned until Close.
const maxPinnedCache = 256 << 20

// putPinned returns staging memory from takePinned to its pool, or to the
// runtime when the pool holds maxPinnedCache already (under do).
func (d *Device) putPinned(b []byte) {
	c := int64(cap(b))
	p := unsafe.Pointer(unsafe.SliceData(b))
	if d.pinnedCached+c > maxPinnedCache {
		_ = d.check(fHostFree, d.s.hostFree(p))
		return
	}
	d.pinned[c] = append(d.pinned[c], p)
	d.pinnedCached += c
}
