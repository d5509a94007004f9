package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"

	"github.com/adaptsched/adaptsched/eval"
	"github.com/adaptsched/adaptsched/trace"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files and the embedded default trace")

// replayRun runs the command and returns its exit status and outputs.
func replayRun(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// TestGolden checks the table and the -json output of small traces, a
// trace with a perf-table model, a small Chrome trace (hand-written, in
// the Kineto layout) with a profile model, a perf table's workload and a simulator
// workload against testdata/*.golden (go test ./cmd/replay -rewrite).
// deterministic are the policies whose output the goldens hold: every one
// but thompson, whose figures move with every tuning of the bandit and are
// bounded by TestThompsonBounded instead.
const deterministic = "static2x,pcie5x,thresholds,roofline,calibrate,egreedy,ucb1,oracle,cpu,gpu"

// goldenCases are the inputs of TestGolden and TestThompsonBounded.
var goldenCases = []struct {
	name string
	args []string
	// thompson's regret bound in %: see TestThompsonBounded.
	maxThompson float64
}{
	{"small", []string{"-max-excluded", "25", "testdata/small.jsonl"}, 1},
	{"small-table", []string{"-table", "testdata/table.csv", "testdata/small.jsonl"}, 1},
	{"small-profile", []string{"-sim-gpu", "mi250", "testdata/small.jsonl"}, 1.5},
	{"exact", []string{"testdata/exact.jsonl"}, 3},
	{"table-workload", []string{"-table", "testdata/table.csv", "-ops", "3000"}, 1},
	{"decode", []string{"-workload", "decode", "-ops", "3000"}, 1.5},
	// The model before queues, as recorded before -exec existed.
	{"decode-serial", []string{"-workload", "decode", "-ops", "3000", "-exec", "serial"}, 1.5},
	{"chrome", []string{"-sim-gpu", "h100", "testdata/chrome.json"}, 1},
}

func TestGolden(t *testing.T) {
	for _, c := range goldenCases {
		for _, js := range []bool{false, true} {
			name, args := c.name, append([]string{"-policies", deterministic}, c.args...)
			if js {
				name, args = name+".json", append([]string{"-json"}, args...)
			}
			t.Run(name, func(t *testing.T) {
				code, out, errs := replayRun(t, "", args...)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, errs)
				}
				golden := filepath.Join("testdata", name+".golden")
				if *rewrite {
					if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run go test ./cmd/replay -rewrite)", err)
				}
				if out != string(want) {
					t.Errorf("output differs from %s:\n%s\nwant:\n%s", golden, out, want)
				}
			})
		}
	}
}

// TestThompsonBounded holds thompson to a regret bound on each golden
// input, a margin above what it measured (small −0.51%, small-table
// −0.46%, small-profile 1.15%: one trial on 120 ops is about 1%, exact
// 0.34%, table-workload, decode and chrome near 0), and checks what its
// report says of it: its reasons add up to its decisions, and its
// learn % is the share of Explore and Prior.
func TestThompsonBounded(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			r := replayJSON(t, append([]string{"-policies", "thompson,oracle"}, c.args...)...)
			th := r.Policies[0]
			if th.Name != "thompson" || !(th.RegretPct <= c.maxThompson) {
				t.Errorf("%s regret %.2f%%, want ≤ %v%%", th.Name, th.RegretPct, c.maxThompson)
			}
			var n int64
			for _, k := range th.Reasons {
				n += k
			}
			if n != r.Ops {
				t.Errorf("reasons %v add up to %d, want the %d decisions", th.Reasons, n, r.Ops)
			}
			learn := float64(th.Reasons["Explore"]+th.Reasons["Prior"]) / float64(r.Ops) * 100
			if math.Abs(th.LearnPct-learn) > 1e-9 {
				t.Errorf("learn %v%%, want Explore+Prior's %v%%", th.LearnPct, learn)
			}
			if o := r.Policies[1]; o.RegretPct != 0 || o.Ratio != 1 {
				t.Errorf("oracle row: regret %v, ratio %v; want 0 and 1 by definition", o.RegretPct, o.Ratio)
			}
		})
	}
}

