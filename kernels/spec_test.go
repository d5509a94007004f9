package kernels

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestValidateRejects has one row per malformed spec: the sentinel it must
// wrap and words its message must contain (the op and the dimension).
func TestValidateRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		s    Spec
		err  error
		msg  []string
	}{
		{"unknown op", Spec{Op: Op(200), In: []Shape{{1}}}, ErrUnknownOp, []string{"Op(200)"}},
		{"unknown dtype", Spec{Op: Add, DType: DType(9), In: []Shape{{1}, {1}}}, ErrUnknownDType, []string{"Add", "DType(9)"}},
		{"input count", Spec{Op: MatMul, In: []Shape{{2, 3}}}, ErrInvalidSpec, []string{"MatMul", "takes 2 inputs, got 1"}},
		{"opaque input count", Spec{Op: Opaque, In: make([]Shape, 17)}, ErrInvalidSpec, []string{"Opaque", "17 inputs"}},
		{"rank too high", Spec{Op: Softmax, In: []Shape{{1, 2, 3, 4, 5}}}, ErrInvalidSpec, []string{"Softmax", "input 0", "rank 5"}},
		{"scalar", Spec{Op: SiLU, In: []Shape{{}}}, ErrInvalidSpec, []string{"SiLU", "input 0", "rank 0"}},
		{"matmul rank", Spec{Op: MatMul, In: []Shape{{4}, {4, 2}}}, ErrInvalidSpec, []string{"MatMul", "input 0", "rank 1"}},
		{"attention rank", Spec{Op: Attention, In: []Shape{{1, 1, 4}, {1, 1, 1, 4}, {1, 1, 1, 4}}}, ErrInvalidSpec, []string{"Attention", "input 0", "rank 3, want 4"}},
		{"zero dim", Spec{Op: Add, In: []Shape{{3, 0}, {3, 0}}}, ErrInvalidSpec, []string{"Add", "input 0", "dimension 1 is 0"}},
		{"negative dim", Spec{Op: Scale, In: []Shape{{-2}}}, ErrInvalidSpec, []string{"Scale", "input 0", "dimension 0 is -2"}},
		{"overflow", Spec{Op: Copy, In: []Shape{{1 << 20, 1 << 20, 2}}}, ErrInvalidSpec, []string{"Copy", "input 0", "dimension 2", "overflows"}},
		{"overflow int64", Spec{Op: Copy, In: []Shape{{1 << 21, 1 << 62}}}, ErrInvalidSpec, []string{"Copy", "dimension 1", "overflows"}},
		{"output overflow", Spec{Op: MatMul, In: []Shape{{1 << 30, 1}, {1, 1 << 30}}}, ErrInvalidSpec, []string{"MatMul", "output", "2^40"}},
		{"flops overflow", Spec{Op: MatMul, In: []Shape{{1 << 20, 1 << 20}, {1 << 20, 1 << 20}}}, ErrInvalidSpec, []string{"MatMul", "2^60 FLOPs"}},
		{"inner dim", Spec{Op: MatMul, In: []Shape{{2, 3}, {4, 5}}}, ErrInvalidSpec, []string{"MatMul", "input 1", "inner dimension 4", "3"}},
		{"batch dim", Spec{Op: MatMul, In: []Shape{{2, 2, 3}, {3, 3, 5}}}, ErrInvalidSpec, []string{"MatMul", "input 1", "batch dimension 3"}},
		{"qmm inner", Spec{Op: QuantizedMatMul, DType: Q8_0, In: []Shape{{1, 64}, {8, 32}}}, ErrInvalidSpec, []string{"QuantizedMatMul", "input 1", "inner dimension 32", "64"}},
		{"qmm dtype", Spec{Op: QuantizedMatMul, DType: F32, In: []Shape{{1, 32}, {8, 32}}}, ErrInvalidSpec, []string{"QuantizedMatMul", "dtype f32"}},
		{"block multiple", Spec{Op: QuantizedMatMul, DType: Q4_0, In: []Shape{{1, 40}, {8, 40}}}, ErrInvalidSpec, []string{"QuantizedMatMul", "inner dimension 40", "multiple", "q4_0"}},
		{"dequantize block", Spec{Op: Dequantize, DType: Q8_0, In: []Shape{{3, 33}}}, ErrInvalidSpec, []string{"Dequantize", "input 0", "last dimension 33"}},
		{"copy block", Spec{Op: Copy, DType: Q4_0, In: []Shape{{33}}}, ErrInvalidSpec, []string{"Copy", "last dimension 33"}},
		{"f32 op with q8", Spec{Op: Softmax, DType: Q8_0, In: []Shape{{32}}}, ErrInvalidSpec, []string{"Softmax", "dtype q8_0"}},
		{"gqa mismatch", Spec{Op: Attention, In: []Shape{{1, 6, 2, 8}, {1, 4, 2, 8}, {1, 4, 2, 8}}}, ErrInvalidSpec, []string{"Attention", "4 KV heads do not divide 6"}},
		{"head dim", Spec{Op: Attention, In: []Shape{{1, 4, 2, 8}, {1, 2, 2, 16}, {1, 2, 2, 16}}}, ErrInvalidSpec, []string{"Attention", "head dimension 16"}},
		{"kv mismatch", Spec{Op: Attention, In: []Shape{{1, 4, 2, 8}, {1, 2, 2, 8}, {1, 2, 3, 8}}}, ErrInvalidSpec, []string{"Attention", "input 2"}},
		{"causal S>T", Spec{Op: Attention, Params: Params{Causal: true}, In: []Shape{{1, 2, 5, 8}, {1, 2, 4, 8}, {1, 2, 4, 8}}}, ErrInvalidSpec, []string{"Attention", "5 queries exceed 4 keys"}},
		{"keys beyond T", Spec{Op: Attention, Params: Params{Keys: 5}, In: []Shape{{1, 2, 1, 8}, {1, 2, 4, 8}, {1, 2, 4, 8}}}, ErrInvalidSpec, []string{"Attention", "5 keys in use", "0 (all) to 4"}},
		{"causal S>Keys", Spec{Op: Attention, Params: Params{Causal: true, Keys: 2}, In: []Shape{{1, 2, 3, 8}, {1, 2, 4, 8}, {1, 2, 4, 8}}}, ErrInvalidSpec, []string{"Attention", "3 queries exceed 2 keys"}},
		{"kvappend rows", Spec{Op: KVAppend, In: []Shape{{1, 2, 4, 8}, {1, 1, 3, 8}}}, ErrInvalidSpec, []string{"KVAppend", "input 1", "do not match the cache"}},
		{"kvappend past the cache", Spec{Op: KVAppend, Params: Params{Pos: 3}, In: []Shape{{1, 2, 4, 8}, {1, 2, 2, 8}}}, ErrInvalidSpec, []string{"KVAppend", "2 rows at position 3", "4 positions"}},
		{"kvappend position overflows", Spec{Op: KVAppend, Params: Params{Pos: math.MaxInt}, In: []Shape{{1, 2, 4, 8}, {1, 1, 2, 8}}}, ErrInvalidSpec, []string{"KVAppend", "1 rows at position 9223372036854775807", "4 positions"}},
		{"kvappend rank", Spec{Op: KVAppend, In: []Shape{{2, 4, 8}, {1, 2, 8}}}, ErrInvalidSpec, []string{"KVAppend", "rank 3"}},
		{"argmax rank", Spec{Op: Argmax, In: []Shape{{7}}}, ErrInvalidSpec, []string{"Argmax", "input 0", "rank 1, want 2 to 4"}},
		{"argmax row", Spec{Op: Argmax, In: []Shape{{2, 1<<24 + 1}}}, ErrInvalidSpec, []string{"Argmax", "input 0", "last dimension 16777217 above 2^24", "not be exact"}},
		{"argmax dtype", Spec{Op: Argmax, DType: F16, In: []Shape{{2, 8}}}, ErrInvalidSpec, []string{"Argmax", "dtype f16"}},
		{"argmax inputs", Spec{Op: Argmax, In: []Shape{{2, 8}, {2, 8}}}, ErrInvalidSpec, []string{"Argmax", "takes 1 inputs, got 2"}},
		{"getrows table rank", Spec{Op: GetRows, In: []Shape{{2, 3, 8}, {2}}}, ErrInvalidSpec, []string{"GetRows", "input 0", "rank 3, want 2"}},
		{"getrows block", Spec{Op: GetRows, DType: Q8_0, In: []Shape{{4, 40}, {2}}}, ErrInvalidSpec, []string{"GetRows", "input 0", "row of 40", "q8_0 block"}},
		{"getrows rows", Spec{Op: GetRows, In: []Shape{{1<<24 + 1, 1}, {2}}}, ErrInvalidSpec, []string{"GetRows", "input 0", "16777217 rows above 2^24"}},
		{"getrows index rank", Spec{Op: GetRows, In: []Shape{{4, 8}, {1, 1, 1, 1}}}, ErrInvalidSpec, []string{"GetRows", "input 1", "rank 4, want 1 to 3"}},
		{"broadcast", Spec{Op: Add, In: []Shape{{2, 3}, {2}}}, ErrInvalidSpec, []string{"Add", "input 1", "broadcasts"}},
		{"swiglu", Spec{Op: SwiGLU, In: []Shape{{2, 3}, {3, 2}}}, ErrInvalidSpec, []string{"SwiGLU", "input 1"}},
		{"norm weight", Spec{Op: RMSNorm, In: []Shape{{2, 8}, {4}}}, ErrInvalidSpec, []string{"RMSNorm", "input 1", "want [8]"}},
		{"rope odd", Spec{Op: RoPE, In: []Shape{{2, 2, 7}}}, ErrInvalidSpec, []string{"RoPE", "head dimension 7"}},
		{"rope pos", Spec{Op: RoPE, Params: Params{Pos: -1}, In: []Shape{{2, 2, 8}}}, ErrInvalidSpec, []string{"RoPE", "position -1"}},
		{"rope position overflows", Spec{Op: RoPE, Params: Params{Pos: math.MaxInt - 1}, In: []Shape{{3, 2, 8}}}, ErrInvalidSpec, []string{"RoPE", "position 9223372036854775806 of 3 rows", "overflows"}},
		{"transpose rank", Spec{Op: Transpose, In: []Shape{{5}}}, ErrInvalidSpec, []string{"Transpose", "rank 1"}},
		{"negative eps", Spec{Op: RMSNorm, Params: Params{Eps: -1}, In: []Shape{{8}, {8}}}, ErrInvalidSpec, []string{"RMSNorm", "eps"}},
		{"opaque work", Spec{Op: Opaque, Params: Params{FLOPs: -5}}, ErrInvalidSpec, []string{"Opaque", "flops -5"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.s.Validate()
			if !errors.Is(err, c.err) {
				t.Fatalf("Validate(%v) = %v, want %v", c.s, err, c.err)
			}
			var se *SpecError
			if !errors.As(err, &se) {
				t.Fatalf("%v is not a *SpecError", err)
			}
			for _, m := range c.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("message %q lacks %q", err, m)
				}
			}
		})
	}
}

