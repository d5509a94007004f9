package rocm

// Device memory: the caching pool's buffers, and the synchronous
// transfers (queue.go queues them through pinned staging memory).

import (
	"fmt"
	"sync/atomic"

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
