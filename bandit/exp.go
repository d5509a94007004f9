package bandit

import "math"

// exp returns e^x to within 2 ulp of math.Exp: x = (k/64)·ln2 + r with
// |r| ≤ ln2/128, e^x = 2^(k/64)·e^r, 2^(j/64) from a table of 64 and
// e^r by its series to r⁵ (truncation below 4e-17 relative). On amd64
// math.Exp is an assembly routine with about 30 ns of latency; every
// Thompson draw and posterior mean waits on one, two per arm and Select,
// and this one has less than half that (BenchmarkExp: 13 ns against 30;
// a degree-13 polynomial without a table, 16). Outside (-708, 709), where
// the result would not be a normal number, it defers to math.Exp.
func exp(x float64) float64 {
	if !(x > -708 && x < 709) {
		return math.Exp(x)
	}
	const (
		n     = 1 << expTableBits
		nlog2 = n * 1.44269504088896338700e+00
		// ln 2 / n split so that k·ln2hi is exact.
		ln2hi = 6.93147180369123816490e-01 / n
		ln2lo = 1.90821492927058770002e-10 / n
		round = 0x1.8p52 // adding and subtracting rounds to an integer
	)
	kf := (x*nlog2 + round) - round
	k := int64(kf)
	r := (x - kf*ln2hi) - kf*ln2lo
	r2 := r * r
	p := r + r2*((1.0/2+1.0/6*r)+r2*(1.0/24+1.0/120*r))
	// 2^(k/n): the table's mantissa for k mod n, its exponent raised by
	// k div n (the table's entries are in [1, 2), so the sum stays normal).
	s := math.Float64frombits(exp2Table[k&(n-1)] + uint64(k>>expTableBits)<<52)
	return s + s*p
}

// expTableBits: exp's table holds 2^(j/64), j < 64.
const expTableBits = 6

// exp2Table[j] is the bits of math.Exp2(j/64).
var exp2Table = func() (t [1 << expTableBits]uint64) {
	for j := range t {
		t[j] = math.Float64bits(math.Exp2(float64(j) / (1 << expTableBits)))
	}
	return t
}()

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
