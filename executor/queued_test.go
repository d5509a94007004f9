package executor_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/executor"
	"github.com/adaptsched/adaptsched/internal/host"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/learned"
	"github.com/adaptsched/adaptsched/sim"
	"github.com/adaptsched/adaptsched/trace"
)

// fakeQueuer is a device that queues its work (backends.Queuer) over the
// memory and kernels of the backend it wraps: one goroutine runs the work
// in order, each piece after the events it depends on (of any backend)
// and after a random delay of up to maxDelay, so that work queued later
// on another device overtakes it. Work after a failed event fails without
// running. Its failAt-th op (from 1) fails with a transient error; its
// n-th op waits, before it runs, until gates[n] is closed.
type fakeQueuer struct {
	backends.Backend
	maxDelay time.Duration
	failAt   int64
	gates    map[int64]chan struct{}

	jobs  chan func()
	runs  atomic.Int64
	mu    sync.Mutex
	r     *rand.Rand
	close sync.Once
}

func newFakeQueuer(t testing.TB, be backends.Backend, maxDelay time.Duration, seed uint64) *fakeQueuer {
	q := &fakeQueuer{Backend: be, maxDelay: maxDelay, jobs: make(chan func(), 1<<16), r: rand.New(rand.NewPCG(seed, 1))}
	go func() {
		for j := range q.jobs {
			j()
		}
	}()
	t.Cleanup(func() { q.close.Do(func() { close(q.jobs) }) })
	return q
}

type fakeEvent struct {
	done chan struct{}
	tm   backends.Timing
	err  error
}

func (e *fakeEvent) Done() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

func (e *fakeEvent) Wait() (backends.Timing, error) { <-e.done; return e.tm, e.err }

func (q *fakeQueuer) enqueue(after []backends.Event, call func() (backends.Timing, error)) backends.Event {
	ev := &fakeEvent{done: make(chan struct{})}
	q.mu.Lock()
	delay := time.Duration(q.r.Int64N(int64(q.maxDelay) + 1))
	q.mu.Unlock()
	after = slices.Clone(after) // a Queuer must not retain the caller's slice
	q.jobs <- func() {
		defer close(ev.done)
		for _, a := range after {
			if _, err := a.Wait(); err != nil {
				ev.err = fmt.Errorf("fake: dependency failed: %w", err)
				return
			}
		}
		time.Sleep(delay)
		ev.tm, ev.err = call()
	}
	return ev
}

func (q *fakeQueuer) RunAsync(s kernels.Spec, in []backends.Buffer, out backends.Buffer, after []backends.Event) (backends.Event, error) {
	n := q.runs.Add(1)
	gate := q.gates[n]
	return q.enqueue(after, func() (backends.Timing, error) {
		if gate != nil {
			<-gate
		}
		if n == q.failAt {
			return backends.Timing{}, &backends.DeviceError{Backend: "fake", Op: s.Op.String(), Err: backends.ErrTransient}
		}
		return q.Backend.Run(s, in, out)
	}), nil
}

func (q *fakeQueuer) WriteAsync(dst backends.Buffer, src []byte, after []backends.Event) (backends.Event, error) {
	return q.enqueue(after, func() (backends.Timing, error) { return q.Backend.Write(dst, src) }), nil
}

func (q *fakeQueuer) ReadAsync(dst []byte, src backends.Buffer, after []backends.Event) (backends.Event, error) {
	return q.enqueue(after, func() (backends.Timing, error) { return q.Backend.Read(dst, src) }), nil
}

func (q *fakeQueuer) Sync() error {
	_, err := q.enqueue(nil, func() (backends.Timing, error) { return backends.Timing{}, nil }).Wait()
	return err
}

var _ backends.Queuer = (*fakeQueuer)(nil)

// mulOn places each op by its kind, on one of two backends: Mul on
// backend mulOn, every other op on the other one.
type mulOn int

func (mulOn) Name() string                             { return "by-op" }
func (mulOn) Observed(adaptive.BucketID, int, float64) {}
func (m mulOn) Place(s kernels.Spec, _ adaptive.Residency, _ adaptive.BucketID) int {
	if s.Op == kernels.Mul {
		return int(m)
	}
	return 1 - int(m)
}

