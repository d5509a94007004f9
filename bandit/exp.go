package bandit

import "math"

// exp returns e^x to within 2 ulp of math.Exp: range reduction
// x = n·ln2 + r with |r| ≤ ln2/2, then a degree-13 Taylor polynomial
// (truncation error below 2e-16 relative) in Estrin's scheme. On amd64
// math.Exp is an assembly routine with about 30 ns of latency (7 ns of
// throughput); every Thompson draw and posterior mean waits on one, two
// per arm and Select, and this one has half that latency. Outside
// (-708, 709), where the result would not be a normal number, it defers
// to math.Exp.
func exp(x float64) float64 {
	if !(x > -708 && x < 709) {
		return math.Exp(x)
	}
	const (
		log2e = 1.44269504088896338700e+00
		ln2hi = 6.93147180369123816490e-01 // ln 2 split so that n·ln2hi is exact
		ln2lo = 1.90821492927058770002e-10
		round = 0x1.8p52 // adding and subtracting rounds to an integer
	)
	n := (x*log2e + round) - round
	r := (x - n*ln2hi) - n*ln2lo
	r2 := r * r
	r4 := r2 * r2
	// e^r = 1 + r + r²·q(r), q's coefficients 1/k! for k = 2…13, paired.
	q := (1.0/2 + 1.0/6*r) + r2*(1.0/24+1.0/120*r) +
		r4*((1.0/720+1.0/5040*r)+r2*(1.0/40320+1.0/362880*r)) +
		r4*r4*((1.0/3628800+1.0/39916800*r)+r2*(1.0/479001600+1.0/6227020800*r))
	return (1 + (r + r2*q)) * math.Float64frombits(uint64(int64(n)+1023)<<52)
}

// logTableBits is how many leading mantissa bits index log's table.
const logTableBits = 6

// logInv[i] is 1/c rounded and logNeg[i] is −ln of that rounded value,
// for c = 1 + (i + ½)/64, the middle of the i-th of 64 slices of [1, 2).
var logInv, logNeg [1 << logTableBits]float64

func init() {
	for i := range logInv {
		logInv[i] = 1 / (1 + (float64(i)+0.5)/(1<<logTableBits))
		logNeg[i] = -math.Log(logInv[i])
	}
}

// log returns ln x to within 2 ulp of max(1, |ln x|): x = 2^k·m with m
// in [1, 2); m·(1/c) = 1 + r for the table's c nearest m, so that |r| ≤
// 1/129, and ln x = k·ln2 − ln(1/c) + ln(1 + r), the last by its series
// to r⁷ (truncation below 2e-18). It has about half math.Log's latency
// (BenchmarkLog), and every Observe waits on one before it can update
// the posterior. The error is absolute near x = 1 (ln x is then
// near 0), which is what a posterior over ln(duration) needs. Outside
// the normal positive numbers it defers to math.Log.
func log(x float64) float64 {
	if !(x >= 0x1p-1022 && x <= math.MaxFloat64) {
		return math.Log(x)
	}
	const (
		ln2hi = 6.93147180369123816490e-01 // ln 2 split so that k·ln2hi is exact
		ln2lo = 1.90821492927058770002e-10
	)
	b := math.Float64bits(x)
	k := float64(int64(b>>52) - 1023)
	i := b >> (52 - logTableBits) & (1<<logTableBits - 1)
	m := math.Float64frombits(b&(1<<52-1) | 1023<<52)
	r := math.FMA(m, logInv[i], -1)
	r2 := r * r
	// ln(1+r) = r + r²·p, p = −1/2 + r/3 − r²/4 + r³/5 − r⁴/6 + r⁵/7.
	p := (-1.0/2 + 1.0/3*r) + r2*(-1.0/4+1.0/5*r) + r2*r2*(-1.0/6+1.0/7*r)
	return (k*ln2hi + logNeg[i]) + (r + (r2*p + k*ln2lo))
}
