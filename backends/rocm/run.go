//go:build cgo

package rocm

import (
	"fmt"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// RunAsync implements backends.Queuer: the op is enqueued on the compute
// stream after the events in after and returns at once. Errors of the
// arguments, of a dependency and of the launch come back here; errors of
// the running kernel come back from the event's Wait and from Sync.
func (d *Device) RunAsync(s kernels.Spec, in []backends.Buffer, out backends.Buffer, after []backends.Event) (backends.Event, error) {
	fail := func(err error) (backends.Event, error) {
		return nil, &backends.DeviceError{Backend: d.info.Name, Op: s.Op.String(), Err: err}
	}
	p, err := planOp(s, d.blas != 0)
	if err != nil {
		return fail(err)
	}
	if err := checkBuffers(s, in, out); err != nil {
		return fail(err)
	}
	bufs := make([]*buffer, len(in)+1)
	for i, b := range in {
		if bufs[i], err = d.own(b); err != nil {
			return fail(fmt.Errorf("input %d: %w", i, err))
		}
	}
	ob, err := d.own(out)
	if err != nil {
		return fail(fmt.Errorf("output: %w", err))
	}
	bufs[len(in)] = ob
	deps, err := d.awaitForeign(after)
	if err != nil {
		return d.failedEvent(s.Op.String(), err)
	}
	var e *event
	err = d.callUnbound(func() error {
		gathered := d.gather != nil && p.gemm == nil
		if !gathered {
			if err := d.bind(); err != nil {
				return err
			}
		}
		fns := make([]uintptr, len(p.launches))
		for i, l := range p.launches {
			f, err := d.function(l.kernel)
			if err != nil {
				return err
			}
			fns[i] = f
		}
		var err error
		if gathered {
			e, err = d.gatherOp(s.Op.String(), p, fns, bufs, deps)
			return err
		}
		e, err = d.enqueue(s.Op.String(), d.stream, bufs, deps, func() error {
			return d.launch(p, fns, bufs)
		})
		return err
	})
	if err != nil {
		return fail(err)
	}
	return e, nil
}

// launch enqueues the op's BLAS call or kernels on the compute stream
// (under do); bufs are the inputs then the output.
func (d *Device) launch(p opPlan, fns []uintptr, bufs []*buffer) error {
	ob := bufs[len(bufs)-1]
	if p.gemm != nil {
		return d.sgemm(p.gemm, bufs[0].ptr, bufs[1].ptr, ob.ptr)
	}
	for i, l := range p.launches {
		args := make([]uint64, len(l.args))
		for j, a := range l.args {
			switch a.buf {
			case argValue:
				args[j] = a.val
			case argOut:
				args[j] = uint64(ob.ptr)
			default:
				args[j] = uint64(bufs[a.buf].ptr)
			}
		}
		if err := d.check(fLaunch, d.s.launch(fns[i], l.grid, l.block, 0, d.stream, args)); err != nil {
			return fmt.Errorf("%s: %w", l.kernel, err)
		}
	}
	return nil
}
