package sim

import (
	"fmt"

	"github.com/adaptsched/adaptsched/kernels"
)

// Model is a decoder-only transformer's dimensions: what the op streams of
// the workloads are made of.
type Model struct {
	Name    string
	Hidden  int // model (residual stream) width
	Heads   int // query heads
	KVHeads int // key/value heads (grouped-query attention)
	FFN     int // feed-forward (SwiGLU) width
	Vocab   int
	Layers  int
	// Weights is the weights' dtype: F32 runs MatMul, Q8_0 and Q4_0 run
	// QuantizedMatMul (llama.cpp's formats).
	Weights kernels.DType
	// A mixture-of-experts model replaces each layer's FFN by Experts
	// experts of width ExpertFFN, TopK of them per token, beside one
	// shared expert of width FFN; 0 Experts is a dense model.
	Experts, TopK, ExpertFFN int
}

// The models, dimensions from each model's config.json on Hugging Face.
var (
	// Llama3_8B is meta-llama/Meta-Llama-3-8B, 4-bit as llama.cpp serves it.
	Llama3_8B = Model{Name: "llama-3-8b", Hidden: 4096, Heads: 32, KVHeads: 8, FFN: 14336, Vocab: 128256, Layers: 32, Weights: kernels.Q4_0}
	// Llama32_1B is meta-llama/Llama-3.2-1B, 8-bit.
	Llama32_1B = Model{Name: "llama-3.2-1b", Hidden: 2048, Heads: 32, KVHeads: 8, FFN: 8192, Vocab: 128256, Layers: 16, Weights: kernels.Q8_0}
	// Qwen25_05B is Qwen/Qwen2.5-0.5B in f32.
	Qwen25_05B = Model{Name: "qwen2.5-0.5b", Hidden: 896, Heads: 14, KVHeads: 2, FFN: 4864, Vocab: 151936, Layers: 24, Weights: kernels.F32}
	// Qwen15MoE is Qwen/Qwen1.5-MoE-A2.7B, 8-bit: 60 experts of width
	// 1408, 4 per token, and a shared expert of width 5632.
	Qwen15MoE = Model{Name: "qwen1.5-moe-a2.7b", Hidden: 2048, Heads: 16, KVHeads: 16, FFN: 5632, Vocab: 151936, Layers: 24,
		Weights: kernels.Q8_0, Experts: 60, TopK: 4, ExpertFFN: 1408}
)

// Models returns the models, largest first, the mixture of experts last.
func Models() []Model { return []Model{Llama3_8B, Llama32_1B, Qwen25_05B, Qwen15MoE} }

// LookupModel returns the model called name.
func LookupModel(name string) (Model, error) {
	for _, m := range Models() {
		if m.Name == name {
			return m, nil
		}
	}
	return Model{}, fmt.Errorf("%w: unknown model %q", ErrInvalidWorkload, name)
}

// HeadDim returns the dimension of one attention head.
func (m Model) HeadDim() int { return m.Hidden / m.Heads }

// validate reports impossible dimensions.
func (m Model) validate() error {
	if m.Hidden <= 0 || m.Heads <= 0 || m.KVHeads <= 0 || m.FFN <= 0 || m.Vocab <= 0 || m.Layers <= 0 ||
		m.Hidden%m.Heads != 0 || m.Heads%m.KVHeads != 0 || m.HeadDim()%2 != 0 {
		return fmt.Errorf("%w: model %q dimensions %+v", ErrInvalidWorkload, m.Name, m)
	}
	if m.Experts < 0 || m.Experts > 0 && (m.TopK <= 0 || m.TopK > m.Experts || m.ExpertFFN <= 0) {
		return fmt.Errorf("%w: model %q: %d experts, %d per token, width %d", ErrInvalidWorkload, m.Name, m.Experts, m.TopK, m.ExpertFFN)
	}
	if m.Weights.Quantized() && (m.Hidden%kernels.QK != 0 || m.FFN%kernels.QK != 0 || m.ExpertFFN%kernels.QK != 0) {
		return fmt.Errorf("%w: model %q: %v needs widths that are multiples of %d", ErrInvalidWorkload, m.Name, m.Weights, kernels.QK)
	}
	return nil
}

// projSpec is the projection of rows × in activations to out features.
func (m Model) projSpec(rows, in, out int) kernels.Spec {
	if m.Weights == kernels.F32 {
		return kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{rows, in}, {in, out}}}
	}
	return kernels.Spec{Op: kernels.QuantizedMatMul, DType: m.Weights, In: []kernels.Shape{{rows, in}, {out, in}}}
}

