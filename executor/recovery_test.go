package executor_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/executor"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/sim"
)

// f32s returns n values, v(i) each.
func f32s(n int, v func(i int) float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = v(i)
	}
	return x
}

// readF32 reads b from e, failing the test on error.
func readF32(t *testing.T, e *executor.Executor, b backends.Buffer) []float32 {
	t.Helper()
	got := make([]byte, b.Size())
	if _, err := e.Read(got, b); err != nil {
		t.Fatalf("Read: %v", err)
	}
	return kernels.AsF32(got)
}

// TestUndoKeepsLineage: y = x·x on the GPU, its only copy there; r = y·y
// is queued on the GPU and meets the device's loss; y = u+u is queued on
// the CPU after r's read of y, and fails with it (DESIGN.md § Queued
// execution, Failure). Recovery undoes both and runs r again on the CPU,
// which needs y as x·x made it, recomputed from its lineage: the undone
// write of y must give that lineage back, not leave y lost. Then the
// same for y = y·y in place on the GPU, which needs y's previous version
// itself.
func TestUndoKeepsLineage(t *testing.T) {
	const n = 16
	undoInPlace(t)
	e := newExec(t, executor.Config{Placer: mulOn(1)}, open(t, "cpu"), mustSim(t, sim.Event{At: 2, Kind: sim.DeviceLost}))
	mul := kernels.Spec{Op: kernels.Mul, In: []kernels.Shape{{n}, {n}}}
	add := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{n}, {n}}}
	x := alloc(t, e, kernels.AsBytes(f32s(n, func(i int) float32 { return float32(i) })))
	u := alloc(t, e, kernels.AsBytes(f32s(n, func(i int) float32 { return float32(100 + i) })))
	y, _ := e.Alloc(4 * n)
	r, _ := e.Alloc(4 * n)
	run := func(s kernels.Spec, in backends.Buffer, out backends.Buffer) {
		t.Helper()
		if _, err := e.Run(s, []backends.Buffer{in, in}, out); err != nil {
			t.Fatal(err)
		}
	}
	run(mul, x, r) // GPU op 0: r's buffer there, so that op 2 is queued
	run(mul, x, y) // GPU op 1
	settle(t, e)
	if v := y.(*executor.Tensor).Valid(); v != adaptive.Backend(1) {
		t.Fatalf("y valid on %b, want the GPU alone", v)
	}
	run(mul, y, r) // GPU op 2: lost
	run(add, u, y) // CPU, after op 2's read of y
	if err := e.Sync(context.Background()); err != nil {
		t.Errorf("Sync: %v", err)
	}
	if v := readF32(t, e, r)[3]; v != 81 {
		t.Errorf("r[3] = %v, want 81", v)
	}
	if v := readF32(t, e, y)[3]; v != 206 {
		t.Errorf("y[3] = %v, want 206", v)
	}
}

// undoInPlace is TestUndoKeepsLineage's second half.
func undoInPlace(t *testing.T) {
	const n = 16
	e := newExec(t, executor.Config{Placer: mulOn(1)}, open(t, "cpu"), mustSim(t, sim.Event{At: 2, Kind: sim.DeviceLost}))
	mul := kernels.Spec{Op: kernels.Mul, In: []kernels.Shape{{n}, {n}}}
	x := alloc(t, e, kernels.AsBytes(f32s(n, func(i int) float32 { return float32(i) })))
	y, _ := e.Alloc(4 * n)
	for _, in := range []backends.Buffer{x, x, y} { // GPU ops 0 and 1, then 2 in place: lost
		if _, err := e.Run(mul, []backends.Buffer{in, in}, y); err != nil {
			t.Fatal(err)
		}
		if in == x {
			settle(t, e)
		}
	}
	if err := e.Sync(context.Background()); err != nil {
		t.Errorf("in place: Sync: %v", err)
	}
	if v := readF32(t, e, y)[3]; v != 81 {
		t.Errorf("in place: y[3] = %v, want 81", v)
	}
}

