package sim

import (
	"errors"
	"math"
	"sync"
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

// TestLostDeviceFailsQueuedWork: work queued on a device that had not
// ended when the device was lost (by its DeviceLost event, at the host's
// clock when a call first meets it) fails with a *backends.DeviceError
// naming its op and wrapping backends.ErrDeviceLost, reported by its Wait
// or, once, by the next Sync, as backends/rocm reports the sticky error
// at the next synchronisation; work that ended before is unharmed. The
// lost work leaves the lanes and the makespan, so that Sync does not wait
// for it; gathered work not launched is never launched.
func TestLostDeviceFailsQueuedWork(t *testing.T) {
	long := kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{2048, 2048}, {2048, 2048}}}
	lostErr := func(err error, op string) bool {
		var de *backends.DeviceError
		return errors.Is(err, backends.ErrDeviceLost) && errors.As(err, &de) && de.Op == op && de.Backend == "sim:h100"
	}
	for _, gather := range []bool{false, true} {
		tl := NewTimeline(Async)
		d, err := New(quiet(t, "h100"), DefaultOptions().WithTimeline(tl).WithSkipCompute(true).
			WithEvents(Event{At: 4, Kind: DeviceLost}))
		if err != nil {
			t.Fatal(err)
		}
		m, _ := d.Alloc(long.InBytes(0))
		run := func() backends.Event {
			t.Helper()
			ev, err := d.RunAsync(long, []backends.Buffer{m, m}, m, nil)
			if err != nil {
				t.Fatal(err)
			}
			return ev
		}
		if _, err := run().Wait(); err != nil {
			t.Fatalf("gathered %v: op 0, before the loss: %v", gather, err)
		}
		ended := run() // ends before the loss
		if _, err := d.Read(make([]byte, long.InBytes(0)), m); err != nil {
			t.Fatal(err)
		}
		if gather {
			if err := d.Record(); err != nil {
				t.Fatal(err)
			}
		}
		op2 := run()
		w, err := d.ReadAsync(make([]byte, long.InBytes(0)), m, []backends.Event{op2})
		if err != nil {
			t.Fatal(err)
		}
		op3 := run() // gathered and not launched, when gathering
		_, end2 := op2.(backends.VirtualSpan).Span()
		busy := tl.Stats().Lanes
		if _, err := run().Wait(); !lostErr(err, "MatMul") { // op 4 meets the loss
			t.Fatalf("gathered %v: op 4: %v, want the loss", gather, err)
		}
		lostUs := tl.HostUs()
		for i, ev := range []backends.Event{op2, w, op3} {
			if !ev.Done() {
				t.Errorf("gathered %v: work %d, lost, is not Done", gather, i)
			}
		}
		for i, ev := range []backends.Event{op2, op3} {
			if _, err := ev.Wait(); !lostErr(err, "MatMul") {
				t.Errorf("gathered %v: op %d, queued before the loss and not ended: %v, want a DeviceError of MatMul wrapping ErrDeviceLost", gather, i+2, err)
			}
		}
		if s, e := op3.(backends.VirtualSpan).Span(); gather && (s != 0 || e != 0) {
			t.Errorf("gathered %v: op 3, gathered and lost, was launched: spans %v–%v", gather, s, e)
		}
		if _, err := ended.Wait(); err != nil {
			t.Errorf("gathered %v: op 1, ended before the loss: %v", gather, err)
		}
		if err := d.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := d.Sync(); !lostErr(err, "read") {
			t.Errorf("gathered %v: Sync: %v, want the queued read's loss", gather, err)
		}
		if err := d.Sync(); err != nil {
			t.Errorf("gathered %v: second Sync: %v, want nil (reported once)", gather, err)
		}
		s := tl.Stats()
		if s.HostUs != lostUs || s.MakespanUs != lostUs || (end2 > 0 && s.MakespanUs >= end2) {
			t.Errorf("gathered %v: after Sync host at %v µs, makespan %v; want both at the loss, %v (op 2 would have ended at %v)",
				gather, s.HostUs, s.MakespanUs, lostUs, end2)
		}
		for i, l := range s.Lanes {
			if l.BusyUs > busy[i].BusyUs+1e-9 || l.BusyUs > lostUs {
				t.Errorf("gathered %v: lane %s busy %v µs after the loss at %v µs, %v before op 4", gather, l.Name, l.BusyUs, lostUs, busy[i].BusyUs)
			}
		}
	}
}

