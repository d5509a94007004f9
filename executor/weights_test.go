package executor_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/executor"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/sim"
	"github.com/adaptsched/adaptsched/weightcache"
)

// weightModel is a stack of square f32 matmul layers, x ← x·W_l, with
// weights scaled to keep activations near unit size.
type weightModel struct {
	dim int
	ws  [][]byte
}

func newWeightModel(r *rand.Rand, layers, dim int) *weightModel {
	m := &weightModel{dim: dim}
	scale := float32(math.Sqrt(3 / float64(dim)))
	for range layers {
		w := randF32(r, dim*dim)
		for i := range w {
			w[i] *= scale
		}
		m.ws = append(m.ws, kernels.AsBytes(w))
	}
	return m
}

func (m *weightModel) spec(batch int) kernels.Spec {
	return kernels.Spec{Op: kernels.MatMul, In: []kernels.Shape{{batch, m.dim}, {m.dim, m.dim}}}
}

// pick draws n distinct layers, the low ones more often (the high ones
// when drifted).
func (m *weightModel) pick(r *rand.Rand, n int, drifted bool) []int {
	var out []int
	for len(out) < n {
		l := int(float64(len(m.ws)) * r.Float64() * r.Float64())
		if drifted {
			l = len(m.ws) - 1 - l
		}
		if !containsInt(out, l) {
			out = append(out, l)
		}
	}
	return out
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// mostlyGPU places two ops of three on the GPU (backend 1).
type mostlyGPU struct{ n int }

func (*mostlyGPU) Name() string                             { return "mostly-gpu" }
func (*mostlyGPU) Observed(adaptive.BucketID, int, float64) {}
func (p *mostlyGPU) Place(kernels.Spec, adaptive.Residency, adaptive.BucketID) int {
	p.n++
	if p.n%3 == 0 {
		return 0
	}
	return 1
}

// want returns the reference output of x through the layers used.
func (m *weightModel) want(t *testing.T, batch int, x []byte, used []int) []byte {
	for _, l := range used {
		w := m.ws[l]
		out := make([]byte, 4*batch*m.dim)
		if err := kernels.Reference(m.spec(batch), [][]byte{x, w}, out); err != nil {
			t.Fatal(err)
		}
		x = out
	}
	return x
}

// gpuFirstExec returns an Executor over cpu and sim:h100 under
// GPUPreferred, with a weight budget of budget bytes on the GPU.
func gpuFirstExec(t *testing.T, sync bool, budget int64) *executor.Executor {
	return newExec(t, executor.Config{Strategy: adaptive.GPUPreferred, Synchronous: sync,
		WeightBudget: []int64{-1, budget}}, open(t, "cpu"), open(t, "sim:h100"))
}

// markedWeights allocates each of ws on e and marks it a weight.
func markedWeights(t *testing.T, e *executor.Executor, ws [][]byte) []backends.Buffer {
	t.Helper()
	var out []backends.Buffer
	for _, w := range ws {
		b := alloc(t, e, w)
		if err := e.MarkWeight(b); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// TestWeightBudget runs an infer-like serving mix (prefill micro-batches
// and decodes of varying batch) over weights kept in host memory with a
// GPU budget of a third of them, queued and synchronous, placed by the
// bandit and by a GPU-first rule (most pressure): the weight bytes held
// on the GPU never exceed the budget after any op, the cache's count
// agrees with the tensors' copies at every step's end, every output
// matches the reference (eviction loses no op), and, where a rule puts
// the ops on the GPU, weights were both cached and evicted. (The bandit's
// own placement, queued, depends on when its observations arrive: in
// about one run in fifteen it kept all but 3 of 80 ops on the CPU, and
// nothing needed evicting.)
func TestWeightBudget(t *testing.T) {
	const layers, dim = 9, 48
	m := newWeightModel(rand.New(rand.NewPCG(3, 1)), layers, dim)
	wsize := int64(len(m.ws[0]))
	budget := int64(layers/3) * wsize
	for _, sync := range []bool{false, true} {
		for _, c := range []struct {
			name string
			st   adaptive.Strategy
			pl   executor.Placer
		}{{"gpu-preferred", adaptive.GPUPreferred, nil}, {"mostly-gpu", adaptive.Automatic, &mostlyGPU{}}, {"automatic", adaptive.Automatic, nil}} {
			t.Run(fmt.Sprintf("sync=%v/%s", sync, c.name), func(t *testing.T) {
				e := newExec(t, executor.Config{Strategy: c.st, Placer: c.pl, Synchronous: sync,
					WeightBudget: []int64{-1, budget}}, open(t, "cpu"), open(t, "sim:h100"))
				var ws []backends.Buffer
				for i, w := range m.ws {
					b := alloc(t, e, w)
					if err := e.MarkWeight(b); err != nil {
						t.Fatal(err)
					}
					if i < layers/3 {
						if err := e.Preload(b, 1); err != nil {
							t.Fatal(err)
						}
					}
					ws = append(ws, b)
				}
				r := rand.New(rand.NewPCG(5, 5))
				batches := []int{33, 90, 1, 1, 7, 1, 90, 1, 7, 1, 1, 33, 1, 1, 90, 1, 1, 7, 1, 1}
				batches = append(batches, batches[10:]...)
				batches = append(batches, batches[10:]...)
				for step, batch := range batches {
					x := kernels.AsBytes(randF32(r, batch*dim))
					cur := alloc(t, e, x)
					var acts []backends.Buffer
					// Each step uses 4 of the weights, the popular ones
					// changing after 10 steps (experts of a drifting
					// router) for 40 more: the weights held before are
					// used too, and their uses count (TestWeightHitsCount).
					used := m.pick(r, 4, step >= 10)
					for _, l := range used {
						out, err := e.Alloc(int64(4 * batch * dim))
						if err != nil {
							t.Fatal(err)
						}
						if _, err := e.Run(m.spec(batch), []backends.Buffer{cur, ws[l]}, out); err != nil {
							t.Fatalf("step %d layer %d: %v", step, l, err)
						}
						if got := e.WeightBytes()[1]; got > budget {
							t.Fatalf("step %d layer %d: %d weight bytes on the GPU, budget %d", step, l, got, budget)
						}
						acts = append(acts, cur)
						cur = out
					}
					got := make([]byte, 4*batch*dim)
					if _, err := e.Read(got, cur); err != nil {
						t.Fatal(err)
					}
					if err := near(kernels.F32, got, m.want(t, batch, x, used), 1e-4); err != nil {
						t.Fatalf("step %d (batch %d): %v", step, batch, err)
					}
					settle(t, e)
					var held int64
					for _, w := range ws {
						if w.(*executor.Tensor).Valid().Has(1) {
							held += wsize
						}
					}
					if wb := e.WeightBytes()[1]; wb != held || wb > budget {
						t.Fatalf("step %d: the cache counts %d bytes, the weights hold %d, budget %d", step, wb, held, budget)
					}
					for _, a := range append(acts, cur) {
						a.Free()
					}
				}
				st := e.Stats()
				t.Logf("GPU ops %d of %d, copies in %d, evictions %d", st.Backends[1].Ops, st.Backends[0].Ops+st.Backends[1].Ops, st.Backends[1].CopiesIn, st.Evictions)
				if c.st == adaptive.GPUPreferred || c.pl != nil {
					if st.Backends[1].Ops == 0 || st.Evictions == 0 {
						t.Errorf("a GPU-first rule, and the GPU ran %d ops with %d evictions: no pressure tested: %+v",
							st.Backends[1].Ops, st.Evictions, st)
					}
				}
			})
		}
	}
}

// TestWeightCacheEvicts checks that under a GPU-first rule the cache
// fills, evicts and admits as the used weights change, within budget.
func TestWeightCacheEvicts(t *testing.T) {
	const dim = 32
	m := newWeightModel(rand.New(rand.NewPCG(4, 1)), 4, dim)
	wsize := int64(len(m.ws[0]))
	for _, sync := range []bool{false, true} {
		e := gpuFirstExec(t, sync, 2*wsize)
		ws := markedWeights(t, e, m.ws)
		x := alloc(t, e, kernels.AsBytes(randF32(rand.New(rand.NewPCG(1, 1)), dim)))
		out := alloc(t, e, make([]byte, 4*dim))
		use := func(l, n int) {
			for range n {
				if _, err := e.Run(m.spec(1), []backends.Buffer{x, ws[l]}, out); err != nil {
					t.Fatal(err)
				}
				settle(t, e)
			}
		}
		// Teach the link model copies of the weights' size first: the
		// rule weighs each weight by its predicted copy time.
		for range 12 {
			tmp := alloc(t, e, m.ws[3])
			if _, err := e.Run(m.spec(1), []backends.Buffer{x, tmp}, out); err != nil {
				t.Fatal(err)
			}
			settle(t, e)
			tmp.Free()
		}
		use(0, 3)
		use(1, 3)
		if v := ws[0].(*executor.Tensor).Valid() & ws[1].(*executor.Tensor).Valid(); !v.Has(1) {
			t.Fatalf("sync=%v: the first two weights fit and were not both kept: %v", sync, v)
		}
		use(2, 1) // one use does not outweigh three
		if ws[2].(*executor.Tensor).Valid().Has(1) {
			t.Errorf("sync=%v: a weight used once displaced one used three times", sync)
		}
		use(2, 40) // used far more: it displaces one
		if !ws[2].(*executor.Tensor).Valid().Has(1) {
			t.Errorf("sync=%v: a weight used 41 times was never kept", sync)
		}
		if got := e.WeightBytes()[1]; got > 2*wsize {
			t.Errorf("sync=%v: %d weight bytes, budget %d", sync, got, 2*wsize)
		}
		// Two weights of equal use take turns: the cache keeps the one it
		// has rather than swap at every op (weightcache's margin).
		ev := e.Stats().Evictions
		for range 20 {
			use(3, 1)
			use(2, 1)
		}
		if n := e.Stats().Evictions - ev; n > 2 {
			t.Errorf("sync=%v: %d evictions for two weights taking turns", sync, n)
		}
	}
}

// TestWeightHitsCount: a GPU budget of one weight, which holds A; every
// op runs on the GPU, reading A and B in turn, so B is copied for each
// of its ops. Each use counts where the weight is held as where it is
// not: the two are worth the same and the cache keeps A (at most one
// eviction in 300 rounds). Counted only where a weight was not held, A's
// worth decayed while B's grew, B took A's place, then A B's, and so on.
// Queued and synchronous.
func TestWeightHitsCount(t *testing.T) {
	const dim = 64
	m := newWeightModel(rand.New(rand.NewPCG(8, 1)), 2, dim)
	for _, sync := range []bool{false, true} {
		e := gpuFirstExec(t, sync, int64(len(m.ws[0])))
		ws := markedWeights(t, e, m.ws)
		a, b := ws[0], ws[1]
		if err := e.Preload(a, 1); err != nil {
			t.Fatal(err)
		}
		x := alloc(t, e, kernels.AsBytes(randF32(rand.New(rand.NewPCG(1, 3)), dim)))
		out := alloc(t, e, make([]byte, 4*dim))
		for range 300 {
			for _, w := range []backends.Buffer{a, b} {
				if _, err := e.Run(m.spec(1), []backends.Buffer{x, w}, out); err != nil {
					t.Fatal(err)
				}
				settle(t, e)
			}
		}
		if n := e.Stats().Evictions; n > 1 {
			t.Errorf("sync=%v: %d evictions in 300 rounds of two weights used alike", sync, n)
		}
	}
}

// TestHoldWeightsKeepsCopies: while the caches are held, a weight used 40
// times on the GPU (GPU-first) is staged for each op and never kept, the
// two weights cached before stay and nothing is evicted; a weight read on
// the CPU is not copied in for its own sake either. Released, the same
// uses keep the weight, as TestWeightCacheEvicts and TestWeightOwnSake
// show unheld. Queued and synchronous.
func TestHoldWeightsKeepsCopies(t *testing.T) {
	const dim = 32
	m := newWeightModel(rand.New(rand.NewPCG(4, 1)), 4, dim)
	wsize := int64(len(m.ws[0]))
	for _, sync := range []bool{false, true} {
		e := gpuFirstExec(t, sync, 2*wsize)
		ws := markedWeights(t, e, m.ws)
		xs := kernels.AsBytes(randF32(rand.New(rand.NewPCG(1, 1)), dim))
		x := alloc(t, e, xs)
		out := alloc(t, e, make([]byte, 4*dim))
		got := make([]byte, 4*dim)
		use := func(l, n int) {
			for range n {
				if _, err := e.Run(m.spec(1), []backends.Buffer{x, ws[l]}, out); err != nil {
					t.Fatal(err)
				}
				settle(t, e)
			}
		}
		use(0, 3)
		use(1, 3)
		onGPU := func(l int) bool { return ws[l].(*executor.Tensor).Valid().Has(1) }
		if !onGPU(0) || !onGPU(1) {
			t.Fatalf("sync=%v: the first two weights fit and were not both kept", sync)
		}
		e.HoldWeights(true)
		ev := e.Stats().Evictions
		use(2, 40)
		if onGPU(2) || !onGPU(0) || !onGPU(1) {
			t.Errorf("sync=%v: held, the GPU holds weights 0, 1, 2: %v %v %v; want 0 and 1", sync, onGPU(0), onGPU(1), onGPU(2))
		}
		if n := e.Stats().Evictions - ev; n != 0 {
			t.Errorf("sync=%v: %d evictions while held", sync, n)
		}
		if got := e.WeightBytes()[1]; got != 2*wsize {
			t.Errorf("sync=%v: held, %d weight bytes on the GPU, want %d", sync, got, 2*wsize)
		}
		if _, err := e.Read(got, out); err != nil {
			t.Fatal(err)
		}
		if want := m.want(t, 1, xs, []int{2}); string(got) != string(want) {
			t.Errorf("sync=%v: held, the staged weight's op computed a wrong result", sync)
		}
		e.HoldWeights(false)
		use(2, 40)
		if !onGPU(2) {
			t.Errorf("sync=%v: released, a weight used 40 more times was never kept", sync)
		}
	}
	// Copies for a weight's own sake: the CPU runs every op.
	m = newWeightModel(rand.New(rand.NewPCG(6, 1)), 1, 128)
	for _, sync := range []bool{false, true} {
		e := newExec(t, executor.Config{Strategy: adaptive.Only("cpu"), Synchronous: sync,
			WeightBudget: []int64{-1, int64(len(m.ws[0]))}}, open(t, "cpu"), open(t, "sim:h100"))
		w := alloc(t, e, m.ws[0])
		if err := e.MarkWeight(w); err != nil {
			t.Fatal(err)
		}
		x := alloc(t, e, kernels.AsBytes(randF32(rand.New(rand.NewPCG(1, 2)), 256*128)))
		out := alloc(t, e, make([]byte, 4*256*128))
		e.HoldWeights(true)
		for range 64 {
			if _, err := e.Submit(m.spec(256), []backends.Buffer{x, w}, out); err != nil {
				t.Fatal(err)
			}
			settle(t, e)
		}
		if w.(*executor.Tensor).Valid().Has(1) {
			t.Errorf("sync=%v: held, a weight read on the CPU was copied to the GPU for its own sake", sync)
		}
	}
}

// TestWeightNotStale writes a cached (preloaded, or pinned) weight's
// host copy and checks that the GPU's next op reads the new value,
// queued and synchronous.
func TestWeightNotStale(t *testing.T) {
	const n = 64
	r := rand.New(rand.NewPCG(2, 2))
	x, w1, w2 := kernels.AsBytes(randF32(r, n)), kernels.AsBytes(randF32(r, n)), kernels.AsBytes(randF32(r, n))
	spec := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{n}, {n}}}
	want := func(w []byte) []byte {
		out := make([]byte, 4*n)
		if err := kernels.Reference(spec, [][]byte{x, w}, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, sync := range []bool{false, true} {
		for _, pin := range []bool{false, true} {
			e := newExec(t, executor.Config{Strategy: adaptive.GPUPreferred, Synchronous: sync,
				WeightBudget: []int64{-1, 4 * n}}, open(t, "cpu"), open(t, "sim:h100"))
			xb, wb := alloc(t, e, x), alloc(t, e, w1)
			if err := e.MarkWeight(wb); err != nil {
				t.Fatal(err)
			}
			load := e.Preload
			if pin {
				load = e.Pin
			}
			if err := load(wb, 1); err != nil {
				t.Fatal(err)
			}
			out := alloc(t, e, make([]byte, 4*n))
			got := make([]byte, 4*n)
			for i, w := range [][]byte{w1, w2, w1} {
				if i > 0 {
					if _, err := e.Write(wb, w); err != nil {
						t.Fatal(err)
					}
				}
				d, err := e.Submit(spec, []backends.Buffer{xb, wb}, out)
				if err != nil {
					t.Fatal(err)
				}
				if d.Backend != 1 {
					t.Fatalf("placed on %d, want the GPU", d.Backend)
				}
				if _, err := e.Read(got, out); err != nil {
					t.Fatal(err)
				}
				if err := near(kernels.F32, got, want(w), 0); err != nil {
					t.Fatalf("sync=%v pin=%v, write %d: a stale weight was served: %v", sync, pin, i, err)
				}
				if !wb.(*executor.Tensor).Valid().Has(1) {
					t.Errorf("sync=%v pin=%v: the written weight fits its budget and was not cached again", sync, pin)
				}
			}
		}
	}
}

// TestPreloadBesideCache: Preload fits a weight beside what the cache
// holds, never in its place: with the budget full of a weight an op
// cached, Preload of a smaller one, which the rule would rank above it,
// fails with ErrBudget, and the cached copy stays. Queued and
// synchronous.
func TestPreloadBesideCache(t *testing.T) {
	const dim = 64
	m := newWeightModel(rand.New(rand.NewPCG(8, 2)), 1, dim)
	small := kernels.AsBytes(randF32(rand.New(rand.NewPCG(8, 3)), dim*dim/4))
	budget := int64(len(m.ws[0]))
	for _, sync := range []bool{false, true} {
		e := gpuFirstExec(t, sync, budget)
		ws := markedWeights(t, e, [][]byte{m.ws[0], small})
		x := alloc(t, e, kernels.AsBytes(randF32(rand.New(rand.NewPCG(1, 3)), dim)))
		out := alloc(t, e, make([]byte, 4*dim))
		if _, err := e.Run(m.spec(1), []backends.Buffer{x, ws[0]}, out); err != nil {
			t.Fatal(err)
		}
		settle(t, e)
		if got := e.WeightBytes()[1]; got != budget {
			t.Fatalf("sync=%v: the op left %d weight bytes on the GPU, want its weight's %d", sync, got, budget)
		}
		if err := e.Preload(ws[1], 1); !errors.Is(err, executor.ErrBudget) {
			t.Errorf("sync=%v: Preload into a budget the cache fills: %v, want ErrBudget", sync, err)
		}
		if got := e.WeightBytes()[1]; got != budget {
			t.Errorf("sync=%v: %d weight bytes on the GPU after Preload, want the cached %d (budget %d)", sync, got, budget, budget)
		}
		if n := e.Stats().Evictions; n != 0 {
			t.Errorf("sync=%v: Preload evicted %d weights", sync, n)
		}
	}
}

// TestPreloadAfterClose: Preload and Pin after Close fail with
// adaptive.ErrClosed and make no copy, which nothing would free.
// Queued and synchronous.
func TestPreloadAfterClose(t *testing.T) {
	for _, sync := range []bool{false, true} {
		e := gpuFirstExec(t, sync, 1<<20)
		w := markedWeights(t, e, [][]byte{make([]byte, 256)})[0]
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		for name, f := range map[string]func(backends.Buffer, int) error{"Preload": e.Preload, "Pin": e.Pin} {
			if err := f(w, 1); !errors.Is(err, adaptive.ErrClosed) {
				t.Errorf("sync=%v: %s after Close: %v, want ErrClosed", sync, name, err)
			}
		}
		if got := e.WeightBytes()[1]; got != 0 {
			t.Errorf("sync=%v: %d weight bytes on the GPU after Close", sync, got)
		}
	}
}

// TestWeightErrors: an op may not write a weight; a weight is marked
// before ops use it; Preload beyond the budget fails with ErrBudget; a
// budget for more backends than there are is a config error.
func TestWeightErrors(t *testing.T) {
	e := newExec(t, executor.Config{WeightBudget: []int64{-1, 100}}, open(t, "cpu"), open(t, "sim:h100"))
	w := alloc(t, e, make([]byte, 256))
	if err := e.MarkWeight(w); err != nil {
		t.Fatal(err)
	}
	x := alloc(t, e, make([]byte, 256))
	spec := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{64}, {64}}}
	if _, err := e.Run(spec, []backends.Buffer{x, x}, w); !errors.Is(err, executor.ErrBadTensor) {
		t.Errorf("an op writing a weight: %v, want ErrBadTensor", err)
	}
	if err := e.Preload(w, 1); !errors.Is(err, executor.ErrBudget) {
		t.Errorf("256 bytes into a budget of 100: %v, want ErrBudget", err)
	}
	if err := e.Preload(w, 7); err == nil {
		t.Error("Preload to backend 7 of 2 succeeded")
	}
	if err := e.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err := executor.New(executor.Config{Backends: []backends.Backend{open(t, "cpu")}, NoCalibration: true,
		WeightBudget: []int64{1, 2}})
	if !errors.Is(err, adaptive.ErrConfig) {
		t.Errorf("two budgets for one backend: %v, want ErrConfig", err)
	}
}

// TestWeightOwnSake: a weight that ops keep reading on the CPU, whose
// reads the GPU's estimates say would be cheaper there if it were held,
// is copied into the GPU's cache for its own sake once its uses pay for
// the copy, within the budget.
func TestWeightOwnSake(t *testing.T) {
	const dim = 128
	m := newWeightModel(rand.New(rand.NewPCG(6, 1)), 1, dim)
	for _, sync := range []bool{false, true} {
		e := newExec(t, executor.Config{Strategy: adaptive.Only("cpu"), Synchronous: sync,
			WeightBudget: []int64{-1, int64(len(m.ws[0]))}}, open(t, "cpu"), open(t, "sim:h100"))
		w := alloc(t, e, m.ws[0])
		if err := e.MarkWeight(w); err != nil {
			t.Fatal(err)
		}
		x := alloc(t, e, kernels.AsBytes(randF32(rand.New(rand.NewPCG(1, 2)), 256*dim)))
		out := alloc(t, e, make([]byte, 4*256*dim))
		var d adaptive.Decision
		for i := range 64 {
			var err error
			if d, err = e.Submit(m.spec(256), []backends.Buffer{x, w}, out); err != nil {
				t.Fatal(err)
			}
			settle(t, e)
			if w.(*executor.Tensor).Valid().Has(1) {
				t.Logf("sync=%v: kept on the GPU after %d uses (estimates %.0f µs on the CPU, %.0f on the GPU with %.0f of copies)",
					sync, i+1, d.Estimates[0], d.Estimates[1], d.Transfer[1])
				break
			}
		}
		if !w.(*executor.Tensor).Valid().Has(1) {
			t.Errorf("sync=%v: never kept on the GPU (estimates %.0f µs on the CPU, %.0f on the GPU with %.0f of copies)",
				sync, d.Estimates[0], d.Estimates[1], d.Transfer[1])
		}
		if got := e.WeightBytes()[1]; got > int64(len(m.ws[0])) {
			t.Errorf("sync=%v: %d weight bytes, budget %d", sync, got, len(m.ws[0]))
		}
	}
}

// TestWeightCopiedBeforeOp: the copy the cache wants for a weight's own
// sake is made before the op that counts the use, so that op is decided
// with the weight held (DESIGN.md § Weights in host memory). A 4 MiB
// weight read at batch 1 by a desktop CPU, beside an RTX 3090 on PCIe 3
// x8: a use on the GPU would save far less than the copy, so the cache
// takes it after several uses; the Submit after which it is first on the
// GPU priced no copy of it there, where the first Submit did.
func TestWeightCopiedBeforeOp(t *testing.T) {
	const dim = 1024
	m := newWeightModel(rand.New(rand.NewPCG(6, 1)), 1, dim)
	for _, sync := range []bool{false, true} {
		e := newExec(t, executor.Config{Strategy: adaptive.Only("sim:desktop16"), Synchronous: sync,
			WeightBudget: []int64{-1, int64(len(m.ws[0]))}}, open(t, "sim:desktop16"), open(t, "sim:pcie3x8"))
		w := alloc(t, e, m.ws[0])
		if err := e.MarkWeight(w); err != nil {
			t.Fatal(err)
		}
		x := alloc(t, e, kernels.AsBytes(randF32(rand.New(rand.NewPCG(1, 2)), dim)))
		out := alloc(t, e, make([]byte, 4*dim))
		copyUs := e.Scheduler().PredictTransfer("sim:pcie3x8", true, int64(len(m.ws[0])))
		var first float64
		held := 0
		for i := range 200 {
			d, err := e.Submit(m.spec(1), []backends.Buffer{x, w}, out)
			if err != nil {
				t.Fatal(err)
			}
			settle(t, e)
			if i == 0 {
				first = d.Transfer[1]
			}
			if w.(*executor.Tensor).Valid().Has(1) {
				held = i + 1
				if i == 0 || d.Transfer[1] > first-copyUs/2 {
					t.Errorf("sync=%v: use %d copied the weight in, but its decision priced the copy (%.0f µs of transfers on the GPU; first use %.0f, the copy %.0f)",
						sync, held, d.Transfer[1], first, copyUs)
				}
				break
			}
		}
		t.Logf("sync=%v: on the GPU from use %d (copy %.0f µs)", sync, held, copyUs)
		if held == 0 {
			t.Errorf("sync=%v: never kept on the GPU", sync)
		}
	}
}

// TestSimCopyBeforeKernelDoesNotHang: on a simulated GPU with a copy lane
// beside its compute lane, reading an early result queued behind a long
// kernel ends before that kernel: the Read must return (it hung when the
// lane's watcher waited for the kernel to be Done on the host's clock,
// which only the host's waiting moves).
func TestSimCopyBeforeKernelDoesNotHang(t *testing.T) {
	tl := sim.NewTimeline(sim.Async)
	gpu, err := sim.Open("h100", sim.DefaultOptions().WithTimeline(tl).WithSkipCompute(true))
	if err != nil {
		t.Fatal(err)
	}
	defer gpu.Close()
	cpu, err := sim.Open("cpu2", sim.DefaultOptions().WithTimeline(tl).WithSkipCompute(true))
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	e := newExec(t, executor.Config{Strategy: adaptive.GPUPreferred}, cpu, gpu)
	small := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{16}, {16}}}
	big := kernels.Spec{Op: kernels.MatMul, In: []kernels.Shape{{4096, 4096}, {4096, 4096}}}
	a := alloc(t, e, make([]byte, 64))
	y := alloc(t, e, make([]byte, 64))
	x1 := alloc(t, e, make([]byte, 4*4096*4096))
	x2 := alloc(t, e, make([]byte, 4*4096*4096))
	for round := range 3 {
		if _, err := e.Run(small, []backends.Buffer{a, a}, y); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Run(big, []backends.Buffer{x1, x1}, x2); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := e.Read(make([]byte, 64), y)
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: Read of a result queued before a long kernel hangs", round)
		}
	}
	settle(t, e)
}

