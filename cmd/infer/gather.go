package main

import (
	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/backends/rocm"
	"github.com/adaptsched/adaptsched/executor"
)

// stepGather gathers a decode step's ops on each GPU that can
// (backends.Recorder: a GPU replaying the step as graphs, or a simulated
// one modelling that) when the step's placement is set before it runs:
// under -strategy only:NAME, and under auto in any mode but the
// learner's. A step the learner places op by op is not gathered: the
// learner needs each op's own timing. Ops on other backends run as they
// come; one that reads a gathered op's output launches the gathering
// first (executor.Executor.Record). -graphs=false turns it off.
type stepGather struct {
	ex        *executor.Executor
	can       []bool // by backend: a Recorder
	only      int    // -strategy only:NAME's backend, or -1
	steps     *stepPlacer
	gathered  int64 // decode steps gathered
	recording bool
}

// newStepGather returns the gatherer for st over bes, nil when no step
// can be gathered (-graphs=false, a synchronous model, no Recorder).
func newStepGather(on bool, ex *executor.Executor, bes []backends.Backend, st choice, steps *stepPlacer, synchronous bool) *stepGather {
	if !on || synchronous {
		return nil
	}
	g := &stepGather{ex: ex, can: make([]bool, len(bes)), only: -1, steps: steps}
	any := false
	for i, b := range bes {
		_, rec := b.(backends.Recorder)
		g.can[i] = rec && b.Info().Kind == backends.GPU && gathers(b)
		any = any || g.can[i]
		if st.placer == nil && st.strategy == adaptive.Only(b.Info().Name) {
			g.only = i
		}
	}
	if !any {
		return nil
	}
	if steps != nil {
		steps.gathered = true
	}
	return g
}

// gathers reports whether Recorder b gathers: a backend that may decline
// (a simulated GPU of a runtime with no graphs measured) says so.
func gathers(b backends.Backend) bool {
	if m, ok := b.(interface{ unwrapped() backends.Backend }); ok {
		b = m.unwrapped()
	}
	g, ok := b.(interface{ Gathers() bool })
	return !ok || g.Gathers()
}

// begin starts gathering the decode step about to run if its placement
// is set and puts ops on a backend that can gather (nil g: never).
func (g *stepGather) begin() error {
	if g == nil {
		return nil
	}
	switch {
	case g.steps != nil:
		if !g.steps.placedOn(g.can) {
			return nil
		}
	case g.only < 0 || !g.can[g.only]:
		return nil
	}
	g.recording, g.gathered = true, g.gathered+1
	return g.ex.Record()
}

// end launches what the step gathered (nil g: nothing).
func (g *stepGather) end() error {
	if g == nil || !g.recording {
		return nil
	}
	g.recording = false
	return g.ex.Flush()
}

// count returns the decode steps gathered (0 for a nil g).
func (g *stepGather) count() int64 {
	if g == nil {
		return 0
	}
	return g.gathered
}

// graphs returns the gathering counts of the first backend of bes that
// keeps them (the GPU backend), when a step was gathered.
func (g *stepGather) graphs(bes []backends.Backend) *rocm.GraphStats {
	if g == nil || g.gathered == 0 {
		return nil
	}
	for _, b := range bes {
		if m, ok := b.(interface{ unwrapped() backends.Backend }); ok {
			b = m.unwrapped()
		}
		if gs, ok := b.(interface{ Graphs() rocm.GraphStats }); ok {
			st := gs.Graphs()
			return &st
		}
	}
	return nil
}
