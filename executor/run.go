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

// opScratch is an op's scratch, on run's stack: key is its spec as its
// output's site knows it (knownSite), nil when it does not; h the
// known spec's handle, nil for none.
type opScratch struct {
	key   *specKey
	h     *adaptive.Handle
	spec  *kernels.Spec // the known spec's own copy, which queued work keeps
	ts    [adaptive.MaxInputs]*Tensor
	locks [adaptive.MaxInputs + 1]*Tensor
	write [adaptive.MaxInputs + 1]bool
	// wuses are the counted masks of its inputs' weight uses (ticked),
	// kept across its tries.
	wuses [adaptive.MaxInputs]adaptive.Mask
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
	var d adaptive.Decision
	if e.cfg.Synchronous {
		return e.run(&d, &s, in, out, false, false, 0, 0)
	}
	return e.runQueued(&d, &s, in, out)
}

// Submit is Run returning where the op was placed and why: the
// Scheduler's Decision (backend, reason, each backend's estimate, the
// transfers it priced). Queued, it is the first placement; a later
// fallback is counted in Stats and recorded in the trace.
func (e *Executor) Submit(s kernels.Spec, in []backends.Buffer, out backends.Buffer) (adaptive.Decision, error) {
	var d adaptive.Decision
	var err error
	if e.cfg.Synchronous {
		_, err = e.run(&d, &s, in, out, false, false, 0, 0)
	} else {
		_, err = e.runQueued(&d, &s, in, out)
	}
	return d, err
}

// runQueued is Run with queued work, the decision written to d: once
// failures already seen are recovered, under the gate's read lock.
func (e *Executor) runQueued(d *adaptive.Decision, s *kernels.Spec, in []backends.Buffer, out backends.Buffer) (backends.Timing, error) {
	if e.pendingFail.Load() {
		e.recoverFailed()
	}
	e.gate.RLock()
	defer e.gate.RUnlock()
	if e.closed.Load() {
		return backends.Timing{}, e.opErr(*s, fmt.Errorf("executor: Run after Close: %w", adaptive.ErrClosed))
	}
	return e.run(d, s, in, out, false, false, 0, 0)
}

// maxAttempts bounds the retries of one copy or op around failures.
const maxAttempts = 8

// run is Run, its decision written to d (a Decision is 200 bytes, which
// returning it copied at every level); restore marks a recomputation of out's lost version
// (Executor.recover), which neither bumps its version nor records its
// lineage, and does not recover lost inputs itself. counted marks an op
// whose weight uses were counted before (a re-run or a recomputation):
// it counts none (ticked). exclude and why start the fallback: the
// backends already failed (a queued op's re-run) and the reason to
// record.
func (e *Executor) run(d *adaptive.Decision, s *kernels.Spec, in []backends.Buffer, out backends.Buffer, restore, counted bool,
	exclude adaptive.Mask, why adaptive.Reason) (backends.Timing, error) {
	if len(in) != len(s.In) || len(in) > adaptive.MaxInputs {
		return backends.Timing{}, e.countErr(s, len(in))
	}
	var st *opSite
	var k *knownSite // s is its site's known spec: validated already
	o, _ := out.(*Tensor)
	if o != nil && o.e == e {
		st, k = e.siteOf(o, s)
	}
	if k == nil {
		if err := s.Validate(); err != nil {
			releaseSite(st, o, s, false)
			return backends.Timing{}, e.opErr(*s, err)
		}
	}
	var sc opScratch
	if k != nil {
		sc.key, sc.h, sc.spec = &k.key, k.h, &k.spec
	}
	if counted {
		for i := range sc.wuses {
			sc.wuses[i] = allCounted
		}
	}
	var tm backends.Timing
	ts := sc.ts[:len(in)]
	ot, err := e.resolve(sc.key, s, in, out, ts)
	if err == nil {
		tm, err = e.place(d, &sc, s, ts, ot, restore, exclude, why)
	}
	releaseSite(st, o, s, true)
	return tm, err
}

