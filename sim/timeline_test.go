package sim

import (
	"errors"
	"math"
	"testing"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// fourOps charges the hand-computed example of TestTimelineMakespan on t:
// lane 0 (issue 2 µs per op) and lane 1 (issue 1 µs), op3 after op2,
// op4 after op1, then the host waits for op4 (sync 4 µs) and again for
// op3, which has ended by then.
func fourOps(t *Timeline) (ends [4]float64) {
	a, b := t.Lane("a"), t.Lane("b")
	_, ends[0] = t.Enqueue(a, 2, 0, 10, 4)
	_, ends[1] = t.Enqueue(b, 1, 0, 4, 4)
	_, ends[2] = t.Enqueue(a, 2, ends[1], 3, 4)
	_, ends[3] = t.Enqueue(b, 1, ends[0], 5, 4)
	t.Wait(ends[3], 4)
	t.Wait(ends[2], 4)
	return ends
}

// TestTimelineMakespan: a step's time is its critical path, not the sum
// of its ops (DESIGN.md § Execution models). Worked by hand:
//
//	async: op1 a [2,12]; op2 b [3,7]; op3 a [12,15] (a busy until 12);
//	       op4 b [12,17] (after op1); the host waits for op4: 17 + 4 = 21;
//	       op3 has ended, so the second wait is free.
//	sync:  (2+10+4) + (1+4+4) + (2+3+4) + (1+5+4) = 44.
//	serial: 10 + 4 + 3 + 5 = 22, nothing issued or synchronised.
func TestTimelineMakespan(t *testing.T) {
	for _, c := range []struct {
		m                                   ExecModel
		ends                                [4]float64
		makespan, issue, sync, busyA, bound float64
		syncs                               int64
	}{
		{Async, [4]float64{12, 7, 15, 17}, 21, 6, 4, 13, 13, 1},
		{Synchronous, [4]float64{12, 21, 30, 40}, 44, 6, 16, 13, 13, 4},
		{Serial, [4]float64{10, 14, 17, 22}, 22, 0, 0, 13, 13, 0},
	} {
		tl := NewTimeline(c.m)
		ends := fourOps(tl)
		s := tl.Stats()
		if ends != c.ends || s.MakespanUs != c.makespan || s.IssueUs != c.issue || s.SyncUs != c.sync ||
			s.Syncs != c.syncs || s.Lanes[0].BusyUs != c.busyA || s.Lanes[1].BusyUs != 9 || s.BoundUs() != c.bound {
			t.Errorf("%v: ends %v, stats %+v (bound %v); want ends %v, makespan %v, issue %v, sync %v in %d waits, busy %v and 9",
				c.m, ends, s, s.BoundUs(), c.ends, c.makespan, c.issue, c.sync, c.syncs, c.busyA)
		}
	}
}

// TestTimelineOrdering: each lane runs its work in order, and work
// waits for what it depends on on another lane.
func TestTimelineOrdering(t *testing.T) {
	tl := NewTimeline(Async)
	a, b := tl.Lane("a"), tl.Lane("b")
	s1, e1 := tl.Enqueue(a, 1, 0, 50, 0)
	s2, e2 := tl.Enqueue(a, 1, 0, 5, 0) // behind the first on its lane
	s3, _ := tl.Enqueue(b, 1, e2, 5, 0) // after the second, on the other lane
	if s2 < e1 || s3 < e2 || s1 != 1 {
		t.Errorf("spans [%v,%v] [%v,%v] then %v: work overlaps on a lane or starts before its input", s1, e1, s2, e2, s3)
	}
	if got := tl.FreeInUs(a); got != e2-tl.HostUs() {
		t.Errorf("lane a free in %v µs, want %v", got, e2-tl.HostUs())
	}
}

// quiet returns the profile called name without noise, spikes or
// warm-up, so that its durations are its DeviceUs.
func quiet(t *testing.T, name string) *Profile {
	t.Helper()
	p := MustProfile(name)
	p.Sigma, p.SpikeProb, p.WarmupFactor = 0, 0, 0
	return p
}

// TestDeviceQueue: ops queued on two simulated devices of one Timeline
// overlap; a GPU op consuming a CPU op's output starts after it and reads
// its result; the host pays the sync cost only where it waits.
func TestDeviceQueue(t *testing.T) {
	tl := NewTimeline(Async)
	cpu, err := New(quiet(t, "cpu2"), DefaultOptions().WithTimeline(tl))
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := New(quiet(t, "igpu"), DefaultOptions().WithTimeline(tl))
	if err != nil {
		t.Fatal(err)
	}
	spec := kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{4}, {4}}}
	buf := func(d *Device, v ...float32) backends.Buffer {
		b, err := d.Alloc(16)
		if err != nil {
			t.Fatal(err)
		}
		if v != nil {
			if _, err := d.Write(b, kernels.AsBytes(v)); err != nil {
				t.Fatal(err)
			}
		}
		return b
	}
	x, y, c := buf(cpu, 1, 2, 3, 4), buf(cpu, 10, 20, 30, 40), buf(cpu)
	before := tl.Stats()
	e1, err := cpu.RunAsync(spec, []backends.Buffer{x, y}, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	// igpu shares host memory: its buffer aliases nothing, so copy c in
	// after the CPU op, then add it to itself on the GPU.
	g, out := buf(gpu), buf(gpu)
	cb := make([]byte, 16)
	eR, err := cpu.ReadAsync(cb, c, []backends.Event{e1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eR.Wait(); err != nil {
		t.Fatal(err)
	}
	eW, err := gpu.WriteAsync(g, cb, []backends.Event{eR})
	if err != nil {
		t.Fatal(err)
	}
	e2, err := gpu.RunAsync(spec, []backends.Buffer{g, g}, out, []backends.Event{eW})
	if err != nil {
		t.Fatal(err)
	}
	_, end1 := e1.(backends.VirtualSpan).Span()
	start2, end2 := e2.(backends.VirtualSpan).Span()
	if start2 < end1 {
		t.Errorf("GPU op starts at %v µs, before its input's producer ends at %v", start2, end1)
	}
	if e2.Done() {
		t.Error("queued GPU op Done before the host waited for it")
	}
	mid := tl.Stats().Sub(before)
	if mid.Syncs != 1 || mid.SyncUs != cpu.prof.SyncUs {
		t.Errorf("one wait on the CPU: %d syncs, %v µs", mid.Syncs, mid.SyncUs)
	}
	res := make([]byte, 16)
	if _, err := gpu.Read(res, out); err != nil {
		t.Fatal(err)
	}
	got := kernels.AsF32(res)
	for i, want := range []float32{22, 44, 66, 88} {
		if got[i] != want {
			t.Fatalf("result %v, want 22 44 66 88", got)
		}
	}
	after := tl.Stats().Sub(before)
	if !e2.Done() || after.Syncs != 2 || math.Abs(after.SyncUs-cpu.prof.SyncUs-gpu.prof.SyncUs) > 1e-9 {
		t.Errorf("after the read: done %v, %d syncs of %v µs; want 2 (cpu then igpu)", e2.Done(), after.Syncs, after.SyncUs)
	}
	if tl.HostUs() < end2 {
		t.Errorf("host at %v µs after reading a result that ends at %v", tl.HostUs(), end2)
	}
}

// TestDeviceSyncCharges: queued ops cost the host their issue only;
// Sync waits once; the synchronous methods pay a sync per op.
func TestDeviceSyncCharges(t *testing.T) {
	spec := kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{64, 64}, {64, 64}}}
	run := func(queued bool) TimelineStats {
		tl := NewTimeline(Async)
		d, err := New(quiet(t, "h100"), DefaultOptions().WithTimeline(tl).WithSkipCompute(true))
		if err != nil {
			t.Fatal(err)
		}
		a, _ := d.Alloc(spec.InBytes(0))
		b, _ := d.Alloc(spec.InBytes(1))
		o, _ := d.Alloc(spec.OutBytes())
		for range 10 {
			if queued {
				if _, err := d.RunAsync(spec, []backends.Buffer{a, b}, o, nil); err != nil {
					t.Fatal(err)
				}
			} else if _, err := d.Run(spec, []backends.Buffer{a, b}, o); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Sync(); err != nil {
			t.Fatal(err)
		}
		return tl.Stats()
	}
	h := quiet(t, "h100")
	op := h.DeviceUs(spec)
	q, s := run(true), run(false)
	// Queued, op i starts when the host has issued it and op i-1 has
	// ended: the slower of the two sets the pace.
	if want := h.IssueUs + 9*max(h.IssueUs, op) + op + h.SyncUs; q.Syncs != 1 || math.Abs(q.MakespanUs-want) > 1e-6 {
		t.Errorf("queued: %d syncs, makespan %v µs; want 1 and %v", q.Syncs, q.MakespanUs, want)
	}
	if s.Syncs != 10 || math.Abs(s.MakespanUs-10*(h.IssueUs+op+h.SyncUs)) > 1e-6 {
		t.Errorf("synchronous: %d syncs, makespan %v µs; want 10 and %v", s.Syncs, s.MakespanUs, 10*(h.IssueUs+op+h.SyncUs))
	}
}

// TestDeviceQueuedFailure: an injected failure of queued work is Done at
// once and reported by Sync, once.
func TestDeviceQueuedFailure(t *testing.T) {
	d, err := New(quiet(t, "h100"), DefaultOptions().WithTimeline(NewTimeline(Async)).
		WithEvents(Event{At: 1, Kind: TransientError}))
	if err != nil {
		t.Fatal(err)
	}
	spec := kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{4}, {4}}}
	a, _ := d.Alloc(16)
	var prev backends.Event
	for i := range 3 {
		ev, err := d.RunAsync(spec, []backends.Buffer{a, a}, a, nil)
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			prev = ev
			if !ev.Done() {
				t.Error("failed op not Done")
			}
		}
	}
	// Work queued after the failed op does not run, and says why.
	ev, err := d.RunAsync(spec, []backends.Buffer{a, a}, a, []backends.Event{prev})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ev.Wait(); !errors.Is(err, ErrDependency) || !errors.Is(err, backends.ErrTransient) {
		t.Errorf("op after a failed one: %v, want ErrDependency wrapping the transient error", err)
	}
	if err := d.Sync(); !errors.Is(err, backends.ErrTransient) {
		t.Errorf("Sync: %v, want the queued op's transient error", err)
	}
	if err := d.Sync(); err != nil {
		t.Errorf("second Sync: %v, want nil (reported once)", err)
	}
}

