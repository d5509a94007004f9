package eval

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/sim"
)

// shapeSplit is a simulator scenario whose backend of choice differs
// between the shapes of one bucket: matmuls of every aspect (M from 1 to
// 1024, K and N from 64 to 4096), each bucket (op × size class) holding
// shapes that the GPU wins and shapes that the CPU wins (the simulator's
// matmul efficiency depends on each dimension against the device's tile,
// its bandwidth on the bytes moved, and the GPU pays its launch on every
// op); the operands are resident, as weights are. The ops repeat their
// shapes with Zipf frequencies (exponent 1, ranks shuffled by seed), as
// inference does. gpu and cpu are the arms, with their Nominal figures
// as the scheduler is told them.
func shapeSplit(tb testing.TB, gpu, cpu *sim.Profile, n int, seed uint64) *Env {
	tb.Helper()
	truthArms := []sim.Arm{{Profile: gpu}, {Profile: cpu}}
	type shape struct {
		spec   kernels.Spec
		bucket string
		cpuWin bool
	}
	var shapes []shape
	for _, m := range []int{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024} {
		for _, k := range []int{64, 128, 256, 512, 1024, 2048, 4096} {
			for _, nn := range []int{64, 128, 256, 512, 1024, 2048, 4096} {
				s := kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{m, k}, {k, nn}}}
				var cost [2]float64
				for a, arm := range truthArms {
					base, _, err := arm.Truth(s)
					if err != nil {
						tb.Fatal(err)
					}
					cost[a] = base
				}
				shapes = append(shapes, shape{spec: s, bucket: kernels.BucketName(s), cpuWin: cost[1] < cost[0]})
			}
		}
	}
	mixed := map[string][2]bool{}
	for _, s := range shapes {
		w := mixed[s.bucket]
		w[btoi(s.cpuWin)] = true
		mixed[s.bucket] = w
	}
	shapes = slices.DeleteFunc(shapes, func(s shape) bool { w := mixed[s.bucket]; return !(w[0] && w[1]) })
	if len(shapes) < 20 {
		tb.Fatalf("only %d shapes in buckets whose winner varies by shape", len(shapes))
	}
	r := rand.New(rand.NewPCG(seed, 0x5a9e))
	r.Shuffle(len(shapes), func(i, j int) { shapes[i], shapes[j] = shapes[j], shapes[i] })
	cum := make([]float64, len(shapes))
	var sum float64
	for i := range shapes {
		sum += 1 / float64(i+1)
		cum[i] = sum
	}
	var ops []sim.Op
	key, bucket := map[int]int{}, map[string]int{}
	for range n {
		i, _ := slices.BinarySearch(cum, r.Float64()*sum)
		i = min(i, len(shapes)-1)
		s := shapes[i]
		k, ok := key[i]
		if !ok {
			k = len(key)
			key[i] = k
		}
		b, ok := bucket[s.bucket]
		if !ok {
			b = len(bucket)
			bucket[s.bucket] = b
		}
		ops = append(ops, sim.Op{Spec: s.spec, Key: k, Bucket: b, BucketName: s.bucket})
	}
	env, err := NewEnv(&sliceWorkload{ops: ops}, truthArms, EnvOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return env
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestShapesLearnApart holds the per-shape target: with one backend's
// figures 30× off (either way, either backend) and the winner varying by
// shape within every bucket, thompson's regret against the per-shape
// oracle stays ≤ 2% (reduced size; BenchmarkShapeSplit runs it at full
// size), and it learns per shape: below its regret against the per-shape
// oracle with per-shape learning off.
func TestShapesLearnApart(t *testing.T) {
	for _, c := range shapeCases() {
		t.Run(c.name, func(t *testing.T) {
			env := shapeSplit(t, c.gpu, c.cpu, reducedOps, 1)
			r := runThompson(t, env, adaptive.Config{Seed: 1})
			pooled := runThompson(t, env, adaptive.Config{Seed: 1, ShapeHits: -1})
			t.Logf("%s: regret %.3f%% (per bucket %.3f%%), switches per shape %d; shapes pooled: %.3f%% (%.3f%%)",
				c.name, r.ShapeRegretPct, r.RegretPct, r.ShapeSwitches, pooled.ShapeRegretPct, pooled.RegretPct)
			if r.ShapeRegretPct > 2 {
				t.Errorf("%s: thompson regret against the per-shape oracle %.2f%%, target ≤ 2%%", c.name, r.ShapeRegretPct)
			}
			if r.ShapeRegretPct >= pooled.ShapeRegretPct {
				t.Errorf("%s: learning per shape %.2f%%, no better than pooling the shapes (%.2f%%)", c.name, r.ShapeRegretPct, pooled.ShapeRegretPct)
			}
		})
	}
}

type shapeCase struct {
	name     string
	gpu, cpu *sim.Profile
}

// shapeCases are the shape-split scenario's priors: each arm's figures
// 30× optimistic and 30× pessimistic.
func shapeCases() []shapeCase {
	var cs []shapeCase
	for _, f := range []float64{30, 1.0 / 30} {
		cs = append(cs,
			shapeCase{fmt.Sprintf("h100-figures-x%.3g", f), sim.MustProfile("h100").WithNominalScale(f), sim.MustProfile("cpu2")},
			shapeCase{fmt.Sprintf("cpu-figures-x%.3g", f), sim.MustProfile("h100"), sim.MustProfile("cpu2").WithNominalScale(f)})
	}
	return cs
}

func runThompson(tb testing.TB, env *Env, cfg adaptive.Config) Result {
	tb.Helper()
	p, err := NewThompson(cfg, env.Arms())
	if err != nil {
		tb.Fatal(err)
	}
	defer p.Close()
	r, err := env.Run(p, cfg.Seed)
	if err != nil {
		tb.Fatal(err)
	}
	if r.ShapeOracleUs <= 0 {
		tb.Fatal("no per-shape oracle")
	}
	return r
}

// BenchmarkShapeSplit runs the per-shape target at full size, seeds 1–3,
// reporting thompson's regret against the per-shape oracle on each and
// the worst (shape_regret_pct).
func BenchmarkShapeSplit(b *testing.B) {
	for _, c := range shapeCases() {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				worst := math.Inf(-1)
				for seed := uint64(1); seed <= 3; seed++ {
					r := runThompson(b, shapeSplit(b, c.gpu, c.cpu, fullOps, seed), adaptive.Config{Seed: seed})
					b.ReportMetric(r.ShapeRegretPct, fmt.Sprintf("seed%d_shape_regret_pct", seed))
					worst = max(worst, r.ShapeRegretPct)
				}
				b.ReportMetric(worst, "shape_regret_pct")
			}
		})
	}
}
