package kernels_test

import (
	"fmt"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/adaptsched/adaptsched/kernels"
)

// ExampleReference multiplies two matrices with the reference kernel and
// checks the fast CPU kernel against it. The CPU kernels take the matrix
// product as a kernels.Gemm: here gonum's Sgemm (the CPU backend passes
// OpenBLAS's when it loads).
func ExampleReference() {
	s := kernels.Spec{Op: kernels.MatMul, In: []kernels.Shape{{2, 3}, {3, 2}}}
	if err := s.Validate(); err != nil {
		panic(err)
	}
	a := kernels.AsBytes([]float32{1, 2, 3, 4, 5, 6})
	b := kernels.AsBytes([]float32{1, 0, 0, 1, 1, 1})
	want := make([]byte, s.OutBytes())
	if err := kernels.Reference(s, [][]byte{a, b}, want); err != nil {
		panic(err)
	}
	fmt.Println(s.OutShape(), kernels.AsF32(want))

	pool := kernels.NewPool(2)
	defer pool.Close()
	gemm := func(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
		blas32.Implementation().Sgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, a, lda, b, ldb, 0, c, ldc)
	}
	got := make([]byte, s.OutBytes())
	if err := kernels.NewCPU(pool, gemm).Run(s, [][]byte{a, b}, got); err != nil {
		panic(err)
	}
	fmt.Println(kernels.AsF32(got))
	// Output:
	// 2x2 [4 5 10 11]
	// [4 5 10 11]
}

// ExampleQuantize encodes a block of 32 values in Q8_0 and decodes it:
// the error comes from q = round(x/d) and from storing d as an f16.
func ExampleQuantize() {
	x := make([]float32, kernels.QK)
	for i := range x {
		x[i] = float32(i) / 4
	}
	q, err := kernels.Quantize(kernels.Q8_0, x)
	if err != nil {
		panic(err)
	}
	y := make([]float32, len(x))
	if err := kernels.DequantizeInto(kernels.Q8_0, y, q); err != nil {
		panic(err)
	}
	fmt.Printf("%d bytes; x[31] = %g, decoded %.4f\n", len(q), x[31], y[31])
	// Output:
	// 34 bytes; x[31] = 7.75, decoded 7.7515
}
