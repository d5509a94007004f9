package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// Bytes returns the bytes that a model of c serving batch sequences
// allocates, at least: Q8_0 weights (34 bytes per 32 values) and f32
// norms, and per batch each layer's activations and its KV cache (f32,
// batch × kv-dim × ctx, keys and values), the logits on the backend and
// their greedy tokens. Float, so that no size overflows.
func (c ModelConfig) Bytes(batch int) (total, kvCache float64) {
	d, kv, ff, b := float64(c.Dim), float64(c.kvDim()), float64(c.FFN), float64(batch)
	layers, ctx, vocab := float64(c.Layers), float64(c.Ctx), float64(c.Vocab)
	weights := float64(c.Params()) * 34 / 32
	kvCache = 4 * 2 * layers * b * kv * ctx
	acts := 4 * b * (layers*(9*d+3*kv+3*ff) + 2*d + vocab + 1 + kv)
	return weights + kvCache + acts, kvCache
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

// checkMemory refuses a model and batch that need more than avail bytes
// (when known): allocating them ends in the runtime's "out of memory",
// which no program can catch.
func checkMemory(c ModelConfig, batch int, avail float64, known bool) error {
	need, kv := c.Bytes(batch)
	if !known || need <= avail {
		return nil
	}
	return fmt.Errorf("infer: -batch %d with this model needs at least %s (KV cache %s for -ctx %d), more than the %s available; lower -batch, -ctx or the model's size",
		batch, gib(need), gib(kv), c.Ctx, gib(avail))
}

func gib(b float64) string { return strconv.FormatFloat(b/(1<<30), 'f', 1, 64) + " GiB" }
