package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

var (
	machineLine = regexp.MustCompile(`^- machine: (.*), (\d+) cores \(GOMAXPROCS (\d+)\), (\S+)$`)
	goDateLine  = regexp.MustCompile(`^- (go\S+); (.+)$`)
)

// parseDoc reads back the figures and the machine of the run that render
// wrote into doc's generated block: the per-package tables and the
// header lines. Derived tables (crossover, simulator targets) are
// recomputed from the figures, so they are skipped; the figures are read
// as printed (three significant digits), so a derived cell may round
// differently from the run's.
func parseDoc(doc string) ([]pkgResults, runInfo, error) {
	i := strings.Index(doc, beginMark)
	j := strings.Index(doc, endMark)
	if i < 0 || j < i {
		return nil, runInfo{}, fmt.Errorf("benchmd: no generated block to read figures from")
	}
	var (
		pkgs []pkgResults
		info runInfo
		cur  = -1 // the package whose table is being read
	)
	for _, line := range strings.Split(doc[i:j], "\n") {
		switch {
		case strings.HasPrefix(line, "- machine: "):
			m := machineLine.FindStringSubmatch(line)
			if m == nil {
				return nil, runInfo{}, fmt.Errorf("benchmd: machine line %q", line)
			}
			info.cpu, info.osArch = m[1], m[4]
			info.cores, _ = strconv.Atoi(m[2])
			info.maxprocs, _ = strconv.Atoi(m[3])
		case strings.HasPrefix(line, "- memory: "):
			info.mem = strings.TrimPrefix(line, "- memory: ")
		case goDateLine.MatchString(line) && info.goV == "":
			m := goDateLine.FindStringSubmatch(line)
			info.goV, info.date = m[1], m[2]
		case strings.HasPrefix(line, "### "):
			pkgs = append(pkgs, pkgResults{pkg: strings.TrimPrefix(line, "### ")})
			cur = -1
		case line == rawHeader && len(pkgs) > 0:
			cur = len(pkgs) - 1
		case cur >= 0 && strings.HasPrefix(line, "|---"):
		case cur >= 0 && strings.HasPrefix(line, "| "):
			r, ok := parseRow(line)
			if !ok {
				return nil, runInfo{}, fmt.Errorf("benchmd: figures row %q", line)
			}
			pkgs[cur].results = append(pkgs[cur].results, r)
		case line == "":
			cur = -1
		}
	}
	var out []pkgResults
	for _, p := range pkgs {
		if len(p.results) > 0 {
			out = append(out, p)
		}
	}
	return out, info, nil
}

// parseRow reads "| name | iters | 1 ns/op, 2.5 GFLOP/s |", as render
// writes it.
func parseRow(line string) (result, bool) {
	f := strings.Split(strings.Trim(line, "| "), " | ")
	if len(f) != 3 {
		return result{}, false
	}
	iters, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return result{}, false
	}
	r := result{name: f[0], iters: iters}
	for _, fig := range strings.Split(f[2], ", ") {
		v, unit, ok := strings.Cut(fig, " ")
		x, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil {
			return result{}, false
		}
		r.metrics = append(r.metrics, metric{x, unit})
	}
	return r, true
}
