package executor_test

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/executor"
	"github.com/adaptsched/adaptsched/kernels"
)

// hostGPU is a device that queues and gathers (backends.Recorder) at a
// small, known host cost and no device time: its kernels do nothing and
// complete when launched; an op queued outside a gathering completes at
// once (Clock DeviceEvents, 1 µs). Gathered ops wait for their segment,
// launched as rocm launches one (backends.SegmentLimit, a Flush, a wait,
// a copy or Sync). It allocates one event per op, as rocm does. It stands
// for a GPU in BenchmarkExecutorStep, whose direct mode times it alone.
type hostGPU struct {
	mu        sync.Mutex
	recording bool
	seg       *gpuSegment // the segment being gathered, nil when none
	segN      int         // segments launched since Record
	since     int         // ops gathered since Record
	last      int         // ops gathered by the last Record … Flush
}

type gpuBuf struct{ b []byte }

func (g *gpuBuf) Size() int64 { return int64(len(g.b)) }
func (g *gpuBuf) Free()       {}

type gpuSegment struct {
	n        int
	launched chan struct{}
}

// gpuEvent is an op's or copy's event; seg is nil for work launched at
// once.
type gpuEvent struct {
	g   *hostGPU
	seg *gpuSegment
}

var (
	_ backends.Recorder = (*hostGPU)(nil)
	_ backends.Deferred = (*gpuEvent)(nil)
)

func (g *hostGPU) Info() backends.Info {
	return backends.Info{Name: "gpu", Kind: backends.GPU, Platform: "nvidia", Model: "host-gpu", Memory: 1 << 30}
}
func (g *hostGPU) Supports(kernels.Spec) error            { return nil }
func (g *hostGPU) Alloc(n int64) (backends.Buffer, error) { return &gpuBuf{b: make([]byte, n)}, nil }
func (g *hostGPU) Close() error                           { return nil }
func (g *hostGPU) Write(dst backends.Buffer, src []byte) (backends.Timing, error) {
	ev, _ := g.WriteAsync(dst, src, nil)
	return ev.Wait()
}
func (g *hostGPU) Read(dst []byte, src backends.Buffer) (backends.Timing, error) {
	ev, _ := g.ReadAsync(dst, src, nil)
	return ev.Wait()
}
func (g *hostGPU) Run(s kernels.Spec, in []backends.Buffer, out backends.Buffer) (backends.Timing, error) {
	ev, _ := g.RunAsync(s, in, out, nil)
	return ev.Wait()
}

// awaitForeign waits for the events of after that are not this device's.
func (g *hostGPU) awaitForeign(after []backends.Event) {
	for _, a := range after {
		if e, ok := a.(*gpuEvent); a != nil && (!ok || e.g != g) {
			a.Wait()
		}
	}
}

func (g *hostGPU) RunAsync(s kernels.Spec, in []backends.Buffer, out backends.Buffer, after []backends.Event) (backends.Event, error) {
	g.awaitForeign(after)
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.recording {
		return &gpuEvent{g: g}, nil
	}
	if g.seg == nil {
		g.seg = &gpuSegment{launched: make(chan struct{})}
	}
	seg := g.seg
	seg.n++
	g.since++
	if seg.n >= backends.SegmentLimit(g.segN, g.since-seg.n, g.last) {
		g.launchLocked()
	}
	return &gpuEvent{g: g, seg: seg}, nil
}

func (g *hostGPU) WriteAsync(dst backends.Buffer, src []byte, after []backends.Event) (backends.Event, error) {
	g.awaitForeign(after)
	g.launch()
	copy(dst.(*gpuBuf).b, src)
	return &gpuEvent{g: g}, nil
}

func (g *hostGPU) ReadAsync(dst []byte, src backends.Buffer, after []backends.Event) (backends.Event, error) {
	g.awaitForeign(after)
	g.launch()
	copy(dst, src.(*gpuBuf).b)
	return &gpuEvent{g: g}, nil
}

func (g *hostGPU) Sync() error { g.launch(); return nil }

func (g *hostGPU) Record() error {
	g.mu.Lock()
	g.recording, g.segN, g.since = true, 0, 0
	g.mu.Unlock()
	return nil
}

func (g *hostGPU) Flush() error {
	g.mu.Lock()
	g.launchLocked()
	g.recording = false
	if g.since > 0 {
		g.last = g.since
	}
	g.mu.Unlock()
	return nil
}

func (g *hostGPU) launch() {
	g.mu.Lock()
	g.launchLocked()
	g.mu.Unlock()
}

