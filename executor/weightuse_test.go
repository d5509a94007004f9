package executor

import (
	"context"
	"math"
	"testing"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	_ "github.com/adaptsched/adaptsched/backends/cpu"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/sim"
)

// TestRetryCountsWeightOnce: an op whose first try fails on a GPU (a
// transient error) and runs again elsewhere counts its weight's use once:
// one tick of the caches' clock, and at most one use in each budgeted
// GPU's cache. Queued (re-run by the recovery) and synchronous
// (fallback).
func TestRetryCountsWeightOnce(t *testing.T) {
	const dim = 16
	for _, sync := range []bool{false, true} {
		cpu, err := backends.Open("cpu")
		if err != nil {
			t.Fatal(err)
		}
		defer cpu.Close()
		gpu, err := sim.Open("h100", sim.DefaultOptions().WithEvents(sim.Event{At: 0, Kind: sim.TransientError, Span: 1}))
		if err != nil {
			t.Fatal(err)
		}
		defer gpu.Close()
		gpu2, err := sim.Open("mi300x", sim.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		defer gpu2.Close()
		e, err := New(Config{Backends: []backends.Backend{cpu, gpu, gpu2}, NoCalibration: true, Seed: 1,
			Strategy: adaptive.GPUPreferred, Synchronous: sync, WeightBudget: []int64{-1, 1 << 20, 1 << 20}})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		buf := func(n int64) backends.Buffer {
			b, err := e.Alloc(n)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.Write(b, make([]byte, n)); err != nil {
				t.Fatal(err)
			}
			return b
		}
		w, x, out := buf(4*dim*dim), buf(4*dim), buf(4*dim)
		if err := e.MarkWeight(w); err != nil {
			t.Fatal(err)
		}
		spec := kernels.Spec{Op: kernels.MatMul, In: []kernels.Shape{{1, dim}, {dim, dim}}}
		if _, err := e.Run(spec, []backends.Buffer{x, w}, out); err != nil {
			t.Fatal(err)
		}
		if err := e.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		st := e.Stats()
		if st.Fallbacks != 1 || st.Backends[1].Failures != 1 {
			t.Fatalf("sync=%v: want one op that failed on %s and fell back: %+v", sync, st.Backends[1].Name, st)
		}
		e.wc.mu.Lock()
		defer e.wc.mu.Unlock()
		if e.wc.tick != 1 {
			t.Errorf("sync=%v: one op's use of its weight ticked the clock %d times", sync, e.wc.tick)
		}
		for a := 1; a < 3; a++ {
			if r := e.wc.rule[a]; r != nil {
				if u := r.Uses(w.(*Tensor).wuse.id, e.step()); u > 1.01 {
					t.Errorf("sync=%v: one op's use of its weight counted %.2f times in %s's cache", sync, u, e.s.BackendName(a))
				}
			}
		}
	}
}

// TestWantedCopyCountsOnce: the use whose copy a cache wants before the
// op (copyWanted) counts once there, as every other: each of 60 ops
// reading a 4 MiB weight on the CPU adds one use to the GPU's cache,
// which copies the weight in before one of them (TestWeightCopiedBeforeOp's
// setting). Queued and synchronous.
func TestWantedCopyCountsOnce(t *testing.T) {
	const dim = 1024
	for _, sync := range []bool{false, true} {
		var bes []backends.Backend
		for _, name := range []string{"sim:desktop16", "sim:pcie3x8"} {
			b, err := backends.Open(name)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			bes = append(bes, b)
		}
		e, err := New(Config{Backends: bes, NoCalibration: true, Seed: 1, Strategy: adaptive.Only("sim:desktop16"),
			Synchronous: sync, WeightBudget: []int64{-1, 4 * dim * dim}})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		buf := func(n int64) backends.Buffer {
			b, err := e.Alloc(n)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.Write(b, make([]byte, n)); err != nil {
				t.Fatal(err)
			}
			return b
		}
		w, x, out := buf(4*dim*dim), buf(4*dim), buf(4*dim)
		if err := e.MarkWeight(w); err != nil {
			t.Fatal(err)
		}
		id := w.(*Tensor).wuse.id
		uses := func(now float64) float64 {
			e.wc.mu.Lock()
			defer e.wc.mu.Unlock()
			if r := e.wc.rule[1]; r != nil {
				return r.Uses(id, now)
			}
			return 0
		}
		spec := kernels.Spec{Op: kernels.MatMul, In: []kernels.Shape{{1, dim}, {dim, dim}}}
		for i := range 60 {
			now := float64(i + 1) // one weight: a step per use
			before := uses(now)
			if _, err := e.Run(spec, []backends.Buffer{x, w}, out); err != nil {
				t.Fatal(err)
			}
			if err := e.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			// copyWanted counts its use before the op ticks the clock:
			// a step early, so a little less.
			if got := uses(now) - before; math.Abs(got-1) > 0.05 {
				t.Errorf("sync=%v: use %d counted %.2f times in the GPU's cache (held there: %v)", sync, i+1, got, w.(*Tensor).Valid().Has(1))
			}
		}
		if !w.(*Tensor).Valid().Has(1) {
			t.Errorf("sync=%v: the GPU's cache never took the weight", sync)
		}
	}
}
