package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const mlRouting = "../../sim/testdata/moe/expert_popularity_machine_learning.json"

func TestOffloadWorkload(t *testing.T) {
	var out, errs bytes.Buffer
	args := []string{"-workload", "offload-moe", "-sim-gpu", "pcie3x8", "-moe", "8,2", "-gpu-mem", "10%", "-routing", mlRouting,
		"-routing-drift", strings.Replace(mlRouting, "machine_learning", "college_medicine", 1) + "@0.5", "-prompt", "34", "-rounds", "2", "-json"}
	if code := run(args, nil, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	var rep OffloadReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.GPU != "sim:pcie3x8" || rep.CPU != "sim:desktop16" || rep.Steps != 2 || rep.BudgetBytes <= 0 || len(rep.Policies) != 7 {
		t.Fatalf("report %+v", rep)
	}
	best := 1e300
	for _, p := range rep.Policies {
		best = min(best, p.TotalMs)
		if p.MaxCachedBytes > rep.BudgetBytes {
			t.Errorf("%s cached %d bytes over the budget %d", p.Policy, p.MaxCachedBytes, rep.BudgetBytes)
		}
		if p.Policy == "ikllama" && (p.Threshold == nil || *p.Threshold != 128) {
			t.Errorf("ikllama's expert threshold %v, want 32·8/2 = 128", p.Threshold)
		}
	}
	for _, p := range rep.Policies {
		if p.XBest < 1 || p.XBest == 1 && p.TotalMs != best {
			t.Errorf("%s: ×best %.3f", p.Policy, p.XBest)
		}
	}
	out.Reset()
	if code := run([]string{"-workload", "offload-dense", "-gpu-mem", "50%", "-decode", "4", "-batch", "8", "-policies", "llamacpp,thompson"}, nil, &out, &errs); code != 0 {
		t.Fatalf("dense: exit %d: %s", code, errs.String())
	}
	if !strings.Contains(out.String(), "offload-dense/llama-3-8b") || !strings.Contains(out.String(), "llamacpp") || strings.Contains(out.String(), "lru") {
		t.Errorf("dense table:\n%s", out.String())
	}
}

// TestOffloadDriftPathWithAt: -routing-drift splits FILE@F at its last
// @, so that a path holding one still reads.
func TestOffloadDriftPathWithAt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run@2")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(mlRouting)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "routing.json")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	args := []string{"-workload", "offload-moe", "-decode", "4", "-policies", "thompson", "-routing-drift", file + "@0.5"}
	if code := run(args, nil, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
}

func TestOffloadErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-moe", "16,2", "-routing", mlRouting}, "expert_popularity_machine_learning.json: layer 0: 8 experts, want 16"},
		{[]string{"-moe", "8"}, `-moe "8": want E,K`},
		{[]string{"-moe", "2,3"}, `-moe "2,3"`},
		{[]string{"-gpu-mem", "120%"}, "share in 0–100%"},
		{[]string{"-gpu-mem", "lots"}, "want bytes or a share"},
		{[]string{"-routing-drift", mlRouting}, "want FILE@F"},
		{[]string{"-routing-drift", mlRouting + "@1.5"}, "want FILE@F"},
		{[]string{"-routing", "none.json"}, "-routing: sim: bad routing: open none.json"},
		{[]string{"-routing-drift", "none.json@0.5"}, "-routing-drift: sim: bad routing: open none.json"},
		{[]string{"-zipf", "-1"}, "-zipf: sim: bad routing: zipf over 32 layers of 8 experts, exponent -1"},
		{[]string{"-ubatch", "0"}, "-ubatch 0: want ≥ 1"},
		{[]string{"-policies", "static2x"}, `unknown offload policy "static2x"`},
		{[]string{"-sim-gpu", "desktop16"}, "want a GPU profile"},
		{[]string{"-exec", "async"}, "-exec serial only"},
	} {
		var out, errs bytes.Buffer
		args := append([]string{"-workload", "offload-moe"}, c.args...)
		if code := run(args, nil, &out, &errs); code != 2 || !strings.Contains(errs.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", c.args, code, errs.String(), c.want)
		}
	}
}

// TestOffloadBudgetOverCard: -gpu-mem beyond the simulated card's memory
// (every Mixtral expert on a 24 GiB RTX 3090) is one error naming the
// card and the sizes; 90% of the experts fit.
func TestOffloadBudgetOverCard(t *testing.T) {
	for _, c := range []struct {
		mem  string
		code int
	}{{"100%", 1}, {"90%", 0}} {
		var out, errs bytes.Buffer
		args := []string{"-workload", "offload-moe", "-sim-gpu", "pcie3x8", "-moe", "8,2", "-gpu-mem", c.mem, "-decode", "2", "-policies", "thompson"}
		code := run(args, nil, &out, &errs)
		if code != c.code || c.code != 0 && !strings.Contains(errs.String(), "exceed pcie3x8's memory of 24.00 GiB") {
			t.Errorf("-gpu-mem %s: exit %d, stderr %q, want %d", c.mem, code, errs.String(), c.code)
		}
	}
}