// TestLostDependencyFailsCPUWork: a CPU's op queued after a GPU's work,
// directly or through another CPU op, fails when that work is lost
// before it ends, though the loss comes after the op was queued: its
// Wait, or else the CPU's Sync once, returns a *backends.DeviceError of
// the CPU naming its op and wrapping ErrDependency and the GPU's loss,
// as backends/cpu's worker fails a task whose dependency's Wait failed.
// The op never ran: Done without the host waiting, no Timing, no busy
// time, and its place on the CPU's queue is free again for the work
// queued next. CPU work that does not depend on the lost work runs.
func TestLostDependencyFailsCPUWork(t *testing.T) {
	long := kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{2048, 2048}, {2048, 2048}}}
	short := kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{1 << 16}, {1 << 16}}}
	tl, cpu, gpu := cpuBesideLostGPU(t)
	gb, _ := gpu.Alloc(long.InBytes(0))
	cb, _ := cpu.Alloc(short.InBytes(0))
	run := func(d *Device, s kernels.Spec, b backends.Buffer, after ...backends.Event) backends.Event {
		t.Helper()
		ev, err := d.RunAsync(s, []backends.Buffer{b, b}, b, after)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	free := run(cpu, short, cb) // depends on nothing
	if _, err := free.Wait(); err != nil {
		t.Fatal(err)
	}
	busy := tl.Stats().Lanes[0].BusyUs
	g := run(gpu, long, gb)         // GPU op 0, ends long after the loss
	after := run(cpu, short, cb, g) // waits for g on the CPU's queue
	chained := run(cpu, short, cb, after)
	_, gEnd := g.(backends.VirtualSpan).Span()
	startAfter, _ := after.(backends.VirtualSpan).Span()
	if _, err := run(gpu, long, gb).Wait(); !errors.Is(err, backends.ErrDeviceLost) { // GPU op 1 meets the loss
		t.Fatalf("GPU op 1: %v, want the loss", err)
	}
	lostUs := tl.HostUs()
	if lostUs >= gEnd {
		t.Fatalf("the loss at %.1f µs is after the GPU op's end %.1f: not the case this test is for", lostUs, gEnd)
	}
	depErr := func(err error) bool {
		var de *backends.DeviceError
		return errors.Is(err, backends.ErrDeviceLost) && errors.Is(err, ErrDependency) &&
			errors.As(err, &de) && de.Backend == "sim:cpu2" && de.Op == "Add"
	}
	for i, ev := range []backends.Event{after, chained} {
		if !ev.Done() {
			t.Errorf("CPU op %d after the lost GPU op is not Done", i)
		}
	}
	if tm, err := after.Wait(); !depErr(err) || tm != (backends.Timing{}) {
		t.Errorf("CPU op after the lost GPU op: %v, %v; want no Timing and a DeviceError of sim:cpu2's Add wrapping ErrDependency and ErrDeviceLost", tm, err)
	}
	if h := tl.HostUs(); h != lostUs {
		t.Errorf("host at %.1f µs after waiting for the failed CPU op, want %.1f (the loss): it never ran", h, lostUs)
	}
	if err := cpu.Sync(); !depErr(err) {
		t.Errorf("CPU Sync: %v, want the chained op's dependency error", err)
	}
	if err := cpu.Sync(); err != nil {
		t.Errorf("second CPU Sync: %v, want nil (reported once)", err)
	}
	if err := gpu.Sync(); !errors.Is(err, backends.ErrDeviceLost) {
		t.Errorf("GPU Sync: %v, want the GPU op's loss", err)
	}
	s := tl.Stats()
	if s.HostUs != lostUs || s.MakespanUs != lostUs {
		t.Errorf("after both Syncs host at %.1f µs, makespan %.1f; want both at the loss, %.1f (the CPU op would have started at %.1f)",
			s.HostUs, s.MakespanUs, lostUs, startAfter)
	}
	if l := s.Lanes[0]; math.Abs(l.BusyUs-busy) > 1e-9 {
		t.Errorf("lane %s busy %.1f µs, want %.1f: the failed ops never ran", l.Name, l.BusyUs, busy)
	}
	next := run(cpu, short, cb)
	if start, _ := next.(backends.VirtualSpan).Span(); start != tl.HostUs() {
		t.Errorf("the next CPU op starts at %.1f µs, the host having issued it at %.1f: want then, not behind the failed ops", start, tl.HostUs())
	}
	if _, err := next.Wait(); err != nil {
		t.Errorf("the next CPU op: %v", err)
	}
}