// TestCloseRecoversRacingRun: a Run accepted while Close waits for
// queued work, and whose op then fails, is run again elsewhere before
// Close returns (or Close reports it): no op Run accepted is lost.
func TestCloseRecoversRacingRun(t *testing.T) {
	const n = 16
	gpu := newFakeQueuer(t, open(t, "sim:h100"), 0, 1)
	first, second := make(chan struct{}), make(chan struct{})
	gpu.gates = map[int64]chan struct{}{1: first, 2: second}
	gpu.failAt = 2
	e := newExec(t, executor.Config{Placer: mulOn(1), BackoffBase: time.Minute}, open(t, "cpu"), gpu)
	mul := kernels.Spec{Op: kernels.Mul, In: []kernels.Shape{{n}, {n}}}
	x := alloc(t, e, kernels.AsBytes(f32s(n, func(i int) float32 { return float32(i) })))
	y, _ := e.Alloc(4 * n)
	z, _ := e.Alloc(4 * n)
	if _, err := e.Run(mul, []backends.Buffer{x, x}, y); err != nil { // waits for first
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- e.Close() }()
	time.Sleep(20 * time.Millisecond) // Close waits for y's op, which waits for first
	if _, err := e.Run(mul, []backends.Buffer{x, x}, z); err != nil {
		t.Fatal(err)
	}
	close(first)
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b, err := e.Alloc(4)
		if err != nil {
			break // closed: the queues were drained once
		}
		b.Free()
	}
	close(second) // z's op fails now
	var err error
	select {
	case err = <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	st := e.Stats()
	if err == nil && (st.Backends[0].Ops != 1 || st.Backends[1].Ops != 1 || observed(e) != 2) {
		t.Errorf("Close returned nil with z's op neither run again nor reported: ops %d on the CPU, %d on the GPU, %d observed; want 1, 1, 2",
			st.Backends[0].Ops, st.Backends[1].Ops, observed(e))
	}
}

// blockingAlloc is a backend without a Queuer (the Executor queues its
// work) whose next Alloc, once block is set, waits until release is
// closed, after closing blocked.
type blockingAlloc struct {
	backends.Backend
	block            atomic.Bool
	blocked, release chan struct{}
}

func (b *blockingAlloc) Alloc(n int64) (backends.Buffer, error) {
	if b.block.CompareAndSwap(true, false) {
		close(b.blocked)
		<-b.release
	}
	return b.Backend.Alloc(n)
}

