package cpu

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// gate is an Event of another backend that completes when the test says
// so, with the error the test gives.
type gate struct {
	done chan struct{}
	err  error
}

func newGate() *gate { return &gate{done: make(chan struct{})} }

func (g *gate) open(err error) { g.err = err; close(g.done) }

func (g *gate) Done() bool {
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}

func (g *gate) Wait() (backends.Timing, error) {
	<-g.done
	return backends.Timing{}, g.err
}

// mapF32 maps v into b (HostMapper), failing the test on error.
func mapF32(t *testing.T, b *Backend, v []float32) backends.Buffer {
	t.Helper()
	buf, err := b.MapHost(kernels.AsBytes(v))
	if err != nil {
		t.Fatal(err)
	}
	return buf
}

// TestQueueOrderAcrossBackends runs a matmul on cpu1 and, queued on cpu
// after cpu1's event, a Scale of its output, over the same host memory
// (each backend maps it): the Scale never reads the matmul's output
// before it is written (the output starts as NaN). It also checks that
// a chain on one queue runs in queue order without events.
func TestQueueOrderAcrossBackends(t *testing.T) {
	one := openTest(t, DefaultOptions().WithThreads(1))
	all := openTest(t, DefaultOptions().WithThreads(2))
	const n = 96
	mm := kernels.Spec{Op: kernels.MatMul, In: []kernels.Shape{{n, n}, {n, n}}}
	scale := kernels.Spec{Op: kernels.Scale, In: []kernels.Shape{{n, n}}, Params: kernels.Params{Scale: 2}}
	a, w := make([]float32, n*n), make([]float32, n*n)
	for i := range a {
		a[i], w[i] = float32(i%7)-3, float32(i%5)-2
	}
	want := make([]byte, n*n*4)
	if err := kernels.Reference(mm, [][]byte{kernels.AsBytes(a), kernels.AsBytes(w)}, want); err != nil {
		t.Fatal(err)
	}
	for rep := range 20 {
		x, y := make([]float32, n*n), make([]float32, n*n)
		for i := range x {
			x[i], y[i] = float32(math.NaN()), float32(math.NaN())
		}
		ev1, err := one.RunAsync(mm, []backends.Buffer{mapF32(t, one, a), mapF32(t, one, w)}, mapF32(t, one, x), nil)
		if err != nil {
			t.Fatal(err)
		}
		ev2, err := all.RunAsync(scale, []backends.Buffer{mapF32(t, all, x)}, mapF32(t, all, y), []backends.Event{ev1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ev2.Wait(); err != nil {
			t.Fatal(err)
		}
		if !ev1.Done() {
			t.Fatal("the dependent op completed before its dependency")
		}
		for i, v := range kernels.AsF32(want) {
			if y[i] != 2*v {
				t.Fatalf("rep %d: y[%d] = %v, want %v: the Scale read stale data", rep, i, y[i], 2*v)
			}
		}
	}
	// A chain on one queue: x ← 1, then x ← 2x ten times, no events.
	x := make([]float32, 64)
	xb := mapF32(t, all, x)
	tmp, _ := all.Alloc(256)
	s := kernels.Spec{Op: kernels.Scale, In: []kernels.Shape{{64}}, Params: kernels.Params{Scale: 2}}
	ones := make([]float32, 64)
	for i := range ones {
		ones[i] = 1
	}
	if _, err := all.WriteAsync(xb, kernels.AsBytes(ones), nil); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		all.RunAsync(s, []backends.Buffer{xb}, tmp, nil)
		all.RunAsync(s, []backends.Buffer{tmp}, xb, nil)
	}
	got := make([]byte, 256)
	ev, err := all.ReadAsync(got, xb, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tm, err := ev.Wait(); err != nil || tm.Clock != backends.WallClock {
		t.Fatalf("read: %+v, %v", tm, err)
	}
	if v := kernels.AsF32(got)[0]; v != 1024 {
		t.Fatalf("after the chain x = %v, want 1024 (2^10): the queue ran out of order", v)
	}
	if err := all.Sync(); err != nil {
		t.Fatalf("Sync after a clean chain: %v", err)
	}
}

// TestQueueErrors checks that an op failing in the queue (a dependency
// failed) reports a DeviceError naming the op at its Wait, that Sync
// reports an error no Wait has, and that a buffer freed once its op is
// queued stays valid for that op.
func TestQueueErrors(t *testing.T) {
	b := openTest(t, DefaultOptions().WithThreads(2))
	silu := kernels.Spec{Op: kernels.SiLU, In: []kernels.Shape{{16}}}
	in, _ := b.Alloc(64)
	out, _ := b.Alloc(64)
	g := newGate()
	ev, err := b.RunAsync(silu, []backends.Buffer{in}, out, []backends.Event{g})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Done() {
		t.Fatal("an op behind an open dependency is done")
	}
	in.Free()
	g.open(nil)
	if _, err := ev.Wait(); err != nil {
		t.Fatalf("op whose input was freed once it was queued: %v, want success", err)
	}
	var de *backends.DeviceError

	in2, _ := b.Alloc(64)
	boom := errors.New("gpu kernel failed")
	g2 := newGate()
	ev2, _ := b.RunAsync(silu, []backends.Buffer{in2}, out, []backends.Event{g2})
	after, _ := b.RunAsync(silu, []backends.Buffer{in2}, out, nil) // later in the queue: runs
	g2.open(boom)
	if err := b.Sync(); !errors.As(err, &de) || de.Op != "SiLU" || !errors.Is(err, boom) {
		t.Fatalf("Sync after a failed dependency: %v, want a DeviceError{Op: SiLU} wrapping it", err)
	}
	if _, err := after.Wait(); err != nil {
		t.Fatalf("an op queued after the failed one: %v", err)
	}
	if _, err := ev2.Wait(); !errors.Is(err, boom) {
		t.Fatalf("Wait of the failed op after Sync: %v", err)
	}
	if err := b.Sync(); err != nil {
		t.Fatalf("second Sync: %v, want nil (reported once)", err)
	}

	// A dependency of the same queue that failed fails the op after it.
	failedEv, _ := b.RunAsync(silu, []backends.Buffer{in2}, out, []backends.Event{newFailed(boom)})
	next, _ := b.RunAsync(silu, []backends.Buffer{in2}, out, []backends.Event{failedEv})
	if _, err := next.Wait(); !errors.Is(err, boom) || !strings.Contains(err.Error(), "dependency 0 failed") {
		t.Fatalf("op after a failed op of its own queue: %v, want the dependency's error", err)
	}
	b.Sync()

	// Bad arguments fail at once, not in the queue.
	if _, err := b.RunAsync(silu, []backends.Buffer{in}, out, nil); !errors.Is(err, backends.ErrForeignBuffer) || !strings.Contains(err.Error(), "freed") {
		t.Errorf("RunAsync on a freed buffer: %v", err)
	}
	if _, err := b.ReadAsync(make([]byte, 3), out, nil); !errors.Is(err, kernels.ErrBufferSize) {
		t.Errorf("ReadAsync of the wrong size: %v", err)
	}
	if _, err := b.RunAsync(kernels.Spec{Op: kernels.Opaque, In: []kernels.Shape{{16}}}, []backends.Buffer{in2}, out, nil); !errors.Is(err, kernels.ErrNotExecutable) {
		t.Errorf("RunAsync of an Opaque op: %v", err)
	}
}

// TestQueueClose checks that Close drains work in flight, that every
// later call fails with ErrClosed, and that Close reports an error of
// queued work no Wait reported.
func TestQueueClose(t *testing.T) {
	b, err := New("cpu-close", DefaultOptions().WithLogger(nil).WithThreads(2))
	if err != nil {
		t.Fatal(err)
	}
	silu := kernels.Spec{Op: kernels.SiLU, In: []kernels.Shape{{16}}}
	in, _ := b.Alloc(64)
	out, _ := b.Alloc(64)
	g := newGate()
	ev, _ := b.RunAsync(silu, []backends.Buffer{in}, out, []backends.Event{g})
	failing, _ := b.RunAsync(silu, []backends.Buffer{in}, out, []backends.Event{newFailed(errors.New("upstream"))})
	closed := make(chan error)
	go func() { closed <- b.Close() }()
	g.open(nil)
	if err := <-closed; err == nil || !strings.Contains(err.Error(), "upstream") {
		t.Fatalf("Close with a failed queued op: %v, want its error", err)
	}
	if !ev.Done() || !failing.Done() {
		t.Fatal("Close returned with work in flight")
	}
	if _, err := ev.Wait(); err != nil {
		t.Errorf("the op Close drained: %v", err)
	}
	if err := b.Sync(); !errors.Is(err, ErrClosed) {
		t.Errorf("Sync after Close: %v, want ErrClosed", err)
	}
	if _, err := b.RunAsync(silu, []backends.Buffer{in}, out, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("RunAsync after Close: %v, want ErrClosed", err)
	}
	if _, err := b.Run(silu, []backends.Buffer{in}, out); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close: %v, want ErrClosed", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// newFailed returns an Event that has already failed with err.
func newFailed(err error) *gate {
	g := newGate()
	g.open(err)
	return g
}

// TestQueueParks checks that a backend with no work keeps nothing awake:
// after a burst of queued ops the queue has no goroutine draining it and
// every pool worker is parked, with no idle poll.
func TestQueueParks(t *testing.T) {
	b := openTest(t, DefaultOptions().WithThreads(3))
	s := kernels.Spec{Op: kernels.MatMul, In: []kernels.Shape{{64, 256}, {256, 64}}}
	x, _ := b.Alloc(s.InBytes(0))
	w, _ := b.Alloc(s.InBytes(1))
	out, _ := b.Alloc(s.OutBytes())
	for range 30 {
		if _, err := b.RunAsync(s, []backends.Buffer{x, w}, out, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	// The bound only ends a failing test.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		b.q.mu.Lock()
		running := b.q.running
		b.q.mu.Unlock()
		parked, polls := b.pool.Idle()
		if !running && parked == 2 {
			if polls != 0 {
				t.Errorf("idle workers polled %d times, want 0", polls)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s idle: queue draining %v, %d of 2 workers parked", running, parked)
		}
	}
}

func TestHardwareGroup(t *testing.T) {
	var groups []string
	for _, name := range []string{"cpu", "cpu1"} {
		b, err := backends.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		hg, ok := b.(backends.HardwareGroup)
		if !ok {
			t.Fatalf("%s does not implement HardwareGroup", name)
		}
		groups = append(groups, hg.HardwareGroup())
		if _, ok := b.(backends.Queuer); !ok {
			t.Errorf("%s does not implement Queuer", name)
		}
		b.Close()
	}
	if groups[0] != groups[1] || groups[0] == "" {
		t.Errorf("HardwareGroup of cpu and cpu1: %q, want equal and non-empty", groups)
	}
}

// TestQueueConcurrentChains runs chains from 4 goroutines at once, each
// op doubling a vector on cpu or cpu1 in turn after the previous op's
// event (the two backends map the same host memory): every chain ends at
// 2^10, whatever the interleaving of the queues.
func TestQueueConcurrentChains(t *testing.T) {
	bs := []*Backend{openTest(t, DefaultOptions().WithThreads(2)), openTest(t, DefaultOptions().WithThreads(1))}
	s := kernels.Spec{Op: kernels.Scale, In: []kernels.Shape{{256}}, Params: kernels.Params{Scale: 2}}
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			v := [2][]float32{make([]float32, 256), make([]float32, 256)}
			for i := range v[0] {
				v[0][i] = 1
			}
			var last backends.Event
			for i := range 10 {
				b := bs[i%2]
				src, _ := b.MapHost(kernels.AsBytes(v[i%2]))
				dst, _ := b.MapHost(kernels.AsBytes(v[1-i%2]))
				var after []backends.Event
				if last != nil {
					after = []backends.Event{last}
				}
				ev, err := b.RunAsync(s, []backends.Buffer{src}, dst, after)
				if err != nil {
					errs <- err
					return
				}
				last = ev
			}
			if _, err := last.Wait(); err != nil {
				errs <- err
				return
			}
			for i, x := range v[0] {
				if x != 1024 {
					errs <- fmt.Errorf("element %d = %v after the chain, want 1024", i, x)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestRunInline: a synchronous Run on an idle queue runs its kernel on
// the caller's goroutine without allocating, gives the reference result,
// and, while it runs, work queued behind it waits and Sync waits for it
// (the inline flag is held here by hand to pin that moment).
func TestRunInline(t *testing.T) {
	b := openTest(t, DefaultOptions().WithThreads(1))
	s := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{16}, {16}}}
	x := make([]float32, 16)
	for i := range x {
		x[i] = float32(i)
	}
	y := make([]float32, 16)
	in := []backends.Buffer{mapF32(t, b, x), mapF32(t, b, x)}
	out := mapF32(t, b, y)
	if _, err := b.Run(s, in, out); err != nil {
		t.Fatal(err)
	}
	if y[5] != 10 {
		t.Fatalf("y[5] = %v, want 10", y[5])
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := b.Run(s, in, out); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("synchronous Run on an idle queue: %v allocations, want 0", n)
	}

	b.q.mu.Lock()
	b.q.running, b.q.inline = true, true // an inline kernel under way
	b.q.mu.Unlock()
	ev, err := b.RunAsync(s, in, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	synced := make(chan error, 1)
	go func() { synced <- b.Sync() }()
	time.Sleep(20 * time.Millisecond)
	if ev.Done() {
		t.Fatal("work queued behind an inline kernel ran before it ended")
	}
	select {
	case err := <-synced:
		t.Fatalf("Sync returned (%v) while an inline kernel ran", err)
	default:
	}
	b.q.mu.Lock() // the inline kernel ends as runInline ends it
	b.q.inline = false
	b.q.idle.Broadcast()
	b.q.mu.Unlock()
	go b.q.drain(b)
	if err := <-synced; err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if !ev.Done() {
		t.Fatal("Sync returned before the work queued behind the inline kernel")
	}
}

// TestQueueLetsGoOfRunWork checks that queued work that has run keeps
// neither its buffers' memory nor the events it ran after reachable,
// though its own event is held (the Executor holds events until it has
// observed them): in a chain of ops, each after the one before, holding
// the last event lets every earlier op's input memory go.
func TestQueueLetsGoOfRunWork(t *testing.T) {
	b := openTest(t, DefaultOptions().WithThreads(1))
	s := kernels.Spec{Op: kernels.Scale, In: []kernels.Shape{{1024}}, Params: kernels.Params{Scale: 2}}
	out, _ := b.Alloc(4096)
	var freed atomic.Int32
	var last backends.Event
	const n = 40
	for range n {
		in := make([]float32, 1024)
		runtime.AddCleanup(&in[0], func(c *atomic.Int32) { c.Add(1) }, &freed)
		var after []backends.Event
		if last != nil {
			after = []backends.Event{last}
		}
		ev, err := b.RunAsync(s, []backends.Buffer{mapF32(t, b, in)}, out, after)
		if err != nil {
			t.Fatal(err)
		}
		last = ev
	}
	if _, err := last.Wait(); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		runtime.GC()
		if freed.Load() == n {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := freed.Load(); got != n {
		t.Fatalf("%d of %d inputs' memory let go while the last event is held, want all", got, n)
	}
	runtime.KeepAlive(last)
}

// TestQueueKeepsNoAfter: a queued op waits for the events it was given
// even when the caller reuses its slice of them once the call returns
// (backends.Queuer: an implementation must not retain after): the slot
// overwritten with a completed event, the op still waits for the gate.
func TestQueueKeepsNoAfter(t *testing.T) {
	b := openTest(t, DefaultOptions().WithThreads(1))
	x := make([]float32, 64)
	xb, yb := mapF32(t, b, x), mapF32(t, b, make([]float32, 64))
	s := kernels.Spec{Op: kernels.Scale, In: []kernels.Shape{{64}}, Params: kernels.Params{Scale: 2}}
	g, done := newGate(), newGate()
	done.open(nil)
	after := []backends.Event{g}
	ev, err := b.RunAsync(s, []backends.Buffer{xb}, yb, after)
	if err != nil {
		t.Fatal(err)
	}
	after[0] = done
	time.Sleep(20 * time.Millisecond)
	if ev.Done() {
		t.Fatal("the op ran before the event it was queued after: the queue read the caller's reused slice")
	}
	g.open(nil)
	if _, err := ev.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestQueueNilAfter: a nil Event in after is no dependency (backends.Queuer),
// as the simulator takes it: it crashed the process in the queue's
// goroutine.
func TestQueueNilAfter(t *testing.T) {
	b := openTest(t, DefaultOptions().WithThreads(1))
	x := []float32{1, 2}
	xb, yb := mapF32(t, b, x), mapF32(t, b, make([]float32, 2))
	s := kernels.Spec{Op: kernels.Scale, In: []kernels.Shape{{2}}, Params: kernels.Params{Scale: 2}}
	ev, err := b.RunAsync(s, []backends.Buffer{xb}, yb, []backends.Event{nil})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ev.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
}
