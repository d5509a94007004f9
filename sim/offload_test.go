package sim

import (
	"errors"
	"strings"
	"testing"
)

func TestOffloadMoE(t *testing.T) {
	rt, err := ReadRouting("testdata/moe/expert_popularity_machine_learning.json", 32, 8)
	if err != nil {
		t.Fatal(err)
	}
	dr, err := ReadRouting("testdata/moe/expert_popularity_college_medicine.json", 32, 8)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewOffload(OffloadOptions{MoE: true, Routing: &rt, Drift: &dr, DriftAt: 0.5, GPUShare: 0.1, Rounds: 2, Batch: 1, Prompt: 1000, UBatch: 512, Decode: 8, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	// 2 rounds of 2 micro-batches (512 + 488 tokens) and 8 decode steps.
	if w.Steps != 2*(2+8) {
		t.Errorf("%d steps, want 20", w.Steps)
	}
	if w.Budget != w.ExpertBytes/10 || w.ExpertBytes <= 0 {
		t.Errorf("budget %d of %d expert bytes, want a tenth", w.Budget, w.ExpertBytes)
	}
	var experts, tokens512 int
	slots := map[int]int{} // step → routed rows in layer 0
	for i, op := range w.Ops {
		if op.Weight < 0 {
			continue
		}
		wt := w.Weights[op.Weight]
		if wt.Expert >= 0 {
			experts++
			if wt.OnGPU {
				t.Fatalf("op %d: expert %s lives on the GPU", i, wt.Name)
			}
			if wt.Layer == 0 {
				slots[op.Step] += op.Spec.In[0][0]
			}
		} else if !wt.OnGPU {
			t.Fatalf("op %d: %s is not an expert but lives in host memory", i, wt.Name)
		}
		if op.Tokens == 512 {
			tokens512++
		}
	}
	// Top-2 routing: each step routes 2 rows per token in every layer.
	for s, n := range slots {
		if tok := w.Ops[0].Tokens; s == 0 && n != 2*tok {
			t.Errorf("step 0 routes %d rows in layer 0, want %d", n, 2*tok)
		}
	}
	if experts == 0 || tokens512 == 0 {
		t.Errorf("%d expert ops, %d at 512 tokens", experts, tokens512)
	}
	if w.DriftOp <= 0 || w.DriftOp >= len(w.Ops) || w.Ops[w.DriftOp].Step != 10 {
		t.Errorf("drift at op %d (step %d), want the first op of step 10", w.DriftOp, w.Ops[min(w.DriftOp, len(w.Ops)-1)].Step)
	}
}

func TestOffloadDenseHalf(t *testing.T) {
	w, err := NewOffload(OffloadOptions{GPUShare: 0.5, Rounds: 1, Batch: 1, Decode: 2})
	if err != nil {
		t.Fatal(err)
	}
	var host, gpu int64
	first := map[bool]int{}
	for _, wt := range w.Weights {
		if wt.OnGPU {
			gpu += wt.Bytes
		} else {
			host += wt.Bytes
			first[false] = max(first[false], wt.Layer)
		}
	}
	// The last layers live on the GPU, as llama.cpp -ngl places them.
	if host == 0 || gpu == 0 || float64(gpu) > 0.5*float64(host+gpu)+float64(w.Weights[len(w.Weights)-1].Bytes) {
		t.Errorf("host %d, GPU %d bytes: want about half in each", host, gpu)
	}
	if first[false] >= w.Model.Layers/2+1 {
		t.Errorf("a host weight in layer %d: the first layers stay in host memory", first[false])
	}
	if w.Budget < 0 {
		t.Errorf("budget %d", w.Budget)
	}
}

func TestOffloadErrors(t *testing.T) {
	rt, _ := ReadRouting("testdata/moe/expert_popularity_machine_learning.json", 0, 0)
	cases := []struct {
		o    OffloadOptions
		want string
	}{
		{OffloadOptions{MoE: true, Experts: 16, TopK: 2, Routing: &rt, Rounds: 1, Batch: 1, Decode: 1}, "expert_popularity_machine_learning.json: 32 layers × 8 experts, the model has 32 × 16"},
		{OffloadOptions{MoE: true, Rounds: 1, Batch: 1, Decode: 1}, "needs a routing"},
		{OffloadOptions{Rounds: 1, Batch: 1}, "some prompt or decode"},
		{OffloadOptions{Rounds: 1, Batch: 1, Decode: 1, GPUShare: 1.5}, "share in [0, 1]"},
		{OffloadOptions{Rounds: 1, Batch: 1, Decode: 1, DriftAt: 2}, "drift at 2"},
		{OffloadOptions{MoE: true, Experts: 8, TopK: 9, Routing: &rt, Rounds: 1, Batch: 1, Decode: 1}, "9 per token"},
	}
	for _, c := range cases {
		_, err := NewOffload(c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.o, err, c.want)
		}
	}
	if _, err := NewOffload(cases[0].o); !errors.Is(err, ErrBadRouting) {
		t.Errorf("a routing of the wrong shape: %v, want ErrBadRouting", err)
	}
}
