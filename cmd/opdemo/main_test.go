package main

import (
	"bytes"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/kernels"
)

func TestRunTable(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run([]string{"-backends", "cpu1, nope", "-reps", "2", "-sizes", "small"}, &out, &errOut)
	if err != nil {
		t.Fatalf("run: %v\n%s%s", err, out.String(), errOut.String())
	}
	text := out.String()
	if !regexp.MustCompile(`nope: skipped: backends: unknown backend "nope" \(registered: [^)]*\bcpu1\b`).MatchString(text) {
		t.Errorf("no skip line for the unknown backend:\n%s", text)
	}
	if !strings.Contains(text, "cpu1: cpu ") {
		t.Errorf("no header line for cpu1:\n%s", text)
	}
	rows := 0
	for line := range strings.SplitSeq(text, "\n") {
		f := strings.Split(line, "|")
		if len(f) < 6 || strings.TrimSpace(f[0]) == "op" {
			continue
		}
		rows++
		if strings.TrimSpace(f[3]) != "cpu1" || strings.TrimSpace(f[5]) != "ok" {
			t.Errorf("row %q: want backend cpu1 and ok", line)
		}
	}
	if want := len(kernels.Ops()); rows != want {
		t.Errorf("%d rows, want one per op (%d):\n%s", rows, want, text)
	}
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-reps", "0"}, {"-sizes", "huge"}, {"-backends", " , "}, {"extra"}, {"-nope"},
	} {
		var out, errOut bytes.Buffer
		err := run(args, &out, &errOut)
		if !errors.As(err, new(usageError)) {
			t.Errorf("run(%q) = %v, want a usage error", args, err)
		}
	}
	var out, errOut bytes.Buffer
	if err := run([]string{"-backends", "nope", "-sizes", "small"}, &out, &errOut); err == nil || !strings.Contains(err.Error(), "no backend could be opened") {
		t.Errorf("only unknown backends: %v", err)
	}
}

func TestSpecsValid(t *testing.T) {
	for _, op := range kernels.Ops() {
		for _, size := range sizeNames {
			if err := specFor(op, size).Validate(); err != nil {
				t.Errorf("%v %s: %v", op, size, err)
			}
		}
	}
}

func TestCompare(t *testing.T) {
	s := kernels.Spec{Op: kernels.Scale, In: []kernels.Shape{{3}}}
	want := kernels.AsBytes([]float32{1, -200, 3})
	near := kernels.AsBytes([]float32{1.1, -200, 3}) // 0.1 ≤ 1e-3 × 200
	far := kernels.AsBytes([]float32{1, -200, 3.3})
	if err := compare(s, near, want); err != nil {
		t.Errorf("within tolerance: %v", err)
	}
	if err := compare(s, far, want); !errors.Is(err, errMismatch) {
		t.Errorf("beyond tolerance: %v", err)
	}
	c := kernels.Spec{Op: kernels.Copy, DType: kernels.F16, In: []kernels.Shape{{2}}}
	if err := compare(c, []byte{1, 2, 3, 4}, []byte{1, 2, 3, 5}); !errors.Is(err, errMismatch) {
		t.Errorf("f16 bytes differ: %v", err)
	}
}

// By default the drivers that need a parameter (sim:<profile>) are named
// once as not run, not listed as skipped backends; named with -backends
// they are still an error line.
func TestParamDriversNotSkipped(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run([]string{"-reps", "1", "-sizes", "small"}, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	text := out.String()
	if strings.Contains(text, "adaptive: skipped") || strings.Contains(text, "sim: skipped") {
		t.Errorf("adaptive or sim listed as skipped:\n%s", text)
	}
	if !strings.Contains(text, "not run: sim (they need a parameter") {
		t.Errorf("no line naming the drivers that need a parameter:\n%s", text)
	}
	out.Reset()
	if err := run([]string{"-backends", "cpu1,sim", "-reps", "1", "-sizes", "small"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "sim: skipped: backends: sim unavailable: no profile named") {
		t.Errorf("-backends sim: no skip line:\n%s", out.String())
	}
}

// TestMedianUs: the µs column is the median of the -reps runs, for an
// even count the mean of the middle two (it printed the upper one: with
// -reps 2 the slower run).
func TestMedianUs(t *testing.T) {
	us := time.Microsecond
	for _, c := range []struct {
		times []time.Duration
		want  float64
	}{
		{[]time.Duration{7 * us}, 7},
		{[]time.Duration{3 * us, 1 * us}, 2},
		{[]time.Duration{5 * us, 1 * us, 3 * us}, 3},
		{[]time.Duration{8 * us, 1 * us, 4 * us, 2 * us}, 3},
	} {
		if got := medianUs(c.times); got != c.want {
			t.Errorf("medianUs(%v) = %v, want %v", c.times, got, c.want)
		}
	}
}
