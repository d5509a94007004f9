package main

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// ModelConfig is the shape of the decoder-only transformer: Llama-style
// (RMSNorm, RoPE, grouped-query attention with a KV cache, SwiGLU FFN),
// matmul weights in Q8_0, norms in f32, output tied to the embedding.
type ModelConfig struct {
	Dim, Layers, Heads, KVHeads, FFN, Vocab, Ctx int
	Seed                                         uint64
	// Experts > 0 makes every FFN a mixture of that many experts (each
	// an FFN of width FFN), TopK of them per token (-moe E,K).
	Experts, TopK int
}

// DefaultModel is about 100M parameters (100.1M: see Params).
var DefaultModel = ModelConfig{Dim: 768, Layers: 12, Heads: 12, KVHeads: 4, FFN: 2048, Vocab: 32000, Ctx: 512, Seed: 1}

var errModel = errors.New("infer: invalid model config")

// The largest sizes a model may have: maxSize of -dim, -heads, -kv-heads,
// -ffn, -vocab and -ctx, maxLayers of -layers and maxExperts of -moe's
// E, so that no count of parameters or bytes overflows int64. The
// largest, Params, is L(2d² + 2d·kv + 3d·f·E + 2d) + V·d + d, at most
// 2^12(2^42 + 3·2^48 + 2^21) + 2^41 < 2^62; a -dim of 2^31 wrapped it
// negative past checkMemory into the runtime's out of memory
// (TestModelTooLarge).
const (
	maxSize    = 1 << 20
	maxLayers  = 1 << 12
	maxExperts = 1 << 8
)

func (c ModelConfig) validate() error {
	for _, f := range []struct {
		flag    string
		v, most int
	}{
		{"-dim", c.Dim, maxSize}, {"-layers", c.Layers, maxLayers}, {"-heads", c.Heads, maxSize},
		{"-kv-heads", c.KVHeads, maxSize}, {"-ffn", c.FFN, maxSize}, {"-vocab", c.Vocab, maxSize},
		{"-ctx", c.Ctx, maxSize}, {"-moe's E", c.Experts, maxExperts},
	} {
		if f.v > f.most {
			return fmt.Errorf("%w: %s %d is too large (at most %d)", errModel, f.flag, f.v, f.most)
		}
	}
	switch {
	case c.Dim <= 0 || c.Layers <= 0 || c.Heads <= 0 || c.KVHeads <= 0 || c.FFN <= 0 || c.Vocab <= 0 || c.Ctx <= 0:
		return fmt.Errorf("%w: every size must be positive: %+v", errModel, c)
	case c.Dim%c.Heads != 0 || (c.Dim/c.Heads)%2 != 0:
		return fmt.Errorf("%w: dim %d is not an even head size times %d heads", errModel, c.Dim, c.Heads)
	case c.Heads%c.KVHeads != 0:
		return fmt.Errorf("%w: %d KV heads do not divide %d heads", errModel, c.KVHeads, c.Heads)
	case c.Dim%kernels.QK != 0 || c.FFN%kernels.QK != 0:
		return fmt.Errorf("%w: dim %d and ffn %d must be multiples of %d (Q8_0 blocks)", errModel, c.Dim, c.FFN, kernels.QK)
	case c.Experts < 0 || (c.Experts > 0 && (c.TopK < 1 || c.TopK > c.Experts)):
		return fmt.Errorf("%w: %d experts, top %d: want 1 <= top <= experts", errModel, c.Experts, c.TopK)
	}
	return nil
}

func (c ModelConfig) headDim() int { return c.Dim / c.Heads }
func (c ModelConfig) kvDim() int   { return c.KVHeads * c.headDim() }

// Params returns the parameter count (the tied output counted once).
func (c ModelConfig) Params() int64 {
	d, kv, f := int64(c.Dim), int64(c.kvDim()), int64(c.FFN)
	layer := 2*d*d + 2*d*kv + 3*d*f*int64(max(c.Experts, 1)) + 2*d
	return int64(c.Layers)*layer + int64(c.Vocab)*d + d
}

