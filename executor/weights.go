package executor

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
)

// ErrBudget marks a weight that does not fit in a backend's weight budget
// (Config.WeightBudget): Preload and Pin fail with it.
var ErrBudget = errors.New("executor: weight budget exceeded")

// keepMargin is the cache's hysteresis: a weight displaces cached ones
// only when the copy time it is expected to save beats theirs by this
// factor, so that two weights of equal use do not evict each other in
// turn (TestWeightCacheNoThrash).
const keepMargin = 1.25

// weightCache is the Executor's record of the weights (MarkWeight): how
// often each is used, and the bytes of weight copies held on each backend
// with a budget (Config.WeightBudget). Its lock is taken after tensor
// locks; it only TryLocks other tensors.
type weightCache struct {
	mu     sync.Mutex
	n      int   // weights marked: the horizon of use counts
	tick   int64 // weight uses so far
	bytes  [adaptive.MaxBackends]int64
	budget [adaptive.MaxBackends]int64 // < 0: no budget
}

// weightUse is a weight's decayed use count (Tensor, under the cache's
// lock): uses·exp(−age/horizon), the horizon a few passes over the model.
type weightUse struct {
	score float64
	at    int64
	pin   adaptive.Mask // backends where its copy is pinned
}

// initWeights sets the budgets from cfg.WeightBudget.
func (e *Executor) initWeights() error {
	for a := range e.wc.budget {
		e.wc.budget[a] = -1
	}
	if len(e.cfg.WeightBudget) > len(e.bes) {
		return fmt.Errorf("%w: %d weight budgets for %d backends", adaptive.ErrConfig, len(e.cfg.WeightBudget), len(e.bes))
	}
	for a, b := range e.cfg.WeightBudget {
		if b >= 0 && e.alias.Has(a) {
			continue // works on the host copy in place: holds no copies
		}
		e.wc.budget[a] = b
	}
	return nil
}

