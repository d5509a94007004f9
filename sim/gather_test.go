package sim

import (
	"math"
	"slices"
	"testing"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// TestGatherOnTimeline: gathered ops cost the host GatherIssueUs each and
// GatherLaunchUs a launch instead of IssueUs each, reach the device only
// when launched (not Done, no span before), keep queue order, and a
// Wait launches them; a CPU and the synchronous model do not gather.
func TestGatherOnTimeline(t *testing.T) {
	const ops = 10
	s := kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{1024}, {1024}}}
	run := func(model ExecModel, profile string, gather bool) (hostUs float64, evs []backends.Event) {
		tl := NewTimeline(model)
		d, err := Open(profile, DefaultOptions().WithTimeline(tl).WithSkipCompute(true).WithSeed(1))
		if err != nil {
			t.Fatal(err)
		}
		buf, _ := d.Alloc(4096)
		if gather {
			if err := d.Record(); err != nil {
				t.Fatal(err)
			}
		}
		for range ops {
			ev, err := d.RunAsync(s, []backends.Buffer{buf, buf}, buf, nil)
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ev)
		}
		return tl.HostUs(), evs
	}
	p, _ := LookupProfile("h100")
	queued, _ := run(Async, "h100", false)
	host, evs := run(Async, "h100", true)
	if want := ops * p.IssueUs; math.Abs(queued-want) > 1e-6 {
		t.Fatalf("queued: host at %v µs, want %v", queued, want)
	}
	// 10 ops: segments of 4 then 8 (backends.SegmentLimit): one launched.
	if want := ops*p.GatherIssueUs + p.GatherLaunchUs; math.Abs(host-want) > 1e-6 {
		t.Fatalf("gathered: host at %v µs, want %v", host, want)
	}
	if _, end := evs[9].(backends.VirtualSpan).Span(); evs[9].Done() || end != 0 {
		t.Fatal("a gathered op not launched is Done or has a span")
	}
	if _, err := evs[9].Wait(); err != nil {
		t.Fatal(err)
	}
	prev := 0.0
	for i, ev := range evs {
		start, end := ev.(backends.VirtualSpan).Span()
		if start < prev || end <= start {
			t.Fatalf("op %d spans %v–%v after an op ending at %v", i, start, end, prev)
		}
		prev = end
	}
	if s0, _ := evs[4].(backends.VirtualSpan).Span(); s0 < 4*p.GatherIssueUs+p.GatherLaunchUs {
		t.Errorf("op 4 starts at %v µs, before its segment was gathered and launched", s0)
	}
	if h, _ := run(Async, "cpu2", true); h != ops*mustProfile(t, "cpu2").IssueUs {
		t.Errorf("a CPU gathered: host at %v µs", h)
	}
	if _, evs := run(Synchronous, "h100", true); !evs[0].Done() {
		t.Error("the synchronous model gathered")
	}
}

// TestFlushNothingGathered: a Flush after a Wait launched all that was
// gathered launches nothing and costs the host nothing, as backends/rocm's
// Flush of an empty gathering (a decode step reads its token before its
// Flush: the read launches the last segment).
func TestFlushNothingGathered(t *testing.T) {
	tl := NewTimeline(Async)
	d, err := Open("h100", DefaultOptions().WithTimeline(tl).WithSkipCompute(true).WithSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	s := kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{1024}, {1024}}}
	buf, _ := d.Alloc(4096)
	if err := d.Record(); err != nil {
		t.Fatal(err)
	}
	var last backends.Event
	for range 3 {
		if last, err = d.RunAsync(s, []backends.Buffer{buf, buf}, buf, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := last.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	p := mustProfile(t, "h100")
	if got, want := tl.Stats().IssueUs, 3*p.GatherIssueUs+p.GatherLaunchUs; math.Abs(got-want) > 1e-6 {
		t.Errorf("host issued %v µs for 3 gathered ops and one launch, want %v", got, want)
	}
}

func mustProfile(t *testing.T, name string) *Profile {
	p, err := LookupProfile(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSegmentPlanDecode: on the h100 profile, whose host gathers an op
// in 4 µs and whose device takes at least 5 (its gap), a decode-like step
// of 200 small ops is launched in planned segments once the gathered ops
// have measured the device (backends.SegmentPlanner's evidence), the
// same plan step after step, and the steps then end sooner than under
// SegmentLimit's doubling first segments, which leave the device idle.
func TestSegmentPlanDecode(t *testing.T) {
	const ops, steps = 200, 16
	s := kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{1024}, {1024}}}
	tl := NewTimeline(Async)
	d, err := Open("h100", DefaultOptions().WithTimeline(tl).WithSkipCompute(true).WithSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	buf, _ := d.Alloc(4096)
	stepUs := make([]float64, steps)
	var plans [][]int
	for step := range steps {
		before := tl.Stats().MakespanUs
		if err := d.Record(); err != nil {
			t.Fatal(err)
		}
		var sizes []int
		launched := 0 // ops launched before this one's
		for i := range ops {
			segs := d.segments
			if _, err := d.RunAsync(s, []backends.Buffer{buf, buf}, buf, nil); err != nil {
				t.Fatal(err)
			}
			if d.segments > segs {
				sizes = append(sizes, i+1-launched)
				launched = i + 1
			}
		}
		if err := d.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := d.Sync(); err != nil {
			t.Fatal(err)
		}
		stepUs[step] = tl.Stats().MakespanUs - before
		plans = append(plans, sizes)
	}
	old := backends.SegmentPlanner{}
	var want []int
	for k, done := 0, 0; done < ops; k++ {
		n := min(ops-done, old.Limit(k, done, ops))
		if done+n < ops {
			want = append(want, n)
		}
		done += n
	}
	if got := plans[1]; !slices.Equal(got, want) {
		t.Fatalf("step 1, before the evidence: segments %v, want SegmentLimit's %v", got, want)
	}
	last := plans[steps-1]
	if slices.Equal(last, want) {
		t.Fatalf("the last step launched SegmentLimit's segments %v", last)
	}
	for step := steps - 4; step < steps; step++ {
		if !slices.Equal(plans[step], last) {
			t.Errorf("step %d: segments %v, the last step's %v: the plan moved", step, plans[step], last)
		}
	}
	planned, limited := mean(stepUs[steps-4:]), stepUs[1]
	if !(planned < 0.97*limited) {
		t.Errorf("planned steps %.1f µs against %.1f under SegmentLimit: want at least 3%% sooner", planned, limited)
	}
	t.Logf("segments %v against %v; steps %.1f µs against %.1f", last, want, planned, limited)
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
