package eval

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/adaptsched/adaptsched/sim"
)

const mlRouting = "../sim/testdata/moe/expert_popularity_machine_learning.json"
const medRouting = "../sim/testdata/moe/expert_popularity_college_medicine.json"

func offloadEnv(t testing.TB, gpu string, o sim.OffloadOptions) *OffloadEnv {
	t.Helper()
	if o.MoE && o.Routing == nil {
		rt, err := sim.ReadRouting(mlRouting, 32, 8)
		if err != nil {
			t.Fatal(err)
		}
		o.Routing = &rt
	}
	w, err := sim.NewOffload(o)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewOffloadEnv(w, sim.MustProfile("desktop16"), sim.MustProfile(gpu), 1)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestOffloadBudgetNeverExceeded: every policy, tight budgets; Run checks
// the cached bytes against the budget after every op and fails the run
// otherwise.
func TestOffloadBudgetNeverExceeded(t *testing.T) {
	for _, share := range []float64{0.005, 0.1, 0.5} {
		for _, mix := range []sim.OffloadOptions{{Rounds: 4, Batch: 1, Prompt: 40}, {Rounds: 1, Batch: 8, Decode: 24}} {
			mix.MoE, mix.GPUShare, mix.Seed = true, share, 2
			e := offloadEnv(t, "pcie4x16", mix)
			for _, p := range OffloadPolicies {
				r, err := e.Run(p)
				if err != nil {
					t.Fatalf("%v%%: %s: %v", share*100, p, err)
				}
				if r.MaxCachedBytes > r.Budget {
					t.Errorf("%v%%: %s held %d bytes, budget %d", share*100, p, r.MaxCachedBytes, r.Budget)
				}
				if (p == "lru" || p == "frequency" || p == "thompson") && share >= 0.1 && r.MaxCachedBytes == 0 {
					t.Errorf("%v%%: %s never cached a weight", share*100, p)
				}
			}
		}
	}
}

// TestOffloadCopyBeforeOp: a weight the cache rule wants for its own
// sake is copied before the op that counts the use, which then runs on
// it: the oracle (the true costs, thompson's rule) caches experts of a
// Mixtral decode at batch 1, where a copy costs more than the CPU, and
// never runs an expert on the CPU after paying its copy.
func TestOffloadCopyBeforeOp(t *testing.T) {
	e := offloadEnv(t, "pcie4x16", sim.OffloadOptions{MoE: true, GPUShare: 0.9, Rounds: 1, Batch: 1, Decode: 48, Seed: 1})
	r, err := e.Run("oracle")
	if err != nil {
		t.Fatal(err)
	}
	w := e.Workload()
	copiedOnCPU, early := 0, 0
	for i, op := range w.Ops {
		if op.Weight < 0 || w.Weights[op.Weight].OnGPU {
			continue
		}
		copied := r.OpUs[i]-e.DurationUs(i, int(r.Arms[i])) > e.copyUs[op.Weight]/2
		switch {
		case copied && r.Arms[i] == offCPU:
			copiedOnCPU++
		case copied:
			early++
		}
	}
	if copiedOnCPU != 0 || early < 100 || r.WeightCopies != int64(early) {
		t.Errorf("%d experts copied after running on the CPU, %d copied before running on the GPU (%d copies); want 0 and ≥ 100, all of them",
			copiedOnCPU, early, r.WeightCopies)
	}
}

// TestOffloadSharedGPUCopiesNothing: a GPU that shares host memory reads
// every weight where it lives, so no policy copies one, or counts a copy.
func TestOffloadSharedGPUCopiesNothing(t *testing.T) {
	e := offloadEnv(t, "igpu", sim.OffloadOptions{MoE: true, GPUShare: 0.1, Seed: 2, Rounds: 1, Batch: 8, Decode: 24})
	for _, p := range OffloadPolicies {
		r, err := e.Run(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if r.WeightCopies != 0 || r.WeightCopyUs != 0 {
			t.Errorf("%s: %d weight copies (%v µs) on a GPU that reads host memory", p, r.WeightCopies, r.WeightCopyUs)
		}
	}
}

// TestOffloadBudgetOverCard: a GPU budget the simulated card cannot
// hold is one error naming the card and the sizes. Mixtral 8x7B at Q4_0
// keeps 0.77 GiB of weights on the GPU; a cache of every expert (23.6
// GiB) exceeds a 24 GiB RTX 4090, 90% of them (21.3 GiB) does not, and a
// 32 GiB RTX 5090 holds them all; an integrated GPU has no memory of its
// own to exceed.
func TestOffloadBudgetOverCard(t *testing.T) {
	rt, err := sim.ReadRouting(mlRouting, 32, 8)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		gpu   string
		share float64
		fits  bool
	}{{"pcie4x16", 1, false}, {"pcie4x16", 0.9, true}, {"pcie5x16", 1, true}, {"igpu", 1, true}} {
		w, err := sim.NewOffload(sim.OffloadOptions{MoE: true, Routing: &rt, GPUShare: c.share, Rounds: 1, Batch: 1, Decode: 2, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		_, err = NewOffloadEnv(w, sim.MustProfile("desktop16"), sim.MustProfile(c.gpu), 1)
		switch {
		case c.fits && err != nil:
			t.Errorf("%s at %v: %v", c.gpu, c.share, err)
		case !c.fits && (!errors.Is(err, ErrInvalidSetup) || !strings.Contains(fmt.Sprint(err), c.gpu+"'s memory of 24.00 GiB")):
			t.Errorf("%s at %v: error %v, want one naming the card's 24 GiB", c.gpu, c.share, err)
		}
	}
}

// TestOffloadEvictionLosesNoOp: lru with room for a few experts evicts
// on almost every use; every op is still run once and charged its
// compute on the arm it ran on, and every expert that was not resident
// on the GPU paid its copy.
func TestOffloadEvictionLosesNoOp(t *testing.T) {
	e := offloadEnv(t, "pcie3x8", sim.OffloadOptions{MoE: true, GPUShare: 0.02, Rounds: 1, Batch: 8, Decode: 16, Seed: 3})
	w := e.Workload()
	for _, p := range []string{"lru", "frequency", "thompson"} {
		r, err := e.Run(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.OpUs) != len(w.Ops) || r.Ops != int64(len(w.Ops)) {
			t.Fatalf("%s: %d ops charged of %d", p, len(r.OpUs), len(w.Ops))
		}
		var compute, total float64
		experts := int64(0)
		for i, a := range r.Arms {
			compute += e.DurationUs(i, int(a))
			total += r.OpUs[i]
			if r.OpUs[i] < e.DurationUs(i, int(a)) {
				t.Fatalf("%s: op %d charged %.1f µs, less than its compute", p, i, r.OpUs[i])
			}
			if wt := w.Ops[i].Weight; wt >= 0 && w.Weights[wt].Expert >= 0 && a == offGPU {
				experts++
			}
		}
		if math.Abs(compute-r.ComputeUs) > 1e-6*compute || math.Abs(total-r.TotalUs) > 1e-6*total {
			t.Errorf("%s: compute %.1f of %.1f, total %.1f of %.1f", p, r.ComputeUs, compute, r.TotalUs, total)
		}
		// Room for 5 of 256 experts: most GPU runs of an expert copy it.
		if p == "lru" && (r.WeightCopies > experts || r.WeightCopies < experts/2) {
			t.Errorf("lru: %d copies for %d expert runs on the GPU", r.WeightCopies, experts)
		}
	}
}

func TestOffloadThresholdBest(t *testing.T) {
	e := offloadEnv(t, "pcie3x8", sim.OffloadOptions{GPUShare: 0.5, Rounds: 8, Batch: 1, Prompt: 34})
	best, err := e.Run("threshold-best")
	if err != nil {
		t.Fatal(err)
	}
	for _, th := range thresholds {
		r, err := e.run(offloadRule{name: "t", threshold: th, expertThreshold: th})
		if err != nil {
			t.Fatal(err)
		}
		if r.TotalUs < best.TotalUs {
			t.Errorf("threshold %d: %.1f ms below threshold-best's %.1f (threshold %d)", th, r.TotalUs/1e3, best.TotalUs/1e3, best.Threshold)
		}
	}
	if _, err := e.Run("magic"); err == nil {
		t.Error("an unknown policy ran")
	}
}

// offloadFigures are the offload targets' ratios over the grid.
type offloadFigures struct {
	worstVsBest, worstVsLlama, worstVsLlama15, worstVsCache float64
	belowBest, cases                                        int
	failures                                                []string
	// per MoE budget ("moe-10%"): thompson's, lru's and frequency's totals
	// summed over the profiles and mixes
	sums map[string]*[3]float64
}

func (f *offloadFigures) add(name string, rs map[string]OffloadResult) {
	th, tb, lc := rs["thompson"].TotalUs, rs["threshold-best"].TotalUs, rs["llamacpp"].TotalUs
	f.cases++
	if th < tb {
		f.belowBest++
	}
	fail := func(what string, v, limit float64) {
		if v > limit {
			f.failures = append(f.failures, fmt.Sprintf("%s: %s %.3f", name, what, v))
		}
	}
	f.worstVsBest = max(f.worstVsBest, th/tb)
	fail("thompson/threshold-best", th/tb, 1.03)
	f.worstVsLlama = max(f.worstVsLlama, th/lc)
	fail("thompson/llamacpp", th/lc, 1.02)
	if lc >= 1.5*tb {
		f.worstVsLlama15 = max(f.worstVsLlama15, th*1.5/lc)
		fail("thompson/(llamacpp/1.5)", th*1.5/lc, 1)
	}
	if _, ok := rs["lru"]; ok && rs["lru"].Budget > 0 && rs["thompson"].Ops > 0 && strings.Contains(name, "moe") {
		c := min(rs["lru"].TotalUs, rs["frequency"].TotalUs)
		f.worstVsCache = max(f.worstVsCache, th/c)
		if f.sums == nil {
			f.sums = map[string]*[3]float64{}
		}
		budget := name[strings.LastIndex(name, "/")+1:]
		if f.sums[budget] == nil {
			f.sums[budget] = new([3]float64)
		}
		f.sums[budget][0] += th
		f.sums[budget][1] += rs["lru"].TotalUs
		f.sums[budget][2] += rs["frequency"].TotalUs
		fail("thompson/min(lru, frequency)", th/c, 1)
	}
}

// BenchmarkOffloadTargets runs the offload targets' grid (offloadCases)
// and reports the worst ratio of each target over it: thompson against
// threshold-best, llamacpp, llamacpp/1.5 where threshold-best beats
// llamacpp 1.5×, and the better of lru and frequency (MoE, per case and
// summed per budget), and the share of cases where thompson is below
// threshold-best. Deterministic.
func BenchmarkOffloadTargets(b *testing.B) {
	cases, err := offloadCases(mlRouting)
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		var f offloadFigures
		for _, c := range cases {
			rs, err := runOffloadCase(c)
			if err != nil {
				b.Fatal(err)
			}
			f.add(c.name, rs)
			th := rs["thompson"].TotalUs
			fmt.Printf("%-32s thompson %9.1f ms  ×threshold-best %.3f  ×llamacpp %.3f  ×lru %.3f  ×frequency %.3f  ×oracle %.3f\n",
				c.name, th/1e3, th/rs["threshold-best"].TotalUs, th/rs["llamacpp"].TotalUs, th/rs["lru"].TotalUs, th/rs["frequency"].TotalUs, th/rs["oracle"].TotalUs)
		}
		for _, s := range f.failures {
			fmt.Println("not met: " + s)
		}
		b.ReportMetric(f.worstVsBest, "worst_x_threshold_best")
		b.ReportMetric(float64(f.belowBest)/float64(f.cases), "share_below_threshold_best")
		b.ReportMetric(f.worstVsLlama, "worst_x_llamacpp")
		b.ReportMetric(f.worstVsLlama15, "worst_x_llamacpp_over_1.5")
		b.ReportMetric(f.worstVsCache, "worst_x_best_cache")
		b.ReportMetric(float64(len(f.failures)), "cases_not_met")
		// The cache target read per budget, over all 16 cases of it:
		// thompson's sum against the better cache policy's sum.
		worstSum := 0.0
		for budget, s := range f.sums {
			r := s[0] / min(s[1], s[2])
			worstSum = max(worstSum, r)
			fmt.Printf("%s summed over 16 cases: thompson %.3f× lru, %.3f× frequency\n", budget, s[0]/s[1], s[0]/s[2])
		}
		b.ReportMetric(worstSum, "worst_budget_sum_x_best_cache")
	}
}

// BenchmarkOffloadDrift: the two Mixtral routing files, machine learning
// then college medicine from half the run (512 decode steps): thompson's
// total over the 20% of the ops after the switch against the oracle's,
// each profile × budget 10%, 50%, 90% × batch 1 and 8; the worst ratio.
func BenchmarkOffloadDrift(b *testing.B) {
	a, err := sim.ReadRouting(mlRouting, 32, 8)
	if err != nil {
		b.Fatal(err)
	}
	d, err := sim.ReadRouting(medRouting, 32, 8)
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		worst, met, n := 0.0, 0, 0
		for _, g := range offloadProfiles {
			for _, share := range []float64{0.1, 0.5, 0.9} {
				for _, batch := range []int{1, 8} {
					e := offloadEnv(b, g, sim.OffloadOptions{MoE: true, Routing: &a, Drift: &d, DriftAt: 0.5, GPUShare: share, Rounds: 1, Batch: batch, Decode: 512, Seed: 1})
					th, err := e.Run("thompson")
					if err != nil {
						b.Fatal(err)
					}
					or, err := e.Run("oracle")
					if err != nil {
						b.Fatal(err)
					}
					w := e.Workload()
					from, to := w.DriftOp, w.DriftOp+len(w.Ops)/5
					r := th.SegmentUs(from, to) / or.SegmentUs(from, to)
					worst = max(worst, r)
					n++
					if r <= 1.05 {
						met++
					}
					fmt.Printf("%s %.0f%% b%d: after the switch thompson %.3f× the oracle (whole run %.3f×)\n", g, share*100, batch, r, th.TotalUs/or.TotalUs)
				}
			}
		}
		b.ReportMetric(worst, "worst_segment_x_oracle")
		b.ReportMetric(float64(met)/float64(n), "share_within_1.05")
	}
}
