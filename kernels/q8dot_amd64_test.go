package kernels

import (
	"fmt"
	"testing"
)

// TestQ8Paths runs the Q8_0 matmul cases of fastCases through the AVX2
// kernels and through the portable ones (q8SIMD off), each against the
// reference, and checks which path ran: the AVX2 kernels serve every M
// without the gemm, the portable path hands M above qmmFusedRows to it.
func TestQ8Paths(t *testing.T) {
	if !q8SIMD {
		t.Skip("this CPU has no AVX2/FMA: the portable Q8_0 kernels are covered by TestCPUMatchesReference")
	}
	defer func(on bool) { q8SIMD = on }(q8SIMD)
	for _, simd := range []bool{true, false} {
		q8SIMD = simd
		for ci, s := range fastCases() {
			if s.Op != QuantizedMatMul || s.DType != Q8_0 {
				continue
			}
			t.Run(fmt.Sprintf("simd=%v/%v", simd, s), func(t *testing.T) {
				calls := 0
				gemm := func(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
					calls++ // one-thread pool: no concurrent calls
					testGemm(m, n, k, a, lda, b, ldb, c, ldc)
				}
				in := inputs(t, newRand(uint64(ci)), s)
				want := make([]byte, s.OutBytes())
				if err := Reference(s, in, want); err != nil {
					t.Fatal(err)
				}
				got := make([]byte, s.OutBytes())
				if err := NewCPU(NewPool(1), gemm).Run(s, in, got); err != nil {
					t.Fatal(err)
				}
				atol, rtol := tolerances(s)
				assertClose(t, s.String(), AsF32(got), AsF32(want), atol, rtol)
				if panels := !simd && rows(s.In[0]) > qmmFusedRows; (calls > 0) != panels {
					t.Errorf("%d gemm calls, want them only on the panel path (%v)", calls, panels)
				}
			})
		}
	}
}

// TestQ8DotTails checks q8Dot1 and q8Dot4 on 0 to 5 blocks against the
// float64 sum: the loop's first and last block and an empty row.
func TestQ8DotTails(t *testing.T) {
	if !q8SIMD {
		t.Skip("this CPU has no AVX2/FMA")
	}
	r := newRand(9)
	for nb := range 6 {
		k := nb * QK
		w := make([]float32, k)
		for i := range w {
			w[i] = float32(r.NormFloat64())
		}
		q, err := Quantize(Q8_0, w)
		if err != nil {
			t.Fatal(err)
		}
		deq := make([]float32, k)
		dequantize(Q8_0, deq, q)
		x := make([]float32, 4*k+1) // +1: a valid pointer when k is 0
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		want := make([]float64, 4)
		for row := range want {
			for i := range k {
				want[row] += float64(deq[i]) * float64(x[row*k+i])
			}
		}
		qp := &[]byte{0}[0]
		if k > 0 {
			qp = &q[0]
		}
		var got4 [4]float32
		q8Dot4(qp, &x[0], nb, k, &got4)
		for row := range 4 {
			got1 := q8Dot1(qp, &x[row*k], nb)
			for _, g := range []float32{got1, got4[row]} {
				if d := float64(g) - want[row]; d > 1e-4*float64(k+1) || d < -1e-4*float64(k+1) {
					t.Errorf("%d blocks, row %d: got %v, want %v", nb, row, g, want[row])
				}
			}
		}
	}
}