// weightBytes returns the bytes of the model's weights (Q8_0 matrices
// of 34 bytes per 32 values, f32 norms), as NewModel lays them out.
func (c ModelConfig) weightBytes() int64 {
	q8 := func(rows, cols int) int64 { return int64(rows) * int64(cols) / kernels.QK * 34 }
	d, kv, f := c.Dim, c.kvDim(), c.FFN
	layer := 2*q8(d, d) + 2*q8(kv, d) + 3*q8(f, d)*int64(max(c.Experts, 1)) + 2*4*int64(d)
	return int64(c.Layers)*layer + 4*int64(d) + q8(c.Vocab, d)
}

// layer holds one block's weights on the backend.
type layer struct {
	attnNorm, ffnNorm          backends.Buffer
	wq, wk, wv, wo, w1, w2, w3 backends.Buffer
	experts                    []expert // a mixture of experts in place of w1, w2, w3
}

// expert is one FFN of a mixture of experts.
type expert struct{ w1, w2, w3 backends.Buffer }

// ffnWeights returns the layer's FFN weights: w1, w2, w3, or each
// expert's.
func (l *layer) ffnWeights() []backends.Buffer {
	if len(l.experts) == 0 {
		return []backends.Buffer{l.w1, l.w2, l.w3}
	}
	var out []backends.Buffer
	for _, x := range l.experts {
		out = append(out, x.w1, x.w2, x.w3)
	}
	return out
}

// Model is the transformer's weights on one backend (an Executor or a
// single backend: the code is the same).
type Model struct {
	cfg    ModelConfig
	be     backends.Backend
	embed  []float32 // host: out's rows decoded, looked up and written as a prompt's inputs
	layers []layer
	norm   backends.Buffer
	out    backends.Buffer // Q8_0 of the embedding (tied)
}

// NewModel makes the weights, deterministic from cfg.Seed, on be.
func NewModel(be backends.Backend, cfg ModelConfig) (*Model, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m := &Model{cfg: cfg, be: be}
	r := rand.New(rand.NewPCG(cfg.Seed, 0x11a3a))
	uniform := func(n int, scale float32) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = (2*r.Float32() - 1) * scale
		}
		return x
	}
	var err error
	put := func(data []byte) backends.Buffer {
		if err != nil {
			return nil
		}
		var b backends.Buffer
		if b, err = be.Alloc(int64(len(data))); err != nil {
			return nil
		}
		if _, err = be.Write(b, data); err != nil {
			return nil
		}
		return b
	}
	q8 := func(rows, cols int) backends.Buffer {
		// Uniform weights of variance 1/cols keep activations near unit scale.
		q, qerr := kernels.Quantize(kernels.Q8_0, uniform(rows*cols, float32(math.Sqrt(3/float64(cols)))))
		if qerr != nil {
			err = qerr
			return nil
		}
		return put(q)
	}
	norm := func() backends.Buffer {
		w := make([]float32, cfg.Dim)
		for i := range w {
			w[i] = 1 + 0.1*(2*r.Float32()-1)
		}
		return put(kernels.AsBytes(w))
	}
	d, kv := cfg.Dim, cfg.kvDim()
	embed := uniform(cfg.Vocab*d, 1)
	for range cfg.Layers {
		l := layer{
			attnNorm: norm(), ffnNorm: norm(),
			wq: q8(d, d), wk: q8(kv, d), wv: q8(kv, d), wo: q8(d, d),
		}
		if cfg.Experts == 0 {
			l.w1, l.w3, l.w2 = q8(cfg.FFN, d), q8(cfg.FFN, d), q8(d, cfg.FFN)
		}
		for range cfg.Experts {
			l.experts = append(l.experts, expert{w1: q8(cfg.FFN, d), w3: q8(cfg.FFN, d), w2: q8(d, cfg.FFN)})
		}
		m.layers = append(m.layers, l)
	}
	m.norm = norm()
	// One table, tied: the output matrix is the embedding in Q8_0, and a
	// token's embedding is its row decoded, on the host (embed) as where
	// GetRows looks it up, as a GGUF model's Q8_0 token_embd is.
	q, qerr := kernels.Quantize(kernels.Q8_0, embed)
	if qerr != nil {
		return nil, qerr
	}
	m.embed = embed
	if qerr = kernels.DequantizeInto(kernels.Q8_0, m.embed, q); qerr != nil {
		return nil, qerr
	}
	m.out = put(q)
	if err != nil {
		m.Free()
		return nil, fmt.Errorf("infer: loading weights: %w", err)
	}
	return m, nil
}