// replayJSON runs replay -json with args and returns its report; a
// non-zero exit fails the test.
func replayJSON(t *testing.T, args ...string) Report {
	t.Helper()
	code, out, errs := replayRun(t, "", append([]string{"-json"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestTuningFlags: -hysteresis, -discount and -prior-strength reach
// thompson's Scheduler: the same trace and seed replay differently with
// them, and the run still learns (regret within 3%).
func TestTuningFlags(t *testing.T) {
	run := func(extra ...string) PolicyResult {
		args := append([]string{"-seed", "3", "-policies", "thompson"}, extra...)
		return replayJSON(t, append(args, "-max-excluded", "25", "testdata/small.jsonl")...).Policies[0]
	}
	plain := run()
	tuned := run("-hysteresis", "0.3", "-discount", "0.99", "-prior-strength", "1")
	if tuned.TotalUs == plain.TotalUs && tuned.Switches == plain.Switches {
		t.Errorf("tuned run identical to the default one (%v µs, %d switches): the flags did not reach thompson", tuned.TotalUs, tuned.Switches)
	}
	if tuned.RegretPct > 3 {
		t.Errorf("tuned regret %.2f%%, want ≤ 3%%", tuned.RegretPct)
	}
}

// event is the part of a trace event that the exact test reads, decoded
// with encoding/json independently of history's reader.
type event struct {
	Op      string             `json:"op"`
	DType   string             `json:"dtype"`
	Shape   [][]int            `json:"shape"`
	Backend string             `json:"backend"`
	Actual  float64            `json:"actual_duration_us"`
	Shadow  map[string]float64 `json:"shadow_us"`
}

// TestExactTotals replays a trace whose every op was measured on both
// backends, so no duration is drawn: cpu's and gpu's totals are the sums
// of the measurements, and the oracle (DESIGN.md § Evaluation) is Σ over
// buckets of n_b × the lowest mean, all worked out here from the file.
func TestExactTotals(t *testing.T) {
	f, err := os.Open("testdata/exact.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	sum := map[string]float64{}
	type key struct{ op, shape string }
	per := map[key]map[string][]float64{}
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		k := key{e.Op, strings.TrimSpace(strings.ReplaceAll(sc.Text()[strings.Index(sc.Text(), `"shape"`):strings.Index(sc.Text(), `"backend"`)], " ", ""))}
		if per[k] == nil {
			per[k] = map[string][]float64{}
		}
		m := map[string]float64{e.Backend: e.Actual}
		for b, v := range e.Shadow {
			m[b] = v
		}
		for b, v := range m {
			sum[b] += v
			per[k][b] = append(per[k][b], v)
		}
	}
	var oracle float64
	for _, byBackend := range per {
		best := math.Inf(1)
		n := 0
		for _, vs := range byBackend {
			var s float64
			for _, v := range vs {
				s += v
			}
			best = math.Min(best, s/float64(len(vs)))
			n = len(vs)
		}
		oracle += float64(n) * best
	}
	code, out, errs := replayRun(t, "", "-json", "-policies", "cpu,gpu,oracle,thompson", "testdata/exact.jsonl")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	near := func(what string, got, want float64) {
		if math.Abs(got-want) > 1e-6*want {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	got := map[string]PolicyResult{}
	for _, p := range rep.Policies {
		got[p.Name] = p
		near(p.Name+" oracle_us", p.OracleUs, oracle)
		if p.CounterfactualPct != 0 {
			t.Errorf("%s used counterfactuals (%v%%) in a fully measured trace", p.Name, p.CounterfactualPct)
		}
	}
	near("cpu total_us", got["cpu"].TotalUs, sum["cpu"])
	near("gpu total_us", got["gpu"].TotalUs, sum["rocm"])
	if got["cpu"].Share["cpu"] != 1 || got["gpu"].Share["rocm"] != 1 {
		t.Errorf("fixed shares: cpu %v, gpu %v", got["cpu"].Share, got["gpu"].Share)
	}
	if r := got["thompson"].RegretPct; !(r > -50 && r < 50) {
		t.Errorf("thompson regret %v%%, want a bounded figure", r)
	}
	if rep.Ops != 40 || rep.Buckets != 4 {
		t.Errorf("ops %d buckets %d, want 40 and 4", rep.Ops, rep.Buckets)
	}
}

// TestErrors checks every error path: its exit status and message.
func TestErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"bad flag", []string{"-nope"}, 2, "flag provided but not defined"},
		{"bad flag value", []string{"-ops", "x"}, 2, "invalid value"},
		{"negative ops", []string{"-ops", "-1"}, 2, "-ops -1"},
		{"unknown policy", []string{"-policies", "thompson,magic"}, 2, `unknown policy "magic" (known: thompson, static2x`},
		{"no policy", []string{"-policies", ","}, 2, "names no policy"},
		{"unknown profile", []string{"-sim-gpu", "tpu9"}, 2, `unknown profile "tpu9"`},
		{"unknown cpu profile", []string{"-sim-cpu", "z80", "-workload", "decode"}, 2, `unknown profile "z80"`},
		{"empty cpu profile", []string{"-sim-cpu", "", "testdata/small.jsonl"}, 2, `-sim-cpu: sim: unknown profile ""`},
		{"cpu as the gpu", []string{"-sim-gpu", "cpu64", "testdata/small.jsonl"}, 2, "-sim-gpu cpu64: want a GPU profile"},
		{"gpu as the cpu", []string{"-sim-cpu", "h100", "-workload", "decode"}, 2, "-sim-cpu h100: want a CPU profile"},
		{"unknown workload", []string{"-workload", "train"}, 2, `unknown workload "train"`},
		{"unknown execution model", []string{"-workload", "decode", "-exec", "eager"}, 2, `-exec: sim: invalid setup: execution model "eager"`},
		{"execution model of a trace", []string{"-exec", "async", "testdata/small.jsonl"}, 2, `-exec times a simulator workload`},
		{"workload and trace", []string{"-workload", "decode", "testdata/small.jsonl"}, 2, "give it no TRACE"},
		{"workload and table", []string{"-workload", "decode", "-table", "testdata/table.csv"}, 2, "give one"},
		{"two traces", []string{"testdata/small.jsonl", "testdata/exact.jsonl"}, 2, "one TRACE at most"},
		{"bad format", []string{"-format", "xml", "testdata/small.jsonl"}, 2, "-format"},
		{"bad hysteresis", []string{"-hysteresis", "2"}, 2, "Hysteresis"},
		{"bad discount", []string{"-discount", "1.5"}, 2, "Discount"},
		{"bad prior strength", []string{"-prior-strength", "100"}, 2, "PriorStrength"},
		{"infinite zipf", []string{"-zipf", "Inf", "-table", "testdata/table.csv"}, 2, "-zipf +Inf: want a finite exponent ≥ 0"},
		{"nan zipf", []string{"-zipf", "NaN", "-table", "testdata/table.csv"}, 2, "-zipf NaN: want a finite exponent ≥ 0"},
		{"infinite moe zipf", []string{"-zipf", "Inf", "-workload", "offload-moe"}, 2, "-zipf"},
		{"infinite hysteresis", []string{"-hysteresis", "-Inf", "testdata/exact.jsonl"}, 2, "-hysteresis -Inf: want a finite margin ≤ 1"},
		{"infinite discount", []string{"-discount", "Inf", "testdata/exact.jsonl"}, 2, "Discount"},
		{"infinite prior strength", []string{"-prior-strength", "-Inf", "testdata/exact.jsonl"}, 2, "PriorStrength"},
		{"nan hysteresis", []string{"-hysteresis", "NaN", "testdata/exact.jsonl"}, 2, "Hysteresis"},
		{"missing file", []string{"testdata/nope.jsonl"}, 1, "no such file"},
		{"missing table", []string{"-table", "testdata/nope.csv"}, 1, "no such file"},
		{"malformed line", []string{"testdata/bad.jsonl"}, 1, "testdata/bad.jsonl:4: column 41: unterminated string"},
		{"unknown model", []string{"-workload", "decode", "-model", "gpt-9"}, 1, `unknown model "gpt-9"`},
		{"bad plot extension", []string{"-plot", filepath.Join(t.TempDir(), "x.gif"), "testdata/exact.jsonl"}, 1, "want a .png or .svg"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, errs := replayRun(t, "", c.args...)
			if code != c.code || !strings.Contains(errs, c.msg) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errs, c.code, c.msg)
			}
			// A usage error is its line and the hint, not the usage.
			if n := strings.Count(errs, "\n"); c.code == 2 && (n > 2 || !strings.Contains(errs, usageHint)) {
				t.Errorf("a usage error printed %d lines: %q", n, errs)
			}
		})
	}
	// An invalid op on a line of its own, once the malformed one is gone.
	dir := t.TempDir()
	lines := strings.Split(readFile(t, "testdata/bad.jsonl"), "\n")
	lines[3] = ""
	p := filepath.Join(dir, "op.jsonl")
	writeFile(t, p, strings.Join(lines, "\n"))
	if code, _, errs := replayRun(t, "", p); code != 1 || !strings.Contains(errs, p+":6: event 4: kernels: unknown op") {
		t.Errorf("invalid op: exit %d, %q", code, errs)
	}
	// Bad durations, a header of another format, an empty file, a bad table.
	for name, c := range map[string]struct{ body, msg string }{
		"negative": {header + `{"seq":0,"op":"Add","dtype":"f32","shape":[[4],[4]],"backend":"cpu","actual_duration_us":-3}` + "\n", ":2: actual_duration_us -3"},
		"shadow":   {header + `{"seq":0,"op":"Add","dtype":"f32","shape":[[4],[4]],"backend":"cpu","actual_duration_us":3,"shadow_us":{"gpu":-1}}` + "\n", `:2: shadow_us["gpu"] -1`},
		"format":   {`{"format":"other","version":1}` + "\n", `:1: format "other"`},
		"empty":    {"", ":0: empty trace"},
		"nothing":  {header + `{"seq":0,"op":"Add","dtype":"f32","shape":[[4],[4]],"actual_duration_us":3}` + "\n", "no event names a backend"},
		// Chrome traces: a kernel without dur (its measured time would
		// become the simulated profile's), a second traceEvents key (each
		// kernel counted twice).
		"chrome-nodur": {strings.Replace(readFile(t, "testdata/chrome.json"), `"ts":30,"dur":12.5,`, `"ts":30,`, 1), `chrome-nodur.jsonl:4:1: traceEvents[2] ("kernel" "sgemm"): no dur`},
		"chrome-null":  {strings.Replace(readFile(t, "testdata/chrome.json"), `"dur":12.5`, `"dur":null`, 1), `traceEvents[2] ("kernel" "sgemm"): no dur`},
		"chrome-twice": {`{"traceEvents":[],"traceEvents":[]}`, "a second traceEvents key"},
		// Header backends whose figures are impossible would become the
		// arms' cost model; bytes after the header are not a header.
		"header-figures": {`{"format":"adaptsched-trace","version":1,"backends":[{"Name":"cpu","Nominal":{"GFLOPS":-1e300,"MemGBps":-5}}]}` + "\n", `header-figures.jsonl:1: backends[0] ("cpu"): Nominal.GFLOPS -1e+300`},
		"header-kind":    {`{"format":"adaptsched-trace","version":1,"backends":[{"Name":"rocm","Kind":7}]}` + "\n", `header-kind.jsonl:1: backends[0] ("rocm"): Kind 7`},
		"header-twice":   {`{"format":"adaptsched-trace","version":1,"backends":[{"Name":"cpu"},{"Name":"cpu"}]}` + "\n", `header-twice.jsonl:1: backends[1]: name "cpu" repeats`},
		"header-garbage": {`{"format":"adaptsched-trace","version":1} garbage here` + "\n", "header-garbage.jsonl:1: column 43: unexpected data after the header"},
	} {
		p := filepath.Join(dir, name+".jsonl")
		writeFile(t, p, c.body)
		if code, _, errs := replayRun(t, "", p); code != 1 || !strings.Contains(errs, c.msg) {
			t.Errorf("%s: exit %d, %q; want 1 and %q", name, code, errs, c.msg)
		}
	}
	tbl := filepath.Join(dir, "bad.csv")
	writeFile(t, tbl, "op,shape,backend,mean_us,std_us,n\nMatMul,4x4;4x4,cpu,-1,,1\n")
	if code, _, errs := replayRun(t, "", "-table", tbl); code != 1 || !strings.Contains(errs, tbl+":2: mean_us") {
		t.Errorf("bad table: exit %d, %q", code, errs)
	}
}

