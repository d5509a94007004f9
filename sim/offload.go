package sim

import (
	"fmt"
	"math/rand/v2"

	"github.com/adaptsched/adaptsched/kernels"
)

// Mixtral8x7B is mistralai/Mixtral-8x7B-v0.1 (config.json), 4-bit as
// llama.cpp serves it: 8 experts of width 14336 per layer, 2 per token,
// no shared expert. The model of the offload-moe workload.
var Mixtral8x7B = Model{Name: "mixtral-8x7b", Hidden: 4096, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 32000, Layers: 32,
	Weights: kernels.Q4_0, Experts: 8, TopK: 2, ExpertFFN: 14336}

// Weight is one weight tensor of an offload workload: where it lives
// (host memory unless OnGPU) and its bytes.
type Weight struct {
	Name  string
	Bytes int64
	// OnGPU: the weight's home is the GPU (it fit in the budget, or it is
	// not an expert): it is resident there for every policy.
	OnGPU bool
	// Layer and Expert place it (Expert −1: not an expert).
	Layer, Expert int
}

// OffloadOp is one op of an offload workload.
type OffloadOp struct {
	Spec       kernels.Spec
	Bucket     int
	BucketName string
	// Tokens is the tokens of the step (the batch llama.cpp's offload
	// rule reads); Step numbers the forward passes from 0.
	Tokens, Step int
	// ActBytes are the inputs the op before produced.
	ActBytes int64
	// Weight indexes Offload.Weights; −1: the op reads no weight.
	Weight int
}

// OffloadOptions shape an offload workload.
type OffloadOptions struct {
	// MoE picks offload-moe (Mixtral8x7B with Experts, TopK) over
	// offload-dense (Llama3_8B).
	MoE           bool
	Experts, TopK int // 0: the model's
	// Routing draws each token's experts; Drift replaces it from the
	// fraction DriftAt of the steps on (nil: none).
	Routing, Drift *Routing
	DriftAt        float64
	// GPUMem is the GPU memory for weights in bytes, or GPUShare of the
	// weights (dense: of all weights, filled from the last layer as
	// llama.cpp's -ngl does; moe: of the experts, a cache for experts
	// whose home is host memory, the other weights on the GPU).
	GPUMem   int64
	GPUShare float64
	// Rounds of: Batch prompts of Prompt tokens prefilled in micro-batches
	// of UBatch (default 512), then Decode steps of Batch sequences from
	// a context of Prompt (Context when Prompt is 0).
	Rounds, Batch, Prompt, UBatch, Decode, Context int
	Seed                                           uint64
}

// Offload is a materialised offload workload.
type Offload struct {
	Name    string
	Model   Model
	Ops     []OffloadOp
	Weights []Weight
	// Budget is the GPU bytes for weights whose home is host memory (the
	// cache); ExpertBytes the bytes of every expert (0: dense).
	Budget, ExpertBytes int64
	// DriftOp is the first op drawn from the Drift routing (len(Ops):
	// none).
	DriftOp int
	Steps   int
}

func (o *OffloadOptions) validate(m Model) error {
	if o.UBatch == 0 {
		o.UBatch = 512
	}
	if o.Context == 0 {
		o.Context = 1024
	}
	switch {
	case o.Rounds < 1 || o.Batch < 1 || o.Batch > MaxBatch || o.Prompt < 0 || o.Decode < 0 || o.Prompt == 0 && o.Decode == 0:
		return fmt.Errorf("%w: offload: %d rounds of batch %d (1–%d), prompt %d, decode %d: want rounds and batch ≥ 1 and some prompt or decode",
			ErrInvalidWorkload, o.Rounds, o.Batch, MaxBatch, o.Prompt, o.Decode)
	case o.UBatch < 1 || o.Prompt+o.Decode > MaxSeq || o.Context < 1 || o.Context+o.Decode > MaxSeq:
		return fmt.Errorf("%w: offload: ubatch %d, prompt %d + decode %d (context %d) over %d", ErrInvalidWorkload, o.UBatch, o.Prompt, o.Decode, o.Context, MaxSeq)
	case o.GPUMem < 0 || !(o.GPUShare >= 0 && o.GPUShare <= 1) || o.GPUMem > 0 && o.GPUShare > 0:
		return fmt.Errorf("%w: offload: GPU memory %d bytes or share %v: give one, share in [0, 1]", ErrInvalidWorkload, o.GPUMem, o.GPUShare)
	case !(o.DriftAt >= 0 && o.DriftAt <= 1):
		return fmt.Errorf("%w: offload: drift at %v, want a fraction in [0, 1]", ErrInvalidWorkload, o.DriftAt)
	}
	return o.checkRouting(m)
}

