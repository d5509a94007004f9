package executor

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/weightcache"
)

// ErrBudget marks a weight that does not fit in a backend's weight budget
// (Config.WeightBudget): Preload and Pin fail with it.
var ErrBudget = errors.New("executor: weight budget exceeded")

// weightCache is the Executor's record of the weights (MarkWeight): the
// bytes of weight copies held on each backend, pinned or cached, and for
// each backend with a budget (Config.WeightBudget) the rule that decides
// which weights are worth their bytes there (weightcache, shared with the
// simulator's policies). Its lock is taken after tensor locks; it only
// TryLocks other tensors.
type weightCache struct {
	mu     sync.Mutex
	n      int       // weights marked: a pass over them is the cache's step
	ws     []*Tensor // the weights marked, by their rule id (weightUse.id)
	tick   int64     // weight uses so far
	bytes  [adaptive.MaxBackends]int64
	pinned [adaptive.MaxBackends]int64
	budget [adaptive.MaxBackends]int64 // < 0: no budget
	rule   [adaptive.MaxBackends]*weightcache.Cache
	evict  []int       // the last admission's victims
	held   atomic.Bool // HoldWeights: the caches keep what they hold
	regime int         // WeighFor's
}

// weightUse is a weight's cache identity (Tensor, under the cache's lock).
type weightUse struct {
	id  int           // dense index for the rule
	pin adaptive.Mask // backends where its copy is pinned
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
		e.weighs = e.weighs || b >= 0
	}
	return nil
}

// MarkWeight makes b a weight (before any op uses it): its home is host memory (its host copy
// stays valid; one never written holds zeros there), ops may read it but
// not write it, and copies of it on a
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
	if t.unwritten() {
		// Its home is host memory, zeros as zeroFill gives: left
		// unwritten, an op gave it a fresh device copy outside the
		// budget's count (TestUnwrittenWeightCounts).
		t.host = allocHost(t.size)
		t.valid = adaptive.Host | e.alias
		t.newVersion()
		t.version++
	}
	if !t.weight.Load() {
		e.wc.mu.Lock()
		t.wuse.id = e.wc.n
		e.wc.n++
		e.wc.ws = append(e.wc.ws, t)
		e.wc.mu.Unlock()
		t.weight.Store(true)
	}
	return nil
}

// Preload copies weight b into backend a's cache now, as a loader
// placing layers on a device (llama.cpp's -ngl); the cache may later
// evict it for weights used more. Pin does the same and keeps the copy
// for good. Both fail with ErrBudget when b does not fit beside what is
// pinned and cached there.
func (e *Executor) Preload(b backends.Buffer, a int) error { return e.preload(b, a, false) }