const header = `{"format":"adaptsched-trace","version":1}` + "\n"

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSkipBad counts the skipped lines instead of failing.
func TestSkipBad(t *testing.T) {
	code, out, errs := replayRun(t, "", "-skip-bad", "-json", "-max-excluded", "100", "testdata/bad.jsonl")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	// bad.jsonl: 7 events, line 4 malformed and line 6 an unknown op.
	if rep.Skipped != 2 || rep.Ops+rep.ExcludedOps != 5 {
		t.Errorf("skipped %d, ops %d + excluded %d; want 2 skipped of 7 events", rep.Skipped, rep.Ops, rep.ExcludedOps)
	}
}

// TestStdin reads the trace from stdin
// and gives the same figures as from the file.
func TestStdin(t *testing.T) {
	_, fromFile, _ := replayRun(t, "", "-json", "-max-excluded", "25", "testdata/small.jsonl")
	code, fromStdin, errs := replayRun(t, readFile(t, "testdata/small.jsonl"), "-json", "-max-excluded", "25", "-")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if strings.Replace(fromStdin, `"input": "stdin"`, `"input": "testdata/small.jsonl"`, 1) != fromFile {
		t.Errorf("stdin and file replays differ:\n%s\n%s", fromStdin, fromFile)
	}
}

// TestDefault replays the embedded trace with no arguments, and checks
// that the embedded file is what the generator writes now.
func TestDefault(t *testing.T) {
	b, err := defaultTraceBytes()
	if err != nil {
		t.Fatal(err)
	}
	if *rewrite {
		if err := os.WriteFile("testdata/default.jsonl.gz", b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(b, defaultTrace) {
		t.Errorf("testdata/default.jsonl.gz is stale: regenerate it with go test ./cmd/replay -rewrite")
	}
	if len(defaultTrace) > 1<<20 {
		t.Errorf("default trace is %d bytes, want ≤ 1 MiB", len(defaultTrace))
	}
	code, out, errs := replayRun(t, "")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"replay default:", "thompson", "oracle", "buckets where the policies disagree most"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if errs != "" {
		t.Errorf("stderr not empty (not a terminal): %q", errs)
	}
}

// TestPlot writes both formats; the PNG must decode.
func TestPlot(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"r.png", "r.svg"} {
		p := filepath.Join(dir, f)
		code, _, errs := replayRun(t, "", "-plot", p, "-max-excluded", "25", "testdata/small.jsonl")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", f, code, errs)
		}
		if want := "replay: plot written to " + p + "\n"; !strings.HasSuffix(errs, want) {
			t.Errorf("stderr %q, want it to end with %q", errs, want)
		}
		st, err := os.Stat(p)
		if err != nil || st.Size() == 0 {
			t.Fatalf("%s not written: %v", f, err)
		}
	}
	f, err := os.Open(filepath.Join(dir, "r.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 200 {
		t.Errorf("plot is %v", b)
	}
	svg := readFile(t, filepath.Join(dir, "r.svg"))
	if !strings.Contains(svg, "<svg") {
		t.Error("r.svg is not SVG")
	}
	// The plot says what the oracle is, that a learner can beat it, and
	// what the decision map's colour is.
	for _, want := range []string{"best backend per bucket", "a learner can be", "majority backend"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the plot does not say %q", want)
		}
	}
	// Every policy is named in the legend: the oracle as the reference,
	// the others alone or grouped with the ones they run alongside.
	for _, name := range eval.PolicyNames {
		if !strings.Contains(svg, ">"+name) && !strings.Contains(svg, "≈ "+name) && !strings.Contains(svg, name+" ≈") {
			t.Errorf("the plot's legend does not name %s", name)
		}
	}
}

