package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// Bytes returns the most bytes that a model of c serving batch sequences
// holds at once, when each request fills at most positions positions of
// the KV cache (the longest -prompt + -tokens - 1) and its prompts are
// prefilled in micro-batches of ubatch tokens per sequence. Rule: the
// worst request of a run, not the ones its seed draws, and the decode
// step's buffers beside a micro-batch. Reason: a server is sized for any
// request it may get; through an Executor the first request holds no
// decode buffers while its micro-batches run (they take memory at their
// first write), a later request does. Counted are:
// the weights (weightBytes) and the embedding decoded on the host (f32,
// vocab × dim); per batch each layer's activations, the logits, the two
// buffers of greedy tokens and their host copy, the host's row buffer;
// and the KV cache (f32, batch × kv-dim × the capacity that Batch.Reserve
// gives positions, keys and values). Reserve runs at a request's position
// 0, so it copies nothing through the host, and the new caches of an
// Executor (infer's backend) take memory only at the first KVAppend,
// after the old ones are freed: one set of caches is held at once
// (TestResizeOnExecutor). A backend whose Alloc reserves memory holds
// the old set beside the new one in Reserve, at most twice kvCache
// (TestKVBytes).
//
// A micro-batch of more than one token adds microBatch, held beside all
// that while it runs: the buffers of Batch.newMicroBatch for its r =
// batch × ubatch rows (one set the layers share: 12 of width dim, 3 of
// kv-dim and 3 of ffn; and each sequence's last row), and the two host
// copies of r rows of width dim that Batch.permute holds at once, one of
// them the row buffer grown; attention's scores are computed a row at a
// time, never stored whole (TestMicroBatchBytes). Float, so that no size
// overflows.
func (c ModelConfig) Bytes(batch, ubatch, positions int) (total, kvCache, microBatch float64) {
	d, kv, ff, b := float64(c.Dim), float64(c.kvDim()), float64(c.FFN), float64(batch)
	layers, vocab := float64(c.Layers), float64(c.Vocab)
	weights := float64(c.weightBytes()) + 4*vocab*d
	kvCache = 4 * 2 * layers * b * kv * float64(c.kvCapacity(positions, kvMinCap))
	acts := 4 * b * (layers*(9*d+3*kv+3*ff) + 2*d + vocab + 3)
	rows := 4 * b * kv // the row buffer, [batch, kv-dim]
	// One token per sequence runs in the decode step's buffers.
	if ubatch > 1 {
		r := b * float64(ubatch)
		microBatch = 4 * (r*(14*d+3*kv+3*ff) + b*d)
		rows = 0 // grown to the micro-batch's rows, in microBatch
	}
	return weights + kvCache + acts + rows + microBatch, kvCache, microBatch
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

// checkMemory refuses a model and batch whose requests fill at most
// prompt + tokens - 1 positions, prefilled in micro-batches of ubatch
// tokens per sequence, that may hold more than avail bytes (Bytes, the
// worst request; when known):
// allocating them ends in the runtime's "out of memory", which no program
// can catch, or in a backend's refusal after the weights are made
// (TestMicroBatchMemoryChecked, TestShortRunHugeContext).
func checkMemory(c ModelConfig, batch, ubatch, prompt, tokens int, avail float64, known bool) error {
	positions := prompt + tokens - 1
	need, kv, mb := c.Bytes(batch, ubatch, positions)
	if !known || need <= avail {
		return nil
	}
	var acts string
	if mb > 0 {
		acts = fmt.Sprintf("; activations %s for a prompt micro-batch of %d tokens per sequence, the least of -ubatch and -prompt", gib(mb), ubatch)
	}
	return fmt.Errorf("infer: -batch %d with this model may hold up to %s (KV cache %s, %d positions a sequence for -prompt %d and -tokens %d within -ctx %d%s), more than the %s available; lower -batch, -prompt or -tokens, -ctx, -ubatch or the model's size",
		batch, gib(need), gib(kv), c.kvCapacity(positions, kvMinCap), prompt, tokens, c.Ctx, acts, gib(avail))
}

func gib(b float64) string { return strconv.FormatFloat(b/(1<<30), 'f', 1, 64) + " GiB" }
