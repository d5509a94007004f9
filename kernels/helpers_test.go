package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// testGemm is the Gemm the tests and benchmarks give NewCPU: gonum's
// Sgemm, the CPU backend's fallback (the package has none of its own), on
// 64×128 tiles of C, below the 4 blocks of 64×64 where gonum starts
// goroutines (and allocates) of its own.
func testGemm(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if k == 0 {
		for i := range m {
			clear(c[i*ldc : i*ldc+n])
		}
		return
	}
	impl := blas32.Implementation()
	for i := 0; i < m; i += 64 {
		for j := 0; j < n; j += 128 {
			impl.Sgemm(blas.NoTrans, blas.NoTrans, min(64, m-i), min(128, n-j), k, 1,
				a[i*lda:], lda, b[j:], ldb, 0, c[i*ldc+j:], ldc)
		}
	}
}

// newRand returns the fixed-seed source every test draws from.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// randF32 returns n values uniform in [-1, 1).
func randF32(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = 2*r.Float32() - 1
	}
	return x
}

// inputs builds random input buffers for s: f32 inputs uniform in [-1, 1)
// (positive for norm weights is not needed), quantized or f16 inputs
// encoded from such values.
func inputs(t testing.TB, r *rand.Rand, s Spec) [][]byte {
	t.Helper()
	in := make([][]byte, len(s.In))
	for i, sh := range s.In {
		vals := randF32(r, int(sh.Elements()))
		if n := s.IndexRows(i); n > 0 {
			for k := range vals {
				vals[k] = float32(r.IntN(n))
			}
		}
		b, err := Quantize(s.InDType(i), vals)
		if err != nil {
			t.Fatalf("%v input %d: %v", s, i, err)
		}
		in[i] = b
	}
	return in
}

// assertClose fails unless |got-want| ≤ atol + rtol·|want| everywhere.
func assertClose(t testing.TB, what string, got, want []float32, atol, rtol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range got {
		g, w := float64(got[i]), float64(want[i])
		if math.IsNaN(g) || math.Abs(g-w) > atol+rtol*math.Abs(w) {
			if bad < 5 {
				t.Errorf("%s: [%d] = %g, want %g (diff %.3g)", what, i, g, w, math.Abs(g-w))
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d values off", what, bad, len(got))
	}
}