func (g *hostGPU) launchLocked() {
	if g.seg != nil {
		close(g.seg.launched)
		g.seg = nil
		g.segN++
	}
}

func (e *gpuEvent) Launched() <-chan struct{} {
	if e.seg == nil {
		return launchedNow
	}
	return e.seg.launched
}

var launchedNow = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (e *gpuEvent) Launch() error {
	if !e.Done() {
		e.g.launch()
	}
	return nil
}

func (e *gpuEvent) Done() bool {
	select {
	case <-e.Launched():
		return true
	default:
		return false
	}
}

func (e *gpuEvent) Wait() (backends.Timing, error) {
	if e.seg == nil {
		return backends.Timing{Duration: time.Microsecond, Clock: backends.DeviceEvents}, nil
	}
	if err := e.Launch(); err != nil {
		return backends.Timing{}, err
	}
	return backends.Timing{Clock: backends.Gathered}, nil
}

// decodeStep is a decode-like step of layers×3 ops on [1,dim]
// activations, each layer's its own as in cmd/infer:
// h = x·W (a weight), a = SiLU(h), x' = x + a; the step writes its
// input first and reads its output last, as a decode step writes the
// token's embedding and reads the logits.
type decodeStep struct {
	mm, silu, add kernels.Spec
	in, out       []byte
	xs            []backends.Buffer // layers+1: the input, then each layer's output
	ws            []backends.Buffer
	// Each layer's inputs of its three ops, built once: the step's caller
	// allocates nothing per op; outs are their outputs.
	ins  [][3][]backends.Buffer
	outs [][3]backends.Buffer
	e    *executor.Executor // the Executor it runs on, if any
}

const stepDim = 64

func newDecodeStep(layers int, alloc func(n int64) backends.Buffer) *decodeStep {
	st := &decodeStep{
		mm:   kernels.Spec{Op: kernels.MatMul, In: []kernels.Shape{{1, stepDim}, {stepDim, stepDim}}},
		silu: kernels.Spec{Op: kernels.SiLU, In: []kernels.Shape{{1, stepDim}}},
		add:  kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{1, stepDim}, {1, stepDim}}},
		in:   make([]byte, 4*stepDim), out: make([]byte, 4*stepDim),
		xs: []backends.Buffer{alloc(4 * stepDim)},
	}
	for l := range layers {
		w, h, a, x := alloc(4*stepDim*stepDim), alloc(4*stepDim), alloc(4*stepDim), alloc(4*stepDim)
		st.ws = append(st.ws, w)
		st.xs = append(st.xs, x)
		st.ins = append(st.ins, [3][]backends.Buffer{{st.xs[l], w}, {h}, {st.xs[l], a}})
		st.outs = append(st.outs, [3]backends.Buffer{h, a, x})
	}
	return st
}

func (st *decodeStep) ops() int { return 3 * len(st.ws) }

// specs returns the three specs of a layer, in order.
func (st *decodeStep) specs() [3]*kernels.Spec { return [3]*kernels.Spec{&st.mm, &st.silu, &st.add} }