// weightGroups returns the model's weights per layer, the final norm and
// the output last.
func (m *Model) weightGroups() [][]backends.Buffer {
	var out [][]backends.Buffer
	for _, l := range m.layers {
		out = append(out, append([]backends.Buffer{l.attnNorm, l.ffnNorm, l.wq, l.wk, l.wv, l.wo}, l.ffnWeights()...))
	}
	return append(out, []backends.Buffer{m.norm, m.out})
}

// Free releases the weights.
func (m *Model) Free() {
	free := func(bs ...backends.Buffer) {
		for _, b := range bs {
			if b != nil {
				b.Free()
			}
		}
	}
	for _, l := range m.layers {
		free(l.attnNorm, l.ffnNorm, l.wq, l.wk, l.wv, l.wo)
		free(l.ffnWeights()...)
	}
	free(m.norm, m.out)
}

// scratch is one layer's activations for a batch, reused every step. Each
// is written once per step, so that the Executor can recompute any of
// them from its lineage if a device is lost mid-step.
type scratch struct {
	h, q, k, v, qr, kr, att, o, x1, h2, g, u, sw, d, x2 backends.Buffer
}

// Batch decodes B sequences in lockstep: one token of each per Step.
type Batch struct {
	m      *Model
	b      int
	pos    int
	x0     backends.Buffer
	hn     backends.Buffer
	logits backends.Buffer
	// tokens are the greedy tokens' indices, [B] (Argmax of logits), of
	// the last two steps: tokens[last] the latest's, which the next step
	// looks up (Issue) while the host may still read the one before.
	tokens [2]backends.Buffer
	last   int // -1: no step since Reset
	layers []scratch
	// kc and vc are each layer's KV cache, [B, KVHeads, kvCap, headDim],
	// appended in place by KVAppend wherever the Executor runs it and
	// moved by its residency when attention runs elsewhere. Attention
	// reads only the positions appended since Reset, and an Executor
	// places an unwritten tensor wherever its first op runs, without a
	// copy. kvCap starts at kvMinCap positions and doubles, up to Ctx,
	// as positions need it (reserve): a cache that follows attention to
	// another device carries at most twice the positions in use, not the
	// whole context (in a simulated offload run with -ctx 2560, a mode's
	// first step moved 24 caches at 428 µs each for 66 positions in use).
	kc, vc []backends.Buffer
	kvCap  int
	rowBuf []float32
	// KeepLogits makes each step also read its logits back into Logits
	// (B·Vocab floats over the link, on the step's critical path); a
	// step otherwise reads back only the B greedy tokens. Off by default.
	KeepLogits bool
	Logits     []float32 // the last step's logits, [B][Vocab], with KeepLogits
	idx        []float32 // the greedy tokens read back, [B]
	route      *router   // a mixture of experts' router
	arena      opArena   // the current layer's op lists (Batch.layer)
}

// kvMinCap is the positions a batch's KV caches hold at first (fewer
// when the context is shorter).
const kvMinCap = 64

// NewBatch prepares a batch of b sequences.
func (m *Model) NewBatch(b int) (*Batch, error) {
	return m.newBatch(b, kvMinCap)
}

