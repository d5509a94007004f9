package executor

import (
	"errors"
	"fmt"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/kernels"
)

// Locations of a tensor's copies in its queued-work bookkeeping: one per
// backend, and hostLoc for host memory, which the backends that map it
// (Executor.alias) share.
const (
	hostLoc = adaptive.MaxBackends
	locs    = adaptive.MaxBackends + 1
)

// loc returns the location of backend a's copy of a tensor.
func (e *Executor) loc(a int) int {
	if e.alias.Has(a) {
		return hostLoc
	}
	return a
}

// snapshot returns what queued work changes in t (t.mu held).
func (t *Tensor) snapshot() tensorState {
	return tensorState{valid: t.valid, version: t.version, ready: t.ready}
}

// liveUses returns the queued work that reads or writes any copy of t and
// has not been seen to complete (t.mu held).
func (t *Tensor) liveUses() []*rec {
	var out []*rec
	for i := range t.usesOn {
		for _, r := range t.usesOn[i] {
			if r.live() {
				out = append(out, r)
			}
		}
	}
	return out
}

// busy reports whether queued work that uses t may not have completed
// (t.mu held).
func (t *Tensor) busy() bool {
	for i := range t.usesOn {
		for _, r := range t.usesOn[i] {
			if r.live() {
				return true
			}
		}
	}
	return false
}

// use notes that r reads or writes t's copy at location l (t.mu held).
// The uses seen to complete are dropped when the list has doubled since
// it was last pruned, so that noting a use costs O(1) amortized however
// far the caller has queued ahead (BenchmarkExecutorOverhead/queued).
func (t *Tensor) use(l int, r *rec) {
	u := t.usesOn[l]
	if len(u) >= 2*t.pruned[l]+4 {
		n := 0
		for _, x := range u {
			if x.live() {
				u[n] = x
				n++
			}
		}
		clear(u[n:])
		u = u[:n]
		t.pruned[l] = n
	}
	t.usesOn[l] = append(u, r)
}

// issue queues s on backend d.Backend and returns at once: the copies its
// inputs lack there, then the op, each after the queued work it depends
// on (the writes of what it reads, the reads of what it overwrites, on
// any backend). readyAt is when its inputs are expected ready (ns since
// the epoch) and waitUs the queue wait the decision priced. A failure of
// a backend is a *backendFailure, as from attempt.
func (e *Executor) issue(sc *opScratch, s kernels.Spec, ts []*Tensor, o *Tensor, d *adaptive.Decision, restore bool, readyAt int64, waitUs float32) error {
	a := d.Backend
	r := &rec{op: true, a: a, tk: d.Ticket, restore: restore, out: o, failedN: int32(e.health.failedN[a].Load())}
	if p := d.Estimates[a] - float64(waitUs); p > 0 {
		r.predUs = float32(p)
	}
	for try := 0; ; try++ {
		if try > 0 {
			readyAt = max(readyAt, e.since()) // after a recovery
		}
		n := e.lockSet(sc, ts, o, true)
		err := e.placeInputs(r, d, ts, o, a, &sc.wuses)
		if err == nil {
			err = e.outputOnLocked(o, a)
		}
		if err == nil {
			err = e.queueOp(r, sc, s, ts, o, readyAt)
		}
		clear(o.args[:len(ts)])
		unlockSet(sc, n)
		if err != nil {
			e.dropStaged(r)
		}
		if errors.Is(err, errNoCopy) && !restore && try < maxAttempts {
			// An input lost every copy with a device: recompute it, then
			// place it again.
			if err = e.recoverLost(ts); err == nil {
				continue
			}
		}
		return err
	}
}

// recoverLost recomputes the inputs with no valid copy.
func (e *Executor) recoverLost(ts []*Tensor) error {
	for _, t := range ts {
		if t.Valid() == 0 {
			if err := e.recover(t); err != nil {
				return err
			}
		}
	}
	return nil
}