// TestQueuedCrossDevice alternates a chain between the host CPU and a
// queued device with its own memory whose work is delayed at random: each
// op consumes the previous one's output from the other device, so a read
// of stale data (an op not waiting for its producer on the other device,
// or a copy not waiting for the write it moves) gives a wrong result.
// Then the reverse hazard: an op on the CPU overwrites, in place in host
// memory, the input that a delayed copy to the device still has to read.
func TestQueuedCrossDevice(t *testing.T) {
	for seed := range uint64(4) {
		gpu := newFakeQueuer(t, open(t, "sim:h100"), 300*time.Microsecond, seed)
		cpu := &countingBackend{Backend: open(t, "cpu")}
		e := newExec(t, executor.Config{Placer: mulOn(1)}, cpu, gpu)
		c := newChain(t, rand.New(rand.NewPCG(seed, 7)), 12, 4, 64)
		_, _, outs := c.run(t, e)
		c.check(t, e, outs)
		if st := e.Stats(); st.Backends[0].Ops != 8 || st.Backends[1].Ops != 4 {
			t.Fatalf("placement: %+v", st.Backends)
		}

		// Write after read across devices: Mul (device) reads x through a
		// delayed copy; the Add that follows (CPU, in place in host
		// memory) overwrites x. The Mul must see x's first value.
		x, w, y := alloc(t, e, c.x), alloc(t, e, c.ws[1]), alloc(t, e, c.want[0])
		mul, add := c.specOf(kernels.Mul), c.specOf(kernels.Add)
		if _, err := e.Run(mul, []backends.Buffer{x, w}, y); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Run(add, []backends.Buffer{x, w}, x); err != nil {
			t.Fatal(err)
		}
		want := make([]byte, len(c.want[0]))
		if err := kernels.Reference(mul, [][]byte{c.x, c.ws[1]}, want); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(want))
		if _, err := e.Read(got, y); err != nil {
			t.Fatal(err)
		}
		if err := near(kernels.F32, got, want, 1e-5); err != nil {
			t.Errorf("seed %d: the device read x after the CPU overwrote it: %v", seed, err)
		}
	}
}