// MarkWeight makes b a weight (before any op uses it): its home is host memory (its host copy
// stays valid), ops may read it but not write it, and copies of it on a
// backend with a weight budget are kept only while the cache deems them
// worth their bytes; an op placed there otherwise pays the copy into a
// buffer freed after the op. Writing it (Write) drops its device copies.
func (e *Executor) MarkWeight(b backends.Buffer) error {
	t, err := e.tensorOf(b)
	if err != nil {
		return &backends.DeviceError{Backend: e.cfg.Name, Op: "weight", Err: err}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.freed {
		return &backends.DeviceError{Backend: e.cfg.Name, Op: "weight", Err: fmt.Errorf("%w: tensor %d is freed", ErrBadTensor, t.id)}
	}
	for a, c := range t.copies {
		if c != nil && !e.alias.Has(a) {
			return &backends.DeviceError{Backend: e.cfg.Name, Op: "weight",
				Err: fmt.Errorf("%w: tensor %d already has a copy on %s: mark weights before ops use them", ErrBadTensor, t.id, e.s.BackendName(a))}
		}
	}
	if !t.weight.Load() {
		t.weight.Store(true)
		e.wc.mu.Lock()
		e.wc.n++
		e.wc.mu.Unlock()
	}
	return nil
}

// Preload copies weight b into backend a's cache now, as a loader
// placing layers on a device (llama.cpp's -ngl); the cache may later
// evict it for weights used more. Pin does the same and keeps the copy
// for good. Both fail with ErrBudget when b does not fit beside what is
// pinned and cached there.
func (e *Executor) Preload(b backends.Buffer, a int) error { return e.preload(b, a, false) }

// Pin is Preload of a copy that is never evicted.
func (e *Executor) Pin(b backends.Buffer, a int) error { return e.preload(b, a, true) }

func (e *Executor) preload(b backends.Buffer, a int, pin bool) error {
	t, err := e.tensorOf(b)
	if err == nil && (a < 0 || a >= len(e.bes)) {
		err = fmt.Errorf("%w: backend %d of %d", adaptive.ErrUnknownBackend, a, len(e.bes))
	}
	if err != nil {
		return &backends.DeviceError{Backend: e.cfg.Name, Op: "preload", Err: err}
	}
	if !t.isWeight() {
		return &backends.DeviceError{Backend: e.cfg.Name, Op: "preload", Err: fmt.Errorf("%w: tensor %d is not a weight", ErrBadTensor, t.id)}
	}
	if e.alias.Has(a) {
		return nil // its host copy is this backend's
	}
	if !e.cfg.Synchronous {
		if err := e.waitUses(t); err != nil {
			return &backends.DeviceError{Backend: e.cfg.Name, Op: "preload", Err: err}
		}
		defer e.gate.RUnlock()
	} else {
		t.mu.Lock()
	}
	defer t.mu.Unlock()
	if t.copies[a] == nil {
		e.wc.mu.Lock()
		fits := e.wc.budget[a] < 0 || e.wc.bytes[a]+t.size <= e.wc.budget[a]
		if fits {
			e.wc.bytes[a] += t.size // reserved before the copy is made
		}
		e.wc.mu.Unlock()
		if !fits {
			return &backends.DeviceError{Backend: e.s.BackendName(a), Op: "preload",
				Err: fmt.Errorf("%w: %d bytes beside %d of %d", ErrBudget, t.size, e.weightBytes(a), e.wc.budget[a])}
		}
		c, err := e.bes[a].Alloc(t.size)
		if err != nil {
			e.unreserve(a, t.size)
			return &backends.DeviceError{Backend: e.s.BackendName(a), Op: "preload", Err: err}
		}
		t.copies[a] = c
		e.register(t, a)
	}
	if pin {
		e.wc.mu.Lock()
		t.wuse.pin |= adaptive.Backend(a)
		e.wc.mu.Unlock()
	}
	if !t.valid.Has(a) {
		tm, err := e.bes[a].Write(t.copies[a], t.host)
		if err != nil {
			return &backends.DeviceError{Backend: e.s.BackendName(a), Op: "preload", Err: err}
		}
		e.observeCopy(a, true, t.size, tm)
		t.valid |= adaptive.Backend(a)
		t.ready[e.loc(a)] = nil
	}
	return nil
}

// isWeight reports whether t is a weight.
func (t *Tensor) isWeight() bool { return t.weight.Load() }

// weightBytes returns the bytes of weight copies held on backend a.
func (e *Executor) weightBytes(a int) int64 {
	e.wc.mu.Lock()
	defer e.wc.mu.Unlock()
	return e.wc.bytes[a]
}

// unreserve gives back bytes of backend a's budget.
func (e *Executor) unreserve(a int, bytes int64) {
	e.wc.mu.Lock()
	e.wc.bytes[a] -= bytes
	e.wc.mu.Unlock()
}

// touchWeight counts one use of weight t by an op (t.mu held).
func (e *Executor) touchWeight(t *Tensor) {
	e.wc.mu.Lock()
	e.wc.tick++
	t.wuse.score = e.decayed(t) + 1
	t.wuse.at = e.wc.tick
	e.wc.mu.Unlock()
}

// decayed returns t's use count now (wc.mu held): halved every few passes
// over the model's weights, so that the cache follows a drifting use
// (experts' popularity) without forgetting a pass's worth of uses.
func (e *Executor) decayed(t *Tensor) float64 {
	horizon := 4 * float64(max(e.wc.n, 1))
	return t.wuse.score * math.Exp(-float64(e.wc.tick-t.wuse.at)/horizon)
}

// worth returns the copy µs that keeping weight t on backend a is
// expected to save (wc.mu held): its use count times the learned link
// model's time to copy it there.
func (e *Executor) worth(t *Tensor, a int) float64 {
	return e.decayed(t) * max(e.s.PredictTransfer(e.s.BackendName(a), true, t.size), 1e-3)
}

// cacheable reports whether an op on backend a should keep the copy of
// weight t it makes (t.mu held, t has no copy on a): yes without a
// budget; with one, when it fits, or when evicting the cached weights of
// least worth per byte (idle, unpinned, not among the op's tensors skip)
// frees room and t's worth beats theirs by keepMargin. Those evicted are
// freed here; the room is reserved for t.
func (e *Executor) cacheable(t *Tensor, a int, skip []*Tensor) bool {
	e.wc.mu.Lock()
	budget := e.wc.budget[a]
	if budget < 0 || e.wc.bytes[a]+t.size <= budget {
		e.wc.bytes[a] += t.size
		e.wc.mu.Unlock()
		return true
	}
	need := e.wc.bytes[a] + t.size - budget
	gain := e.worth(t, a)
	e.wc.mu.Unlock()
	if t.size > budget {
		return false
	}
	type cand struct {
		t     *Tensor
		worth float64
	}
	var cands []cand
	e.wc.mu.Lock()
	for _, x := range e.residentOn(a) {
		if x == t || !x.weight.Load() || x.wuse.pin.Has(a) || containsTensor(skip, x) {
			continue
		}
		cands = append(cands, cand{x, e.worth(x, a)})
	}
	e.wc.mu.Unlock()
	sort.Slice(cands, func(i, j int) bool {
		return cands[i].worth/float64(cands[i].t.size) < cands[j].worth/float64(cands[j].t.size)
	})
	var pick []*Tensor
	var freed int64
	var loss float64
	for _, c := range cands {
		if freed >= need {
			break
		}
		pick = append(pick, c.t)
		freed += c.t.size
		loss += c.worth
	}
	if freed < need || gain <= keepMargin*loss {
		return false
	}
	for _, x := range pick {
		if !e.dropWeightCopy(x, a) {
			return false // busy or contended: try again at its next use
		}
	}
	e.wc.mu.Lock()
	ok := e.wc.bytes[a]+t.size <= budget
	if ok {
		e.wc.bytes[a] += t.size
	}
	e.wc.mu.Unlock()
	return ok
}

// dropWeightCopy frees weight x's copy on backend a when no queued work
// uses x and its lock is free, and reports whether it did. Its host copy
// stays valid: nothing is read back.
func (e *Executor) dropWeightCopy(x *Tensor, a int) bool {
	if !x.mu.TryLock() {
		return false
	}
	if x.busy() || x.copies[a] == nil {
		x.mu.Unlock()
		return false
	}
	x.copies[a].Free()
	x.copies[a] = nil
	x.valid &^= adaptive.Backend(a)
	x.ready[e.loc(a)] = nil
	x.mu.Unlock()
	e.unregister(x, adaptive.Backend(a))
	e.evictions.Add(1)
	return true
}

// dropWeightCopies frees weight t's unpinned device copies (t.mu held, no
// queued work uses t): its host copy was written.
func (e *Executor) dropWeightCopies(t *Tensor) {
	e.wc.mu.Lock()
	pin := t.wuse.pin
	e.wc.mu.Unlock()
	var held adaptive.Mask
	for a, c := range t.copies {
		if c != nil && !e.alias.Has(a) && !pin.Has(a) {
			c.Free()
			t.copies[a] = nil
			held |= adaptive.Backend(a)
		}
	}
	e.unregister(t, held)
}

// unregisterWeight gives back the budget of weight t's copies on the
// backends in held (called as they are unregistered).
func (e *Executor) unregisterWeight(t *Tensor, held adaptive.Mask) {
	e.wc.mu.Lock()
	for a := range e.bes {
		if held.Has(a) {
			e.wc.bytes[a] -= t.size
		}
	}
	e.wc.mu.Unlock()
}

// WeightBytes returns the bytes of weight copies the Executor holds on
// each backend (Config.Backends order).
func (e *Executor) WeightBytes() []int64 {
	e.wc.mu.Lock()
	defer e.wc.mu.Unlock()
	return append([]int64(nil), e.wc.bytes[:len(e.bes)]...)
}

// stageWeight queues the copy of weight t's host copy into a buffer of
// its own on backend a, for one op (t.mu held; the host copy is valid):
// after the host copy is written; a later Write waits for it.
func (e *Executor) stageWeight(t *Tensor, a int) (*rec, error) {
	buf, err := e.bes[a].Alloc(t.size)
	if err != nil {
		return nil, &backendFailure{a: a, err: err}
	}
	c := &rec{a: a, t: t, toDevice: true, staging: true}
	c.dep(t.ready[hostLoc])
	c.dev, c.host = buf, t.host
	if err := e.enqueue(c); err != nil {
		buf.Free()
		return nil, &backendFailure{a: a, err: err}
	}
	t.use(hostLoc, c)
	return c, nil
}

// freeStaged frees the staging buffers of op r, which has completed.
func (r *rec) freeStaged() {
	for _, c := range r.copies {
		if c.staging && c.dev != nil {
			c.dev.Free()
			c.dev = nil
		}
	}
}

// dropStaged frees the staging buffers of op r that was not queued, once
// their copies have completed, and forgets r's copies.
func (e *Executor) dropStaged(r *rec) {
	for _, c := range r.copies {
		if c.staging {
			e.await(c)
		}
	}
	r.freeStaged()
	r.copies = nil
}

// stageSync makes weight t available to an op on backend a in the
// synchronous path: a copy kept in the cache (then it returns nil and
// ensureOn finds it valid), or a buffer of its own for this op alone,
// which the caller frees after the op. It returns the copy's µs. A
// tensor that is not a weight, or that a has already, is left to
// ensureOn.
func (e *Executor) stageSync(t *Tensor, a int, ts []*Tensor) (backends.Buffer, float64, error) {
	if !t.weight.Load() {
		return nil, 0, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e.touchWeight(t)
	if t.freed || t.valid.Has(a) || e.alias.Has(a) || t.valid&adaptive.Host == 0 {
		return nil, 0, nil
	}
	if t.copies[a] == nil && e.cacheable(t, a, ts) {
		c, err := e.bes[a].Alloc(t.size)
		if err != nil {
			e.unreserve(a, t.size)
			return nil, 0, &backendFailure{a: a, err: err}
		}
		t.copies[a] = c
		e.register(t, a)
	}
	dst := t.copies[a]
	if dst == nil {
		var err error
		if dst, err = e.bes[a].Alloc(t.size); err != nil {
			return nil, 0, &backendFailure{a: a, err: err}
		}
	}
	tm, err := e.bes[a].Write(dst, t.host)
	if err != nil {
		if dst != t.copies[a] {
			dst.Free()
		}
		return nil, 0, &backendFailure{a: a, err: err}
	}
	e.observeCopy(a, true, t.size, tm)
	if dst == t.copies[a] {
		t.valid |= adaptive.Backend(a)
		return nil, tm.Micros(), nil
	}
	return dst, tm.Micros(), nil
}