func TestCheckBuffers(t *testing.T) {
	s := Spec{Op: QuantizedMatMul, DType: Q4_0, In: []Shape{{2, 64}, {3, 64}}}
	good := [][]byte{make([]byte, 2*64*4), make([]byte, 3*2*18)}
	if err := CheckBuffers(s, good, make([]byte, 2*3*4)); err != nil {
		t.Fatalf("right sizes: %v", err)
	}
	for _, c := range []struct {
		name string
		in   [][]byte
		out  []byte
		msg  []string
	}{
		{"missing input", good[:1], make([]byte, 24), []string{"QuantizedMatMul", "1 input buffers for 2 inputs"}},
		{"short weights", [][]byte{good[0], make([]byte, 107)}, make([]byte, 24), []string{"QuantizedMatMul", "input 1", "107 bytes, want 108"}},
		{"long A", [][]byte{make([]byte, 516), good[1]}, make([]byte, 24), []string{"input 0", "516 bytes, want 512"}},
		{"output", good, make([]byte, 20), []string{"QuantizedMatMul", "output buffer of 20 bytes, want 24"}},
		{"misaligned", [][]byte{make([]byte, 513)[1:], good[1]}, make([]byte, 24), []string{"input 0", "aligned"}},
	} {
		err := CheckBuffers(s, c.in, c.out)
		if !errors.Is(err, ErrBufferSize) {
			t.Errorf("%s: %v, want ErrBufferSize", c.name, err)
			continue
		}
		for _, m := range c.msg {
			if !strings.Contains(err.Error(), m) {
				t.Errorf("%s: message %q lacks %q", c.name, err, m)
			}
		}
	}
	if err := CheckBuffers(Spec{Op: Add, In: []Shape{{2}}}, nil, nil); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("invalid spec: %v, want ErrInvalidSpec", err)
	}
}

