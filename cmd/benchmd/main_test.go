package main

import (
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
	out := `pkg: a
BenchmarkX-2 10 1 ns/op
pkg: b
BenchmarkY-2 10 2 ns/op
pkg: a
BenchmarkZ-2 10 3 ns/op
`
	pkgs, _, err := parse(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
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

func TestTargetsTable(t *testing.T) {
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
