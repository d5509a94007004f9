package adaptive

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/kernels"
)

// slowModelCPU is a CPU whose figures say it is 50 times slower than it
// is (2 GFLOP/s, 1 GB/s, 50 µs dispatch against the test CPU's 100, 50,
// 1): the many-core CPU given a small machine's figures.
var slowModelCPU = backends.Nominal{GFLOPS: 2, MemGBps: 1, DispatchUs: 50}

// TestPriorsSelfCorrect checks DESIGN.md § Priors, self-correcting priors:
// a CPU whose model is 50× pessimistic keeps that prior in a bucket where
// only the GPU has run while no bucket has measured both arms; once
// buckets of the same op measure both, that bucket's CPU prior is
// re-derived (without a new bucket, on its next Select) from its own GPU
// measurement and the learned CPU/GPU ratio, and comes closer to the truth
// as buckets measure both (refreshes come when the evidence has doubled,
// so a step may leave it where it was: never further).
func TestPriorsSelfCorrect(t *testing.T) {
	bes := []backends.Backend{newFake("cpu", backends.CPU, slowModelCPU), newFake("gpu", backends.GPU, gpuNominal)}
	s := newTestScheduler(t, Config{Backends: bes, Seed: 3})
	r := rand.New(rand.NewPCG(3, 4))
	// The truth: the CPU runs at the test CPU's figures, the GPU at its own.
	truth := func(m, arm int) float64 {
		flops := 2 * float64(m) * 512 * 512
		if arm == 0 {
			return 1 + flops/100e3
		}
		return 10 + flops/10000e3
	}
	cpuPrior := func(name string) float64 {
		for _, b := range s.Telemetry().Buckets {
			if b.Name == name {
				return b.Arms[0].MeanUs
			}
		}
		t.Fatalf("no bucket %s", name)
		return 0
	}
	y := matmul(16, 512, 512)
	d, err := s.Select(y, Residency{})
	if err != nil {
		t.Fatal(err)
	}
	yName := s.BucketName(d.Bucket)
	teach(t, s, d, 1, truth(16, 1), 0.05, 64, r)
	s.Select(y, Residency{})
	before := math.Abs(math.Log(cpuPrior(yName) / truth(16, 0)))
	if before < math.Log(20) {
		t.Fatalf("CPU prior only e^%.2f from the truth before any bucket measured both arms, want the model's ~50×", before)
	}
	last := before
	for i, m := range []int{64, 256, 1024, 4096} {
		x := matmul(m, 512, 512)
		dx, err := s.Select(x, Residency{})
		if err != nil {
			t.Fatal(err)
		}
		teach(t, s, dx, 0, truth(m, 0), 0.05, 64, r)
		teach(t, s, dx, 1, truth(m, 1), 0.05, 64, r)
		s.Select(y, Residency{}) // refreshes y's young CPU prior
		got := math.Abs(math.Log(cpuPrior(yName) / truth(16, 0)))
		t.Logf("%d buckets with both arms: y's CPU prior e^%.2f from the truth", i+1, got)
		if got > last {
			t.Errorf("%d buckets with both arms: CPU prior e^%.2f from the truth, further than e^%.2f", i+1, got, last)
		}
		if i == 0 && got > before/2 {
			t.Errorf("one bucket with both arms: CPU prior e^%.2f from the truth, want under half the model's e^%.2f", got, before)
		}
		last = got
	}
	if last > math.Log(1.5) {
		t.Errorf("after 4 buckets with both arms the CPU prior is e^%.2f from the truth, want within 1.5×", last)
	}
}

