package executor

import (
	"fmt"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// lineage is the op that produced a tensor's current version: enough to
// recompute it when its only copy was lost with a device. Its slices are
// reused across writes, so that recording it does not allocate.
type lineage struct {
	ok     bool
	spec   kernels.Spec
	dims   []int
	shapes []kernels.Shape
	in     []*Tensor
	vers   []uint64
}

// setLineage records s and its inputs' versions as what produced o's
// current version (o.mu held; inputs read-locked, or o itself).
func (o *Tensor) setLineage(s kernels.Spec, ts []*Tensor) {
	l := &o.lin
	l.ok = true
	for _, t := range ts {
		if t == o { // computed from its own previous version: not recomputable
			l.ok = false
			return
		}
	}
	l.dims = l.dims[:0]
	for _, sh := range s.In {
		l.dims = append(l.dims, sh...)
	}
	l.shapes = l.shapes[:0]
	off := 0
	for _, sh := range s.In {
		l.shapes = append(l.shapes, kernels.Shape(l.dims[off:off+len(sh):off+len(sh)]))
		off += len(sh)
	}
	l.spec = kernels.Spec{Op: s.Op, DType: s.DType, In: l.shapes, Params: s.Params}
	l.in = append(l.in[:0], ts...)
	l.vers = l.vers[:0]
	for _, t := range ts {
		l.vers = append(l.vers, t.version)
	}
}

// recover recomputes t, whose every copy was lost, by running the op of
// its lineage again on a healthy backend; the inputs are recovered first
// if they were lost too. It fails with ErrTensorLost when t has no
// lineage (the host wrote it) or an input has changed or been freed since.
func (e *Executor) recover(t *Tensor, depth int) error {
	t.mu.Lock()
	if t.valid != 0 {
		t.mu.Unlock()
		return nil
	}
	if !t.lin.ok || t.freed {
		t.mu.Unlock()
		return fmt.Errorf("%w: tensor %d (%d bytes) has no other copy and no lineage", ErrTensorLost, t.id, t.size)
	}
	spec := t.lin.spec
	spec.In = make([]kernels.Shape, len(t.lin.shapes))
	for i, sh := range t.lin.shapes {
		spec.In[i] = append(kernels.Shape(nil), sh...)
	}
	ins := make([]backends.Buffer, len(t.lin.in))
	vers := append([]uint64(nil), t.lin.vers...)
	for i, x := range t.lin.in {
		ins[i] = x
	}
	t.mu.Unlock()
	for i, b := range ins {
		x := b.(*Tensor)
		x.mu.RLock()
		ok := !x.freed && x.version == vers[i]
		x.mu.RUnlock()
		if !ok {
			return fmt.Errorf("%w: tensor %d: input %d of its %v was written or freed since", ErrTensorLost, t.id, i, spec.Op)
		}
	}
	if _, err := e.run(spec, ins, t, true, depth+1); err != nil {
		return fmt.Errorf("%w: recomputing tensor %d: %w", ErrTensorLost, t.id, err)
	}
	e.recoveries.Add(1)
	return nil
}
