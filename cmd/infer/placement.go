package main

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/eval"
	"github.com/adaptsched/adaptsched/executor"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/sim"
)

// parseStrategy reads -strategy for the backends bes (Config order): auto,
// gpu, cpu, only:NAME, or one of the baseline placements of DESIGN.md §
// Evaluation run through the Executor: static2x (HybridScheduler), pcie5x
// (BackendSelector), oracle (the lowest true mean per op, simulated
// backends only: see simOracle).
func parseStrategy(s string, bes []backends.Backend) (choice, error) {
	switch {
	case s == "auto":
		return choice{strategy: adaptive.Automatic, steps: len(bes) > 1}, nil
	case s == "perop":
		return choice{strategy: adaptive.Automatic}, nil
	case s == "gpu":
		return choice{strategy: adaptive.GPUPreferred}, nil
	case s == "cpu":
		return choice{strategy: adaptive.CPUPreferred}, nil
	case strings.HasPrefix(s, "only:") && len(s) > 5:
		return choice{strategy: adaptive.Only(s[5:])}, nil
	case s == "static2x":
		return placement(eval.NewStatic2x, bes), nil
	case s == "pcie5x":
		return placement(eval.NewPCIe5x, bes), nil
	case s == "llamacpp":
		p, err := newLlamaCPP(bes)
		if err != nil {
			return choice{}, err
		}
		return choice{placer: p}, nil
	case s == "oracle":
		o, err := newSimOracle(bes)
		if err != nil {
			return choice{}, err
		}
		return choice{placer: o}, nil
	}
	return choice{}, fmt.Errorf("infer: unknown -strategy %q (auto, perop, gpu, cpu, only:NAME, static2x, pcie5x, llamacpp, oracle)", s)
}

// checkBackends checks -backends' names, and -strategy only:NAME against
// them, before anything is created from them: the Scheduler refuses a
// name given twice and an only: naming none, but only once run has
// truncated -trace's file, and without naming the flag
// (TestFlagErrorsOnce, TestBadFlagKeepsTrace).
func checkBackends(infos []backends.Info, strategy string) error {
	if len(infos) > adaptive.MaxBackends {
		return fmt.Errorf("infer: -backends: %d backends, at most %d", len(infos), adaptive.MaxBackends)
	}
	var names []string
	for _, in := range infos {
		if slices.Contains(names, in.Name) {
			return fmt.Errorf("infer: -backends: backend %q given twice", in.Name)
		}
		names = append(names, in.Name)
	}
	if name, ok := strings.CutPrefix(strategy, "only:"); ok && name != "" && !slices.Contains(names, name) {
		return fmt.Errorf("infer: -strategy %s: no backend %q in -backends (%s)", strategy, name, strings.Join(names, ", "))
	}
	return nil
}

// simOracle is the "oracle" placement for simulated backends: each op
// goes to the backend with the lowest true expected duration
// (sim.Profile.OpUs of the op's shape under the devices' execution
// model, spikes included) plus the true time to move the
// inputs it lacks there (sim.Profile.LinkUs per input, over the source
// device's link and the destination's). It knows the simulator's ground
// truth, which no other policy sees, but it is greedy per op: it does not
// weigh where the output will be needed next, and it ignores the
// simulator's first-run warm-up. It learns nothing (Observe does nothing).
type simOracle struct {
	profs  []*sim.Profile
	shared adaptive.Mask // backends that read host memory
	model  sim.ExecModel // what the devices' durations are (their Timeline's)
}

var _ executor.Placer = (*simOracle)(nil)

// newSimOracle builds the oracle over backends named "sim:<profile>".
func newSimOracle(bes []backends.Backend) (*simOracle, error) {
	o := &simOracle{}
	for i, b := range bes {
		in := b.Info()
		name, ok := strings.CutPrefix(in.Name, "sim:")
		if !ok {
			return nil, fmt.Errorf("infer: -strategy oracle needs simulated backends (sim:<profile>), not %q", in.Name)
		}
		p, err := sim.LookupProfile(name)
		if err != nil {
			return nil, fmt.Errorf("infer: -strategy oracle: %w", err)
		}
		o.profs = append(o.profs, p)
		if d, ok := b.(interface{ Timeline() *sim.Timeline }); ok {
			o.model = d.Timeline().Model()
		}
		if in.SharedMemory || in.Kind == backends.CPU {
			o.shared |= adaptive.Backend(i)
		}
	}
	return o, nil
}