// TestCloseCurves: curves closer than sameCurve everywhere are drawn as
// one; one point further apart, or a different length, keeps them apart.
func TestCloseCurves(t *testing.T) {
	a := plotter.XYs{{X: 0, Y: 1}, {X: 10, Y: 2}}
	near := plotter.XYs{{X: 0, Y: 1 + sameCurve/2}, {X: 10, Y: 2 - sameCurve/2}}
	far := plotter.XYs{{X: 0, Y: 1}, {X: 10, Y: 2 + 2*sameCurve}}
	if !closeCurves(a, near) || closeCurves(a, far) || closeCurves(a, a[:1]) {
		t.Errorf("closeCurves: near %v, far %v, shorter %v", closeCurves(a, near), closeCurves(a, far), closeCurves(a, a[:1]))
	}
}

// TestDBEqualsPlain: -db runs the same Scheduler as a plain replay, so a
// cold -db replay of a simulator workload (transfers included) reports
// exactly the plain one's figures; a warm one, started from what the cold
// one saved, explores at most a tenth as much and stays within 0.15
// regret points of it.
func TestDBEqualsPlain(t *testing.T) {
	dir := t.TempDir()
	base := []string{"-workload", "mixed-serving", "-sim-gpu", "mi300x", "-ops", "5000", "-policies", "thompson"}
	run := func(extra ...string) PolicyResult {
		return replayJSON(t, append(slices.Clone(base), extra...)...).Policies[0]
	}
	plain, cold, warm := run(), run("-db", dir), run("-db", dir)
	if cold.TotalUs != plain.TotalUs || cold.Switches != plain.Switches || cold.LearnPct != plain.LearnPct {
		t.Errorf("cold -db %+v differs from plain %+v", cold, plain)
	}
	if !(warm.LearnPct <= cold.LearnPct/10) || cold.LearnPct == 0 {
		t.Errorf("warm learn %.2f%%, cold %.2f%%: want at most a tenth", warm.LearnPct, cold.LearnPct)
	}
	if d := math.Abs(warm.RegretPct - plain.RegretPct); d > 0.15 {
		t.Errorf("warm regret %.3f%%, plain %.3f%%: %.3f points apart, want ≤ 0.15", warm.RegretPct, plain.RegretPct, d)
	}
}

