package main

import "github.com/adaptsched/adaptsched/kernels"

// sizeNames are the three sizes every op runs at: a decode step, a short
// prefill, a longer prefill of a small LLM layer.
var sizeNames = []string{"small", "medium", "large"}

// specFor returns op at one of sizeNames: shapes typical of LLM inference,
// kept small enough that the pure-Go reference checks them in seconds.
func specFor(op kernels.Op, size string) kernels.Spec {
	i := 0
	switch size {
	case "medium":
		i = 1
	case "large":
		i = 2
	}
	rows := [3]int{1, 64, 256}[i]     // tokens
	dim := [3]int{512, 1024, 2048}[i] // hidden size
	ffn := [3]int{256, 1024, 2048}[i] // output features of a matmul
	heads, kvHeads, headDim := 8, 2, 64
	seq := [3]int{1, 64, 256}[i] // queries
	ctx := [3]int{128, 64, 256}[i]
	f32 := kernels.F32
	x := kernels.Shape{rows, dim}
	s := kernels.Spec{Op: op, DType: f32}
	switch op {
	case kernels.MatMul:
		s.In = []kernels.Shape{x, {dim, ffn}}
	case kernels.QuantizedMatMul:
		s.DType = kernels.Q8_0
		s.In = []kernels.Shape{x, {ffn, dim}}
	case kernels.Attention:
		s.In = []kernels.Shape{{1, heads, seq, headDim}, {1, kvHeads, ctx, headDim}, {1, kvHeads, ctx, headDim}}
		s.Params.Causal = true
	case kernels.Add, kernels.Mul, kernels.SwiGLU:
		s.In = []kernels.Shape{x, x}
	case kernels.RMSNorm:
		s.In = []kernels.Shape{x, {dim}}
	case kernels.LayerNorm:
		s.In = []kernels.Shape{x, {dim}, {dim}}
	case kernels.RoPE:
		s.In = []kernels.Shape{{rows, heads, headDim}}
		s.Params.Pos = 7
	case kernels.Scale:
		s.In = []kernels.Shape{x}
		s.Params.Scale = 0.125
	case kernels.Dequantize:
		s.DType = kernels.Q8_0
		s.In = []kernels.Shape{{ffn, dim}}
	case kernels.Copy:
		s.DType = kernels.F16
		s.In = []kernels.Shape{x}
	case kernels.KVAppend:
		s.In = []kernels.Shape{{1, kvHeads, ctx, headDim}, {1, seq, kvHeads, headDim}}
	case kernels.GetRows: // token embeddings: a Q8_0 table, a row per token
		s.DType = kernels.Q8_0
		s.In = []kernels.Shape{{32000, dim}, {rows}}
	default: // Softmax, SiLU, GELU, Transpose, Argmax
		s.In = []kernels.Shape{x}
	}
	return s
}
