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

// TestOffloadRoutingFileErrors: a -routing or -routing-drift file that
// is missing, malformed or of the wrong shape is bad input, as a bad
// trace or -table is: one line naming the file, no usage hint, exit 1
// (it exited 2, the status of a bad flag).
func TestOffloadRoutingFileErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte("{\"expert_popularity\": [[1, 2],,]}"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-moe", "16,2", "-routing", mlRouting}, "replay: -routing: sim: bad routing: " + mlRouting + ": layer 0: 8 experts, want 16"},
		{[]string{"-routing", "none.json"}, "replay: -routing: sim: bad routing: open none.json"},
		{[]string{"-routing-drift", "none.json@0.5"}, "replay: -routing-drift: sim: bad routing: open none.json"},
		{[]string{"-routing", bad}, "replay: -routing: sim: bad routing: " + bad + ": line 1, column 32"},
	} {
		var out, errs bytes.Buffer
		args := append([]string{"-workload", "offload-moe"}, c.args...)
		code := run(args, nil, &out, &errs)
		if code != 1 || !strings.HasPrefix(errs.String(), c.want) || strings.Count(errs.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q, want 1 and the one line %q", c.args, code, errs.String(), c.want)
		}
	}
}

func TestOffloadErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-moe", "8"}, `-moe "8": want E,K`},
		{[]string{"-moe", "2,3"}, `-moe "2,3"`},
		{[]string{"-gpu-mem", "120%"}, "share in 0–100%"},
		{[]string{"-gpu-mem", "lots"}, "want bytes or a share"},
		{[]string{"-routing-drift", mlRouting}, "want FILE@F"},
		{[]string{"-routing-drift", mlRouting + "@1.5"}, "want FILE@F"},
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

// TestOffloadFlagsIgnored: a flag the chosen path would ignore is one
// usage error naming it, exit 2: the offload-only flags outside the
// offload workloads, the flags runOffload never reads inside them, and
// -moe or -zipf with offload-dense. The flags each path reads still pass.
func TestOffloadFlagsIgnored(t *testing.T) {
	trace := "testdata/exact.jsonl"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-routing", "/nonexistent.json", trace}, "-routing sets an offload workload"},
		{[]string{"-gpu-mem", "300%", trace}, "-gpu-mem sets an offload workload"},
		{[]string{"-moe", "banana", trace}, "-moe sets an offload workload"},
		{[]string{"-prompt", "-5", trace}, "-prompt sets an offload workload"},
		{[]string{"-batch", "-3", trace}, "-batch sets an offload workload"},
		{[]string{"-ubatch", "8", "-workload", "decode"}, "-ubatch sets an offload workload"},
		{[]string{"-decode", "2", "-table", "testdata/table.csv"}, "-decode sets an offload workload"},
		{[]string{"-rounds", "2"}, "-rounds sets an offload workload"},
		{[]string{"-routing-drift", "x@0.5", trace}, "-routing-drift sets an offload workload"},
		{[]string{"-workload", "offload-moe", "-plot", filepath.Join(t.TempDir(), "p.png")}, "-plot does not apply to -workload offload-moe"},
		{[]string{"-workload", "offload-moe", "-db", filepath.Join(t.TempDir(), "db")}, "-db does not apply"},
		{[]string{"-workload", "offload-moe", "-figures", "x: kind=cpu"}, "-figures does not apply"},
		{[]string{"-workload", "offload-dense", "-ops", "5"}, "-ops does not apply to -workload offload-dense"},
		{[]string{"-workload", "offload-moe", "-top", "3"}, "-top does not apply"},
		{[]string{"-workload", "offload-moe", "-fleet-serve", "0"}, "-fleet-serve does not apply"},
		{[]string{"-workload", "offload-moe", "-model", "llama-3.2-1b"}, "-model does not apply"},
		{[]string{"-workload", "offload-moe", "-hysteresis", "0.2"}, "-hysteresis does not apply"},
		{[]string{"-workload", "offload-dense", "-moe", "8,2"}, "-moe applies to -workload offload-moe only"},
		{[]string{"-workload", "offload-dense", "-zipf", "2"}, "-zipf applies to -workload offload-moe only"},
	} {
		var out, errs bytes.Buffer
		code := run(c.args, nil, &out, &errs)
		if code != 2 || !strings.Contains(errs.String(), "replay: "+c.want) || strings.Count(errs.String(), "\n") != 2 || out.Len() > 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, code, out.String(), errs.String(), c.want)
		}
	}
	for _, args := range [][]string{
		{"-workload", "offload-moe", "-zipf", "2", "-seed", "3", "-json", "-sim-cpu", "desktop16", "-exec", "serial", "-decode", "2", "-ubatch", "64", "-batch", "2", "-policies", "thompson"},
		{"-zipf", "2", "-ops", "100", "-table", "testdata/table.csv", "-policies", "oracle"},
	} {
		var out, errs bytes.Buffer
		if code := run(args, nil, &out, &errs); code != 0 {
			t.Errorf("%v: exit %d, %s", args, code, errs.String())
		}
	}
}