// placeInputs makes each input valid on backend a, queueing the copies
// that takes, records in r what it waits for, and puts the buffers the
// op reads in o.args (tensors locked). d is r's decision, us the op's
// counted masks.
func (e *Executor) placeInputs(r *rec, d *adaptive.Decision, ts []*Tensor, o *Tensor, a int, us *[adaptive.MaxInputs]adaptive.Mask) error {
	l := e.loc(a)
	for i, t := range ts {
		if t.freed {
			return fmt.Errorf("%w: tensor %d is freed", ErrBadTensor, t.id)
		}
		t.markRead(adaptive.Backend(a))
		weight := t.weight.Load()
		if weight {
			e.touchWeight(t, a, &us[i])
			e.copyForOwnSake(t, d, ts, &us[i])
		}
		if t.unwritten() {
			if err := e.freshOn(t, a); err != nil {
				return err
			}
		}
		if !t.valid.Has(a) {
			if t.valid == 0 {
				return errNoCopy
			}
			if t.valid&adaptive.Host == 0 {
				if err := e.copyToHost(t); err != nil {
					return err
				}
			}
			if !e.alias.Has(a) {
				admit := weight && t.copies[a] == nil
				if admit && !e.cacheable(t, a, ts, &us[i]) {
					c, err := e.stageWeight(t, a)
					if err != nil {
						return err
					}
					r.addCopy(c)
					r.dep(c)
					o.args[i] = c.dev
					continue
				}
				c, err := e.copyToDevice(t, a)
				if err != nil {
					if admit && t.copies[a] == nil {
						e.unreserve(t, a)
					}
					return err
				}
				r.addCopy(c)
			}
		}
		if t.copies[a] == nil {
			if !e.alias.Has(a) {
				return fmt.Errorf("%w: tensor %d valid on %s without a copy there", ErrBadTensor, t.id, e.s.BackendName(a))
			}
			if err := e.mapHost(t, a); err != nil {
				return err
			}
		}
		r.dep(t.ready[l])
		o.args[i] = t.copies[a]
	}
	return nil
}

// copyToHost queues the read of t's copy on a backend into host memory
// (t.mu held; t has a valid device copy): after that copy is written and
// after the queued work that reads the host copy now. A failure to queue
// is a *backendFailure for the source backend, which the caller marks
// failed once it holds no tensor lock: failing a lost device while
// recovering drops its copies, taking every tensor's lock there
// (TestRecoveryMeetsLostDevice).
func (e *Executor) copyToHost(t *Tensor) error {
	j := e.sourceOf(t.valid)
	if t.host == nil {
		t.host = allocHost(t.size)
	}
	c := &rec{a: j, t: t, before: t.snapshot()}
	c.dep(t.ready[j])
	for _, u := range t.usesOn[hostLoc] {
		c.dep(u)
	}
	c.host, c.dev = t.host, t.copies[j]
	if err := e.enqueue(c); err != nil {
		return &backendFailure{a: j, err: err}
	}
	t.valid |= adaptive.Host | e.alias
	t.ready[hostLoc] = c
	t.use(hostLoc, c)
	t.use(j, c)
	return nil
}

// copyToDevice queues the write of t's host copy into its copy on backend
// a, allocating that (t.mu held; the host copy is valid): after the host
// copy is written and after the queued work that uses a's copy now.
func (e *Executor) copyToDevice(t *Tensor, a int) (*rec, error) {
	if t.copies[a] == nil {
		c, err := e.bes[a].Alloc(t.size)
		if err != nil {
			return nil, &backendFailure{a: a, err: err}
		}
		t.copies[a] = c
		e.register(t, a)
	}
	c := &rec{a: a, t: t, toDevice: true, before: t.snapshot()}
	c.dep(t.ready[hostLoc])
	for _, u := range t.usesOn[a] {
		c.dep(u)
	}
	c.dev, c.host = t.copies[a], t.host
	if err := e.enqueue(c); err != nil {
		return nil, &backendFailure{a: a, err: err}
	}
	t.valid |= adaptive.Backend(a)
	t.ready[a] = c
	t.use(a, c)
	t.use(hostLoc, c)
	return c, nil
}

// queueOp queues op r (inputs placed, output allocated, tensors locked)
// after the work that uses the output's copies, and makes it the
// producer of the output's next version.
func (e *Executor) queueOp(r *rec, sc *opScratch, s kernels.Spec, ts []*Tensor, o *Tensor, readyAt int64) error {
	a := r.a
	r.spec = sc.spec
	if r.spec == nil {
		r.spec = ownSpec(s)
	}
	r.in = append(r.inArr[:0], ts...)
	r.bufs = r.bufArr[:0]
	r.bufs = append(r.bufs, o.args[:len(ts)]...)
	for i := range o.usesOn {
		for _, u := range o.usesOn[i] {
			r.dep(u)
		}
	}
	r.before = o.snapshot()
	if !r.restore {
		r.lin = o.keptLineage(ts)
	}
	e.reserve(r, readyAt)
	r.dev = o.copies[a]
	if err := e.enqueue(r); err != nil {
		e.unload(r)
		return &backendFailure{a: a, err: err}
	}
	l := e.loc(a)
	for _, t := range ts {
		if t != o {
			t.use(l, r)
		}
	}
	o.newVersion()
	o.valid = adaptive.Backend(a)
	if e.alias.Has(a) {
		o.valid = adaptive.Host | e.alias
	}
	o.ready = [locs]*rec{}
	o.ready[l] = r
	for i := range o.usesOn {
		clear(o.usesOn[i])
		o.usesOn[i] = o.usesOn[i][:0]
		o.pruned[i] = 0
	}
	o.usesOn[l] = append(o.usesOn[l], r)
	o.endAt, o.endV = r.endAt, r.endV
	if !r.restore {
		o.version++
		o.setLineage(s, ts)
	}
	return nil
}