// alloc allocates a tensor of e holding data.
func alloc(t testing.TB, e *executor.Executor, data []byte) backends.Buffer {
	t.Helper()
	b, err := e.Alloc(int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Write(b, data); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestQueuedFailureFallsBack fails a queued op in the middle of a chain
// on a device that queues work (and fails what depends on the failure):
// the op and the ops queued behind it run again, the failed one on the
// CPU; every result is right, Run reported nothing, and every op that
// completed was observed once (Stats' ops and the Scheduler's
// observations agree, and cover the chain). The second half does the same
// on a simulated GPU that fails transiently and is then lost, driven
// through the Executor's own queue.
func TestQueuedFailureFallsBack(t *testing.T) {
	gpu := newFakeQueuer(t, open(t, "sim:h100"), 100*time.Microsecond, 3)
	gpu.failAt = 5
	e := newExec(t, executor.Config{Strategy: adaptive.GPUPreferred}, open(t, "cpu"), gpu)
	const n = 12
	c := newChain(t, rand.New(rand.NewPCG(9, 9)), n, 4, 64)
	_, _, outs := c.run(t, e) // c.run syncs: no error
	c.check(t, e, outs)
	st := e.Stats()
	if st.Fallbacks == 0 || st.Backends[1].Failures != 1 {
		t.Errorf("no fallback after the failure: %+v", st)
	}
	if got := st.Backends[0].Ops + st.Backends[1].Ops; got < n || observed(e) != got {
		t.Errorf("%d ops ran, %d observed, for %d ops", got, observed(e), n)
	}

	dev := mustSim(t, sim.Event{At: 3, Kind: sim.DeviceLost})
	e = newExec(t, executor.Config{Strategy: adaptive.GPUPreferred}, open(t, "cpu"), dev)
	_, _, outs = c.run(t, e)
	c.check(t, e, outs)
	st = e.Stats()
	// The ops after the loss ran on the CPU: as a fallback when a kernel
	// met the loss, as plain placements (the GPU backed off) when a copy
	// met it first; the GPU's outputs lost with it were recomputed.
	if st.Backends[1].Failures == 0 || st.Backends[1].Healthy || st.Fallbacks+st.Recoveries == 0 {
		t.Errorf("the lost GPU was not fallen back from: %+v", st)
	}
	if got := st.Backends[0].Ops + st.Backends[1].Ops; got < n || observed(e) != got {
		t.Errorf("%d ops ran, %d observed, for %d ops", got, observed(e), n)
	}
}

// alternate places ops on backends 0 and 1 in turn.
type alternate struct{ n atomic.Int64 }

func (*alternate) Name() string                             { return "alternate" }
func (*alternate) Observed(adaptive.BucketID, int, float64) {}
func (a *alternate) Place(kernels.Spec, adaptive.Residency, adaptive.BucketID) int {
	return int(a.n.Add(1) % 2)
}

// observed returns the Scheduler's observations over every bucket.
func observed(e *executor.Executor) int64 {
	var n int64
	for _, b := range e.Scheduler().Telemetry().Buckets {
		if b.Parent == "" {
			n += b.Observations
		}
	}
	return n
}

// slow is a backend whose ops take at least d more: work stays queued.
type slow struct {
	backends.Backend
	d     time.Duration
	group string
}

func (s *slow) Run(sp kernels.Spec, in []backends.Buffer, out backends.Buffer) (backends.Timing, error) {
	start := time.Now()
	time.Sleep(s.d)
	if _, err := s.Backend.Run(sp, in, out); err != nil {
		return backends.Timing{}, err
	}
	return backends.Timing{Duration: time.Since(start), Clock: backends.WallClock}, nil
}

// grouped is slow sharing hardware with the other grouped backends of its
// group name.
type grouped struct{ *slow }

func (g grouped) HardwareGroup() string { return g.group }

// TestQueuedCloseObserves closes an Executor with work in flight: Close
// waits for it, and every op reaches the Scheduler and the trace.
func TestQueuedCloseObserves(t *testing.T) {
	var traced bytes.Buffer
	rec, err := trace.NewRecorder(&traced, trace.Header{}, trace.RecorderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e := newExec(t, executor.Config{Recorder: rec},
		&slow{Backend: open(t, "cpu"), d: time.Millisecond}, &slow{Backend: open(t, "cpu1"), d: time.Millisecond})
	const n = 40
	x := alloc(t, e, kernels.AsBytes(make([]float32, 64)))
	spec := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{64}, {64}}}
	for range n {
		out, _ := e.Alloc(spec.OutBytes())
		if _, err := e.Run(spec, []backends.Buffer{x, x}, out); err != nil {
			t.Fatal(err)
		}
	}
	if got := observed(e); got >= n {
		t.Fatalf("all %d ops observed before Close: nothing was in flight", got)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if got := observed(e); got != n {
		t.Errorf("%d of %d ops observed after Close", got, n)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(traced.String(), "\n") - 1; lines != n || rec.Dropped() != 0 {
		t.Errorf("%d trace events (%d dropped), want %d", lines, rec.Dropped(), n)
	}
}

// TestQueuedPosteriorsMatchSync runs independent ops on two queued
// backends, whose completions interleave in no fixed order, then feeds a
// fresh Scheduler the same timings in the order the Executor observed them
// (its trace), one decision (SelectOn, as the Executor's Placer path)
// and Observe at a time: every posterior is the same, to the bit. What a
// decision changes that Observe reads is kept out, since the interleaving
// of decisions and observations is not replayed: one op shape with its
// arms warm-started (Config.Warm: no young arm's prior is re-derived),
// placed by a fixed rule (Config.Placer: no incumbent, whose change
// detector Observe feeds).
func TestQueuedPosteriorsMatchSync(t *testing.T) {
	var traced bytes.Buffer
	rec, err := trace.NewRecorder(&traced, trace.Header{}, trace.RecorderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bes := []backends.Backend{&slow{Backend: open(t, "cpu"), d: 50 * time.Microsecond}, &slow{Backend: open(t, "cpu1"), d: 80 * time.Microsecond}}
	spec := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{256}, {256}}}
	probe, err := adaptive.New(adaptive.Config{Backends: bes, NoCalibration: true})
	if err != nil {
		t.Fatal(err)
	}
	d, err := probe.Select(spec, adaptive.Residency{})
	if err != nil {
		t.Fatal(err)
	}
	probe.Close()
	warm := map[learned.Key]bandit.NormalGamma{}
	for _, name := range []string{"cpu", "cpu1"} {
		warm[learned.Key{Backend: name, Bucket: d.BucketName}] = bandit.NormalGamma{Mu: math.Log(100), Kappa: 2, Alpha: 2, Beta: 0.5}
	}
	e := newExec(t, executor.Config{Warm: warm, Placer: &alternate{}, Recorder: rec}, bes...)
	x := alloc(t, e, kernels.AsBytes(make([]float32, 256)))
	for range 200 {
		out, _ := e.Alloc(spec.OutBytes())
		if _, err := e.Run(spec, []backends.Buffer{x, x}, out); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	async := e.Scheduler().Telemetry()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := adaptive.New(adaptive.Config{Backends: bes, NoCalibration: true, Seed: 1, Warm: warm})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := trace.NewReader(&traced, "trace", trace.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	names := s.Backends()
	for n := 0; ; n++ {
		ev, err := r.Next()
		if err != nil {
			if n != 200 {
				t.Fatalf("trace ended after %d events: %v", n, err)
			}
			break
		}
		sp, err := ev.Spec()
		if err != nil {
			t.Fatal(err)
		}
		arm := -1
		for i, name := range names {
			if name == ev.Backend {
				arm = i
			}
		}
		d, err := s.SelectOn(sp, adaptive.Residency{}, arm, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		tm := backends.Timing{Duration: time.Duration(math.Round(ev.ActualUs * 1e3)), Clock: backends.WallClock}
		if err := s.Observe(d, tm); err != nil {
			t.Fatal(err)
		}
	}
	replayed := s.Telemetry()
	if len(async.Buckets) != 1 || len(replayed.Buckets) != 1 {
		t.Fatalf("buckets: %d queued, %d replayed; want 1", len(async.Buckets), len(replayed.Buckets))
	}
	a, b := async.Buckets[0], replayed.Buckets[0]
	if a.Observations != 200 || b.Observations != 200 {
		t.Fatalf("observations: %d queued, %d replayed; want 200", a.Observations, b.Observations)
	}
	// Equal up to rounding: the discount is applied lazily (γ^k when an arm
	// is next read), and a queued run reads arms at other moments than a
	// replay does, so the same products are rounded in another order.
	near := func(x, y float64) bool { return math.Abs(x-y) <= 1e-9*math.Max(math.Abs(x), math.Abs(y)) }
	for i := range a.Arms {
		x, y := a.Arms[i], b.Arms[i]
		if x.Backend != y.Backend || x.N != y.N || x.Warmup != y.Warmup || !near(x.MeanUs, y.MeanUs) ||
			!near(x.Lo90Us, y.Lo90Us) || !near(x.Hi90Us, y.Hi90Us) || !near(x.Evidence, y.Evidence) {
			t.Errorf("arm %d: queued %+v, replayed %+v", i, x, y)
		}
	}
	if a.Arms[0].N == 0 || a.Arms[1].N == 0 {
		t.Errorf("one backend ran everything (%+v): the interleaving was not tested", a.Arms)
	}
}

// TestQueuedSpreadsIndependentOps queues a burst of independent ops on
// two backends that it knows (posteriors warm-started, tight): 1 ms
// and 2 ms an op. Pricing each queue's expected wait (Residency.QueueUs)
// sends part of the burst to the slower, idle one; backends that share
// hardware (backends.HardwareGroup) share one expected-free time, so there
// the whole burst goes to the faster one, as without queues.
func TestQueuedSpreadsIndependentOps(t *testing.T) {
	spec := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{256}, {256}}}
	burst := func(t *testing.T, bes ...backends.Backend) [2]int {
		probe, err := adaptive.New(adaptive.Config{Backends: bes, NoCalibration: true})
		if err != nil {
			t.Fatal(err)
		}
		d, err := probe.Select(spec, adaptive.Residency{})
		if err != nil {
			t.Fatal(err)
		}
		probe.Close()
		known := func(us float64) bandit.NormalGamma { // 50 runs' worth, 10% spread
			return bandit.NormalGamma{Mu: math.Log(us), Kappa: 50, Alpha: 25, Beta: 25 * 0.01}
		}
		warm := map[learned.Key]bandit.NormalGamma{{Backend: "cpu", Bucket: d.BucketName}: known(1000), {Backend: "cpu1", Bucket: d.BucketName}: known(2000)}
		e := newExec(t, executor.Config{Warm: warm}, bes...)
		x := alloc(t, e, kernels.AsBytes(make([]float32, 256)))
		var where [2]int
		for range 12 {
			out, _ := e.Alloc(spec.OutBytes())
			d, err := e.Submit(spec, []backends.Buffer{x, x}, out)
			if err != nil {
				t.Fatal(err)
			}
			where[d.Backend]++
		}
		if err := e.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		return where
	}
	fast, slower := &slow{Backend: open(t, "cpu"), d: time.Millisecond}, &slow{Backend: open(t, "cpu1"), d: 2 * time.Millisecond}
	if where := burst(t, fast, slower); where[1] < 2 || where[0] <= where[1] {
		t.Errorf("separate hardware: burst of 12 placed %v, want most on the faster and some on the idle one", where)
	}
	fast.group, slower.group = "host", "host"
	if where := burst(t, grouped{fast}, grouped{slower}); where[1] != 0 {
		t.Errorf("shared hardware: burst of 12 placed %v, want it on the faster one", where)
	}
}

// TestQueuedBadUse: a Read or Write of a freed tensor, an Alloc beyond
// the machine's memory, and a Sync, Read, Run, Write or Alloc after
// Close each get one clear error.
func TestQueuedBadUse(t *testing.T) {
	e := newExec(t, executor.Config{}, open(t, "cpu"))
	x := alloc(t, e, kernels.AsBytes(make([]float32, 16)))
	y := alloc(t, e, kernels.AsBytes(make([]float32, 16)))
	spec := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{16}, {16}}}
	if _, err := e.Run(spec, []backends.Buffer{x, x}, y); err != nil {
		t.Fatal(err)
	}
	y.Free()
	buf := make([]byte, 64)
	if _, err := e.Read(buf, y); !errors.Is(err, executor.ErrBadTensor) || !strings.Contains(err.Error(), "freed") {
		t.Errorf("Read of a freed tensor: %v", err)
	}
	if _, err := e.Write(y, buf); !errors.Is(err, executor.ErrBadTensor) || !strings.Contains(err.Error(), "freed") {
		t.Errorf("Write of a freed tensor: %v", err)
	}
	if _, err := e.Run(spec, []backends.Buffer{x, x}, y); !errors.Is(err, executor.ErrBadTensor) {
		t.Errorf("Run into a freed tensor: %v", err)
	}
	if _, err := e.Alloc(1 << 62); !errors.Is(err, backends.ErrOutOfMemory) {
		t.Errorf("Alloc of 4 EiB: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Sync(context.Background()); !errors.Is(err, adaptive.ErrClosed) || !strings.Contains(err.Error(), "Sync after Close") {
		t.Errorf("Sync after Close: %v", err)
	}
	if _, err := e.Read(buf, x); !errors.Is(err, adaptive.ErrClosed) {
		t.Errorf("Read after Close: %v", err)
	}
	if _, err := e.Run(spec, []backends.Buffer{x, x}, x); !errors.Is(err, adaptive.ErrClosed) {
		t.Errorf("Run after Close: %v", err)
	}
	if _, err := e.Write(x, buf); !errors.Is(err, adaptive.ErrClosed) || !strings.Contains(err.Error(), "Write after Close") {
		t.Errorf("Write after Close: %v", err)
	}
	if _, err := e.Alloc(64); !errors.Is(err, adaptive.ErrClosed) || !strings.Contains(err.Error(), "Alloc after Close") {
		t.Errorf("Alloc after Close: %v", err)
	}
}

// TestAllocBound: the Executor reserves nothing at Alloc, yet refuses a
// tensor no memory could hold: more than the host's and every
// backend's. One that only a GPU's memory could hold is allowed.
func TestAllocBound(t *testing.T) {
	gpu := open(t, "sim:h100")
	e := newExec(t, executor.Config{}, open(t, "cpu"), gpu)
	most := max(host.MemTotal(), gpu.Info().Memory)
	if x, err := e.Alloc(gpu.Info().Memory); err != nil {
		t.Errorf("a tensor of the GPU's %d bytes: %v", gpu.Info().Memory, err)
	} else {
		x.Free()
	}
	if _, err := e.Alloc(most + 1); !errors.Is(err, backends.ErrOutOfMemory) {
		t.Errorf("a tensor of %d bytes, past every memory: %v", most+1, err)
	}
}

// TestUnwrittenReadsZeros: a Read of a tensor never written gives zeros,
// as the CPU backend's new buffer holds, queued or synchronous, beside
// the CPU and a GPU (it read as a tensor lost with its device,
// ErrTensorLost); one that an op read first, whose contents are
// undefined (TestExecutorUnwrittenInput), reads too; a later Write
// replaces either.
func TestUnwrittenReadsZeros(t *testing.T) {
	for _, sync := range []bool{false, true} {
		for _, only := range []string{"cpu", "sim:h100"} {
			e := newExec(t, executor.Config{Synchronous: sync, Strategy: adaptive.Only(only)}, open(t, "cpu"), open(t, "sim:h100"))
			spec := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{16}, {16}}}
			ones := make([]float32, 16)
			for i := range ones {
				ones[i] = 1
			}
			y := alloc(t, e, kernels.AsBytes(ones))
			x, err := e.Alloc(64)
			if err != nil {
				t.Fatal(err)
			}
			out, err := e.Alloc(64)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]float32, 16)
			if _, err := e.Read(kernels.AsBytes(got), out); err != nil || slices.ContainsFunc(got, func(v float32) bool { return v != 0 }) {
				t.Errorf("sync %v, %s: unwritten tensor read %v, %v; want zeros", sync, only, got, err)
			}
			if _, err := e.Run(spec, []backends.Buffer{x, y}, out); err != nil {
				t.Fatalf("sync %v, %s: Run on an unwritten input: %v", sync, only, err)
			}
			if _, err := e.Read(kernels.AsBytes(got), out); err != nil || !slices.Equal(got, ones) {
				t.Errorf("sync %v, %s: 0 + 1 = %v, %v", sync, only, got, err)
			}
			if _, err := e.Read(kernels.AsBytes(got), x); err != nil {
				t.Errorf("sync %v, %s: Read of an unwritten input: %v", sync, only, err)
			}
			if _, err := e.Write(x, kernels.AsBytes(ones)); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Read(kernels.AsBytes(got), x); err != nil || !slices.Equal(got, ones) {
				t.Errorf("sync %v, %s: written over zeros, read %v, %v", sync, only, got, err)
			}
		}
	}
}

