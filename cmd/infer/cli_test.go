package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/history"
	"github.com/adaptsched/adaptsched/learned"
	"github.com/rs/zerolog"
)

// tinyArgs run a model small enough for a test.
var tinyArgs = []string{"-backends", "cpu,cpu1", "-tokens", "2", "-batch", "1", "-requests", "1", "-prompt", "2", "-ubatch", "1",
	"-dim", "64", "-layers", "1", "-heads", "4", "-kv-heads", "2", "-ffn", "64", "-vocab", "50", "-ctx", "8", "-json"}

// -h describes the program and is no error (main exits 0 on
// flag.ErrHelp); a stray argument is refused.
func TestHelpAndStrayArgs(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, &out, &errb); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v, want flag.ErrHelp", err)
	}
	if !strings.HasPrefix(errb.String(), "usage: infer [flags]\n\ninfer decodes batches") || !strings.Contains(errb.String(), "-reset-damaged-store") {
		t.Errorf("-h printed %q", errb.String())
	}
	errb.Reset()
	err := run(context.Background(), append(append([]string{}, tinyArgs...), "extra"), &out, &errb)
	if err == nil || !strings.Contains(err.Error(), `unexpected argument "extra"`) {
		t.Errorf("stray argument: %v", err)
	}
}

// -batch 100000 of the default model, its requests filling the
// context, needs 1.2 TiB; it is refused before anything is allocated (it
// died with "fatal error: runtime: out of memory").
func TestMemoryChecked(t *testing.T) {
	need, kv, _ := DefaultModel.Bytes(100000, 4, 512)
	if kv != 4*2*12*100000*256*512 || need < kv {
		t.Errorf("Bytes(100000, 4, 512) = %v, KV %v", need, kv)
	}
	err := checkMemory(DefaultModel, 100000, 4, 4, 509, 64<<30, true)
	if err == nil || !strings.Contains(err.Error(), "-batch 100000") || !strings.Contains(err.Error(), "64.0 GiB available") {
		t.Errorf("checkMemory: %v", err)
	}
	if err := checkMemory(DefaultModel, 1, 4, 4, 509, 64<<30, true); err != nil {
		t.Errorf("batch 1 in 64 GiB: %v", err)
	}
	if _, ok := availableBytes(); ok {
		var out, errb bytes.Buffer
		err := run(context.Background(), []string{"-batch", "100000", "-tokens", "509"}, &out, &errb)
		if err == nil || !strings.Contains(err.Error(), "available") {
			t.Errorf("run -batch 100000: %v", err)
		}
	}
}

// damagedStore returns a store directory whose MANIFEST is gone.
func damagedStore(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "db")
	db, err := history.Open(history.DefaultOptions(dir).WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	db.Put(learned.Key{Backend: "cpu", Bucket: "b"}, bandit.NewPrior(10, 1, 0.2))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "MANIFEST")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Infer's stderr holds no JSON: nothing at all on a good run
