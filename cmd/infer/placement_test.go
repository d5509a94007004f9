package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/backends/cpu"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/sim"
)

// TestParseStrategyPlacements: the baseline placements parse, and the
// oracle refuses backends that are not simulated.
func TestParseStrategyPlacements(t *testing.T) {
	simBes := []backends.Backend{openT(t, "sim:cpu2"), openT(t, "sim:h100")}
	for s, want := range map[string]string{"static2x": "placement(static2x)", "pcie5x": "placement(pcie5x)",
		"oracle": "placement(oracle)", "auto": "automatic", "only:sim:h100": "only(sim:h100)"} {
		st, err := parseStrategy(s, simBes)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if st.String() != want {
			t.Errorf("%s: %v, want %s", s, st, want)
		}
	}
	if _, err := parseStrategy("oracle", []backends.Backend{openT(t, "cpu"), openT(t, "sim:h100")}); err == nil {
		t.Error("oracle over a real cpu: no error")
	}
	if _, err := parseStrategy("fastest", simBes); err == nil {
		t.Error("unknown strategy: no error")
	}
}

// TestSimOracle: the oracle picks the backend of the lowest true mean
// plus true transfer (DESIGN.md § Evaluation: only the oracle sees the
// simulator's truth).
func TestSimOracle(t *testing.T) {
	o, err := newSimOracle([]backends.Backend{openT(t, "sim:cpu2"), openT(t, "sim:h100")})
	if err != nil {
		t.Fatal(err)
	}
	cpu, gpu := sim.MustProfile("cpu2"), sim.MustProfile("h100")
	for _, spec := range []kernels.Spec{
		{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{1, 64}, {64, 64}}},
		{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{512, 2048}, {2048, 2048}}},
	} {
		for _, on := range []adaptive.Mask{adaptive.Host, adaptive.Backend(1)} {
			var res adaptive.Residency
			for i := range spec.In {
				res.Add(on, spec.InBytes(i))
			}
			cpuUs, gpuUs := cpu.MeanUs(spec), gpu.MeanUs(spec)
			for i := range spec.In {
				if on == adaptive.Host {
					gpuUs += gpu.LinkUs(spec.InBytes(i))
				} else {
					cpuUs += gpu.LinkUs(spec.InBytes(i))
				}
			}
			want := 0
			if gpuUs < cpuUs {
				want = 1
			}
			if got := o.Place(spec, res, 0); got != want {
				t.Errorf("%v on %v: arm %d, want %d (cpu %.1f µs, gpu %.1f µs)", spec, on, got, want, cpuUs, gpuUs)
			}
		}
	}
}

// TestRunModelled: on simulated backends the summary carries the modelled
// throughput, the warm-up steps are left out of it, and -step-times lists
// every step.
func TestRunModelled(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"-backends", "sim:cpu2,sim:h100", "-strategy", "oracle", "-tokens", "6", "-batch", "2", "-prompt", "2", "-ubatch", "1",
		"-warmup", "3", "-dim", "64", "-layers", "1", "-heads", "4", "-kv-heads", "2", "-ffn", "64", "-vocab", "50",
		"-ctx", "8", "-json", "-step-times"}
	if err := run(context.Background(), args, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	var s Summary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	// 7 steps: 1 prompt step, then 6 that each yield a token per sequence;
	// the first 3 steps (2 tokens per sequence) are warm-up.
	if s.WarmupSteps != 3 || s.WarmupTokens != 4 || s.Tokens != 8 || len(s.StepModelledUs) != 7 || len(s.StepWallUs) != 7 {
		t.Fatalf("summary %+v", s)
	}
	var wall float64
	for i, us := range s.StepWallUs {
		if us <= 0 {
			t.Fatalf("step wall times %v", s.StepWallUs)
		}
		if i >= 3 {
			wall += us
		}
	}
	if wall/1e6 > s.Seconds {
		t.Errorf("measured steps' wall times sum to %.6f s, more than the run's measured %.6f s", wall/1e6, s.Seconds)
	}
	var measured float64
	for _, us := range s.StepModelledUs[3:] {
		measured += us
	}
	if s.ModelledSeconds <= 0 || s.ModelledTokensPerS <= 0 || s.ColdModelledTokensPerS <= 0 {
		t.Fatalf("summary %+v", s)
	}
	// The steps' own sums leave out the embedding writes between steps
	// (none here: the Executor keeps them in host memory), so they match.
	if d := measured/1e6 - s.ModelledSeconds; d > 1e-9 || d < -1e-9 {
		t.Errorf("steps sum to %.9f s, summary %.9f s", measured/1e6, s.ModelledSeconds)
	}
}

