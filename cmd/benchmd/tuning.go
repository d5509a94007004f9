package main

import (
	"fmt"
	"slices"
	"strings"
)

// tuningTable renders bandit's BenchmarkTuning results
// (Tuning/h=H/gamma=G, metrics regret% and switches/10k) as a grid: a row
// per hysteresis, a column per discount, in the order the benchmark runs
// them. It returns "" when the run has none.
func tuningTable(pkgs []pkgResults) string {
	type cell struct{ regret, switches float64 }
	grid := map[[2]string]cell{}
	var hs, gs []string
	for _, p := range pkgs {
		if p.pkg != "bandit" && !strings.HasSuffix(p.pkg, "/bandit") {
			continue
		}
		for _, r := range p.results {
			rest, ok := strings.CutPrefix(r.name, "Tuning/h=")
			if !ok {
				continue
			}
			h, g, ok := strings.Cut(rest, "/gamma=")
			regret, ok1 := r.get("regret%")
			switches, ok2 := r.get("switches/10k")
			if !ok || !ok1 || !ok2 {
				continue
			}
			if !slices.Contains(hs, h) {
				hs = append(hs, h)
			}
			if !slices.Contains(gs, g) {
				gs = append(gs, g)
			}
			grid[[2]string{h, g}] = cell{regret, switches}
		}
	}
	if len(grid) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("| h \\ γ | " + strings.Join(gs, " | ") + " |\n|---|" + strings.Repeat("---:|", len(gs)) + "\n")
	for _, h := range hs {
		cells := make([]string, len(gs))
		for i, g := range gs {
			if c, ok := grid[[2]string{h, g}]; ok {
				cells[i] = fmt.Sprintf("%s%% / %.0f", formatValue(c.regret), c.switches)
			}
		}
		fmt.Fprintf(&b, "| %s | %s |\n", h, strings.Join(cells, " | "))
	}
	return b.String()
}