// newBatch is NewBatch with KV caches of kvCap positions at first (at
// most the context).
func (m *Model) newBatch(b, kvCap int) (*Batch, error) {
	if b <= 0 {
		return nil, fmt.Errorf("infer: batch %d, must be positive", b)
	}
	c := m.cfg
	bt := &Batch{m: m, b: b, kvCap: max(1, min(kvCap, c.Ctx)), last: -1}
	var err error
	f32 := func(n int) backends.Buffer {
		if err != nil {
			return nil
		}
		var buf backends.Buffer
		buf, err = m.be.Alloc(int64(4 * n))
		return buf
	}
	bt.x0, bt.hn, bt.logits = f32(b*c.Dim), f32(b*c.Dim), f32(b*c.Vocab)
	bt.tokens = [2]backends.Buffer{f32(b), f32(b)}
	d, kv, ff := b*c.Dim, b*c.kvDim(), b*c.FFN
	for range c.Layers {
		bt.layers = append(bt.layers, scratch{
			h: f32(d), q: f32(d), k: f32(kv), v: f32(kv), qr: f32(d), kr: f32(kv), att: f32(d), o: f32(d),
			x1: f32(d), h2: f32(d), g: f32(ff), u: f32(ff), sw: f32(ff), d: f32(d), x2: f32(d),
		})
		bt.kc = append(bt.kc, f32(b*c.KVHeads*bt.kvCap*c.headDim()))
		bt.vc = append(bt.vc, f32(b*c.KVHeads*bt.kvCap*c.headDim()))
	}
	if err != nil {
		bt.Free()
		return nil, err
	}
	bt.rowBuf = make([]float32, kv)
	bt.idx = make([]float32, b)
	return bt, nil
}

// Free releases the batch's buffers.
func (bt *Batch) Free() {
	for _, b := range append([]backends.Buffer{bt.x0, bt.hn, bt.logits, bt.tokens[0], bt.tokens[1]}, append(bt.kc, bt.vc...)...) {
		if b != nil {
			b.Free()
		}
	}
	for _, s := range bt.layers {
		for _, b := range []backends.Buffer{s.h, s.q, s.k, s.v, s.qr, s.kr, s.att, s.o, s.x1, s.h2, s.g, s.u, s.sw, s.d, s.x2} {
			if b != nil {
				b.Free()
			}
		}
	}
}

// Pos returns the position of the next token.
func (bt *Batch) Pos() int { return bt.pos }

// Reset starts the batch over at position 0, with no tokens to Issue
// from until a step has run.
func (bt *Batch) Reset() { bt.pos, bt.last = 0, -1 }

// Restart starts the batch over at position 0 with new KV caches: the
// old ones were lost with the device that held them (their contents
// exist nowhere else: each step appends to them in place), and a new,
// unwritten tensor is valid wherever its first op runs.
func (bt *Batch) Restart() error {
	n := bt.kvBytes(bt.kvCap)
	for _, caches := range [][]backends.Buffer{bt.kc, bt.vc} {
		for i, b := range caches {
			if b != nil {
				b.Free()
			}
			nb, err := bt.m.be.Alloc(n)
			if err != nil {
				caches[i] = nil
				return fmt.Errorf("infer: a new KV cache: %w", err)
			}
			caches[i] = nb
		}
	}
	bt.Reset()
	return nil
}

// kvBytes is the size of one layer's K or V cache of capacity positions.
func (bt *Batch) kvBytes(capacity int) int64 {
	c := bt.m.cfg
	return int64(4 * bt.b * c.KVHeads * capacity * c.headDim())
}

// Reserve sizes the KV caches for a sequence of n positions (at most
// Ctx) before it starts: at position 0 to the least doubling of kvMinCap
// that holds n, new and unwritten, larger or smaller than before; later it
// only grows them, as Forward does. A server that knows a request's
// prompt and its tokens to come reserves them at once, and its caches
// never grow through the host.
func (bt *Batch) Reserve(n int) error {
	if bt.pos > 0 {
		return bt.reserve(n)
	}
	return bt.resize(bt.m.cfg.kvCapacity(n, kvMinCap))
}

