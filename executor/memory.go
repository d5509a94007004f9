package executor

import (
	"sync"

	"github.com/adaptsched/adaptsched/adaptive"
)

// registry is where tensors hold buffers: what eviction frees and a lost
// device drops.
type registry struct {
	mu       sync.Mutex
	resident [adaptive.MaxBackends]map[*Tensor]struct{} // tensors with a buffer on each backend
}

// init makes the sets of n backends.
func (r *registry) init(n int) {
	for a := range n {
		r.resident[a] = map[*Tensor]struct{}{}
	}
}

// register notes that t holds a buffer on backend a.
func (e *Executor) register(t *Tensor, a int) {
	e.res.mu.Lock()
	e.res.resident[a][t] = struct{}{}
	e.res.mu.Unlock()
}

// unregister forgets t's buffers on the backends in held.
func (e *Executor) unregister(t *Tensor, held adaptive.Mask) {
	if held == 0 {
		return
	}
	e.res.mu.Lock()
	for a := range e.bes {
		if held.Has(a) {
			delete(e.res.resident[a], t)
		}
	}
	e.res.mu.Unlock()
}

// residentOn returns the tensors holding a buffer on backend a.
func (e *Executor) residentOn(a int) []*Tensor {
	e.res.mu.Lock()
	defer e.res.mu.Unlock()
	out := make([]*Tensor, 0, len(e.res.resident[a]))
	for t := range e.res.resident[a] {
		out = append(out, t)
	}
	return out
}

// evict frees the copies on backend a of every tensor that the current op
// does not use and that no other op holds, reading a copy to host memory
// first when it is the tensor's only valid one. It returns the bytes
// freed.
func (e *Executor) evict(a int, ts []*Tensor, o *Tensor) int64 {
	var freed int64
	for _, t := range e.residentOn(a) {
		if t == o || containsTensor(ts, t) || !t.mu.TryLock() {
			continue
		}
		c := t.copies[a]
		if c == nil {
			t.mu.Unlock()
			continue
		}
		if t.valid == adaptive.Backend(a) {
			if t.host == nil {
				t.host = allocHost(t.size)
			}
			tm, err := e.bes[a].Read(t.host, c)
			if err != nil {
				t.mu.Unlock()
				continue // keep the only copy
			}
			e.observeCopy(a, false, t.size, tm)
			t.valid |= adaptive.Host | e.alias
		}
		c.Free()
		t.copies[a] = nil
		t.valid &^= adaptive.Backend(a)
		t.mu.Unlock()
		e.unregister(t, adaptive.Backend(a))
		e.evictions.Add(1)
		freed += t.size
	}
	return freed
}

func containsTensor(ts []*Tensor, t *Tensor) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// dropCopies frees every tensor's copy on backend a, marks it invalid and
// returns how many copies it dropped.
func (e *Executor) dropCopies(a int) int64 {
	var n int64
	for _, t := range e.residentOn(a) {
		t.mu.Lock()
		if c := t.copies[a]; c != nil {
			c.Free()
			t.copies[a] = nil
			t.valid &^= adaptive.Backend(a)
			n++
		}
		t.mu.Unlock()
		e.unregister(t, adaptive.Backend(a))
	}
	return n
}

// invalidate drops every copy on backend a, which was lost: tensors left
// without a valid copy are recomputed when next needed.
func (e *Executor) invalidate(a int) {
	e.invalidated.Add(e.dropCopies(a))
}