// gatedAlloc holds the first allocation of size bytes after it is armed
// until release is closed, telling entered when it holds it.
type gatedAlloc struct {
	backends.Backend
	size             int64
	armed            atomic.Bool
	entered, release chan struct{}
}

func (g *gatedAlloc) Alloc(n int64) (backends.Buffer, error) {
	if n == g.size && g.armed.CompareAndSwap(true, false) {
		close(g.entered)
		<-g.release
	}
	return g.Backend.Alloc(n)
}

// TestConcurrentAdmitKeepsBudget: the GPU's weight budget holds one
// weight. Weight A is admitted into the free room by one op, whose
// allocation of A's copy is slow; meanwhile an op on weight C, used far
// more, evicts A in the rule. The budget must hold. Synchronous and queued.
func TestConcurrentAdmitKeepsBudget(t *testing.T) {
	const dim = 32
	m := newWeightModel(rand.New(rand.NewPCG(4, 1)), 2, dim)
	wsize := int64(len(m.ws[0]))
	for _, sync := range []bool{false, true} {
		g := &gatedAlloc{Backend: open(t, "sim:h100"), size: wsize, entered: make(chan struct{}), release: make(chan struct{})}
		e := newExec(t, executor.Config{Strategy: adaptive.GPUPreferred, Synchronous: sync,
			WeightBudget: []int64{-1, wsize}}, open(t, "cpu"), g)
		ws := markedWeights(t, e, m.ws)
		a, c := ws[0], ws[1]
		x1 := alloc(t, e, make([]byte, 4*dim))
		x2 := alloc(t, e, make([]byte, 4*dim))
		out1 := alloc(t, e, make([]byte, 4*dim))
		out2 := alloc(t, e, make([]byte, 4*dim))
		for range 10 { // C is worth far more than A
			if _, err := e.Run(m.spec(1), []backends.Buffer{x2, c}, out2); err != nil {
				t.Fatal(err)
			}
			settle(t, e)
		}
		if !c.(*executor.Tensor).Valid().Has(1) {
			t.Fatalf("sync=%v: C not cached", sync)
		}
		if _, err := e.Write(c, m.ws[1]); err != nil { // C's copy dropped: the budget is free
			t.Fatal(err)
		}
		g.armed.Store(true)
		done := make(chan error, 1)
		go func() {
			_, err := e.Run(m.spec(1), []backends.Buffer{x1, a}, out1)
			done <- err
		}()
		<-g.entered // A admitted, its copy being allocated
		if _, err := e.Run(m.spec(1), []backends.Buffer{x2, c}, out2); err != nil {
			t.Fatal(err)
		}
		close(g.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		settle(t, e)
		var held int64
		for _, w := range ws {
			if w.(*executor.Tensor).Valid().Has(1) {
				held += wsize
			}
		}
		if wb := e.WeightBytes()[1]; wb > wsize || held > wsize {
			t.Errorf("sync=%v: the cache counts %d weight bytes and the weights hold %d on the GPU, budget %d",
				sync, wb, held, wsize)
		}
	}
}

// TestOutOfMemoryKeepsPinned: a pinned weight's copy is never evicted
// (Pin), not even by an op that runs out of GPU memory. Synchronous and queued.
func TestOutOfMemoryKeepsPinned(t *testing.T) {
	const n = 64
	spec := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{n}, {n}}}
	for _, sync := range []bool{false, true} {
		// The GPU's second op (its Run calls count from 0) runs out of memory.
		gpu := mustSim(t, sim.Event{At: 1, Kind: sim.OutOfMemory, Span: 1})
		t.Cleanup(func() { gpu.Close() })
		e := newExec(t, executor.Config{Strategy: adaptive.GPUPreferred, Synchronous: sync,
			WeightBudget: []int64{-1, 4 * n}}, open(t, "cpu"), gpu)
		w := markedWeights(t, e, [][]byte{make([]byte, 4*n)})[0]
		if err := e.Pin(w, 1); err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second op meets the out of memory
			x := alloc(t, e, make([]byte, 4*n))
			out := alloc(t, e, make([]byte, 4*n))
			if _, err := e.Run(spec, []backends.Buffer{x, x}, out); err != nil {
				t.Fatal(err)
			}
			settle(t, e)
		}
		if e.Stats().MemoryRetries == 0 {
			t.Fatalf("sync=%v: no out of memory met", sync)
		}
		if !w.(*executor.Tensor).Valid().Has(1) || e.WeightBytes()[1] != 4*n {
			t.Errorf("sync=%v: the pinned weight was evicted under memory pressure: valid %v, %d weight bytes on the GPU",
				sync, w.(*executor.Tensor).Valid(), e.WeightBytes()[1])
		}
	}
}

