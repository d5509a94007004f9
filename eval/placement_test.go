package eval

import (
	"slices"
	"testing"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

var (
	testCPU = backends.Info{Name: "cpu", Kind: backends.CPU, SharedMemory: true,
		Nominal: backends.Nominal{GFLOPS: 100, MemGBps: 50, DispatchUs: 1}}
	testGPU = backends.Info{Name: "gpu", Kind: backends.GPU,
		Nominal: backends.Nominal{GFLOPS: 10000, MemGBps: 1000, DispatchUs: 10, LinkGBps: 25, LinkLatencyUs: 20}}
)

// lacking is a described backend that cannot run one op.
type lacking struct {
	backends.Backend
	op kernels.Op
}

func (b lacking) Supports(s kernels.Spec) error {
	if s.Op == b.op {
		return backends.ErrUnsupported
	}
	return nil
}

// harnessTask builds spec's Task the way the harness does, independently
// of Placement's code.
func harnessTask(bucket int, spec kernels.Spec, transfer []float64) Task {
	w := spec.Work()
	return Task{Bucket: bucket, Op: spec.Op.String(), Class: spec.Op.Class(),
		Elements: spec.OutShape().Elements(), FLOPs: float64(w.FLOPs),
		BytesRead: float64(w.BytesRead), BytesWritten: float64(w.BytesWritten), Transfer: transfer}
}

// TestPlacementMatchesPolicy: the static baselines run through the
// Scheduler as the Executor runs a Placer (Bucket, Place, SelectOn) pick
// what the policies pick on the harness's Task, with Reason
// UserPreference; a pick the backend cannot run falls back to the bandit
// (Reason Unsupported).
func TestPlacementMatchesPolicy(t *testing.T) {
	mm := func(m, k, n int) kernels.Spec {
		return kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{m, k}, {k, n}}}
	}
	specs := []kernels.Spec{
		mm(1, 768, 768),
		mm(512, 4096, 4096),
		{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{1, 768}, {1, 768}}},
		{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{4096, 4096}, {4096, 4096}}},
		{Op: kernels.RMSNorm, DType: kernels.F32, In: []kernels.Shape{{16, 768}, {768}}},
		{Op: kernels.Softmax, DType: kernels.F32, In: []kernels.Shape{{64, 512}}}, // the GPU lacks it
	}
	makers := map[string]func([]Arm) Policy{
		"static2x": NewStatic2x, "pcie5x": NewPCIe5x, "thresholds": NewThresholds, "roofline": NewRoofline,
	}
	for name, mk := range makers {
		t.Run(name, func(t *testing.T) {
			bes := []backends.Backend{
				lacking{backends.Described(testCPU), kernels.RoPE},
				lacking{backends.Described(testGPU), kernels.Softmax},
			}
			arms := ArmsOf(bes)
			pl := Placement(mk(arms), arms)
			s, err := adaptive.New(adaptive.Config{Backends: bes, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ref := mk(arms)
			for _, spec := range specs {
				var res adaptive.Residency
				res.Add(adaptive.Host, spec.InBytes(0))
				b, err := s.Bucket(spec)
				if err != nil {
					t.Fatal(err)
				}
				d, err := s.SelectOn(spec, res, pl.Place(spec, res, b), 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				// Inputs in host memory: the GPU lacks them, the CPU has them.
				task := harnessTask(int(d.Bucket), spec, []float64{0, float64(spec.InBytes(0))})
				want := ref.Choose(&task)
				reason := adaptive.UserPreference
				if bes[want].Supports(spec) != nil {
					want, reason = 1-want, adaptive.Unsupported
				}
				if d.Backend != want || d.Reason != reason {
					t.Errorf("%v: %s (%v), want %s (%v)", spec, d.Name, d.Reason, arms[want].Name, reason)
				}
			}
		})
	}
}

// taskRecorder keeps the Tasks it is asked with.
type taskRecorder struct{ tasks []Task }

func (r *taskRecorder) Name() string { return "tasks" }
func (r *taskRecorder) Choose(t *Task) int {
	c := *t
	c.Transfer, c.Spec = slices.Clone(t.Transfer), nil
	r.tasks = append(r.tasks, c)
	return 1
}
func (r *taskRecorder) Observe(*Task, int, float64) {}

// TestPlacementTask: the policy is told the harness's Task, the residency
// turned into Transfer bytes per arm (nil when nothing is said of it).
func TestPlacementTask(t *testing.T) {
	arms := []Arm{ArmOf(testCPU), ArmOf(testGPU)}
	rec := &taskRecorder{}
	pl := Placement(rec, arms)
	spec := kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{8, 256}, {256, 256}}}
	var res adaptive.Residency
	res.Add(adaptive.Backend(1), spec.InBytes(0)) // on the GPU only
	res.Add(0, spec.InBytes(1))                   // host memory
	if got := pl.Place(spec, res, 5); got != 1 {
		t.Fatalf("Place = %d", got)
	}
	want := harnessTask(5, spec, []float64{float64(spec.InBytes(0)), float64(spec.InBytes(1))})
	got := rec.tasks[0]
	got.Res = adaptive.Residency{}
	if got.Bucket != want.Bucket || got.Op != want.Op || got.Class != want.Class || got.Elements != want.Elements ||
		got.FLOPs != want.FLOPs || got.BytesRead != want.BytesRead || got.BytesWritten != want.BytesWritten ||
		!slices.Equal(got.Transfer, want.Transfer) {
		t.Errorf("task %+v, want %+v", got, want)
	}
	pl.Place(spec, adaptive.Residency{}, 5)
	if rec.tasks[1].Transfer != nil {
		t.Errorf("zero Residency: Transfer %v, want nil", rec.tasks[1].Transfer)
	}
}

// TestArmOf: the arms a policy sees for backends; a GPU's round trip is
// two copy latencies, or two dispatches when it shares host memory.
func TestArmOf(t *testing.T) {
	gpu := ArmOf(testGPU)
	want := Figures{GFLOPS: 10000, MemGBps: 1000, DispatchUs: 10, RoundTripUs: 40, LinkGBps: 25, LinkLatencyUs: 20}
	if !gpu.GPU || gpu.Name != "gpu" || gpu.Nominal != want {
		t.Errorf("ArmOf(gpu) = %+v, want %+v", gpu, want)
	}
	igpu := ArmOf(backends.Info{Name: "igpu", Kind: backends.GPU, SharedMemory: true, Nominal: backends.Nominal{DispatchUs: 5}})
	if igpu.Nominal.RoundTripUs != 10 {
		t.Errorf("shared GPU round trip %v, want 10", igpu.Nominal.RoundTripUs)
	}
	if cpu := ArmOf(testCPU); cpu.GPU || cpu.Nominal.RoundTripUs != 0 {
		t.Errorf("ArmOf(cpu) = %+v", cpu)
	}
}