// Pin is Preload of a copy that is never evicted, not even when the
// backend runs out of memory; on a backend without a weight budget too.
// Pins are placed before the cache is in use: Pin of a weight already
// cached on a (by Preload or an op) fails with ErrBudget; Pin of one
// pinned there already is a no-op. On a backend that works on the host
// copy in place (a CPU), Preload and Pin are no-ops: that copy is its
// own, never evicted, and WeightBytes counts none there.
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
	if e.closed.Load() {
		// Close has freed every copy: one made now would never be freed
		// (TestPreloadAfterClose).
		return &backends.DeviceError{Backend: e.cfg.Name, Op: "preload", Err: fmt.Errorf("executor: Preload after Close: %w", adaptive.ErrClosed)}
	}
	if pin && t.copies[a] != nil && !e.pinnedOn(t, a) {
		// Its copy there is the cache's: pinning it in place would leave
		// it to the rule, which later evicted it (TestPinAfterPreloadKeeps).
		return &backends.DeviceError{Backend: e.s.BackendName(a), Op: "pin",
			Err: fmt.Errorf("%w: tensor %d is cached there: pins are placed before the cache is in use", ErrBudget, t.id)}
	}
	if t.copies[a] == nil {
		if !e.preloadFits(t, a, pin) {
			return &backends.DeviceError{Backend: e.s.BackendName(a), Op: "preload",
				Err: fmt.Errorf("%w: %d bytes beside %d of %d", ErrBudget, t.size, e.weightBytes(a), e.wc.budget[a])}
		}
		c, err := e.bes[a].Alloc(t.size)
		if err != nil {
			e.unreserve(t, a)
			return &backends.DeviceError{Backend: e.s.BackendName(a), Op: "preload", Err: err}
		}
		t.copies[a] = c
		e.register(t, a)
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

// pinnedOn reports whether t is a weight pinned on backend a (Pin).
func (e *Executor) pinnedOn(t *Tensor, a int) bool {
	if !t.weight.Load() {
		return false
	}
	e.wc.mu.Lock()
	defer e.wc.mu.Unlock()
	return t.wuse.pin.Has(a)
}

// isWeight reports whether t is a weight.
func (t *Tensor) isWeight() bool { return t.weight.Load() }

// weightBytes returns the bytes of weight copies held on backend a.
func (e *Executor) weightBytes(a int) int64 {
	e.wc.mu.Lock()
	defer e.wc.mu.Unlock()
	return e.wc.bytes[a]
}

// unreserve gives back the room reserved for weight t on backend a, whose
// copy could not be made.
func (e *Executor) unreserve(t *Tensor, a int) {
	e.unregisterWeight(t, adaptive.Backend(a))
}

// ticked marks, in an op's counted mask of a weight, that the use has
// ticked the caches' clock; a backend's bit, that its cache counted it.
// Rule: an op's use of a weight counts once in the clock and in each
// cache, whatever its retries, re-runs or recomputations. Reason: each
// try counted it again, so a failure aged every weight and doubled the
// use where the retry ran (TestRetryCountsWeightOnce).
const ticked = adaptive.Host

// allCounted is the counted mask of an op whose uses were counted before
// (a re-run by the recovery, or a recomputation).
const allCounted = ^adaptive.Mask(0)

// touchWeight counts one use of weight t by an op on backend a (t.mu
// held) where u, the op's counted mask of t, has not: a tick of the
// caches' clock, and a use in a's cache when t is held there (hitLocked).
func (e *Executor) touchWeight(t *Tensor, a int, u *adaptive.Mask) {
	e.wc.mu.Lock()
	if *u&ticked == 0 {
		e.wc.tick++
		*u |= ticked
	}
	if t.copies[a] != nil && !u.Has(a) {
		e.hitLocked(t, a, 0)
		*u |= adaptive.Backend(a)
	}
	e.wc.mu.Unlock()
}

// step is the weight cache's clock (wc.mu held): passes over the marked
// weights, about one per decode step of a model.
func (e *Executor) step() float64 { return float64(e.wc.tick) / float64(max(e.wc.n, 1)) }

// preloadFits reserves room for weight t on backend a for Preload or Pin:
// a pin beside the other pins (before the cache is in use); a preload in
// the room left beside what is pinned and cached, never in place of a
// cached weight, admitted by the rule as a copy an op makes (admit, which
// drops any weight the rule evicts for it). Rule: Preload keeps the
// budget as ops do. Reason: admitted alone, the rule's evictions left
// their copies in place, past the budget (TestPreloadBesideCache).
func (e *Executor) preloadFits(t *Tensor, a int, pin bool) bool {
	e.wc.mu.Lock()
	if pin {
		defer e.wc.mu.Unlock()
		return e.admitLocked(t, a, true, true, 0)
	}
	room := e.wc.budget[a] < 0 || e.wc.bytes[a]+t.size <= e.wc.budget[a]
	e.wc.mu.Unlock()
	return room && e.admit(t, a, nil, true, 0)
}

// admitLocked reserves room for weight t on backend a (wc.mu held): a
// pinned copy takes free room outside the rule; otherwise the rule admits
// it (copied: the op copies it there anyway), and the weights it evicts
// are left in e.wc.evict for the caller to drop. Without a budget it
// always fits, and a pin is recorded all the same: unrecorded, Pin
// returned nil and an out of memory evicted the copy
// (TestPinWithoutBudget).
func (e *Executor) admitLocked(t *Tensor, a int, pin, copied bool, savedUs float64) bool {
	budget := e.wc.budget[a]
	switch {
	case pin:
		if budget >= 0 && (e.wc.rule[a] != nil || e.wc.pinned[a]+t.size > budget) {
			return false // pins are placed before the cache is in use
		}
		e.wc.pinned[a] += t.size
		t.wuse.pin |= adaptive.Backend(a)
	case budget < 0:
	default:
		if e.wc.rule[a] == nil {
			r, err := weightcache.New(budget-e.wc.pinned[a], weightcache.Options{})
			if err != nil || r.SetRegime(e.wc.regime) != nil {
				return false
			}
			e.wc.rule[a] = r
		}
		copyUs := max(e.s.PredictTransfer(e.s.BackendName(a), true, t.size), 1e-3)
		plan, err := e.wc.rule[a].Use(weightcache.Weight{ID: t.wuse.id, Bytes: t.size, CopyUs: copyUs, SavedUs: savedUs}, e.step(), copied)
		if err != nil || !plan.Admit {
			return false
		}
		e.wc.evict = append(e.wc.evict[:0], plan.Evict...)
	}
	e.wc.bytes[a] += t.size
	return true
}

// cacheable reports whether an op on backend a should keep the copy of
// weight t it makes (t.mu held, t has no copy on a): yes without a
// budget; with one, when the rule admits it, the weights it evicts for
// it freed here (idle ones; skip are the op's own tensors). When one
// cannot be freed now (queued work still uses it, another op holds it,
// or its copy is still being made), t is not kept and the rule is told
// the victim stayed. A cache that counted the op's use already (u, an
// earlier try) is not asked again: t is not kept.
func (e *Executor) cacheable(t *Tensor, a int, skip []*Tensor, u *adaptive.Mask) bool {
	if e.wc.budget[a] >= 0 {
		if e.wc.held.Load() || u.Has(a) {
			return false
		}
		*u |= adaptive.Backend(a)
	}
	return e.admit(t, a, skip, true, 0)
}

// admit is cacheable for a copy the op makes (copied), or one the rule
// may want for its own sake, a resident use saving savedUs.
func (e *Executor) admit(t *Tensor, a int, skip []*Tensor, copied bool, savedUs float64) bool {
	e.wc.mu.Lock()
	ok := e.admitLocked(t, a, false, copied, savedUs)
	var victims []int
	if ok {
		victims = append(victims, e.wc.evict...)
	}
	e.wc.evict = e.wc.evict[:0]
	e.wc.mu.Unlock()
	if !ok || len(victims) == 0 {
		return ok
	}
	// Victims are found by their rule id, not among the copies registered
	// on a: one admitted whose copy is still being made is not registered
	// yet, and taken for dropped it kept its copy beside t's, past the
	// budget. It stays instead (TestConcurrentAdmitKeepsBudget).
	e.wc.mu.Lock()
	xs := make([]*Tensor, len(victims))
	for i, id := range victims {
		xs[i] = e.wc.ws[id]
	}
	e.wc.mu.Unlock()
	var kept []*Tensor
	for _, x := range xs {
		if !containsTensor(skip, x) && e.dropWeightCopy(x, a) {
			continue
		}
		kept = append(kept, x)
	}
	if len(kept) == 0 {
		return true
	}
	// t gives its room back to the victims that stayed, which the rule
	// counts resident again (with one more use).
	e.wc.mu.Lock()
	defer e.wc.mu.Unlock()
	e.wc.rule[a].Invalidate(t.wuse.id)
	e.wc.bytes[a] -= t.size
	for _, x := range kept {
		copyUs := max(e.s.PredictTransfer(e.s.BackendName(a), true, x.size), 1e-3)
		_, _ = e.wc.rule[a].Use(weightcache.Weight{ID: x.wuse.id, Bytes: x.size, CopyUs: copyUs}, e.step(), true)
	}
	return false
}

// dropWeightCopy frees weight x's copy on backend a when no queued work
// uses x, its lock is free and the copy is made, and reports whether it
// did. Its host copy stays valid: nothing is read back.
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
		if !held.Has(a) {
			continue
		}
		e.wc.bytes[a] -= t.size
		if t.wuse.pin.Has(a) {
			e.wc.pinned[a] -= t.size
			t.wuse.pin &^= adaptive.Backend(a)
		} else if r := e.wc.rule[a]; r != nil {
			r.Invalidate(t.wuse.id)
		}
	}
	e.wc.mu.Unlock()
}