// TestPinWithoutBudget: Pin on a device backend with no weight budget
// pins: the copy survives an op that runs out of GPU memory, and a
// second Pin is a no-op. On the CPU, which works on the host copy in
// place, Pin is a no-op that holds no copy. Synchronous and queued.
func TestPinWithoutBudget(t *testing.T) {
	const n = 64
	spec := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{n}, {n}}}
	for _, sync := range []bool{false, true} {
		// The GPU's second op (its Run calls count from 0) runs out of memory.
		gpu := mustSim(t, sim.Event{At: 1, Kind: sim.OutOfMemory, Span: 1})
		t.Cleanup(func() { gpu.Close() })
		e := newExec(t, executor.Config{Strategy: adaptive.GPUPreferred, Synchronous: sync}, open(t, "cpu"), gpu)
		w := markedWeights(t, e, [][]byte{make([]byte, 4*n)})[0]
		for range 2 {
			if err := e.Pin(w, 1); err != nil {
				t.Fatalf("sync=%v: Pin on the GPU without a budget: %v", sync, err)
			}
		}
		if err := e.Pin(w, 0); err != nil {
			t.Errorf("sync=%v: Pin on the CPU: %v", sync, err)
		}
		if got := e.WeightBytes(); got[0] != 0 || got[1] != 4*n {
			t.Errorf("sync=%v: weight bytes %v after Pin on both, want [0 %d]", sync, got, 4*n)
		}
		for range 2 { // the second op meets the out of memory
			x := alloc(t, e, make([]byte, 4*n))
			out := alloc(t, e, make([]byte, 4*n))
			if _, err := e.Run(spec, []backends.Buffer{x, x}, out); err != nil {
				t.Fatal(err)
			}
			settle(t, e)
		}
		if e.Stats().MemoryRetries == 0 {
			t.Fatalf("sync=%v: no out of memory met", sync)
		}
		if !w.(*executor.Tensor).Valid().Has(1) || e.WeightBytes()[1] != 4*n {
			t.Errorf("sync=%v: the weight pinned without a budget was evicted: valid %v, %d weight bytes on the GPU",
				sync, w.(*executor.Tensor).Valid(), e.WeightBytes()[1])
		}
	}
}

