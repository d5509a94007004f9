package rocm

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/adaptsched/adaptsched/kernels"
)

// specInputs returns host data for every input of s: uniform values in
// [-1, 1) from a fixed-seed PCG, encoded in each input's dtype.
func specInputs(s kernels.Spec, seed uint64) ([][]byte, error) {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([][]byte, len(s.In))
	for i, sh := range s.In {
		vals := make([]float32, sh.Elements())
		for j := range vals {
			vals[j] = 2*r.Float32() - 1
		}
		b, err := kernels.Quantize(s.InDType(i), vals)
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

// compareF32 reports the first element of got that differs from want by
// more than tol·(1+|want|).
func compareF32(got, want []byte, tol float64) error {
	g, w := kernels.AsF32(got), kernels.AsF32(want)
	if len(g) != len(w) {
		return fmt.Errorf("%d values, want %d", len(g), len(w))
	}
	for i := range w {
		d := math.Abs(float64(g[i]) - float64(w[i]))
		if d > tol*(1+math.Abs(float64(w[i]))) || math.IsNaN(float64(g[i])) {
			return fmt.Errorf("element %d: got %g, want %g", i, g[i], w[i])
		}
	}
	return nil
}