// TestGatheredDependencyUnderFlush: work queued after a gathered op of
// its own device starts after that op ends while another goroutine
// flushes the gathering, a copy (on the link) and an op (on the compute
// queue), whether they find the gathering current, being launched, or
// launched; and a Sync beside them returns once that op has ended.
func TestGatheredDependencyUnderFlush(t *testing.T) {
	s := kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{1 << 16}, {1 << 16}}}
	bad := 0
	for i := range 2000 {
		tl := NewTimeline(Async)
		d, err := New(quiet(t, "h100"), DefaultOptions().WithTimeline(tl).WithSkipCompute(true))
		if err != nil {
			t.Fatal(err)
		}
		buf, _ := d.Alloc(s.OutBytes())
		if err := d.Record(); err != nil {
			t.Fatal(err)
		}
		var dep backends.Event
		for range 3 { // fewer than the first segment: none launched
			if dep, err = d.RunAsync(s, []backends.Buffer{buf, buf}, buf, nil); err != nil {
				t.Fatal(err)
			}
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		var read, op backends.Event
		var rerr, oerr, serr error
		var synced float64
		wg.Add(4)
		go func() {
			defer wg.Done()
			<-start
			_ = d.Flush()
		}()
		go func() {
			defer wg.Done()
			<-start
			read, rerr = d.ReadAsync(make([]byte, s.OutBytes()), buf, []backends.Event{dep})
		}()
		go func() {
			defer wg.Done()
			<-start
			op, oerr = d.RunAsync(s, []backends.Buffer{buf, buf}, buf, []backends.Event{dep})
		}()
		go func() {
			defer wg.Done()
			<-start
			serr = d.Sync()
			synced = tl.HostUs()
		}()
		close(start)
		wg.Wait()
		if rerr != nil || oerr != nil || serr != nil {
			t.Fatal(rerr, oerr, serr)
		}
		if err := d.Sync(); err != nil {
			t.Fatal(err)
		}
		_, end := dep.(backends.VirtualSpan).Span()
		rs, _ := read.(backends.VirtualSpan).Span()
		os, _ := op.(backends.VirtualSpan).Span()
		if rs < end || os < end || synced < end {
			bad++
			if bad <= 3 {
				t.Errorf("run %d: the read starts at %.2f µs, the op at %.2f, a Sync returns at %.2f; the gathered op before them ends at %.2f",
					i, rs, os, synced, end)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of 2000 runs out of order", bad)
	}
}

// TestLostDependencyFreesCPUQueue: CPU work queued behind an op that a
// GPU's loss fails, and that does not depend on it, moves up: the failed
// op takes no time on the CPU's queue, as backends/cpu's worker skips a
// task whose dependency's Wait failed, though not before the loss (the
// worker that reached it waits in that Wait until then) nor before the
// work ahead of it ends. Work chained to the work that moves moves with
// it. Their busy time stays; the host's Sync and the makespan end with
// the last of them.
func TestLostDependencyFreesCPUQueue(t *testing.T) {
	long := kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{2048, 2048}, {2048, 2048}}}
	short := kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{1 << 16}, {1 << 16}}}
	mid := kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{64, 64}, {64, 64}}}
	first := kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{192, 192}, {192, 192}}}
	for _, busy := range []bool{false, true} {
		tl, cpu, gpu := cpuBesideLostGPU(t)
		bufs := map[*Device]map[int64]backends.Buffer{cpu: {}, gpu: {}}
		run := func(d *Device, s kernels.Spec, after ...backends.Event) backends.Event {
			t.Helper()
			b := bufs[d][s.InBytes(0)]
			if b == nil {
				b, _ = d.Alloc(s.InBytes(0))
				bufs[d][s.InBytes(0)] = b
			}
			ev, err := d.RunAsync(s, []backends.Buffer{b, b}, b, after)
			if err != nil {
				t.Fatal(err)
			}
			return ev
		}
		span := func(ev backends.Event) (float64, float64) { return ev.(backends.VirtualSpan).Span() }
		var ahead backends.Event // CPU work before the failed op, ending after the loss
		if busy {
			ahead = run(cpu, first)
		}
		g := run(gpu, long)     // GPU op 0, ends long after the loss
		a := run(cpu, short, g) // fails with g
		b1 := run(cpu, short)   // independent of a
		b2 := run(cpu, mid, b1) // after b1
		_, gEnd := span(g)
		_, aEnd := span(a)
		s1, e1 := span(b1)
		s2, e2 := span(b2)
		if s1 < aEnd {
			t.Fatalf("busy %v: the independent CPU op starts at %.1f µs, before the op it follows ends at %.1f: not the case this test is for", busy, s1, aEnd)
		}
		if _, err := run(gpu, long).Wait(); !errors.Is(err, backends.ErrDeviceLost) { // GPU op 1 meets the loss
			t.Fatalf("busy %v: GPU op 1: %v, want the loss", busy, err)
		}
		lostUs := tl.HostUs()
		want := lostUs // the worker, waiting for g since it reached a, resumes at the loss
		if busy {
			_, want = span(ahead)
			if want <= lostUs || want >= gEnd {
				t.Fatalf("busy: the CPU's first op ends at %.1f µs, not between the loss at %.1f and the GPU op's end %.1f", want, lostUs, gEnd)
			}
		}
		if _, err := a.Wait(); !errors.Is(err, ErrDependency) {
			t.Fatalf("busy %v: CPU op after the lost GPU op: %v, want its dependency's loss", busy, err)
		}
		ns1, ne1 := span(b1)
		ns2, ne2 := span(b2)
		if math.Abs(ns1-want) > 1e-9 || math.Abs((ne1-ns1)-(e1-s1)) > 1e-9 {
			t.Errorf("busy %v: after the loss at %.1f µs the independent CPU op runs %.1f–%.1f (queued at %.1f–%.1f), want from %.1f, its length kept",
				busy, lostUs, ns1, ne1, s1, e1, want)
		}
		if math.Abs(ns2-ne1) > 1e-9 || math.Abs((ne2-ns2)-(e2-s2)) > 1e-9 {
			t.Errorf("busy %v: the op chained to it runs %.1f–%.1f (queued at %.1f–%.1f), want from its end %.1f", busy, ns2, ne2, s2, e2, ne1)
		}
		for i, ev := range []backends.Event{b1, b2} {
			if _, err := ev.Wait(); err != nil {
				t.Errorf("busy %v: independent CPU op %d: %v", busy, i, err)
			}
		}
		if err := cpu.Sync(); err != nil {
			t.Errorf("busy %v: CPU Sync: %v", busy, err)
		}
		if s, end := tl.Stats(), ne2+cpu.prof.SyncUs; math.Abs(s.HostUs-end) > 1e-9 || s.MakespanUs != s.HostUs {
			t.Errorf("busy %v: after the CPU's Sync host at %.1f µs, makespan %.1f; want both at the last CPU op's end and resume %.1f (it was queued to end at %.1f)",
				busy, s.HostUs, s.MakespanUs, end, e2)
		}
	}
}

// cpuBesideLostGPU returns an asynchronous Timeline and on it a quiet
// cpu2 and an h100 lost at its second op (DeviceLost at 1), computing
// nothing.
func cpuBesideLostGPU(t *testing.T) (tl *Timeline, cpu, gpu *Device) {
	t.Helper()
	tl = NewTimeline(Async)
	cpu, err := New(quiet(t, "cpu2"), DefaultOptions().WithTimeline(tl).WithSkipCompute(true))
	if err != nil {
		t.Fatal(err)
	}
	gpu, err = New(quiet(t, "h100"), DefaultOptions().WithTimeline(tl).WithSkipCompute(true).
		WithEvents(Event{At: 1, Kind: DeviceLost}))
	if err != nil {
		t.Fatal(err)
	}
	return tl, cpu, gpu
}
