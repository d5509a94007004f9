package main

import (
	"runtime"
	"testing"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// nullBackend runs nothing: its buffers are sizes, its calls return at
// once, so that a benchmark through it measures its caller alone.
type nullBackend struct{}

type nullBuffer int64

func (b nullBuffer) Size() int64 { return int64(b) }
func (nullBuffer) Free()         {}

func (*nullBackend) Info() backends.Info                    { return backends.Info{Name: "null"} }
func (*nullBackend) Supports(kernels.Spec) error            { return nil }
func (*nullBackend) Alloc(n int64) (backends.Buffer, error) { return nullBuffer(n), nil }
func (*nullBackend) Write(backends.Buffer, []byte) (backends.Timing, error) {
	return backends.Timing{}, nil
}
func (*nullBackend) Read([]byte, backends.Buffer) (backends.Timing, error) {
	return backends.Timing{}, nil
}
func (*nullBackend) Run(kernels.Spec, []backends.Buffer, backends.Buffer) (backends.Timing, error) {
	return backends.Timing{}, nil
}
func (*nullBackend) Close() error { return nil }

// newNullBatch returns a batch of one sequence of a small model on a
// nullBackend.
func newNullBatch(tb testing.TB, cfg ModelConfig) *Batch {
	m, err := NewModel(&nullBackend{}, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	bt, err := m.NewBatch(1)
	if err != nil {
		tb.Fatal(err)
	}
	return bt
}

var nullModel = ModelConfig{Dim: 64, Layers: 12, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 256, Ctx: 4096, Seed: 1}

// TestStepAllocations: a decode step hands the backend its ops' specs
// and input lists from storage the batch reuses: the step allocates a
// few things (the embedding, the next tokens), not some per op.
func TestStepAllocations(t *testing.T) {
	bt := newNullBatch(t, nullModel)
	var ops int64
	tok := []int{1}
	if _, err := bt.Step(tok, &ops); err != nil {
		t.Fatal(err)
	}
	ops = 0
	n := testing.AllocsPerRun(20, func() {
		if _, err := bt.Step(tok, &ops); err != nil {
			t.Fatal(err)
		}
	})
	if n > 8 {
		t.Errorf("a decode step of %d ops allocates %v times, want at most 8", ops/21, n) // AllocsPerRun's 20 runs and its warm-up
	}
}

// BenchmarkForwardHost is the model's own host cost of a decode step
// (Batch.Step: the op lists, specs and buffers it hands the backend), on
// a backend that runs nothing: ns/kernel, B/kernel and allocs/kernel
// are per op of the step.
func BenchmarkForwardHost(b *testing.B) {
	cfg := nullModel
	bt := newNullBatch(b, cfg)
	tok := []int{1}
	var ops int64
	if _, err := bt.Step(tok, &ops); err != nil {
		b.Fatal(err)
	}
	ops = 0
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		if bt.Pos() == cfg.Ctx {
			bt.Reset()
		}
		if _, err := bt.Step(tok, &ops); err != nil {
			b.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	n := float64(ops)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/kernel")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "B/kernel")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "allocs/kernel")
}
