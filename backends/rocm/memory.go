//go:build cgo

package rocm

// Device memory: the caching pool's buffers, the pinned staging buffer,
// and transfers through it.

import (
	"fmt"
	"sync/atomic"
	"time"
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
}

var _ backends.Buffer = (*buffer)(nil)

// Size implements backends.Buffer.
func (b *buffer) Size() int64 { return b.size }

// Free implements backends.Buffer: the memory goes back to the device's
// pool. Free is idempotent.
func (b *buffer) Free() {
	if b.ptr != 0 && !b.freed.Swap(true) {
		b.d.pool.put(b.ptr)
	}
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

func (d *Device) own(b backends.Buffer) (*buffer, error) {
	db, ok := b.(*buffer)
	if !ok || db.d != d || db.freed.Load() {
		return nil, backends.ErrForeignBuffer
	}
	return db, nil
}

// ensureStaging grows the pinned staging buffer to n bytes (under do).
func (d *Device) ensureStaging(n int64) error {
	if d.stagingSize >= n {
		return nil
	}
	if d.staging != nil {
		d.s.hostFree(d.staging)
		d.staging, d.stagingSize = nil, 0
	}
	p, code := d.s.hostMalloc(n)
	if err := d.check(fHostMalloc, code); err != nil {
		return err
	}
	d.staging, d.stagingSize = p, n
	return nil
}

// transfer copies n bytes between host memory and dst/src on the device
// in chunks through the pinned staging buffer; the timing is the sum of
// the chunks' copy times measured by events (the host-side memcpy into
// or out of staging is not part of it).
func (d *Device) transfer(op string, b backends.Buffer, host []byte, toDevice bool) (backends.Timing, error) {
	t := backends.Timing{Clock: backends.DeviceEvents}
	fail := func(err error) (backends.Timing, error) {
		return backends.Timing{}, &backends.DeviceError{Backend: d.info.Name, Op: op, Err: err}
	}
	db, err := d.own(b)
	if err != nil {
		return fail(err)
	}
	if int64(len(host)) != db.size {
		return fail(fmt.Errorf("%w: host %d bytes, buffer %d", kernels.ErrBufferSize, len(host), db.size))
	}
	if db.size == 0 {
		return t, nil
	}
	err = d.call(func() error {
		if err := d.ensureStaging(min(db.size, stagingChunk)); err != nil {
			return err
		}
		stage := unsafe.Slice((*byte)(d.staging), d.stagingSize)
		for off := int64(0); off < db.size; off += stagingChunk {
			n := min(stagingChunk, db.size-off)
			var el time.Duration
			var err error
			if toDevice {
				copy(stage[:n], host[off:off+n])
				el, err = d.timed(func() error {
					return d.check(fMemcpyAsync, d.s.memcpyAsync(db.ptr+uintptr(off), uintptr(d.staging), n, hostToDevice, d.stream))
				})
			} else {
				el, err = d.timed(func() error {
					return d.check(fMemcpyAsync, d.s.memcpyAsync(uintptr(d.staging), db.ptr+uintptr(off), n, deviceToHost, d.stream))
				})
				if err == nil {
					copy(host[off:off+n], stage[:n])
				}
			}
			if err != nil {
				return err
			}
			t.Duration += el
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	return t, nil
}

// Write implements backends.Backend: src goes through pinned staging
// memory and an asynchronous copy on the device stream, timed by events.
func (d *Device) Write(dst backends.Buffer, src []byte) (backends.Timing, error) {
	return d.transfer("write", dst, src, true)
}

// Read implements backends.Backend, as Write in the other direction.
func (d *Device) Read(dst []byte, src backends.Buffer) (backends.Timing, error) {
	return d.transfer("read", src, dst, false)
}
