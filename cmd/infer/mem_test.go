package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/executor"
)

// hugeCtxArgs run a model whose KV cache at the whole -ctx of 2^20 is
// 2 TiB (64 layers, batch 64, kv-dim 64, 8 bytes a position) with
// requests of positions prompt + tokens - 1.
func hugeCtxArgs(tokens string) []string {
	return []string{"-backends", "cpu,cpu1", "-dim", "64", "-layers", "64", "-heads", "2", "-kv-heads", "2", "-ffn", "64",
		"-vocab", "100", "-ctx", "1048576", "-batch", "64", "-prompt", "4", "-tokens", tokens, "-json"}
}

// TestShortRunHugeContext: a run reserves the KV positions its requests
// reach, not the whole -ctx. Requests of 4 + 8 - 1 positions reserve 64
// (128 MiB of KV cache), and the run is let through; requests of the
// whole context need the 2 TiB and are refused before anything is
// allocated, the error naming the flags that lower it.
func TestShortRunHugeContext(t *testing.T) {
	cfg := ModelConfig{Dim: 64, Layers: 64, Heads: 2, KVHeads: 2, FFN: 64, Vocab: 100, Ctx: 1 << 20, Seed: 1}
	const kv64 = 8 * 64 * 64 * 64 * 64 // 64 positions: 128 MiB
	if need, kv, _ := cfg.Bytes(64, 4, 4+8-1); kv != kv64 || need > 1<<30 {
		t.Errorf("-prompt 4 -tokens 8: Bytes %v, KV %v; want under 1 GiB, KV %v", need, kv, kv64)
	}
	if err := checkMemory(cfg, 64, 4, 4, 8, 24<<30, true); err != nil {
		t.Errorf("-prompt 4 -tokens 8 in 24 GiB: %v", err)
	}
	if err := checkMemory(cfg, 64, 4, 4, 1<<20-3, 24<<30, true); err == nil {
		t.Errorf("requests of the whole context in 24 GiB: let through")
	}
	avail, ok := availableBytes()
	if !ok || avail < 1<<30 || avail >= 2<<40 {
		t.Skipf("MemAvailable %v (%v): the test wants 1 GiB to 2 TiB", avail, ok)
	}
	var out, errb bytes.Buffer
	if err := run(context.Background(), hugeCtxArgs("8"), &out, &errb); err != nil {
		t.Fatalf("-ctx 1048576 -prompt 4 -tokens 8: %v\n%s", err, errb.String())
	}
	out.Reset()
	errb.Reset()
	code := exitCode(run(context.Background(), hugeCtxArgs("1048573"), &out, &errb), &errb)
	msg := errb.String()
	for _, want := range []string{"KV cache 2048.0 GiB", "-prompt 4", "-tokens 1048573", "-ctx 1048576", "-batch 64", "lower -batch, -prompt or -tokens, -ctx"} {
		if !strings.Contains(msg, want) {
			t.Errorf("requests of the whole context: exit %d, stderr %q; want it to name %q", code, msg, want)
		}
	}
	if code != 2 {
		t.Errorf("requests of the whole context: exit %d, want 2", code)
	}
}

// kvHeld sums the sizes of bt's KV caches.
func kvHeld(bt *Batch) float64 {
	var n int64
	for _, c := range append(append([]backends.Buffer(nil), bt.kc...), bt.vc...) {
		n += c.Size()
	}
	return float64(n)
}

// TestKVBytes: on a backend whose Alloc reserves the bytes, a request
// served as serveRequest serves it (Reserve at position 0, the prompt in
// one micro-batch, then decode steps up to positions) holds at most
// twice Bytes' kvCache at once, in Reserve (the first caches of kvMinCap
// positions beside the new ones), and never less; its caches end
// at kvCache. Bytes' total is what the backend holds at the micro-batch's
// peak after Reserve, plus the host's embedding, row buffers and token
// copy.
func TestKVBytes(t *testing.T) {
	for _, c := range []struct{ batch, ubatch, positions, ctx int }{
		{1, 1, 5, 1024}, {3, 8, 100, 1024}, {2, 4, 700, 1000}, {2, 3, 15, 16}, {1, 2, 80, 100},
	} {
		cfg := ModelConfig{Dim: 64, Layers: 2, Heads: 2, KVHeads: 1, FFN: 128, Vocab: 100, Ctx: c.ctx, Seed: 1}
		ac := &allocCounter{Backend: &nullBackend{}}
		m, err := NewModel(ac, cfg)
		if err != nil {
			t.Fatal(err)
		}
		bt, err := m.NewBatch(c.batch)
		if err != nil {
			t.Fatal(err)
		}
		total, kv, _ := cfg.Bytes(c.batch, c.ubatch, c.positions)
		others := float64(ac.live) - kvHeld(bt)
		ac.peak = ac.live
		if err := bt.Reserve(c.positions); err != nil {
			t.Fatal(err)
		}
		if held := float64(ac.peak) - others; held < kv || held > 2*kv {
			t.Errorf("%+v: Reserve held %v bytes of KV cache at once; Bytes counts %v, want it within twice", c, held, kv)
		}
		seqs := make([][]int, c.batch)
		for i := range seqs {
			seqs[i] = make([]int, c.ubatch)
		}
		ac.peak = ac.live
		if _, err := bt.Forward(seqs, nil); err != nil {
			t.Fatal(err)
		}
		host := 4 * float64(len(m.embed)+cap(bt.rowBuf)+len(bt.idx))
		if c.ubatch > 1 {
			host += 4 * float64(cap(bt.rowBuf)) // Batch.permute's copy beside the row buffer
		}
		if got := float64(ac.peak) + host; got != total {
			t.Errorf("%+v: the prompt held %v bytes at once, Bytes counts %v", c, got, total)
		}
		for bt.Pos() < c.positions {
			if _, err := bt.Step(make([]int, c.batch), nil); err != nil {
				t.Fatal(err)
			}
		}
		if held := kvHeld(bt); held != kv {
			t.Errorf("%+v: the caches hold %v bytes after %d positions, Bytes counts %v", c, held, c.positions, kv)
		}
		bt.Free()
		m.Free()
	}
}

// TestResizeOnExecutor: through an Executor, the caches that Reserve
// makes hold no memory until an op writes them, and the old ones are
// freed by then, so a resize never holds two sets of caches: not the
// first request's (its old caches never written), nor a later one's.
func TestResizeOnExecutor(t *testing.T) {
	ex, err := executor.New(executor.Config{Backends: []backends.Backend{openT(t, "cpu")}, NoCalibration: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	cfg := tiny
	cfg.Ctx = 1024
	m, err := NewModel(ex, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	bt, err := m.NewBatch(2)
	if err != nil {
		t.Fatal(err)
	}
	defer bt.Free()
	caches := func() []backends.Buffer { return append(append([]backends.Buffer(nil), bt.kc...), bt.vc...) }
	for req, positions := range []int{100, 300} {
		old := caches()
		bt.Reset()
		if err := bt.Reserve(positions); err != nil {
			t.Fatal(err)
		}
		for i, c := range append(old, caches()...) {
			if v := c.(*executor.Tensor).Valid(); v != 0 {
				t.Errorf("request %d: after Reserve, cache %d of the old and new ones holds copies at %v, want none", req, i, v)
			}
		}
		if _, err := bt.Forward([][]int{{5, 9, 33}, {17, 2, 60}}, nil); err != nil {
			t.Fatal(err)
		}
		for i, c := range caches() {
			if c.(*executor.Tensor).Valid() == 0 {
				t.Errorf("request %d: cache %d holds no copy after the prompt", req, i)
			}
		}
	}
}