// TestQueuedCloseDeadline: Close with a context that ends before the
// queued work does returns the context's error and leaves the Executor
// open; a later Close completes.
func TestQueuedCloseDeadline(t *testing.T) {
	e := newExec(t, executor.Config{}, &slow{Backend: open(t, "cpu"), d: 20 * time.Millisecond})
	x := alloc(t, e, kernels.AsBytes(make([]float32, 16)))
	spec := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{16}, {16}}}
	for range 5 {
		if _, err := e.Run(spec, []backends.Buffer{x, x}, x); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if err := e.CloseContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close past its deadline: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if got := observed(e); got != 5 {
		t.Errorf("%d of 5 ops observed", got)
	}
}

// TestQueuedOutOfMemory: a queued kernel that runs out of device memory
// is run again, after an eviction, with reason MemoryConstraint; the
// results are right.
func TestQueuedOutOfMemory(t *testing.T) {
	dev := mustSim(t, sim.Event{At: 3, Kind: sim.OutOfMemory, Span: 1})
	e := newExec(t, executor.Config{Strategy: adaptive.GPUPreferred}, open(t, "cpu"), dev)
	c := newChain(t, rand.New(rand.NewPCG(4, 4)), 8, 4, 64)
	_, _, outs := c.run(t, e)
	c.check(t, e, outs)
	if st := e.Stats(); st.MemoryRetries == 0 {
		t.Errorf("out of memory not retried: %+v", st)
	}
	if r := e.Scheduler().Telemetry().Reasons[adaptive.MemoryConstraint]; r == 0 {
		t.Errorf("no decision with reason MemoryConstraint")
	}
}

