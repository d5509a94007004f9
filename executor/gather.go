package executor

// Gathering: a backend that is a Recorder holds the ops queued between
// Record and Flush and launches them at once. Its watcher holds their
// records until then (watchLane); a host about to wait for one launches
// its gathering first (await, awaitCtx).

import (
	"errors"
	"fmt"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
)

// isLaunched reports whether r's work is on its device: not held in a
// gathering (backends.Deferred).
func isLaunched(r *rec) bool {
	d, ok := r.ev.(backends.Deferred)
	if !ok {
		return true
	}
	select {
	case <-d.Launched():
		return true
	default:
		return false
	}
}

// launch launches r's gathering if r is gathered and not yet launched:
// the host is about to wait for it.
func launch(r *rec) {
	if d, ok := r.ev.(backends.Deferred); ok && !isLaunched(r) {
		_ = d.Launch() // a failed launch fails r, which its watcher reports
	}
}

// Record has every backend that can gather ops (backends.Recorder) gather
// the ops queued on it from now on, until Flush: a step whose ops all run
// on one GPU then costs the host one launch, not one per op. Gathered ops
// teach the Scheduler nothing (their timings are the gathering's, Clock
// Gathered); reading a tensor they write, Sync and Close launch them.
func (e *Executor) Record() error {
	if e.cfg.Synchronous {
		return nil
	}
	return e.eachRecorder(backends.Recorder.Record)
}

// Flush launches what the backends gathered since Record and stops
// gathering. A failed launch fails its ops, which are re-run as any
// failed queued work is.
func (e *Executor) Flush() error {
	if e.cfg.Synchronous {
		return nil
	}
	return e.eachRecorder(backends.Recorder.Flush)
}

func (e *Executor) eachRecorder(f func(backends.Recorder) error) error {
	if e.closed.Load() {
		return fmt.Errorf("executor: %w", adaptive.ErrClosed)
	}
	var errs []error
	for a := range e.bes {
		l := &e.lanes[a]
		if rc, ok := l.q.(backends.Recorder); ok {
			l.mu.Lock()
			err := f(rc)
			l.mu.Unlock()
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
