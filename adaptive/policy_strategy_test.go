package adaptive

import (
	"errors"
	"slices"
	"testing"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/kernels"
)

// harnessTask builds spec's Task the way sim's harness does (DESIGN.md §
// Evaluation), independently of the Scheduler's code.
func harnessTask(bucket int, spec kernels.Spec, transfer []float64) *bandit.Task {
	w := spec.Work()
	return &bandit.Task{Bucket: bucket, Op: spec.Op.String(), Class: bandit.Class(spec.Op.Class()),
		Elements: spec.OutShape().Elements(), FLOPs: float64(w.FLOPs),
		BytesRead: float64(w.BytesRead), BytesWritten: float64(w.BytesWritten), Transfer: transfer}
}

// recorder is a Placement policy that picks a fixed arm and records what
// it is told.
type recorder struct {
	arm      int
	chosen   []bandit.Task
	observed []float64
	arms     []int
}

func (r *recorder) Name() string { return "recorder" }
func (r *recorder) Choose(t *bandit.Task) int {
	c := *t
	c.Transfer = slices.Clone(t.Transfer)
	r.chosen = append(r.chosen, c)
	return r.arm
}
func (r *recorder) Observe(t *bandit.Task, arm int, us float64) {
	r.observed = append(r.observed, us)
	r.arms = append(r.arms, arm)
}

// TestPlacementMatchesPolicy: the static baselines of DESIGN.md §
// Evaluation run through the Scheduler pick what the bandit package's
// policies pick on the harness's Task, with Reason UserPreference; a pick
// the backend cannot run falls back to the bandit (Reason Unsupported).
func TestPlacementMatchesPolicy(t *testing.T) {
	specs := []kernels.Spec{
		matmul(1, 768, 768),
		matmul(512, 4096, 4096),
		{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{1, 768}, {1, 768}}},
		{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{4096, 4096}, {4096, 4096}}},
		{Op: kernels.RMSNorm, DType: kernels.F32, In: []kernels.Shape{{16, 768}, {768}}},
		{Op: kernels.Softmax, DType: kernels.F32, In: []kernels.Shape{{64, 512}}}, // the GPU lacks it
	}
	for _, name := range []string{"static2x", "pcie5x", "thresholds", "roofline"} {
		t.Run(name, func(t *testing.T) {
			bes := []backends.Backend{
				newFake("cpu", backends.CPU, cpuNominal, kernels.RoPE),
				newFake("gpu", backends.GPU, gpuNominal, kernels.Softmax),
			}
			arms := ArmsOf(bes)
			mk := map[string]func([]bandit.Arm) bandit.Policy{
				"static2x": bandit.NewStatic2x, "pcie5x": bandit.NewPCIe5x,
				"thresholds": bandit.NewThresholds, "roofline": bandit.NewRoofline,
			}[name]
			s := newTestScheduler(t, Config{Backends: bes, Strategy: Placement(mk(arms)), Seed: 3})
			if got, want := s.cfg.Strategy.String(), "placement("+name+")"; got != want {
				t.Errorf("String() = %q, want %q", got, want)
			}
			ref := mk(arms)
			for _, spec := range specs {
				var res Residency
				res.Add(Host, spec.InBytes(0))
				d, err := s.Select(spec, res)
				if err != nil {
					t.Fatal(err)
				}
				// Inputs in host memory: the GPU lacks them, the CPU has them.
				want := ref.Choose(harnessTask(int(d.Bucket), spec, []float64{0, float64(spec.InBytes(0))}))
				reason := UserPreference
				if bes[want].Supports(spec) != nil {
					want, reason = 1-want, Unsupported
				}
				if d.Backend != want || d.Reason != reason {
					t.Errorf("%v: %s (%v), want %s (%v)", spec, d.Name, d.Reason, arms[want].Name, reason)
				}
			}
		})
	}
}

