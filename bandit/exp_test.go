package bandit

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExp checks the fast exp against math.Exp: relative error within
// 2 ulp (2^-51) over the whole float64 range, the special values exact.
func TestExp(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	worst := 0.0
	for i := range 2000000 {
		x := -750 + 1460*r.Float64()
		if i%2 == 0 {
			x = -2 + 4*r.Float64()
		}
		want, got := math.Exp(x), exp(x)
		if want < 0x1p-1022 || math.IsInf(want, 1) {
			if got != want {
				t.Fatalf("exp(%g) = %g, want %g", x, got, want)
			}
			continue
		}
		rel := math.Abs(got-want) / want
		worst = max(worst, rel)
		if rel > 0x1p-51 {
			t.Fatalf("exp(%g) = %g, want %g (rel %g)", x, got, want, rel)
		}
	}
	t.Logf("worst relative error %.3g (%.2f ulp of 2^-52)", worst, worst/0x1p-52)
	if exp(0) != 1 || !math.IsInf(exp(math.Inf(1)), 1) || exp(math.Inf(-1)) != 0 || !math.IsNaN(exp(math.NaN())) {
		t.Error("special values")
	}
}

// TestLog checks the fast log against math.Log: error within 2 ulp of
// max(1, |ln x|) over the positive float64 range (1 ulp measured), and
// math.Log's results outside it.
func TestLog(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	worst := 0.0
	for i := range 400000 {
		x := math.Exp(-740 + 1449*r.Float64())
		if i%2 == 0 {
			x = 1e-3 + 1e7*r.Float64() // durations in µs
		}
		want, got := math.Log(x), log(x)
		e := math.Abs(got-want) / math.Max(1, math.Abs(want))
		worst = max(worst, e)
		if e > 0x1p-51 {
			t.Fatalf("log(%g) = %.17g, want %.17g", x, got, want)
		}
	}
	t.Logf("worst error %.3g (%.2f ulp of max(1, |ln x|))", worst, worst/0x1p-52)
	for _, x := range []float64{0, -1, 0x1p-1074, math.Inf(1), math.NaN(), 1, 2, math.E} {
		if want, got := math.Log(x), log(x); got != want && !(math.IsNaN(got) && math.IsNaN(want)) && math.Abs(got-want) > 0x1p-51 {
			t.Errorf("log(%g) = %g, want %g", x, got, want)
		}
	}
}

// BenchmarkLog compares the latency of log and math.Log (each result
// feeds the next call).
func BenchmarkLog(b *testing.B) {
	for _, f := range []struct {
		name string
		fn   func(float64) float64
	}{{"fast", log}, {"math", math.Log}} {
		b.Run(f.name, func(b *testing.B) {
			x := 1.2345
			for b.Loop() {
				x = f.fn(x + 3)
			}
			sinkF = x
		})
	}
}

// BenchmarkExp compares the latency of exp and math.Exp (each result
// feeds the next call).
func BenchmarkExp(b *testing.B) {
	for _, f := range []struct {
		name string
		fn   func(float64) float64
	}{{"fast", exp}, {"math", math.Exp}} {
		b.Run(f.name, func(b *testing.B) {
			x := 1.2345
			for b.Loop() {
				x = f.fn(x*1e-3 + 3)
			}
			sinkF = x
		})
	}
}

var sinkF float64
