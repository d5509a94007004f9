package sim

import (
	"math"
	"testing"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// TestZeroByteCopy: a copy of no bytes on a GPU is what backends/rocm's
// copyAsync makes of it, an event done at once with no runtime call: the
// host pays no issue, it neither occupies nor waits for the link (or, on
// a GPU sharing host memory, the compute queue), and it launches nothing
// gathered. On a CPU it is what backends/cpu makes of it, a task queued
// in order: the host pays its issue, and it ends with the work before it.
func TestZeroByteCopy(t *testing.T) {
	long := kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{256, 256}, {256, 256}}}
	for _, name := range []string{"h100", "igpu"} {
		tl := NewTimeline(Async)
		d, err := New(quiet(t, name), DefaultOptions().WithTimeline(tl).WithSkipCompute(true))
		if err != nil {
			t.Fatal(err)
		}
		big, _ := d.Alloc(64 << 20)
		empty, _ := d.Alloc(0)
		m, _ := d.Alloc(long.InBytes(0))
		if _, err := d.WriteAsync(big, make([]byte, 64<<20), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := d.RunAsync(long, []backends.Buffer{m, m}, m, nil); err != nil {
			t.Fatal(err)
		}
		if err := d.Record(); err != nil {
			t.Fatal(err)
		}
		g, err := d.RunAsync(long, []backends.Buffer{m, m}, m, nil)
		if err != nil {
			t.Fatal(err)
		}
		before := tl.Stats()
		w, err := d.WriteAsync(empty, nil, []backends.Event{g})
		if err != nil {
			t.Fatal(err)
		}
		r, err := d.ReadAsync(nil, empty, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, ev := range []backends.Event{w, r} {
			if !ev.Done() {
				t.Errorf("%s: zero-byte copy %d not Done at once", name, i)
			}
			if tm, err := ev.Wait(); err != nil || tm.Duration != 0 {
				t.Errorf("%s: zero-byte copy %d: %v, %v; want no time and no error", name, i, tm.Duration, err)
			}
		}
		if d.Gathers() && g.(*work).placed() {
			t.Errorf("%s: a zero-byte copy launched the gathered op before it", name)
		}
		after := tl.Stats().Sub(before)
		busy := 0.0
		for _, l := range after.Lanes {
			busy += l.BusyUs
		}
		if after.HostUs != 0 || after.IssueUs != 0 || after.Syncs != 0 || busy != 0 {
			t.Errorf("%s: two zero-byte copies cost the host %v µs (issue %v, %d syncs) and the lanes %v µs; want nothing",
				name, after.HostUs, after.IssueUs, after.Syncs, busy)
		}
	}

	tl := NewTimeline(Async)
	cpu, err := New(quiet(t, "cpu2"), DefaultOptions().WithTimeline(tl).WithSkipCompute(true))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := cpu.Alloc(long.InBytes(0))
	empty, _ := cpu.Alloc(0)
	e1, err := cpu.RunAsync(long, []backends.Buffer{m, m}, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := tl.Stats()
	w, err := cpu.WriteAsync(empty, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	after := tl.Stats().Sub(before)
	_, end1 := e1.(backends.VirtualSpan).Span()
	start, end := w.(backends.VirtualSpan).Span()
	if math.Abs(after.IssueUs-cpu.prof.IssueUs) > 1e-9 || after.Lanes[0].BusyUs != 0 || start != end1 || end != end1 {
		t.Errorf("cpu2: zero-byte copy issued in %v µs, busy %v µs, spans %v–%v; want %v µs, none, at the end of the op before (%v)",
			after.IssueUs, after.Lanes[0].BusyUs, start, end, cpu.prof.IssueUs, end1)
	}
}