// TestSimPlacement is the simulated-GPU target of the per-op learner
// (-strategy perop) on a small model (2.5M parameters, 16 tokens after 6
// of warm-up), which keeps its character: at batch 16 everything on the
// GPU beats the per-op oracle. The learner must beat the all-GPU rule
// (static2x) and stay within 3% of the oracle or above it, at batch 1.
// Modelled time is deterministic.
//
// At batch 16 the claim no longer holds since the KV cache stays on the
// backend that runs attention: the all-GPU rule stopped paying a copy
// of every layer's cache through host memory, and per-op decisions, the
// oracle's included, leave the residual stream or the cache's producers
// on the other device. Those rows are logged, not asserted, until
// decisions weigh a whole step; adaptive's TestGPUWarmup holds the
// warm-up rule (a GPU's first run in a bucket is not learned from) that
// they once guarded.
func TestSimPlacement(t *testing.T) {
	skipCompute(t)
	small := []string{"-dim", "256", "-layers", "2", "-heads", "4", "-kv-heads", "2", "-ffn", "704", "-vocab", "4000", "-ctx", "32"}
	tps := func(gpu, strategy string, batch int) float64 {
		return runSummary(t, append([]string{"-backends", "sim:cpu2,sim:" + gpu, "-strategy", strategy, "-exec", "serial",
			"-batch", strconv.Itoa(batch), "-prompt", "4", "-ubatch", "1", "-tokens", "16", "-warmup", "6", "-json"}, small...)).ModelledTokensPerS
	}
	for _, c := range []struct {
		gpu   string
		batch int
	}{{"h100", 1}, {"mi300x", 1}, {"h100", 16}, {"mi300x", 16}} {
		auto, static, oracle := tps(c.gpu, "perop", c.batch), tps(c.gpu, "static2x", c.batch), tps(c.gpu, "oracle", c.batch)
		t.Logf("%s batch %d: auto %.0f, static2x %.0f, oracle %.0f modelled tokens/s", c.gpu, c.batch, auto, static, oracle)
		if c.batch == 16 {
			t.Logf("%s batch 16: not asserted (see the doc comment)", c.gpu)
			continue
		}
		if auto <= static || auto < 0.97*oracle {
			t.Errorf("%s batch %d: auto %.0f modelled tokens/s, want above static2x's %.0f and within 3%% of the oracle's %.0f",
				c.gpu, c.batch, auto, static, oracle)
		}
	}
}

// skipCompute makes infer's simulated devices skip their reference
// kernels until tb ends. A placement depends on the modelled durations
// only, and computing every op under the race detector took this
// package's tests from 1 s to 48.
func skipCompute(tb testing.TB) {
	old := simOptions
	simOptions = simOptions.WithSkipCompute(true)
	tb.Cleanup(func() { simOptions = old })
}

// simModel is BenchmarkSimPlacement's model: 15.9M parameters.
var simModel = []string{"-dim", "512", "-layers", "4", "-heads", "8", "-kv-heads", "4", "-ffn", "1408", "-vocab", "8000", "-ctx", "64"}

// Sim placement workload: one request of simPrompt prompt tokens and
// simTokens generated ones; the first simWarmup steps are left out of
// modelled-tokens/s for every strategy alike.
const simPrompt, simTokens, simWarmup = 4, 40, 8

// runSim decodes the workload on sim:cpu2 and sim:<gpu> under strategy,
// on the model before queues (-exec serial), which its targets were set
// on; BenchmarkSimAsync times the queued model.
func runSim(b *testing.B, gpu, strategy string, batch int) Summary {
	return runSummary(b, append([]string{"-backends", "sim:cpu2,sim:" + gpu, "-strategy", strategy, "-exec", "serial", "-batch", strconv.Itoa(batch),
		"-prompt", strconv.Itoa(simPrompt), "-tokens", strconv.Itoa(simTokens), "-warmup", strconv.Itoa(simWarmup),
		"-json", "-step-times"}, simModel...))
}

