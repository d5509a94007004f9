package eval

import (
	"math/rand/v2"
	"testing"

	"github.com/adaptsched/adaptsched/bandit/bandittest"
	"github.com/adaptsched/adaptsched/kernels"
)

var (
	cpuArm = Arm{Name: "cpu", Nominal: Figures{GFLOPS: 1000, MemGBps: 100, DispatchUs: 1}}
	gpuArm = Arm{Name: "rocm", GPU: true, Nominal: Figures{GFLOPS: 50_000, MemGBps: 2000, DispatchUs: 5, RoundTripUs: 10, LinkGBps: 25, LinkLatencyUs: 10}}
	// 4096³ f32 matmul: 2·4096³ FLOPs; reads 2·4096²·4 B, writes 4096²·4 B.
	bigMatMul = Task{Op: "MatMul", Class: kernels.Matrix, Elements: 4096 * 4096, FLOPs: 2 * 4096 * 4096 * 4096,
		BytesRead: 2 * 4096 * 4096 * 4, BytesWritten: 4096 * 4096 * 4}
	// 1×4096 f32 add: 4096 FLOPs, reads 2·4096·4 B, writes 4096·4 B.
	smallAdd = Task{Op: "Add", Class: kernels.ElementWise, Elements: 4096, FLOPs: 4096, BytesRead: 2 * 4096 * 4, BytesWritten: 4096 * 4}
)

// TestStaticRules checks each static baseline (DESIGN.md § What it
// replaces) against decisions worked out by hand; arms are {cpu, gpu}
// (indices 0, 1) unless the case says cpuOnly.
func TestStaticRules(t *testing.T) {
	arms := []Arm{cpuArm, gpuArm}
	cpuOnly := []Arm{cpuArm}
	highIntensity := Task{Op: "MatMul", Class: kernels.Matrix, Elements: 1 << 20, FLOPs: 1e13, BytesRead: 1e7, BytesWritten: 4e6}
	reduction := func(n int64) Task {
		return Task{Op: "Softmax", Class: kernels.Reduction, Elements: n, BytesRead: float64(4 * n), BytesWritten: float64(4 * n)}
	}
	matrix := func(n int64) Task {
		return Task{Op: "MatMul", Class: kernels.Matrix, Elements: n, FLOPs: 1e6, BytesRead: 1e4}
	}
	cases := []struct {
		name string
		p    Policy
		task Task
		want int
	}{
		// static2x: CPU = 1.1 × GPU never < GPU/2: always the GPU.
		{"static2x/matmul", NewStatic2x(arms), bigMatMul, 1},
		{"static2x/add", NewStatic2x(arms), smallAdd, 1},
		{"static2x/no-gpu", NewStatic2x(cpuOnly), bigMatMul, 0},
		// pcie5x: 4096³ matmul computes 1.374e11/20e12 = 6.87 ms but moves
		// 201 MB / 32 GB/s = 6.29 ms; 6.87 < 5·6.29 → CPU.
		{"pcie5x/4096³", NewPCIe5x(arms), bigMatMul, 0},
		// add: 4096/20e12 = 0.2 ns vs 49 KB / 32 GB/s = 1.5 µs → CPU.
		{"pcie5x/add", NewPCIe5x(arms), smallAdd, 0},
		// 1e13 FLOPs = 0.5 s vs 14 MB = 0.44 ms; 0.5 > 2.2 ms → GPU.
		{"pcie5x/intense", NewPCIe5x(arms), highIntensity, 1},
		{"pcie5x/no-gpu", NewPCIe5x(cpuOnly), highIntensity, 0},
		{"thresholds/add-16M", NewThresholds(arms), Task{Class: kernels.ElementWise, Elements: 1 << 24}, 0},
		{"thresholds/reduction-200K", NewThresholds(arms), reduction(200_000), 1},
		{"thresholds/reduction-100K", NewThresholds(arms), reduction(100_000), 0},
		{"thresholds/matrix-20K", NewThresholds(arms), matrix(20_000), 1},
		{"thresholds/matrix-10K", NewThresholds(arms), matrix(10_000), 0},
		// roofline, GPU at RLX defaults: 40+3+FLOPs/1e7 µs; CPU 1+FLOPs/1e6.
		// 4096³: GPU 43+13744 = 13787 µs, CPU 1+137439 → GPU.
		{"roofline/4096³", NewRoofline(arms), bigMatMul, 1},
		// add by bytes: GPU 43+49152/8e5 ≈ 43.06 µs, CPU 1+49152/1e5 ≈ 1.49 → CPU.
		{"roofline/add", NewRoofline(arms), smallAdd, 0},
	}
	for _, c := range cases {
		if got := c.p.Choose(&c.task); got != c.want {
			t.Errorf("%s: Choose = %d, want %d", c.name, got, c.want)
		}
	}
	// Transfer: 4 GB resident on the CPU adds 10 + 4e9/25e3 = 160010 µs
	// to the GPU's 13787: 173797 > the CPU's 137440 → CPU.
	tk := bigMatMul
	tk.Transfer = []float64{0, 4e9}
	if got := NewRoofline(arms).Choose(&tk); got != 0 {
		t.Errorf("roofline with 4 GB to move: Choose = %d, want 0 (cpu)", got)
	}
	if n := NewFixed(arms, 1).Name(); n != "gpu" {
		t.Errorf("NewFixed(gpu).Name() = %q", n)
	}
	if got := NewFixed(arms, 0).Choose(&bigMatMul); got != 0 {
		t.Errorf("cpu policy chose %d", got)
	}
}

