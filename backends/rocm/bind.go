//go:build cgo

package rocm

// Binding: vendor calls run on the caller's OS thread, bound to the
// device first, under the device's mutex (Device's doc says why).

import (
	"fmt"
	"runtime"

	"github.com/adaptsched/adaptsched/backends"
)

// do runs f under the device's mutex on the calling goroutine's OS
// thread, locked to it for the call and bound to the device: the primary
// context made current on NVIDIA, the device set on AMD (each a
// thread-local store in the runtime). f must not call do.
func (d *Device) do(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.bindThread(); err != nil {
		return err
	}
	return f()
}

// bindThread makes the device current on the calling thread (under mu,
// the thread locked).
func (d *Device) bindThread() error {
	if !d.bound {
		return nil
	}
	if d.ctx != 0 {
		return d.check(fCtxSetCurrent, d.s.call(fCtxSetCurrent, d.ctx))
	}
	return d.check(fSetDevice, d.s.setDevice(d.opts.Device))
}

// doUnbound is do for f that may make no vendor call: the thread is
// locked and bound only when f first calls bind. Rule: an op that joins
// a gathering runs unbound. Why: it makes no vendor call unless it
// launches a segment or waits on the copy stream, and binding is a
// vendor call (cuCtxSetCurrent, hipSetDevice), about 0.18 µs a gathered
// op on an H200.
func (d *Device) doUnbound(f func() error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.unbound = true
	err := f()
	if d.unbound {
		d.unbound = false
	} else {
		runtime.UnlockOSThread()
	}
	return err
}

// bind binds the calling thread for the vendor calls that follow in a
// doUnbound section, once; under do it does nothing.
func (d *Device) bind() error {
	if !d.unbound {
		return nil
	}
	d.unbound = false
	runtime.LockOSThread() // doUnbound unlocks it
	return d.bindThread()
}

// call runs f through do for a public method: it fails with
// ErrClosed after Close and with ErrDeviceLost once the device is lost.
func (d *Device) call(f func() error) error {
	d.gate.RLock()
	defer d.gate.RUnlock()
	if err := d.usable(); err != nil {
		return err
	}
	return d.do(f)
}

// callUnbound is call through doUnbound.
func (d *Device) callUnbound(f func() error) error {
	d.gate.RLock()
	defer d.gate.RUnlock()
	if err := d.usable(); err != nil {
		return err
	}
	return d.doUnbound(f)
}

// usable returns ErrClosed after Close and ErrDeviceLost once the device
// is lost; the caller holds gate.
func (d *Device) usable() error {
	if d.closed {
		return ErrClosed
	}
	if d.lost.Load() {
		return fmt.Errorf("%w: an earlier call failed with a sticky error", backends.ErrDeviceLost)
	}
	return nil
}
