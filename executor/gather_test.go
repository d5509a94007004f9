package executor_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/executor"
	"github.com/adaptsched/adaptsched/kernels"
)

// fakeRecorder is a fakeQueuer that gathers (backends.Recorder): between
// Record and Flush its ops are held, unlaunched, until a Flush, a wait
// for one of them, or a copy or Sync launches them, as backends/rocm's
// gathering does.
type fakeRecorder struct {
	*fakeQueuer
	mu        sync.Mutex
	recording bool
	held      []*heldOp
	launches  int
}

type heldOp struct {
	r        *fakeRecorder
	launched chan struct{}
	ev       backends.Event // the fakeQueuer's, once launched
	run      func() backends.Event
}

var (
	_ backends.Recorder = (*fakeRecorder)(nil)
	_ backends.Deferred = (*heldOp)(nil)
)

func (h *heldOp) Launched() <-chan struct{} { return h.launched }
func (h *heldOp) Launch() error             { h.r.launch(); return nil }
func (h *heldOp) Done() bool {
	select {
	case <-h.launched:
		return h.ev.Done()
	default:
		return false
	}
}
func (h *heldOp) Wait() (backends.Timing, error) {
	h.r.launch()
	_, err := h.ev.Wait()
	return backends.Timing{Clock: backends.Gathered}, err
}

// launch launches what is held, in order.
func (r *fakeRecorder) launch() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.held) > 0 {
		r.launches++
	}
	for _, h := range r.held {
		h.ev = h.run()
		close(h.launched)
	}
	r.held = nil
}

func (r *fakeRecorder) Record() error {
	r.mu.Lock()
	r.recording = true
	r.mu.Unlock()
	return nil
}

func (r *fakeRecorder) Flush() error {
	r.launch()
	r.mu.Lock()
	r.recording = false
	r.mu.Unlock()
	return nil
}

func (r *fakeRecorder) RunAsync(s kernels.Spec, in []backends.Buffer, out backends.Buffer, after []backends.Event) (backends.Event, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.recording {
		return r.fakeQueuer.RunAsync(s, in, out, after)
	}
	h := &heldOp{r: r, launched: make(chan struct{})}
	after = slices.Clone(after) // a Queuer must not retain the caller's slice
	h.run = func() backends.Event {
		ev, _ := r.fakeQueuer.RunAsync(s, in, out, after)
		return ev
	}
	r.held = append(r.held, h)
	return h, nil
}

func (r *fakeRecorder) WriteAsync(dst backends.Buffer, src []byte, after []backends.Event) (backends.Event, error) {
	r.launch()
	return r.fakeQueuer.WriteAsync(dst, src, after)
}

func (r *fakeRecorder) ReadAsync(dst []byte, src backends.Buffer, after []backends.Event) (backends.Event, error) {
	r.launch()
	return r.fakeQueuer.ReadAsync(dst, src, after)
}

func (r *fakeRecorder) Sync() error {
	r.launch()
	return r.fakeQueuer.Sync()
}

// TestGatheredChain runs a chain of ops on a gathering device between
// Record and Flush: nothing is launched before Flush (the watcher holds
// the ops without launching them), the results are right, and the
// gathered ops teach the Scheduler nothing; the same chain without Record
// is observed op by op.
func TestGatheredChain(t *testing.T) {
	gpu := &fakeRecorder{fakeQueuer: newFakeQueuer(t, open(t, "sim:h100"), 50*time.Microsecond, 1)}
	e := newExec(t, executor.Config{Strategy: adaptive.GPUPreferred}, open(t, "cpu"), gpu)
	c := newChain(t, rand.New(rand.NewPCG(3, 3)), 9, 4, 64)
	// Warm the device copies of the inputs: inside the gathering, only ops.
	x, ws, outs := c.run(t, e)
	before := observed(e)
	if err := e.Record(); err != nil {
		t.Fatal(err)
	}
	prev := x
	for i, op := range c.ops {
		if _, err := e.Run(c.specOf(op), []backends.Buffer{prev, ws[i]}, outs[i]); err != nil {
			t.Fatal(err)
		}
		prev = outs[i]
	}
	time.Sleep(20 * time.Millisecond) // time for a watcher that would launch early
	gpu.mu.Lock()
	held, launches := len(gpu.held), gpu.launches
	gpu.mu.Unlock()
	if held != len(c.ops) || launches != 0 {
		t.Fatalf("before Flush: %d ops held, %d launches; want %d held, none launched", held, launches, len(c.ops))
	}
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	c.check(t, e, outs)
	if err := e.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := observed(e); got != before {
		t.Errorf("gathered ops observed: %d observations, want %d", got, before)
	}
	gpu.mu.Lock()
	launches = gpu.launches
	gpu.mu.Unlock()
	if launches != 1 {
		t.Errorf("%d launches for one gathering, want 1", launches)
	}
}