// TestVirtualCopyPassesKernel: on a simulated GPU a copy runs on the link
// beside the kernels, so the copy out of a short op's output ends before
// a long kernel queued after that op. A Read of the output waits for the
// copy alone and must return, not wait for the long kernel's observation
// (the watcher once took simulated work in queue order only, and hung).
func TestVirtualCopyPassesKernel(t *testing.T) {
	tl := sim.NewTimeline(sim.Async)
	// Durations only: the point is when the host's Read returns.
	gpu, err := sim.Open("h100", sim.DefaultOptions().WithTimeline(tl).WithSkipCompute(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gpu.Close() })
	e := newExec(t, executor.Config{Strategy: adaptive.Only(gpu.Info().Name)}, gpu)
	add := kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{16}, {16}}}
	const n = 8192 // about a millisecond on the simulated H100; the copy out, microseconds
	mm := kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{n, n}, {n, n}}}
	x := alloc(t, e, kernels.AsBytes([]float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}))
	k, _ := e.Alloc(add.OutBytes())
	if _, err := e.Run(add, []backends.Buffer{x, x}, k); err != nil {
		t.Fatal(err)
	}
	big := alloc(t, e, make([]byte, 4*n*n))
	l, _ := e.Alloc(mm.OutBytes())
	if _, err := e.Run(mm, []backends.Buffer{big, big}, l); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, add.OutBytes())
	read := make(chan error, 1)
	go func() { _, err := e.Read(got, k); read <- err }()
	select {
	case err := <-read:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Read of a short op's output did not return while a long kernel was queued after it")
	}
}