// TestPlacementTaskAndObserve: the policy is told the harness's Task
// (residency turned into Transfer bytes per arm), excluded or incapable
// picks fall back, and Observe forwards the compute duration.
func TestPlacementTaskAndObserve(t *testing.T) {
	rec := &recorder{arm: 1}
	s := newTestScheduler(t, Config{Strategy: Placement(rec), Seed: 1})
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
	want := harnessTask(int(d.Bucket), mm, []float64{float64(mm.InBytes(0)), float64(mm.InBytes(1))})
	got := rec.chosen[0]
	if got.Bucket != want.Bucket || got.Op != want.Op || got.Class != want.Class || got.Elements != want.Elements ||
		got.FLOPs != want.FLOPs || got.BytesRead != want.BytesRead || got.BytesWritten != want.BytesWritten ||
		!slices.Equal(got.Transfer, want.Transfer) {
		t.Errorf("task %+v, want %+v", got, *want)
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
	if len(rec.chosen) != 3 || rec.chosen[2].Transfer != nil {
		t.Errorf("zero Residency: Transfer %v, want nil", rec.chosen[len(rec.chosen)-1].Transfer)
	}
}

// opOracle is an OpChooser: the CPU for matmuls narrower than 64 rows.
type opOracle struct{ recorder }

func (o *opOracle) ChooseOp(spec kernels.Spec, res Residency, t *bandit.Task) int {
	if spec.In[0][0] < 64 {
		return 0
	}
	return 1
}

// TestPlacementOpChooser: a policy implementing OpChooser is asked with
// the spec instead of Choose.
func TestPlacementOpChooser(t *testing.T) {
	o := &opOracle{}
	s := newTestScheduler(t, Config{Strategy: Placement(o), Seed: 1})
	for m, want := range map[int]string{1: "cpu", 63: "cpu", 64: "gpu", 512: "gpu"} {
		d, err := s.Select(matmul(m, 256, 256), Residency{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Name != want {
			t.Errorf("m=%d: %s, want %s", m, d.Name, want)
		}
	}
	if len(o.chosen) != 0 {
		t.Errorf("Choose called %d times, want 0", len(o.chosen))
	}
}

// TestPlacementConfig: a nil policy is a configuration error.
func TestPlacementConfig(t *testing.T) {
	_, err := New(Config{Backends: []backends.Backend{newFake("cpu", backends.CPU, cpuNominal)},
		Strategy: Placement(nil), CalibrationFile: "-"})
	if !errors.Is(err, ErrConfig) {
		t.Errorf("err = %v, want ErrConfig", err)
	}
	if got := Placement(nil).String(); got != "placement(nil)" {
		t.Errorf("String() = %q", got)
	}
}

// TestArmOf: the arms a policy sees for backends, as sim.Profile.Arm
// builds them.
func TestArmOf(t *testing.T) {
	gpu := ArmOf(backends.Info{Name: "gpu", Kind: backends.GPU, Nominal: gpuNominal})
	want := bandit.Arm{Name: "gpu", GPU: true, Nominal: bandit.Figures{GFLOPS: 10000, MemGBps: 1000, DispatchUs: 10,
		RoundTripUs: 40, LinkGBps: 25, LinkLatencyUs: 20}}
	if gpu != want {
		t.Errorf("ArmOf(gpu) = %+v, want %+v", gpu, want)
	}
	igpu := ArmOf(backends.Info{Name: "igpu", Kind: backends.GPU, SharedMemory: true, Nominal: backends.Nominal{DispatchUs: 5}})
	if igpu.Nominal.RoundTripUs != 10 {
		t.Errorf("shared GPU round trip %v, want 10", igpu.Nominal.RoundTripUs)
	}
	if cpu := ArmOf(backends.Info{Name: "cpu", Kind: backends.CPU, Nominal: cpuNominal}); cpu.GPU || cpu.Nominal.RoundTripUs != 0 {
		t.Errorf("ArmOf(cpu) = %+v", cpu)
	}
}
