package executor

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
)

// health is the back-off of every backend: a failed backend is kept out
// of Select for a time that doubles with each consecutive failure, then
// probed by one op. An op reads sick alone while every backend is
// healthy; mu guards state.
type health struct {
	mu    sync.Mutex
	sick  atomic.Uint32 // adaptive.Mask of backends in back-off or probing
	state [adaptive.MaxBackends]healthState
	// failedN counts each backend's failures: queued work that succeeds
	// clears a back-off only if none came after it was queued.
	failedN [adaptive.MaxBackends]atomic.Int64
}

// healthState is one backend's back-off (health.mu held).
type healthState struct {
	failures int
	until    time.Time
	probing  bool
	lastErr  error
}

// unhealthy returns the backends in back-off, and those whose back-off
// has expired and that this op may probe (one probing op at a time).
func (e *Executor) unhealthy() (out, probes adaptive.Mask) {
	sick := adaptive.Mask(e.health.sick.Load())
	if sick == 0 {
		return 0, 0
	}
	now := e.cfg.Now()
	e.health.mu.Lock()
	for a := range e.bes {
		if !sick.Has(a) {
			continue
		}
		h := &e.health.state[a]
		if h.probing || now.Before(h.until) {
			out |= adaptive.Backend(a)
			continue
		}
		h.probing = true
		probes |= adaptive.Backend(a)
	}
	e.health.mu.Unlock()
	return out, probes
}

// releaseProbes ends the probes that the op did not take up: every one
// but the chosen backend's (when chosen).
func (e *Executor) releaseProbes(probes adaptive.Mask, chosen int, ok bool) {
	if ok {
		probes &^= adaptive.Backend(chosen)
	}
	if probes == 0 {
		return
	}
	e.health.mu.Lock()
	for a := range e.bes {
		if probes.Has(a) {
			e.health.state[a].probing = false
		}
	}
	e.health.mu.Unlock()
}

// failed marks backend a failed: its back-off doubles (from BackoffBase
// up to BackoffMax); a lost device's copies are dropped.
func (e *Executor) failed(a int, err error) {
	e.failures[a].Add(1)
	e.health.failedN[a].Add(1)
	e.health.mu.Lock()
	h := &e.health.state[a]
	d := e.cfg.BackoffBase << min(h.failures, 30)
	if d <= 0 || d > e.cfg.BackoffMax {
		d = e.cfg.BackoffMax
	}
	h.failures++
	h.until = e.cfg.Now().Add(d)
	h.probing = false
	h.lastErr = err
	e.health.sick.Store(e.health.sick.Load() | uint32(adaptive.Backend(a)))
	e.health.mu.Unlock()
	e.cfg.Logger.Warn("adaptive: backend failed; falling back", "err", err, "backend", e.s.BackendName(a), "backoff", d)
	if !errors.Is(err, backends.ErrDeviceLost) {
		return
	}
	if e.cfg.Synchronous || e.recovering.Load() {
		e.invalidate(a)
		return
	}
	// Queued work may still use the lost device's buffers: they are
	// dropped by the recovery, once the queues are drained.
	e.lostMask.Or(uint32(adaptive.Backend(a)))
	e.pendingFail.Store(true)
}

// healthy clears backend a's back-off after an op succeeded there.
func (e *Executor) healthy(a int) {
	if !adaptive.Mask(e.health.sick.Load()).Has(a) {
		return
	}
	e.health.mu.Lock()
	e.health.state[a] = healthState{}
	e.health.sick.Store(e.health.sick.Load() &^ uint32(adaptive.Backend(a)))
	e.health.mu.Unlock()
}

// release ends a probe of backend a that did not conclude.
func (e *Executor) release(a int) {
	if !adaptive.Mask(e.health.sick.Load()).Has(a) {
		return
	}
	e.health.mu.Lock()
	e.health.state[a].probing = false
	e.health.mu.Unlock()
}
