package eval

import (
	"errors"
	"fmt"
	"time"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
)

// Thompson is the "thompson" policy: an adaptive.Scheduler with the
// Automatic strategy, called exactly as the Executor calls it. Choose is
// Scheduler.Select of the Task's Spec and Residency, Observe is
// Scheduler.Observe of that decision with the measured duration as a
// simulated Timing, and the copies the harness charges reach
// Scheduler.ObserveTransferAt. What it reports is therefore what a program
// running the Executor gets on the same ops.
type Thompson struct {
	s      *adaptive.Scheduler
	d      adaptive.Decision
	chosen bool // d is the decision of the op being run
	learn  bool // the last decision was made to learn (Explored)
	reason [adaptive.NumReasons]int64
	err    error
}

var (
	_ Policy           = (*Thompson)(nil)
	_ TransferObserver = (*Thompson)(nil)
	_ Explorer         = (*Thompson)(nil)
)

// NewThompson returns "thompson" over arms (1 to adaptive.MaxBackends),
// each arm a backend described by its Info (names distinct). cfg is the
// Scheduler's configuration less its Backends, which NewThompson fills:
// Bandit, Seed and Store (warm start and write-behind, as in production)
// are taken as given; a CPU without figures is not calibrated (these
// backends run nothing) but takes the Scheduler's default CPU figures.
// Close closes the Scheduler, not the store.
func NewThompson(cfg adaptive.Config, arms []Arm) (*Thompson, error) {
	cfg.Backends = make([]backends.Backend, len(arms))
	for i, a := range arms {
		cfg.Backends[i] = backends.Described(a.Info)
	}
	cfg.Strategy = adaptive.Automatic
	cfg.NoCalibration = true
	s, err := adaptive.New(cfg)
	if err != nil {
		return nil, err
	}
	return &Thompson{s: s}, nil
}

// Name returns "thompson".
func (p *Thompson) Name() string { return "thompson" }

// Scheduler returns the Scheduler the policy runs (for its Telemetry).
func (p *Thompson) Scheduler() *adaptive.Scheduler { return p.s }

// Choose implements Policy: Scheduler.Select of t.Spec with t.Res. A Task
// without a Spec is a programmer error and panics. A Select error (an op
// the harness validated cannot cause one) is kept for Err and answered
// with arm 0, which is then not observed.
func (p *Thompson) Choose(t *Task) int {
	if t.Spec == nil {
		panic("eval: thompson: Task without a Spec")
	}
	d, err := p.s.Select(*t.Spec, t.Res)
	if err != nil {
		p.err = errors.Join(p.err, fmt.Errorf("eval: thompson: %v: %w", t.Spec, err))
		p.chosen, p.learn = false, false
		return 0
	}
	p.d, p.chosen = d, true
	p.learn = d.Reason == adaptive.Explore || d.Reason == adaptive.Prior
	p.reason[d.Reason]++
	return d.Backend
}

// Decision returns the last decision Choose made (its Estimates and
// Transfer price a weight's copy).
func (p *Thompson) Decision() adaptive.Decision { return p.d }

// Explored implements Explorer: the last decision's reason was Explore or
// Prior (the bucket had no data for the arm chosen).
func (p *Thompson) Explored() bool { return p.learn }

// Reasons returns how many decisions each reason accounted for, indexed by
// adaptive.Reason; they add up to the decisions made.
func (p *Thompson) Reasons() [adaptive.NumReasons]int64 { return p.reason }

// Observe implements Policy: Scheduler.Observe of the last decision with
// us as a simulated duration. An arm other than the one chosen is a
// programmer error and panics.
func (p *Thompson) Observe(_ *Task, arm int, us float64) {
	if !p.chosen {
		return
	}
	if arm != p.d.Backend {
		panic(fmt.Sprintf("eval: thompson: observed arm %d, chose %d", arm, p.d.Backend))
	}
	p.chosen = false
	if err := p.s.Observe(p.d, simTiming(us)); err != nil && !errors.Is(err, adaptive.ErrBadTiming) {
		p.err = errors.Join(p.err, err)
	}
}

// ObserveTransfer implements TransferObserver: Scheduler.ObserveTransferAt
// of one copy over arm's link, as the Executor reports one. A shared-memory
// arm has no link: the harness charges it nothing, so nothing comes here.
func (p *Thompson) ObserveTransfer(arm int, toDevice bool, bytes int64, us float64) {
	if err := p.s.ObserveTransferAt(arm, toDevice, bytes, simTiming(us)); err != nil && !errors.Is(err, adaptive.ErrBadTiming) {
		p.err = errors.Join(p.err, err)
	}
}

// Err returns the errors the Scheduler reported during the run.
func (p *Thompson) Err() error { return p.err }

// Close closes the Scheduler: with a store that pulls, the Scheduler's
// last posteriors are handed to it (the caller closes the store).
func (p *Thompson) Close() error { return p.s.Close() }

func simTiming(us float64) backends.Timing {
	return backends.Timing{Duration: time.Duration(us * float64(time.Microsecond)), Clock: backends.Simulated}
}
