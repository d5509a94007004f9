//go:build !amd64

package kernels

// q8SIMD is false: the vector Q8_0 kernels are written for amd64 only.
const q8SIMD = false

// qmmQ8SIMD reports false: QuantizedMatMul takes the portable kernels.
func (t *opTask) qmmQ8SIMD(lo, hi int) bool { return false }
