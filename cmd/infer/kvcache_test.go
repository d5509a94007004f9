package main

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"testing"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/backends/rocm"
	"github.com/adaptsched/adaptsched/executor"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/sim"
)

// kvGolden is testdata/kvcache_golden.json: the greedy tokens and the
// logits of a prompt of 3 tokens and 10 decode steps of tiny at batch 2
// on "cpu", recorded from the decoder that kept its KV cache in host
// memory and packed it for every attention.
type kvGolden struct {
	Tokens [][]int
	Logits [][]float32
}

// TestKVCacheMatchesHostCache: the decoder with its KV cache on the
// backend (KVAppend in place, attention over Keys positions) gives the
// host-cache decoder's tokens, and its logits within float tolerance, on
// the CPU path: a prompt micro-batch, then decode steps.
func TestKVCacheMatchesHostCache(t *testing.T) {
	if bt := matchKVGolden(t, openT(t, "cpu"), kvMinCap); bt.kvCap != tiny.Ctx {
		t.Errorf("KV capacity %d, want the context's %d (below kvMinCap)", bt.kvCap, tiny.Ctx)
	}
}

// TestKVCacheGrows: KV caches that start at 2 positions and double as the
// positions need it (2, 4, 8, 16: three growths with positions to keep,
// the first in the prompt) give the same tokens and logits, on the CPU,
// through an Executor over two simulated devices (the caches moving
// between them) and on the CPU where a growth's read fails once (every
// cache stays as it was, and the step taken again goes on), and end at
// the context's capacity, each cache that size.
func TestKVCacheGrows(t *testing.T) {
	var bes []backends.Backend
	for _, p := range []string{"cpu2", "h100"} {
		d, err := sim.Open(p, sim.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		bes = append(bes, d)
	}
	ex, err := executor.New(executor.Config{Backends: bes, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	cpu := openT(t, "cpu")
	for name, be := range map[string]backends.Backend{"cpu": cpu, "executor": ex, "a failing read": &failingReads{Backend: cpu, size: 2 * 2 * 4 * 16 * 4}} {
		bt := matchKVGolden(t, be, 2)
		if f, ok := be.(*failingReads); ok && f.reads < 2 {
			t.Errorf("%s: %d reads of a cache of 4 positions, want a second one, failed", name, f.reads)
		}
		if bt.kvCap != tiny.Ctx {
			t.Errorf("%s: KV capacity %d after 13 positions, want %d", name, bt.kvCap, tiny.Ctx)
		}
		for _, c := range append(append([]backends.Buffer(nil), bt.kc...), bt.vc...) {
			if c.Size() != bt.kvBytes(tiny.Ctx) {
				t.Errorf("%s: a KV cache of %d bytes, want %d", name, c.Size(), bt.kvBytes(tiny.Ctx))
			}
		}
	}
}

// failingReads fails the second read of size bytes into host memory (a
// KV cache of tiny at batch 2 and 4 positions), once.
type failingReads struct {
	backends.Backend
	size, reads int
	failed      bool
}

func (f *failingReads) Read(dst []byte, src backends.Buffer) (backends.Timing, error) {
	if len(dst) == f.size {
		if f.reads++; f.reads == 2 {
			f.failed = true
			return backends.Timing{}, errors.New("a read that fails")
		}
	}
	return f.Backend.Read(dst, src)
}

// matchKVGolden runs testdata/kvcache_golden.json's prompt and steps on
// be with KV caches of kvCap positions at first, checks its tokens and
// logits, and returns the batch (freed at the test's end).
func matchKVGolden(t *testing.T, be backends.Backend, kvCap int) *Batch {
	t.Helper()
	b, err := os.ReadFile("testdata/kvcache_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var want kvGolden
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	m, err := NewModel(be, tiny)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Free)
	bt, err := m.newBatch(2, kvCap)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bt.Free)
	bt.KeepLogits = true
	next, err := bt.Forward([][]int{{5, 9, 33}, {17, 2, 60}}, nil)
	for s := range want.Tokens {
		if s > 0 {
			cur := next
			next, err = bt.Step(cur, nil)
			if f, ok := be.(*failingReads); ok && err != nil && f.failed {
				// A growth failed: every cache is as it was, and the
				// step, taken again, goes on from where it stood.
				f.failed = false
				for _, c := range append(append([]backends.Buffer(nil), bt.kc...), bt.vc...) {
					if c.Size() != bt.kvBytes(bt.kvCap) || bt.kvCap != 4 {
						t.Fatalf("after a failed growth: a cache of %d bytes, capacity %d, want %d bytes, 4", c.Size(), bt.kvCap, bt.kvBytes(4))
					}
				}
				next, err = bt.Step(cur, nil)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		if next[0] != want.Tokens[s][0] || next[1] != want.Tokens[s][1] {
			t.Fatalf("step %d: tokens %v, want %v", s, next, want.Tokens[s])
		}
		for i, w := range want.Logits[s] {
			if d := math.Abs(float64(bt.Logits[i] - w)); d > 1e-4*(1+math.Abs(float64(w))) {
				t.Fatalf("step %d logit %d: %v, want %v", s, i, bt.Logits[i], w)
			}
		}
	}
	return bt
}

// readCounter counts the reads into host memory that a model makes of
// its backend, and their bytes.
type readCounter struct {
	backends.Backend
	reads, bytes int
}

func (r *readCounter) Read(dst []byte, src backends.Buffer) (backends.Timing, error) {
	r.reads++
	r.bytes += len(dst)
	return r.Backend.Read(dst, src)
}

// TestDecodeStepReadsOnce: a decode step with every op on a simulated
// GPU (async model) reads back only its greedy tokens (Argmax runs on the
// GPU: 4 bytes a sequence, not its logits), once per step, and the
// host waits for the device once per step, whatever the number of
// layers: no layer's keys, values or activations come back to the host
// (the KV cache stays where attention runs). Synchronous Executor alike
// for the reads.
func TestDecodeStepReadsOnce(t *testing.T) {
	for _, layers := range []int{1, 3} {
		for _, syncExec := range []bool{false, true} {
			tl := sim.NewTimeline(sim.Async)
			open := func(p string) backends.Backend {
				d, err := sim.Open(p, sim.DefaultOptions().WithTimeline(tl))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { d.Close() })
				return d
			}
			e, err := executor.New(executor.Config{Backends: []backends.Backend{open("cpu2"), open("h100")},
				Strategy: adaptive.Only("sim:h100"), NoCalibration: true, Seed: 1, Synchronous: syncExec})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			rc := &readCounter{Backend: e}
			cfg := tiny
			cfg.Layers = layers
			m, err := NewModel(rc, cfg)
			if err != nil {
				t.Fatal(err)
			}
			bt, err := m.NewBatch(2)
			if err != nil {
				t.Fatal(err)
			}
			cur := []int{5, 17}
			for step := range 4 {
				reads, bytes, before := rc.reads, rc.bytes, tl.Stats()
				if cur, err = bt.Step(cur, nil); err != nil {
					t.Fatal(err)
				}
				if got, b := rc.reads-reads, rc.bytes-bytes; got != 1 || b != 4*2 {
					t.Errorf("%d layers, sync %v, step %d: %d reads into host memory of %d bytes, want 1 of 8 (2 tokens)", layers, syncExec, step, got, b)
				}
				if syncs := tl.Stats().Syncs - before.Syncs; !syncExec && step > 0 && syncs != 1 {
					t.Errorf("%d layers, step %d: the host waited for the device %d times, want once", layers, step, syncs)
				}
			}
			bt.Free()
			m.Free()
		}
	}
}

// alternator is a placement that moves the KV cache every step: Attention
// and KVAppend run on the CPU (backend 0) at even positions and on the
// simulated GPU (backend 1) at odd ones; everything else on the GPU.
type alternator struct{}

func (alternator) Name() string                             { return "alternator" }
func (alternator) Observed(adaptive.BucketID, int, float64) {}
func (alternator) Place(s kernels.Spec, _ adaptive.Residency, _ adaptive.BucketID) int {
	switch s.Op {
	case kernels.Attention:
		return (s.Params.Keys - 1) % 2
	case kernels.KVAppend:
		return s.Params.Pos % 2
	}
	return 1
}

// TestKVCacheFollowsAttention: when the placement moves attention (and
// the cache's appends) to another backend between steps, the Executor
// moves the cache with it, and the logits match the plain CPU backend's
// at every step, queued and synchronous.
func TestKVCacheFollowsAttention(t *testing.T) {
	const steps = 6
	want := decode(t, openT(t, "cpu"), steps)
	for _, syncExec := range []bool{false, true} {
		e, err := executor.New(executor.Config{Backends: []backends.Backend{openT(t, "cpu"), openT(t, "sim:h100")},
			Placer: alternator{}, NoCalibration: true, Seed: 1, Synchronous: syncExec})
		if err != nil {
			t.Fatal(err)
		}
		got := decode(t, e, steps)
		for s := range steps {
			for i, w := range want[s] {
				if d := math.Abs(float64(got[s][i] - w)); d > 2e-3*(1+math.Abs(float64(w))) {
					t.Fatalf("sync %v step %d logit %d: %v, want %v", syncExec, s, i, got[s][i], w)
				}
			}
		}
		st := e.Stats().Backends
		if st[0].Ops == 0 || st[1].CopiesIn == 0 {
			t.Errorf("sync %v: the cache never moved: %+v", syncExec, st)
		}
		e.Close()
	}
}

// TestRealGPUDecodeMatchesCPU runs the decoder through the Executor with
// every op on the real GPU (skipped without one): KVAppend in place in
// device memory and attention over its Keys, queued, synchronous, and
// gathered (each step recorded and replayed as one graph, its position
// and count of keys updated), give the plain CPU backend's logits at
// every step.
func TestRealGPUDecodeMatchesCPU(t *testing.T) {
	gpu, err := backends.Open("rocm")
	if err != nil {
		t.Skipf("no GPU: %v", err)
	}
	defer gpu.Close()
	const steps = 8
	want := decode(t, openT(t, "cpu"), steps)
	for _, mode := range []string{"queued", "sync", "gathered"} {
		e, err := executor.New(executor.Config{Backends: []backends.Backend{openT(t, "cpu"), gpu},
			Strategy: adaptive.Only("rocm"), NoCalibration: true, Seed: 1, Synchronous: mode == "sync"})
		if err != nil {
			t.Fatal(err)
		}
		var got [][]float32
		if mode == "gathered" {
			got = decodeSteps(t, e, steps, e)
			st := gpu.(interface{ Graphs() rocm.GraphStats }).Graphs()
			t.Logf("graphs: %+v", st)
			if st.Launches < steps || st.Builds+st.Replays+st.OneByOne < st.Launches {
				t.Errorf("gathered: %+v, want a launch per step", st)
			}
		} else {
			got = decode(t, e, steps)
		}
		for s := range steps {
			for i, w := range want[s] {
				if d := math.Abs(float64(got[s][i] - w)); d > 2e-3*(1+math.Abs(float64(w))) {
					t.Fatalf("%s step %d logit %d: %v, want %v", mode, s, i, got[s][i], w)
				}
			}
		}
		if st := e.Stats().Backends; st[1].Ops == 0 || st[0].Ops != 0 {
			t.Errorf("%s: ops cpu %d, gpu %d: want every op on the GPU", mode, st[0].Ops, st[1].Ops)
		}
		e.Close()
	}
}
