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
	for i := range 400000 {
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
