package sim

import (
	"math"
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

func mustProfile(t *testing.T, name string) *Profile {
	p, err := LookupProfile(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
