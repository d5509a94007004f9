package kernels

import (
	"errors"
	"math"
	"testing"
)

// f32s encodes values as an f32 buffer.
func f32s(v ...float32) []byte { return AsBytes(append([]float32(nil), v...)) }

// TestReferenceHandValues checks the oracle itself on small cases worked
// out by hand (DESIGN.md § Layout: the reference kernels are the oracle,
// so they are checked against closed forms, not against themselves).
func TestReferenceHandValues(t *testing.T) {
	ln2, ln3 := float32(math.Ln2), float32(math.Log(3))
	c1, s1 := float32(math.Cos(1)), float32(math.Sin(1))
	nan, negZero := float32(math.NaN()), float32(math.Copysign(0, -1))
	inf := func(sign int) float32 { return float32(math.Inf(sign)) }
	// A Q4_0 row of integers -8..7 twice: max = -8 gives d = 1, exact.
	wrow := make([]float32, 64)
	for j := range wrow {
		wrow[j] = float32(j%16 - 8)
	}
	w, err := Quantize(Q4_0, wrow)
	if err != nil {
		t.Fatal(err)
	}
	unit := make([]float32, 64)
	unit[5] = 1
	ones := make([]float32, 64)
	for i := range ones {
		ones[i] = 1
	}
	for _, c := range []struct {
		name string
		s    Spec
		in   [][]byte
		want []float32
	}{
		{"matmul", Spec{Op: MatMul, In: []Shape{{2, 2}, {2, 2}}},
			[][]byte{f32s(1, 2, 3, 4), f32s(5, 6, 7, 8)}, []float32{19, 22, 43, 50}},
		{"matmul broadcast B", Spec{Op: MatMul, In: []Shape{{2, 1, 2}, {2, 1}}},
			[][]byte{f32s(1, 2, 3, 4), f32s(10, 1)}, []float32{12, 34}},
		{"matmul batched B", Spec{Op: MatMul, In: []Shape{{2, 1, 2}, {2, 2, 1}}},
			[][]byte{f32s(1, 2, 3, 4), f32s(1, 1, 2, 0)}, []float32{3, 6}},
		{"qmm picks W[n,k]", Spec{Op: QuantizedMatMul, DType: Q4_0, In: []Shape{{2, 64}, {1, 64}}},
			[][]byte{AsBytes(append(append([]float32{}, unit...), ones...)), w}, []float32{-3, -32}},
		{"softmax", Spec{Op: Softmax, In: []Shape{{1, 3}}},
			[][]byte{f32s(0, ln2, ln3)}, []float32{1. / 6, 2. / 6, 3. / 6}},
		{"softmax large", Spec{Op: Softmax, In: []Shape{{2}}},
			[][]byte{f32s(1000, 1000)}, []float32{0.5, 0.5}},
		{"attention", Spec{Op: Attention, Params: Params{Scale: 1}, In: []Shape{{1, 1, 1, 1}, {1, 1, 2, 1}, {1, 1, 2, 1}}},
			[][]byte{f32s(1), f32s(0, ln2), f32s(3, 6)}, []float32{5}},
		{"attention causal GQA", Spec{Op: Attention, Params: Params{Causal: true, Scale: 1}, In: []Shape{{1, 2, 2, 1}, {1, 1, 2, 1}, {1, 1, 2, 1}}},
			// Both query heads read KV head 0; query 0 sees key 0 only, query 1 both.
			[][]byte{f32s(1, 1, 1, 2), f32s(0, ln2), f32s(3, 6)}, []float32{3, 5, 3, 3 + 3*4.0/5}},
		{"attention default scale", Spec{Op: Attention, In: []Shape{{1, 1, 1, 4}, {1, 1, 2, 4}, {1, 1, 2, 4}}},
			// scores 0 and 2·ln2/√4 = ln2: weights 1/3, 2/3.
			[][]byte{f32s(ln2, ln2, 0, 0), f32s(0, 0, 0, 0, 1, 1, 0, 0), f32s(3, 0, 0, 0, 6, 0, 0, 3)}, []float32{5, 0, 0, 2}},
		{"add broadcast", Spec{Op: Add, In: []Shape{{2, 2}, {2}}},
			[][]byte{f32s(1, 2, 3, 4), f32s(10, 20)}, []float32{11, 22, 13, 24}},
		{"mul", Spec{Op: Mul, In: []Shape{{3}, {3}}}, [][]byte{f32s(1, 2, 3), f32s(2, 3, -1)}, []float32{2, 6, -3}},
		{"scale", Spec{Op: Scale, Params: Params{Scale: -2}, In: []Shape{{2}}}, [][]byte{f32s(1, 3)}, []float32{-2, -6}},
		{"rmsnorm", Spec{Op: RMSNorm, Params: Params{Eps: 1e-30}, In: []Shape{{2}, {2}}},
			[][]byte{f32s(3, 4), f32s(1, 2)}, []float32{3 / float32(math.Sqrt(12.5)), 8 / float32(math.Sqrt(12.5))}},
		{"layernorm", Spec{Op: LayerNorm, Params: Params{Eps: 1e-30}, In: []Shape{{2, 2}, {2}, {2}}},
			[][]byte{f32s(1, 3, 5, 5), f32s(2, 3), f32s(0, 1)}, []float32{-2, 4, 0, 1}},
		{"rope", Spec{Op: RoPE, Params: Params{Pos: 1}, In: []Shape{{2, 1, 2}}},
			// D = 2: θ0 = 1; positions 1 and 2 rotate by 1 and 2 radians.
			[][]byte{f32s(1, 0, 0, 1)}, []float32{c1, s1, -float32(math.Sin(2)), float32(math.Cos(2))}},
		{"silu", Spec{Op: SiLU, In: []Shape{{3}}}, [][]byte{f32s(0, 1, -1)},
			[]float32{0, float32(1 / (1 + math.Exp(-1))), float32(-1 / (1 + math.E))}},
		{"gelu", Spec{Op: GELU, In: []Shape{{3}}}, [][]byte{f32s(0, 1, -1)}, []float32{0, 0.8411919906082768, -0.15880800939172324}},
		{"swiglu", Spec{Op: SwiGLU, In: []Shape{{2}, {2}}}, [][]byte{f32s(1, 0), f32s(2, 5)},
			[]float32{float32(2 / (1 + math.Exp(-1))), 0}},
		{"transpose", Spec{Op: Transpose, In: []Shape{{2, 3}}}, [][]byte{f32s(1, 2, 3, 4, 5, 6)}, []float32{1, 4, 2, 5, 3, 6}},
		{"dequantize f16", Spec{Op: Dequantize, DType: F16, In: []Shape{{2}}}, [][]byte{{0x00, 0x3c, 0x00, 0xc0}}, []float32{1, -2}},
		{"copy", Spec{Op: Copy, In: []Shape{{2}}}, [][]byte{f32s(7, 8)}, []float32{7, 8}},
		{"attention keys in use", Spec{Op: Attention, Params: Params{Causal: true, Scale: 1, Keys: 2}, In: []Shape{{1, 1, 1, 1}, {1, 1, 3, 1}, {1, 1, 3, 1}}},
			// The third position is beyond Keys: its key and value are never read.
			[][]byte{f32s(1), f32s(0, ln2, 50), f32s(3, 6, 1000)}, []float32{5}},
		{"kvappend", Spec{Op: KVAppend, Params: Params{Pos: 1}, In: []Shape{{1, 2, 3, 1}, {1, 1, 2, 1}}},
			// Rows [S=1, H=2] land at position 1 of each head.
			[][]byte{f32s(1, 2, 3, 4, 5, 6), f32s(8, 9)}, []float32{1, 8, 3, 4, 9, 6}},
		{"argmax", Spec{Op: Argmax, In: []Shape{{5, 4}}},
			// Ties give the lowest index, -0 ties +0, NaN never wins, a row of NaN gives 0.
			[][]byte{f32s(1, 3, 3, 2, -5, -2, -7, -2, nan, -1, nan, 4, nan, nan, nan, nan, inf(-1), negZero, 0, inf(-1))},
			[]float32{1, 1, 3, 0, 1}},
		{"argmax rank 3", Spec{Op: Argmax, In: []Shape{{2, 1, 3}}}, [][]byte{f32s(0, 0, 1, 9, 8, 9)}, []float32{2, 0}},
	} {
		for _, run := range []struct {
			name string
			fn   func(Spec, [][]byte, []byte) error
		}{{"Reference", Reference}, {"CPU", NewCPU(nil, testGemm).Run}} {
			out := make([]byte, c.s.OutBytes())
			if err := run.fn(c.s, c.in, out); err != nil {
				t.Fatalf("%s %s: %v", run.name, c.name, err)
			}
			assertClose(t, run.name+" "+c.name, AsF32(out), c.want, 1e-6, 1e-6)
		}
	}
}

func TestReferenceOpaque(t *testing.T) {
	s := Spec{Op: Opaque, Params: Params{Name: "aten::cat"}, In: []Shape{{2}}}
	err := Reference(s, [][]byte{make([]byte, 8)}, make([]byte, 8))
	if !errors.Is(err, ErrNotExecutable) {
		t.Fatalf("%v, want ErrNotExecutable", err)
	}
}
