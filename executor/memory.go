package executor

import (
	"sync"

	"github.com/adaptsched/adaptsched/adaptive"
)

// regShards is the number of shards of the residency registry.
const regShards = 16

// registry is where tensors hold buffers of the backends' own: what
// eviction frees and a lost device drops. It is sharded by tensor id, so
// that ops placing or freeing distinct tensors rarely share a lock; a
// lookup by backend (residentOn, off the op path) visits every shard.
type registry struct {
	shards [regShards]regShard
}

// regShard is one shard, alone on its cache lines.
type regShard struct {
	mu   sync.Mutex
	held map[*Tensor]adaptive.Mask // the backends where each tensor holds a buffer
	_    [112]byte
}

// init makes the shards' maps.
func (r *registry) init() {
	for i := range r.shards {
		r.shards[i].held = map[*Tensor]adaptive.Mask{}
	}
}

// shardOf returns t's shard.
func (r *registry) shardOf(t *Tensor) *regShard { return &r.shards[t.id%regShards] }

// register notes that t holds a buffer on backend a.
func (e *Executor) register(t *Tensor, a int) {
	sh := e.res.shardOf(t)
	sh.mu.Lock()
	sh.held[t] |= adaptive.Backend(a)
	sh.mu.Unlock()
}

// unregister forgets t's buffers on the backends in held.
func (e *Executor) unregister(t *Tensor, held adaptive.Mask) {
	if held == 0 {
		return
	}
	sh := e.res.shardOf(t)
	sh.mu.Lock()
	held &= sh.held[t]
	if m := sh.held[t] &^ held; m != 0 {
		sh.held[t] = m
	} else {
		delete(sh.held, t)
	}
	sh.mu.Unlock()
	if t.weight.Load() {
		e.unregisterWeight(t, held)
	}
}

// residentOn returns the tensors holding a buffer on backend a.
func (e *Executor) residentOn(a int) []*Tensor {
	var out []*Tensor
	for i := range e.res.shards {
		sh := &e.res.shards[i]
		sh.mu.Lock()
		for t, m := range sh.held {
			if m.Has(a) {
				out = append(out, t)
			}
		}
		sh.mu.Unlock()
	}
	return out
}

// evict frees the copies on backend a of every tensor that the current op
// does not use and that no other op holds, reading a copy to host memory
// first when it is the tensor's only valid one. A weight pinned on a
// keeps its copy, as Pin promises, even when an op runs out of memory
// (TestOutOfMemoryKeepsPinned). It returns the bytes freed.
func (e *Executor) evict(a int, ts []*Tensor, o *Tensor) int64 {
	var freed int64
	for _, t := range e.residentOn(a) {
		if t == o || containsTensor(ts, t) || !t.mu.TryLock() {
			continue
		}
		if t.busy() || e.pinnedOn(t, a) { // queued work still uses it, or pinned
			t.mu.Unlock()
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
