package backends

import (
	"slices"
	"testing"
)

// stepUs is the time a gathering of n ops takes, launched in segments of
// limit's sizes (what is left at Flush), when the host gathers an op in
// h µs and launches a segment in l, and the device runs an op in d: the
// host's clock and the device's, op by op, as a Recorder runs them.
func stepUs(n int, h, d, l float64, limit func(k, done, last int) int) (us float64, launches int) {
	host, free, pending, done := 0.0, 0.0, 0, 0
	launch := func() {
		host += l
		free = max(free, host) + float64(pending)*d
		done += pending
		pending = 0
		launches++
	}
	for range n {
		host += h
		pending++
		if pending >= limit(launches, done, n) {
			launch()
		}
	}
	if pending > 0 {
		launch()
	}
	return max(host, free), launches
}

// TestSegmentPlanDeviceBound: where the device runs an op more slowly
// than the host gathers one, a planned gathering ends no later than
// SegmentLimit's, and sooner where SegmentLimit's doubling first
// segments leave the device idle while the host gathers twice what it
// just ran (not where the device is so slow that it never runs dry);
// every planned segment pays for its launch (the host keeps ahead of
// the device).
func TestSegmentPlanDeviceBound(t *testing.T) {
	for _, c := range []struct {
		h, d, l float64
		sooner  bool
	}{
		{4, 5.75, 20, true}, // an H100 at batch 1 (sim's h100 profile)
		{4, 8, 20, true},
		{1, 5, 8, false},
		{4, 4.5, 2, true},
	} {
		const n = 207
		var p SegmentPlanner
		p.Plan(n, c.h, c.d, c.l, planEvidence)
		if p.plan == nil {
			t.Fatalf("%+v: no plan", c)
		}
		planned, pl := stepUs(n, c.h, c.d, c.l, p.Limit)
		old, ol := stepUs(n, c.h, c.d, c.l, SegmentLimit)
		if planned > old || c.sooner && !(planned < old) {
			t.Errorf("%+v: planned %.1f µs (%d launches), SegmentLimit's %.1f (%d)", c, planned, pl, old, ol)
		}
		for k, s := range p.plan {
			if float64(s)*(c.d-c.h) < c.l || s > segmentMax {
				t.Errorf("%+v: segment %d of %d ops does not pay for its launch or exceeds %d", c, k, s, segmentMax)
			}
		}
		t.Logf("%+v: planned %.1f µs in %d launches, SegmentLimit's %.1f in %d", c, planned, pl, old, ol)
	}
}

// TestSegmentPlanHostBound: where the host is the slower per op, or an
// estimate is missing or measured over too few ops, the segments are
// SegmentLimit's.
func TestSegmentPlanHostBound(t *testing.T) {
	for _, c := range []struct {
		h, d, l  float64
		evidence int64
	}{
		{7.36, 5.65, 7.9, planEvidence}, // the H200's wall time per op as the host's
		{4, 4, 20, planEvidence},
		{0, 6, 20, planEvidence},
		{4, 0, 20, planEvidence},
		{4, 6, 20, planEvidence - 1},
	} {
		var p SegmentPlanner
		p.Plan(207, c.h, c.d, c.l, c.evidence)
		for k, done := 0, 0; done < 207; k++ {
			if got, want := p.Limit(k, done, 207), SegmentLimit(k, done, 207); got != want {
				t.Fatalf("%+v: segment %d of %d ops, SegmentLimit's %d", c, k, got, want)
			}
			done += SegmentLimit(k, done, 207)
		}
	}
}

// TestSegmentPlanKept: a plan is kept while the gathering's size and the
// estimates stay within planSlack of those it was made with, so that a
// GPU replays the same graphs step after step, and made anew beyond.
func TestSegmentPlanKept(t *testing.T) {
	var p SegmentPlanner
	p.Plan(207, 4, 6, 20, planEvidence)
	first := p.plan
	p.Plan(207, 4.4, 5.5, 22, planEvidence) // each within 10%: the estimates of a plan that would differ
	if want := planSegments(207, 4.4, 5.5, 22); slices.Equal(want, first) {
		t.Fatalf("the moved estimates plan %v, as before: the test shows nothing", want)
	}
	if !slices.Equal(p.plan, first) {
		t.Errorf("estimates within %v moved the plan: %v, was %v", planSlack, p.plan, first)
	}
	p.Plan(207, 4, 9, 20, planEvidence)
	if slices.Equal(p.plan, first) || !slices.Equal(p.plan, planSegments(207, 4, 9, 20)) {
		t.Errorf("the device's time 1.5× kept the plan %v", p.plan)
	}
	p.Plan(150, 4, 9, 20, planEvidence)
	if !slices.Equal(p.plan, planSegments(150, 4, 9, 20)) {
		t.Errorf("a gathering of another size kept the plan %v", p.plan)
	}
}