// runSummary runs infer with args (which include -json) and returns the
// summary it prints.
func runSummary(tb testing.TB, args []string) Summary {
	tb.Helper()
	var out, errb bytes.Buffer
	if err := run(context.Background(), args, &out, &errb); err != nil {
		tb.Fatalf("%v\n%s", err, errb.String())
	}
	var s Summary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		tb.Fatal(err)
	}
	return s
}

// BenchmarkSimPlacement is the simulated-GPU comparison: decode throughput in
// modelled tokens per second (the simulated devices' reported durations,
// not the wall clock) of the adaptive Executor (auto) against the oracle
// placement, the static2x and pcie5x baselines, and everything on the GPU
// (gpu) or the CPU (cpu), on a simulated 2-core
// CPU (sim:cpu2) with a simulated H100 or MI300X, at batch 1 and 16.
// Every strategy decodes the same prompt after the same warm-up of
// simWarmup steps; cold-modelled-tokens/s includes it. The log line of
// each configuration gives auto's gap to each placement and learn-steps:
// the first step from which auto's remaining modelled time stays within 3%
// of the oracle's. late-modelled-tokens/s covers only the last simLate
// steps: what a strategy has settled on. The oracle is greedy per op (see simOracle): a fixed
// placement (gpu) can beat it, so the line also names the best placement.
func BenchmarkSimPlacement(b *testing.B) {
	strategies := []string{"auto", "oracle", "static2x", "pcie5x", "gpu", "cpu"}
	for _, gpu := range []string{"h100", "mi300x"} {
		for _, batch := range []int{1, 16} {
			got := map[string]Summary{}
			for _, st := range strategies {
				b.Run(gpu+"/batch"+strconv.Itoa(batch)+"/"+st, func(b *testing.B) {
					var s Summary
					for b.Loop() {
						s = runSim(b, gpu, st, batch)
					}
					got[st] = s
					b.ReportMetric(s.ModelledTokensPerS, "modelled-tokens/s")
					b.ReportMetric(s.ColdModelledTokensPerS, "cold-modelled-tokens/s")
					b.ReportMetric(lateTokensPerS(s, batch), "late-modelled-tokens/s")
				})
			}
			if len(got) == len(strategies) {
				b.Logf("%s batch %d: %s; learn-steps %d", gpu, batch, compare(got), learnSteps(got["auto"].StepModelledUs, got["oracle"].StepModelledUs, 0.03))
			}
		}
	}
}

// compare formats auto's modelled throughput relative to each placement.
func compare(got map[string]Summary) string {
	a := got["auto"].ModelledTokensPerS
	var parts []string
	best, bestTPS := "", 0.0
	for _, st := range []string{"oracle", "static2x", "pcie5x", "gpu", "cpu"} {
		g := got[st].ModelledTokensPerS
		parts = append(parts, st+" "+strconv.FormatFloat(100*(a/g-1), 'f', 1, 64)+"%")
		if g > bestTPS {
			best, bestTPS = st, g
		}
	}
	return "auto vs " + strings.Join(parts, ", ") + " (best placement: " + best + ")"
}

// simLate is how many final steps late-modelled-tokens/s covers: the
// placement a strategy has settled on, with its learning left out.
const simLate = 16

// lateTokensPerS returns the modelled tokens per second of the last
// simLate decode steps (each yields one token per sequence).
func lateTokensPerS(s Summary, batch int) float64 {
	st := s.StepModelledUs
	if len(st) < simLate {
		return 0
	}
	us := 0.0
	for _, v := range st[len(st)-simLate:] {
		us += v
	}
	return float64(simLate*batch) / (us / 1e6)
}

// learnSteps returns the first step s from which the policy's modelled
// time over steps s… stays within tol of the oracle's over the same steps
// (len(policy) when it never does).
func learnSteps(policy, oracle []float64, tol float64) int {
	n := min(len(policy), len(oracle))
	first := n
	var p, o float64
	for s := n - 1; s >= 0; s-- {
		p += policy[s]
		o += oracle[s]
		if p > (1+tol)*o {
			break
		}
		first = s
	}
	return first
}