// specCopy is a queued op's own copy of its spec, for an op whose site
// has no known spec: its storage holds inArrN shapes of up to 4
// dimensions, which every op of the catalogue fits.
type specCopy struct {
	spec   kernels.Spec
	shapes [inArrN]kernels.Shape
	dims   [4 * inArrN]int
}

// ownSpec returns a copy of s with its own input shapes: queued work
// outlives the caller's Spec.
func ownSpec(s kernels.Spec) *kernels.Spec {
	c := new(specCopy)
	c.spec = cloneSpec(s, c.shapes[:0], c.dims[:0])
	return &c.spec
}

// cloneSpec returns s with its input shapes copied into shapes and dims
// (allocated anew when they lack the capacity).
func cloneSpec(s kernels.Spec, shapes []kernels.Shape, dims []int) kernels.Spec {
	n := 0
	for _, sh := range s.In {
		n += len(sh)
	}
	if n > cap(dims) {
		dims = make([]int, 0, n)
	}
	if len(s.In) > cap(shapes) {
		shapes = make([]kernels.Shape, 0, len(s.In))
	}
	shapes = shapes[:len(s.In)]
	for i, sh := range s.In {
		dims = append(dims, sh...)
		shapes[i] = kernels.Shape(dims[len(dims)-len(sh) : len(dims) : len(dims)])
	}
	s.In = shapes
	return s
}

// waitUses waits, holding no lock, until the queued work using t has
// completed, recovering failures on the way; then it returns with t.mu
// and the gate's read lock held, t not freed, and no queued work using
// t (t may be written or freed). A freed t is ErrBadTensor.
func (e *Executor) waitUses(t *Tensor) error {
	for {
		if e.pendingFail.Load() {
			e.recoverFailed()
		}
		e.gate.RLock()
		t.mu.Lock()
		if t.freed {
			t.mu.Unlock()
			e.gate.RUnlock()
			return fmt.Errorf("%w: tensor %d is freed", ErrBadTensor, t.id)
		}
		uses := t.liveUses()
		if len(uses) == 0 {
			return nil
		}
		t.mu.Unlock()
		e.gate.RUnlock()
		for _, u := range uses {
			e.await(u)
		}
	}
}

// readQueued is Read with queued work: it waits for the work producing
// t's current version (queueing its copy into host memory when t has
// none), then copies it out.
func (e *Executor) readQueued(dst []byte, t *Tensor) error {
	for range maxAttempts + 1 {
		if e.pendingFail.Load() {
			e.recoverFailed()
		}
		e.gate.RLock()
		if e.closed.Load() {
			e.gate.RUnlock()
			return fmt.Errorf("executor: Read after Close: %w", adaptive.ErrClosed)
		}
		t.mu.Lock()
		if t.freed {
			t.mu.Unlock()
			e.gate.RUnlock()
			return fmt.Errorf("%w: Read of freed tensor %d", ErrBadTensor, t.id)
		}
		var err error
		if t.valid&adaptive.Host == 0 {
			if t.valid == 0 {
				err = errNoCopy
			} else {
				err = e.copyToHost(t)
			}
		}
		r := t.ready[hostLoc]
		if err == nil && !r.live() {
			copy(dst, t.host)
			t.markRead(adaptive.Host)
			t.mu.Unlock()
			e.gate.RUnlock()
			return nil
		}
		t.mu.Unlock()
		e.gate.RUnlock()
		switch {
		case errors.Is(err, errNoCopy):
			if rerr := e.recoverGated(t); rerr != nil {
				return rerr
			}
		case err != nil:
			// The source backend failed (marked so now, with no lock
			// held) and is backed off: read from another.
			var bf *backendFailure
			if errors.As(err, &bf) {
				e.failed(bf.a, bf.err)
			}
			continue
		default:
			e.await(r)
		}
	}
	return fmt.Errorf("%w: tensor %d: its producing work kept failing", ErrTensorLost, t.id)
}

// recoverGated is recover for a Read, under the gate's read lock, as
// every queueing of work is: recovery of failed work and Close wait for
// the recomputation it queues, which else met a lane that Close had
// stopped or escaped the log that recovery had taken
// (TestReadRecoveryMeetsClose).
func (e *Executor) recoverGated(t *Tensor) error {
	e.gate.RLock()
	defer e.gate.RUnlock()
	if e.closed.Load() {
		return fmt.Errorf("executor: Read after Close: %w", adaptive.ErrClosed)
	}
	return e.recover(t)
}
