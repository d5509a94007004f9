package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
)

// target is one row of the targets table, read from docs/targets.csv.
//
// A row with a selector is measured by the run when the run has its
// benchmark; otherwise, and for rows with no selector (a real GPU,
// `make peer`, a replay too slow for make bench), the row's last figure,
// with its own machine and date, is shown as recorded.
type target struct {
	name      string // what is wanted, e.g. "sgemm 1024³ ≥ 150 GFLOP/s"
	benchmark string // the benchmark or test that holds it, as shown
	sel       string // selector (see selector), or "" for a recorded row
	cmp       string // "<=", ">=" or "" (no target: the figure alone)
	limit     float64
	unit      string // appended to a measured value
	measured  string // last recorded figure
	machine   string // where and when it was recorded
}

var targetsHeader = []string{"target", "benchmark", "select", "cmp", "limit", "unit", "measured", "machine and date"}

// readTargets parses the targets file: a header row (targetsHeader), then
// one row per target; lines starting with # are comments.
func readTargets(r io.Reader) ([]target, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = len(targetsHeader)
	recs, err := cr.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("benchmd: targets: %w", err)
	}
	if len(recs) == 0 || !slices.Equal(recs[0], targetsHeader) {
		return nil, fmt.Errorf("benchmd: targets: first row must be %q", strings.Join(targetsHeader, ","))
	}
	var ts []target
	for i, rec := range recs[1:] {
		t := target{name: rec[0], benchmark: rec[1], sel: rec[2], cmp: rec[3], unit: rec[5], measured: rec[6], machine: rec[7]}
		line := i + 2
		switch t.cmp {
		case "", "<=", ">=":
		default:
			return nil, fmt.Errorf("benchmd: targets row %d: cmp %q, want <=, >= or empty", line, t.cmp)
		}
		if rec[4] != "" {
			if t.limit, err = strconv.ParseFloat(rec[4], 64); err != nil {
				return nil, fmt.Errorf("benchmd: targets row %d: limit: %w", line, err)
			}
		} else if t.cmp != "" {
			return nil, fmt.Errorf("benchmd: targets row %d: cmp %s without a limit", line, t.cmp)
		}
		if t.sel != "" {
			if _, err := parseSelector(t.sel); err != nil {
				return nil, fmt.Errorf("benchmd: targets row %d: %w", line, err)
			}
		}
		if t.measured == "" || t.machine == "" {
			return nil, fmt.Errorf("benchmd: targets row %d: a recorded figure and its machine and date are needed (shown when the run lacks the benchmark)", line)
		}
		ts = append(ts, t)
	}
	return ts, nil
}

// selector picks figures from a run: "PKG:NAME:UNIT", or the ratio of two
// such terms "A / B". PKG is a package path suffix (alternatives separated
// by |); NAME is a benchmark name without the Benchmark prefix, matched by
// path.Match (so * stops at /). A term that matches several benchmarks
// yields the worst of them for the target's cmp (the largest for <=, the
// smallest for >=).
type selector struct{ num, den *term }

type term struct {
	pkgs       []string
	name, unit string
}

func parseSelector(s string) (selector, error) {
	a, b, ratio := strings.Cut(s, " / ")
	num, err := parseTerm(a)
	if err != nil {
		return selector{}, err
	}
	sel := selector{num: num}
	if ratio {
		if sel.den, err = parseTerm(b); err != nil {
			return selector{}, err
		}
	}
	return sel, nil
}

func parseTerm(s string) (*term, error) {
	f := strings.Split(strings.TrimSpace(s), ":")
	if len(f) != 3 || f[0] == "" || f[1] == "" || f[2] == "" {
		return nil, fmt.Errorf("selector %q: want PKG:NAME:UNIT", s)
	}
	if _, err := path.Match(f[1], ""); err != nil {
		return nil, fmt.Errorf("selector %q: %w", s, err)
	}
	return &term{pkgs: strings.Split(f[0], "|"), name: f[1], unit: f[2]}, nil
}

// values returns the term's figures in the run, in the run's order.
func (t *term) values(pkgs []pkgResults) []float64 {
	var vs []float64
	for _, p := range pkgs {
		if !slices.ContainsFunc(t.pkgs, func(s string) bool { return p.pkg == s || strings.HasSuffix(p.pkg, "/"+s) }) {
			continue
		}
		for _, r := range p.results {
			if ok, _ := path.Match(t.name, r.name); !ok {
				continue
			}
			if v, ok := r.get(t.unit); ok {
				vs = append(vs, v)
			}
		}
	}
	return vs
}

// measure returns the target's figure in the run: its value and how many
// benchmarks it is the worst of; ok is false when the run lacks them.
func (t target) measure(pkgs []pkgResults) (v float64, n int, ok bool) {
	if t.sel == "" {
		return 0, 0, false
	}
	sel, _ := parseSelector(t.sel) // checked by readTargets
	worst := func(vs []float64) float64 {
		if t.cmp == ">=" {
			return slices.Min(vs)
		}
		return slices.Max(vs)
	}
	num := sel.num.values(pkgs)
	if len(num) == 0 {
		return 0, 0, false
	}
	if sel.den == nil {
		return worst(num), len(num), true
	}
	den := sel.den.values(pkgs)
	if len(den) != len(num) {
		return 0, 0, false
	}
	ratios := make([]float64, len(num))
	for i := range num {
		if den[i] == 0 {
			return 0, 0, false
		}
		ratios[i] = num[i] / den[i]
	}
	return worst(ratios), len(ratios), true
}

// cell formats a measured value with its verdict.
func (t target) cell(v float64, n int) string {
	s := formatValue(v) + t.unit
	if n > 1 {
		s = "worst of " + strconv.Itoa(n) + ": " + s
	}
	switch {
	case t.cmp == "":
		return s
	case t.cmp == "<=" && v <= t.limit, t.cmp == ">=" && v >= t.limit:
		return s + ", met"
	}
	return s + ", **not met**"
}

// formatValue prints v in full when it is whole, without decimals from
// 100 on, and with three significant digits below.
func formatValue(v float64) string {
	switch {
	case v == float64(int64(v)) && v < 1e15:
		return strconv.FormatInt(int64(v), 10)
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// targetsTable renders the targets as one table; runMachine is the run's
// machine and date, for the rows the run measured.
func targetsTable(ts []target, pkgs []pkgResults, runMachine string) string {
	var b strings.Builder
	b.WriteString("| target | measured | benchmark | machine and date |\n|---|---|---|---|\n")
	for _, t := range ts {
		measured, machine := t.measured, t.machine
		if v, n, ok := t.measure(pkgs); ok {
			measured, machine = t.cell(v, n), runMachine
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cellText(t.name), cellText(measured), cellText(t.benchmark), cellText(machine))
	}
	return b.String()
}

// unmeasured returns the targets with a selector that found no figure in
// the run, each as "name (selector)". Rule: make bench names them. Reason:
// a benchmark renamed under its target's selector left the table showing
// a figure recorded days before, with nothing to say so
// (TestUnmeasuredNamesStaleSelectors).
func unmeasured(ts []target, pkgs []pkgResults) []string {
	var out []string
	for _, t := range ts {
		if _, _, ok := t.measure(pkgs); t.sel != "" && !ok {
			out = append(out, fmt.Sprintf("%s (%s)", t.name, t.sel))
		}
	}
	return out
}

// cellText keeps a table cell on one line and its pipes escaped.
func cellText(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\n", " "), "|", `\|`)
}
