package kernels

import "golang.org/x/sys/cpu"

// q8SIMD says whether the AVX2 Q8_0 kernels can run here. They also use
// F16C (VCVTPH2PS) for the block scales, which every x86 CPU with AVX2
// has and golang.org/x/sys/cpu does not report.
var q8SIMD = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// q8Dot1 returns the dot product of nb Q8_0 blocks at row with the
// nb·QK floats at x.
//
//go:noescape
func q8Dot1(row *byte, x *float32, nb int) float32

// q8Dot4 writes to out the dot products of nb Q8_0 blocks at row with
// four rows of nb·QK floats, the first at x and each stride floats after
// the one before.
//
//go:noescape
func q8Dot4(row *byte, x *float32, nb, stride int, out *[4]float32)

// qmmQ8SIMD computes output columns [lo, hi) of a Q8_0 QuantizedMatMul
// with the AVX2 kernels (no library offers an int8-weight matrix-vector
// product to Go; the gemm path dequantizes whole panels first) and
// reports whether it could.
func (t *opTask) qmmQ8SIMD(lo, hi int) bool {
	if !q8SIMD || t.dt != Q8_0 {
		return false
	}
	k, n, m := t.k, t.n, t.m
	nb := k / QK
	rb := nb * q8Block
	var acc [4]float32
	for j := lo; j < hi; j++ {
		row := &t.raw[j*rb]
		r := 0
		for ; r+4 <= m; r += 4 {
			q8Dot4(row, &t.x[r*k], nb, k, &acc)
			for i, v := range acc {
				t.y[(r+i)*n+j] = v
			}
		}
		for ; r < m; r++ {
			t.y[r*n+j] = q8Dot1(row, &t.x[r*k], nb)
		}
	}
	return true
}