// TestMeterKeepsCalibrator: metering a CPU backend keeps its calibration
// (else the Scheduler gives cpu and cpu1 the default figures), calibrating
// through the meter adds no busy time, and its ops are metered; a
// backend without calibration does not gain it.
func TestMeterKeepsCalibrator(t *testing.T) {
	b, err := cpu.New("cpu1", cpu.Options{Threads: 1, CalibrationFile: "-"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	busy := new(atomic.Int64)
	m := meter(b, busy)
	c, ok := m.(backends.Calibrator)
	if !ok {
		t.Fatal("the metered CPU backend is not a backends.Calibrator")
	}
	if _, ok := m.(backends.HostMapper); !ok {
		t.Fatal("the metered CPU backend is not a backends.HostMapper")
	}
	if _, ok := m.(backends.Queuer); !ok {
		t.Fatal("the metered CPU backend is not a backends.Queuer")
	}
	if g, ok := m.(backends.HardwareGroup); !ok || g.HardwareGroup() != b.HardwareGroup() {
		t.Fatal("the metered CPU backend lost its hardware group")
	}
	if n, err := c.Calibrate(); err != nil || !(n.GFLOPS > 0) {
		t.Fatalf("Calibrate through the meter: %+v, %v", n, err)
	}
	if busy.Load() != 0 {
		t.Errorf("calibration metered as %d ns of busy time", busy.Load())
	}
	spec := kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{4}, {4}}}
	in := []backends.Buffer{backends.NewHostBuffer(b, 16), backends.NewHostBuffer(b, 16)}
	if _, err := m.Run(spec, in, backends.NewHostBuffer(b, 16)); err != nil {
		t.Fatal(err)
	}
	if busy.Load() <= 0 {
		t.Error("Run through the meter added no busy time")
	}
	s, err := sim.Open("h100", sim.DefaultOptions().WithSkipCompute(true))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := meter(s, busy).(backends.Calibrator); ok {
		t.Error("metering a simulated GPU made it a backends.Calibrator")
	}
}

// TestAutoStepModes: where the per-op learner loses to running every op on
// the GPU (mi300x with cpu2, batch 1, async: the learner's device switches
// cost the steps more than they save), -strategy auto, which chooses step
// by step between the two, comes within 2% of the all-GPU rule over 92
// measured steps, above the learner alone. (The learner's own placement
// moves to the GPU too, taught by the GPU's steps: the rule need not run
// most steps.)
func TestAutoStepModes(t *testing.T) {
	skipCompute(t)
	run := func(strategy string) Summary {
		return runSummary(t, append([]string{"-backends", "sim:cpu2,sim:mi300x", "-strategy", strategy,
			"-prompt", "4", "-tokens", "100", "-warmup", "8", "-json"}, append(simModel[:len(simModel)-2:len(simModel)-2], "-ctx", "128")...))
	}
	auto, perop, only := run("auto"), run("perop"), run("only:sim:mi300x")
	t.Logf("auto %.0f (%v), perop %.0f, only:sim:mi300x %.0f modelled tokens/s",
		auto.ModelledTokensPerS, auto.StepModes, perop.ModelledTokensPerS, only.ModelledTokensPerS)
	if auto.ModelledTokensPerS < 0.98*only.ModelledTokensPerS || auto.ModelledTokensPerS <= perop.ModelledTokensPerS {
		t.Errorf("auto %.0f modelled tokens/s: want ≥ 0.98 × only:sim:mi300x's %.0f and above perop's %.0f",
			auto.ModelledTokensPerS, only.ModelledTokensPerS, perop.ModelledTokensPerS)
	}
	var n int64
	for _, k := range auto.StepModes {
		n += k
	}
	if n != 99 || auto.StepModes["only:sim:mi300x"] < 2 {
		t.Errorf("step modes %v: want 99 decode steps, at least 2 on the GPU alone", auto.StepModes)
	}
}