// TestSerialUnchanged: a device opened without a Timeline reports the
// durations of the model before queues (LaunchUs + work).
func TestSerialUnchanged(t *testing.T) {
	d, err := New(quiet(t, "h100"), DefaultOptions().WithSkipCompute(true))
	if err != nil {
		t.Fatal(err)
	}
	spec := kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{64, 64}, {64, 64}}}
	a, _ := d.Alloc(spec.InBytes(0))
	o, _ := d.Alloc(spec.OutBytes())
	tm, err := d.Run(spec, []backends.Buffer{a, a}, o)
	if err != nil {
		t.Fatal(err)
	}
	if want := micros(d.prof.BaseUs(spec)); tm.Duration != want || d.Timeline().Model() != Serial {
		t.Errorf("serial duration %v, want %v (BaseUs)", tm.Duration, want)
	}
}

// TestGPUWaitsForOtherDevicesOnHost: a GPU's op or copy that depends on
// another device's work is issued only once the host has waited for
// that work (backends/rocm's awaitForeign), gathered or not; a CPU's op
// that depends on a GPU's work waits for it on its own queue, the host
// going on.
func TestGPUWaitsForOtherDevicesOnHost(t *testing.T) {
	long := kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{256, 256}, {256, 256}}}
	for _, c := range []struct {
		gpu    string
		gather bool
	}{{"igpu", false}, {"h100", false}, {"h100", true}} {
		tl := NewTimeline(Async)
		cpu, err := New(quiet(t, "cpu2"), DefaultOptions().WithTimeline(tl).WithSkipCompute(true))
		if err != nil {
			t.Fatal(err)
		}
		gpu, err := New(quiet(t, c.gpu), DefaultOptions().WithTimeline(tl).WithSkipCompute(true))
		if err != nil {
			t.Fatal(err)
		}
		cb, _ := cpu.Alloc(long.InBytes(0))
		gb, _ := gpu.Alloc(long.InBytes(0))
		if c.gather {
			if err := gpu.Record(); err != nil {
				t.Fatal(err)
			}
		}
		e1, err := cpu.RunAsync(long, []backends.Buffer{cb, cb}, cb, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, end1 := e1.(backends.VirtualSpan).Span()
		e2, err := gpu.RunAsync(long, []backends.Buffer{gb, gb}, gb, []backends.Event{e1})
		if err != nil {
			t.Fatal(err)
		}
		if h := tl.HostUs(); h < end1 {
			t.Errorf("%s (gathered %v): host at %.1f µs after queuing a GPU op on a CPU op ending at %.1f: it did not wait", c.gpu, c.gather, h, end1)
		}
		w, err := gpu.WriteAsync(gb, make([]byte, long.InBytes(0)), []backends.Event{e1})
		if err != nil {
			t.Fatal(err)
		}
		if err := gpu.Flush(); err != nil {
			t.Fatal(err)
		}
		for i, ev := range []backends.Event{e2, w} {
			if _, err := ev.Wait(); err != nil {
				t.Fatal(err)
			}
			if s, _ := ev.(backends.VirtualSpan).Span(); s < end1+gpu.prof.IssueUs-1e-9 && !c.gather {
				t.Errorf("%s: GPU work %d starts at %.1f µs, before the host could issue it after the CPU's end %.1f", c.gpu, i, s, end1)
			}
		}
		// The other way: the host does not wait, the CPU's queue does.
		e3, err := gpu.RunAsync(long, []backends.Buffer{gb, gb}, gb, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := gpu.Flush(); err != nil {
			t.Fatal(err)
		}
		_, end3 := e3.(backends.VirtualSpan).Span()
		e4, err := cpu.RunAsync(long, []backends.Buffer{cb, cb}, cb, []backends.Event{e3})
		if err != nil {
			t.Fatal(err)
		}
		if s4, _ := e4.(backends.VirtualSpan).Span(); s4 < end3 || tl.HostUs() >= end3 {
			t.Errorf("%s: CPU op after a GPU op starts at %.1f µs (GPU ends %.1f), host at %.1f: want the CPU's queue to wait, not the host", c.gpu, s4, end3, tl.HostUs())
		}
	}
}

// TestCPUWaitsForGPUResumes: a CPU's op that reads a GPU's work its
// worker reaches before that work ends starts at its end plus the GPU's
// SyncUs, the resume the host pays after the same wait; one its worker
// reaches after that end (the CPU busy until then) pays nothing.
func TestCPUWaitsForGPUResumes(t *testing.T) {
	long := kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{256, 256}, {256, 256}}}
	short := kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{4}, {4}}}
	tl := NewTimeline(Async)
	cpu, err := New(quiet(t, "cpu2"), DefaultOptions().WithTimeline(tl).WithSkipCompute(true))
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := New(quiet(t, "igpu"), DefaultOptions().WithTimeline(tl).WithSkipCompute(true))
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := cpu.Alloc(long.InBytes(0))
	gb, _ := gpu.Alloc(long.InBytes(0))
	cs, _ := cpu.Alloc(short.InBytes(0))
	gs, _ := gpu.Alloc(short.InBytes(0))
	span := func(ev backends.Event, err error) (float64, float64) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return ev.(backends.VirtualSpan).Span()
	}
	g1, err := gpu.RunAsync(long, []backends.Buffer{gb, gb}, gb, nil)
	_, end1 := span(g1, err)
	s2, _ := span(cpu.RunAsync(short, []backends.Buffer{cs, cs}, cs, []backends.Event{g1}))
	if want := end1 + gpu.prof.SyncUs; math.Abs(s2-want) > 1e-9 {
		t.Errorf("CPU op after a GPU op ending at %.1f µs starts at %.1f, want %.1f (its end + the GPU's SyncUs %.0f)", end1, s2, want, gpu.prof.SyncUs)
	}
	// The CPU busy past the GPU's end: its worker finds the event done.
	g3, err := gpu.RunAsync(short, []backends.Buffer{gs, gs}, gs, nil)
	_, end3 := span(g3, err)
	_, busy := span(cpu.RunAsync(long, []backends.Buffer{cb, cb}, cb, nil))
	if busy <= end3+gpu.prof.SyncUs {
		t.Fatalf("the CPU's op ends at %.1f µs, not past the GPU's %.1f: not the case this test is for", busy, end3)
	}
	if s5, _ := span(cpu.RunAsync(short, []backends.Buffer{cs, cs}, cs, []backends.Event{g3})); s5 != busy {
		t.Errorf("CPU op after a GPU op that ended at %.1f µs, behind CPU work ending at %.1f, starts at %.1f", end3, busy, s5)
	}
}
