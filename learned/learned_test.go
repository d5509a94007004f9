package learned

import (
	"math"
	"testing"

	"github.com/adaptsched/adaptsched/bandit"
)

// TestOwn: a change's own evidence is the sufficient statistics of the
// observations that grew its posterior from its prior: N, Σy and Σy² of
// y = ln µs, worked out here.
func TestOwn(t *testing.T) {
	prior := bandit.NewPrior(100, 1, 0.2)
	p := prior
	ys := []float64{4.6, 4.8, 4.5}
	var sum, sq float64
	for _, y := range ys {
		p.Update(y)
		sum += y
		sq += y * y
	}
	got := Change{Prior: prior, Posterior: p}.Own()
	if math.Abs(got.N-3) > 1e-9 || math.Abs(got.Sum-sum) > 1e-9 || math.Abs(got.SumSq-sq) > 1e-9 {
		t.Errorf("Own = %+v, want N 3, Σy %v, Σy² %v", got, sum, sq)
	}
	if (Change{Prior: prior, Posterior: prior}).Own() != (bandit.Stats{}) {
		t.Error("a posterior that is its prior holds evidence")
	}
}