// experts appends a MoE layer's FFN to ops, whose last op is the FFN's
// RMSNorm: the router's projection, then the shared expert and the
// active experts as independent branches (gate and up projections of the
// normed activations, SwiGLU, down projection), then residual Adds that
// sum the branches in order. tokens × TopK routed rows spread over
// min(Experts, tokens × TopK) active experts, evenly: which experts a
// token picks changes no op's shape, so the branches are the same every
// step. Rule: the branches' ops come by projection, every branch's gate,
// then every up, every SwiGLU, every down, as ggml's graph of mul_mat_id
// nodes and cmd/infer's moeFFN issue them. Reason: each op is then
// decided with the other branches already queued (eval's
// BenchmarkOverlap).
func (m Model) experts(ops []opTemplate, tokens int) []opTemplate {
	norm := len(ops) - 1
	at := func(s kernels.Spec, act int64, deps ...int) int {
		after := make([]int, len(deps))
		for i, d := range deps {
			after[i] = len(ops) - d
		}
		ops = append(ops, opTemplate{spec: s, actBytes: act, after: after})
		return len(ops) - 1
	}
	router := m.projSpec(tokens, m.Hidden, m.Experts)
	at(router, router.InBytes(0), norm)
	slots := tokens * m.TopK
	active := min(m.Experts, slots)
	rows, widths := []int{tokens}, []int{m.FFN} // the shared expert, then the routed ones
	for range active {
		rows, widths = append(rows, (slots+active-1)/active), append(widths, m.ExpertFFN)
	}
	n := len(rows)
	inputProj := func() []int { // every branch's gate, or every up
		ids := make([]int, n)
		for i := range n {
			up := m.projSpec(rows[i], m.Hidden, widths[i])
			ids[i] = at(up, up.InBytes(0), norm)
		}
		return ids
	}
	gates := inputProj()
	ups := inputProj()
	sws, downs := make([]int, n), make([]int, n)
	for i := range n {
		sw := kernels.Spec{Op: kernels.SwiGLU, DType: kernels.F32, In: []kernels.Shape{{rows[i], widths[i]}, {rows[i], widths[i]}}}
		sws[i] = at(sw, sw.InBytes(0)+sw.InBytes(1), gates[i], ups[i])
	}
	for i := range n {
		down := m.projSpec(rows[i], widths[i], m.Hidden)
		downs[i] = at(down, down.InBytes(0), sws[i])
	}
	sum := kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{tokens, m.Hidden}, {tokens, m.Hidden}}}
	acc := norm - 1 // the attention's residual Add
	for _, d := range downs {
		acc = at(sum, sum.InBytes(0)+sum.InBytes(1), acc, d)
	}
	return ops
}

// step is one forward pass: batch sequences of seq new tokens each,
// attending to kv keys (seq = 1: decode; seq = kv: prefill).
type step struct{ batch, seq, kv int }

// opTemplate is one op of a forward pass before the workload numbers it.
type opTemplate struct {
	spec     kernels.Spec
	actBytes int64
	after    []int // Op.After
}

// forward returns the ops of one forward pass, in execution order:
// per layer RMSNorm, Q/K/V projections, RoPE on queries and keys,
// Attention, O projection, residual Add, RMSNorm, gate and up projections,
// SwiGLU, down projection, residual Add; then the final RMSNorm, the LM
// head (on the last token of each sequence) and Softmax.
//
// actBytes counts the inputs produced by earlier ops (activations); the
// weights, the norms' gains and the KV cache are resident on every device,
// as in a server that has loaded the model on each device it offloads to.
func (m Model) forward(st step) []opTemplate {
	tokens := st.batch * st.seq
	d := m.HeadDim()
	var ops []opTemplate
	add := func(s kernels.Spec, act ...int) {
		var b int64
		for _, i := range act {
			b += s.InBytes(i)
		}
		ops = append(ops, opTemplate{spec: s, actBytes: b})
	}
	proj := func(rows, in, out int) {
		if m.Weights == kernels.F32 {
			add(kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{rows, in}, {in, out}}}, 0)
			return
		}
		add(kernels.Spec{Op: kernels.QuantizedMatMul, DType: m.Weights, In: []kernels.Shape{{rows, in}, {out, in}}}, 0)
	}
	norm := func(rows int) {
		add(kernels.Spec{Op: kernels.RMSNorm, DType: kernels.F32, In: []kernels.Shape{{rows, m.Hidden}, {m.Hidden}}}, 0)
	}
	for range m.Layers {
		norm(tokens)
		proj(tokens, m.Hidden, m.Heads*d)
		proj(tokens, m.Hidden, m.KVHeads*d)
		proj(tokens, m.Hidden, m.KVHeads*d)
		add(kernels.Spec{Op: kernels.RoPE, DType: kernels.F32, In: []kernels.Shape{{st.batch, m.Heads, st.seq, d}}, Params: kernels.Params{Pos: st.kv - st.seq}}, 0)
		add(kernels.Spec{Op: kernels.RoPE, DType: kernels.F32, In: []kernels.Shape{{st.batch, m.KVHeads, st.seq, d}}, Params: kernels.Params{Pos: st.kv - st.seq}}, 0)
		kv := kernels.Shape{st.batch, m.KVHeads, st.kv, d}
		add(kernels.Spec{Op: kernels.Attention, DType: kernels.F32, In: []kernels.Shape{{st.batch, m.Heads, st.seq, d}, kv, kv}, Params: kernels.Params{Causal: true}}, 0)
		proj(tokens, m.Heads*d, m.Hidden)
		add(kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{tokens, m.Hidden}, {tokens, m.Hidden}}}, 0, 1)
		norm(tokens)
		if m.Experts > 0 {
			ops = m.experts(ops, tokens)
			continue
		}
		proj(tokens, m.Hidden, m.FFN)
		proj(tokens, m.Hidden, m.FFN)
		add(kernels.Spec{Op: kernels.SwiGLU, DType: kernels.F32, In: []kernels.Shape{{tokens, m.FFN}, {tokens, m.FFN}}}, 0, 1)
		proj(tokens, m.FFN, m.Hidden)
		add(kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{tokens, m.Hidden}, {tokens, m.Hidden}}}, 0, 1)
	}
	norm(st.batch)
	proj(st.batch, m.Hidden, m.Vocab)
	add(kernels.Spec{Op: kernels.Softmax, DType: kernels.F32, In: []kernels.Shape{{st.batch, m.Vocab}}}, 0)
	return ops
}
