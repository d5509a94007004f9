package main

import (
	"sync/atomic"
	"testing"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/backends/rocm"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/sim"
)

// TestMeterQueued: a metered backend that queues work stays a Queuer; a
// duration is counted once, when a Wait reports it; the events handed
// back to a backend are its own, so a dependency is kept.
func TestMeterQueued(t *testing.T) {
	tl := sim.NewTimeline(sim.Async)
	d, err := sim.Open("h100", sim.DefaultOptions().WithTimeline(tl).WithSkipCompute(true))
	if err != nil {
		t.Fatal(err)
	}
	var ns atomic.Int64
	b := meter(d, &ns)
	q, ok := b.(backends.Queuer)
	if !ok {
		t.Fatal("metered sim device is not a Queuer")
	}
	if _, ok := b.(backends.HardwareGroup); ok {
		t.Error("metered sim device claims a hardware group it lacks")
	}
	spec := kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{4}, {4}}}
	buf, _ := b.Alloc(16)
	e1, err := q.RunAsync(spec, []backends.Buffer{buf, buf}, buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	e2, err := q.RunAsync(spec, []backends.Buffer{buf, buf}, buf, []backends.Event{e1})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Load() != 0 {
		t.Errorf("%d ns counted before any Wait", ns.Load())
	}
	t1, _ := e1.Wait()
	t2, _ := e2.Wait()
	_, _ = e2.Wait()
	if got, want := ns.Load(), int64(t1.Duration+t2.Duration); got != want {
		t.Errorf("%d ns counted, want %d (each op once)", got, want)
	}
	_, end1 := e1.(*meteredEvent).Event.(backends.VirtualSpan).Span()
	start2, _ := e2.(*meteredEvent).Event.(backends.VirtualSpan).Span()
	if start2 < end1 {
		t.Errorf("second op starts at %v µs, before the first ends at %v", start2, end1)
	}
	if _, ok := meter(plain{d}, &ns).(backends.Queuer); ok {
		t.Error("a backend without queues became a Queuer")
	}
}

// plain hides a backend's optional capabilities.
type plain struct{ backends.Backend }

// queueOnly is a Queuer that does not gather.
type queueOnly struct {
	backends.Backend
	backends.Queuer
}

// recordingStub is a Queuer and Recorder over a sim device whose events
// stay unlaunched until Flush (a backend that gathers).
type recordingStub struct {
	backends.Queuer
	backends.Backend
	launched chan struct{}
	records  int
}

type stubEvent struct {
	backends.Event
	launched chan struct{}
}

func (e stubEvent) Launched() <-chan struct{} { return e.launched }
func (e stubEvent) Launch() error             { return nil }

func (r *recordingStub) Record() error { r.records++; return nil }
func (r *recordingStub) Flush() error  { close(r.launched); return nil }
func (r *recordingStub) RunAsync(s kernels.Spec, in []backends.Buffer, out backends.Buffer, after []backends.Event) (backends.Event, error) {
	ev, err := r.Queuer.RunAsync(s, in, out, after)
	return stubEvent{ev, r.launched}, err
}

// TestMeterKeepsRecorder: a metered backend that gathers stays a
// Recorder, and its events stay Deferred, unlaunched until the backend
// launches them: infer's meter must not hide a GPU's gathering. A
// gathered op's event, with no duration to count, is the backend's own.
func TestMeterKeepsRecorder(t *testing.T) {
	d, err := sim.Open("h100", sim.DefaultOptions().WithTimeline(sim.NewTimeline(sim.Async)).WithSkipCompute(true))
	if err != nil {
		t.Fatal(err)
	}
	stub := &recordingStub{Queuer: d, Backend: d, launched: make(chan struct{})}
	var ns atomic.Int64
	b := meter(stub, &ns)
	rec, ok := b.(backends.Recorder)
	if !ok {
		t.Fatal("a metered Recorder is not a Recorder")
	}
	if err := rec.Record(); err != nil || stub.records != 1 {
		t.Fatalf("Record reached the backend %d times (%v), want once", stub.records, err)
	}
	spec := kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{4}, {4}}}
	buf, _ := b.Alloc(16)
	ev, err := rec.RunAsync(spec, []backends.Buffer{buf, buf}, buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	def, ok := ev.(backends.Deferred)
	if !ok {
		t.Fatal("a metered gathered event is not Deferred")
	}
	if _, wrapped := ev.(*meteredEvent); wrapped {
		t.Error("a gathered event, which has no duration to count, was wrapped")
	}
	if ev2, err := rec.RunAsync(spec, []backends.Buffer{buf, buf}, buf, []backends.Event{ev}); err != nil || ev2 == nil {
		t.Fatalf("an op after a gathered one: %v", err)
	}
	select {
	case <-def.Launched():
		t.Fatal("launched before Flush")
	default:
	}
	if err := rec.Flush(); err != nil {
		t.Fatal(err)
	}
	<-def.Launched()
	if _, ok := meter(queueOnly{d, d}, &ns).(backends.Recorder); ok {
		t.Error("a backend that does not gather became a Recorder")
	}
}

// graphsStub is a gatherer whose gatherings took ns on the device.
type graphsStub struct{ ns int64 }

func (g graphsStub) Graphs() rocm.GraphStats { return rocm.GraphStats{DeviceNs: g.ns} }

// TestClockCountsGathered: without a Timeline the modelled clock is the
// durations the backends reported plus their gatherings' device time, as
// a gathered op reports none of its own: left out, a step gathered on a
// GPU modelled at nearly no time.
func TestClockCountsGathered(t *testing.T) {
	c := modelClock{busy: new(atomic.Int64), gatherers: []gatherer{graphsStub{3e6}, graphsStub{1e6}}}
	c.busy.Store(2e6)
	if got := c.read().MakespanUs; got != 6000 {
		t.Fatalf("clock %v µs, want 2,000 reported + 4,000 gathered", got)
	}
}
