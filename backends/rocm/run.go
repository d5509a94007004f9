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
	// An op's buffers fit in place (at most 3 inputs and the output), so
	// that queuing allocates only its event (BenchmarkFakeGatheredDirect).
	var held [maxBufs]*buffer
	bufs := held[:0]
	if len(in)+1 > maxBufs {
		bufs = make([]*buffer, 0, len(in)+1)
	}
	for i, b := range in {
		ib, err := d.own(b)
		if err != nil {
			return fail(fmt.Errorf("input %d: %w", i, err))
		}
		bufs = append(bufs, ib)
	}
	ob, err := d.own(out)
	if err != nil {
		return fail(fmt.Errorf("output: %w", err))
	}
	bufs = append(bufs, ob)
	var ownDeps [4]*event // as many as an Executor's op usually waits for
	deps, err := d.awaitForeign(after, ownDeps[:0])
	if err != nil {
		return d.failedEvent(s.Op.String(), err)
	}
	var e *event
	err = d.callUnbound(func() error {
		gathered := d.gather != nil && !p.blas
		if !gathered {
			if err := d.bind(); err != nil {
				return err
			}
		}
		var fn uintptr
		if !p.blas {
			var err error
			if fn, err = d.function(p.launch.kernel); err != nil {
				return err
			}
		}
		var err error
		if gathered {
			e, err = d.gatherOp(s.Op.String(), &p.launch, fn, bufs, deps)
			return err
		}
		e, err = d.enqueue(s.Op.String(), d.stream, bufs, deps, func() error {
			return d.launch(&p, fn, bufs)
		})
		return err
	})
	if err != nil {
		return fail(err)
	}
	return e, nil
}

// maxBufs is the most buffers an op names, its output included.
const maxBufs = 4

// launch enqueues the op's BLAS call or its kernel (fn) on the compute
// stream (under do); bufs are the inputs then the output.
func (d *Device) launch(p *opPlan, fn uintptr, bufs []*buffer) error {
	ob := bufs[len(bufs)-1]
	if p.blas {
		return d.sgemm(&p.gemm, bufs[0].ptr, bufs[1].ptr, ob.ptr)
	}
	var slots [maxArgs]uint64
	args := p.launch.slots(slots[:0], bufs)
	l := &p.launch
	if err := d.check(fLaunch, d.s.launch(fn, l.grid, l.block, 0, d.stream, args)); err != nil {
		return fmt.Errorf("%s: %w", l.kernel, err)
	}
	return nil
}

// slots appends l's arguments to dst as the kernel reads them: values,
// and the device addresses of bufs (the inputs then the output).
func (l *launch) slots(dst []uint64, bufs []*buffer) []uint64 {
	for _, a := range l.args() {
		switch a.buf {
		case argValue:
			dst = append(dst, a.val)
		case argOut:
			dst = append(dst, uint64(bufs[len(bufs)-1].ptr))
		default:
			dst = append(dst, uint64(bufs[a.buf].ptr))
		}
	}
	return dst
}
