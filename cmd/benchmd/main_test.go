package main

import (
	"os"
	"strings"
	"testing"
)

func TestParseLine(t *testing.T) {
	r, ok := parseLine("BenchmarkMatMul/1024x1024x1024-2   10   123456 ns/op   150.2 GFLOP/s   0 B/op   0 allocs/op")
	if !ok || r.name != "MatMul/1024x1024x1024" || r.iters != 10 {
		t.Fatalf("parseLine = %+v, %v", r, ok)
	}
	if v, _ := r.get("GFLOP/s"); v != 150.2 {
		t.Errorf("GFLOP/s = %v, want 150.2", v)
	}
	for _, bad := range []string{"BenchmarkX-2 notanumber 1 ns/op", "BenchmarkX some log line", "BenchmarkX-2 10 1.0"} {
		if _, ok := parseLine(bad); ok {
			t.Errorf("parseLine(%q) accepted a non-result line", bad)
		}
	}
}

// make bench runs some benchmarks in a second pass: their package's
// figures stay in one section, in the order they came.
func TestParseMergesRepeatedPackage(t *testing.T) {
	out := "pkg: a\ncpu: Oxide Virtual Turin-like Processor             \n" + `BenchmarkX-2 10 1 ns/op
pkg: b
BenchmarkY-2 10 2 ns/op
pkg: a
BenchmarkZ-2 10 3 ns/op
`
	pkgs, cpu, err := parse(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if cpu != "Oxide Virtual Turin-like Processor" {
		t.Errorf("cpu %q, want the model name without its padding", cpu)
	}
	if len(pkgs) != 2 || pkgs[0].pkg != "a" || len(pkgs[0].results) != 2 || pkgs[0].results[1].name != "Z" || len(pkgs[1].results) != 1 {
		t.Fatalf("parse gave %+v, want a: X, Z and b: Y", pkgs)
	}
}

func TestCrossoverNeedsEveryLargerSizeToWin(t *testing.T) {
	out := `pkg: p
BenchmarkCrossover/Softmax/1/cpu-2 10 100 ns/op
BenchmarkCrossover/Softmax/1/cpu1-2 10 50 ns/op
BenchmarkCrossover/Softmax/8/cpu-2 10 80 ns/op
BenchmarkCrossover/Softmax/8/cpu1-2 10 90 ns/op
BenchmarkCrossover/Softmax/64/cpu-2 10 200 ns/op
BenchmarkCrossover/Softmax/64/cpu1-2 10 150 ns/op
BenchmarkCrossover/Softmax/512/cpu-2 10 500 ns/op
BenchmarkCrossover/Softmax/512/cpu1-2 10 900 ns/op
`
	pkgs, _, err := parse(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	got := crossovers(pkgs)
	if !strings.Contains(got, "Softmax: all cores win from 512 on") {
		t.Errorf("crossover summary wrong (a win at 8 followed by a loss at 64 must not count):\n%s", got)
	}
}

func TestSpliceKeepsHandWrittenSections(t *testing.T) {
	old := "# Benchmarks\n\nintro\n\n" + beginMark + "\nold figures\n" + endMark + "\n\n## GPU (measured by hand)\n\nfigures\n"
	got := splice(old, beginMark+"\nnew\n"+endMark+"\n")
	if strings.Contains(got, "old figures") || !strings.Contains(got, "new") || !strings.Contains(got, "## GPU (measured by hand)") {
		t.Errorf("splice lost or kept the wrong text:\n%s", got)
	}
}

func TestSimTargetsTable(t *testing.T) {
	out := `pkg: sim
BenchmarkTargets/mixed-serving/h100-2 1 100 ns/op 5.5 static2x_regret_pct 0.42 thompson_regret_pct
BenchmarkTargets/throttle-x3/h100-2 1 100 ns/op 1.5 static2x_post_event_regret_pct -0.6 thompson_post_event_regret_pct
`
	pkgs, _, err := parse(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	got := targets(pkgs)
	for _, want := range []string{"| scenario | figure | thompson | static2x |", "| mixed-serving/h100 | regret_pct | 0.42 | 5.50 |", "| throttle-x3/h100 | post_event_regret_pct | -0.60 | 1.50 |"} {
		if !strings.Contains(got, want) {
			t.Errorf("targets table lacks %q:\n%s", want, got)
		}
	}
}

const targetsCSV = `# comment
target,benchmark,select,cmp,limit,unit,measured,machine and date
fast,p X,p:X/*:ns/op,<=,150, ns,old 1,gone machine
ratio,p R,p:R/on:ns/op / p:R/off:ns/op,<=,1.1,×,old 2,gone machine
gpu,by hand,,,,,42 tokens/s,GPU box; 2026-01-01
`

// A row measured by the run shows the worst of its matches, its verdict
// and the run's machine; a row the run lacks keeps its recorded figure.
func TestTargetsTable(t *testing.T) {
	ts, err := readTargets(strings.NewReader(targetsCSV))
	if err != nil {
		t.Fatal(err)
	}
	pkgs, _, err := parse(strings.NewReader(`pkg: example.com/m/p
BenchmarkX/a-2 10 120 ns/op
BenchmarkX/b-2 10 170 ns/op
BenchmarkR/on-2 10 105 ns/op
BenchmarkR/off-2 10 100 ns/op
`))
	if err != nil {
		t.Fatal(err)
	}
	got := targetsTable(ts, pkgs, "this machine")
	for _, want := range []string{
		"| fast | worst of 2: 170 ns, **not met** | p X | this machine |",
		"| ratio | 1.05×, met | p R | this machine |",
		"| gpu | 42 tokens/s | by hand | GPU box; 2026-01-01 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if got := targetsTable(ts, nil, "this machine"); !strings.Contains(got, "| fast | old 1 | p X | gone machine |") {
		t.Errorf("with no run the recorded figure must stay:\n%s", got)
	}
}

// TestUnmeasuredNamesStaleSelectors: a target whose selector finds no
// benchmark of the run (renamed, or skipped here) is named; the hand
// recorded rows (no selector) and the measured ones are not.
func TestUnmeasuredNamesStaleSelectors(t *testing.T) {
	ts, err := readTargets(strings.NewReader(targetsCSV))
	if err != nil {
		t.Fatal(err)
	}
	pkgs, _, err := parse(strings.NewReader("pkg: example.com/m/p\nBenchmarkX/a-2 10 120 ns/op\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := unmeasured(ts, pkgs)
	if len(got) != 1 || got[0] != "ratio (p:R/on:ns/op / p:R/off:ns/op)" {
		t.Errorf("unmeasured %q, want the ratio row alone", got)
	}
}

func TestReadTargetsRejects(t *testing.T) {
	head := "target,benchmark,select,cmp,limit,unit,measured,machine and date\n"
	for name, csv := range map[string]string{
		"no header":     "a,b,,,,,c,d\n",
		"bad cmp":       head + "a,b,p:X:ns/op,<,1,,c,d\n",
		"cmp, no limit": head + "a,b,p:X:ns/op,<=,,,c,d\n",
		"bad selector":  head + "a,b,p:X,<=,1,,c,d\n",
		"no fallback":   head + "a,b,p:X:ns/op,<=,1,,,\n",
	} {
		if _, err := readTargets(strings.NewReader(csv)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The repository's own targets file parses.
func TestRepositoryTargets(t *testing.T) {
	f, err := os.Open("../../docs/targets.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if ts, err := readTargets(f); err != nil || len(ts) == 0 {
		t.Fatalf("docs/targets.csv: %d targets, %v", len(ts), err)
	}
}

func TestTuningTable(t *testing.T) {
	pkgs, _, err := parse(strings.NewReader(`pkg: github.com/adaptsched/adaptsched/bandit
BenchmarkTuning/h=0/gamma=1-2 1 100 ns/op 3.39 regret% 159 switches/10k
BenchmarkTuning/h=0/gamma=0.999-2 1 100 ns/op 0.874 regret% 543 switches/10k
BenchmarkTuning/h=0.15/gamma=1-2 1 100 ns/op 3.37 regret% 10.7 switches/10k
BenchmarkTuning/h=0.15/gamma=0.999-2 1 100 ns/op 1.449 regret% 24.42 switches/10k
`))
	if err != nil {
		t.Fatal(err)
	}
	got := tuningTable(pkgs)
	for _, want := range []string{"| h \\ γ | 1 | 0.999 |", "| 0 | 3.39% / 159 | 0.874% / 543 |", "| 0.15 | 3.37% / 11 | 1.45% / 24 |"} {
		if !strings.Contains(got, want) {
			t.Errorf("tuning table lacks %q:\n%s", want, got)
		}
	}
}

// Without a run, benchmd reads the figures back from its own block: the
// result renders the same.
func TestParseDocRoundTrip(t *testing.T) {
	pkgs, _, err := parse(strings.NewReader(`pkg: github.com/adaptsched/adaptsched/kernels
BenchmarkA/x-2 100 1234 ns/op 4.5 GFLOP/s 0 B/op 0 allocs/op
BenchmarkB-2 7 58110992 ns/op 1719805 events/s
pkg: github.com/adaptsched/adaptsched/bandit
BenchmarkTuning/h=0/gamma=1-2 1 100 ns/op 3.39 regret% 159 switches/10k
`))
	if err != nil {
		t.Fatal(err)
	}
	info := runInfo{cpu: "Some CPU, rev 2", cores: 2, maxprocs: 2, osArch: "linux/amd64", mem: "8.0 GiB", goV: "go1.26.0", date: "2026-01-02 03:04 UTC"}
	ts, _ := readTargets(strings.NewReader(targetsCSV))
	doc := "# B\n\n" + render(pkgs, info, ts, "t.csv")
	back, info2, err := parseDoc(doc)
	if err != nil {
		t.Fatal(err)
	}
	if info2 != info {
		t.Errorf("machine read back as %+v, want %+v", info2, info)
	}
	if again := "# B\n\n" + render(back, info2, ts, "t.csv"); again != doc {
		t.Errorf("re-rendered block differs:\n%s\nwant:\n%s", again, doc)
	}
}

// make bench's call writes both files; a second call without a run
// re-renders them unchanged from the figures in BENCHMARKS.md.
func TestRunThenRerender(t *testing.T) {
	dir := t.TempDir()
	path := func(name string) string { return dir + "/" + name }
	write := func(name, text string) {
		if err := os.WriteFile(path(name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("bench.out", `goos: linux
cpu: Test CPU
pkg: example.com/m/p
BenchmarkX/a-2 10 120 ns/op
BenchmarkX/b-2 10 170 ns/op
BenchmarkR/on-2 10 105 ns/op
BenchmarkR/off-2 10 100 ns/op
pkg: github.com/adaptsched/adaptsched/bandit
BenchmarkTuning/h=0.15/gamma=0.999-2 1 100 ns/op 1.449 regret% 24.42 switches/10k
`)
	write("targets.csv", targetsCSV)
	write("BENCHMARKS.md", "# Benchmarks\n\nintro\n")
	write("TUNING.md", "# Tuning\n\n"+beginMark+"\n"+endMark+"\n\nafter\n")
	if err := run(path("bench.out"), path("BENCHMARKS.md"), path("targets.csv"), path("TUNING.md")); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(path(name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	bench, tuning := read("BENCHMARKS.md"), read("TUNING.md")
	for _, want := range []string{"intro\n", "| fast | worst of 2: 170 ns, **not met** | p X | Test CPU, ", "| gpu | 42 tokens/s | by hand | GPU box; 2026-01-01 |", "| X/a | 10 | 120 ns/op |"} {
		if !strings.Contains(bench, want) {
			t.Errorf("BENCHMARKS.md lacks %q:\n%s", want, bench)
		}
	}
	if !strings.Contains(tuning, "| 0.15 | 1.45% / 24 |") || !strings.HasSuffix(tuning, "after\n") {
		t.Errorf("TUNING.md:\n%s", tuning)
	}
	if err := run("", path("BENCHMARKS.md"), path("targets.csv"), path("TUNING.md")); err != nil {
		t.Fatal(err)
	}
	if read("BENCHMARKS.md") != bench || read("TUNING.md") != tuning {
		t.Errorf("re-rendering without a run changed the files")
	}
}

// TestRunReportsFailures: a run in which a benchmark failed writes the
// others' figures, then returns an error naming the benchmark and its
// package, so that make bench fails although go test's status is lost
// in its pipe through tee.
func TestRunReportsFailures(t *testing.T) {
	dir := t.TempDir()
	path := func(name string) string { return dir + "/" + name }
	out := "--- FAIL: BenchmarkConverge\n    bench_test.go:93: synced with 64 nodes\ngoos: linux\ncpu: Test CPU\n" +
		"pkg: example.com/m/p\nBenchmarkX/a-2 10 120 ns/op\nFAIL\nexit status 1\nFAIL\texample.com/m/p\t3.3s\n"
	for name, text := range map[string]string{"bench.out": out, "targets.csv": targetsCSV, "BENCHMARKS.md": "# B\n"} {
		if err := os.WriteFile(path(name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err := run(path("bench.out"), path("BENCHMARKS.md"), path("targets.csv"), "")
	if err == nil || !strings.Contains(err.Error(), "BenchmarkConverge; package example.com/m/p") {
		t.Errorf("run: %v, want the failed benchmark and package named", err)
	}
	if b, _ := os.ReadFile(path("BENCHMARKS.md")); !strings.Contains(string(b), "| X/a | 10 | 120 ns/op |") {
		t.Errorf("the figures that ran are not written:\n%s", b)
	}
}
