package adaptive

import (
	"errors"
	"testing"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// recorder is a PlacementPolicy that picks a fixed backend and records
// what it is told.
type recorder struct {
	arm      int
	placed   []kernels.Op
	res      []Residency
	buckets  []BucketID
	observed []float64
	arms     []int
}

func (r *recorder) Name() string { return "recorder" }
func (r *recorder) Place(spec kernels.Spec, res Residency, b BucketID) int {
	r.placed = append(r.placed, spec.Op)
	r.res = append(r.res, res)
	r.buckets = append(r.buckets, b)
	return r.arm
}
func (r *recorder) Observed(b BucketID, arm int, us float64) {
	r.observed = append(r.observed, us)
	r.arms = append(r.arms, arm)
}

// TestPlacementPlaceAndObserve: the policy is asked with the op, its
// Residency and its bucket; its pick stands (UserPreference); excluded or
// out-of-range picks fall back to the bandit; Observe forwards the compute
// duration to Observed.
func TestPlacementPlaceAndObserve(t *testing.T) {
	rec := &recorder{arm: 1}
	s := newTestScheduler(t, Config{Strategy: Placement(rec), Seed: 1})
	if got := s.cfg.Strategy.String(); got != "placement(recorder)" {
		t.Errorf("String() = %q", got)
	}
	mm := matmul(8, 256, 256)
	var res Residency
	res.Add(Backend(1), mm.InBytes(0)) // on the GPU only
	res.Add(0, mm.InBytes(1))          // host memory
	d, err := s.Select(mm, res)
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "gpu" || d.Reason != UserPreference {
		t.Fatalf("got %s (%v), want gpu (UserPreference)", d.Name, d.Reason)
	}
	if rec.placed[0] != kernels.MatMul || rec.res[0] != res || rec.buckets[0] != d.Bucket {
		t.Errorf("told %v %+v bucket %d, want MatMul %+v bucket %d", rec.placed[0], rec.res[0], rec.buckets[0], res, d.Bucket)
	}
	if err := s.Observe(d, us(42)); err != nil {
		t.Fatal(err)
	}
	if len(rec.observed) != 1 || rec.observed[0] != 42 || rec.arms[0] != 1 {
		t.Errorf("observed %v on %v, want [42] on [1]", rec.observed, rec.arms)
	}
	// Excluded after a failure: the bandit picks among the rest.
	d, err = s.SelectExcept(mm, res, Backend(1), Fallback)
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "cpu" || d.Reason != Fallback {
		t.Errorf("excluded: %s (%v), want cpu (Fallback)", d.Name, d.Reason)
	}
	// Out of range.
	rec.arm = 7
	if d, err = s.Select(mm, Residency{}); err != nil || d.Reason != Unsupported {
		t.Errorf("arm 7: %v (%v), want Unsupported", d.Reason, err)
	}
	// A backend that cannot run the op: the bandit's choice, Unsupported.
	rec.arm = 0
	bes := []backends.Backend{newFake("cpu", backends.CPU, cpuNominal, kernels.Softmax), newFake("gpu", backends.GPU, gpuNominal)}
	s2 := newTestScheduler(t, Config{Backends: bes, Strategy: Placement(rec), Seed: 1})
	sm := kernels.Spec{Op: kernels.Softmax, DType: kernels.F32, In: []kernels.Shape{{64, 512}}}
	if d, err = s2.Select(sm, Residency{}); err != nil || d.Name != "gpu" || d.Reason != Unsupported {
		t.Errorf("incapable pick: %s (%v, %v), want gpu (Unsupported)", d.Name, d.Reason, err)
	}
}

// TestPlacementConfig: a nil policy is a configuration error.
func TestPlacementConfig(t *testing.T) {
	_, err := New(Config{Backends: []backends.Backend{newFake("cpu", backends.CPU, cpuNominal)},
		Strategy: Placement(nil)})
	if !errors.Is(err, ErrConfig) {
		t.Errorf("err = %v, want ErrConfig", err)
	}
	if got := Placement(nil).String(); got != "placement(nil)" {
		t.Errorf("String() = %q", got)
	}
}
