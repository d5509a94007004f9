package kernels

import (
	"math"
	"testing"
)

// TestExpf checks the fast exp against math.Exp across its whole float32
// range: relative error within 4 ulp (2^-21), exact special values.
func TestExpf(t *testing.T) {
	r := newRand(7)
	worst := 0.0
	for i := range 200000 {
		x := float32(-104 + 194*r.Float64())
		if i%2 == 0 {
			x = float32(-10 + 20*r.Float64())
		}
		want := math.Exp(float64(x))
		got := float64(expf(x))
		if want < 0x1p-126 { // float32 subnormals: absolute error
			if math.Abs(got-want) > 0x1p-149 {
				t.Fatalf("expf(%g) = %g, want %g", x, got, want)
			}
			continue
		}
		if math.IsInf(want, 1) || want > math.MaxFloat32 {
			if !math.IsInf(got, 1) {
				t.Fatalf("expf(%g) = %g, want +Inf", x, got)
			}
			continue
		}
		rel := math.Abs(got-want) / want
		worst = max(worst, rel)
		if rel > 0x1p-21 {
			t.Fatalf("expf(%g) = %g, want %g (rel %g)", x, got, want, rel)
		}
	}
	t.Logf("worst relative error %.3g (%.2f ulp of 2^-24)", worst, worst/0x1p-24)
	if expf(0) != 1 || !math.IsInf(float64(expf(float32(math.Inf(1)))), 1) || expf(float32(math.Inf(-1))) != 0 {
		t.Error("special values")
	}
	if !math.IsNaN(float64(expf(float32(math.NaN())))) {
		t.Error("expf(NaN) is not NaN")
	}
}