// checkRouting: an MoE workload needs a routing, and every routing it has
// must match m's layers and experts.
func (o *OffloadOptions) checkRouting(m Model) error {
	if !o.MoE {
		return nil
	}
	for _, r := range []*Routing{o.Routing, o.Drift} {
		if r != nil && (r.Layers() != m.Layers || r.Experts() != m.Experts) {
			return fmt.Errorf("%w: %s: %d layers × %d experts, the model has %d × %d", ErrBadRouting, r.Source, r.Layers(), r.Experts(), m.Layers, m.Experts)
		}
	}
	if o.Routing == nil {
		return fmt.Errorf("%w: offload-moe needs a routing", ErrInvalidWorkload)
	}
	return nil
}

// NewOffload builds the ops of an offload workload, deterministic by
// Seed (the tokens' routing).
func NewOffload(o OffloadOptions) (*Offload, error) {
	m := Llama3_8B
	if o.MoE {
		m = Mixtral8x7B
		if o.Experts > 0 {
			m.Experts, m.TopK = o.Experts, o.TopK
		}
	}
	if err := m.validate(); err != nil {
		return nil, err
	}
	if err := o.validate(m); err != nil {
		return nil, err
	}
	b := &offloadBuilder{Offload: Offload{Model: m}, o: o, cat: newCatalogue(), rng: rand.New(rand.NewPCG(o.Seed, 0x0ff1))}
	b.Name = fmt.Sprintf("offload-dense/%s", m.Name)
	if o.MoE {
		b.Name = fmt.Sprintf("offload-moe/%s/e%dk%d", m.Name, m.Experts, m.TopK)
	}
	b.weights()
	b.place()
	b.steps()
	return &b.Offload, nil
}

type offloadBuilder struct {
	Offload
	o     OffloadOptions
	cat   catalogue
	rng   *rand.Rand
	layer [][]int // weight ids per layer: qkv, o, then gate-up, down (dense) or the experts
	head  int
	pick  []int
	rows  []int
}

// weights lists the model's weight tensors, their specs' second input.
func (b *offloadBuilder) weights() {
	m := b.Model
	d := m.HeadDim()
	add := func(name string, l, e int, s kernels.Spec) int {
		b.Weights = append(b.Weights, Weight{Name: name, Bytes: s.InBytes(1), Layer: l, Expert: e, OnGPU: e < 0 && m.Experts > 0})
		return len(b.Weights) - 1
	}
	for l := range m.Layers {
		ids := []int{
			add(fmt.Sprintf("blk.%d.attn_qkv", l), l, -1, m.projSpec(1, m.Hidden, (m.Heads+2*m.KVHeads)*d)),
			add(fmt.Sprintf("blk.%d.attn_output", l), l, -1, m.projSpec(1, m.Heads*d, m.Hidden)),
		}
		if m.Experts == 0 {
			ids = append(ids, add(fmt.Sprintf("blk.%d.ffn_gate_up", l), l, -1, m.projSpec(1, m.Hidden, 2*m.FFN)),
				add(fmt.Sprintf("blk.%d.ffn_down", l), l, -1, m.projSpec(1, m.FFN, m.Hidden)))
		} else {
			ids = append(ids, add(fmt.Sprintf("blk.%d.ffn_gate_inp", l), l, -1, m.projSpec(1, m.Hidden, m.Experts)))
			for e := range m.Experts {
				id := add(fmt.Sprintf("blk.%d.ffn_exps.%d", l, e), l, e, m.expertSpec(1))
				b.ExpertBytes += b.Weights[id].Bytes
				ids = append(ids, id)
			}
		}
		b.layer = append(b.layer, ids)
	}
	b.head = add("output", m.Layers, -1, m.projSpec(1, m.Hidden, m.Vocab))
	b.Weights[b.head].OnGPU = true
}

// expertSpec is one expert's FFN for rows tokens: its gate, up and down
// projections as one matmul of the same work and weight bytes.
func (m Model) expertSpec(rows int) kernels.Spec { return m.projSpec(rows, m.Hidden, 3*m.ExpertFFN) }

// place gives the GPU budget: dense, the last layers' weights that fit
// live on the GPU (llama.cpp -ngl); moe, the experts' cache.
func (b *offloadBuilder) place() {
	total := int64(0)
	for _, w := range b.Weights {
		if !w.OnGPU {
			total += w.Bytes
		}
	}
	if b.Model.Experts > 0 {
		total = b.ExpertBytes
	}
	budget := b.o.GPUMem
	if budget == 0 {
		budget = int64(b.o.GPUShare * float64(total))
	}
	if b.Model.Experts > 0 {
		b.Budget = budget
		return
	}
	for l := len(b.layer) - 1; l >= 0; l-- {
		var n int64
		for _, id := range b.layer[l] {
			n += b.Weights[id].Bytes
		}
		if n > budget {
			break
		}
		budget -= n
		for _, id := range b.layer[l] {
			b.Weights[id].OnGPU = true
		}
	}
	b.Budget = budget // what no whole layer fills: room for the cache
}