// TestGatheredAcrossDevices gathers on the device while the chain
// alternates with the CPU: each CPU op waits for a gathered op, which
// launches the gathering (no deadlock, no stale read), and reading a
// gathered op's output launches it too.
func TestGatheredAcrossDevices(t *testing.T) {
	gpu := &fakeRecorder{fakeQueuer: newFakeQueuer(t, open(t, "sim:h100"), 200*time.Microsecond, 2)}
	e := newExec(t, executor.Config{Placer: mulOn(1)}, open(t, "cpu"), gpu)
	if err := e.Record(); err != nil {
		t.Fatal(err)
	}
	c := newChain(t, rand.New(rand.NewPCG(4, 4)), 12, 4, 64)
	_, _, outs := c.run(t, e)
	c.check(t, e, outs)
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	if st := e.Stats(); st.Backends[1].Ops != 4 {
		t.Fatalf("device ops %d, want 4", st.Backends[1].Ops)
	}
}

// TestGatheredClose: Close with gathered ops not flushed launches them
// and returns.
func TestGatheredClose(t *testing.T) {
	gpu := &fakeRecorder{fakeQueuer: newFakeQueuer(t, open(t, "sim:h100"), 0, 5)}
	e, err := executor.New(executor.Config{Strategy: adaptive.GPUPreferred, Backends: []backends.Backend{open(t, "cpu"), gpu},
		NoCalibration: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	c := newChain(t, rand.New(rand.NewPCG(5, 5)), 6, 4, 64)
	c.run(t, e)
	if err := e.Record(); err != nil {
		t.Fatal(err)
	}
	c.run(t, e)
	done := make(chan error, 1)
	go func() { done <- e.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close with gathered ops did not return")
	}
	if err := e.Record(); err == nil {
		t.Error("Record after Close succeeded")
	}
}

// TestGatheredLongStep gathers more ops than a lane holds for its
// watcher on a device that launches only at Flush: queueing never waits
// for a launch that only the caller's Flush would make, and every op
// runs once flushed.
func TestGatheredLongStep(t *testing.T) {
	gpu := &fakeRecorder{fakeQueuer: newFakeQueuer(t, open(t, "cpu1"), 0, 6)} // not simulated: its work is held
	e := newExec(t, executor.Config{Strategy: adaptive.Only("cpu1")}, open(t, "cpu"), gpu)
	x := alloc(t, e, kernels.AsBytes([]float32{1, 2, 3, 4}))
	y := alloc(t, e, kernels.AsBytes([]float32{0, 0, 0, 0}))
	add := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{4}, {4}}}
	if err := e.Record(); err != nil {
		t.Fatal(err)
	}
	const ops = 5000 // more than a lane's 4096
	done := make(chan error, 1)
	go func() {
		for range ops {
			if _, err := e.Run(add, []backends.Buffer{y, x}, y); err != nil {
				done <- err
				return
			}
		}
		done <- e.Flush()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("queueing %d gathered ops did not return", ops)
	}
	got := make([]float32, 4)
	if _, err := e.Read(kernels.AsBytes(got), y); err != nil {
		t.Fatal(err)
	}
	if got[0] != ops || got[3] != 4*ops {
		t.Errorf("after %d gathered adds of [1 2 3 4]: %v", ops, got)
	}
}