// resolve fills ts with run's input tensors and returns its output, each
// checked against s (its sizes from k, s's site key, when not nil).
func (e *Executor) resolve(k *specKey, s *kernels.Spec, in []backends.Buffer, out backends.Buffer, ts []*Tensor) (*Tensor, error) {
	for i, b := range in {
		t, ok := b.(*Tensor)
		if !ok || t == nil || t.e != e {
			return nil, e.resolveErr(s, i, b, 0)
		}
		want := int64(0)
		if k != nil {
			want = k.in[i]
		} else {
			want = s.InBytes(i)
		}
		if t.size != want {
			return nil, e.resolveErr(s, i, b, want)
		}
		ts[i] = t
	}
	o, ok := out.(*Tensor)
	if !ok || o == nil || o.e != e {
		return nil, e.resolveErr(s, -1, out, 0)
	}
	want := int64(0)
	if k != nil {
		want = k.out
	} else {
		want = s.OutBytes()
	}
	if o.size != want || o.weight.Load() {
		return nil, e.resolveErr(s, -1, out, want)
	}
	return o, nil
}

// resolveErr is resolve's error for buffer b, input i or the output (i
// < 0), of want bytes: a buffer not the Executor's, of another size, or
// an output that is a weight. Apart from resolve, so that the code an
// op runs through stays small (BenchmarkExecutorOnly).
func (e *Executor) resolveErr(s *kernels.Spec, i int, b backends.Buffer, want int64) error {
	what := "output"
	if i >= 0 {
		what = fmt.Sprintf("input %d", i)
	}
	t, err := e.tensorOf(b)
	switch {
	case err != nil:
		return e.opErr(*s, fmt.Errorf("%s: %w", what, err))
	case t.size != want:
		return e.opErr(*s, fmt.Errorf("%w: %s: tensor of %d bytes, want %d", kernels.ErrBufferSize, what, t.size, want))
	}
	return e.opErr(*s, fmt.Errorf("%w: output: tensor %d is a weight, which only Write changes", ErrBadTensor, t.id))
}

// countErr is run's error for an op given n buffers.
func (e *Executor) countErr(s *kernels.Spec, n int) error {
	return e.opErr(*s, fmt.Errorf("%w: %d buffers for %d inputs (at most %d)", kernels.ErrBufferSize, n, len(s.In), adaptive.MaxInputs))
}

// place chooses the backend for s (into d), runs or queues it there,
// and falls back on failure. Rule: a synchronous op with nothing
// excluded, no weight among its inputs and no backend in back-off tries
// runResident first, and only on a failure or a missing copy goes on to
// the loop that retries (placeRetry). Reason: that loop's state (a
// Residency, an error per backend) was zeroed at every op
// (BenchmarkExecutorOnly).
func (e *Executor) place(d *adaptive.Decision, sc *opScratch, s *kernels.Spec, ts []*Tensor, o *Tensor, restore bool,
	exclude adaptive.Mask, why adaptive.Reason) (backends.Timing, error) {
	queued := !e.cfg.Synchronous
	if !restore && e.weighs {
		e.copyWanted(ts, &sc.wuses, queued)
	}
	if queued || exclude != 0 || e.health.sick.Load() != 0 || anyWeight(ts) {
		return e.placeRetry(d, sc, s, ts, o, restore, exclude, why, nil)
	}
	tm, out, err := e.runResident(d, sc, s, ts, o, restore, why)
	var xferUs float64
	switch {
	case out == undecided:
		return backends.Timing{}, err
	case out == elsewhere:
		tm, xferUs, err = e.attempt(sc, s, ts, o, d.Backend, restore)
	}
	if err != nil {
		return e.placeRetry(d, sc, s, ts, o, restore, exclude, why, err)
	}
	e.succeeded(sc, s, d, ts, tm, xferUs)
	return tm, nil
}

// succeeded completes an op that ran synchronously on d.Backend.
func (e *Executor) succeeded(sc *opScratch, s *kernels.Spec, d *adaptive.Decision, ts []*Tensor, tm backends.Timing, xferUs float64) {
	if e.weighs {
		e.copyForOwnSakeSync(ts, d, &sc.wuses)
	}
	if adaptive.Mask(e.health.sick.Load()).Has(d.Backend) {
		e.healthy(d.Backend)
	}
	e.finished(s, &d.Ticket, tm, xferUs)
}

