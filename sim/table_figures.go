package sim

// The hardware figures a perf table gives its backend labels (Table's
// doc): "# backend LABEL: key=value ..." lines and SetFigures.

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/internal/input"
)

var figureKeys = []string{"kind", "gflops", "membw_gbps", "dispatch_us", "link_gbps", "link_latency_us"}

// scanFigures reads the "# backend LABEL: key=value ..." lines of a perf
// table (Table's doc).
func scanFigures(data []byte, bad func(int, string, ...any) error) (map[string]figures, error) {
	figs := map[string]figures{}
	for i, ln := range bytes.Split(data, []byte("\n")) {
		rest, ok := bytes.CutPrefix(bytes.TrimSpace(ln), []byte("#"))
		if !ok {
			continue
		}
		words := strings.Fields(string(rest))
		if len(words) < 2 || words[0] != "backend" || !strings.HasSuffix(words[1], ":") {
			continue
		}
		label, fg, err := parseFigures(words[1:])
		if err != nil {
			return nil, bad(i+1, "%v", err)
		}
		if prev, dup := figs[label]; dup {
			return nil, bad(i+1, "figures for backend %s again (first on line %d)", input.Quote(label), prev.line)
		}
		fg.line = i + 1
		figs[label] = fg
	}
	return figs, nil
}

// parseFigures parses "LABEL: key=value ..." split into words.
func parseFigures(words []string) (string, figures, error) {
	label := ""
	if len(words) > 0 {
		label = strings.TrimSuffix(words[0], ":")
	}
	if len(words) < 2 || label == "" || !strings.HasSuffix(words[0], ":") {
		return "", figures{}, fmt.Errorf("backend figures: want \"LABEL: key=value ...\" with keys %s", strings.Join(figureKeys, ", "))
	}
	fg := figures{vals: map[string]float64{}}
	for _, kv := range words[1:] {
		k, v, _ := strings.Cut(kv, "=")
		if !slices.Contains(figureKeys, k) {
			return "", fg, fmt.Errorf("backend %s: unknown figure %s (want %s)", input.Quote(label), input.Quote(k), strings.Join(figureKeys, ", "))
		}
		if _, dup := fg.vals[k]; dup || k == "kind" && fg.kind != "" {
			return "", fg, fmt.Errorf("backend %s: %s given twice", input.Quote(label), k)
		}
		if k == "kind" {
			if v != "cpu" && v != "gpu" {
				return "", fg, fmt.Errorf("backend %s: kind %s, want cpu or gpu", input.Quote(label), input.Quote(v))
			}
			fg.kind = v
			continue
		}
		x, err := strconv.ParseFloat(v, 64)
		lo := 0.0 // dispatch, link bandwidth (0: shares host memory) and latency may be 0
		if k == "gflops" || k == "membw_gbps" {
			lo = 1e-3
		}
		if err != nil || !(x >= lo && x <= 1e9) {
			return "", fg, fmt.Errorf("backend %s: %s %s, want a number in [%g, 1e9]", input.Quote(label), k, input.Quote(v), lo)
		}
		fg.vals[k] = x
	}
	return label, fg, nil
}

// SetFigures gives a backend label the hardware figures its arm's prior
// uses, in the form of a table's "# backend" line without the "#
// backend": "gpu: kind=gpu gflops=10974 membw_gbps=480" (Table's doc). It
// replaces figures the table gave that label; the label must have rows.
// SetFigures is how figures reach arms whose source has no place for them
// (a StarPU model); it is not safe for concurrent use with Arms.
func (t *Table) SetFigures(s string) error {
	label, fg, err := parseFigures(strings.Fields(s))
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrBadTable, t.name, err)
	}
	if !slices.Contains(t.backends, label) {
		return fmt.Errorf("%w: %s: figures for backend %s, which has no rows (backends: %s)", ErrBadTable, t.name, input.Quote(label), strings.Join(t.backends, ", "))
	}
	if t.figures == nil {
		t.figures = map[string]figures{}
	}
	t.figures[label] = fg
	return nil
}

// apply replaces the figures of n that fg gives.
func (fg figures) apply(n *backends.Nominal) {
	for k, v := range fg.vals {
		*nominalField(n, k) = v
	}
}

// nominalField returns the field of n that a figure key names, nil for
// "kind" or an unknown key.
func nominalField(n *backends.Nominal, key string) *float64 {
	switch key {
	case "gflops":
		return &n.GFLOPS
	case "membw_gbps":
		return &n.MemGBps
	case "dispatch_us":
		return &n.DispatchUs
	case "link_gbps":
		return &n.LinkGBps
	case "link_latency_us":
		return &n.LinkLatencyUs
	}
	return nil
}
