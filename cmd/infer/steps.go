package main

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/executor"
	"github.com/adaptsched/adaptsched/kernels"
)

// stepPlacer runs -strategy auto: each decode step runs either with the
// per-op learner's placement (mode 0), with every op on one backend
// (mode k: rules[k-1]), or, with weights in host memory, with every op
// where its weights live (the last mode, home: llama.cpp's rule below its
// batch threshold), as bandit.Modes chooses on the steps' times
// (modelled under a Timeline, else by the wall clock). The learner prices
// each op alone; on a real GPU its device switches cost the step more
// than they save (BENCHMARKS.md, the real-GPU rows), which only the
// step's own time shows. The learner runs the first learnerSteps decode
// steps alone; then a backend becomes a mode when the learner's own
// posteriors put a whole step on it within ruleSlack of the best
// backend's (a backend 5× slower is not tried for a step). Prompt steps
// are the learner's, and it learns from every op in every mode.
type stepPlacer struct {
	telemetry func() adaptive.Telemetry // the Scheduler's, once it exists
	names     []string                  // the backends', from the Scheduler
	modes     *bandit.Modes             // nil until the rules are known
	rules     []int                     // mode k's backend: rules[k-1]
	home      *llamaCPP                 // the weights' home, a mode after the rules; nil without -gpu-mem
	seed      uint64
	cur       atomic.Int32 // the running step's mode; counting while learning
	steps     int          // decode steps run
	mu        sync.Mutex   // guards count: Place may run on the Executor's goroutines
	count     map[adaptive.BucketID]int
}

const (
	// learnerSteps is how many decode steps the learner runs before the
	// modes are compared: 8 at batch 1 are about 1,600 ops of a 12-layer
	// decoder, past the trials of a cold start (TestAutoStepModes).
	learnerSteps = 8
	// ruleSlack is how much slower than the best backend's a whole step
	// on a backend may be predicted and still be tried: a step of 1.5×
	// costs half a step to learn, one of 5× four.
	ruleSlack = 1.5
	// counting marks a step of the learner's whose ops are counted by
	// bucket (Place) for the prediction of whole steps.
	counting = -1
)

var _ executor.Placer = (*stepPlacer)(nil)

func newStepPlacer(seed uint64) *stepPlacer {
	return &stepPlacer{seed: seed, count: map[adaptive.BucketID]int{}}
}

// stepPlacer returns -strategy auto's placer, made st's Placer, with the
// weights-home mode under -gpu-mem when there are a CPU and a GPU; nil
// for another strategy.
func (o *options) stepPlacer(st *choice, bes []backends.Backend) *stepPlacer {
	if !st.steps {
		return nil
	}
	p := newStepPlacer(o.model.Seed)
	if o.gpuMem.set {
		p.home, _ = newLlamaCPP(bes) // nil without a CPU and a GPU: no home mode
	}
	st.placer = p
	return p
}

// attach gives p the Scheduler whose posteriors predict whole steps, and
// its backends' names (nil p: nothing to do).
func (p *stepPlacer) attach(s *adaptive.Scheduler) {
	if p != nil {
		p.telemetry, p.names = s.Telemetry, s.Backends()
	}
}

// Name implements executor.Placer.
func (p *stepPlacer) Name() string { return "auto" }

// Place implements executor.Placer: a rule's backend, or the learner's
// choice (counted by bucket while learning).
func (p *stepPlacer) Place(s kernels.Spec, res adaptive.Residency, b adaptive.BucketID) int {
	switch k := p.cur.Load(); {
	case k == counting:
		p.mu.Lock()
		p.count[b]++
		p.mu.Unlock()
	case k > 0 && int(k) <= len(p.rules):
		return p.rules[k-1]
	case k > 0:
		return p.home.home(s, res)
	}
	return executor.Learned
}

// whole returns the backend that the running decode step puts every op
// on (a mode of one backend), or -1.
func (p *stepPlacer) whole() int {
	if k := p.cur.Load(); k > 0 && int(k) <= len(p.rules) {
		return p.rules[k-1]
	}
	return -1
}

// Observed implements executor.Placer: the learner learns on its own.
func (p *stepPlacer) Observed(adaptive.BucketID, int, float64) {}

// prompt sets the learner's placement for a prompt step.
func (p *stepPlacer) prompt() { p.cur.Store(0) }

// begin chooses the mode of a decode step: the learner's, counted, for
// the first learnerSteps, then bandit.Modes'.
func (p *stepPlacer) begin() {
	if p.modes == nil {
		p.mu.Lock()
		clear(p.count)
		p.mu.Unlock()
		p.cur.Store(counting)
		return
	}
	p.cur.Store(int32(p.modes.Next()))
}

// end records that the decode step begun last took us µs; after the
// learnerSteps-th, it sets up the modes from the last step's ops.
func (p *stepPlacer) end(us float64) error {
	p.steps++
	if p.modes == nil {
		if p.steps < learnerSteps {
			return nil
		}
		if err := p.setModes(); err != nil {
			return err
		}
		return p.modes.Done(0, us)
	}
	return p.modes.Done(int(p.cur.Load()), us)
}

// setModes predicts a whole step on each backend from the learner's
// posterior means of the buckets of the last step, and makes a mode of
// every backend within ruleSlack of the best.
func (p *stepPlacer) setModes() error {
	tel := p.telemetry()
	pred := make([]float64, len(p.names))
	p.mu.Lock()
	for b, n := range p.count {
		if int(b) >= len(tel.Buckets) {
			continue
		}
		for _, a := range tel.Buckets[b].Arms {
			for i, name := range p.names {
				if a.Backend == name {
					pred[i] += float64(n) * a.MeanUs
				}
			}
		}
	}
	p.mu.Unlock()
	best := 0
	for i := range pred {
		if pred[i] < pred[best] {
			best = i
		}
	}
	for i := range pred {
		if pred[i] > 0 && pred[i] <= ruleSlack*pred[best] {
			p.rules = append(p.rules, i)
		}
	}
	n := 1 + len(p.rules)
	if p.home != nil {
		n++
	}
	m, err := bandit.NewModes(n, p.seed)
	if err != nil {
		return fmt.Errorf("infer: auto's step modes: %w", err)
	}
	p.modes = m
	return nil
}

// runs returns the decode steps each mode ran, by name ("learned" counts
// the first learnerSteps); nil for a nil p.
func (p *stepPlacer) runs() map[string]int64 {
	if p == nil {
		return nil
	}
	if p.modes == nil {
		return map[string]int64{"learned": int64(p.steps)}
	}
	r := p.modes.Runs()
	out := map[string]int64{"learned": r[0] + learnerSteps - 1}
	for k, b := range p.rules {
		out["only:"+p.names[b]] = r[k+1]
	}
	if p.home != nil {
		out["home"] = r[len(r)-1]
	}
	return out
}
