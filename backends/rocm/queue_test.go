//go:build cgo

package rocm

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/backends/cpu"
	"github.com/adaptsched/adaptsched/kernels"
)

// The fake runtime runs each stream on a thread of its own and fails
// hipEventElapsedTime on an incomplete event: every timing these tests
// read proves it was read after its end event completed.

func f32Bytes(v ...float32) []byte { return append([]byte(nil), kernels.AsBytes(v)...) }

func fill(n int, x float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = x
	}
	return v
}

// gate is an Event of another backend that completes when the test says.
type gate struct {
	done chan struct{}
	err  error
}

func newGate() *gate           { return &gate{done: make(chan struct{})} }
func (g *gate) open(err error) { g.err = err; close(g.done) }
func (g *gate) Wait() (backends.Timing, error) {
	<-g.done
	return backends.Timing{}, g.err
}
func (g *gate) Done() bool {
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}

// TestFakeQueueAsync checks that a queued op returns before its slow
// kernel has run (Done is false: no synchronisation after launch), that
// a read queued behind it on the copy stream with no event still sees
// its output (the copy waits for the kernel on the device), and that
// its Timing, read once complete, covers the kernel's 20 ms.
func TestFakeQueueAsync(t *testing.T) {
	d := openFake(t, fakeOptions(t, "blas"))
	if d.copyStream == d.stream {
		t.Fatal("the fake AMD device has no copy stream")
	}
	s := kernels.Spec{Op: kernels.Scale, In: []kernels.Shape{{16}}, Params: kernels.Params{Scale: 3}}
	runSpec(t, d, s) // compile first
	in, _ := d.Alloc(64)
	out, _ := d.Alloc(64)
	w, err := d.WriteAsync(in, f32Bytes(fill(16, 2)...), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAKEHIP_KERNEL_US", "20000")
	ev, err := d.RunAsync(s, []backends.Buffer{in}, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	os.Setenv("FAKEHIP_KERNEL_US", "0")
	if ev.Done() {
		t.Fatal("a 20 ms kernel is done as soon as RunAsync returns: the launch synchronised")
	}
	got := make([]byte, 64)
	r, err := d.ReadAsync(got, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Wait(); err != nil {
		t.Fatal(err)
	}
	if v := kernels.AsF32(got); v[0] != 6 || v[15] != 6 {
		t.Fatalf("read after the kernel = %v, want 6s: the copy did not wait for the kernel", v)
	}
	if !ev.Done() || !w.Done() {
		t.Fatal("the read completed before the work it depends on")
	}
	tm, err := ev.Wait()
	if err != nil || tm.Clock != backends.DeviceEvents || tm.Duration < 20*time.Millisecond {
		t.Fatalf("kernel timing %+v, %v: want ≥ 20 ms from device events", tm, err)
	}
	if err := d.Sync(); err != nil {
		t.Fatalf("Sync after clean work: %v", err)
	}
}

// TestFakeEventPool checks that events come back to the pool: 50
// synchronous write-run-read rounds need no more than one op's two
// events, and 30 queued ops left unwaited are all retired by Sync.
func TestFakeEventPool(t *testing.T) {
	d := openFake(t, fakeOptions(t, "blas"))
	s := kernels.Spec{Op: kernels.SiLU, In: []kernels.Shape{{256}}}
	for range 50 {
		runSpec(t, d, s)
	}
	if n := len(d.events); n != 2 || len(d.inflight) != 0 {
		t.Fatalf("after synchronous rounds: %d pooled events, %d in flight; want 2 and 0", n, len(d.inflight))
	}
	in, _ := d.Alloc(1024)
	out, _ := d.Alloc(1024)
	var last backends.Event
	for range 30 {
		var err error
		if last, err = d.RunAsync(s, []backends.Buffer{in}, out, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if !last.Done() || len(d.inflight) != 0 || len(d.events) < 2 || len(d.events)%2 != 0 {
		t.Fatalf("after Sync: last done %v, %d in flight, %d pooled events", last.Done(), len(d.inflight), len(d.events))
	}
	pooled := len(d.events)
	for range 10 {
		runSpec(t, d, s)
	}
	if len(d.events) != pooled {
		t.Errorf("pooled events %d → %d: the pool did not reuse them", pooled, len(d.events))
	}
}

// TestFakeQueueAcrossBackends checks both directions of a dependency
// between the CPU backend and the GPU: a write queued after a CPU event
// copies the data the CPU op produced, never what was there before, and
// a CPU op queued after a GPU read's event reads the read's result.
func TestFakeQueueAcrossBackends(t *testing.T) {
	d := openFake(t, fakeOptions(t, "blas"))
	slow := func(on bool) {
		if on {
			os.Setenv("FAKEHIP_KERNEL_US", "3000")
		} else {
			os.Setenv("FAKEHIP_KERNEL_US", "0")
		}
	}
	t.Setenv("FAKEHIP_KERNEL_US", "0")
	checkQueueAcrossBackends(t, d, 16, slow)
}

// TestGPUQueueAcrossBackends is the same check on the real device, with
// vectors of 4M floats so that the GPU kernel and copies take long enough
// for a missing wait to be seen.
func TestGPUQueueAcrossBackends(t *testing.T) {
	checkQueueAcrossBackends(t, openGPU(t), 4<<20, func(bool) {})
}

// checkQueueAcrossBackends runs the CPU → GPU → CPU chain of
// TestFakeQueueAcrossBackends on d with n floats; slow(true) makes the
// GPU kernel slow while it is queued, where the runtime allows it.
func checkQueueAcrossBackends(t *testing.T, d *Device, n int, slow func(bool)) {
	t.Helper()
	c, err := cpu.New("cpu-test", cpu.Options{Threads: 2, CalibrationFile: "-"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	scale := kernels.Spec{Op: kernels.Scale, In: []kernels.Shape{{n}}, Params: kernels.Params{Scale: 2}}
	runSpec(t, d, scale)
	for rep := range 10 {
		// CPU → GPU: the CPU doubles host memory behind a gate; the GPU
		// write after the CPU op's event must copy the doubled values.
		host, dbl := fill(n, 1), make([]float32, n)
		hb, _ := c.MapHost(kernels.AsBytes(host))
		db, _ := c.MapHost(kernels.AsBytes(dbl))
		g := newGate()
		cev, err := c.RunAsync(scale, []backends.Buffer{hb}, db, []backends.Event{g})
		if err != nil {
			t.Fatal(err)
		}
		go func() { time.Sleep(2 * time.Millisecond); g.open(nil) }()
		buf, _ := d.Alloc(int64(4 * n))
		if _, err := d.WriteAsync(buf, kernels.AsBytes(dbl), []backends.Event{cev}); err != nil {
			t.Fatal(err)
		}
		// GPU → CPU: a slow kernel doubles again; the GPU reads the
		// result into host memory that the CPU then scales once more.
		slow(true)
		out, _ := d.Alloc(int64(4 * n))
		if _, err := d.RunAsync(scale, []backends.Buffer{buf}, out, nil); err != nil {
			t.Fatal(err)
		}
		slow(false)
		back := fill(n, -1)
		rev, err := d.ReadAsync(kernels.AsBytes(back), out, nil)
		if err != nil {
			t.Fatal(err)
		}
		final := make([]float32, n)
		bb, _ := c.MapHost(kernels.AsBytes(back))
		fb, _ := c.MapHost(kernels.AsBytes(final))
		fev, err := c.RunAsync(scale, []backends.Buffer{bb}, fb, []backends.Event{rev})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fev.Wait(); err != nil {
			t.Fatal(err)
		}
		for i, v := range final {
			if v != 8 {
				t.Fatalf("rep %d: 1 doubled on the CPU, the GPU and the CPU = %v at %d, want 8: an op read stale data", rep, v, i)
			}
		}
		buf.Free()
		out.Free()
	}
}

// TestFakeQueuedError checks that a kernel failing as it runs (the launch
// itself succeeds) surfaces at its Wait, or at Sync when nobody waits, as
// a DeviceError naming the op, and that Close reports one nobody saw.
func TestFakeQueuedError(t *testing.T) {
	s := kernels.Spec{Op: kernels.SiLU, In: []kernels.Shape{{16}}}
	d := openFake(t, fakeOptions(t, "blas"))
	runSpec(t, d, s)
	in, _ := d.Alloc(64)
	out, _ := d.Alloc(64)
	ok, _ := d.RunAsync(s, []backends.Buffer{in}, out, nil)
	t.Setenv("FAKEHIP_ASYNC_ERROR", "700")
	ev, err := d.RunAsync(s, []backends.Buffer{in}, out, nil)
	os.Unsetenv("FAKEHIP_ASYNC_ERROR")
	if err != nil {
		t.Fatalf("the launch itself: %v, want success (the kernel fails later)", err)
	}
	if _, err := ok.Wait(); err != nil {
		t.Fatalf("the op before the failing one: %v", err)
	}
	_, err = ev.Wait()
	var de *backends.DeviceError
	if !errors.As(err, &de) || de.Op != "SiLU" || !errors.Is(err, backends.ErrDeviceLost) || !strings.Contains(err.Error(), "700") {
		t.Fatalf("Wait of the failed kernel: %v, want DeviceError{Op: SiLU} wrapping ErrDeviceLost (700)", err)
	}
	if err := d.Sync(); err != nil {
		t.Errorf("Sync after Wait reported the error: %v, want nil", err)
	}
	if _, err := d.RunAsync(s, []backends.Buffer{in}, out, nil); !errors.Is(err, backends.ErrDeviceLost) {
		t.Errorf("RunAsync on the lost device: %v, want ErrDeviceLost", err)
	}

	// Nobody waits: Sync reports it, once.
	d2 := openFake(t, fakeOptions(t, "blas"))
	sc := kernels.Spec{Op: kernels.Scale, In: []kernels.Shape{{16}}, Params: kernels.Params{Scale: 2}}
	runSpec(t, d2, sc)
	in2, _ := d2.Alloc(64)
	out2, _ := d2.Alloc(64)
	os.Setenv("FAKEHIP_ASYNC_ERROR", "700")
	if _, err := d2.RunAsync(sc, []backends.Buffer{in2}, out2, nil); err != nil {
		t.Fatal(err)
	}
	os.Unsetenv("FAKEHIP_ASYNC_ERROR")
	if err := d2.Sync(); !errors.As(err, &de) || de.Op != "Scale" || !errors.Is(err, backends.ErrDeviceLost) {
		t.Fatalf("Sync after an unwaited failing kernel: %v, want DeviceError{Op: Scale}", err)
	}
	if err := d2.Sync(); err != nil {
		t.Errorf("second Sync: %v, want nil (reported once)", err)
	}

	// Nobody waits nor syncs: Close reports it.
	d3 := openFake(t, fakeOptions(t, "blas"))
	runSpec(t, d3, sc)
	in3, _ := d3.Alloc(64)
	os.Setenv("FAKEHIP_ASYNC_ERROR", "700")
	if _, err := d3.RunAsync(sc, []backends.Buffer{in3}, in3, nil); err != nil {
		t.Fatal(err)
	}
	os.Unsetenv("FAKEHIP_ASYNC_ERROR")
	if err := d3.Close(); !errors.As(err, &de) || de.Op != "Scale" {
		t.Fatalf("Close with an unreported failed kernel: %v, want its DeviceError", err)
	}
}

// TestFakeQueueBadUse checks the errors of misuse around the queue: a
// freed buffer, a failed dependency, Sync and queued calls after Close;
// and that a buffer freed while queued work uses it is not reused by an
// allocation before that work completes.
func TestFakeQueueBadUse(t *testing.T) {
	d := openFake(t, fakeOptions(t, "blas"))
	s := kernels.Spec{Op: kernels.SiLU, In: []kernels.Shape{{16}}}
	runSpec(t, d, s)
	in, _ := d.Alloc(64)
	out, _ := d.Alloc(64)
	t.Setenv("FAKEHIP_KERNEL_US", "20000")
	ev, err := d.RunAsync(s, []backends.Buffer{in}, out, nil)
	os.Setenv("FAKEHIP_KERNEL_US", "0")
	if err != nil {
		t.Fatal(err)
	}
	ptr := out.(*buffer).ptr
	out.Free()
	again, _ := d.Alloc(64)
	if again.(*buffer).ptr == ptr && !ev.Done() {
		t.Fatal("a buffer freed while a queued kernel writes it was handed out again")
	}
	if _, err := ev.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, cached := d.Pool(); cached == 0 {
		t.Error("the freed buffer did not reach the pool once its kernel completed")
	}
	if _, err := d.RunAsync(s, []backends.Buffer{in}, out, nil); !errors.Is(err, backends.ErrForeignBuffer) || !strings.Contains(err.Error(), "freed") {
		t.Errorf("RunAsync on a freed buffer: %v, want ErrForeignBuffer saying it was freed", err)
	}
	if _, err := d.ReadAsync(make([]byte, 64), out, nil); !errors.Is(err, backends.ErrForeignBuffer) {
		t.Errorf("ReadAsync of a freed buffer: %v", err)
	}
	boom := errors.New("cpu op failed")
	dep, err := d.RunAsync(s, []backends.Buffer{in}, again, []backends.Event{newFailedGate(boom)})
	if err != nil {
		t.Fatalf("RunAsync after a failed dependency: %v, want a failed event", err)
	}
	_, err = dep.Wait()
	var de *backends.DeviceError
	if !errors.As(err, &de) || de.Op != "SiLU" || !errors.Is(err, boom) || !dep.Done() {
		t.Errorf("the event of an op after a failed dependency: %v, want DeviceError{Op: SiLU} wrapping it", err)
	}
	wdep, _ := d.WriteAsync(again, make([]byte, 64), []backends.Event{dep})
	if _, err := wdep.Wait(); !errors.Is(err, boom) {
		t.Errorf("a write after that failed op: %v, want the first failure", err)
	}
	d.Close()
	if err := d.Sync(); !errors.Is(err, ErrClosed) {
		t.Errorf("Sync after Close: %v, want ErrClosed", err)
	}
	if _, err := d.RunAsync(s, []backends.Buffer{in}, again, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("RunAsync after Close: %v, want ErrClosed", err)
	}
	if _, err := d.WriteAsync(in, make([]byte, 64), nil); !errors.Is(err, ErrClosed) {
		t.Errorf("WriteAsync after Close: %v, want ErrClosed", err)
	}
}

func newFailedGate(err error) *gate {
	g := newGate()
	g.open(err)
	return g
}

// TestFakeCloseDrains checks that Close waits for work in flight and
// retires it: the event is done, with its timing, after Close.
func TestFakeCloseDrains(t *testing.T) {
	d := openFake(t, fakeOptions(t, "blas"))
	s := kernels.Spec{Op: kernels.SiLU, In: []kernels.Shape{{16}}}
	runSpec(t, d, s)
	in, _ := d.Alloc(64)
	t.Setenv("FAKEHIP_KERNEL_US", "10000")
	ev, err := d.RunAsync(s, []backends.Buffer{in}, in, nil)
	os.Setenv("FAKEHIP_KERNEL_US", "0")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if !ev.Done() {
		t.Fatal("Close returned with work in flight")
	}
	if tm, err := ev.Wait(); err != nil || tm.Duration < 10*time.Millisecond {
		t.Fatalf("the drained op: %+v, %v; want its ≥ 10 ms timing", tm, err)
	}
}
