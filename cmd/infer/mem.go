package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// Bytes returns the bytes that a model of c serving batch sequences,
// their prompts prefilled in micro-batches of ubatch tokens per
// sequence, allocates at least: Q8_0 weights (34 bytes per 32 values)
// and f32 norms, and per batch each layer's activations and its KV cache
// (f32, batch × kv-dim × ctx, keys and values), the logits on the backend
// and their greedy tokens. A micro-batch of more than one token adds
// microBatch, held beside all that while it runs: the buffers of
// Batch.newMicroBatch for its r = batch × ubatch rows (one set the layers
// share: 12 of width dim, 3 of kv-dim and 3 of ffn; and each sequence's
// last row), and the two host copies of r rows of width dim that
// Batch.permute holds at once; attention's scores are computed a row at
// a time, never stored whole (TestMicroBatchBytes). Float, so that no
// size overflows.
func (c ModelConfig) Bytes(batch, ubatch int) (total, kvCache, microBatch float64) {
	d, kv, ff, b := float64(c.Dim), float64(c.kvDim()), float64(c.FFN), float64(batch)
	layers, ctx, vocab := float64(c.Layers), float64(c.Ctx), float64(c.Vocab)
	weights := float64(c.Params()) * 34 / 32
	kvCache = 4 * 2 * layers * b * kv * ctx
	acts := 4 * b * (layers*(9*d+3*kv+3*ff) + 2*d + vocab + 1 + kv)
	if ubatch > 1 { // one token per sequence runs in the decode step's buffers
		r := b * float64(ubatch)
		microBatch = 4 * (r*(14*d+3*kv+3*ff) + b*d)
	}
	return weights + kvCache + acts + microBatch, kvCache, microBatch
}

// availableBytes is the memory the system can give without swapping
// (Linux's MemAvailable), or false where it cannot be read.
func availableBytes() (float64, bool) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) >= 2 && string(f[0]) == "MemAvailable:" {
			kb, err := strconv.ParseFloat(string(f[1]), 64)
			return kb * 1024, err == nil
		}
	}
	return 0, false
}

// checkMemory refuses a model and batch, prefilled in micro-batches of
// ubatch tokens per sequence, that need more than avail bytes (when
// known): allocating them ends in the runtime's "out of memory", which no
// program can catch, or in a backend's refusal after the weights are made
// (TestMicroBatchMemoryChecked).
func checkMemory(c ModelConfig, batch, ubatch int, avail float64, known bool) error {
	need, kv, mb := c.Bytes(batch, ubatch)
	if !known || need <= avail {
		return nil
	}
	var acts string
	if mb > 0 {
		acts = fmt.Sprintf("; activations %s for a prompt micro-batch of %d tokens per sequence, the least of -ubatch and -prompt", gib(mb), ubatch)
	}
	return fmt.Errorf("infer: -batch %d with this model needs at least %s (KV cache %s for -ctx %d%s), more than the %s available; lower -batch, -ubatch, -ctx or the model's size",
		batch, gib(need), gib(kv), c.Ctx, acts, gib(avail))
}

func gib(b float64) string { return strconv.FormatFloat(b/(1<<30), 'f', 1, 64) + " GiB" }