// hitWeight counts a use of weight t, held on backend a, in a's cache (t.mu
// held): saving savedUs there, 0 for its copy's time (a use on a). Every
// use counts where the weight is held, as where it is not: counted only
// where it was not, a held weight's worth decayed while the others' grew,
// and the cache traded them in turn (TestWeightHitsCount).
func (e *Executor) hitWeight(t *Tensor, a int, savedUs float64) {
	e.wc.mu.Lock()
	defer e.wc.mu.Unlock()
	e.hitLocked(t, a, savedUs)
}

// hitLocked is hitWeight with wc.mu held.
func (e *Executor) hitLocked(t *Tensor, a int, savedUs float64) {
	r := e.wc.rule[a]
	if r == nil || t.wuse.pin.Has(a) || !r.Resident(t.wuse.id) {
		return
	}
	copyUs := max(e.s.PredictTransfer(e.s.BackendName(a), true, t.size), 1e-3)
	_, _ = r.Use(weightcache.Weight{ID: t.wuse.id, Bytes: t.size, CopyUs: copyUs, SavedUs: savedUs}, e.step(), true)
}

// HoldWeights holds the weight caches (hold true) or lets them trade
// again. While held, each cache keeps what it holds: no weight is copied
// in for its own sake, and a copy an op makes is staged for that op and
// dropped, as one the rule refuses; the uses of the copies it holds still
// count. A caller whose steps run each op where its weights live (the
// llamacpp rule) holds them, so that those steps place their ops on one
// set of copies instead of trading copies under them
// (TestHoldWeightsKeepsCopies).
func (e *Executor) HoldWeights(hold bool) { e.wc.held.Store(hold) }

