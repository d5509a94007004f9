package executor

import (
	"context"
	"errors"
	"fmt"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
)

// Sync waits for every op queued so far to complete and be observed,
// re-running failed ones (fallback), and returns the error of any op
// that could not be completed since the last Sync. It returns an error
// wrapping adaptive.ErrClosed after Close, and ctx's error when ctx ends
// first. In Synchronous mode nothing is queued and it returns nil.
func (e *Executor) Sync(ctx context.Context) error {
	if e.closed.Load() {
		return fmt.Errorf("executor: Sync after Close: %w", adaptive.ErrClosed)
	}
	if e.cfg.Synchronous {
		return nil
	}
	return e.settle(ctx)
}

// settle drains the queues and recovers failures until none is left.
func (e *Executor) settle(ctx context.Context) error {
	for {
		if err := e.drain(ctx); err != nil {
			return err
		}
		if !e.pendingFail.Load() {
			break
		}
		e.recoverFailed()
	}
	e.errMu.Lock()
	err := e.asyncErr
	e.asyncErr = nil
	e.errMu.Unlock()
	return err
}

// recoverFailed handles failed queued work: with the queues drained, the
// failed work and everything queued after it that depends on it (which
// did not run: the queues fail work whose dependencies failed) are
// undone in reverse order, the backends that failed are backed off (a
// lost one's copies dropped, also for a loss met while queueing work),
// and the ops are run again in their order,
// away from the backend that failed them. The inputs of each are intact,
// since every later write of them waited for it. An op that cannot run
// again leaves its output lost (Read: ErrTensorLost) and its error for
// Sync.
func (e *Executor) recoverFailed() {
	e.gate.Lock()
	defer e.gate.Unlock()
	e.recovering.Store(true)
	defer e.recovering.Store(false)
	for round := 0; e.pendingFail.Load() && round <= maxAttempts; round++ {
		e.pendingFail.Store(false)
		_ = e.drain(context.Background())
		lost := adaptive.Mask(e.lostMask.Swap(0))
		for a := range e.bes {
			if lost.Has(a) {
				e.invalidate(a) // lost while work was queued: drained now
			}
		}
		e.logMu.Lock() // drained: every rec in the log has succeeded or failed
		log := e.log
		e.log = nil
		e.logMu.Unlock()
		var cascade []*rec
		var blamed, oom adaptive.Mask
		for _, r := range log {
			failedDep := false
			for _, d := range r.deps {
				failedDep = failedDep || d.cascade
			}
			if r.state.Load() == recFailed || failedDep {
				r.cascade = true
				cascade = append(cascade, r)
				if !failedDep {
					e.blame(r)
					blamed |= adaptive.Backend(r.a)
					if errors.Is(r.err, backends.ErrOutOfMemory) {
						oom |= adaptive.Backend(r.a)
					}
				} else {
					e.release(r.a) // a probe that did not conclude
				}
			}
		}
		for i := len(cascade) - 1; i >= 0; i-- {
			cascade[i].undo(e)
		}
		for _, r := range cascade {
			r.state.Store(recSuperseded)
		}
		for _, r := range cascade {
			if r.op {
				e.rerun(r, blamed, oom)
			}
		}
		for _, r := range log {
			r.forget() // out of the log: recovery is done with it
		}
	}
}

// blame charges r's own failure to its backend: out of memory evicts
// its cold copies, anything else backs it off (a lost device drops its
// copies).
func (e *Executor) blame(r *rec) {
	if errors.Is(r.err, backends.ErrOutOfMemory) {
		e.failures[r.a].Add(1)
		e.memRetries.Add(1)
		e.evict(r.a, nil, nil)
		return
	}
	e.failed(r.a, r.err)
}

// rerun queues failed op r again: on another backend when its backend
// failed work of its own (blamed) or ran out of memory (oom: its cold
// copies were evicted, and it is tried again when no other can run r),
// with Reason Fallback too when r was a fallback itself.
func (e *Executor) rerun(r *rec, blamed, oom adaptive.Mask) {
	var exclude adaptive.Mask
	why := adaptive.Reason(0)
	switch {
	case oom.Has(r.a): // elsewhere, as a synchronous op; here again when nothing else can
		exclude, why = adaptive.Backend(r.a), adaptive.MemoryConstraint
		if e.noneLeft(*r.spec, exclude) {
			exclude = 0
		}
	case blamed.Has(r.a):
		exclude, why = adaptive.Backend(r.a), adaptive.Fallback
	case r.tk.Reason == adaptive.Fallback:
		// A fallback that failed for another backend's fault is still
		// one while the first backend stays out (TestFallbackFailsAgain).
		why = adaptive.Fallback
	}
	var d adaptive.Decision
	in := make([]backends.Buffer, len(r.in))
	for i, t := range r.in {
		in[i] = t
	}
	_, err := e.run(&d, r.spec, in, r.out, r.restore, true, exclude, why)
	if err == nil {
		return
	}
	// The output's new version is lost: counted as written, so that a
	// Read or an op reading it meets ErrTensorLost rather than the
	// undefined contents of a tensor never written
	// (TestUnrunnableOpLosesOutput).
	o := r.out
	o.mu.Lock()
	o.valid = 0
	o.lin.ok = false
	if !r.restore {
		o.version++
	}
	o.mu.Unlock()
	e.errMu.Lock()
	e.asyncErr = errors.Join(e.asyncErr, fmt.Errorf("executor: queued %v failed and could not run again: %w", *r.spec, err))
	e.errMu.Unlock()
}

// undo restores the tensor r changed to its state before r. A copy
// dropped since (a lost device) stays invalid.
func (r *rec) undo(e *Executor) {
	if r.staging {
		return // changed no tensor
	}
	t := r.t
	if r.op {
		t = r.out
	}
	t.mu.Lock()
	t.valid = r.before.valid
	for a := range e.bes {
		if t.copies[a] == nil && !e.alias.Has(a) {
			t.valid &^= adaptive.Backend(a)
		}
	}
	t.version = r.before.version
	t.ready = r.before.ready
	if r.op {
		t.lin.ok = false
		if r.lin != nil {
			t.lin = *r.lin // what a reader run again may recompute it from
		}
	}
	t.mu.Unlock()
}