// TestStorageBytes checks the byte counts of quantized and f16 storage,
// Copy of a quantized tensor included.
func TestStorageBytes(t *testing.T) {
	for _, c := range []struct {
		s       Spec
		in, out int64
	}{
		{Spec{Op: Copy, DType: Q8_0, In: []Shape{{3, 64}}}, 3 * 2 * 34, 3 * 2 * 34},
		{Spec{Op: Copy, DType: F16, In: []Shape{{5}}}, 10, 10},
		{Spec{Op: Dequantize, DType: Q4_0, In: []Shape{{2, 32}}}, 2 * 18, 2 * 32 * 4},
		{Spec{Op: QuantizedMatMul, DType: Q8_0, In: []Shape{{1, 32}, {7, 32}}}, 7 * 34, 7 * 4},
		{Spec{Op: Argmax, In: []Shape{{3, 2, 100}}}, 3 * 2 * 100 * 4, 3 * 2 * 4},                     // an f32 index per row
		{Spec{Op: GetRows, DType: Q8_0, In: []Shape{{1000, 64}, {2, 3}}}, 2 * 3 * 4, 2 * 3 * 64 * 4}, // f32 indices in, f32 rows out
	} {
		if err := c.s.Validate(); err != nil {
			t.Fatal(err)
		}
		if got := c.s.InBytes(len(c.s.In) - 1); got != c.in {
			t.Errorf("%v: InBytes = %d, want %d", c.s, got, c.in)
		}
		if got := c.s.OutBytes(); got != c.out {
			t.Errorf("%v: OutBytes = %d, want %d", c.s, got, c.out)
		}
	}
}