// (the CPU backend's matmul line was a JSON info line before any error),
// the error alone for a damaged store, and a plain warning line when
// -reset-damaged-store moves it aside.
func TestStderrPlain(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run(context.Background(), tinyArgs, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if errb.Len() != 0 {
		t.Errorf("stderr of a good run: %q", errb.String())
	}
	dir := damagedStore(t)
	out.Reset()
	err := run(context.Background(), append(append([]string{}, tinyArgs...), "-db", dir), &out, &errb)
	if !errors.Is(err, history.ErrDamaged) || !strings.Contains(err.Error(), dir) {
		t.Errorf("damaged store: %v", err)
	}
	if errb.Len() != 0 {
		t.Errorf("stderr before the error: %q", errb.String())
	}
	out.Reset()
	err = run(context.Background(), append(append([]string{}, tinyArgs...), "-db", dir, "-reset-damaged-store"), &out, &errb)
	if err != nil {
		t.Fatal(err)
	}
	if s := errb.String(); !strings.HasPrefix(s, "WRN history: the store was damaged; moved it aside") || strings.Contains(s, "{") || strings.Contains(s, "\x1b[") {
		t.Errorf("stderr with -reset-damaged-store: %q", s)
	}
}

// TestWriteErrorsReachExit: a trace or stdout on a full device ends in an
// error naming what failed, with and without -json.
func TestWriteErrorsReachExit(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full here: %v", err)
	}
	defer full.Close()
	base := []string{"-backends", "cpu,sim:h100", "-tokens", "2", "-prompt", "1",
		"-dim", "64", "-layers", "1", "-heads", "4", "-kv-heads", "2", "-ffn", "64", "-vocab", "50", "-ctx", "8"}
	for _, c := range []struct {
		name  string
		extra []string
		out   io.Writer
		want  string
	}{
		{"trace", []string{"-trace", "/dev/full", "-json"}, io.Discard, "trace /dev/full"},
		{"stdout-json", []string{"-json"}, full, "writing the output"},
		{"stdout-table", nil, full, "writing the output"},
		{"stdout-stream", []string{"-stream", "-db", t.TempDir()}, full, "writing the output"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var errb bytes.Buffer
			err := run(context.Background(), append(append([]string(nil), base...), c.extra...), c.out, &errb)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "no space left") {
				t.Fatalf("error %v, want one naming %q and the cause\n%s", err, c.want, errb.String())
			}
		})
	}
}

// TestContextBoundary: a request uses -prompt + -tokens - 1 positions of
// the KV cache (its last generated token is never fed back), so the
// largest -tokens that fits -ctx 16 after a prompt of 4 is 13: it runs,
// under the learner and with every step placed (gathered, overlapped),
// and one more is refused naming the flags.
func TestContextBoundary(t *testing.T) {
	base := []string{"-backends", "sim:cpu2,sim:h100", "-ctx", "16", "-prompt", "4", "-ubatch", "2", "-batch", "2", "-requests", "2",
		"-dim", "64", "-layers", "1", "-heads", "2", "-kv-heads", "1", "-ffn", "128", "-vocab", "100", "-json"}
	for _, strategy := range []string{"auto", "only:sim:h100"} {
		var out, errb bytes.Buffer
		if err := run(context.Background(), append(append([]string{}, base...), "-strategy", strategy, "-tokens", "13"), &out, &errb); err != nil {
			t.Fatalf("%s, -tokens 13: %v\n%s", strategy, err, errb.String())
		}
		var s Summary
		if err := json.Unmarshal(out.Bytes(), &s); err != nil {
			t.Fatalf("%v: %q", err, out.String())
		}
		if s.Tokens != 2*2*13 {
			t.Errorf("%s, -tokens 13: %d tokens, want %d", strategy, s.Tokens, 2*2*13)
		}
	}
	var out, errb bytes.Buffer
	code := exitCode(run(context.Background(), append(append([]string{}, base...), "-tokens", "14"), &out, &errb), &errb)
	want := "infer: -prompt 4 and -tokens 14 need 17 positions of the KV cache, more than -ctx 16"
	if code != 2 || !strings.HasPrefix(errb.String(), want) {
		t.Errorf("-tokens 14: exit %d, stderr %q; want 2 and %q", code, errb.String(), want)
	}
}