// TestAutoFrozenMode: where what the learner learns from the GPU's steps
// moves its placement to a slower one (h100 with cpu2, batch 1, the GPU's
// steps not gathered: about 730 µs a step before the GPU's steps, 944
// after, the GPU alone 916), -strategy auto's frozen mode keeps the
// learner's fastest placement: over 192 measured steps auto is faster
// than the learner alone and than the GPU alone, and the frozen mode runs
// most steps. (Measured: auto 1,265–1,522 modelled tokens/s over 15 runs,
// perop 1,137–1,216, only:sim:h100 1,092. Gathered, see
// TestAutoGathersPlacedModes.)
func TestAutoFrozenMode(t *testing.T) {
	skipCompute(t)
	run := func(strategy string) Summary {
		return runSummary(t, append([]string{"-backends", "sim:cpu2,sim:h100", "-strategy", strategy, "-graphs=false",
			"-prompt", "4", "-tokens", "200", "-warmup", "8", "-json"}, append(simModel[:len(simModel)-2:len(simModel)-2], "-ctx", "256")...))
	}
	auto, perop, only := run("auto"), run("perop"), run("only:sim:h100")
	t.Logf("auto %.0f (%v), perop %.0f, only:sim:h100 %.0f modelled tokens/s",
		auto.ModelledTokensPerS, auto.StepModes, perop.ModelledTokensPerS, only.ModelledTokensPerS)
	if auto.ModelledTokensPerS <= perop.ModelledTokensPerS || auto.ModelledTokensPerS <= only.ModelledTokensPerS {
		t.Errorf("auto %.0f modelled tokens/s: want above perop's %.0f and only:sim:h100's %.0f",
			auto.ModelledTokensPerS, perop.ModelledTokensPerS, only.ModelledTokensPerS)
	}
	if auto.StepModes["frozen"] < 100 {
		t.Errorf("step modes %v: want the frozen mode on at least 100 of 199 decode steps", auto.StepModes)
	}
}

// TestAutoGathersPlacedModes: every decode step of auto whose placement
// is set before it runs and uses the GPU (frozen, or the GPU alone) is
// gathered, not only those on one GPU; the learner's and the CPU's alone
// are not. A simulated GPU that
// does not gather (mi300x: no HIP graph measured) counts none. (On h100
// beside cpu2, 192 measured steps, auto runs at 1,422–1,548 modelled
// tokens/s against only:sim:h100's 1,481. The frozen placement, some
// small ops on the CPU, gathered runs 598 µs a step where one of the
// learner's first steps was a lucky one (645 µs), 685 where none was
// (732–782), the GPU alone 673; which it is depends on the order the
// observations arrive in, which varies from run to run.)
func TestAutoGathersPlacedModes(t *testing.T) {
	skipCompute(t)
	run := func(gpu, strategy, tokens string) Summary {
		return runSummary(t, append([]string{"-backends", "sim:cpu2,sim:" + gpu, "-strategy", strategy,
			"-prompt", "4", "-tokens", tokens, "-warmup", "8", "-json"}, append(simModel[:len(simModel)-2:len(simModel)-2], "-ctx", "256")...))
	}
	auto := run("h100", "auto", "200")
	t.Logf("auto %.0f modelled tokens/s (%v, %d gathered)", auto.ModelledTokensPerS, auto.StepModes, auto.GatheredSteps)
	if placed := 199 - auto.StepModes["learned"] - auto.StepModes["only:sim:cpu2"]; auto.GatheredSteps != placed || placed < 2 {
		t.Errorf("auto gathered %d decode steps, want the %d neither the learner's nor the CPU's alone (modes %v)",
			auto.GatheredSteps, placed, auto.StepModes)
	}
	if amd := run("mi300x", "only:sim:mi300x", "20"); amd.GatheredSteps != 0 {
		t.Errorf("mi300x, which does not gather, counted %d gathered steps", amd.GatheredSteps)
	}
}

