package adaptive

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/kernels"
)

var testArms = []bandit.Arm{
	{Name: "cpu", Nominal: bandit.Figures{GFLOPS: 100, MemGBps: 50, DispatchUs: 1}},
	{Name: "gpu", GPU: true, Nominal: bandit.Figures{GFLOPS: 10000, MemGBps: 1000, DispatchUs: 10, LinkGBps: 25, LinkLatencyUs: 20}},
}

// task builds the bandit.Task of spec as the simulator's harness does.
func task(bucket int, spec kernels.Spec) *bandit.Task {
	w := spec.Work()
	return &bandit.Task{Bucket: bucket, Op: spec.Op.String(), Class: bandit.Matrix,
		FLOPs: float64(w.FLOPs), BytesRead: float64(w.BytesRead), BytesWritten: float64(w.BytesWritten)}
}

// TestThompsonPolicy checks the "thompson" policy: it learns the same
// crossover as TestConvergence through the bandit.Policy interface
// (tolerance: 90% right in the last third on buckets 2× apart), and it
// charges Task.Transfer over the arm's link.
func TestThompsonPolicy(t *testing.T) {
	p, err := NewThompson(bandit.Config{}, testArms)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != "thompson" {
		t.Errorf("name %q", p.Name())
	}
	var tasks []*bandit.Task
	for m := 1; m <= 512; m *= 2 {
		tasks = append(tasks, task(len(tasks), matmul(m, 1024, 1024)))
	}
	truth := func(tk *bandit.Task, arm int) float64 {
		if arm == 0 {
			return 2 + tk.FLOPs/100e3
		}
		return 300 + tk.FLOPs/5e6
	}
	r := rand.New(rand.NewPCG(21, 22))
	right, total := 0, 0
	const steps = 6000
	for i := range steps {
		tk := tasks[i%len(tasks)]
		arm := p.Choose(tk)
		p.Observe(tk, arm, lognormal(r, truth(tk, arm), 0.1))
		c, g := truth(tk, 0), truth(tk, 1)
		if i >= steps*2/3 && max(c, g)/min(c, g) >= 2 {
			total++
			if (c < g) == (arm == 0) {
				right++
			}
		}
	}
	if float64(right) < 0.9*float64(total) {
		t.Errorf("right %d of %d", right, total)
	}

	// 1 GiB to move makes the GPU (prior 13 µs of compute) lose to the
	// CPU on a fresh bucket; nothing to move, the GPU wins.
	q, _ := NewThompsonSeed(bandit.Config{}, testArms, 5)
	tk := task(0, matmul(1, 16384, 16384))
	tk.Transfer = []float64{0, 1 << 30}
	if arm := q.Choose(tk); arm != 0 {
		t.Errorf("with 1 GiB to move: arm %d, want the cpu", arm)
	}
	tk = task(1, matmul(2, 16384, 16384))
	if arm := q.Choose(tk); arm != 1 {
		t.Errorf("nothing to move: arm %d, want the gpu", arm)
	}
	// The CPU has no link of its own: bytes resident on the GPU reach it
	// over the GPU's link (1 GiB at 25 GB/s: 43 ms). A 1×16384 add, which
	// the CPU wins on its own (1 µs dispatch against the GPU's 10), goes
	// to the GPU when its input must first come back from there.
	add := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{1, 16384}, {1, 16384}}}
	tk = task(2, add)
	if arm := q.Choose(tk); arm != 0 {
		t.Errorf("small add, nothing to move: arm %d, want the cpu", arm)
	}
	tk = task(3, add)
	tk.Transfer = []float64{1 << 30, 0}
	if arm := q.Choose(tk); arm != 1 {
		t.Errorf("small add with 1 GiB to bring back from the gpu: arm %d, want the gpu", arm)
	}
	for _, arms := range [][]bandit.Arm{nil, make([]bandit.Arm, 9)} {
		if _, err := NewThompson(bandit.Config{}, arms); !errors.Is(err, ErrConfig) {
			t.Errorf("%d arms: %v", len(arms), err)
		}
	}
	if _, err := NewThompson(bandit.Config{Discount: -1}, testArms); !errors.Is(err, ErrConfig) {
		t.Errorf("bad config: %v", err)
	}
}

// TestBucketName checks names and half-octave classes worked out by hand.
func TestBucketName(t *testing.T) {
	cases := []struct {
		spec kernels.Spec
		want string
	}{
		// 2·64·4096·4096 = 2^31 FLOPs: class 62.
		{matmul(64, 4096, 4096), "MatMul/f32/s62"},
		// 1000 FLOPs, 12,000 bytes: 2·log2(12000) = 27.1.
		{kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{1000}, {1000}}}, "Add/f32/s27"},
		// An opaque op with 1 MiB of traffic: class 40.
		{kernels.Spec{Op: kernels.Opaque, DType: kernels.F16, In: []kernels.Shape{{8}}, Params: kernels.Params{Name: "aten::cat", Bytes: 1 << 20}}, "Opaque:aten::cat/f16/s40"},
		{kernels.Spec{Op: kernels.MatMul, In: []kernels.Shape{{2, 3}}}, ""},
	}
	for _, c := range cases {
		if got := BucketName(c.spec); got != c.want {
			t.Errorf("%v: %q, want %q", c.spec, got, c.want)
		}
	}
	// The class boundary 2^10.5 = 1448.15.
	for flops, want := range map[int64]int{1 << 10: 20, 1448: 20, 1449: 21, 0: 0, 1: 0} {
		if got := SizeClass(kernels.Work{FLOPs: flops}); got != want {
			t.Errorf("SizeClass(%d FLOPs) = %d, want %d", flops, got, want)
		}
	}
	s := newTestScheduler(t, Config{})
	d, _ := s.Select(matmul(64, 4096, 4096), Residency{})
	if got := s.BucketName(d.Bucket); got != "MatMul/f32/s62" {
		t.Errorf("Scheduler.BucketName = %q", got)
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
	s := newTestScheduler(f, Config{Seed: 1})
	f.Fuzz(func(t *testing.T, op, dt, nIn uint8, d0, d1, d2, d3 int16, causal bool, scale float32) {
		dims := []int{int(d0), int(d1), int(d2), int(d3)}
		spec := kernels.Spec{Op: kernels.Op(op % 20), DType: kernels.DType(dt % 6), Params: kernels.Params{Causal: causal, Scale: scale, Name: "x", Bytes: int64(d3)}}
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