// FuzzSpecValidate builds specs from fuzz bytes: Validate never panics;
// when it accepts, OutShape, Work and the byte counts never panic, and
// small specs run through CheckBuffers, Reference and the fast kernels on
// zeroed buffers of the right sizes without panicking.
func FuzzSpecValidate(f *testing.F) {
	f.Add([]byte{byte(MatMul), 0, 0, 2, 3, 4, 2, 4, 5})
	f.Add([]byte{byte(Attention), 0, 1, 4, 1, 4, 3, 8, 4, 1, 2, 5, 8, 4, 1, 2, 5, 8})
	f.Add([]byte{byte(QuantizedMatMul), byte(Q4_0), 0, 2, 2, 32, 2, 3, 32})
	f.Add([]byte{byte(RoPE), 0, 0, 3, 4, 2, 6})
	f.Add([]byte{byte(Opaque), 0, 0})
	f.Add([]byte{byte(KVAppend), 0, 4, 2, 4, 1, 2, 6, 4, 4, 1, 2, 2, 4})
	f.Add([]byte{byte(KVAppend), 0, 128, 2, 4, 1, 2, 6, 4, 4, 1, 2, 2, 4})
	f.Add([]byte{byte(Argmax), 0, 0, 1, 2, 3, 5})
	f.Add([]byte{byte(GetRows), 2, 0, 2, 2, 5, 32, 1, 3})
	f.Add([]byte{byte(Attention), 0, 33, 4, 4, 1, 2, 1, 4, 4, 1, 1, 5, 4, 4, 1, 1, 5, 4})
	cpu := NewCPU(NewPool(2), testGemm)
	f.Fuzz(func(t *testing.T, data []byte) {
		s, ok := specFromBytes(data)
		if !ok {
			return
		}
		if s.Validate() != nil {
			return
		}
		_ = s.String()
		out := s.OutShape()
		w := s.Work()
		if w.FLOPs < 0 || w.BytesRead < 0 || w.BytesWritten < 0 {
			t.Fatalf("%v: negative work %+v", s, w)
		}
		var total int64
		for i := range s.In {
			total += s.InBytes(i)
		}
		total += s.OutBytes()
		if s.Op == Opaque || out.Elements() > 1<<16 || total > 1<<20 || w.FLOPs > 1<<22 {
			return
		}
		in := make([][]byte, len(s.In))
		for i := range in {
			in[i] = make([]byte, s.InBytes(i))
		}
		ref, got := make([]byte, s.OutBytes()), make([]byte, s.OutBytes())
		if err := Reference(s, in, ref); err != nil {
			t.Fatalf("Reference(%v) on right-sized buffers: %v", s, err)
		}
		if err := cpu.Run(s, in, got); err != nil {
			t.Fatalf("CPU.Run(%v) on right-sized buffers: %v", s, err)
		}
	})
}

// specFromBytes decodes op, dtype, flags, input count, then per input a
// rank and its dimensions (each a byte, small so that specs stay small
// but include 0 and large values via the flags).
func specFromBytes(b []byte) (Spec, bool) {
	if len(b) < 4 {
		return Spec{}, false
	}
	s := Spec{Op: Op(b[0] % 20), DType: DType(b[1] % 6)}
	flags := b[2]
	s.Params.Causal = flags&1 != 0
	if flags&2 != 0 {
		s.Params.Scale = 0.5
	}
	if flags&4 != 0 {
		s.Params.Pos = 3
	}
	if flags&8 != 0 {
		s.Params.Eps = -1
	}
	if flags&32 != 0 {
		s.Params.Keys = 2
	}
	if flags&64 != 0 {
		s.Params.Keys = -1
	}
	if flags&128 != 0 {
		s.Params.Pos = math.MaxInt - 1 // positions that overflow int
	}
	n := int(b[3] % 6)
	b = b[4:]
	for range n {
		if len(b) == 0 {
			return Spec{}, false
		}
		r := int(b[0] % 6)
		b = b[1:]
		if len(b) < r {
			return Spec{}, false
		}
		sh := make(Shape, r)
		for d := range sh {
			sh[d] = int(int8(b[d]))
			if flags&16 != 0 && d == 0 {
				sh[d] <<= 24
			}
		}
		b = b[r:]
		s.In = append(s.In, sh)
	}
	return s, true
}