// TestCalibrate checks the StarPU history model (DESIGN.md § What it
// replaces): the first sample of an arm is discarded, each arm is forced
// until it has 10 recorded samples, a sample more than 50% off the mean
// (ratio > 1.5 either way) is not recorded, then the lowest mean wins.
func TestCalibrate(t *testing.T) {
	p := NewCalibrate([]Arm{cpuArm, gpuArm})
	task := Task{Bucket: 3}
	durations := []float64{200, 100} // cpu slower
	var seq []int
	for range 22 {
		arm := p.Choose(&task)
		seq = append(seq, arm)
		us := durations[arm]
		if len(seq) == 1 || len(seq) == 12 {
			us = 1e9 // each arm's first sample: bogus and discarded
		}
		p.Observe(&task, arm, us)
	}
	for i, a := range seq {
		if want := i / 11; a != want {
			t.Fatalf("decision %d chose %d, want %d (forced: 1 discarded + 10 samples per arm); sequence %v", i, a, want, seq)
		}
	}
	n, mean, _ := CalibrationState(p, 3, 0)
	if n != 10 || mean != 200 {
		t.Errorf("cpu history: %d samples mean %v, want 10 samples mean 200 (first discarded)", n, mean)
	}
	if got := p.Choose(&task); got != 1 {
		t.Errorf("calibrated: Choose = %d, want 1 (lowest mean)", got)
	}
	p.Observe(&task, 1, 151) // ratio 1.51 > 1.5: rejected
	p.Observe(&task, 1, 149) // ratio 1.49: recorded
	n, mean, _ = CalibrationState(p, 3, 1)
	if n != 11 || mean != (1000+149)/11.0 {
		t.Errorf("gpu history: %d samples mean %v, want 11 samples mean %v", n, mean, (1000+149)/11.0)
	}
}

// TestOracle: the oracle picks the arm with the lowest true mean per bucket.
func TestOracle(t *testing.T) {
	means := [][]float64{{5, 3, 4}, {1, 9, 9}}
	p := NewOracle(make([]Arm, 3), func(b, a int) float64 { return means[b][a] })
	for b, want := range []int{1, 0} {
		if got := p.Choose(&Task{Bucket: b}); got != want {
			t.Errorf("bucket %d: Choose = %d, want %d", b, got, want)
		}
	}
}

// TestTextbookBanditsConverge: ucb1 and egreedy (ε = 0.05) find the
// faster of two arms 2× apart: share of the last 1,000 of 5,000 ≥ 90%.
func TestTextbookBanditsConverge(t *testing.T) {
	arms := []Arm{cpuArm, gpuArm}
	w := bandittest.World{Mean: bandittest.Static(200, 100), Sigma: 0.2}
	for _, p := range []Policy{
		NewUCB1(arms),
		NewEpsilonGreedy(arms, 0.05, rand.New(rand.NewPCG(7, 7))),
	} {
		r := rand.New(rand.NewPCG(8, 8))
		ch := w.Run(&policyChooser{p: p}, 5000, r)
		if s := bandittest.Share(ch, 1, 4000, 5000); s < 0.9 {
			t.Errorf("%s: share of the faster arm %.3f, want ≥ 0.9", p.Name(), s)
		}
	}
}

// policyChooser adapts a Policy to bandittest.Chooser for one task.
type policyChooser struct {
	p    Policy
	task Task
}

func (c *policyChooser) Choose(int) int                 { return c.p.Choose(&c.task) }
func (c *policyChooser) Observe(_, arm int, us float64) { c.p.Observe(&c.task, arm, us) }

// TestCalibrateSpikes holds StarPU's calibrate to the bursts of bandit's
// TestSpikes: given 12 spikes (more than its 10-sample calibration) it
// keeps the GPU's poisoned mean and never gives it the op again (GPU share
// of the last 1,000 of 20,000 = 0); with 5, its flush rule (errors ≥
// samples) recovers, as perfmodel_history.c does.
func TestCalibrateSpikes(t *testing.T) {
	arms := []Arm{{Name: "gpu", GPU: true}, {Name: "cpu"}}
	for _, c := range []struct {
		spikes  int
		recover bool
	}{{12, false}, {5, true}} {
		r := rand.New(rand.NewPCG(3, 4))
		p := NewCalibrate(arms)
		ch := bandittest.SpikeWorld(c.spikes).Run(&policyChooser{p: p}, 20_000, r)
		s := bandittest.Share(ch, 0, 19_000, 20_000)
		n, mean, _ := CalibrationState(p, 0, 0)
		t.Logf("calibrate, %d spikes: GPU share %.3f, GPU history %d samples mean %.0f µs", c.spikes, s, n, mean)
		if c.recover && s < 0.99 {
			t.Errorf("calibrate, %d spikes: GPU share %.3f, want ≥ 0.99 (flushed history)", c.spikes, s)
		}
		if !c.recover && s != 0 {
			t.Errorf("calibrate, %d spikes: GPU share %.3f, want 0 (poisoned for good)", c.spikes, s)
		}
	}
}
