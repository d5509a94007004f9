package main

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/backends/rocm"
	"github.com/adaptsched/adaptsched/sim"
)

// simOptions are the options infer opens simulated devices with (tests
// skip the reference kernels: a placement depends on modelled durations
// only).
var simOptions = sim.DefaultOptions()

// simEvents are the events each simulated profile is opened with, by
// profile name (tests: a device lost mid-run).
var simEvents = map[string][]sim.Event{}

// modelClock is what the modelled figures are read from: the simulated
// devices' shared Timeline when every backend is simulated, else the sum
// of the durations the backends reported (metered), which has no bound.
type modelClock struct {
	tl   *sim.Timeline
	busy *atomic.Int64 // ns reported, without a Timeline
	// gatherers are the backends whose gathered ops report no duration
	// of their own (backends.Recorder): their launches' device time is
	// counted whole instead (TestClockCountsGathered).
	gatherers []gatherer
}

// gatherer is a backend that keeps its gatherings' device time (rocm).
type gatherer interface{ Graphs() rocm.GraphStats }

// read returns the clock's figures so far: under a Timeline its stats
// (makespan, issue, each device's busy time); otherwise the reported sum
// with the gatherings' device time as the makespan, with no lanes and so
// no bound.
func (c modelClock) read() sim.TimelineStats {
	if c.tl != nil {
		return c.tl.Stats()
	}
	ns := c.busy.Load()
	for _, g := range c.gatherers {
		ns += g.Graphs().DeviceNs
	}
	return sim.TimelineStats{MakespanUs: float64(ns) / 1e3}
}

// hostUs is the host's time on the clock: the Timeline's host clock, or
// the durations reported so far without one.
func (c modelClock) hostUs() float64 {
	if c.tl != nil {
		return c.tl.HostUs()
	}
	return c.read().MakespanUs
}

// openBackends opens the backends named in list. When every one is
// simulated ("sim:<profile>") they share one sim.Timeline of model x and
// are handed to the Executor as they are, so that it sees their queues;
// otherwise each is wrapped to meter its reported durations, the only
// modelled time there is. opened is told of each backend as it opens,
// unwrapped.
func openBackends(list string, x sim.ExecModel, opened func(backends.Backend)) ([]backends.Backend, []backends.Info, modelClock, error) {
	names := strings.Split(list, ",")
	allSim := true
	for i, n := range names {
		names[i] = strings.TrimSpace(n)
		allSim = allSim && strings.HasPrefix(names[i], "sim:")
	}
	var bes []backends.Backend
	var infos []backends.Info
	fail := func(err error) ([]backends.Backend, []backends.Info, modelClock, error) {
		for _, b := range bes {
			b.Close()
		}
		return nil, nil, modelClock{}, err
	}
	clock := modelClock{busy: new(atomic.Int64)}
	if allSim {
		clock.tl = sim.NewTimeline(x)
	}
	for _, n := range names {
		var b backends.Backend
		var err error
		if allSim {
			prof := strings.TrimPrefix(n, "sim:")
			b, err = sim.Open(prof, simOptions.WithTimeline(clock.tl).WithEvents(simEvents[prof]...))
		} else {
			b, err = backends.Open(n)
		}
		if err != nil {
			return fail(backendsError(err))
		}
		opened(b)
		infos = append(infos, b.Info())
		if !allSim {
			if g, ok := b.(gatherer); ok {
				clock.gatherers = append(clock.gatherers, g)
			}
			b = meter(b, clock.busy)
		}
		bes = append(bes, b)
	}
	return bes, infos, clock, nil
}

// backendsError is openBackends' error for a backend that did not open:
// a name that names nothing (an unknown driver or profile, a driver that
// needs a parameter) is a usage error, as a bad value of any other flag
// is; a backend unavailable here (no library, no device) is not.
func backendsError(err error) error {
	err = fmt.Errorf("infer: -backends: %w", err)
	if errors.Is(err, backends.ErrUnknownBackend) || errors.Is(err, backends.ErrNeedsParam) || errors.Is(err, sim.ErrUnknownProfile) {
		return &usageError{err: err}
	}
	return err
}

// figures are the modelled throughputs of tokens generated over the
// clock's span d: by makespan, and by the placement's bound (0 without
// a Timeline).
func figures(tokens int64, d sim.TimelineStats) (modelled, bound float64) {
	rate := func(us float64) float64 {
		if us <= 0 {
			return 0
		}
		return float64(tokens) / (us / 1e6)
	}
	return rate(d.MakespanUs), rate(d.BoundUs())
}

// served is what serve measured: totals, and the warm-up's share of
// them.
type served struct {
	tokens, ops    int64
	promptTokens   int64 // prefilled
	warmPrompt     int64
	wall           time.Duration     // whole run, by the wall clock
	clock          sim.TimelineStats // whole run, by the modelled clock
	warmSteps      int
	warmTokens     int64
	warmWall       time.Duration
	warmClock      sim.TimelineStats
	stepModelledUs []float64
	stepWallUs     []float64
	stepModes      []string // -strategy auto's, per step
	restarts       int64    // requests restarted after a device was lost with their KV caches
	overlapped     int64    // decode steps issued before the last one's tokens were read
}

// summarise fills sum's throughput figures.
func (sv *served) summarise(sum *Summary, steps bool) {
	sum.Tokens, sum.Ops = sv.tokens-sv.warmTokens, sv.ops
	sum.Seconds = (sv.wall - sv.warmWall).Seconds()
	measured := sv.clock.Sub(sv.warmClock)
	sum.ModelledSeconds = measured.MakespanUs / 1e6
	sum.WarmupSteps, sum.WarmupTokens = sv.warmSteps, sv.warmTokens
	sum.Restarts = sv.restarts
	rate := func(tokens int64, s float64) float64 {
		if s <= 0 {
			return 0
		}
		return float64(tokens) / s
	}
	sum.TokensPerS = rate(sum.Tokens, sum.Seconds)
	sum.PromptTokens = sv.promptTokens - sv.warmPrompt
	sum.ModelledServedTokensPerS, _ = figures(sum.Tokens+sum.PromptTokens, measured)
	sum.ModelledTokensPerS, sum.BoundTokensPerS = figures(sum.Tokens, measured)
	sum.ColdModelledTokensPerS, _ = figures(sv.tokens, sv.clock)
	if steps {
		sum.StepModelledUs, sum.StepWallUs, sum.StepMode = sv.stepModelledUs, sv.stepWallUs, sv.stepModes
	}
}

// parseExec sets o.execModel from -exec and -sync (-exec sync).
func (o *options) parseExec() error {
	x, err := sim.ParseExecModel(o.exec)
	if err != nil {
		return fmt.Errorf("infer: -exec: %w", err)
	}
	if o.sync {
		if x != sim.Async && x != sim.Synchronous {
			return fmt.Errorf("infer: -sync is -exec sync: not with -exec %s", o.exec)
		}
		x = sim.Synchronous
	}
	o.execModel = x
	return nil
}

// modelName is the Timeline's execution model, empty without one.
func (c modelClock) modelName() string {
	if c.tl == nil {
		return ""
	}
	return c.tl.Model().String()
}
