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

// everyOtherExpert places a MoE model's experts alternately on backend
// 0 and 1 and every other op on backend 1. An expert's gate and up
// projections are the QuantizedMatMuls of ffn rows, its down projection
// the one of ffn columns, its SwiGLU between them.
type everyOtherExpert struct {
	ffn   int
	projs int // gate and up projections placed so far
}

func (p *everyOtherExpert) Name() string { return "every-other-expert" }
func (p *everyOtherExpert) Place(s kernels.Spec, _ adaptive.Residency, _ adaptive.BucketID) int {
	expert := (p.projs - 1) / 2
	switch {
	case s.Op == kernels.QuantizedMatMul && s.In[1][0] == p.ffn:
		p.projs++
		expert = (p.projs - 1) / 2
	case s.Op == kernels.SwiGLU, s.Op == kernels.QuantizedMatMul && s.In[1][1] == p.ffn:
	default:
		return 1
	}
	return expert % 2
}
func (p *everyOtherExpert) Observed(adaptive.BucketID, int, float64) {}

// TestMoEExpertsOverlap: experts placed on two devices run at once. A
// MoE model (8 experts, top 4) decodes on sim:cpu2 and sim:igpu with
// every other expert on the CPU: its steps' makespan is below the two
// devices' busy time together. Reading each expert's output before
// issuing the next ran them one after another, for a makespan above that
// sum. The logits are plain "cpu"'s.
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
