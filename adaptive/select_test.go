package adaptive

import (
	"errors"
	"testing"

	"github.com/adaptsched/adaptsched/kernels"
)

// TestSchedulerBucketName checks that the Scheduler and its Decision name
// a bucket as kernels.BucketName does, and nothing for an id it has not
// assigned.
func TestSchedulerBucketName(t *testing.T) {
	s := newTestScheduler(t, Config{})
	d, _ := s.Select(matmul(64, 4096, 4096), Residency{})
	if got := s.BucketName(d.Bucket); got != "MatMul/f32/s62" {
		t.Errorf("Scheduler.BucketName = %q", got)
	}
	if d.BucketName != "MatMul/f32/s62" {
		t.Errorf("Decision.BucketName = %q", d.BucketName)
	}
	if s.BucketName(99) != "" {
		t.Error("unknown id has a name")
	}
}

// FuzzSelect feeds arbitrary specs to Select: it never panics, fails
// exactly when Validate does, and otherwise names a capable backend.
func FuzzSelect(f *testing.F) {
	f.Add(uint8(1), uint8(0), uint8(2), int16(64), int16(512), int16(512), int16(256), false, float32(0))
	f.Add(uint8(0), uint8(1), uint8(3), int16(8), int16(-1), int16(3), int16(0), true, float32(1))
	f.Add(uint8(4), uint8(0), uint8(3), int16(1), int16(8), int16(16), int16(64), true, float32(0.5))
	f.Add(uint8(4), uint8(0), uint8(3), int16(4), int16(4), int16(4), int16(4), true, float32(0))
	s := newTestScheduler(f, Config{Seed: 1})
	f.Fuzz(func(t *testing.T, op, dt, nIn uint8, d0, d1, d2, d3 int16, causal bool, scale float32) {
		dims := []int{int(d0), int(d1), int(d2), int(d3)}
		spec := kernels.Spec{Op: kernels.Op(op % 20), DType: kernels.DType(dt % 6),
			Params: kernels.Params{Causal: causal, Scale: scale, Name: "x", Bytes: int64(d3), Keys: int(d1) % 9}}
		for i := range int(nIn % 5) {
			rank := 1 + (i+int(op))%4
			sh := make(kernels.Shape, rank)
			for j := range sh {
				sh[j] = dims[(i+j)%4]
			}
			spec.In = append(spec.In, sh)
		}
		d, err := s.Select(spec, Residency{})
		verr := spec.Validate()
		switch {
		case verr != nil && err == nil:
			t.Fatalf("%v: invalid (%v) but selected %s", spec, verr, d.Name)
		case verr == nil && err != nil && !errors.Is(err, ErrNoBackend):
			t.Fatalf("%v: valid but %v", spec, err)
		case err == nil && s.cfg.Backends[d.Backend].Supports(spec) != nil:
			t.Fatalf("%v: chose %s, which does not support it", spec, d.Name)
		}
	})
}

// TestSelectObserveAllocs holds DESIGN.md § The data path's "0 allocs":
// once an op's shape has been seen, Select and Observe allocate nothing,
// nor do Bucket and SelectOn, a placement's path.
func TestSelectObserveAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	mm := matmul(8, 256, 256)
	var res Residency
	res.Add(Host, mm.InBytes(0))
	res.Add(Backend(1), mm.InBytes(1))
	for _, placed := range []bool{false, true} {
		s := newTestScheduler(t, Config{Seed: 1})
		sel := func() (Decision, error) {
			if !placed {
				return s.Select(mm, res)
			}
			if _, err := s.Bucket(mm); err != nil {
				return Decision{}, err
			}
			return s.SelectOn(mm, res, 1, 0, 0)
		}
		if d, err := sel(); err == nil {
			s.Observe(d, us(10))
		}
		n := testing.AllocsPerRun(200, func() {
			d, err := sel()
			if err != nil {
				t.Fatal(err)
			}
			s.Observe(d, us(10))
		})
		if n != 0 {
			t.Errorf("placed %v: %v allocations per Select+Observe, want 0", placed, n)
		}
	}
}

// TestSchedulerAccessors checks the read-only views of the configuration
// (BackendName, Shared, Allowed) that the Executor reads instead of
// keeping copies.
func TestSchedulerAccessors(t *testing.T) {
	s := newTestScheduler(t, Config{})
	if s.BackendName(0) != "cpu" || s.BackendName(1) != "gpu" || s.BackendName(2) != "" || s.BackendName(-1) != "" {
		t.Errorf("names %q %q %q", s.BackendName(0), s.BackendName(1), s.BackendName(2))
	}
	if s.Shared() != Backend(0) {
		t.Errorf("Shared = %b, want the cpu", s.Shared())
	}
	if s.Allowed() != Backend(0)|Backend(1) {
		t.Errorf("Allowed = %b, want both", s.Allowed())
	}
	if only := newTestScheduler(t, Config{Strategy: Only("gpu")}); only.Allowed() != Backend(1) {
		t.Errorf("Only(gpu): Allowed = %b", only.Allowed())
	}
}
