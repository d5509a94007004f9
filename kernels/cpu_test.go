package kernels

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

// fastCases are the specs every fast kernel is checked on against
// Reference: dimension 1, odd sizes, sizes that are multiples of no block
// (gemm's 2×4 micro-tile and 64/256 tiles, the 32-wide transpose), a large
// K, batched variants, GQA with and without a causal mask, both quantized
// formats at decode and prefill sizes.
func fastCases() []Spec {
	sp := func(op Op, dt DType, p Params, in ...Shape) Spec {
		return Spec{Op: op, DType: dt, In: in, Params: p}
	}
	var none Params
	return []Spec{
		sp(MatMul, F32, none, Shape{1, 1}, Shape{1, 1}),
		sp(MatMul, F32, none, Shape{1, 37}, Shape{37, 5}),
		sp(MatMul, F32, none, Shape{3, 4099}, Shape{4099, 7}),
		sp(MatMul, F32, none, Shape{67, 300}, Shape{300, 261}),
		sp(MatMul, F32, none, Shape{5, 130}, Shape{130, 3}),
		sp(MatMul, F32, none, Shape{2, 9, 33}, Shape{33, 17}),
		sp(MatMul, F32, none, Shape{3, 70, 19}, Shape{3, 19, 66}),
		sp(MatMul, F32, none, Shape{2, 1, 8}, Shape{2, 8, 1}),
		sp(QuantizedMatMul, Q8_0, none, Shape{1, 64}, Shape{1, 64}),
		sp(QuantizedMatMul, Q8_0, none, Shape{1, 4096}, Shape{33, 4096}),
		sp(QuantizedMatMul, Q4_0, none, Shape{7, 96}, Shape{70, 96}),
		sp(QuantizedMatMul, Q4_0, none, Shape{9, 160}, Shape{131, 160}),
		sp(QuantizedMatMul, Q8_0, none, Shape{2, 13, 128}, Shape{65, 128}),
		sp(QuantizedMatMul, Q8_0, none, Shape{4, 768}, Shape{37, 768}),
		sp(QuantizedMatMul, Q8_0, none, Shape{7, 32}, Shape{3, 32}),
		sp(QuantizedMatMul, Q4_0, none, Shape{2, 3, 32}, Shape{5, 32}),
		sp(Softmax, F32, none, Shape{1}),
		sp(Softmax, F32, none, Shape{3, 5, 4099}),
		sp(Attention, F32, none, Shape{1, 1, 1, 1}, Shape{1, 1, 1, 1}, Shape{1, 1, 1, 1}),
		sp(Attention, F32, none, Shape{2, 4, 5, 8}, Shape{2, 2, 7, 8}, Shape{2, 2, 7, 8}),
		sp(Attention, F32, Params{Causal: true}, Shape{2, 4, 5, 8}, Shape{2, 2, 7, 8}, Shape{2, 2, 7, 8}),
		sp(Attention, F32, Params{Causal: true, Scale: 0.3}, Shape{1, 6, 33, 17}, Shape{1, 1, 33, 17}, Shape{1, 1, 33, 17}),
		sp(Attention, F32, Params{Causal: true}, Shape{1, 8, 1, 64}, Shape{1, 2, 300, 64}, Shape{1, 2, 300, 64}),
		sp(Add, F32, none, Shape{3, 1001}, Shape{3, 1001}),
		sp(Add, F32, none, Shape{2, 3, 4097}, Shape{4097}),
		sp(Mul, F32, none, Shape{5, 7, 9}, Shape{7, 9}),
		sp(Mul, F32, none, Shape{1}, Shape{1}),
		sp(Scale, F32, Params{Scale: -1.7}, Shape{5, 9999}),
		sp(RMSNorm, F32, none, Shape{1}, Shape{1}),
		sp(RMSNorm, F32, Params{Eps: 1e-6}, Shape{2, 5, 4099}, Shape{4099}),
		sp(LayerNorm, F32, none, Shape{7, 513}, Shape{513}, Shape{513}),
		sp(RoPE, F32, none, Shape{1, 1, 2}),
		sp(RoPE, F32, Params{Pos: 37}, Shape{9, 3, 64}),
		sp(RoPE, F32, Params{Pos: 5000, RopeBase: 500000}, Shape{2, 7, 4, 130}),
		sp(SiLU, F32, none, Shape{3, 7777}),
		sp(GELU, F32, none, Shape{3, 7777}),
		sp(SwiGLU, F32, none, Shape{3, 7777}, Shape{3, 7777}),
		sp(Dequantize, Q8_0, none, Shape{3, 4096}),
		sp(Dequantize, Q4_0, none, Shape{7, 96}),
		sp(Dequantize, F16, none, Shape{5, 4099}),
		sp(Copy, F32, none, Shape{3, 9001}),
		sp(Copy, Q4_0, none, Shape{3, 64}),
		sp(Copy, F16, none, Shape{1}),
		sp(Transpose, F32, none, Shape{1, 1}),
		sp(Transpose, F32, none, Shape{67, 33}),
		sp(Transpose, F32, none, Shape{2, 3, 100, 29}),
		sp(Attention, F32, Params{Causal: true, Keys: 5}, Shape{2, 4, 1, 8}, Shape{2, 2, 9, 8}, Shape{2, 2, 9, 8}),
		sp(Attention, F32, Params{Causal: true, Keys: 7}, Shape{1, 4, 3, 16}, Shape{1, 2, 12, 16}, Shape{1, 2, 12, 16}),
		sp(KVAppend, F32, none, Shape{1, 1, 1, 1}, Shape{1, 1, 1, 1}),
		sp(Argmax, F32, none, Shape{1, 1}),
		sp(Argmax, F32, none, Shape{16, 8000}),
		sp(Argmax, F32, none, Shape{2, 3, 4099}),
		sp(GetRows, F32, none, Shape{1, 1}, Shape{1}),
		sp(GetRows, Q8_0, none, Shape{8000, 512}, Shape{16}),
		sp(GetRows, Q4_0, none, Shape{100, 96}, Shape{2, 3}),
		sp(KVAppend, F32, Params{Pos: 6}, Shape{2, 3, 9, 8}, Shape{2, 1, 3, 8}),
		sp(KVAppend, F32, Params{Pos: 2}, Shape{3, 2, 16, 64}, Shape{3, 5, 2, 64}),
	}
}

