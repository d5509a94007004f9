package main

import (
	"strings"
	"testing"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/executor"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/sim"
)

// everyOtherExpert places a MoE model's expert ops alternately on
// backend 0 and 1 and every other op on backend 1: the i-th op of each
// kind, counted over the run, on backend i%2. The kinds are the
// QuantizedMatMuls of ffn rows (gates and ups), the SwiGLUs and the
// QuantizedMatMuls of ffn columns (downs). Experts are issued by
// projection (moeFFN), so the i-th SwiGLU and the i-th down are of one
// expert; its gate and up may be placed apart.
type everyOtherExpert struct {
	ffn  int
	seen [3]int // expert ops of each kind placed so far
}

func (p *everyOtherExpert) Name() string { return "every-other-expert" }
func (p *everyOtherExpert) Place(s kernels.Spec, _ adaptive.Residency, _ adaptive.BucketID) int {
	var k int
	switch {
	case s.Op == kernels.QuantizedMatMul && s.In[1][0] == p.ffn:
		k = 0
	case s.Op == kernels.SwiGLU:
		k = 1
	case s.Op == kernels.QuantizedMatMul && s.In[1][1] == p.ffn:
		k = 2
	default:
		return 1
	}
	p.seen[k]++
	return p.seen[k] % 2
}
func (p *everyOtherExpert) Observed(adaptive.BucketID, int, float64) {}

// TestMoEExpertsOverlap: experts placed on two devices run at once. A
// MoE model (8 experts, top 4) decodes on sim:cpu2 and sim:igpu with
// every other expert op on the CPU (everyOtherExpert): its steps'
// makespan is below the two devices' busy time together. Reading each
// expert's output before issuing the next ran them one after another,
// for a makespan above that sum. The logits are plain "cpu"'s.
func TestMoEExpertsOverlap(t *testing.T) {
	cfg := ModelConfig{Dim: 256, Layers: 2, Heads: 4, KVHeads: 2, FFN: 1024, Vocab: 512, Ctx: 32, Seed: 3, Experts: 8, TopK: 4}
	want := serveModel(t, openT(t, "cpu"), cfg, 7, 3, nil, func() {})
	bes, _, clk, err := openBackends("sim:cpu2,sim:igpu", sim.Async, func(backends.Backend) {})
	if err != nil {
		t.Fatal(err)
	}
	e, err := executor.New(executor.Config{Backends: bes, Seed: 1, NoCalibration: true, Placer: &everyOtherExpert{ffn: cfg.FFN}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var steps []sim.TimelineStats
	got := serveModel(t, e, cfg, 7, 3, nil, func() { steps = append(steps, clk.read()) })
	closeLogits(t, "moe", got, want)
	for i := 1; i < len(steps); i++ {
		d := steps[i].Sub(steps[i-1])
		makespan, busy := d.MakespanUs, 0.0
		for _, l := range d.Lanes {
			if !strings.HasSuffix(l.Name, " link") {
				busy += l.BusyUs
			}
		}
		t.Logf("step %d: makespan %.1f µs, the devices busy %.1f µs together", i, makespan, busy)
		if makespan >= busy {
			t.Errorf("step %d: makespan %.1f µs, not below the devices' busy time together (%.1f µs): the experts ran one after another", i, makespan, busy)
		}
	}
}

// TestMoEByProjection: experts issued by projection (moeFFN) are decided
// with the layer's other experts in the GPU's queue, so the learner sends
// some to the CPU, which runs them beside the GPU. A MoE model (8
// experts, top 2, batch 4) on sim:cpu2 and sim:igpu: the learner alone
// (perop) decodes at least 1.2× as fast as the GPU alone. (Measured:
// 1.256× since a handoff between the devices costs what backends/rocm
// and backends/cpu pay for it (sim's TestGPUWaitsForOtherDevicesOnHost,
// TestCPUWaitsForGPUResumes); 1.42× while it was free, when experts
// issued expert by expert read 1.26×.)
func TestMoEByProjection(t *testing.T) {
	skipCompute(t)
	run := func(strategy string) float64 {
		return runSummary(t, append([]string{"-backends", "sim:cpu2,sim:igpu", "-moe", "8,2", "-batch", "4", "-strategy", strategy,
			"-prompt", "4", "-tokens", "40", "-warmup", "8", "-json"}, simModel...)).ModelledTokensPerS
	}
	perop, gpu := run("perop"), run("only:sim:igpu")
	t.Logf("perop %.0f, only:sim:igpu %.0f modelled tokens/s: %.3f×", perop, gpu, perop/gpu)
	if perop < 1.2*gpu {
		t.Errorf("perop %.0f modelled tokens/s, %.3f× only:sim:igpu's %.0f: want ≥ 1.2×", perop, perop/gpu, gpu)
	}
}