// TestDecisionLatency: one decision in 64 is timed into Stats'
// DecisionLatency, each into one bucket.
func TestDecisionLatency(t *testing.T) {
	e := newExec(t, executor.Config{}, open(t, "cpu"))
	spec := kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{16}, {16}}}
	x := alloc(t, e, make([]byte, 64))
	out, _ := e.Alloc(spec.OutBytes())
	for range 200 {
		if _, err := e.Run(spec, []backends.Buffer{x, x}, out); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	l := e.Stats().DecisionLatency
	var n uint64
	for _, c := range l.Buckets {
		n += c
	}
	if l.Count != 200/64 || n != l.Count || l.SumNs <= 0 {
		t.Errorf("DecisionLatency %+v after 200 decisions: want 3 timed, each in one bucket, a positive sum", l)
	}
}

// TestSimulatedRunRepeats: a run on simulated devices depends on the
// virtual clock alone. The host's thread pauses between ops in one run
// and, on one P, not in the other, so the goroutines that observe
// completed work keep up in one and lag in the other; the decisions and
// the makespan
// must be the same (the observer once took simulated work whenever its
// goroutine ran, and the learner saw more or less of it by the next
// decision).
func TestSimulatedRunRepeats(t *testing.T) {
	type result struct {
		placed   []int
		makespan float64
	}
	run := func(pause bool) result {
		tl := sim.NewTimeline(sim.Async)
		var bes []backends.Backend
		for _, name := range []string{"cpu2", "h100"} {
			d, err := sim.Open(name, sim.DefaultOptions().WithTimeline(tl).WithSkipCompute(true))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			bes = append(bes, d)
		}
		e := newExec(t, executor.Config{}, bes...)
		// Sizes where the CPU and the GPU are close, so that what the
		// learner has seen decides.
		var specs []kernels.Spec
		for _, n := range []int{34, 38, 42, 46} {
			specs = append(specs, kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{n, n}, {n, n}}})
		}
		xs := make([]backends.Buffer, len(specs))
		outs := make([][2]backends.Buffer, len(specs))
		for i, s := range specs {
			xs[i] = alloc(t, e, make([]byte, s.OutBytes()))
			outs[i][0], _ = e.Alloc(s.OutBytes())
			outs[i][1], _ = e.Alloc(s.OutBytes())
		}
		var r result
		got := make([]byte, specs[len(specs)-1].OutBytes())
		for i := range 600 {
			k, j := i%len(specs), i/len(specs)
			in := xs[k]
			d, err := e.Submit(specs[k], []backends.Buffer{in, xs[k]}, outs[k][j%2])
			if err != nil {
				t.Fatal(err)
			}
			r.placed = append(r.placed, d.Backend)
			if pause {
				time.Sleep(50 * time.Microsecond)
			}
			if i%20 == 19 { // read one output, as a decode step its logits
				if _, err := e.Read(got[:specs[k].OutBytes()], outs[k][j%2]); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		r.makespan = tl.Stats().MakespanUs
		return r
	}
	// With one P the observing goroutines run only when the host's
	// thread blocks: they lag as far as they can.
	procs := runtime.GOMAXPROCS(1)
	a := run(false)
	runtime.GOMAXPROCS(procs)
	b := run(true)
	for i := range a.placed {
		if a.placed[i] != b.placed[i] {
			t.Fatalf("op %d placed on backend %d without pauses, %d with them", i, a.placed[i], b.placed[i])
		}
	}
	if a.makespan != b.makespan {
		t.Errorf("makespan %v µs without pauses, %v with them", a.makespan, b.makespan)
	}
	count := map[int]int{}
	for _, p := range a.placed {
		count[p]++
	}
	if len(count) < 2 {
		t.Errorf("every op on one backend (%v): the learner had no choice to make", count)
	}
}