// reserve makes the KV caches hold at least n positions (n ≤ Ctx),
// doubling their capacity as often as it takes, at most to Ctx. The
// positions appended so far move into the new caches through host memory
// (each capacity is reached once, so a sequence's growths copy fewer
// positions than one move of a whole-context cache).
func (bt *Batch) reserve(n int) error {
	if n <= bt.kvCap {
		return nil
	}
	return bt.resize(bt.m.cfg.kvCapacity(n, bt.kvCap))
}

// kvCapacity returns from doubled until it holds n positions, at most
// Ctx (and at least 1): the KV capacity that Batch.Reserve and
// ModelConfig.Bytes both take.
func (c ModelConfig) kvCapacity(n, from int) int {
	capacity := max(1, from)
	for capacity < n {
		capacity *= 2
	}
	return min(capacity, c.Ctx)
}

// resize replaces every KV cache by one of capacity positions holding the
// positions appended so far (grown; capacity ≥ bt.pos). On a failure
// every cache is left as it was, of its old capacity.
func (bt *Batch) resize(capacity int) error {
	if capacity == bt.kvCap {
		return nil
	}
	olds := append(append([]backends.Buffer(nil), bt.kc...), bt.vc...)
	news := make([]backends.Buffer, 0, len(olds))
	for _, old := range olds {
		nb, err := bt.grown(old, capacity)
		if err != nil {
			for _, b := range news {
				b.Free()
			}
			return err
		}
		news = append(news, nb)
	}
	for _, old := range olds {
		old.Free()
	}
	n := copy(bt.kc, news)
	copy(bt.vc, news[n:])
	bt.kvCap = capacity
	return nil
}

// grown returns a new cache of capacity positions holding old's first
// bt.pos positions of each sequence and head; old is left as it is.
func (bt *Batch) grown(old backends.Buffer, capacity int) (backends.Buffer, error) {
	be, hd := bt.m.be, bt.m.cfg.headDim()
	nb, err := be.Alloc(bt.kvBytes(capacity))
	if err != nil {
		return nil, fmt.Errorf("infer: a KV cache of %d positions: %w", capacity, err)
	}
	if bt.pos > 0 {
		src := make([]float32, bt.kvBytes(bt.kvCap)/4)
		dst := make([]float32, bt.kvBytes(capacity)/4)
		if _, err = be.Read(kernels.AsBytes(src), old); err == nil {
			kept := bt.pos * hd
			for r := range bt.b * bt.m.cfg.KVHeads { // a row: one sequence's head
				copy(dst[r*capacity*hd:][:kept], src[r*bt.kvCap*hd:][:kept])
			}
			_, err = be.Write(nb, kernels.AsBytes(dst))
		}
		if err != nil {
			nb.Free()
			return nil, fmt.Errorf("infer: growing a KV cache to %d positions: %w", capacity, err)
		}
	}
	return nb, nil
}

// run runs one op on the model's backend.
func (bt *Batch) run(s kernels.Spec, out backends.Buffer, in ...backends.Buffer) error {
	if _, err := bt.m.be.Run(s, in, out); err != nil {
		return fmt.Errorf("infer: step %d: %w", bt.pos, err)
	}
	return nil
}

// Step feeds one token per sequence at the current position, returns the
// greedy (argmax) next token of each, and advances the position. Ops are
// counted into ops.
func (bt *Batch) Step(tokens []int, ops *int64) ([]int, error) {
	if len(tokens) != bt.b {
		return nil, fmt.Errorf("infer: %d tokens for a batch of %d", len(tokens), bt.b)
	}
	seqs := make([][]int, len(tokens))
	for i, t := range tokens {
		seqs[i] = []int{t}
	}
	return bt.Forward(seqs, ops)
}

// rows returns the batch's host scratch of at least n floats.
func (bt *Batch) rows(n int) []float32 {
	if cap(bt.rowBuf) < n {
		bt.rowBuf = make([]float32, n)
	}
	return bt.rowBuf[:n]
}