// TestDB warm-starts thompson from a store that a first replay saved:
// the second run loads posteriors and explores no more than the first.
func TestDB(t *testing.T) {
	dir := t.TempDir()
	args := []string{"-json", "-db", dir, "-policies", "thompson,oracle", "-max-excluded", "25", "testdata/small.jsonl"}
	var reps [2]Report
	for i := range reps {
		code, out, errs := replayRun(t, "", args...)
		if code != 0 {
			t.Fatalf("run %d: exit %d: %s", i, code, errs)
		}
		if err := json.Unmarshal([]byte(out), &reps[i]); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(strings.Join(reps[0].Notes, ";"), "(0 posteriors loaded)") {
		t.Errorf("first run notes %q, want 0 posteriors loaded", reps[0].Notes)
	}
	if strings.Contains(strings.Join(reps[1].Notes, ";"), "(0 posteriors loaded)") {
		t.Errorf("second run notes %q: nothing was loaded", reps[1].Notes)
	}
	if a, b := reps[0].Policies[0].LearnPct, reps[1].Policies[0].LearnPct; b > a {
		t.Errorf("warm start explored %v%%, more than the cold start's %v%%", b, a)
	}
}

// FuzzReplayParse feeds arbitrary bytes, as a trace, through the reader
// and both passes of the replay that the command runs on a file (in
// memory: writing a file per input slows the fuzzer to a crawl): every
// input ends in a report or an error naming the problem, never a panic,
// and a report's figures are finite where its costs are.
func FuzzReplayParse(f *testing.F) {
	// Seeds are a few lines each: the fuzzer minimises every input that
	// finds new coverage, and whole test traces make that crawl.
	for _, p := range []string{"testdata/small.jsonl", "testdata/exact.jsonl", "testdata/bad.jsonl"} {
		lines := strings.SplitAfter(readFileF(f, p), "\n")
		f.Add([]byte(strings.Join(lines[:min(len(lines), 6)], "")), false)
	}
	f.Add([]byte(header+`{"seq":0,"op":"Add","dtype":"f32","shape":[[4],[4]],"backend":"cpu","actual_duration_us":3,"shadow_us":{"gpu":null}}`+"\n"), true)
	f.Fuzz(func(t *testing.T, data []byte, skipBad bool) {
		// The command's own options, so that every default is its own.
		args := []string{"-policies", "thompson,calibrate,oracle,cpu", "-seed", "1", "-top", "3", "-max-excluded", "100"}
		if skipBad {
			args = append(args, "-skip-bad", "-sim-gpu", "h100")
		}
		o, err := parseFlags(args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		in := memoryTrace("fuzz", data, trace.ReaderOptions{SkipBad: skipBad})
		if err := readHeader(in); err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz:") {
				t.Fatalf("header error without the file's name: %v", err)
			}
			return
		}
		rs, _, err := replayTrace(&o, in, nil, nil, io.Discard)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		rep := rs.report()
		for _, p := range rep.Policies {
			if p.OracleUs > 0 && !math.IsInf(p.OracleUs, 0) && math.IsNaN(p.RegretPct) {
				t.Fatalf("%s: regret NaN with oracle %v", p.Name, p.OracleUs)
			}
		}
		if err := writeJSON(io.Discard, rep); err != nil {
			t.Fatal(err)
		}
	})
}