// TestAutoHomeMode: with weights in host memory auto's step modes include
// running each op where its weights live, tried at least twice, and its
// decode steps are all counted; -step-times names each step's mode; the
// steps gathered are those placed before they run with ops on the GPU
// (not the CPU's alone).
func TestAutoHomeMode(t *testing.T) {
	skipCompute(t)
	s := runSummary(t, append([]string{"-backends", "sim:desktop16,sim:pcie3x8", "-strategy", "auto", "-gpu-mem", "50%",
		"-prompt", "4", "-tokens", "40", "-json", "-step-times"}, append(simModel[:len(simModel)-2:len(simModel)-2], "-ctx", "64")...))
	var n int64
	for _, k := range s.StepModes {
		n += k
	}
	if s.StepModes["home"] < 2 || n != 39 {
		t.Errorf("step modes %v: want 39 decode steps, the home mode's among them at least twice", s.StepModes)
	}
	if want := s.StepModes["frozen"] + s.StepModes["home"] + s.StepModes["only:sim:pcie3x8"]; s.GatheredSteps != want {
		t.Errorf("%d steps gathered, want %d: the steps placed before they run with ops on the GPU (modes %v)", s.GatheredSteps, want, s.StepModes)
	}
	named := map[string]int64{}
	for _, m := range s.StepMode[1:] {
		named[m]++
	}
	if len(s.StepMode) != len(s.StepModelledUs) || s.StepMode[0] != "prompt" || named["home"] != s.StepModes["home"] {
		t.Errorf("step_mode %v for %d steps: want one a step, the prompt first, %d home", s.StepMode, len(s.StepModelledUs), s.StepModes["home"])
	}
}

// TestAutoRestoresStepModes: with -db, auto keeps its step modes' records
// in the store, and a later run of the same steps starts from them: it
// runs neither the learner alone nor each mode's warm-up, and its first
// decode step is the GPU alone's, the fastest mode (h100 beside cpu2,
// batch 1). A run of other steps (another batch) finds no records of its
// own and starts cold. (Measured over 192 steps, BENCHMARKS.md: warm
// runs 0.9999–1.0 of only:sim:h100, cold ones 0.984–0.987.)
func TestAutoRestoresStepModes(t *testing.T) {
	skipCompute(t)
	db := t.TempDir()
	var stderr string
	run := func(batch string) (s Summary) {
		s, stderr = runInfer(t, append([]string{"-backends", "sim:cpu2,sim:h100", "-strategy", "auto", "-db", db,
			"-batch", batch, "-prompt", "4", "-tokens", "40", "-json", "-step-times"}, simModel...))
		return s
	}
	cold := run("1")
	if cold.StepModes["learned"] < learnerSteps {
		t.Fatalf("cold run: step modes %v, want the learner alone first (%d steps)", cold.StepModes, learnerSteps)
	}
	warm := run("1")
	t.Logf("cold %.0f modelled tokens/s (%v), warm %.0f (%v)", cold.ModelledTokensPerS, cold.StepModes,
		warm.ModelledTokensPerS, warm.StepModes)
	if !strings.Contains(stderr, "step modes restored") {
		t.Errorf("warm run's stderr does not say the step modes were restored:\n%s", stderr)
	}
	if warm.StepModes["learned"] >= learnerSteps || len(warm.StepMode) < 2 || warm.StepMode[1] != "only:sim:h100" {
		t.Errorf("warm run: step modes %v, first decode step %q: want no learner alone, the GPU alone first",
			warm.StepModes, warm.StepMode[min(1, len(warm.StepMode)-1)])
	}
	if other := run("2"); other.StepModes["learned"] < learnerSteps || strings.Contains(stderr, "restored") {
		t.Errorf("a run at another batch: step modes %v, want the learner alone first", other.StepModes)
	}
}

// TestAutoRestoresHomeMode: with half the weights in host memory, auto's
// modes include home (each op where its weights are), and a second
// serving run restores every one of them that ran, home's included (a
// mode bounded out and never run has no record: Modes.Bound).
func TestAutoRestoresHomeMode(t *testing.T) {
	skipCompute(t)
	db := t.TempDir()
	args := append([]string{"-backends", "sim:cpu2,sim:pcie3x8", "-strategy", "auto", "-db", db, "-gpu-mem", "50%",
		"-prompt", "34", "-tokens", "12", "-requests", "2", "-json"}, simModel...)
	cold, _ := runInfer(t, args)
	warm, stderr := runInfer(t, args)
	t.Logf("cold %v, warm %v", cold.StepModes, warm.StepModes)
	if _, ok := cold.StepModes["home"]; !ok {
		t.Fatalf("cold run: step modes %v, want a home mode", cold.StepModes)
	}
	ran := 0
	for _, n := range cold.StepModes {
		if n > 0 {
			ran++
		}
	}
	if want := fmt.Sprintf("auto's %d step modes restored", ran); !strings.Contains(stderr, want) {
		t.Errorf("warm run's stderr %q: want %q (the cold run's modes %v)", stderr, want, cold.StepModes)
	}
}

