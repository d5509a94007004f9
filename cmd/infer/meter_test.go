package main

import (
	"sync/atomic"
	"testing"

	"github.com/adaptsched/adaptsched/backends"
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