// execStep builds an Executor over cpu and gpu under only:gpu (placed:
// the automatic strategy with a Placer that puts every op on gpu, as
// cmd/infer's auto does in a mode other than the learner's) with the
// weights of a decodeStep of layers pinned on gpu, and returns the step
// and a function that runs it once through the Executor (gathered:
// between Record and Flush).
func execStep(tb testing.TB, gpu *hostGPU, layers int, gathered, placed bool) (*decodeStep, func()) {
	cfg := executor.Config{Strategy: adaptive.Only("gpu"), WeightBudget: []int64{-1, 1 << 30}}
	if placed {
		cfg.Strategy, cfg.Placer = adaptive.Automatic, placeOn(1)
	}
	e := newExec(tb, cfg, open(tb, "cpu"), gpu)
	es := newDecodeStep(layers, func(n int64) backends.Buffer {
		buf, err := e.Alloc(n)
		if err != nil {
			tb.Fatal(err)
		}
		return buf
	})
	w := make([]byte, 4*stepDim*stepDim)
	for _, wb := range es.ws {
		if _, err := e.Write(wb, w); err != nil {
			tb.Fatal(err)
		}
		if err := e.MarkWeight(wb); err != nil {
			tb.Fatal(err)
		}
		if err := e.Pin(wb, 1); err != nil {
			tb.Fatal(err)
		}
	}
	es.e = e
	specs := es.specs()
	return es, func() {
		if _, err := e.Write(es.xs[0], es.in); err != nil {
			tb.Fatal(err)
		}
		if gathered {
			if err := e.Record(); err != nil {
				tb.Fatal(err)
			}
		}
		for l := range es.ins {
			for i, s := range specs {
				if _, err := e.Run(*s, es.ins[l][i], es.outs[l][i]); err != nil {
					tb.Fatal(err)
				}
			}
		}
		if err := e.Flush(); err != nil {
			tb.Fatal(err)
		}
		if _, err := e.Read(es.out, es.xs[len(es.ws)]); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkExecutorStep is the host's cost per op of the path a decode
// step takes on a GPU under only:gpu: Write of the input, the step's ops
// queued through the Executor (Run), Flush, Read of the output, against
// the same step issued to the device (hostGPU, a cheap stand-in) by hand,
// the two alternating step by step. "queued" issues op by op,
// "gathered" between Record and Flush (backends.Recorder), as cmd/infer
// runs a decode step whose ops all run on one GPU; "placed" gathered,
// each op placed by a Placer, as cmd/infer's auto places a step in a mode
// other than the learner's. exec-ns/op is the
// Executor's step per op, direct-ns/op the device's own share, and
// overhead-ns/op their difference: what the Executor adds per op on the
// host, in wall time. overhead-cpu-ns/op is that difference in the
// process's CPU time (Linux), all its threads: the goroutines that
// wait for and observe the work and the garbage collector count, and
// waiting for a core on a shared machine does not. exec-B/op and
// exec-allocs/op are the Executor's step's per op.
func BenchmarkExecutorStep(b *testing.B) {
	const layers = 21 // 63 ops, about a third of a 100M decoder's step
	for _, mode := range []string{"queued", "gathered", "placed"} {
		b.Run(mode, func(b *testing.B) {
			gpu := &hostGPU{}
			gathered := mode != "queued"
			es, exec := execStep(b, gpu, layers, gathered, mode == "placed")
			ds := newDecodeStep(layers, func(n int64) backends.Buffer { buf, _ := gpu.Alloc(n); return buf })
			specs := ds.specs()
			direct := func() {
				if _, err := gpu.Write(ds.xs[0], ds.in); err != nil {
					b.Fatal(err)
				}
				if gathered {
					gpu.Record()
				}
				after := []backends.Event{nil} // the op before: the Executor's dependency
				for l := range ds.ins {
					for i, s := range specs {
						after[0], _ = gpu.RunAsync(*s, ds.ins[l][i], ds.outs[l][i], after)
					}
				}
				gpu.Flush()
				if _, err := gpu.Read(ds.out, ds.xs[len(ds.ws)]); err != nil {
					b.Fatal(err)
				}
			}
			exec() // the first step places the tensors
			direct()
			var execNs, directNs time.Duration
			var execCPU, directCPU int64
			for b.Loop() {
				c0, _ := processCPU()
				t0 := time.Now()
				exec()
				t1 := time.Now()
				c1, _ := processCPU()
				direct()
				execNs += t1.Sub(t0)
				directNs += time.Since(t1)
				c2, _ := processCPU()
				execCPU += c1 - c0
				directCPU += c2 - c1
			}
			b.StopTimer()
			ops := float64(es.ops())
			per := func(d time.Duration) float64 { return float64(d) / float64(b.N) / ops }
			b.ReportMetric(per(execNs), "exec-ns/op")
			b.ReportMetric(per(directNs), "direct-ns/op")
			b.ReportMetric(per(execNs-directNs), "overhead-ns/op")
			if _, ok := processCPU(); ok {
				b.ReportMetric(per(time.Duration(execCPU-directCPU)), "overhead-cpu-ns/op")
			}
			var m0, m1 runtime.MemStats
			const steps = 50
			runtime.ReadMemStats(&m0)
			for range steps {
				exec()
			}
			runtime.ReadMemStats(&m1)
			b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/steps/ops, "exec-B/op")
			b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/steps/ops, "exec-allocs/op")
			if st := es.e.Stats(); st.Backends[1].Ops == 0 || st.Backends[0].Ops != 0 {
				b.Fatalf("ops on cpu %d, gpu %d: want all on the gpu", st.Backends[0].Ops, st.Backends[1].Ops)
			}
		})
	}
}

// placeOn is a Placer that puts every op on one backend.
type placeOn int

func (p placeOn) Name() string { return "placeOn" }

func (p placeOn) Place(kernels.Spec, adaptive.Residency, adaptive.BucketID) int { return int(p) }

func (placeOn) Observed(adaptive.BucketID, int, float64) {}