// TestPinAfterPreloadKeeps: Pin of a weight already preloaded on the GPU
// fails with ErrBudget (pins are placed before the cache is in use)
// rather than returning nil with the copy left to the cache, which later
// evicted it. Synchronous and queued.
func TestPinAfterPreloadKeeps(t *testing.T) {
	const dim = 32
	m := newWeightModel(rand.New(rand.NewPCG(4, 1)), 3, dim)
	wsize := int64(len(m.ws[0]))
	for _, sync := range []bool{false, true} {
		e := gpuFirstExec(t, sync, 2*wsize)
		ws := markedWeights(t, e, m.ws)
		if err := e.Preload(ws[0], 1); err != nil {
			t.Fatal(err)
		}
		err := e.Pin(ws[0], 1)
		switch {
		case errors.Is(err, executor.ErrBudget):
		case err != nil:
			t.Fatal(err)
		default:
			t.Errorf("sync=%v: Pin of a weight cached on the GPU returned nil, want ErrBudget", sync)
		}
		if !ws[0].(*executor.Tensor).Valid().Has(1) || e.WeightBytes()[1] != wsize {
			t.Errorf("sync=%v: after Pin the preloaded copy is gone: valid %v, %d weight bytes on the GPU",
				sync, ws[0].(*executor.Tensor).Valid(), e.WeightBytes()[1])
		}
		if err != nil {
			continue
		}
		x := alloc(t, e, make([]byte, 4*dim))
		out := alloc(t, e, make([]byte, 4*dim))
		for range 40 {
			for _, l := range []int{1, 2} {
				if _, err := e.Run(m.spec(1), []backends.Buffer{x, ws[l]}, out); err != nil {
					t.Fatal(err)
				}
				settle(t, e)
			}
		}
		if !ws[0].(*executor.Tensor).Valid().Has(1) {
			t.Errorf("sync=%v: Pin returned nil, yet the pinned weight was evicted from the GPU (evictions %d)", sync, e.Stats().Evictions)
		}
	}
}

