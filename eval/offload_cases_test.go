package eval

import (
	"fmt"

	"github.com/adaptsched/adaptsched/sim"
)

// offloadCase is one cell of the offload targets' grid.
type offloadCase struct {
	name string
	gpu  string
	opt  sim.OffloadOptions
}

// offloadProfiles are the GPUs of the offload targets.
var offloadProfiles = []string{"pcie3x8", "pcie4x16", "pcie5x16", "igpu"}

// offloadCases returns the targets' grid: each profile × {64 prompts of
// 34 tokens, 2 prompts of 5,000 at ubatch 512, 256 decode steps at batch
// 1 and 8} × {dense with half the layers' weights in host memory; MoE
// (Mixtral 8x7B, routing) with every expert in host memory and a GPU
// budget of 10%, 50%, 90% of the experts}.
func offloadCases(routing string) ([]offloadCase, error) {
	rt, err := sim.ReadRouting(routing, sim.Mixtral8x7B.Layers, sim.Mixtral8x7B.Experts)
	if err != nil {
		return nil, err
	}
	mixes := []struct {
		name string
		o    sim.OffloadOptions
	}{
		{"prompt34", sim.OffloadOptions{Rounds: 64, Batch: 1, Prompt: 34}},
		{"prompt5000", sim.OffloadOptions{Rounds: 2, Batch: 1, Prompt: 5000}},
		{"decode-b1", sim.OffloadOptions{Rounds: 1, Batch: 1, Decode: 256}},
		{"decode-b8", sim.OffloadOptions{Rounds: 1, Batch: 8, Decode: 256}},
	}
	var cs []offloadCase
	for _, g := range offloadProfiles {
		for _, m := range mixes {
			o := m.o
			o.GPUShare, o.Seed = 0.5, 1
			cs = append(cs, offloadCase{fmt.Sprintf("%s/%s/dense", g, m.name), g, o})
			for _, b := range []float64{0.1, 0.5, 0.9} {
				o := m.o
				o.MoE, o.Routing, o.GPUShare, o.Seed = true, &rt, b, 1
				cs = append(cs, offloadCase{fmt.Sprintf("%s/%s/moe-%.0f%%", g, m.name, b*100), g, o})
			}
		}
	}
	return cs, nil
}

// runOffloadCase runs every offload policy on c.
func runOffloadCase(c offloadCase) (map[string]OffloadResult, error) {
	w, err := sim.NewOffload(c.opt)
	if err != nil {
		return nil, err
	}
	e, err := NewOffloadEnv(w, sim.MustProfile("desktop16"), sim.MustProfile(c.gpu), 1)
	if err != nil {
		return nil, err
	}
	rs := map[string]OffloadResult{}
	for _, p := range OffloadPolicies {
		r, err := e.Run(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		rs[p] = r
	}
	return rs, nil
}
