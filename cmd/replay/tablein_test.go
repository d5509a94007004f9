package main

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestTableInputs: -table reads the real inputs as they are: a perf-table
// CSV with free-text shapes, one StarPU model file, and a codelets/45
// directory of them, whose left-out footprint is listed on stderr; a
// malformed model fails with its file:line.
func TestTableInputs(t *testing.T) {
	const data = "../../sim/testdata/"
	for _, c := range []struct {
		table, head, errs string
	}{
		{data + "tables/deepbench_knl_vs_titanx_pascal.csv", "backends sim:cpu, sim:gpu, seed 1", ""},
		{data + "tables/starpu_mirage.csv", "3000 ops, 49 buckets, backends sim:cpu, sim:gpu", ""},
		{data + "starpu/45/chol_model_potrf.mirage", "3000 ops, 4 buckets, backends sim:cpu0_impl0, sim:cuda0_impl0, sim:cuda1_impl0, sim:cuda2_impl0", ""},
		{data + "starpu/45", "3000 ops, 20 buckets, backends sim:cpu0_impl0, sim:cuda0_impl0, sim:cuda1_impl0, sim:cuda2_impl0",
			"left out 1 footprint(s) (a table workload needs every row on every arm):\n  " + data + "starpu/45/starpu_sgemm_gemm.mirage:48: footprint 2eaa41c6"},
	} {
		code, out, errs := replayRun(t, "", "-table", c.table, "-ops", "3000", "-policies", "oracle,cpu,gpu")
		if code != 0 || !strings.Contains(out, c.head) || !strings.Contains(errs, c.errs) {
			t.Errorf("%s: exit %d, report %.200q, stderr %q; want %q and %q", c.table, code, out, errs, c.head, c.errs)
		}
	}
	dir := data + "starpu/45"
	if code, _, errs := replayRun(t, "", "-table", dir, "-ops", "100", "-policies", "roofline", "-figures", "cuda0_impl0: gflops=515 membw_gbps=150"); code != 0 {
		t.Errorf("-figures: exit %d, %q", code, errs)
	}
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"-table", dir, "-figures", "cuda7_impl0: gflops=1"}, 1, `replay: -figures: sim: bad perf table: ` + dir + `: figures for backend "cuda7_impl0", which has no rows`},
		{[]string{"-figures", "gpu: gflops=1"}, 2, "-figures gives a -table backend its figures: give -table"},
	} {
		if code, _, errs := replayRun(t, "", c.args...); code != c.code || !strings.Contains(errs, c.msg) {
			t.Errorf("%v: exit %d, %q; want %d, %q", c.args, code, errs, c.code, c.msg)
		}
	}
	bad := filepath.Join(t.TempDir(), "m.host")
	writeFile(t, bad, "# Performance Model Version\n45\n# number of combinations\nx\n")
	if code, _, errs := replayRun(t, "", "-table", bad); code != 1 || !strings.Contains(errs, bad+":4: the number of combinations") {
		t.Errorf("bad model: exit %d, %q", code, errs)
	}
}

// TestREADMETableFigure: the README's figure for the real tables at the
// default size is what its printed command gives (here DeepBench, seed
// 1, thompson alone: the draws and the oracle are the same whichever
// policies run beside it).
func TestREADMETableFigure(t *testing.T) {
	readme := readFile(t, "../../README.md")
	m := regexp.MustCompile(`(\d+\.\d+)–(\d+\.\d+)% at the default 50,000 ops`).FindStringSubmatch(readme)
	if m == nil || !strings.Contains(readme, "go run ./cmd/replay -table sim/testdata/tables/deepbench_knl_vs_titanx_pascal.csv -seed S") {
		t.Fatal("README.md no longer states the tables' figure with its command")
	}
	lo, _ := strconv.ParseFloat(m[1], 64)
	hi, _ := strconv.ParseFloat(m[2], 64)
	r := replayJSON(t, "-policies", "thompson,oracle", "-seed", "1", "-table", "../../sim/testdata/tables/deepbench_knl_vs_titanx_pascal.csv")
	if got := r.Policies[0].RegretPct; got < lo || got > hi {
		t.Errorf("thompson's regret %.3f%%, outside the README's %v–%v%%", got, lo, hi)
	}
}