// TestUnwrittenWeightCounts: a weight never written (it reads as zeros)
// that an op reads on the GPU is counted in the budget like any weight.
func TestUnwrittenWeightCounts(t *testing.T) {
	const dim = 32
	wsize := int64(4 * dim * dim)
	for _, sync := range []bool{false, true} {
		e := gpuFirstExec(t, sync, wsize)
		u, err := e.Alloc(wsize)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.MarkWeight(u); err != nil {
			t.Fatal(err)
		}
		m := &weightModel{dim: dim}
		a := markedWeights(t, e, [][]byte{make([]byte, wsize)})[0]
		x := alloc(t, e, make([]byte, 4*dim))
		out := alloc(t, e, make([]byte, 4*dim))
		for _, w := range []backends.Buffer{u, a} {
			if _, err := e.Run(m.spec(1), []backends.Buffer{x, w}, out); err != nil {
				t.Fatal(err)
			}
			settle(t, e)
		}
		var held int64
		for _, w := range []backends.Buffer{u, a} {
			if w.(*executor.Tensor).Valid().Has(1) {
				held += wsize
			}
		}
		if wb := e.WeightBytes()[1]; wb != held || held > wsize {
			t.Errorf("sync=%v: the cache counts %d weight bytes on the GPU, the weights hold %d, budget %d", sync, wb, held, wsize)
		}
		if _, err := e.Write(u, make([]byte, wsize)); err != nil {
			t.Fatal(err)
		}
		if wb, onGPU := e.WeightBytes()[1], a.(*executor.Tensor).Valid().Has(1); onGPU && wb != wsize {
			t.Errorf("sync=%v: after Write of the unwritten weight the cache counts %d weight bytes on the GPU, which holds the other's %d", sync, wb, wsize)
		}
	}
}

