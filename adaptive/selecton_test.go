package adaptive

import (
	"testing"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/learned"
)

// TestSelectOn: the caller's backend stands (UserPreference) with the
// bucket that Bucket named; an excluded, out-of-range or incapable one
// falls back to the bandit (Unsupported, or the caller's why); Observe
// learns from the decision.
func TestSelectOn(t *testing.T) {
	s := newTestScheduler(t, Config{Seed: 1})
	mm := matmul(8, 256, 256)
	var res Residency
	res.Add(Backend(1), mm.InBytes(0)) // on the GPU only
	res.Add(0, mm.InBytes(1))          // host memory
	id, err := s.Bucket(mm)
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.SelectOn(mm, res, 1, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "gpu" || d.Reason != UserPreference || d.Bucket != id {
		t.Fatalf("got %s (%v) in bucket %d, want gpu (UserPreference) in %d", d.Name, d.Reason, d.Bucket, id)
	}
	if err := s.Observe(d, us(42)); err != nil {
		t.Fatal(err)
	}
	if tel := s.Telemetry(); tel.Backends[1].Ops != 1 || tel.Reasons[UserPreference] != 1 {
		t.Errorf("telemetry %+v: want the op counted on gpu, as UserPreference", tel.Backends)
	}
	// Excluded after a failure: the bandit picks among the rest.
	if d, err = s.SelectOn(mm, res, 1, Backend(1), Fallback); err != nil || d.Name != "cpu" || d.Reason != Fallback {
		t.Errorf("excluded: %s (%v, %v), want cpu (Fallback)", d.Name, d.Reason, err)
	}
	for _, arm := range []int{7, -1} {
		if d, err = s.SelectOn(mm, Residency{}, arm, 0, 0); err != nil || d.Reason != Unsupported {
			t.Errorf("arm %d: %v (%v), want Unsupported", arm, d.Reason, err)
		}
	}
	// A backend that cannot run the op: the bandit's choice, Unsupported.
	bes := []backends.Backend{newFake("cpu", backends.CPU, cpuNominal, kernels.Softmax), newFake("gpu", backends.GPU, gpuNominal)}
	s2 := newTestScheduler(t, Config{Backends: bes, Seed: 1})
	sm := kernels.Spec{Op: kernels.Softmax, DType: kernels.F32, In: []kernels.Shape{{64, 512}}}
	if d, err = s2.SelectOn(sm, Residency{}, 0, 0, 0); err != nil || d.Name != "gpu" || d.Reason != Unsupported {
		t.Errorf("incapable pick: %s (%v, %v), want gpu (Unsupported)", d.Name, d.Reason, err)
	}
	if _, err := s2.Bucket(kernels.Spec{Op: kernels.MatMul}); err == nil {
		t.Error("Bucket of an invalid spec: no error")
	}
}

// TestLacking: bytes in host memory are resident on the shared-memory
// backends, bytes on a GPU only there; the rule Select prices transfers
// by.
func TestLacking(t *testing.T) {
	var r Residency
	r.Add(0, 100)         // host memory
	r.Add(Backend(1), 10) // the GPU
	r.Add(Backend(0), 1)  // the CPU, which reads host memory
	got := r.Lacking(Backend(0), 2)
	if got[0] != 10 || got[1] != 101 {
		t.Errorf("lacking %v, want cpu 10, gpu 101", got[:2])
	}
}

// TestSelectOnUnderOnly: under Only the strategy's backend is the only
// one allowed (Allowed), so a caller's other backend does not stand, nor
// does the bandit choose among the rest.
func TestSelectOnUnderOnly(t *testing.T) {
	s := newTestScheduler(t, Config{Seed: 1, Strategy: Only("cpu")})
	mm := matmul(8, 256, 256)
	for range 20 {
		d, err := s.SelectOn(mm, Residency{}, 1, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if d.Name != "cpu" {
			t.Fatalf("SelectOn gpu under only:cpu: %s (%v)", d.Name, d.Reason)
		}
		if err := s.Observe(d, us(42)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOnlyNoProbe: under Only the fleet's evidence of another backend is
// not tested on this node (verify.go's probe): that would run ops where
// the user said not to.
func TestOnlyNoProbe(t *testing.T) {
	s := newTestScheduler(t, Config{Seed: 1, Strategy: Only("cpu")})
	f := s.Fold()
	for _, w := range verifyWork {
		k := learned.Key{Backend: "gpu", Bucket: kernels.BucketName(w.spec)}
		f.Foreign([]learned.Foreign{{Key: k, Stats: claim(50, w.gpu)}})
	}
	for i := range 200 {
		w := verifyWork[i%len(verifyWork)]
		d, err := s.Select(w.spec, Residency{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Name != "cpu" {
			t.Fatalf("op %d under only:cpu ran on %s (%v)", i, d.Name, d.Reason)
		}
		if err := s.Observe(d, us(w.cpu)); err != nil {
			t.Fatal(err)
		}
	}
}