// TestMicroBatchMemoryChecked: a prompt micro-batch's activations exist
// beside the weights and the KV cache. A model of one layer with an FFN
// of 2^18 needs about 0.5 GB for those and its decode step, but a
// micro-batch of 1048575 prompt tokens needs about 3.3 TB more: refused
// before anything runs (no -trace file), with the error naming -ubatch.
// The same model with a prompt of 4 tokens (a micro-batch of 4, -ubatch
// as large) still runs.
func TestMicroBatchMemoryChecked(t *testing.T) {
	avail, ok := availableBytes()
	if !ok || avail < 2<<30 || avail > 2<<40 {
		t.Skipf("MemAvailable %v (%v): the test wants 2 GiB to 2 TiB", avail, ok)
	}
	trace := filepath.Join(t.TempDir(), "t.jsonl")
	args := func(prompt string) []string {
		return []string{"-backends", "sim:cpu2,sim:h100", "-dim", "64", "-layers", "1", "-heads", "2", "-kv-heads", "1", "-ffn", "262144",
			"-vocab", "100", "-ctx", "1048576", "-prompt", prompt, "-ubatch", "1048575", "-tokens", "2", "-json", "-trace", trace}
	}
	var out, errb bytes.Buffer
	code := exitCode(run(context.Background(), args("1048575"), &out, &errb), &errb)
	if code != 2 || !strings.Contains(errb.String(), "a prompt micro-batch of 1048575 tokens per sequence") || !strings.Contains(errb.String(), "-ubatch") {
		t.Errorf("a micro-batch beyond memory: exit %d, stderr %q; want 2 and an error naming the micro-batch and -ubatch", code, errb.String())
	}
	if _, err := os.Stat(trace); !os.IsNotExist(err) {
		t.Errorf("the refused run made its trace: %v", err)
	}
	out.Reset()
	errb.Reset()
	if err := run(context.Background(), args("4"), &out, &errb); err != nil {
		t.Fatalf("a micro-batch of 4 tokens: %v\n%s", err, errb.String())
	}
}

// allocCounter counts the bytes of the buffers allocated on its backend
// and not freed: live now, and peak, the most at once.
type allocCounter struct {
	backends.Backend
	live, peak int64
}

type countedBuffer struct {
	backends.Buffer
	c     *allocCounter
	freed bool
}

func (b *countedBuffer) Free() {
	if !b.freed {
		b.freed = true
		b.c.live -= b.Size()
	}
	b.Buffer.Free()
}

func (c *allocCounter) Alloc(n int64) (backends.Buffer, error) {
	b, err := c.Backend.Alloc(n)
	if err != nil {
		return nil, err
	}
	c.live += n
	c.peak = max(c.peak, c.live)
	return &countedBuffer{Buffer: b, c: c}, nil
}

// TestMicroBatchBytes: Bytes' microBatch is what a prompt micro-batch
// holds beside the batch's own buffers: the most bytes its Forward has
// allocated on the backend at once, and the host rows of Batch.permute
// (the batch's row buffer, grown to the micro-batch's rows, and its copy
// of the query); all freed after it, and nothing for one token.
func TestMicroBatchBytes(t *testing.T) {
	cfg := ModelConfig{Dim: 64, Layers: 2, Heads: 2, KVHeads: 1, FFN: 128, Vocab: 100, Ctx: kvMinCap, Seed: 1}
	for _, c := range []struct{ batch, tokens int }{{1, 1}, {1, 5}, {3, 8}} {
		ac := &allocCounter{Backend: &nullBackend{}}
		m, err := NewModel(ac, cfg)
		if err != nil {
			t.Fatal(err)
		}
		bt, err := m.NewBatch(c.batch) // caches of the whole context: they never grow
		if err != nil {
			t.Fatal(err)
		}
		seqs := make([][]int, c.batch)
		for i := range seqs {
			seqs[i] = make([]int, c.tokens)
		}
		before := ac.live
		ac.peak = before
		if _, err := bt.Forward(seqs, nil); err != nil {
			t.Fatal(err)
		}
		got := float64(ac.peak - before)
		if rows := c.batch * c.tokens * cfg.Dim; c.tokens > 1 {
			if cap(bt.rowBuf) != rows {
				t.Errorf("%+v: the row buffer holds %d floats, want the micro-batch's %d", c, cap(bt.rowBuf), rows)
			}
			got += 4 * 2 * float64(rows)
		}
		if _, _, want := cfg.Bytes(c.batch, c.tokens, cfg.Ctx); got != want || ac.live != before {
			t.Errorf("%+v: a micro-batch held %v bytes, Bytes counts %v; %d bytes left after it", c, got, want, ac.live-before)
		}
	}
}
