package executor

import (
	"fmt"
	"slices"

	"github.com/adaptsched/adaptsched/adaptive"
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
// current version (o.mu held; inputs read-locked, or o itself). Rule: a
// version written in host memory (by a backend that maps it) records
// none: host memory is not lost with a device, so nothing recomputes
// that version (lostStep reads the lineage of a tensor with no valid
// copy only). Reason: comparing and recording it was a tenth of the
// overhead of an op on the CPU (BenchmarkExecutorOnly).
func (o *Tensor) setLineage(s kernels.Spec, ts []*Tensor) {
	l := &o.lin
	if o.valid&adaptive.Host != 0 {
		l.ok = false
		return
	}
	l.ok = true
	for _, t := range ts {
		if t == o { // computed from its own previous version: not recomputable
			l.ok = false
			return
		}
	}
	if l.holds(&s, ts) { // the same op as last time: only the versions moved
		for i, t := range ts {
			l.vers[i] = t.version
		}
		return
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

// holds reports whether l records op s over inputs ts (whatever their
// versions). Rewriting an unchanged lineage stored every shape and
// pointer again at every op (BenchmarkExecutorOnly).
func (l *lineage) holds(s *kernels.Spec, ts []*Tensor) bool {
	if l.spec.Op != s.Op || l.spec.DType != s.DType || l.spec.Params != s.Params ||
		len(l.shapes) != len(s.In) || len(l.in) != len(ts) {
		return false
	}
	for i, t := range ts {
		if l.in[i] != t {
			return false
		}
	}
	for i, sh := range s.In {
		if !slices.Equal(l.shapes[i], sh) {
			return false
		}
	}
	return true
}

// keptLineage returns a copy of o's lineage for an op about to write o
// (o.mu held; ts its inputs), or nil. Rule: the copy is kept when o's
// current version has a lineage, no copy in host memory, and a reader
// among queued work not yet complete or among ts. Reason: when the op is
// undone (Executor.recoverFailed) that reader may run again and find the
// version lost with its device, to be recomputed from this lineage,
// which the op's own has replaced (TestUndoKeepsLineage); a version
// nothing reads any more needs none, and the copy allocates.
func (o *Tensor) keptLineage(ts []*Tensor) *lineage {
	if !o.lin.ok || o.valid&adaptive.Host != 0 || !containsTensor(ts, o) && !o.readPending() {
		return nil
	}
	return o.lin.clone()
}

// readPending reports whether queued work that reads o's current
// version (other than the work making its copies current) may not have
// completed (o.mu held).
func (o *Tensor) readPending() bool {
	for l := range o.usesOn {
		for _, u := range o.usesOn[l] {
			if u != o.ready[l] && u.live() {
				return true
			}
		}
	}
	return false
}

// savedLineage is a lineage with its own storage for inArrN inputs of
// up to 4 dimensions, so that keeping one allocates once.
type savedLineage struct {
	lin    lineage
	dims   [4 * inArrN]int
	shapes [inArrN]kernels.Shape
	in     [inArrN]*Tensor
	vers   [inArrN]uint64
}

// clone returns a copy of l that shares no storage with it.
func (l *lineage) clone() *lineage {
	c := new(savedLineage)
	c.lin = lineage{ok: l.ok, spec: cloneSpec(l.spec, c.shapes[:0], c.dims[:0]),
		in: append(c.in[:0], l.in...), vers: append(c.vers[:0], l.vers...)}
	c.lin.shapes = c.lin.spec.In
	return &c.lin
}

// maxRecompute bounds the ops one recovery recomputes: the lost chain
// behind an op, walked without recursion.
const maxRecompute = 4096

// errNoCopy marks a tensor found with no valid copy where a copy was
// needed. The op recovers it (Executor.attempt, Read); a recomputation,
// which recovers nothing itself, fails.
var errNoCopy = fmt.Errorf("%w: no valid copy left", ErrTensorLost)

// recover is the one hook through which the Executor recomputes what a
// lost device took (an op's input, or a tensor read, with no valid copy):
// it recomputes t by running the op of its lineage again on a healthy
// backend, and first the lost inputs that op needs, inputs before the ops
// that read them. A freed t is left for its caller to reject. It fails with ErrTensorLost when a
// lost tensor has no lineage (the host wrote it), an input of its op has
// been written or freed since, the chain is longer than maxRecompute ops,
// or a recomputation fails. Each recomputation runs as an op that does not
// recover in turn (run's restore), so recovery never recurses.
func (e *Executor) recover(t *Tensor) error {
	plan, err := recoveryPlan(t)
	if err != nil {
		return err
	}
	for _, st := range plan {
		if st.t.Valid() != 0 {
			continue // another op recovered it meanwhile
		}
		var d adaptive.Decision
		if _, err := e.run(&d, &st.spec, st.in, st.t, true, true, 0, 0); err != nil {
			return fmt.Errorf("%w: recomputing tensor %d: %w", ErrTensorLost, st.t.id, err)
		}
		e.recoveries.Add(1)
	}
	return nil
}

// step is one recomputation: the op of a lost tensor's lineage, copied out
// of the tensor.
type step struct {
	t    *Tensor
	spec kernels.Spec
	in   []backends.Buffer
}

// recoveryPlan returns the recomputations that recover t, if lost, each
// after those of its lost inputs: a depth-first walk of its lineage with
// an explicit stack.
func recoveryPlan(t *Tensor) ([]step, error) {
	type frame struct {
		t    *Tensor
		done *step // t's inputs are planned: emit t
	}
	var plan []step
	stack := []frame{{t: t}}
	seen := map[*Tensor]bool{}
	for len(stack) > 0 {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if f.done != nil {
			plan = append(plan, *f.done)
			continue
		}
		if seen[f.t] {
			continue
		}
		seen[f.t] = true
		st, lost, err := f.t.lostStep()
		if err != nil {
			return nil, err
		}
		if !lost {
			continue
		}
		if len(plan)+len(stack) >= maxRecompute {
			return nil, fmt.Errorf("%w: recomputation of more than %d ops", ErrTensorLost, maxRecompute)
		}
		stack = append(stack, frame{t: f.t, done: &st})
		for _, x := range st.in {
			stack = append(stack, frame{t: x.(*Tensor)})
		}
	}
	return plan, nil
}

// lostStep returns t's recomputation when t has no valid copy (lost is
// false for a tensor with a valid copy, or freed): the op of its lineage,
// once each input is checked to hold still the version that op read.
func (t *Tensor) lostStep() (st step, lost bool, err error) {
	t.mu.RLock()
	if t.valid != 0 || t.freed {
		t.mu.RUnlock()
		return step{}, false, nil
	}
	if !t.lin.ok {
		t.mu.RUnlock()
		if t.zeroFill() { // never written (or copied meanwhile): nothing lost
			return step{}, false, nil
		}
		return step{}, true, fmt.Errorf("%w: tensor %d (%d bytes) has no other copy and no lineage", ErrTensorLost, t.id, t.size)
	}
	st = step{t: t, spec: cloneSpec(t.lin.spec, nil, nil), in: make([]backends.Buffer, len(t.lin.in))}
	vers := append([]uint64(nil), t.lin.vers...)
	for i, x := range t.lin.in {
		st.in[i] = x
	}
	t.mu.RUnlock()
	for i, b := range st.in {
		x := b.(*Tensor)
		x.mu.RLock()
		ok := !x.freed && x.version == vers[i]
		x.mu.RUnlock()
		if !ok {
			return step{}, true, fmt.Errorf("%w: tensor %d: input %d of its %v was written or freed since", ErrTensorLost, t.id, i, st.spec.Op)
		}
	}
	return st, true, nil
}
