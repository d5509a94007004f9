package kernels

import "math"

// expf returns e^x in float32 to within a few ulp: range reduction
// x = n·ln2 + r with |r| ≤ ln2/2, then a degree-7 Taylor polynomial
// (truncation error below 1e-8 relative). It is several times faster than
// math.Exp in float64, and the softmax, attention and activation kernels
// spend most of their time in it. Outside [-87, 88] it defers to math.Exp.
func expf(x float32) float32 {
	if !(x > -87 && x < 88) {
		return float32(math.Exp(float64(x)))
	}
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375 // ln 2 split so that n·ln2hi is exact
		ln2lo = -2.12194440e-4
		round = 0x1.8p23 // adding and subtracting rounds to an integer
	)
	n := float32(float32(x*log2e)+round) - round
	r := float32(x-float32(n*ln2hi)) - float32(n*ln2lo)
	p := float32(1.0 / 5040)
	p = p*r + 1.0/720
	p = p*r + 1.0/120
	p = p*r + 1.0/24
	p = p*r + 1.0/6
	p = p*r + 0.5
	p = p*r + 1
	p = p*r + 1
	return p * math.Float32frombits(uint32(int32(n)+127)<<23)
}

// sigmoidMul returns x·σ(z) = x / (1 + e^-z).
func sigmoidMul(x, z float32) float32 { return x / (1 + expf(-z)) }

// geluTanh is GELU's tanh approximation, written as x·σ(2u) with
// u = √(2/π)(x + 0.044715x³): the same function as 0.5x(1+tanh u) without
// its cancellation for negative x.
func geluTanh(x float32) float32 {
	const c = 0.7978845608028654 // √(2/π)
	u := c * (x + 0.044715*x*x*x)
	return sigmoidMul(x, 2*u)
}

// dot returns Σ a[i]·b[i] over len(a) with four partial sums.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy adds α·x to y.
func axpy(alpha float32, x, y []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += alpha * x[i]
	}
}