// TestTrialBounded: an arm with no data whose prior makes it look far too
// slow to draw is tried once, as soon as the trial's predicted cost (its
// prior mean, at most the model's estimate while no bucket has measured
// it) is at most trialBudget of what the bucket has spent, and not
// before; the trial's reason is Explore.
func TestTrialBounded(t *testing.T) {
	bes := []backends.Backend{newFake("cpu", backends.CPU, backends.Nominal{GFLOPS: 1, MemGBps: 1, DispatchUs: 1000}),
		newFake("gpu", backends.GPU, gpuNominal)}
	s := newTestScheduler(t, Config{Backends: bes, Seed: 5})
	spec := matmul(16, 512, 512)
	const gpuUs = 20.0
	var spent float64
	for i := range 100_000 {
		d, err := s.Select(spec, Residency{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Name == "cpu" {
			// No bucket has measured the CPU: its trial is budgeted at
			// its prior mean, at most the model's estimate (trialCost).
			predicted := math.Min(d.Estimates[0], math.Exp(d.b.per[0].lnModel))
			if d.Reason != Explore {
				t.Errorf("trial reason %v, want Explore", d.Reason)
			}
			if predicted > trialBudget*spent {
				t.Errorf("tried at op %d: predicted %.0f µs > %.0f%% of the %.0f µs spent", i, predicted, trialBudget*100, spent)
			}
			if prev := spent - gpuUs; predicted <= trialBudget*prev {
				t.Errorf("tried at op %d, late: predicted %.0f µs was within budget at %.0f µs spent", i, predicted, prev)
			}
			return
		}
		if err := s.Observe(d, us(gpuUs)); err != nil {
			t.Fatal(err)
		}
		spent += gpuUs
	}
	t.Error("the CPU was never tried")
}

// TestTrialSkippedByEvidence: a CPU whose model makes it look as fast as
// the GPU, but which every MatMul bucket that measured both found 30×
// slower, is not worth a forced trial in a new MatMul bucket of a size far
// from all of them: the op's ratio at every size is a level of its own,
// which the op class's (where a quantized matmul on which the CPU wins
// widens the spread) does not drown. Where the MatMul buckets disagree
// (30× slower at two sizes, 2× faster at two), the trial stands.
func TestTrialSkippedByEvidence(t *testing.T) {
	asFast := backends.Nominal{GFLOPS: 10000, MemGBps: 1000, DispatchUs: 10}
	gpuUs := func(sp kernels.Spec) float64 { return 10 + float64(sp.Work().FLOPs)/10000e3 }
	for _, c := range []struct {
		matmulCPUOver []float64 // the CPU's time over the GPU's, per size
		worth         bool
	}{
		{[]float64{30, 30, 30, 30}, false},
		{[]float64{30, 0.5, 30, 0.5}, true},
	} {
		bes := []backends.Backend{newFake("cpu", backends.CPU, asFast), newFake("gpu", backends.GPU, gpuNominal)}
		s := newTestScheduler(t, Config{Backends: bes, Seed: 6})
		r := rand.New(rand.NewPCG(6, 7))
		for i, m := range []int{4, 64, 1024, 16384} {
			for _, k := range []struct {
				spec    kernels.Spec
				cpuOver float64
			}{
				{matmul(m, 512, 512), c.matmulCPUOver[i]},
				{kernels.Spec{Op: kernels.QuantizedMatMul, DType: kernels.Q8_0, In: []kernels.Shape{{m, 512}, {512, 512}}}, 0.5},
			} {
				d, err := s.Select(k.spec, Residency{})
				if err != nil {
					t.Fatal(err)
				}
				g := gpuUs(k.spec)
				teach(t, s, d, 0, k.cpuOver*g, 0.05, 64, r)
				teach(t, s, d, 1, g, 0.05, 64, r)
			}
		}
		spec := matmul(262144, 512, 512)
		d, err := s.Select(spec, Residency{})
		if err != nil {
			t.Fatal(err)
		}
		teach(t, s, d, 1, gpuUs(spec), 0.05, 16, r)
		d.b.mu.Lock()
		worth := s.e.worthTrial(d.b, 0)
		d.b.mu.Unlock()
		if worth != c.worth {
			t.Errorf("MatMul's CPU at %v× the GPU: a CPU trial in a new MatMul bucket worth it: %v, want %v", c.matmulCPUOver, worth, c.worth)
		}
	}
}

// TestSpikeFirstRun: two CPU implementations the model cannot tell apart,
// the second twice as fast on every shape, whose first run anywhere is a
// spike 1,000× its time (a page fault storm, a preempted thread). The
// spike must not keep the second from the buckets: trials elsewhere are
// budgeted at most at the model's estimate while fewer than trialEvidence
// buckets have measured it (trialCost), so the other buckets measure it;
// then the spiked bucket's one run is more than trialZ deviations slower
// than they say, and its prior is theirs (priorRho). The faster takes at
// least 90% of the last 5,000 of 20,000 ops: 0 without trialCost, 0.89
// without priorRho's test.
func TestSpikeFirstRun(t *testing.T) {
	same := backends.Nominal{GFLOPS: 50, MemGBps: 20, DispatchUs: 1}
	bes := []backends.Backend{newFake("blas", backends.CPU, same), newFake("blocked", backends.CPU, same)}
	s := newTestScheduler(t, Config{Backends: bes, Seed: 2})
	r := rand.New(rand.NewPCG(2, 3))
	var specs []kernels.Spec
	for m := 1; m <= 256; m *= 2 {
		specs = append(specs, matmul(m, 256, 256))
	}
	zipf := rand.NewZipf(rand.New(rand.NewPCG(4, 5)), 1.2, 1, uint64(len(specs)-1))
	spiked, late := false, 0
	const ops, tail = 20_000, 5_000
	for i := range ops {
		spec := specs[zipf.Uint64()]
		d, err := s.Select(spec, Residency{})
		if err != nil {
			t.Fatal(err)
		}
		mean := 1 + float64(spec.Work().FLOPs)/50e3 // blas at the model's figures
		if d.Backend == 1 {
			mean /= 2
			if !spiked {
				mean, spiked = 1000*mean, true
			}
		}
		if err := s.Observe(d, us(lognormal(r, mean, 0.1))); err != nil {
			t.Fatal(err)
		}
		if i >= ops-tail && d.Backend == 1 {
			late++
		}
	}
	if share := float64(late) / tail; share < 0.9 {
		t.Errorf("the faster implementation took %.2f of the last %d ops after a spiked first run, want ≥ 0.9", share, tail)
	}
}

// TestSpikeFirstShapeRun: a shape that earns its own bucket inherits
// its parent's well-measured GPU, whose first run there is a spike 6×
// slower than that prior says. One run is all the shape's bucket knows
// of the GPU, the CPU it then tries runs 2× slower than the GPU really
// does, and without a second run the spike keeps the shape on the CPU
// for good (0.00 of its last 500 ops on the GPU). A first run that far
// above an evidenced prior is doubted and run once more (engine.choose),
// and the spike is forgotten: the GPU takes ≥ 90%, its posterior
// learned from all its runs but the spike, and the spike is not the
// shape's first level in the parent's shapeDev (engine.shapeLevel).
func TestSpikeFirstShapeRun(t *testing.T) {
	spiked := false
	gpu, _, at, dev := shapeRuns(t, func() float64 {
		if spiked {
			return 1
		}
		spiked = true
		return 6
	})
	if !spiked {
		t.Fatal("the target shape never ran on the GPU in its own bucket")
	}
	if gpu < 0.9 {
		t.Errorf("the GPU took %.2f of the shape's last ops after a spiked first run in its bucket, want ≥ 0.9", gpu)
	}
	if at.Learned != at.N-1 {
		t.Errorf("the shape's GPU learned from %d of its %d runs, want all but the spike", at.Learned, at.N)
	}
	// The rerun, not the spike, is the shape's first level: the four
	// shapes' levels all at the parent's, the mean square falls below
	// where it starts (PriorSpread²/PriorStrength = 0.2).
	if dev >= 0.2 {
		t.Errorf("the parent's GPU shapeDev %.3f after a forgotten spike, want < 0.2", dev)
	}
}

// TestSlowFirstShapeRunConfirmed is TestSpikeFirstShapeRun where the
// shape's GPU runs stay 6× slower from its bucket's first on (before,
// in its parent, they ran at the parent's level), so the CPU is 3×
// faster for it: the doubted first run is confirmed by the second and
// both are learned, the GPU runs the shape 2 to 6 times there, the CPU
// takes ≥ 95% of its last 500 ops, and the slow level is the shape's
// first in the parent's shapeDev.
func TestSlowFirstShapeRunConfirmed(t *testing.T) {
	gpu, own, at, dev := shapeRuns(t, func() float64 { return 6 })
	if gpu > 0.05 || own < 2 || own > 6 {
		t.Errorf("the CPU took %.2f of the slow shape's last ops, the GPU ran it %d times in its bucket: want ≥ 0.95, and 2 to 6 runs", 1-gpu, own)
	}
	if at.Learned != at.N {
		t.Errorf("the shape's GPU learned from %d of its %d runs, want all: the second confirmed the first", at.Learned, at.N)
	}
	// The confirmed level, ln 6 from the parent's, is the shape's first
	// (not the prior a refresh moved to the first run): (ln 6)² = 3.2 at
	// weight 0.25, then at most three shapes' at 0.75 each.
	if dev <= 0.3 {
		t.Errorf("the parent's GPU shapeDev %.3f after a confirmed slow shape, want > 0.3", dev)
	}
}

// shapeRuns decides 1,000 rounds of four shapes of one bucket, the CPU
// at 200 µs a row and the GPU twice as fast, the first shape's GPU runs
// in its own bucket times slow(). It returns the GPU's share of that
// shape's last 500 ops, its GPU runs in its own bucket, and its own
// bucket's GPU telemetry, and how far the shapes' first GPU levels fell
// from their priors (the parent's shapeDev of the GPU, a mean square of ln).
func shapeRuns(t *testing.T, slow func() float64) (gpu float64, own int, at ArmTelemetry, dev float64) {
	t.Helper()
	bes := []backends.Backend{newFake("cpu", backends.CPU, cpuNominal), newFake("gpu", backends.GPU, gpuNominal)}
	s := newTestScheduler(t, Config{Backends: bes, Seed: 5})
	r := rand.New(rand.NewPCG(5, 6))
	specs := []kernels.Spec{matmul(100, 1024, 1024), matmul(104, 1024, 1024), matmul(108, 1024, 1024), matmul(112, 1024, 1024)}
	target := specs[0].String()
	onGPU, n := 0, 0
	var parent *bucket
	const rounds, tail = 1000, 500
	for i := range rounds {
		for _, spec := range specs {
			d, err := s.Select(spec, Residency{})
			if err != nil {
				t.Fatal(err)
			}
			mine := spec.String() == target
			mean := 200 * float64(spec.In[0][0]) // the CPU
			if d.Backend == 1 {
				mean /= 2
				if mine && d.b.isShape {
					mean *= slow()
					own++
					parent = d.b.parent
				}
			}
			if err := s.Observe(d, us(lognormal(r, mean, 0.1))); err != nil {
				t.Fatal(err)
			}
			if mine && i >= rounds-tail {
				n++
				if d.Backend == 1 {
					onGPU++
				}
			}
		}
	}
	for _, bt := range s.Telemetry().Buckets {
		if bt.Parent != "" && strings.HasSuffix(bt.Name, target) {
			at = bt.Arms[1]
		}
	}
	if parent == nil {
		t.Fatal("the target shape never ran on the GPU in its own bucket")
	}
	dev = float64(math.Float32frombits(parent.per[1].shapeDev.Load()))
	return float64(onGPU) / float64(n), own, at, dev
}

// TestShapePriorFromShapes: a shape's bucket takes the prior of an arm it
// has not run as surely as the parent's other shapes have shown the
// parent's level to hold (engine.shapeStrength). Where every shape runs
// the CPU at twice the GPU's time, later shapes' CPU priors are firmer
// than PriorStrength; where the ratio scatters from shape to shape (ln
// ratio's sd 0.7), they stay at it.
func TestShapePriorFromShapes(t *testing.T) {
	for _, scatter := range []float64{0, 0.7} {
		bes := []backends.Backend{newFake("cpu", backends.CPU, cpuNominal), newFake("gpu", backends.GPU, gpuNominal)}
		s := newTestScheduler(t, Config{Backends: bes, Seed: 7})
		r := rand.New(rand.NewPCG(7, 8))
		const shapes, last = 48, 16
		var kappa float64 // the mean CPU κ of the last shapes' buckets as made
		for k := range shapes {
			spec := matmul(72+k, 1024, 1024)
			ratio := 2 * math.Exp(scatter*r.NormFloat64())
			made := false
			for range DefaultShapeHits + 40 {
				d, err := s.Select(spec, Residency{})
				if err != nil {
					t.Fatal(err)
				}
				if d.b.isShape && !made && k >= shapes-last {
					kappa += d.b.bb.Priors[0].Kappa / last
				}
				made = made || d.b.isShape
				mean := 100 * float64(72+k)
				if d.Backend == 0 {
					mean *= ratio
				}
				if err := s.Observe(d, us(lognormal(r, mean, 0.05))); err != nil {
					t.Fatal(err)
				}
			}
			if !made && k >= shapes-last {
				t.Fatalf("shape %v never had a bucket of its own", spec)
			}
		}
		k0 := bandit.DefaultPriorStrength
		t.Logf("ln ratio's sd %v: the last %d shapes' CPU κ %.3f", scatter, last, kappa)
		if scatter == 0 && !(kappa >= 2*k0) {
			t.Errorf("shapes agreeing: CPU κ %.3f, want ≥ %v", kappa, 2*k0)
		}
		if scatter > 0 && !(kappa <= 1.25*k0) {
			t.Errorf("shapes scattered: CPU κ %.3f, want ≤ %v", kappa, 1.25*k0)
		}
	}
}

// TestRepublishOnMove: a grown arm (past youngArm runs) whose level holds
// publishes nothing more at its milestones, though the epoch counts each;
// once its level moves by more than news's quarter of the prior's spread
// (here ×1.3, 0.26 in ln), it publishes at a milestone, and what it
// published is the new level.
func TestRepublishOnMove(t *testing.T) {
	s := newTestScheduler(t, Config{Seed: 9})
	r := rand.New(rand.NewPCG(9, 10))
	d, err := s.Select(matmul(64, 512, 512), Residency{})
	if err != nil {
		t.Fatal(err)
	}
	b, arm := d.b, 0 // the CPU: a GPU's first run is a warm-up, not learned
	teach(t, s, d, arm, 100, 0.02, youngArm, r)
	pub, epoch := b.per[arm].pub, s.e.epoch.load()
	if !pub.OK || epoch != 4 { // runs 1, 4, 16 and 64
		t.Fatalf("after the arm's first %d runs: published %v, epoch %d, want 4", youngArm, pub.OK, epoch)
	}
	teach(t, s, d, arm, 100, 0.02, 10*youngArm, r)
	if got := b.per[arm].pub; got != pub {
		t.Errorf("a grown arm whose level held published again: %+v after %+v", got, pub)
	}
	if got := s.e.epoch.load(); got != epoch+10 {
		t.Errorf("epoch %d after 10 more milestones, want %d", got, epoch+10)
	}
	teach(t, s, d, arm, 130, 0.02, 2*youngArm, r)
	got := b.per[arm].pub
	if got.At == pub.At {
		t.Fatalf("a level moved ×1.3 published nothing in %d runs", 2*youngArm)
	}
	if moved := got.Rho - pub.Rho; math.Abs(moved-math.Log(1.3)) > 0.05 {
		t.Errorf("the published ratio moved %.3f, want about ln 1.3 = %.3f", moved, math.Log(1.3))
	}
}

// TestShapeInheritsSeen: an arm that a shape's parent runs after the
// shape's bucket was made counts as known there, as one the parent had
// run before (engine.newShape, engine.inherit; DESIGN.md § Priors: a
// recurring shape's bucket starts from what its parent measured). Two
// shapes get their own buckets while the GPU fails (Fallback), so the
// parent has only CPU runs then; a third shape, decided in the parent,
// is placed on the GPU twice (its warm-up and a run at 20 µs, 3.3× the
// CPU's). Then the first shape's bucket makes no forced trial of the GPU
// (at most one Thompson draw of it in 100 decisions), and a run placed
// there is learned from, not set aside as the GPU's warm-up.
func TestShapeInheritsSeen(t *testing.T) {
	a, b, c := matmul(1, 256, 256), matmul(1, 256, 264), matmul(1, 256, 260)
	truth := map[string]float64{"cpu": 6, "gpu": 20}
	for seed := uint64(1); seed <= 5; seed++ {
		s := newTestScheduler(t, Config{Seed: seed})
		r := rand.New(rand.NewPCG(seed, 2))
		run := func(d Decision, err error) Decision {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Observe(d, us(lognormal(r, truth[d.Name], 0.1))); err != nil {
				t.Fatal(err)
			}
			return d
		}
		var own *bucket // a's bucket
		for i := range 400 {
			spec := a
			if i%2 == 1 {
				spec = b
			}
			if d := run(s.SelectExcept(spec, Residency{}, Backend(1), Fallback)); i%2 == 0 {
				own = d.b
			}
		}
		if !own.isShape {
			t.Fatal("the shape has no bucket of its own")
		}
		for range 2 {
			if d := run(s.SelectOn(c, Residency{}, 1, 0, 0)); d.b.isShape {
				t.Fatal("the third shape was decided in a bucket of its own")
			}
		}
		if at := s.Telemetry().Buckets[0].Arms[1]; at.Learned != 1 {
			t.Fatalf("the parent's GPU arm %+v: want one run learned, after its warm-up", at)
		}
		gpu := 0
		for range 100 {
			if d := run(s.Select(a, Residency{})); d.Name == "gpu" {
				gpu++
			}
		}
		if gpu > 1 {
			t.Errorf("seed %d: the shape ran %d of 100 ops on the GPU its parent measured 3.3× slower, want at most 1", seed, gpu)
		}
		run(s.SelectOn(a, Residency{}, 1, 0, 0))
		for _, bt := range s.Telemetry().Buckets {
			if at := bt.Arms[1]; bt.Name == own.name && (at.Warmup || at.Learned != at.N) {
				t.Errorf("seed %d: the shape's GPU arm %+v: want every run learned, none set aside as a warm-up", seed, at)
			}
		}
		s.Close()
	}
}

// TestShapeObserveAfterParentsFirstRun: a shape's decision made before
// its parent first ran an arm, and observed after, leaves the shape's
// bucket as a decision made after would have: only the choice was stale
// (engine.observe catches the bucket up with its parent, as
// engine.inherit does at a decision). As in TestShapeInheritsSeen, two
// shapes get their own buckets while the GPU fails; the first shape's
// decision is placed on the GPU, before (held) or after a third shape,
// decided in the parent, runs there twice (its warm-up and a run). Its
// run, at the GPU's level or a spike 20× above it, is then learned as in
// the ordered case, not set aside as the GPU's warm-up; a spike is
// doubted against the prior the parent measured; the parent's record of
// how far its shapes' first levels fall (shapeDev) is the same.
func TestShapeObserveAfterParentsFirstRun(t *testing.T) {
	a, b, c := matmul(1, 256, 256), matmul(1, 256, 264), matmul(1, 256, 260)
	type state struct {
		arm      ArmTelemetry
		doubt    bool
		shapeDev uint32
	}
	for _, gpuUs := range []float64{20, 400} {
		for seed := uint64(1); seed <= 3; seed++ {
			var got [2]state
			for i, held := range []bool{false, true} {
				s := newTestScheduler(t, Config{Seed: seed})
				r := rand.New(rand.NewPCG(seed, 2))
				run := func(d Decision, err error, x float64) Decision {
					t.Helper()
					if err != nil {
						t.Fatal(err)
					}
					if err := s.Observe(d, us(x)); err != nil {
						t.Fatal(err)
					}
					return d
				}
				for i := range 400 {
					spec := a
					if i%2 == 1 {
						spec = b
					}
					d, err := s.SelectExcept(spec, Residency{}, Backend(1), Fallback)
					run(d, err, lognormal(r, 6, 0.1))
				}
				var d Decision
				var err error
				if held {
					d, err = s.SelectOn(a, Residency{}, 1, 0, 0)
				}
				for _, x := range []float64{60, 20} {
					if dc, err := s.SelectOn(c, Residency{}, 1, 0, 0); run(dc, err, x).b.isShape {
						t.Fatal("the third shape was decided in a bucket of its own")
					}
				}
				if !held {
					d, err = s.SelectOn(a, Residency{}, 1, 0, 0)
				}
				if run(d, err, gpuUs); !d.b.isShape {
					t.Fatal("the shape has no bucket of its own")
				}
				for _, bt := range s.Telemetry().Buckets {
					if bt.Name == d.b.name {
						got[i].arm = bt.Arms[1]
					}
				}
				got[i].doubt = d.b.doubt.Has(1)
				got[i].shapeDev = d.b.parent.per[1].shapeDev.Load()
				s.Close()
			}
			if got[1] != got[0] {
				t.Errorf("GPU run of %g µs, seed %d: the shape's bucket after a held decision %+v, want as after one made later %+v", gpuUs, seed, got[1], got[0])
			}
			if at := got[0].arm; at.Warmup || at.N != 1 || at.Learned != 1 || got[0].doubt != (gpuUs > 100) {
				t.Errorf("GPU run of %g µs, seed %d: the shape's bucket %+v: want its run learned, doubted if a spike", gpuUs, seed, got[0])
			}
		}
	}
}
