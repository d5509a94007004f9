package executor_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	_ "github.com/adaptsched/adaptsched/backends/cpu"
	"github.com/adaptsched/adaptsched/executor"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/sim"
	"github.com/adaptsched/adaptsched/trace"
)

// open opens a registered backend or fails the test.
func open(t testing.TB, name string) backends.Backend {
	t.Helper()
	b, err := backends.Open(name)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// newExec builds an Executor over bes with test settings.
func newExec(t testing.TB, cfg executor.Config, bes ...backends.Backend) *executor.Executor {
	t.Helper()
	cfg.Backends = bes
	cfg.NoCalibration = true
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	e, err := executor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// randF32 returns n deterministic values in [-1, 1).
func randF32(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = 2*r.Float32() - 1
	}
	return x
}

// inputBytes returns valid input data for input i of s.
func inputBytes(t testing.TB, r *rand.Rand, s kernels.Spec, i int) []byte {
	t.Helper()
	sh := s.In[i]
	switch dt := s.InDType(i); dt {
	case kernels.F32:
		return append([]byte(nil), kernels.AsBytes(randF32(r, int(sh.Elements())))...)
	case kernels.F16:
		b := make([]byte, 2*sh.Elements())
		for j := range sh.Elements() {
			h := kernels.F16FromFloat32(2*r.Float32() - 1)
			b[2*j], b[2*j+1] = byte(h), byte(h>>8)
		}
		return b
	default:
		q, err := kernels.Quantize(dt, randF32(r, int(sh.Elements())))
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
}

// catalogue is one spec per executable op (and dtype variant).
func catalogue() []kernels.Spec {
	sh := func(d ...int) kernels.Shape { return kernels.Shape(d) }
	return []kernels.Spec{
		{Op: kernels.MatMul, In: []kernels.Shape{sh(8, 32), sh(32, 16)}},
		{Op: kernels.MatMul, In: []kernels.Shape{sh(2, 4, 8), sh(2, 8, 3)}},
		{Op: kernels.QuantizedMatMul, DType: kernels.Q8_0, In: []kernels.Shape{sh(4, 64), sh(16, 64)}},
		{Op: kernels.QuantizedMatMul, DType: kernels.Q4_0, In: []kernels.Shape{sh(3, 64), sh(8, 64)}},
		{Op: kernels.Softmax, In: []kernels.Shape{sh(4, 33)}},
		{Op: kernels.Attention, In: []kernels.Shape{sh(2, 4, 3, 16), sh(2, 2, 5, 16), sh(2, 2, 5, 16)}, Params: kernels.Params{Causal: true}},
		{Op: kernels.Add, In: []kernels.Shape{sh(4, 16), sh(16)}},
		{Op: kernels.Mul, In: []kernels.Shape{sh(4, 16), sh(4, 16)}},
		{Op: kernels.Scale, In: []kernels.Shape{sh(4, 16)}, Params: kernels.Params{Scale: 0.5}},
		{Op: kernels.RMSNorm, In: []kernels.Shape{sh(4, 16), sh(16)}},
		{Op: kernels.LayerNorm, In: []kernels.Shape{sh(4, 16), sh(16), sh(16)}},
		{Op: kernels.RoPE, In: []kernels.Shape{sh(2, 3, 4, 16)}, Params: kernels.Params{Pos: 5}},
		{Op: kernels.SiLU, In: []kernels.Shape{sh(4, 16)}},
		{Op: kernels.SwiGLU, In: []kernels.Shape{sh(4, 16), sh(4, 16)}},
		{Op: kernels.GELU, In: []kernels.Shape{sh(4, 16)}},
		{Op: kernels.Dequantize, DType: kernels.Q8_0, In: []kernels.Shape{sh(4, 64)}},
		{Op: kernels.Dequantize, DType: kernels.F16, In: []kernels.Shape{sh(4, 16)}},
		{Op: kernels.Copy, In: []kernels.Shape{sh(4, 16)}},
		{Op: kernels.Copy, DType: kernels.Q8_0, In: []kernels.Shape{sh(2, 64)}},
		{Op: kernels.Transpose, In: []kernels.Shape{sh(3, 4, 5)}},
	}
}

// near reports the first element where got and want (f32 bytes, or raw
// bytes for other dtypes) differ by more than tol (absolute + relative).
func near(dt kernels.DType, got, want []byte, tol float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d bytes, want %d", len(got), len(want))
	}
	if dt != kernels.F32 {
		if !bytes.Equal(got, want) {
			return errors.New("bytes differ")
		}
		return nil
	}
	g, w := kernels.AsF32(got), kernels.AsF32(want)
	for i := range g {
		if d := math.Abs(float64(g[i] - w[i])); !(d <= tol*(1+math.Abs(float64(w[i])))) {
			return fmt.Errorf("element %d: %v, want %v", i, g[i], w[i])
		}
	}
	return nil
}

// runOn writes inputs into fresh buffers of b, runs s and reads the output.
func runOn(t testing.TB, b backends.Backend, s kernels.Spec, ins [][]byte) []byte {
	t.Helper()
	bufs := make([]backends.Buffer, len(ins))
	for i, x := range ins {
		buf, err := b.Alloc(int64(len(x)))
		if err != nil {
			t.Fatal(err)
		}
		defer buf.Free()
		if _, err := b.Write(buf, x); err != nil {
			t.Fatal(err)
		}
		bufs[i] = buf
	}
	out, err := b.Alloc(s.OutBytes())
	if err != nil {
		t.Fatal(err)
	}
	defer out.Free()
	if _, err := b.Run(s, bufs, out); err != nil {
		t.Fatalf("%v on %s: %v", s, b.Info().Name, err)
	}
	got := make([]byte, s.OutBytes())
	if _, err := b.Read(got, out); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestExecutorMatchesSingleBackend checks every op of the catalogue on the
// Executor against the plain "cpu" backend and the reference kernels, op
// by op, with each strategy so that every backend
// runs every op.
func TestExecutorMatchesSingleBackend(t *testing.T) {
	cpu := open(t, "cpu")
	strategies := []adaptive.Strategy{adaptive.Automatic, adaptive.Only("cpu"), adaptive.Only("cpu1"), adaptive.Only("sim:h100")}
	for _, st := range strategies {
		e := newExec(t, executor.Config{Strategy: st},
			open(t, "cpu"), open(t, "cpu1"), open(t, "sim:h100"))
		r := rand.New(rand.NewPCG(7, 7))
		for _, s := range catalogue() {
			ins := make([][]byte, len(s.In))
			for i := range ins {
				ins[i] = inputBytes(t, r, s, i)
			}
			want := make([]byte, s.OutBytes())
			if err := kernels.Reference(s, ins, want); err != nil {
				t.Fatal(err)
			}
			single := runOn(t, cpu, s, ins)
			for rep := range 3 {
				got := runOn(t, e, s, ins)
				if err := near(s.OutDType(), got, single, 1e-4); err != nil {
					t.Errorf("%v %v rep %d: executor vs cpu: %v", st, s, rep, err)
				}
				if err := near(s.OutDType(), got, want, 1e-3); err != nil {
					t.Errorf("%v %v rep %d: executor vs reference: %v", st, s, rep, err)
				}
			}
		}
		st := e.Stats()
		var total int64
		for _, b := range st.Backends {
			total += b.Ops
		}
		if want := int64(3 * len(catalogue())); total != want {
			t.Errorf("%v: %d ops counted, want %d", st, total, want)
		}
	}
}

// countingBackend counts a backend's copies.
type countingBackend struct {
	backends.Backend
	writes, reads, runs atomic.Int64
}

func (c *countingBackend) Write(dst backends.Buffer, src []byte) (backends.Timing, error) {
	c.writes.Add(1)
	return c.Backend.Write(dst, src)
}

func (c *countingBackend) Read(dst []byte, src backends.Buffer) (backends.Timing, error) {
	c.reads.Add(1)
	return c.Backend.Read(dst, src)
}

func (c *countingBackend) Run(s kernels.Spec, in []backends.Buffer, out backends.Buffer) (backends.Timing, error) {
	c.runs.Add(1)
	return c.Backend.Run(s, in, out)
}

// chain is a test chain of ops, each out = op(prev, weight).
type chain struct {
	x     []byte   // the chain's input
	ws    [][]byte // one weight per op
	want  [][]byte // each op's output, by the reference kernels
	ops   []kernels.Op
	shape kernels.Shape
}

// newChain builds n alternating Add/Mul/RMSNorm ops on [rows, cols]
// activations, with the reference result of each.
func newChain(t testing.TB, r *rand.Rand, n, rows, cols int) *chain {
	c := &chain{shape: kernels.Shape{rows, cols}}
	c.x = kernels.AsBytes(randF32(r, rows*cols))
	prev := c.x
	for i := range n {
		op := [...]kernels.Op{kernels.Add, kernels.Mul, kernels.RMSNorm}[i%3]
		w := kernels.AsBytes(randF32(r, cols))
		s := c.specOf(op)
		out := make([]byte, s.OutBytes())
		if err := kernels.Reference(s, [][]byte{prev, w}, out); err != nil {
			t.Fatal(err)
		}
		c.ops, c.ws, c.want = append(c.ops, op), append(c.ws, w), append(c.want, out)
		prev = out
	}
	return c
}

func (c *chain) specOf(op kernels.Op) kernels.Spec {
	return kernels.Spec{Op: op, In: []kernels.Shape{c.shape, {c.shape[1]}}}
}

// run runs the chain on b, keeping every intermediate tensor, and returns
// them (the caller frees them).
func (c *chain) run(t testing.TB, b backends.Backend) (x backends.Buffer, ws, outs []backends.Buffer) {
	t.Helper()
	alloc := func(data []byte) backends.Buffer {
		buf, err := b.Alloc(int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Write(buf, data); err != nil {
			t.Fatal(err)
		}
		return buf
	}
	x = alloc(c.x)
	prev := x
	for i, op := range c.ops {
		w := alloc(c.ws[i])
		out, err := b.Alloc(int64(len(c.want[i])))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Run(c.specOf(op), []backends.Buffer{prev, w}, out); err != nil {
			t.Fatalf("op %d (%v): %v", i, op, err)
		}
		ws, outs = append(ws, w), append(outs, out)
		prev = out
	}
	settle(t, b)
	return x, ws, outs
}

// settle waits for b's queued work when b is an Executor, so that its
// counters are complete.
func settle(t testing.TB, b backends.Backend) {
	t.Helper()
	if e, ok := b.(*executor.Executor); ok {
		if err := e.Sync(context.Background()); err != nil {
			t.Fatalf("sync: %v", err)
		}
	}
}

// check reads every op's output from b and compares it with the reference.
func (c *chain) check(t testing.TB, b backends.Backend, outs []backends.Buffer) {
	t.Helper()
	for i, o := range outs {
		got := make([]byte, o.Size())
		if _, err := b.Read(got, o); err != nil {
			t.Fatalf("read op %d: %v", i, err)
		}
		if err := near(kernels.F32, got, c.want[i], 1e-4); err != nil {
			t.Errorf("op %d (%v): %v", i, c.ops[i], err)
		}
	}
}

// TestExecutorResidency checks that a chain of ops on one GPU moves each
// input there once and reads back only what the caller reads (DESIGN.md
// § The data path).
func TestExecutorResidency(t *testing.T) {
	const n = 12
	gpu := &countingBackend{Backend: open(t, "sim:h100")}
	cpu := &countingBackend{Backend: open(t, "cpu")}
	e := newExec(t, executor.Config{Strategy: adaptive.Only("sim:h100")}, cpu, gpu)
	c := newChain(t, rand.New(rand.NewPCG(1, 2)), n, 4, 64)
	_, ws, outs := c.run(t, e)
	if got := gpu.writes.Load(); got != n+1 {
		t.Errorf("%d copies to the GPU for %d host tensors", got, n+1)
	}
	if got := gpu.reads.Load() + cpu.writes.Load() + cpu.reads.Load(); got != 0 {
		t.Errorf("%d other copies before any read", got)
	}
	// A second pass over the same weights moves only the new input.
	prev := outs[len(outs)-1]
	for i, op := range c.ops {
		out, _ := e.Alloc(prev.Size())
		if _, err := e.Run(c.specOf(op), []backends.Buffer{prev, ws[i]}, out); err != nil {
			t.Fatal(err)
		}
		prev = out
	}
	settle(t, e)
	if got := gpu.writes.Load(); got != n+1 {
		t.Errorf("weights moved again: %d copies to the GPU", got)
	}
	c.check(t, e, outs)
	if got := gpu.reads.Load(); got != n {
		t.Errorf("%d reads from the GPU for %d outputs read", got, n)
	}
	// Read again: served from the cached host copy.
	c.check(t, e, outs)
	if got := gpu.reads.Load(); got != n {
		t.Errorf("%d reads from the GPU after reading twice", got)
	}
	if v := outs[0].(*executor.Tensor).Valid(); v != adaptive.Host|adaptive.Backend(1) {
		t.Errorf("output valid on %b, want host and GPU", v)
	}
	// Writing a tensor invalidates its device copy: the next op moves it.
	if _, err := e.Write(ws[0], c.ws[0]); err != nil {
		t.Fatal(err)
	}
	if v := ws[0].(*executor.Tensor).Valid(); v != adaptive.Host {
		t.Errorf("written tensor valid on %b, want host only", v)
	}
	out, _ := e.Alloc(outs[0].Size())
	x, _ := e.Alloc(int64(len(c.x)))
	e.Write(x, c.x)
	if _, err := e.Run(c.specOf(c.ops[0]), []backends.Buffer{x, ws[0]}, out); err != nil {
		t.Fatal(err)
	}
	settle(t, e)
	if got := gpu.writes.Load(); got != n+3 {
		t.Errorf("%d copies to the GPU, want %d (x and the rewritten weight)", got, n+3)
	}
	st := e.Stats()
	if st.Backends[1].CopiesIn != n+3 || st.Backends[1].BytesIn <= 0 {
		t.Errorf("stats: %+v", st.Backends[1])
	}
	tel := e.Scheduler().Telemetry()
	if len(tel.Links) == 0 || tel.Links[0].Copies == 0 {
		t.Errorf("transfers did not reach the link model: %+v", tel.Links)
	}
}

// fakeClock is an injectable clock that tests advance.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestExecutorFaults runs a chain twice, synchronously, on a simulated GPU
// that fails (TestQueuedFailureFallsBack has the queued counterpart):
// transient errors in the first pass, out of memory and then the device
// lost in the second (fallback and memory pressure). Every op must
// complete with the right result; ops lost with the device are recomputed
// from their lineage. The second pass reuses the first pass's tensors, so
// that the out-of-memory event hits a Run rather than an Alloc (the
// simulator counts its events in Run calls, and a failed Alloc does not
// advance them). Each pass makes one GPU Run per op (about 40), so run 50
// and run 65 fall in the second pass.
func TestExecutorFaults(t *testing.T) {
	dev, err := sim.Open("h100", sim.DefaultOptions().WithEvents(
		sim.Event{At: 3, Kind: sim.TransientError, Span: 2},
		sim.Event{At: 50, Kind: sim.OutOfMemory, Span: 1},
		sim.Event{At: 65, Kind: sim.DeviceLost},
	))
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	var recorded bytes.Buffer
	rec, err := trace.NewRecorder(&recorded, trace.Header{}, trace.RecorderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e := newExec(t, executor.Config{Strategy: adaptive.GPUPreferred, Now: clock.now,
		Recorder: rec, BackoffBase: 10 * time.Millisecond, Synchronous: true}, open(t, "cpu"), dev)
	const n = 40
	c := newChain(t, rand.New(rand.NewPCG(3, 4)), n, 8, 64)
	x, _ := e.Alloc(int64(len(c.x)))
	ws := make([]backends.Buffer, n)
	outs := make([]backends.Buffer, n)
	for i := range n {
		ws[i], _ = e.Alloc(int64(len(c.ws[i])))
		e.Write(ws[i], c.ws[i])
		outs[i], _ = e.Alloc(int64(len(c.want[i])))
	}
	// Run the chain one op at a time, advancing the clock so that the
	// failed GPU is probed again after its back-off.
	for pass := range 2 {
		e.Write(x, c.x)
		prev := x
		for i, op := range c.ops {
			if _, err := e.Run(c.specOf(op), []backends.Buffer{prev, ws[i]}, outs[i]); err != nil {
				t.Fatalf("pass %d op %d: %v", pass, i, err)
			}
			prev = outs[i]
			clock.advance(15 * time.Millisecond)
		}
	}
	c.check(t, e, outs)
	st := e.Stats()
	cpuSt, gpuSt := st.Backends[0], st.Backends[1]
	if gpuSt.Failures < 3 {
		t.Errorf("GPU failures %d, want at least 3 (2 transient, lost)", gpuSt.Failures)
	}
	if gpuSt.Ops < 50 {
		t.Errorf("GPU ran %d ops: it was not probed back after its failures", gpuSt.Ops)
	}
	if cpuSt.Ops+gpuSt.Ops != 2*n+st.Recoveries {
		t.Errorf("%d + %d ops for %d ops and %d recoveries", cpuSt.Ops, gpuSt.Ops, 2*n, st.Recoveries)
	}
	if st.MemoryRetries == 0 || st.Evictions == 0 {
		t.Errorf("out of memory not handled: %+v", st)
	}
	if st.Recoveries == 0 || st.Invalidated == 0 {
		t.Errorf("device loss not handled: %+v", st)
	}
	if gpuSt.Healthy || !strings.Contains(gpuSt.LastError, "device lost") {
		t.Errorf("lost GPU reported healthy: %+v", gpuSt)
	}
	tel := e.Scheduler().Telemetry()
	if tel.Reasons[adaptive.Fallback] == 0 || tel.Reasons[adaptive.MemoryConstraint] == 0 {
		t.Errorf("reasons %v: want Fallback and MemoryConstraint", tel.Reasons)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(recorded.String()), "\n")
	if got := int64(len(lines) - 1); got != 2*n+st.Recoveries {
		t.Errorf("%d trace events, want %d", got, 2*n+st.Recoveries)
	}
	if !strings.Contains(recorded.String(), `"reason":"MemoryConstraint"`) || !strings.Contains(recorded.String(), `"backend":"sim:h100"`) {
		t.Errorf("trace lacks the memory fallback or the GPU:\n%s", recorded.String()[:min(len(recorded.String()), 2000)])
	}
}

// TestExecutorAllFail checks the error when every backend fails: it wraps
// ErrAllFailed and names each backend's failure.
func TestExecutorAllFail(t *testing.T) {
	lost := sim.DefaultOptions().WithEvents(sim.Event{At: 0, Kind: sim.DeviceLost})
	a, _ := sim.Open("h100", lost)
	b, _ := sim.Open("mi300x", lost)
	e := newExec(t, executor.Config{}, a, b)
	c := newChain(t, rand.New(rand.NewPCG(5, 6)), 1, 2, 32)
	x, _ := e.Alloc(int64(len(c.x)))
	e.Write(x, c.x)
	w, _ := e.Alloc(int64(len(c.ws[0])))
	e.Write(w, c.ws[0])
	out, _ := e.Alloc(int64(len(c.want[0])))
	_, err := e.Run(c.specOf(c.ops[0]), []backends.Buffer{x, w}, out)
	if !errors.Is(err, executor.ErrAllFailed) || !errors.Is(err, backends.ErrDeviceLost) {
		t.Fatalf("error %v: want ErrAllFailed wrapping ErrDeviceLost", err)
	}
	var de *backends.DeviceError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "sim:h100") || !strings.Contains(err.Error(), "sim:mi300x") {
		t.Errorf("error %q does not name each backend's failure", err)
	}
}

// TestExecutorLostTensor checks the documented limit of recovery: a
// tensor whose input changed after it was computed cannot be recomputed
// (Run says so, or Sync when the op was queued).
func TestExecutorLostTensor(t *testing.T) {
	dev, _ := sim.Open("h100", sim.DefaultOptions().WithEvents(sim.Event{At: 1, Kind: sim.DeviceLost}))
	e := newExec(t, executor.Config{Strategy: adaptive.GPUPreferred}, open(t, "cpu"), dev)
	c := newChain(t, rand.New(rand.NewPCG(8, 9)), 2, 2, 32)
	x, ws, outs := c.run(t, e)
	// outs[0] ran on the GPU; outs[1] fell back to the CPU after
	// recomputing outs[0] there, so both are intact.
	c.check(t, e, outs)
	// Now compute on the lost device's replacement and break the lineage.
	e2 := newExec(t, executor.Config{Strategy: adaptive.GPUPreferred},
		open(t, "cpu"), mustSim(t, sim.Event{At: 1, Kind: sim.DeviceLost}))
	x2, _ := e2.Alloc(int64(len(c.x)))
	e2.Write(x2, c.x)
	w2, _ := e2.Alloc(int64(len(c.ws[0])))
	e2.Write(w2, c.ws[0])
	o2, _ := e2.Alloc(int64(len(c.want[0])))
	if _, err := e2.Run(c.specOf(c.ops[0]), []backends.Buffer{x2, w2}, o2); err != nil {
		t.Fatal(err)
	}
	e2.Write(x2, make([]byte, len(c.x))) // the input changes
	// The next op on the GPU fails (lost) and drops o2's only copy.
	o3, _ := e2.Alloc(int64(len(c.want[0])))
	_, err := e2.Run(c.specOf(c.ops[0]), []backends.Buffer{o2, w2}, o3)
	if err == nil { // queued: the loss is met when the work runs
		err = e2.Sync(context.Background())
	}
	if !errors.Is(err, executor.ErrTensorLost) {
		t.Fatalf("error %v, want ErrTensorLost", err)
	}
	_, _ = x, ws
}

// TestExecutorRecoversChain loses a device that holds the only copies of
// a whole chain of outputs: reading the last one recomputes every op of
// the chain, each input before the op that reads it, through the one
// recovery hook, and every output matches the reference.
func TestExecutorRecoversChain(t *testing.T) {
	const n = 6
	e := newExec(t, executor.Config{Strategy: adaptive.GPUPreferred},
		open(t, "cpu"), mustSim(t, sim.Event{At: n, Kind: sim.DeviceLost}))
	c := newChain(t, rand.New(rand.NewPCG(10, 11)), n, 4, 32)
	_, _, outs := c.run(t, e)
	for i, o := range outs {
		if v := o.(*executor.Tensor).Valid(); v != adaptive.Backend(1) {
			t.Fatalf("output %d valid on %b, want the GPU only", i, v)
		}
	}
	got := make([]byte, outs[n-1].Size())
	if _, err := e.Read(got, outs[n-1]); err != nil { // the GPU is lost: recompute the chain
		t.Fatal(err)
	}
	if st := e.Stats(); st.Recoveries != n || st.Backends[0].Ops != n {
		t.Errorf("%d recoveries, %d CPU ops; want %d of each", st.Recoveries, st.Backends[0].Ops, n)
	}
	c.check(t, e, outs)
}

// TestHostVersionNeedsNoLineage checks the rule of setLineage (DESIGN.md
// § The data path): a version written in host memory, by the CPU between two
// GPU ops, records no lineage and needs none: after the GPU is lost,
// reading the last output recomputes its op alone, which reads the CPU's
// output from host memory; every output matches the reference, queued
// or not.
func TestHostVersionNeedsNoLineage(t *testing.T) {
	for _, sync := range []bool{true, false} {
		e := newExec(t, executor.Config{Placer: mulOn(0), Synchronous: sync},
			open(t, "cpu"), mustSim(t, sim.Event{At: 2, Kind: sim.DeviceLost}))
		c := newChain(t, rand.New(rand.NewPCG(14, 15)), 3, 4, 32) // Add (GPU), Mul (CPU), RMSNorm (GPU)
		_, _, outs := c.run(t, e)
		// The first output was copied to host memory for the CPU's op.
		for i, want := range []adaptive.Mask{adaptive.Host | adaptive.Backend(1), adaptive.Host, adaptive.Backend(1)} {
			if v := outs[i].(*executor.Tensor).Valid(); v&want != want || (i == 2 && v != want) {
				t.Fatalf("sync %v: output %d valid on %b, want %b", sync, i, v, want)
			}
		}
		got := make([]byte, outs[2].Size())
		if _, err := e.Read(got, outs[2]); err != nil {
			t.Fatalf("sync %v: %v", sync, err)
		}
		c.check(t, e, outs)
		if n := e.Stats().Recoveries; n != 1 {
			t.Errorf("sync %v: %d recomputations, want 1 (the last op)", sync, n)
		}
	}
}

// TestExecutorResidentBytes checks the residency registry through Stats:
// every buffer placed on the GPU is counted once, and freeing the tensors
// forgets them all.
func TestExecutorResidentBytes(t *testing.T) {
	e := newExec(t, executor.Config{Strategy: adaptive.GPUPreferred}, open(t, "cpu"), mustSim(t))
	c := newChain(t, rand.New(rand.NewPCG(12, 13)), 4, 4, 32)
	x, ws, outs := c.run(t, e)
	all := append(append([]backends.Buffer{x}, ws...), outs...)
	var bytes int64
	for _, b := range all {
		bytes += b.Size()
	}
	if got := e.Stats().Backends[1].ResidentMB; got != float64(bytes)/1e6 {
		t.Errorf("GPU holds %v MB, want %v", got, float64(bytes)/1e6)
	}
	for _, b := range all {
		b.Free()
	}
	if st := e.Stats(); st.Backends[0].ResidentMB != 0 || st.Backends[1].ResidentMB != 0 {
		t.Errorf("after Free: %+v", st.Backends)
	}
}

func mustSim(t *testing.T, ev ...sim.Event) *sim.Device {
	d, err := sim.Open("h100", sim.DefaultOptions().WithEvents(ev...))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestExecutorBadInput checks that malformed calls return errors naming
// the problem, never panic.
func TestExecutorBadInput(t *testing.T) {
	cpu := open(t, "cpu")
	e := newExec(t, executor.Config{}, open(t, "cpu1"))
	s := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{4, 16}, {16}}}
	a, _ := e.Alloc(s.InBytes(0))
	b, _ := e.Alloc(s.InBytes(1))
	out, _ := e.Alloc(s.OutBytes())
	small, _ := e.Alloc(8)
	foreign, _ := cpu.Alloc(s.InBytes(1))
	cases := []struct {
		name string
		spec kernels.Spec
		in   []backends.Buffer
		out  backends.Buffer
		want error
	}{
		{"input count", s, []backends.Buffer{a}, out, kernels.ErrBufferSize},
		{"input size", s, []backends.Buffer{a, small}, out, kernels.ErrBufferSize},
		{"output size", s, []backends.Buffer{a, b}, small, kernels.ErrBufferSize},
		{"foreign", s, []backends.Buffer{a, foreign}, out, backends.ErrForeignBuffer},
		{"invalid spec", kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{4, 16}, {3}}}, []backends.Buffer{a, b}, out, kernels.ErrInvalidSpec},
		{"opaque", kernels.Spec{Op: kernels.Opaque, In: []kernels.Shape{{4, 16}}}, []backends.Buffer{a}, a, adaptive.ErrNoBackend},
	}
	for _, c := range cases {
		if _, err := e.Run(c.spec, c.in, c.out); !errors.Is(err, c.want) {
			t.Errorf("%s: error %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := e.Write(a, make([]byte, 3)); !errors.Is(err, kernels.ErrBufferSize) {
		t.Errorf("short write: %v", err)
	}
	if _, err := e.Read(make([]byte, 3), a); !errors.Is(err, kernels.ErrBufferSize) {
		t.Errorf("short read: %v", err)
	}
	if _, err := e.Alloc(-1); err == nil {
		t.Error("negative Alloc succeeded")
	}
	a.Free()
	a.Free()
	if _, err := e.Run(s, []backends.Buffer{a, b}, out); !errors.Is(err, executor.ErrBadTensor) {
		t.Errorf("freed input: %v", err)
	}
	if _, err := executor.New(executor.Config{}); !errors.Is(err, adaptive.ErrConfig) {
		t.Errorf("no backends: %v", err)
	}
	if err := e.Supports(kernels.Spec{Op: kernels.Opaque, In: []kernels.Shape{{4}}}); !errors.Is(err, backends.ErrUnsupported) {
		t.Errorf("Supports(opaque): %v", err)
	}
}

// TestExecutorConcurrent runs independent chains from many goroutines
// over shared weights (run it with -race).
func TestExecutorConcurrent(t *testing.T) {
	e := newExec(t, executor.Config{}, open(t, "cpu"), open(t, "cpu1"), open(t, "sim:h100"))
	c := newChain(t, rand.New(rand.NewPCG(10, 11)), 24, 4, 64)
	ws := make([]backends.Buffer, len(c.ws))
	for i, w := range c.ws {
		ws[i], _ = e.Alloc(int64(len(w)))
		e.Write(ws[i], w)
	}
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for g := range workers {
		wg.Go(func() {
			for rep := range 3 {
				x, _ := e.Alloc(int64(len(c.x)))
				e.Write(x, c.x)
				prev := x
				for i, op := range c.ops {
					out, _ := e.Alloc(int64(len(c.want[i])))
					if _, err := e.Run(c.specOf(op), []backends.Buffer{prev, ws[i]}, out); err != nil {
						errs <- fmt.Errorf("worker %d rep %d op %d: %w", g, rep, i, err)
						return
					}
					prev = out
				}
				got := make([]byte, prev.Size())
				if _, err := e.Read(got, prev); err != nil {
					errs <- err
					return
				}
				if err := near(kernels.F32, got, c.want[len(c.want)-1], 1e-4); err != nil {
					errs <- fmt.Errorf("worker %d rep %d: %w", g, rep, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	settle(t, e) // Read waits for the chain's work, not for its observation
	var total int64
	for _, b := range e.Stats().Backends {
		total += b.Ops
	}
	if want := int64(workers * 3 * len(c.ops)); total != want {
		t.Errorf("%d ops counted, want %d", total, want)
	}
}

// TestExecutorRegistry opens an Executor through backends.Open.
func TestExecutorRegistry(t *testing.T) {
	b, err := backends.Open("adaptive:cpu,cpu1")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Info().Name != "adaptive" || !strings.Contains(b.Info().Model, "cpu1") {
		t.Errorf("info %+v", b.Info())
	}
	s := catalogue()[0]
	r := rand.New(rand.NewPCG(1, 1))
	ins := [][]byte{inputBytes(t, r, s, 0), inputBytes(t, r, s, 1)}
	want := make([]byte, s.OutBytes())
	kernels.Reference(s, ins, want)
	if err := near(kernels.F32, runOn(t, b, s, ins), want, 1e-3); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"adaptive", "adaptive:nope", "adaptive:cpu,cpu"} {
		if b, err := backends.Open(bad); err == nil {
			b.Close()
			t.Errorf("Open(%q) succeeded", bad)
		}
	}
}

// mappingBackend is a countingBackend that maps host memory through the
// backend it wraps; with okMaps > 0, only its first okMaps maps succeed.
type mappingBackend struct {
	*countingBackend
	maps   atomic.Int64
	okMaps int64
}

func (m *mappingBackend) MapHost(b []byte) (backends.Buffer, error) {
	if n := m.maps.Add(1); m.okMaps > 0 && n > m.okMaps {
		return nil, fmt.Errorf("%w: mapping refused", backends.ErrUnsupported)
	}
	return m.Backend.(backends.HostMapper).MapHost(b)
}

// TestExecutorHostMapping: a CPU backend that maps host memory
// (backends.HostMapper) works on the Executor's host copies in place: a
// chain of ops on it copies nothing in or out, its outputs are valid in
// host memory at once, and data read back from a GPU is valid on it
// without a copy. A CPU whose first mapping fails is copied into instead;
// one whose mapping fails later is fallen back from.
func TestExecutorHostMapping(t *testing.T) {
	const n = 9
	cpu := &mappingBackend{countingBackend: &countingBackend{Backend: open(t, "cpu")}}
	gpu := &countingBackend{Backend: open(t, "sim:h100")}
	c := newChain(t, rand.New(rand.NewPCG(3, 4)), n, 4, 64)

	e := newExec(t, executor.Config{Strategy: adaptive.Only("cpu")}, cpu, gpu)
	_, _, outs := c.run(t, e)
	if w, r := cpu.writes.Load(), cpu.reads.Load(); w != 0 || r != 0 {
		t.Errorf("%d copies into and %d out of the mapping CPU", w, r)
	}
	if got := cpu.runs.Load(); got != n {
		t.Errorf("%d runs on the CPU, want %d", got, n)
	}
	for i, o := range outs {
		if v := o.(*executor.Tensor).Valid(); v != adaptive.Host|adaptive.Backend(0) {
			t.Fatalf("output %d valid on %b, want host and the CPU", i, v)
		}
	}
	c.check(t, e, outs)
	if st := e.Stats(); st.Backends[0].CopiesIn != 0 || st.Backends[0].ResidentMB != 0 {
		t.Errorf("stats of the mapping CPU: %+v", st.Backends[0])
	}

	// On the GPU, outputs live there; reading one back makes it valid on
	// the mapping CPU too, with no copy into it.
	g := newExec(t, executor.Config{Strategy: adaptive.Only("sim:h100")}, cpu, gpu)
	_, _, gouts := c.run(t, g)
	if v := gouts[0].(*executor.Tensor).Valid(); v != adaptive.Backend(1) {
		t.Errorf("GPU output valid on %b, want the GPU only", v)
	}
	c.check(t, g, gouts)
	if v := gouts[0].(*executor.Tensor).Valid(); v != adaptive.Host|adaptive.Backend(0)|adaptive.Backend(1) {
		t.Errorf("GPU output read back: valid on %b, want host, CPU and GPU", v)
	}
	if w := cpu.writes.Load(); w != 0 {
		t.Errorf("%d copies into the mapping CPU", w)
	}

	// A CPU that refuses every mapping (the Executor probes once) is
	// copied into like any backend.
	refuses := &refusing{&mappingBackend{countingBackend: &countingBackend{Backend: open(t, "cpu")}}}
	r := newExec(t, executor.Config{Strategy: adaptive.Only("cpu")}, refuses, gpu)
	_, _, routs := c.run(t, r)
	c.check(t, r, routs)
	if st := r.Stats(); st.Backends[0].Ops != n || st.Backends[0].CopiesIn == 0 {
		t.Errorf("refusing mapper: %+v", st.Backends[0])
	}

	// A CPU whose mapping fails after the probe: every op falls back to
	// the GPU and succeeds.
	bad := &mappingBackend{countingBackend: &countingBackend{Backend: open(t, "cpu")}, okMaps: 1}
	f := newExec(t, executor.Config{Strategy: adaptive.CPUPreferred}, bad, gpu)
	_, _, fouts := c.run(t, f)
	c.check(t, f, fouts)
	if bad.maps.Load() < 2 || bad.runs.Load() != 0 {
		t.Errorf("failing mapper: %d maps, %d runs", bad.maps.Load(), bad.runs.Load())
	}
	if st := f.Stats(); st.Fallbacks == 0 || st.Backends[0].Failures == 0 || st.Backends[1].Ops != n {
		t.Errorf("no fallback counted: %+v", st)
	}
}

// refusing is a CPU whose MapHost always fails.
type refusing struct{ *mappingBackend }

func (r *refusing) MapHost([]byte) (backends.Buffer, error) {
	r.maps.Add(1)
	return nil, fmt.Errorf("%w: no mapping here", backends.ErrUnsupported)
}

// consumerSpy is a placement that runs everything on one backend and
// records the Consumers of each op's Residency.
type consumerSpy struct {
	arm  int
	seen []adaptive.Mask
}

func (c *consumerSpy) Name() string                             { return "spy" }
func (c *consumerSpy) Observed(adaptive.BucketID, int, float64) {}
func (c *consumerSpy) Place(_ kernels.Spec, res adaptive.Residency, _ adaptive.BucketID) int {
	c.seen = append(c.seen, res.Consumers)
	return c.arm
}

// TestExecutorConsumers: the Residency of an op that overwrites a tensor
// says where the tensor's previous value was read: by the backends whose
// ops read it, and by the program (Host).
func TestExecutorConsumers(t *testing.T) {
	spy := &consumerSpy{arm: 1}
	e := newExec(t, executor.Config{Placer: spy},
		open(t, "cpu"), open(t, "sim:h100"))
	c := newChain(t, rand.New(rand.NewPCG(5, 6)), 2, 4, 64)
	x, ws, outs := c.run(t, e) // op 0 writes outs[0], op 1 reads it on the GPU
	spec := c.specOf(c.ops[0])
	if _, err := e.Run(spec, []backends.Buffer{x, ws[0]}, outs[0]); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, outs[0].Size())
	if _, err := e.Read(got, outs[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Run(spec, []backends.Buffer{x, ws[0]}, outs[0]); err != nil {
		t.Fatal(err)
	}
	want := []adaptive.Mask{0, 0, adaptive.Backend(1), adaptive.Host}
	if len(spy.seen) != len(want) {
		t.Fatalf("%d decisions, want %d", len(spy.seen), len(want))
	}
	for i, w := range want {
		if spy.seen[i] != w {
			t.Errorf("decision %d: consumers %b, want %b", i, spy.seen[i], w)
		}
	}
}

// residencySpy places every op on arm and keeps the residency of each
// op's inputs.
type residencySpy struct {
	arm  int
	seen []adaptive.Residency
}

func (c *residencySpy) Name() string                             { return "residency spy" }
func (c *residencySpy) Observed(adaptive.BucketID, int, float64) {}
func (c *residencySpy) Place(_ kernels.Spec, res adaptive.Residency, _ adaptive.BucketID) int {
	c.seen = append(c.seen, res)
	return c.arm
}

// TestExecutorUnwrittenInput: a tensor never written has undefined
// contents, as any backend's fresh buffer has, so an op that updates it
// in place (KVAppend filling a KV cache) runs where it is placed with no
// copy of it made, and the Scheduler is told it is valid everywhere;
// from then on it is a tensor like any other, and the rows appended are
// read back. Queued and synchronous alike.
func TestExecutorUnwrittenInput(t *testing.T) {
	for _, sync := range []bool{false, true} {
		spy := &residencySpy{arm: 1}
		e := newExec(t, executor.Config{Placer: spy, Synchronous: sync}, open(t, "cpu"), open(t, "sim:h100"))
		spec := func(pos int) kernels.Spec {
			return kernels.Spec{Op: kernels.KVAppend, In: []kernels.Shape{{1, 2, 8, 4}, {1, 1, 2, 4}}, Params: kernels.Params{Pos: pos}}
		}
		cache, _ := e.Alloc(spec(0).InBytes(0))
		rows, _ := e.Alloc(spec(0).InBytes(1))
		var want []float32
		for pos := range 2 {
			r := []float32{1, 2, 3, 4, 5, 6, 7, 8}
			for i := range r {
				r[i] += float32(10 * pos)
			}
			want = append(want, r...)
			if _, err := e.Write(rows, kernels.AsBytes(r)); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Run(spec(pos), []backends.Buffer{cache, rows}, cache); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got, want := spy.seen[0].Inputs[0].On, adaptive.Host|adaptive.Backend(0)|adaptive.Backend(1); got != want {
			t.Errorf("sync %v: the unwritten cache's residency %v, want %v (everywhere)", sync, got, want)
		}
		if got := spy.seen[1].Inputs[0].On; got != adaptive.Backend(1) {
			t.Errorf("sync %v: the cache's residency after an op on the GPU %v, want the GPU alone", sync, got)
		}
		if gpu := e.Stats().Backends[1]; gpu.CopiesIn != 2 || gpu.BytesIn != 2*spec(0).InBytes(1) {
			t.Errorf("sync %v: %d copies, %d bytes into the GPU; want the rows' two alone (%d bytes)", sync, gpu.CopiesIn, gpu.BytesIn, 2*spec(0).InBytes(1))
		}
		got := make([]float32, 64)
		if _, err := e.Read(kernels.AsBytes(got), cache); err != nil {
			t.Fatal(err)
		}
		// Head h of position p holds rows[p][h]: [pos0 h0, pos1 h0 | pos0 h1, pos1 h1].
		for h := range 2 {
			for p := range 2 {
				for d := range 4 {
					if g, w := got[(h*8+p)*4+d], want[(p*2+h)*4+d]; g != w {
						t.Fatalf("sync %v: cache head %d position %d [%d] = %v, want %v", sync, h, p, d, g, w)
					}
				}
			}
		}
	}
}

// TestPlacerLearned: a Placer that returns executor.Learned leaves the ops
// to the Strategy: its decisions carry the Scheduler's own reasons, none
// UserPreference or Unsupported (what SelectOn gives an arm it cannot
// run), and a Placer that returns an arm still places every op there.
func TestPlacerLearned(t *testing.T) {
	for _, c := range []struct {
		arm  int
		want func(r adaptive.Reason) bool
	}{
		{executor.Learned, func(r adaptive.Reason) bool { return r != adaptive.UserPreference && r != adaptive.Unsupported }},
		{1, func(r adaptive.Reason) bool { return r == adaptive.UserPreference }},
	} {
		e := newExec(t, executor.Config{Placer: &consumerSpy{arm: c.arm}}, open(t, "cpu"), open(t, "sim:h100"))
		ch := newChain(t, rand.New(rand.NewPCG(7, 8)), 3, 4, 64)
		ch.run(t, e)
		tel := e.Scheduler().Telemetry()
		var n int64
		for _, b := range tel.Backends {
			for r, k := range b.Reasons {
				n += k
				if k > 0 && !c.want(adaptive.Reason(r)) {
					t.Errorf("arm %d: %d decisions of reason %v on %s", c.arm, k, adaptive.Reason(r), b.Name)
				}
			}
		}
		if n == 0 {
			t.Errorf("arm %d: no decisions counted", c.arm)
		}
	}
}
