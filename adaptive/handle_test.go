package adaptive

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/adaptsched/adaptsched/kernels"
)

// TestHandleSameDecisions: deciding by handle (Handle.Select) is
// deciding by spec (DESIGN.md § The data path): two schedulers of one
// seed, one asked by spec, one by handle, make the same decisions with
// the same estimates and transfers over 3,000 ops of 30 specs whose
// residency changes, while the links learn (which a handle's cached
// transfers must follow). Every other op goes by SelectInto into one
// reused Decision and back by ObserveRef, or by ObserveTicket of its
// Ticket alone, the Decision cleared.
func TestHandleSameDecisions(t *testing.T) {
	bySpec := newTestScheduler(t, Config{Seed: 5})
	byHandle := newTestScheduler(t, Config{Seed: 5})
	specs := benchSpecs(30)
	handles := handlesOf(t, byHandle, specs)
	r := rand.New(rand.NewPCG(9, 9))
	var reused Decision
	for step := range 3000 {
		i := step % len(specs)
		var res Residency
		res.Add(Host, specs[i].InBytes(0))
		if len(specs[i].In) > 1 && r.IntN(3) > 0 {
			res.Add(Backend(1), specs[i].InBytes(1))
		}
		a, err := bySpec.Select(specs[i], res)
		if err != nil {
			t.Fatal(err)
		}
		var b Decision
		if step%2 == 0 {
			b, err = handles[i].Select(res)
		} else {
			err = handles[i].SelectInto(&reused, &res, 0, 0)
			b = reused
		}
		if err != nil {
			t.Fatal(err)
		}
		if a.Backend != b.Backend || a.Reason != b.Reason || a.Bucket != b.Bucket ||
			!sameFloats(a.Estimates[:], b.Estimates[:]) || a.Transfer != b.Transfer {
			t.Fatalf("step %d: by spec %v %v %v %v, by handle %v %v %v %v", step,
				a.Name, a.Reason, a.Estimates, a.Transfer, b.Name, b.Reason, b.Estimates, b.Transfer)
		}
		took := us(float64(10 + r.IntN(500)))
		bySpec.Observe(a, took)
		if step%2 == 0 {
			byHandle.Observe(b, took)
		} else if step%3 == 0 {
			tk := reused.Ticket
			reused = Decision{}
			if err := byHandle.ObserveTicket(&tk, took); err != nil {
				t.Fatal(err)
			}
		} else if err := byHandle.ObserveRef(&reused, took); err != nil {
			t.Fatal(err)
		}
		if step%97 == 0 {
			took := us(float64(50 + r.IntN(500)))
			for _, s := range []*Scheduler{bySpec, byHandle} {
				if err := s.ObserveTransfer("gpu", true, 1<<20, took); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// handlesOf returns s's handles on specs, in order.
func handlesOf(t *testing.T, s *Scheduler, specs []kernels.Spec) []*Handle {
	t.Helper()
	handles := make([]*Handle, len(specs))
	for i, sp := range specs {
		h, err := s.Handle(sp)
		if err != nil {
			t.Fatal(err)
		}
		handles[i] = h
	}
	return handles
}

// sameFloats reports whether a and b hold the same values, NaN matching NaN.
func sameFloats(a, b []float64) bool {
	for i := range a {
		if a[i] != b[i] && !(a[i] != a[i] && b[i] != b[i]) {
			return false
		}
	}
	return true
}

// TestHandleErrors: an invalid spec gets Validate's error and no handle;
// a closed Scheduler refuses handles and decisions by handle.
func TestHandleErrors(t *testing.T) {
	s := newTestScheduler(t, Config{Seed: 1})
	if _, err := s.Handle(kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{2, 3}, {4, 5}}}); err == nil {
		t.Error("a matmul of 2×3 by 4×5: no error")
	}
	h, err := s.Handle(matmul(8, 8, 8))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := h.Select(Residency{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Select by handle after Close: %v, want ErrClosed", err)
	}
	d := Decision{Ticket: Ticket{Backend: 1}}
	if err := h.SelectInto(&d, &Residency{}, 0, 0); !errors.Is(err, ErrClosed) || d.Backend != 0 {
		t.Errorf("SelectInto after Close: %v, backend %d, want ErrClosed and a zero Decision", err, d.Backend)
	}
	if _, err := s.Handle(matmul(8, 8, 8)); !errors.Is(err, ErrClosed) {
		t.Errorf("Handle after Close: %v, want ErrClosed", err)
	}
}

// TestHandleSelectOnSame: a caller's placement by handle
// (Handle.SelectOnInto, the Executor's placed ops) is SelectOn by spec:
// two schedulers of one seed make the same decisions, reasons, estimates
// and transfers over 2,000 ops of 20 specs, the arm asked for varying
// (a backend, one out of range, one excluded), while the links learn.
func TestHandleSelectOnSame(t *testing.T) {
	bySpec := newTestScheduler(t, Config{Seed: 3})
	byHandle := newTestScheduler(t, Config{Seed: 3})
	specs := benchSpecs(20)
	handles := handlesOf(t, byHandle, specs)
	r := rand.New(rand.NewPCG(4, 4))
	var d Decision
	reasons := map[Reason]int{}
	for step := range 2000 {
		i := step % len(specs)
		var res Residency
		res.Add(Host, specs[i].InBytes(0))
		if len(specs[i].In) > 1 && r.IntN(2) > 0 {
			res.Add(Backend(1), specs[i].InBytes(1))
		}
		arm := r.IntN(3) // 2 is out of range: the bandit chooses
		var exclude Mask
		var why Reason
		if r.IntN(5) == 0 {
			exclude, why = Backend(1), Fallback // every spec runs on the cpu
		}
		a, err := bySpec.SelectOn(specs[i], res, arm, exclude, why)
		if err != nil {
			t.Fatal(err)
		}
		if err := handles[i].SelectOnInto(&d, &res, arm, exclude, why); err != nil {
			t.Fatal(err)
		}
		if a.Backend != d.Backend || a.Reason != d.Reason || a.Bucket != d.Bucket ||
			!sameFloats(a.Estimates[:], d.Estimates[:]) || a.Transfer != d.Transfer {
			t.Fatalf("step %d, arm %d: by spec %v %v %v %v, by handle %v %v %v %v", step, arm,
				a.Name, a.Reason, a.Estimates, a.Transfer, d.Name, d.Reason, d.Estimates, d.Transfer)
		}
		reasons[d.Reason]++
		took := us(float64(10 + r.IntN(500)))
		bySpec.Observe(a, took)
		if err := byHandle.ObserveRef(&d, took); err != nil {
			t.Fatal(err)
		}
		if step%97 == 0 {
			for _, s := range []*Scheduler{bySpec, byHandle} {
				if err := s.ObserveTransfer("gpu", true, 1<<20, us(float64(50+step%500))); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if reasons[UserPreference] == 0 || reasons[Unsupported] == 0 || reasons[Fallback] == 0 {
		t.Errorf("reasons %v: want placements that stood, fell to the bandit and were excluded", reasons)
	}
	byHandle.Close()
	if err := handles[0].SelectOnInto(&d, &Residency{}, 0, 0, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}
