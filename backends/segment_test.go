package backends

import (
	"fmt"
	"math"
	"math/rand/v2"
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

// planned returns limit's sizes for a gathering of n ops: a plan's
// segments and what is left at Flush.
func planned(n int, limit func(k, done, last int) int) []int {
	var sizes []int
	for done := 0; done < n; {
		s := min(limit(len(sizes), done, n), n-done)
		sizes = append(sizes, s)
		done += s
	}
	return sizes
}

// TestSegmentPlanSooner: a planned gathering ends no later than
// SegmentLimit's (or within planTie, in fewer launches), and sooner both
// where the device runs an op more slowly than the host gathers one
// (SegmentLimit's doubling first segments leave it idle while the host
// gathers twice what it just ran) and where the host is the slower (its
// last segments of 32 leave the device a tail), but not where the device
// is so slow that it never runs dry; every segment but the last holds
// segmentFirst to segmentMax ops. A gathering of 3,000 ops is cut on
// units of 4.
func TestSegmentPlanSooner(t *testing.T) {
	for _, c := range []struct {
		h, d, l float64
		sooner  bool
	}{
		{4, 5.75, 20, true}, // an H100 at batch 1 (sim's h100 profile)
		{4, 8, 20, true},
		{1, 5, 8, false},
		{4, 4.5, 2, true},
		{7.36, 5.65, 7.9, true}, // the H200's wall time per op as the host's
		{4, 4, 20, true},
		{6, 3, 20, true},
	} {
		for _, n := range []int{207, 3000} {
			var p SegmentPlanner
			p.Plan(n, c.h, c.d, c.l, planEvidence)
			if p.plan == nil {
				t.Fatalf("%+v, %d ops: no plan", c, n)
			}
			plannedUs, pl := stepUs(n, c.h, c.d, c.l, p.Limit)
			old, ol := stepUs(n, c.h, c.d, c.l, SegmentLimit)
			if plannedUs > old*(1+planTie) || plannedUs > old && pl >= ol || c.sooner && !(plannedUs < old) {
				t.Errorf("%+v, %d ops: planned %.1f µs (%d launches), SegmentLimit's %.1f (%d)", c, n, plannedUs, pl, old, ol)
			}
			for k, s := range planned(n, p.Limit) {
				if s > segmentMax || s < segmentFirst && k < pl-1 {
					t.Errorf("%+v, %d ops: segment %d of %d ops, outside [%d, %d]", c, n, k, s, segmentFirst, segmentMax)
				}
			}
			t.Logf("%+v, %d ops: planned %.1f µs in %d launches, SegmentLimit's %.1f in %d", c, n, plannedUs, pl, old, ol)
		}
	}
}

// TestSegmentPlanSoonest: no way to cut a small gathering into segments
// (of at most segmentMax ops, each but the last of at least
// segmentFirst) ends sooner than the plan by more than planTie, or as
// soon in fewer launches:
// every cut tried, over costs on either side of the device's and the
// host's time per op.
func TestSegmentPlanSoonest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 40 {
		n := 2 + r.IntN(35)
		h, d, l := 0.5+8*r.Float64(), 0.5+8*r.Float64(), 30*r.Float64()
		plan := planSegments(n, h, d, l)
		limit := func(k, done, last int) int {
			if k < len(plan) {
				return plan[k]
			}
			return n
		}
		us, launches := stepUs(n, h, d, l, limit)
		bestUs, bestLaunches := math.Inf(1), 0
		var cuts func(done int, sizes []int)
		cuts = func(done int, sizes []int) {
			if done == n {
				got, k := stepUs(n, h, d, l, func(k, _, _ int) int { return sizes[k] })
				if got < bestUs || got == bestUs && k < bestLaunches {
					bestUs, bestLaunches = got, k
				}
				return
			}
			for s := 1; s <= min(segmentMax, n-done); s++ {
				if s >= segmentFirst || done+s == n {
					cuts(done+s, append(sizes, s))
				}
			}
		}
		cuts(0, nil)
		if us > bestUs*(1+planTie) || us >= bestUs*(1-1e-9) && launches > bestLaunches {
			t.Errorf("n %d, h %.2f, d %.2f, l %.2f: planned %v ends at %.3f µs in %d launches, a cut at %.3f in %d",
				n, h, d, l, plan, us, launches, bestUs, bestLaunches)
		}
	}
}

