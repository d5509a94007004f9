package executor

import (
	"errors"
	"fmt"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// backendFailure is a failure attributed to one backend.
type backendFailure struct {
	a   int
	err error
}

func (f *backendFailure) Error() string { return f.err.Error() }
func (f *backendFailure) Unwrap() error { return f.err }

// opScratch is the per-op scratch, pooled so that Run does not allocate.
type opScratch struct {
	ts    [adaptive.MaxInputs]*Tensor
	bufs  [adaptive.MaxInputs]backends.Buffer
	locks [adaptive.MaxInputs + 1]*Tensor
	write [adaptive.MaxInputs + 1]bool
}

// Run implements backends.Backend: it places s on the best backend, moves
// the inputs it lacks, runs it, and falls back on failure. The Timing is
// the kernel's, as the chosen backend measured it. The output may alias
// an input. It returns an error wrapping ErrAllFailed, joining each
// backend's failure, only when every capable backend failed.
//
// Unless Config.Synchronous is set, Run queues the op and returns at once
// with a zero Timing: the op's timing reaches the Scheduler when it
// completes, a failure of the queued op re-runs it on the next best
// backend, and an op that could not run at all is reported by Sync (and
// its output by Read, as lost).
func (e *Executor) Run(s kernels.Spec, in []backends.Buffer, out backends.Buffer) (backends.Timing, error) {
	_, tm, err := e.runCaller(s, in, out)
	return tm, err
}

// Submit is Run returning where the op was placed and why: the
// Scheduler's Decision (backend, reason, each backend's estimate, the
// transfers it priced). Queued, it is the first placement; a later
// fallback is counted in Stats and recorded in the trace.
func (e *Executor) Submit(s kernels.Spec, in []backends.Buffer, out backends.Buffer) (adaptive.Decision, error) {
	d, _, err := e.runCaller(s, in, out)
	return d, err
}

// runCaller is run for the caller: with queued work, once failures
// already seen are recovered, under the gate's read lock.
func (e *Executor) runCaller(s kernels.Spec, in []backends.Buffer, out backends.Buffer) (adaptive.Decision, backends.Timing, error) {
	if e.cfg.Synchronous {
		return e.run(s, in, out, false, 0, 0)
	}
	if e.pendingFail.Load() {
		e.recoverFailed()
	}
	e.gate.RLock()
	defer e.gate.RUnlock()
	if e.closed.Load() {
		return adaptive.Decision{}, backends.Timing{}, e.opErr(s, fmt.Errorf("executor: Run after Close: %w", adaptive.ErrClosed))
	}
	return e.run(s, in, out, false, 0, 0)
}

// maxAttempts bounds the retries of one copy or op around failures.
const maxAttempts = 8

// run is Run; restore marks a recomputation of out's lost version
// (Executor.recover), which neither bumps its version nor records its
// lineage, and does not recover lost inputs itself. exclude and why start
// the fallback: the backends already failed (a queued op's re-run) and
// the reason to record.
func (e *Executor) run(s kernels.Spec, in []backends.Buffer, out backends.Buffer, restore bool,
	exclude adaptive.Mask, why adaptive.Reason) (adaptive.Decision, backends.Timing, error) {
	if len(in) != len(s.In) || len(in) > adaptive.MaxInputs {
		return adaptive.Decision{}, backends.Timing{}, e.opErr(s, fmt.Errorf("%w: %d buffers for %d inputs (at most %d)", kernels.ErrBufferSize, len(in), len(s.In), adaptive.MaxInputs))
	}
	if err := s.Validate(); err != nil {
		return adaptive.Decision{}, backends.Timing{}, e.opErr(s, err)
	}
	sc := e.scratchPool.Get().(*opScratch)
	defer func() { *sc = opScratch{}; e.scratchPool.Put(sc) }()
	ts := sc.ts[:len(in)]
	o, err := e.resolve(s, in, out, ts)
	if err != nil {
		return adaptive.Decision{}, backends.Timing{}, err
	}
	return e.place(sc, s, ts, o, restore, exclude, why)
}

// resolve fills ts with run's input tensors and returns its output, each
// checked against s.
func (e *Executor) resolve(s kernels.Spec, in []backends.Buffer, out backends.Buffer, ts []*Tensor) (*Tensor, error) {
	for i, b := range in {
		t, err := e.tensorOf(b)
		if err != nil {
			return nil, e.opErr(s, fmt.Errorf("input %d: %w", i, err))
		}
		if t.size != s.InBytes(i) {
			return nil, e.opErr(s, fmt.Errorf("%w: input %d: tensor of %d bytes, want %d", kernels.ErrBufferSize, i, t.size, s.InBytes(i)))
		}
		ts[i] = t
	}
	o, err := e.tensorOf(out)
	if err != nil {
		return nil, e.opErr(s, fmt.Errorf("output: %w", err))
	}
	if o.size != s.OutBytes() {
		return nil, e.opErr(s, fmt.Errorf("%w: output: tensor of %d bytes, want %d", kernels.ErrBufferSize, o.size, s.OutBytes()))
	}
	if o.weight.Load() {
		return nil, e.opErr(s, fmt.Errorf("%w: output: tensor %d is a weight, which only Write changes", ErrBadTensor, o.id))
	}
	return o, nil
}

// place chooses the backend for s, runs or queues it there, and falls
// back on failure.
func (e *Executor) place(sc *opScratch, s kernels.Spec, ts []*Tensor, o *Tensor, restore bool,
	exclude adaptive.Mask, why adaptive.Reason) (adaptive.Decision, backends.Timing, error) {
	var res adaptive.Residency
	var oomed adaptive.Mask
	failed := exclude
	var errs [adaptive.MaxBackends]error
	queued := !e.cfg.Synchronous
	if !restore {
		e.copyWanted(ts, queued)
	}
	for {
		res.N = 0
		o.mu.RLock()
		res.Consumers = o.consumersHint()
		o.mu.RUnlock()
		var readyAt int64
		var readyV float64
		if queued {
			readyAt = e.since()
		}
		for _, t := range ts {
			t.mu.RLock()
			v, end, endV := t.valid, t.endAt, t.endV
			if t.unwritten() {
				v = e.anywhere // no contents to move: as good as everywhere
			}
			t.mu.RUnlock()
			if t.weight.Load() {
				res.AddWeight(v, t.size) // its copy is priced per op (DESIGN.md § The bandit)
			} else {
				res.Add(v, t.size)
			}
			readyAt, readyV = max(readyAt, end), max(readyV, endV)
		}
		if queued {
			res.QueueUs = [adaptive.MaxBackends]float32{}
			e.queueWaits(&res, readyAt, readyV)
		}
		sick, probes := e.unhealthy()
		d, err := e.choose(s, res, failed|sick, why)
		if errors.Is(err, adaptive.ErrNoBackend) && sick&^failed != 0 {
			// Every healthy backend failed or none can run it: try those
			// in back-off rather than fail.
			d, err = e.choose(s, res, failed, why)
		}
		if probes != 0 {
			e.releaseProbes(probes, d.Backend, err == nil)
		}
		if err != nil {
			if failed&^exclude == 0 {
				return d, backends.Timing{}, err
			}
			return d, backends.Timing{}, e.allFailed(s, failed, &errs, err)
		}
		a := d.Backend
		if queued {
			err = e.issue(sc, s, ts, o, &d, restore, readyAt, res.QueueUs[a])
			if err == nil {
				return d, backends.Timing{}, nil
			}
		}
		var tm backends.Timing
		var xferUs float64
		if !queued {
			tm, xferUs, err = e.attempt(sc, s, ts, o, a, restore)
		}
		if err == nil {
			if !queued && e.weighs {
				e.copyForOwnSakeSync(ts, &d)
			}
			e.healthy(a)
			e.finished(s, &d, tm, xferUs)
			return d, tm, nil
		}
		var bf *backendFailure
		if !errors.As(err, &bf) {
			e.release(a)
			return d, backends.Timing{}, err
		}
		f := bf.a
		failed |= adaptive.Backend(f)
		if errs[f] == nil {
			errs[f] = bf.err
		}
		if errors.Is(bf.err, backends.ErrOutOfMemory) {
			e.release(f)
			e.memRetries.Add(1)
			freed := e.evict(f, ts, o)
			why = adaptive.MemoryConstraint
			// The only backend left may be this one: after an eviction it
			// gets one more try.
			if freed > 0 && !oomed.Has(f) {
				oomed |= adaptive.Backend(f)
				if e.noneLeft(s, failed) {
					failed &^= adaptive.Backend(f)
				}
			}
			continue
		}
		e.failed(f, bf.err)
		why = adaptive.Fallback
	}
}

// finished counts an op that ran and hands its timing to the Scheduler
// and the trace (xferUs: its copies' time).
func (e *Executor) finished(s kernels.Spec, d *adaptive.Decision, tm backends.Timing, xferUs float64) {
	e.ops[d.Backend].Add(1)
	if d.Reason == adaptive.Fallback || d.Reason == adaptive.MemoryConstraint {
		e.fallbacks.Add(1)
	}
	if tm.Duration > 0 {
		e.observe(*d, tm) // a zero or absurd timing teaches nothing
	}
	if e.cfg.Recorder != nil {
		e.record(s, *d, tm, xferUs)
	}
}

// noneLeft reports whether excluding failed leaves no backend that may
// run s.
func (e *Executor) noneLeft(s kernels.Spec, failed adaptive.Mask) bool {
	allowed := e.s.Allowed() &^ failed
	for a, b := range e.bes {
		if !allowed.Has(a) {
			continue
		}
		if b.Supports(s) == nil {
			return false
		}
	}
	return true
}

// opErr wraps an error of the caller's op.
func (e *Executor) opErr(s kernels.Spec, err error) error {
	return &backends.DeviceError{Backend: e.cfg.Name, Op: s.Op.String(), Err: err}
}

// allFailed builds the error of an op that every capable backend failed.
func (e *Executor) allFailed(s kernels.Spec, failed adaptive.Mask, errs *[adaptive.MaxBackends]error, last error) error {
	var all []error
	for a := range e.bes {
		if !failed.Has(a) || errs[a] == nil {
			continue
		}
		var de *backends.DeviceError
		if errors.As(errs[a], &de) {
			all = append(all, errs[a])
		} else {
			all = append(all, &backends.DeviceError{Backend: e.s.BackendName(a), Op: s.Op.String(), Err: errs[a]})
		}
	}
	return fmt.Errorf("%w: %v: %w", ErrAllFailed, s, errors.Join(all...))
}

// attempt runs s on backend a: inputs made resident, output allocated,
// then the kernel under the tensors' locks.
func (e *Executor) attempt(sc *opScratch, s kernels.Spec, ts []*Tensor, o *Tensor, a int, restore bool) (backends.Timing, float64, error) {
	var staged [adaptive.MaxInputs]backends.Buffer // weights copied for this op alone
	tm, us, err := e.attemptOn(sc, s, ts, o, a, restore, &staged)
	for _, b := range staged {
		if b != nil {
			b.Free()
		}
	}
	return tm, us, err
}

// attemptOn is attempt, the weights it copies for the op alone kept in
// staged.
func (e *Executor) attemptOn(sc *opScratch, s kernels.Spec, ts []*Tensor, o *Tensor, a int, restore bool,
	staged *[adaptive.MaxInputs]backends.Buffer) (backends.Timing, float64, error) {
	be := e.bes[a]
	stamp := e.tick.Add(1)
	var xferUs float64
	for try := 0; ; try++ {
		for i, t := range ts {
			if staged[i] != nil {
				continue
			}
			buf, us, err := e.stageSync(t, a, ts)
			xferUs += us
			if err != nil {
				return backends.Timing{}, xferUs, err
			}
			if buf != nil {
				staged[i] = buf
				continue
			}
			us, err = e.ensureOn(t, a, stamp)
			if errors.Is(err, errNoCopy) && !restore {
				// t lost every copy with a device: the recovery hook
				// recomputes it, then it moves.
				xferUs += us
				if err = e.recover(t); err == nil {
					us, err = e.ensureOn(t, a, stamp)
				}
			}
			if err != nil {
				return backends.Timing{}, xferUs, err
			}
			xferUs += us
		}
		if err := e.outputOn(o, a); err != nil {
			return backends.Timing{}, xferUs, err
		}
		locks := e.lockSet(sc, ts, o, false)
		ok := o.copies[a] != nil
		for i, t := range ts {
			if staged[i] != nil {
				sc.bufs[i] = staged[i]
				continue
			}
			if !t.valid.Has(a) || t.copies[a] == nil {
				ok = false
				break
			}
			sc.bufs[i] = t.copies[a]
		}
		if !ok {
			unlockSet(sc, locks)
			if try < maxAttempts {
				continue // an eviction or a loss raced with us: move again
			}
			return backends.Timing{}, xferUs, fmt.Errorf("%w: inputs keep leaving %s", ErrBadTensor, e.s.BackendName(a))
		}
		tm, err := be.Run(s, sc.bufs[:len(ts)], o.copies[a])
		if err != nil {
			unlockSet(sc, locks)
			return backends.Timing{}, xferUs, &backendFailure{a: a, err: err}
		}
		o.newVersion()
		o.valid = adaptive.Backend(a)
		if e.alias.Has(a) {
			o.valid = adaptive.Host | e.alias // written in place in the host copy
		}
		o.lastUse[a] = stamp
		if !restore {
			o.version++
			o.setLineage(s, ts)
		}
		unlockSet(sc, locks)
		return tm, xferUs, nil
	}
}

// lockSet takes the locks of an op's tensors in id order (so that ops
// sharing tensors cannot deadlock): the output's for writing, the
// inputs' for reading, or for writing too when exclusive (queueing work
// updates the inputs' bookkeeping). It returns how many it took.
func (e *Executor) lockSet(sc *opScratch, ts []*Tensor, o *Tensor, exclusive bool) int {
	n := 0
	add := func(t *Tensor, w bool) {
		for i := range n {
			if sc.locks[i] == t {
				sc.write[i] = sc.write[i] || w
				return
			}
		}
		sc.locks[n], sc.write[n] = t, w
		n++
	}
	add(o, true)
	for _, t := range ts {
		add(t, exclusive)
	}
	for i := 1; i < n; i++ { // insertion sort: at most MaxInputs+1 entries
		for j := i; j > 0 && sc.locks[j].id < sc.locks[j-1].id; j-- {
			sc.locks[j], sc.locks[j-1] = sc.locks[j-1], sc.locks[j]
			sc.write[j], sc.write[j-1] = sc.write[j-1], sc.write[j]
		}
	}
	for i := range n {
		if sc.write[i] {
			sc.locks[i].mu.Lock()
		} else {
			sc.locks[i].mu.RLock()
		}
	}
	return n
}

func unlockSet(sc *opScratch, n int) {
	for i := n - 1; i >= 0; i-- {
		if sc.write[i] {
			sc.locks[i].mu.Unlock()
		} else {
			sc.locks[i].mu.RUnlock()
		}
	}
}