// steps generates the forward passes.
func (b *offloadBuilder) steps() {
	o := b.o
	var total int
	per := o.Batch * ((o.Prompt + o.UBatch - 1) / o.UBatch)
	total = o.Rounds * (per + o.Decode)
	drift := total
	if o.Drift != nil {
		drift = int(o.DriftAt * float64(total))
	}
	b.DriftOp = -1
	for range o.Rounds {
		for range o.Batch {
			for done := 0; done < o.Prompt; done += o.UBatch {
				n := min(o.UBatch, o.Prompt-done)
				b.forward(1, n, done+n, drift)
			}
		}
		ctx := o.Prompt
		if ctx == 0 {
			ctx = o.Context
		}
		for i := range o.Decode {
			b.forward(o.Batch, 1, ctx+i+1, drift)
		}
	}
	if b.DriftOp < 0 {
		b.DriftOp = len(b.Ops)
	}
}

// forward appends one forward pass of batch sequences of seq new tokens
// attending to kv.
func (b *offloadBuilder) forward(batch, seq, kv, drift int) {
	m := b.Model
	d := m.HeadDim()
	tokens := batch * seq
	routing := b.o.Routing
	if b.Steps >= drift && b.o.Drift != nil {
		routing = b.o.Drift
		if b.DriftOp < 0 {
			b.DriftOp = len(b.Ops)
		}
	}
	add := func(s kernels.Spec, act int64, w int) {
		op := b.cat.number([]opTemplate{{spec: s}})[0]
		b.Ops = append(b.Ops, OffloadOp{Spec: s, Bucket: op.Bucket, BucketName: op.BucketName, Tokens: tokens, Step: b.Steps, ActBytes: act, Weight: w})
	}
	rows := func(n int) int64 { return int64(n) * int64(m.Hidden) * 4 }
	norm := kernels.Spec{Op: kernels.RMSNorm, DType: kernels.F32, In: []kernels.Shape{{tokens, m.Hidden}, {m.Hidden}}}
	sum := kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{tokens, m.Hidden}, {tokens, m.Hidden}}}
	kvShape := kernels.Shape{batch, m.KVHeads, kv, d}
	attn := kernels.Spec{Op: kernels.Attention, DType: kernels.F32, In: []kernels.Shape{{batch, m.Heads, seq, d}, kvShape, kvShape}, Params: kernels.Params{Causal: true}}
	for l, ids := range b.layer {
		add(norm, rows(tokens), -1)
		add(m.projSpec(tokens, m.Hidden, (m.Heads+2*m.KVHeads)*d), rows(tokens), ids[0])
		add(attn, rows(tokens)*3/2, -1)
		add(m.projSpec(tokens, m.Heads*d, m.Hidden), rows(tokens), ids[1])
		add(sum, rows(tokens), -1)
		add(norm, rows(tokens), -1)
		if m.Experts == 0 {
			add(m.projSpec(tokens, m.Hidden, 2*m.FFN), rows(tokens), ids[2])
			sw := kernels.Spec{Op: kernels.SwiGLU, DType: kernels.F32, In: []kernels.Shape{{tokens, m.FFN}, {tokens, m.FFN}}}
			add(sw, sw.InBytes(0)+sw.InBytes(1), -1)
			add(m.projSpec(tokens, m.FFN, m.Hidden), sw.InBytes(0), ids[3])
			add(sum, rows(tokens), -1)
			continue
		}
		add(m.projSpec(tokens, m.Hidden, m.Experts), rows(tokens), ids[2])
		b.rows = append(b.rows[:0], make([]int, m.Experts)...)
		for range tokens {
			b.pick = routing.Pick(b.rng, l, m.TopK, b.pick)
			for _, e := range b.pick {
				b.rows[e]++
			}
		}
		for e, r := range b.rows {
			if r > 0 {
				add(m.expertSpec(r), rows(r), ids[3+e])
			}
		}
		add(sum, rows(tokens), -1)
	}
	add(kernels.Spec{Op: kernels.RMSNorm, DType: kernels.F32, In: []kernels.Shape{{batch, m.Hidden}, {m.Hidden}}}, rows(batch), -1)
	add(m.projSpec(batch, m.Hidden, m.Vocab), rows(batch), b.head)
	b.Steps++
}