// TestSegmentPlanUnknown: where an estimate is missing or measured over
// too few ops, or the gathering is past what a plan is made for, the
// segments are SegmentLimit's.
func TestSegmentPlanUnknown(t *testing.T) {
	for _, c := range []struct {
		h, d, l  float64
		evidence int64
	}{
		{0, 6, 20, planEvidence},
		{4, 0, 20, planEvidence},
		{4, 6, -1, planEvidence},
		{4, 6, 20, planEvidence - 1},
	} {
		var p SegmentPlanner
		p.Plan(207, c.h, c.d, c.l, c.evidence)
		if got, want := planned(207, p.Limit), planned(207, SegmentLimit); !slices.Equal(got, want) {
			t.Errorf("%+v: segments %v, SegmentLimit's %v", c, got, want)
		}
	}
	if p := planSegments(8*planUnits+1, 4, 6, 20); p != nil {
		t.Errorf("a gathering of %d ops planned in %d segments", 8*planUnits+1, len(p)+1)
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

// TestSegmentPlanBySize: a program alternating two sizes of gathering
// whose ops differ (cmd/infer's GPU-alone steps, 71 small ops, and a
// placement whose 26 GPU ops are its larger ones) gets each size's plan
// from the device's time in gatherings of that size once they have run
// planEvidence ops, not from the mean over both, which is the source
// until then; a size within planSlack of one kept shares its record (a
// mixture of experts' steps vary with their routing), and at most
// planSizes sizes are kept.
func TestSegmentPlanBySize(t *testing.T) {
	const h, l, mixed = 4.0, 20.0, 6.0
	small, large := struct {
		n  int
		us float64
	}{71, 5.75}, struct {
		n  int
		us float64
	}{26, 9}
	var p SegmentPlanner
	p.Plan(small.n, h, mixed, l, planEvidence)
	if want := planSegments(small.n, h, mixed, l); !slices.Equal(p.plan, want) {
		t.Fatalf("before its own evidence: plan %v, want the mean's %v", p.plan, want)
	}
	if own := planSegments(small.n, h, small.us, l); slices.Equal(own, p.plan) {
		t.Fatalf("the mixed mean plans %v, as the size's own: the test shows nothing", own)
	}
	for range planEvidence / 8 {
		p.Ran(small.n, 8*small.us, 8)
		p.Ran(large.n, 8*large.us, 8)
	}
	for range 3 {
		p.Plan(small.n, h, mixed, l, planEvidence)
		if want := planSegments(small.n, h, small.us, l); !slices.Equal(p.plan, want) {
			t.Errorf("%d ops: plan %v, want its own %v", small.n, p.plan, want)
		}
		p.Plan(large.n, h, mixed, l, planEvidence)
		if want := planSegments(large.n, h, large.us, l); !slices.Equal(p.plan, want) {
			t.Errorf("%d ops: plan %v, want its own %v", large.n, p.plan, want)
		}
	}
	p.Plan(small.n+5, h, mixed, l, planEvidence)
	if want := planSegments(small.n, h, small.us, l); !slices.Equal(p.plan, want) {
		t.Errorf("%d ops, within %v of %d: plan %v, want %d's %v", small.n+5, planSlack, small.n, p.plan, small.n, want)
	}
	for n := 100; n < 10000; n *= 2 {
		p.Plan(n, h, mixed, l, planEvidence)
	}
	if len(p.sizes) > planSizes {
		t.Errorf("%d sizes kept, want at most %d", len(p.sizes), planSizes)
	}
	if _, ok := p.sizes[small.n]; !ok {
		t.Errorf("the size with the most evidence was dropped for new ones")
	}
}

// BenchmarkSegmentPlan is the host's cost of a plan (made at Record when
// the gathering's size or an estimate moved), over gatherings of a
// decode step's 207 ops to 8,192 and costs on either side: an H100's,
// the H200's wall time, a slow device, cheap launches (the worst).
func BenchmarkSegmentPlan(b *testing.B) {
	for _, n := range []int{207, 1600, 4000, 8192} {
		for _, c := range []struct {
			name    string
			h, d, l float64
		}{{"h100", 4, 5.75, 20}, {"h200", 7.36, 5.65, 7.9}, {"slowdevice", 4, 8, 20}, {"cheaplaunch", 4, 4.5, 2}} {
			b.Run(fmt.Sprintf("%d/%s", n, c.name), func(b *testing.B) {
				for b.Loop() {
					planSegments(n, c.h, c.d, c.l)
				}
			})
		}
	}
}