// TestQueuedOpKeepsItsSpec: a queued op runs the spec it was given even
// when the caller changes the spec's shapes once Run has returned, as a
// caller reusing its Spec does: the first ops of the output's site run
// on their own copy, the later ones on the site's known spec.
func TestQueuedOpKeepsItsSpec(t *testing.T) {
	gpu := newFakeQueuer(t, open(t, "sim:h100"), 2*time.Millisecond, 9)
	e := newExec(t, executor.Config{}, gpu)
	const n = 64
	xs, ws := make([]float32, n), make([]float32, n)
	for i := range xs {
		xs[i], ws[i] = float32(i), float32(2*i+1)
	}
	x, w := alloc(t, e, kernels.AsBytes(xs)), alloc(t, e, kernels.AsBytes(ws))
	y, err := e.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		s := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{n}, {n}}}
		if _, err := e.Run(s, []backends.Buffer{x, w}, y); err != nil {
			t.Fatal(err)
		}
		s.In[0][0], s.In[1][0] = n/2, n/2 // the caller reuses its shapes
	}
	got := make([]byte, 4*n)
	if _, err := e.Read(got, y); err != nil {
		t.Fatal(err)
	}
	for i, v := range kernels.AsF32(got) {
		if v != xs[i]+ws[i] {
			t.Fatalf("y[%d] = %v, want %v: a queued op read the caller's changed spec", i, v, xs[i]+ws[i])
		}
	}
	if err := e.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// lostOnRead is a fakeQueuer that refuses to queue reads, as a lost
// device does, once lost is set.
type lostOnRead struct {
	*fakeQueuer
	lost atomic.Bool
}

func (q *lostOnRead) ReadAsync(dst []byte, src backends.Buffer, after []backends.Event) (backends.Event, error) {
	if q.lost.Load() {
		return nil, &backends.DeviceError{Backend: "fake", Op: "read", Err: fmt.Errorf("%w: gone", backends.ErrDeviceLost)}
	}
	return q.fakeQueuer.ReadAsync(dst, src, after)
}

// TestLostInputFailsCPUOp: an op queued on a simulated CPU after the
// read of a GPU's output fails, without running, when the GPU is lost
// before the read ends (DESIGN.md § Queued execution, Failure: queues fail
// work whose dependencies failed). Recovery runs it again on the CPU with
// the GPU's ops; the CPU is not blamed (no failure, healthy), and only the
// ops that ran are counted and observed: 4, not the failed one besides.
func TestLostInputFailsCPUOp(t *testing.T) {
	const n = 1 << 20 // a 4 MiB read: still on the link when the loss is met
	tl := sim.NewTimeline(sim.Async)
	cpu, err := sim.Open("cpu2", sim.DefaultOptions().WithTimeline(tl))
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := sim.Open("h100", sim.DefaultOptions().WithTimeline(tl).WithEvents(sim.Event{At: 2, Kind: sim.DeviceLost}))
	if err != nil {
		t.Fatal(err)
	}
	e := newExec(t, executor.Config{Placer: mulOn(1)}, cpu, gpu)
	mul := kernels.Spec{Op: kernels.Mul, In: []kernels.Shape{{n}, {n}}}
	add := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{n}, {n}}}
	xs := make([]float32, n)
	for i := range xs {
		xs[i] = float32(i%7) + 1
	}
	x := alloc(t, e, kernels.AsBytes(xs))
	outs := make([]backends.Buffer, 4)
	for i := range outs {
		outs[i], _ = e.Alloc(4 * n)
	}
	// y = x·x on the GPU (op 0); z = y+y on the CPU, after y's read; u = x·x
	// on the GPU (op 1); v = x·x meets the loss at op 2.
	for i, c := range []struct {
		s    kernels.Spec
		in   backends.Buffer
		onto int
	}{{mul, x, 1}, {add, outs[0], 0}, {mul, x, 1}, {mul, x, 0}} {
		d, err := e.Submit(c.s, []backends.Buffer{c.in, c.in}, outs[i])
		if err != nil || d.Backend != c.onto {
			t.Fatalf("op %d: %v on backend %d, want %d", i, err, d.Backend, c.onto)
		}
	}
	if err := e.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4*n)
	for i, o := range outs {
		if _, err := e.Read(got, o); err != nil {
			t.Fatal(err)
		}
		want := xs[3] * xs[3]
		if i == 1 {
			want *= 2
		}
		if v := kernels.AsF32(got)[3]; v != want {
			t.Errorf("op %d: [3] = %v, want %v", i, v, want)
		}
	}
	st := e.Stats()
	if c := st.Backends[0]; c.Failures != 0 || !c.Healthy || c.Ops != 4 || observed(e) != 4 {
		t.Errorf("CPU: %d ops, %d observed, %d failures, healthy %v; want 4, 4, none, true", c.Ops, observed(e), c.Failures, c.Healthy)
	}
}