// tolerances returns the atol and rtol a fast kernel meets against the
// float64 reference: float32 accumulation over K terms of magnitude ≤ 1
// loses at most about K·2^-24 relative to Σ|a·b| ≤ K; the transcendental
// kernels (fast exp) stay within a few ulp.
func tolerances(s Spec) (atol, rtol float64) {
	switch s.Op {
	case MatMul, QuantizedMatMul:
		k := float64(lastDim(s.In[0]))
		return 1e-6 * k, 1e-5
	case Attention:
		return 1e-5 * float64(s.In[0][3]), 1e-4
	case Copy, Dequantize, Transpose, Add, Mul, Scale, KVAppend, Argmax:
		return 0, 0
	}
	return 1e-6, 1e-5
}

func TestCPUMatchesReference(t *testing.T) {
	for _, threads := range []int{1, 3} {
		pool := NewPool(threads)
		defer pool.Close()
		cpu := NewCPU(pool, testGemm)
		for ci, s := range fastCases() {
			t.Run(fmt.Sprintf("threads=%d/%v", threads, s), func(t *testing.T) {
				r := newRand(uint64(ci))
				in := inputs(t, r, s)
				want := make([]byte, s.OutBytes())
				if err := Reference(s, in, want); err != nil {
					t.Fatal(err)
				}
				got := make([]byte, s.OutBytes())
				for i := range got {
					got[i] = 0xff // NaNs: every output must be written
				}
				if err := cpu.Run(s, in, got); err != nil {
					t.Fatal(err)
				}
				if s.OutDType() != F32 {
					if !bytes.Equal(got, want) {
						t.Fatal("bytes differ from the reference")
					}
					return
				}
				atol, rtol := tolerances(s)
				assertClose(t, s.String(), AsF32(got), AsF32(want), atol, rtol)
			})
		}
	}
}