// Name returns "oracle".
func (o *simOracle) Name() string { return "oracle" }

// Observed does nothing: the oracle knows the truth already.
func (o *simOracle) Observed(adaptive.BucketID, int, float64) {}

// Place implements executor.Placer.
func (o *simOracle) Place(spec kernels.Spec, res adaptive.Residency, _ adaptive.BucketID) int {
	best, bestUs := -1, 0.0
	for a, p := range o.profs {
		us := p.OpUs(spec, o.model)*p.SpikeMean() + o.transferUs(&res, a)
		if best < 0 || us < bestUs {
			best, bestUs = a, us
		}
	}
	return best
}

// choice is what -strategy asks for: a Scheduler strategy, or a
// baseline placement that the Executor runs in its stead (placer).
type choice struct {
	strategy adaptive.Strategy
	placer   executor.Placer
	steps    bool // auto: the learner step by step against one backend (stepPlacer)
}

// String names the choice: the strategy's name, or "placement(NAME)".
func (c choice) String() string {
	if c.placer != nil {
		return "placement(" + c.placer.Name() + ")"
	}
	return c.strategy.String()
}

// placement runs the eval baseline newPolicy, built over bes, through the
// Executor.
func placement(newPolicy func([]eval.Arm) eval.Policy, bes []backends.Backend) choice {
	arms := eval.ArmsOf(bes)
	return choice{placer: eval.Placement(newPolicy(arms), arms)}
}

// transferUs is the true time to bring res's inputs to backend a: data on
// a device alone crosses that device's link to host memory, then a's link
// unless a reads host memory.
func (o *simOracle) transferUs(res *adaptive.Residency, a int) float64 {
	var us float64
	for i := range min(res.N, adaptive.MaxInputs) {
		in := res.Inputs[i]
		on := in.On
		if on == 0 {
			on = adaptive.Host
		}
		if in.Bytes <= 0 || on.Has(a) || o.shared.Has(a) && on&(adaptive.Host|o.shared) != 0 {
			continue
		}
		if on&(adaptive.Host|o.shared) == 0 {
			for g := range o.profs {
				if on.Has(g) {
					us += o.profs[g].LinkUs(in.Bytes)
					break
				}
			}
		}
		if !o.shared.Has(a) {
			us += o.profs[a].LinkUs(in.Bytes)
		}
	}
	return us
}

// metered wraps a backend and sums the durations it reports for every op
// and copy: simulated devices model them without sleeping (so wall-clock
// tokens/s says nothing of the simulated machine), real ones time them
// with events or timers. The sum is the devices' busy time, one after the
// other, as the Executor runs ops one at a time per caller.
type metered struct {
	backends.Backend
	ns *atomic.Int64
}

// MapHost forwards backends.HostMapper, so that a metered CPU still works
// on the Executor's host memory in place (mapping copies nothing: there
// is no time to meter).
func (m metered) MapHost(b []byte) (backends.Buffer, error) {
	hm, ok := m.Backend.(backends.HostMapper)
	if !ok {
		return nil, fmt.Errorf("%w: %s does not map host memory", backends.ErrUnsupported, m.Info().Name)
	}
	return hm.MapHost(b)
}

func (m metered) Run(s kernels.Spec, in []backends.Buffer, out backends.Buffer) (backends.Timing, error) {
	t, err := m.Backend.Run(s, in, out)
	if err == nil {
		m.ns.Add(int64(t.Duration))
	}
	return t, err
}

func (m metered) Write(dst backends.Buffer, src []byte) (backends.Timing, error) {
	t, err := m.Backend.Write(dst, src)
	if err == nil {
		m.ns.Add(int64(t.Duration))
	}
	return t, err
}

func (m metered) Read(dst []byte, src backends.Buffer) (backends.Timing, error) {
	t, err := m.Backend.Read(dst, src)
	if err == nil {
		m.ns.Add(int64(t.Duration))
	}
	return t, err
}