// TestReadRecoveryMeetsClose: a Read of a tensor lost with its device
// recomputes it while Close runs. The recomputation is queued under the
// gate, as all queued work is, so Close waits for it and observes it,
// and the Read gets the data or ErrClosed: never a send on a queue that
// Close has stopped (a panic), nor work that nothing observes.
func TestReadRecoveryMeetsClose(t *testing.T) {
	const n = 16
	cpu := &blockingAlloc{Backend: open(t, "cpu"), blocked: make(chan struct{}), release: make(chan struct{})}
	e := newExec(t, executor.Config{Placer: mulOn(1), BackoffBase: time.Minute}, cpu, mustSim(t, sim.Event{At: 1, Kind: sim.DeviceLost}))
	mul := kernels.Spec{Op: kernels.Mul, In: []kernels.Shape{{n}, {n}}}
	x := alloc(t, e, kernels.AsBytes(f32s(n, func(i int) float32 { return float32(i) })))
	y, _ := e.Alloc(4 * n)
	z, _ := e.Alloc(4 * n)
	if _, err := e.Run(mul, []backends.Buffer{x, x}, y); err != nil { // on the GPU
		t.Fatal(err)
	}
	settle(t, e)
	if _, err := e.Run(mul, []backends.Buffer{x, x}, z); err != nil { // meets the loss: on the CPU
		t.Fatal(err)
	}
	settle(t, e)
	if v := y.(*executor.Tensor).Valid(); v != 0 {
		t.Fatalf("y valid on %b, want lost", v)
	}
	cpu.block.Store(true)
	read := make(chan error, 1)
	got := make([]byte, 4*n)
	go func() { _, err := e.Read(got, y); read <- err }()
	<-cpu.blocked // the Read recomputes y: its copy on the CPU
	closed := make(chan error, 1)
	go func() { closed <- e.Close() }()
	time.Sleep(50 * time.Millisecond) // Close waits for the recomputation
	close(cpu.release)
	select {
	case err := <-read:
		if err == nil {
			if v := kernels.AsF32(got)[3]; v != 9 {
				t.Errorf("y[3] = %v, want 9", v)
			}
		} else if !errors.Is(err, adaptive.ErrClosed) {
			t.Errorf("Read: %v, want the data or ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read did not return")
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	st := e.Stats()
	if ops := st.Backends[0].Ops + st.Backends[1].Ops; ops != observed(e) || st.Recoveries != 1 {
		t.Errorf("%d ops counted, %d observed, %d recoveries; want equal counts and 1 recovery", ops, observed(e), st.Recoveries)
	}
}

// failingCopies is a fakeQueuer whose failWrite-th write and failRead-th
// read (each counted from 1) fail, when they run, with a transient error.
type failingCopies struct {
	*fakeQueuer
	writes, reads       atomic.Int64
	failWrite, failRead int64
}

func (q *failingCopies) failed(op string) backends.Event {
	return q.enqueue(nil, func() (backends.Timing, error) {
		return backends.Timing{}, &backends.DeviceError{Backend: "fake", Op: op, Err: backends.ErrTransient}
	})
}

func (q *failingCopies) WriteAsync(dst backends.Buffer, src []byte, after []backends.Event) (backends.Event, error) {
	if q.writes.Add(1) == q.failWrite {
		return q.failed("write"), nil
	}
	return q.fakeQueuer.WriteAsync(dst, src, after)
}

func (q *failingCopies) ReadAsync(dst []byte, src backends.Buffer, after []backends.Event) (backends.Event, error) {
	if q.reads.Add(1) == q.failRead {
		return q.failed("read"), nil
	}
	return q.fakeQueuer.ReadAsync(dst, src, after)
}

// TestQueuedCopyFails: a copy, not an op, fails on a device that queues
// work: the write of an input to the GPU in the middle of a chain, then
// the read back to the host of an output left on the GPU alone. The ops
// that waited for the write run again (on the CPU, the GPU backed off),
// the read is made again, every result is right, and each op is counted
// and observed once (DESIGN.md § Queued execution, Failure).
func TestQueuedCopyFails(t *testing.T) {
	const n = 12
	gpu := &failingCopies{fakeQueuer: newFakeQueuer(t, open(t, "sim:h100"), 100*time.Microsecond, 5), failWrite: 4, failRead: 2}
	e := newExec(t, executor.Config{Strategy: adaptive.GPUPreferred, BackoffBase: time.Minute}, open(t, "cpu"), gpu)
	c := newChain(t, rand.New(rand.NewPCG(4, 4)), n, 4, 64)
	_, _, outs := c.run(t, e) // c.run syncs: no error
	st := e.Stats()
	if st.Backends[1].Failures != 1 || st.Backends[1].Healthy {
		t.Errorf("the failed write was not charged to the GPU: %+v", st.Backends[1])
	}
	if got := st.Backends[0].Ops + st.Backends[1].Ops; got != n || observed(e) != n {
		t.Errorf("%d ops counted, %d observed, for %d ops", got, observed(e), n)
	}
	if v := outs[0].(*executor.Tensor).Valid(); v != adaptive.Backend(1) || gpu.reads.Load() != 1 {
		t.Fatalf("output 0 valid on %b after %d reads, want the GPU alone after 1: the failed read is not tested", v, gpu.reads.Load())
	}
	c.check(t, e, outs)
	if r, f := gpu.reads.Load(), e.Stats().Backends[1].Failures; r != 3 || f != 2 {
		t.Errorf("%d reads from the GPU, %d failures; want the failed one made again (3) and charged (2)", r, f)
	}
	if err := e.Sync(context.Background()); err != nil {
		t.Errorf("Sync: %v", err)
	}
}

// noMul is a backend that cannot run Mul.
type noMul struct{ backends.Backend }

func (b noMul) Supports(s kernels.Spec) error {
	if s.Op == kernels.Mul {
		return backends.ErrUnsupported
	}
	return b.Backend.Supports(s)
}

// TestUnrunnableOpLosesOutput: y = x·x, which only the GPU can run, fails
// there when queued, and z = y+y waits for it. Run again, y's op can run
// nowhere: y is lost (DESIGN.md § Queued execution, Failure), though it
// was never written before, and z's op, run again on the CPU, fails on
// it rather than read y's undefined contents. Read of either is
// ErrTensorLost, and Sync reports both ops.
func TestUnrunnableOpLosesOutput(t *testing.T) {
	const n = 16
	gpu := newFakeQueuer(t, open(t, "sim:h100"), 0, 1)
	gpu.failAt = 1
	e := newExec(t, executor.Config{Strategy: adaptive.GPUPreferred, BackoffBase: time.Minute}, noMul{open(t, "cpu")}, gpu)
	mul := kernels.Spec{Op: kernels.Mul, In: []kernels.Shape{{n}, {n}}}
	add := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{n}, {n}}}
	x := alloc(t, e, kernels.AsBytes(f32s(n, func(i int) float32 { return float32(i + 1) })))
	y, _ := e.Alloc(4 * n)
	z, _ := e.Alloc(4 * n)
	for _, c := range []struct {
		s       kernels.Spec
		in, out backends.Buffer
	}{{mul, x, y}, {add, y, z}} {
		if d, err := e.Submit(c.s, []backends.Buffer{c.in, c.in}, c.out); err != nil || d.Backend != 1 {
			t.Fatalf("%v: %v on backend %d, want the GPU", c.s.Op, err, d.Backend)
		}
	}
	got := make([]byte, 4*n)
	for name, b := range map[string]backends.Buffer{"y": y, "z": z} {
		if _, err := e.Read(got, b); !errors.Is(err, executor.ErrTensorLost) {
			t.Errorf("Read of %s: %v %v, want ErrTensorLost", name, err, kernels.AsF32(got)[:4])
		}
	}
	err := e.Sync(context.Background())
	if !errors.Is(err, adaptive.ErrNoBackend) || !errors.Is(err, executor.ErrTensorLost) {
		t.Errorf("Sync: %v, want y's op run nowhere and z's input lost", err)
	}
}

