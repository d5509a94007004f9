package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// ExcludedGroup is the ops left out of the comparison for one reason.
type ExcludedGroup struct {
	Reason  string `json:"reason"`
	Ops     int64  `json:"ops"`
	Buckets int    `json:"buckets"`
	// Top are the buckets with the most ops, "NAME (OPS)".
	Top []string `json:"top"`
	// Missing is true when the ops could be compared with more data (a
	// -table or -sim-* model): only these count against -max-excluded.
	// Ops outside the op catalogue are not placement choices: no backend
	// here runs them, so the trace's own placement stands.
	Missing bool `json:"missing_data"`
}

// excludedGroups sums the excluded buckets by reason, the largest group
// first, each naming its top buckets by ops.
func (s *scanner) excludedGroups(top int) []ExcludedGroup {
	type group struct {
		ExcludedGroup
		bkts []*bucketState
	}
	byReason := map[string]*group{}
	for _, b := range s.buckets {
		if !b.excluded {
			continue
		}
		var missing []string
		for a := range s.arms {
			if b.meas[a].n == 0 && b.modelN[a] != b.ops {
				missing = append(missing, s.arms[a].name)
			}
		}
		reason := "no measurement or model on " + strings.Join(missing, ", ")
		if b.opaque {
			reason = "outside the op catalogue (no backend here runs it; a -table row can model it), no duration on " + strings.Join(missing, ", ")
		}
		g := byReason[reason]
		if g == nil {
			g = &group{ExcludedGroup: ExcludedGroup{Reason: reason, Missing: !b.opaque}}
			byReason[reason] = g
		}
		g.Ops += b.ops
		g.Buckets++
		g.bkts = append(g.bkts, b)
	}
	var out []ExcludedGroup
	for _, g := range byReason {
		slices.SortStableFunc(g.bkts, func(x, y *bucketState) int {
			return cmp.Or(cmp.Compare(y.ops, x.ops), strings.Compare(x.name, y.name))
		})
		for _, b := range g.bkts[:min(max(top, 3), len(g.bkts))] {
			g.Top = append(g.Top, fmt.Sprintf("%s (%d)", b.name, b.ops))
		}
		out = append(out, g.ExcludedGroup)
	}
	slices.SortFunc(out, func(x, y ExcludedGroup) int {
		return cmp.Or(cmp.Compare(y.Ops, x.Ops), strings.Compare(x.Reason, y.Reason))
	})
	return out
}

// excludedSummary says the groups in one line.
func excludedSummary(gs []ExcludedGroup) string {
	parts := make([]string, len(gs))
	for i, g := range gs {
		parts[i] = fmt.Sprintf("%d ops of %d buckets %s", g.Ops, g.Buckets, g.Reason)
	}
	return strings.Join(parts, "; ")
}

// checkExcluded reports the ops that more data would let the comparison
// include (their bucket lacks a measurement and a model on a backend
// that could run them), naming the backends that cause it: a warning for
// stderr, or an error when they exceed -max-excluded percent of the ops.
// Ops outside the op catalogue do not count: they are no choice. The
// caller prints the warning once the replay is under way, so that an
// error (a damaged -db) comes first.
func checkExcluded(o *options, s *scanner) (warning string, err error) {
	var missing int64
	var cause [maxArms]int64
	for _, b := range s.buckets {
		if !b.excluded || b.opaque {
			continue
		}
		missing += b.ops
		for a := range s.arms {
			if b.meas[a].n == 0 && b.modelN[a] != b.ops {
				cause[a] += b.ops
			}
		}
	}
	if missing == 0 || s.ops == 0 {
		return "", nil
	}
	var names []string
	for a := range s.arms {
		if cause[a] > 0 {
			names = append(names, fmt.Sprintf("%s (named by %d of %d events, no duration for %d ops)", s.arms[a].name, s.events[a], s.ops, cause[a]))
		}
	}
	slices.Sort(names)
	pct := 100 * float64(missing) / float64(s.ops)
	msg := fmt.Sprintf("%s: %d of %d ops (%.1f%%) are left out of the comparison: their buckets have no measurement or model on %s; "+
		"give -table or -sim-gpu / -sim-cpu to model the missing durations, or drop the events of a backend that appears only in a few",
		s.in.name, missing, s.ops, pct, strings.Join(names, ", "))
	if pct > o.maxExcluded {
		return "", fmt.Errorf("%w: %s (-max-excluded %g allows %g%%)", errInput, msg, o.maxExcluded, o.maxExcluded)
	}
	return "replay: warning: " + msg, nil
}