func readFileF(f *testing.F, p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		f.Fatal(err)
	}
	return string(b)
}

// TestRealH100Traces replays the decode traces recorded on an NVIDIA H100
// with a 16-core Xeon (testdata/h100-decode.md), every duration measured
// there (DESIGN.md § Evaluation), with seeds 1–5, and compares mean regrets.
// At batch 1, where a third of the ops belong on the CPU, thompson is
// within 1% of the oracle and below every other policy (seeds 1–5: 0.71,
// 0.43, 0.59, 0.21, 0.49%, mean 0.49%). At batch 16, where everything
// belongs on the GPU and the "GPU unless the CPU is 2× cheaper" rule is the
// oracle, thompson is within 3% of it (seeds 1–5: 0.18–0.44%) and below
// every other learning or rule-based policy.
func TestRealH100Traces(t *testing.T) {
	const seeds = 5
	for _, tc := range []struct {
		batch    string
		maxPct   float64
		oracleOf string // the policy that is the oracle here, exempt from "below"
	}{{"1", 1, ""}, {"16", 3, "static2x"}} {
		mean := map[string]float64{}
		for seed := 1; seed <= seeds; seed++ {
			code, out, errs := replayRun(t, "", "-json", "-seed", strconv.Itoa(seed), "testdata/h100-decode-b"+tc.batch+".jsonl.gz")
			if code != 0 {
				t.Fatalf("batch %s: exit %d: %s", tc.batch, code, errs)
			}
			var r Report
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatal(err)
			}
			if r.ExcludedOps != 0 {
				t.Errorf("batch %s: %d ops excluded: every bucket has both backends measured", tc.batch, r.ExcludedOps)
			}
			for _, p := range r.Policies {
				mean[p.Name] += p.RegretPct / seeds
			}
		}
		th := mean["thompson"]
		if th > tc.maxPct {
			t.Errorf("batch %s: thompson's mean regret %.2f%%, want ≤ %v%%", tc.batch, th, tc.maxPct)
		}
		for name, g := range mean {
			switch name {
			case "thompson", "oracle", "gpu", tc.oracleOf:
				continue
			}
			if th >= g {
				t.Errorf("batch %s: thompson's mean regret %.2f%% not below %s's %.2f%%", tc.batch, th, name, g)
			}
		}
	}
}