// TestKVAppendInPlace: KVAppend with the cache as its output writes the
// new rows at Pos and leaves every other position as it was, in both the
// reference and the fast kernel (the KV cache of a decoder, kept where
// attention runs).
func TestKVAppendInPlace(t *testing.T) {
	s := Spec{Op: KVAppend, Params: Params{Pos: 3}, In: []Shape{{2, 2, 6, 4}, {2, 2, 2, 4}}}
	for _, run := range []struct {
		name string
		fn   func(Spec, [][]byte, []byte) error
	}{{"Reference", Reference}, {"CPU", NewCPU(nil, testGemm).Run}} {
		r := newRand(9)
		in := inputs(t, r, s)
		before := append([]float32(nil), AsF32(in[0])...)
		if err := run.fn(s, in, in[0]); err != nil {
			t.Fatal(err)
		}
		cache, rows := AsF32(in[0]), AsF32(in[1])
		for b := range 2 {
			for h := range 2 {
				for c := range 6 {
					for d := range 4 {
						i := ((b*2+h)*6+c)*4 + d
						want := before[i]
						if c >= 3 && c < 5 {
							want = rows[((b*2+(c-3))*2+h)*4+d]
						}
						if cache[i] != want {
							t.Fatalf("%s: cache[b%d h%d pos%d d%d] = %v, want %v", run.name, b, h, c, d, cache[i], want)
						}
					}
				}
			}
		}
	}
}

// TestArgmaxIsTheGreedyLoop: on rows of small integers, negative ones
// and many ties among them, the reference and the fast kernel pick the
// token a host loop keeping the first strictly larger logit picks (the
// decoder's greedy token before Argmax ran on its backend).
func TestArgmaxIsTheGreedyLoop(t *testing.T) {
	const rows, n = 37, 301
	s := Spec{Op: Argmax, In: []Shape{{rows, n}}}
	r := newRand(5)
	x := make([]float32, rows*n)
	for i := range x {
		x[i] = float32(r.IntN(9) - 6) // ties on every row; some rows all negative
	}
	want := make([]float32, rows)
	for i := range want {
		row := x[i*n : (i+1)*n]
		best := 0
		for j, v := range row {
			if v > row[best] {
				best = j
			}
		}
		want[i] = float32(best)
	}
	for _, run := range []struct {
		name string
		fn   func(Spec, [][]byte, []byte) error
	}{{"Reference", Reference}, {"CPU", NewCPU(NewPool(3), testGemm).Run}} {
		got := make([]float32, rows)
		if err := run.fn(s, [][]byte{AsBytes(x)}, AsBytes(got)); err != nil {
			t.Fatal(err)
		}
		assertClose(t, run.name, got, want, 0, 0)
	}
}

// TestGetRowsDecodesItsRows: each output row is its index's table row
// decoded, in every dtype (an f16 or quantized table decoded as
// Dequantize decodes it), indices of rank 1 and 2, repeated ones too; and
// an index that is no row (fractional, negative, past the end, NaN)
// fails with ErrIndex naming it before anything is written.
func TestGetRowsDecodesItsRows(t *testing.T) {
	const v, d = 7, 64
	r := newRand(9)
	table := randF32(r, v*d)
	cpu := NewCPU(NewPool(3), testGemm)
	runs := []struct {
		name string
		fn   func(Spec, [][]byte, []byte) error
	}{{"Reference", Reference}, {"CPU", cpu.Run}}
	for _, dt := range []DType{F32, F16, Q8_0, Q4_0} {
		raw, err := Quantize(dt, table)
		if err != nil {
			t.Fatal(err)
		}
		decoded := make([]float32, v*d)
		if err := DequantizeInto(dt, decoded, raw); err != nil {
			t.Fatal(err)
		}
		for _, idx := range [][]float32{{6, 0, 3}, {2, 2, 5, 1}} {
			shape := Shape{len(idx)}
			if len(idx) == 4 {
				shape = Shape{2, 2}
			}
			s := Spec{Op: GetRows, DType: dt, In: []Shape{{v, d}, shape}}
			want := make([]float32, 0, len(idx)*d)
			for _, i := range idx {
				want = append(want, decoded[int(i)*d:(int(i)+1)*d]...)
			}
			for _, run := range runs {
				got := make([]float32, len(want))
				if err := run.fn(s, [][]byte{raw, AsBytes(idx)}, AsBytes(got)); err != nil {
					t.Fatalf("%s %v: %v", run.name, s, err)
				}
				assertClose(t, fmt.Sprintf("%s %v", run.name, s), got, want, 0, 0)
			}
		}
	}
	s := Spec{Op: GetRows, In: []Shape{{v, d}, {2}}}
	for _, bad := range []float32{3.5, -1, v, float32(math.NaN())} {
		for _, run := range runs {
			got := []float32{42}
			got = append(got, make([]float32, 2*d-1)...)
			err := run.fn(s, [][]byte{AsBytes(table), AsBytes([]float32{1, bad})}, AsBytes(got))
			if !errors.Is(err, ErrIndex) || !strings.Contains(err.Error(), fmt.Sprintf("index 1 is %v", bad)) {
				t.Fatalf("%s, index %v: %v, want ErrIndex naming index 1", run.name, bad, err)
			}
			if got[0] != 42 {
				t.Fatalf("%s, index %v: row 0 written before the bad index was found", run.name, bad)
			}
		}
	}
}