// TestAutoRestoredFrozenDraw: a restored run has no frozen placement until
// the learner runs, so where frozen is drawn it runs the learner's step
// only when frozen's record is the best of all modes'; a draw against the
// odds leaves the running mode running (one-backend here), not paying a
// learner step twice the GPU alone's.
func TestAutoRestoredFrozenDraw(t *testing.T) {
	record := func(us float64) (bandit.NormalGamma, bandit.NormalGamma) {
		prior := bandit.NewPriorLn(bandit.LnUs(us), 0.5, 0.1)
		post := prior
		for range 3 {
			post.Update(bandit.LnUs(us))
		}
		return prior, post
	}
	for _, c := range []struct {
		name              string
		frozenUs, running int
		want              int
	}{
		{"frozen slower, GPU alone running", 527, 2, 2},
		{"frozen slower, learner running", 527, 0, 0},
		{"frozen best", 400, 2, 0},
	} {
		p := newStepPlacer(1)
		p.table = []stepMode{{kind: learnedMode}, {kind: frozenMode}, {kind: onlyMode, backend: 1}}
		m, err := bandit.NewModes(len(p.table), 1)
		if err != nil {
			t.Fatal(err)
		}
		for k, us := range []float64{980, float64(c.frozenUs), 469} {
			prior, post := record(us)
			if err := m.Restore(k, prior, post); err != nil {
				t.Fatal(err)
			}
		}
		p.modes, p.restored = m, true
		p.cur.Store(int32(c.running))
		if got := p.restoredFrozen(); got != c.want {
			t.Errorf("%s: a draw of frozen runs mode %d, want %d", c.name, got, c.want)
		}
	}
}

// TestAutoRestoredFrozenRetry: in a run restored from a store, before the
// learner has run (no frozen placement), a retry of frozen that comes due
// runs the running mode in its place once, not at every step after: the
// modes' records are those of a restored h100 beside cpu2 at batch 1
// (cmd/infer -db), the CPU alone 1.19× the GPU alone's step, frozen
// 1.42×. The CPU's own retry comes due first, and while it runs frozen's
// does; without Modes.Skip, frozen stayed due, and the CPU ran 96 steps in
// a row in that run (94 here) until the learner's retry gave frozen a
// placement.
func TestAutoRestoredFrozenRetry(t *testing.T) {
	us := []float64{2700, 1730, 1450, 1220} // learned, frozen, only:cpu, only:gpu
	p := newStepPlacer(1)
	p.table = []stepMode{{kind: learnedMode}, {kind: frozenMode}, {kind: onlyMode, backend: 0}, {kind: onlyMode, backend: 1}}
	p.offHost = []bool{false, true}
	m, err := bandit.NewModes(len(p.table), 1)
	if err != nil {
		t.Fatal(err)
	}
	for k, x := range us {
		prior := bandit.NewPriorLn(bandit.LnUs(x), 0.5, 0.1)
		post := prior
		for range 3 {
			post.Update(bandit.LnUs(x))
		}
		if err := m.Restore(k, prior, post); err != nil {
			t.Fatal(err)
		}
	}
	p.modes, p.restored = m, true
	p.cur.Store(3)
	run, longest := 0, 0
	for range 600 {
		tk, _ := p.begin()
		if tk.mode == 2 {
			run++
		} else {
			run = 0
		}
		longest = max(longest, run)
		if err := p.end(tk, us[tk.mode]); err != nil {
			t.Fatal(err)
		}
	}
	if runs := m.Runs(); runs[2] == 0 {
		t.Fatalf("the CPU alone never ran in 600 steps (runs %v): its retry did not come due", runs)
	}
	if longest > 4 {
		t.Errorf("the CPU alone, 1.19× the GPU alone, ran %d steps in a row (runs %v), want ≤ 4: its retry's", longest, m.Runs())
	}
}