// TestDeprecatedFlags: -profile and -cpu-profile still work as -sim-gpu
// and -sim-cpu, with one warning line each however often given.
func TestDeprecatedFlags(t *testing.T) {
	args := []string{"-json", "-policies", "thompson", "-ops", "500", "-workload", "decode"}
	_, want, _ := replayRun(t, "", append(args, "-sim-gpu", "mi250", "-sim-cpu", "cpu64")...)
	code, got, errs := replayRun(t, "", append(args, "-profile", "h100", "-profile", "mi250", "-cpu-profile", "cpu64")...)
	if code != 0 || got != want {
		t.Fatalf("exit %d; reports differ:\n%s\n%s", code, got, want)
	}
	if strings.Count(errs, "-profile is deprecated: use -sim-gpu") != 1 || strings.Count(errs, "-cpu-profile is deprecated: use -sim-cpu") != 1 {
		t.Errorf("stderr %q: want one warning per deprecated flag", errs)
	}
}

// TestLegendFits: a legend's strip is as wide as its longest entry (the
// decision map's cut StarPU's backend names off at a fixed 3.5 cm).
func TestLegendFits(t *testing.T) {
	leg := newLegend()
	long := "sim:cuda0_impl0 with a long name"
	leg.add("cpu", blank{})
	leg.add(long, blank{})
	if w := leg.width(); w < leg.TextStyle.Width(long)+leg.ThumbnailWidth {
		t.Errorf("legend strip %v for an entry of %v", w, leg.TextStyle.Width(long))
	}
}

// TestHelp: -h prints the whole usage, without the hint that follows a
// usage error, and exits 0.
func TestHelp(t *testing.T) {
	code, _, errs := replayRun(t, "", "-h")
	if code != 0 || !strings.HasPrefix(errs, "usage: replay [flags] [TRACE]") || strings.Contains(errs, usageHint) || !strings.Contains(errs, "-sim-gpu") {
		t.Errorf("exit %d, stderr %.300q", code, errs)
	}
}

// TestDBTraceFingerprintSlash: a trace header's fingerprint that cannot
// scope a store (it contains '/') fails -db with one error naming the
// trace's fingerprint, before anything is replayed or written.
func TestDBTraceFingerprintSlash(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	raw, err := os.ReadFile("testdata/small.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	trace := strings.Replace(string(raw), `"version":1,`, `"version":1,"fingerprint":"trace/1",`, 1)
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(path, []byte(trace), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs := replayRun(t, "", "-db", dir, "-policies", "thompson", "-max-excluded", "25", path)
	if code != 1 || !strings.Contains(errs, `trace header's fingerprint "trace/1"`) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Errorf("exit %d, stderr %q: want 1 and one line naming the trace's fingerprint", code, errs)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the store was created: %v", err)
	}
}