// TestFallbackFailsAgain: the write of an input to the GPU fails in the
// middle of a chain, so the ops behind it run again on the CPU, and
// there they fail once more, on the read of their input from the GPU.
// Their third run, on the CPU, is still a fallback: Stats.Fallbacks
// counts the ops that ran on a backend other than the first one chosen,
// after a failure.
func TestFallbackFailsAgain(t *testing.T) {
	const n = 12
	gpu := &failingCopies{fakeQueuer: newFakeQueuer(t, open(t, "sim:h100"), 100*time.Microsecond, 5), failWrite: 4, failRead: 1}
	e := newExec(t, executor.Config{Strategy: adaptive.GPUPreferred, BackoffBase: time.Minute}, open(t, "cpu"), gpu)
	c := newChain(t, rand.New(rand.NewPCG(4, 4)), n, 4, 64)
	_, _, outs := c.run(t, e)
	c.check(t, e, outs)
	st := e.Stats()
	if st.Backends[1].Failures != 2 || gpu.reads.Load() < 2 {
		t.Fatalf("GPU: %d failures, %d reads; want the write and the read failed, the read made again", st.Backends[1].Failures, gpu.reads.Load())
	}
	if got := st.Backends[0].Ops + st.Backends[1].Ops; got != n || observed(e) != n {
		t.Errorf("%d ops counted, %d observed, for %d ops", got, observed(e), n)
	}
	if st.Fallbacks == 0 {
		t.Errorf("no fallback counted; %d ops ran on the CPU after the GPU failed them", st.Backends[0].Ops)
	}
}