// WeighFor tells the weight caches how the caller places ops from now
// on, a regime it names in [0, weightcache.MaxRegimes) (0 until it is
// called): each weighs what a resident use saves by the uses in that
// regime (weightcache.Cache.SetRegime). A caller that places its steps
// in a few ways as a whole (cmd/infer's step modes) names each, so that
// one placement's caches are not judged by another's savings
// (TestWeighForRegime). A regime outside the range is an error, and
// changes nothing.
func (e *Executor) WeighFor(regime int) error {
	if regime < 0 || regime >= weightcache.MaxRegimes {
		return fmt.Errorf("executor: weight regime %d, not in [0, %d): %w", regime, weightcache.MaxRegimes, weightcache.ErrInvalid)
	}
	e.wc.mu.Lock()
	defer e.wc.mu.Unlock()
	e.wc.regime = regime
	for _, r := range e.wc.rule {
		if r != nil {
			_ = r.SetRegime(regime) // in range: checked above
		}
	}
	return nil
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
	for _, c := range r.copiesOf() {
		if c.staging && c.dev != nil {
			c.dev.Free()
			c.dev = nil
		}
	}
}

// dropStaged frees the staging buffers of op r that was not queued, once
// their copies have completed, and forgets r's copies.
func (e *Executor) dropStaged(r *rec) {
	for _, c := range r.copiesOf() {
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
// ensureOn. u is the op's counted mask of t.
func (e *Executor) stageSync(t *Tensor, a int, ts []*Tensor, u *adaptive.Mask) (backends.Buffer, float64, error) {
	if !t.weight.Load() {
		return nil, 0, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e.touchWeight(t, a, u)
	if t.freed || t.valid.Has(a) || e.alias.Has(a) || t.valid&adaptive.Host == 0 {
		return nil, 0, nil
	}
	if t.copies[a] == nil && e.cacheable(t, a, ts, u) {
		c, err := e.bes[a].Alloc(t.size)
		if err != nil {
			e.unreserve(t, a)
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

// ownSake offers weight t, read by an op placed by d, to the cache of
// every other backend with a budget that lacks it (t.mu held): the use
// counts toward its worth there, and the rule may want it kept there for
// its own sake, each resident use saving what d's estimates say (the
// chosen arm's cost less that arm's with the copy of t taken off),
// except the caches that counted the op's use already (u, its counted
// mask of t). It returns the backends that admitted it: the caller
// copies it in.
func (e *Executor) ownSake(t *Tensor, d *adaptive.Decision, skip []*Tensor, u *adaptive.Mask) adaptive.Mask {
	var in adaptive.Mask
	held := e.wc.held.Load()
	for b := range e.bes {
		if b == d.Backend || e.wc.budget[b] < 0 || e.alias.Has(b) || !(d.Estimates[b] > 0) || (held && t.copies[b] == nil) || u.Has(b) {
			continue
		}
		*u |= adaptive.Backend(b)
		copyUs := e.s.PredictTransfer(e.s.BackendName(b), true, t.size)
		saved := d.Estimates[d.Backend] - (d.Estimates[b] - copyUs)
		if !(saved > 0) {
			saved = 1e-9 // nothing saved: the use counts, no copy is wanted
		}
		if t.copies[b] != nil {
			e.hitWeight(t, b, saved)
			continue
		}
		if e.admit(t, b, skip, false, saved) {
			in |= adaptive.Backend(b)
		}
	}
	return in
}

// copyForOwnSake queues the copies of weight t that other backends' caches
// want for its own sake (ownSake; t.mu held). A copy that cannot be made
// gives its room back: the op does not need it.
func (e *Executor) copyForOwnSake(t *Tensor, d *adaptive.Decision, ts []*Tensor, u *adaptive.Mask) {
	in := e.ownSake(t, d, ts, u)
	for b := range e.bes {
		if !in.Has(b) {
			continue
		}
		if _, err := e.copyToDevice(t, b); err != nil && t.copies[b] == nil {
			e.unreserve(t, b)
		}
	}
}

// copyForOwnSakeSync is copyForOwnSake in the synchronous path, after the
// op: each wanted copy made at once. us are the op's counted masks.
func (e *Executor) copyForOwnSakeSync(ts []*Tensor, d *adaptive.Decision, us *[adaptive.MaxInputs]adaptive.Mask) {
	for i, t := range ts {
		if !t.weight.Load() {
			continue
		}
		t.mu.Lock()
		in := e.ownSake(t, d, ts, &us[i])
		for b := range e.bes {
			if in.Has(b) {
				e.copyInSync(t, b)
			}
		}
		t.mu.Unlock()
	}
}
