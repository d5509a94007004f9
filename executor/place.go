package executor

import (
	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// choose is the Scheduler's decision for an op: SelectExcept, or with a
// Placer, SelectOn the backend it places the op on.
func (e *Executor) choose(s kernels.Spec, res adaptive.Residency, exclude adaptive.Mask, why adaptive.Reason) (adaptive.Decision, error) {
	p := e.cfg.Placer
	if p == nil {
		return e.s.SelectExcept(s, res, exclude, why)
	}
	b, err := e.s.Bucket(s)
	if err != nil {
		return adaptive.Decision{}, err
	}
	e.placeMu.Lock()
	arm := p.Place(s, res, b)
	e.placeMu.Unlock()
	return e.s.SelectOn(s, res, arm, exclude, why)
}

// observe feeds an op's timing to the Scheduler and, when it takes it,
// to the Placer.
func (e *Executor) observe(d adaptive.Decision, tm backends.Timing) {
	if err := e.s.Observe(d, tm); err != nil || e.cfg.Placer == nil {
		return
	}
	e.placeMu.Lock()
	e.cfg.Placer.Observed(d.Bucket, d.Backend, tm.Micros())
	e.placeMu.Unlock()
}