// TestWeighForRegime: WeighFor takes the regimes weightcache does and
// refuses others with weightcache.ErrInvalid; a regime named before the
// caches exist is theirs when they do, and they keep what fits (the rule
// per regime: weightcache TestSavedPerRegime).
func TestWeighForRegime(t *testing.T) {
	const dim = 32
	m := newWeightModel(rand.New(rand.NewPCG(4, 1)), 2, dim)
	e := gpuFirstExec(t, false, 2*int64(len(m.ws[0])))
	for _, r := range []int{-1, weightcache.MaxRegimes} {
		if err := e.WeighFor(r); !errors.Is(err, weightcache.ErrInvalid) {
			t.Errorf("WeighFor(%d) = %v, want weightcache.ErrInvalid", r, err)
		}
	}
	if err := e.WeighFor(3); err != nil {
		t.Fatalf("WeighFor(3) = %v", err)
	}
	ws := markedWeights(t, e, m.ws)
	x := alloc(t, e, kernels.AsBytes(randF32(rand.New(rand.NewPCG(1, 1)), dim)))
	out := alloc(t, e, make([]byte, 4*dim))
	for l := range ws {
		for range 3 {
			if _, err := e.Run(m.spec(1), []backends.Buffer{x, ws[l]}, out); err != nil {
				t.Fatal(err)
			}
			settle(t, e)
		}
	}
	if err := e.WeighFor(0); err != nil {
		t.Fatalf("WeighFor(0) = %v", err)
	}
	for l := range ws {
		if !ws[l].(*executor.Tensor).Valid().Has(1) {
			t.Errorf("weight %d, used 3 times in regime 3, not kept on the GPU where both fit", l)
		}
	}
}