// setModesAfterLearner sets p's modes up (stepPlacer.setModes) as after
// the learner's steps: one bucket of 100 ops a step whose arms, p.names
// in order, have the means meanUs, and the learner's and frozen steps
// all of stepUs.
func setModesAfterLearner(t *testing.T, p *stepPlacer, meanUs []float64, stepUs float64) {
	t.Helper()
	arms := make([]adaptive.ArmTelemetry, len(meanUs))
	for i, us := range meanUs {
		arms[i] = adaptive.ArmTelemetry{Backend: p.names[i], MeanUs: us}
	}
	p.telemetry = func() adaptive.Telemetry {
		return adaptive.Telemetry{Buckets: []adaptive.BucketTelemetry{{Arms: arms}}}
	}
	p.count[0] = 100
	p.frozenUs = stepUs
	for range learnerSteps {
		p.learnUs = append(p.learnUs, stepUs)
	}
	if err := p.setModes(); err != nil {
		t.Fatal(err)
	}
}

// TestAutoCopiesBesideKernels: a backend's predicted step is the longer
// of its ops' means and its weight copies, which run on the link beside
// the kernels, not their sum: here the GPU's ops sum to 1,600 µs and its
// copies to 1,650 against the CPU's 1,900, as only:sim:pcie3x8 beside
// sim:desktop16 at -gpu-mem 50% (model of dim 256, 12 layers), which ran
// 1,829 µs a step. Summed (3,250 µs, past ruleSlack of 1,900) the GPU was
// no mode at all; taken as the longer, it is one, and a copy-bound GPU
// that is surely slower still is not.
func TestAutoCopiesBesideKernels(t *testing.T) {
	for _, c := range []struct {
		copyUs float64
		mode   bool
	}{{1650, true}, {3000, false}} {
		p := newStepPlacer(1)
		p.names = []string{"cpu", "gpu"}
		p.copyUs = []float64{0, c.copyUs}
		setModesAfterLearner(t, p, []float64{19, 16}, 1900)
		got := false
		for k := range p.table {
			got = got || p.modeName(k) == "only:gpu"
		}
		if got != c.mode {
			t.Errorf("GPU ops 1,600 µs, copies %g µs, the CPU's step 1,900: only:gpu a mode %t, want %t (modes %d)", c.copyUs, got, c.mode, len(p.table))
		}
	}
}

// TestSharedBackendsNotBoundedOut: a backend that shares its hardware
// with another (cpu and cpu1) is tried alone right after the learner
// even where the sum of its per-op means is surely slower than the
// learner's steps, as that sum was timed beside the other backend's ops
// and is no step's least; a backend that shares nothing waits for its
// retry (Modes.Bound), and one predicted past ruleSlack is no mode.
// Here cpu1's ops sum to 9,000 µs and cpu's to 8,000 or 12,000 against
// learner steps of 6,500 (on this machine the sum ran 15-25% above
// only:cpu's own steps, and in some runs past ruleSlack).
func TestSharedBackendsNotBoundedOut(t *testing.T) {
	if got := sharesHardware([]backends.Backend{openT(t, "cpu"), openT(t, "cpu1"), openT(t, "sim:h100")}); fmt.Sprint(got) != "[true true false]" {
		t.Fatalf("sharesHardware(cpu, cpu1, sim:h100) = %v, want [true true false]", got)
	}
	// cpu's ops at 80 µs sum to a step within ruleSlack of the frozen
	// one's 6,500 µs; at 120 they sum to 1.85× it.
	for _, c := range []struct {
		shared bool
		cpuUs  float64
	}{{true, 80}, {false, 80}, {true, 120}, {false, 120}} {
		shared := c.shared
		p := newStepPlacer(1)
		p.names = []string{"cpu", "cpu1"}
		p.shared = []bool{shared, shared}
		p.copyUs = make([]float64, 2)
		setModesAfterLearner(t, p, []float64{c.cpuUs, 90}, 6500)
		ran := map[string]int{}
		for range 8 {
			k := p.modes.Next()
			ran[p.modeName(k)]++
			if err := p.modes.Done(k, 6500); err != nil {
				t.Fatal(err)
			}
		}
		tried := ran["only:cpu"] > 0 && ran["only:cpu1"] > 0
		if tried != shared {
			t.Errorf("backends sharing hardware %t, cpu's ops %g µs: the first 8 steps ran %v", shared, c.cpuUs, ran)
		}
	}
}