// TestRecoveryMeetsLostDevice: a queued op on the GPU fails, and its
// re-run on the CPU needs its input read back from the GPU, which by then
// refuses to queue work with ErrDeviceLost. Recovery must finish (the
// input is recomputed from its lineage).
func TestRecoveryMeetsLostDevice(t *testing.T) {
	fq := newFakeQueuer(t, open(t, "sim:h100"), 0, 3)
	fq.failAt = 2 // the second op on the GPU fails
	gpu := &lostOnRead{fakeQueuer: fq}
	e, err := executor.New(executor.Config{Backends: []backends.Backend{open(t, "cpu"), gpu},
		Strategy: adaptive.GPUPreferred, NoCalibration: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	spec := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{16}, {16}}}
	x := alloc(t, e, kernels.AsBytes([]float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}))
	y, _ := e.Alloc(64)
	z, _ := e.Alloc(64)
	if d, err := e.Submit(spec, []backends.Buffer{x, x}, y); err != nil || d.Backend != 1 {
		t.Fatalf("y: %v on %d", err, d.Backend)
	}
	if d, err := e.Submit(spec, []backends.Buffer{y, y}, z); err != nil || d.Backend != 1 {
		t.Fatalf("z: %v on %d", err, d.Backend)
	}
	gpu.lost.Store(true)
	done := make(chan error, 1)
	go func() { done <- e.Sync(context.Background()) }()
	select {
	case err := <-done:
		t.Logf("Sync: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("Sync deadlocked: recovery met a device lost while queueing a read")
	}
	got := make([]byte, 64)
	if _, err := e.Read(got, z); err != nil {
		t.Fatal(err)
	}
	if v := kernels.AsF32(got)[1]; v != 8 {
		t.Errorf("z[1] = %v, want 8", v)
	}
	if err := e.Close(); err != nil {
		t.Log(err)
	}
}

// TestLostSourceOutsideRecovery: an op on the CPU needs its input read
// back from the GPU, which refuses to queue the read with ErrDeviceLost.
// Run returns (an error, or the op placed) rather than deciding again
// forever, and once the loss is recovered the op runs with the input
// recomputed from its lineage.
func TestLostSourceOutsideRecovery(t *testing.T) {
	gpu := &lostOnRead{fakeQueuer: newFakeQueuer(t, open(t, "sim:h100"), 0, 3)}
	e := newExec(t, executor.Config{Placer: mulOn(1)}, open(t, "cpu"), gpu)
	mul := kernels.Spec{Op: kernels.Mul, In: []kernels.Shape{{16}, {16}}}
	add := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{16}, {16}}}
	x := alloc(t, e, kernels.AsBytes([]float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}))
	y, _ := e.Alloc(64)
	z, _ := e.Alloc(64)
	if _, err := e.Run(mul, []backends.Buffer{x, x}, y); err != nil { // on the GPU
		t.Fatal(err)
	}
	settle(t, e)
	gpu.lost.Store(true)
	done := make(chan error, 1)
	go func() { _, err := e.Run(add, []backends.Buffer{y, y}, z); done <- err }() // on the CPU
	select {
	case err := <-done:
		t.Logf("Run: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("Run never returned: the input's lost source was met again and again")
	}
	if err := e.Sync(context.Background()); err != nil {
		t.Logf("Sync: %v", err)
	}
	if _, err := e.Run(add, []backends.Buffer{y, y}, z); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 64)
	if _, err := e.Read(got, z); err != nil {
		t.Fatal(err)
	}
	if v := kernels.AsF32(got)[2]; v != 18 {
		t.Errorf("z[2] = %v, want 18", v)
	}
}

// TestSyncBadUseAfterClose: in the synchronous mode too, a Read, Write,
// Run or Alloc after Close gets ErrClosed, as queued (TestQueuedBadUse),
// rather than the tensor's last contents.
func TestSyncBadUseAfterClose(t *testing.T) {
	e := newExec(t, executor.Config{Synchronous: true}, open(t, "cpu"))
	x := alloc(t, e, kernels.AsBytes(make([]float32, 16)))
	spec := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{16}, {16}}}
	if _, err := e.Run(spec, []backends.Buffer{x, x}, x); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := e.Read(buf, x); !errors.Is(err, adaptive.ErrClosed) || !strings.Contains(err.Error(), "Read after Close") {
		t.Errorf("Read after Close: %v", err)
	}
	if _, err := e.Write(x, buf); !errors.Is(err, adaptive.ErrClosed) {
		t.Errorf("Write after Close: %v", err)
	}
	if _, err := e.Run(spec, []backends.Buffer{x, x}, x); !errors.Is(err, adaptive.ErrClosed) {
		t.Errorf("Run after Close: %v", err)
	}
	if _, err := e.Alloc(64); !errors.Is(err, adaptive.ErrClosed) {
		t.Errorf("Alloc after Close: %v", err)
	}
}