// TestCPUWithExternalGemm checks that a supplied Gemm is the one used and
// that the products around it (batched B, quantized panels) are right.
func TestCPUWithExternalGemm(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	calls := 0
	gemm := func(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
		calls++ // one-thread pool: no concurrent calls
		testGemm(m, n, k, a, lda, b, ldb, c, ldc)
	}
	cpu := NewCPU(NewPool(1), gemm)
	for i, s := range []Spec{
		{Op: MatMul, In: []Shape{{3, 70, 19}, {3, 19, 66}}},
		{Op: MatMul, In: []Shape{{2, 9, 33}, {33, 17}}},
		{Op: QuantizedMatMul, DType: Q4_0, In: []Shape{{20, 64}, {130, 64}}},
	} {
		in := inputs(t, newRand(uint64(i)), s)
		want, got := make([]byte, s.OutBytes()), make([]byte, s.OutBytes())
		if err := Reference(s, in, want); err != nil {
			t.Fatal(err)
		}
		before := calls
		if err := cpu.Run(s, in, got); err != nil {
			t.Fatal(err)
		}
		if calls == before {
			t.Errorf("%v: the supplied gemm was not called", s)
		}
		atol, rtol := tolerances(s)
		assertClose(t, s.String(), AsF32(got), AsF32(want), atol, rtol)
	}
}

func TestCPURejectsBadInput(t *testing.T) {
	cpu := NewCPU(nil, testGemm)
	s := Spec{Op: Add, In: []Shape{{4}, {4}}}
	err := cpu.Run(s, [][]byte{make([]byte, 16), make([]byte, 12)}, make([]byte, 16))
	if !errors.Is(err, ErrBufferSize) {
		t.Fatalf("short input: %v, want ErrBufferSize", err)
	}
	err = cpu.Run(Spec{Op: Opaque, Params: Params{Name: "aten::cat"}, In: []Shape{{2}}}, [][]byte{make([]byte, 8)}, make([]byte, 8))
	if !errors.Is(err, ErrNotExecutable) {
		t.Fatalf("opaque: %v, want ErrNotExecutable", err)
	}
	err = cpu.Run(Spec{Op: Add, In: []Shape{{4}}}, nil, nil)
	if !errors.Is(err, ErrInvalidSpec) {
		t.Fatalf("bad spec: %v, want ErrInvalidSpec", err)
	}
}

// TestCPUZeroAllocs checks the hot path allocates nothing once warm, for
// every op (the larger cases take the parallel paths). Scratch lives in sync.Pools, which a GC
// empties, so the figure is an average over 20 calls (AllocsPerRun
// truncates it): a stray refill after a GC passes, an allocation on every
// call does not.
func TestCPUZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector; run without -race")
	}
	pool := NewPool(2)
	defer pool.Close()
	cpu := NewCPU(pool, testGemm)
	for i, s := range fastCases() {
		in := inputs(t, newRand(uint64(i)), s)
		out := make([]byte, s.OutBytes())
		allocs := testing.AllocsPerRun(20, func() {
			if err := cpu.Run(s, in, out); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%v: %v allocs per run, want 0", s, allocs)
		}
	}
}