// placeRetry is place's loop: it decides, runs or queues the op, and on
// a backend's failure decides again without that backend (after an out
// of memory, once more with it after an eviction). failure is the first
// try's error (place), nil for none: the loop starts by handling it.
func (e *Executor) placeRetry(d *adaptive.Decision, sc *opScratch, s *kernels.Spec, ts []*Tensor, o *Tensor, restore bool,
	exclude adaptive.Mask, why adaptive.Reason, failure error) (backends.Timing, error) {
	var res adaptive.Residency
	var oomed adaptive.Mask
	failed := exclude
	var errs [adaptive.MaxBackends]error
	queued := !e.cfg.Synchronous
	err := failure
	for {
		if err != nil {
			var bf *backendFailure
			if !errors.As(err, &bf) {
				e.release(d.Backend)
				return backends.Timing{}, err
			}
			f := bf.a
			if f != d.Backend && errs[f] != nil {
				// An input's source failed again: outside a recovery its
				// failure leaves the copy there, so deciding again would
				// meet it again forever (TestLostSourceOutsideRecovery).
				e.release(d.Backend)
				return backends.Timing{}, bf.err
			}
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
					if e.noneLeft(*s, failed) {
						failed &^= adaptive.Backend(f)
					}
				}
			} else {
				e.failed(f, bf.err)
				why = adaptive.Fallback
			}
		}
		readyAt, derr := e.decideOp(d, sc, s, ts, o, &res, failed, why)
		if derr != nil {
			if failed&^exclude == 0 {
				return backends.Timing{}, derr
			}
			return backends.Timing{}, e.allFailed(*s, failed, &errs, derr)
		}
		if queued {
			if err = e.issue(sc, *s, ts, o, d, restore, readyAt, res.QueueUs[d.Backend]); err == nil {
				return backends.Timing{}, nil
			}
			continue
		}
		var tm backends.Timing
		var xferUs float64
		if tm, xferUs, err = e.attempt(sc, s, ts, o, d.Backend, restore); err == nil {
			e.succeeded(sc, s, d, ts, tm, xferUs)
			return tm, nil
		}
	}
}

// decideOp reads where the op's inputs are into res and decides where
// it runs (into d), among the backends not failed and, when some other
// can run it, not in back-off. Queued, it returns when the inputs are
// expected ready (ns since the Executor's epoch).
func (e *Executor) decideOp(d *adaptive.Decision, sc *opScratch, s *kernels.Spec, ts []*Tensor, o *Tensor,
	res *adaptive.Residency, failed adaptive.Mask, why adaptive.Reason) (int64, error) {
	queued := !e.cfg.Synchronous
	res.N = 0
	var readyAt int64
	var readyV float64
	if queued {
		readyAt = e.since()
		if e.virtual.Load() {
			e.observeVirtual()
		}
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
		e.queueWaits(res, readyAt, readyV)
	}
	sick, probes := e.unhealthy()
	// The output's write lock orders the decisions of the ops that write
	// it: its site's handle (sc.h) is not safe for concurrent use.
	o.mu.Lock()
	res.Consumers = o.consumersHint()
	o.decisions++
	err := e.choose(d, sc.h, o.decisions, s, res, failed|sick, why)
	if errors.Is(err, adaptive.ErrNoBackend) && sick&^failed != 0 {
		// Every healthy backend failed or none can run it: try those
		// in back-off rather than fail.
		o.decisions++
		err = e.choose(d, sc.h, o.decisions, s, res, failed, why)
	}
	o.mu.Unlock()
	if probes != 0 {
		e.releaseProbes(probes, d.Backend, err == nil)
	}
	return readyAt, err
}

// finished counts an op that ran and hands its timing to the Scheduler
// and the trace (xferUs: its copies' time).
func (e *Executor) finished(s *kernels.Spec, d *adaptive.Ticket, tm backends.Timing, xferUs float64) {
	e.ops[d.Backend].Add(1)
	if d.Reason == adaptive.Fallback || d.Reason == adaptive.MemoryConstraint {
		e.fallbacks.Add(1)
	}
	// A zero or absurd timing teaches nothing; the Placer learns what the
	// Scheduler takes.
	if tm.Duration > 0 && e.s.ObserveTicket(d, tm) == nil && e.cfg.Placer != nil {
		e.placerObserved(d, tm)
	}
	if e.cfg.Recorder != nil {
		e.record(*s, *d, tm, xferUs)
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
