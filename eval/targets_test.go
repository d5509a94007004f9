package eval

import (
	"fmt"
	"testing"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/sim"
)

// The simulator targets (DESIGN.md § Evaluation), measured on
// mixed-serving Llama-3.2-1B with each GPU profile paired with cpu2. Tests
// run them at a reduced size; BenchmarkTargets at full size (make bench).

const (
	fullOps    = 200_000
	reducedOps = 50_000
)

var staticPolicies = []string{"static2x", "pcie5x", "thresholds", "roofline"}

// scenario builds the Env of one target: gpu (possibly altered) with cpu2.
func scenario(tb testing.TB, gpu *sim.Profile, events []sim.Event, n int, every int64) *Env {
	tb.Helper()
	w, err := sim.MixedServing(sim.Llama32_1B, n, 1, sim.ServingOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	env, err := NewEnv(w, []sim.Arm{{Profile: gpu, Events: events}, {Profile: sim.MustProfile("cpu2")}}, EnvOptions{Checkpoint: every})
	if err != nil {
		tb.Fatal(err)
	}
	return env
}

// runAll runs every policy of Policies on env, by name.
func runAll(tb testing.TB, env *Env) map[string]Result {
	tb.Helper()
	ps, err := Policies(env.Arms(), env.Truth, adaptive.Config{Seed: 1})
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]Result{}
	for _, p := range ps {
		r, err := env.Run(p, 1)
		if err != nil {
			tb.Fatal(err)
		}
		out[r.Policy] = r
	}
	return out
}

// checkServing asserts the mixed-serving targets on one profile.
func checkServing(t *testing.T, name string, rs map[string]Result) {
	th := rs["thompson"].RegretPct
	if th > 2 {
		t.Errorf("%s: thompson regret %.2f%%, target ≤ 2%%", name, th)
	}
	for _, s := range staticPolicies {
		if r := rs[s].RegretPct; r > 5 && th > r/3 {
			t.Errorf("%s: thompson regret %.2f%% exceeds a third of %s's %.2f%%", name, th, s, r)
		}
	}
	if c := rs["calibrate"].RegretPct; th >= c {
		t.Errorf("%s: thompson regret %.2f%% not below calibrate's %.2f%%", name, th, c)
	}
}

// servingProfiles are the GPUs of the mixed-serving targets (the
// offload profiles have their own, offloadProfiles).
var servingProfiles = []string{"mi300x", "mi250", "rx7900xtx", "h100", "igpu", "slowlink"}

func TestTargetMixedServing(t *testing.T) {
	for _, g := range servingProfiles {
		t.Run(g, func(t *testing.T) {
			rs := runAll(t, scenario(t, sim.MustProfile(g), nil, reducedOps, 0))
			checkServing(t, g, rs)
			// The oracle policy plays the oracle's assignment: its cost is
			// the oracle's up to sampling noise.
			if o := rs["oracle"]; o.OffOraclePct != 0 || o.RegretPct < -3 || o.RegretPct > 3 {
				t.Errorf("%s: oracle policy off the oracle %.2f%%, regret %.2f%%: want 0 and within ±3%%", g, o.OffOraclePct, o.RegretPct)
			}
		})
	}
}

func TestTargetWrongPrior(t *testing.T) {
	// Datasheet figures wrong by 10× in both directions (DESIGN.md § The
	// bandit: a prior wrong by 10× must be overturned).
	for _, f := range []float64{0.1, 10} {
		t.Run(fmt.Sprint(f), func(t *testing.T) {
			rs := runAll(t, scenario(t, sim.MustProfile("h100").WithNominalScale(f), nil, reducedOps, 0))
			if r := rs["thompson"].RegretPct; r > 4 {
				t.Errorf("h100 nominal ×%v: thompson regret %.2f%%, target ≤ 4%%", f, r)
			}
		})
	}
}

// TestTargetWrongPriorSeeds holds the wrong-prior target on every seed
// from 1 to 9 (thompson's streams and the drawn durations), not one lucky
// seed: a single long trial of a far slower arm is what breaks it.
func TestTargetWrongPriorSeeds(t *testing.T) {
	for _, f := range []float64{0.1, 10} {
		env := scenario(t, sim.MustProfile("h100").WithNominalScale(f), nil, reducedOps, 0)
		for seed := uint64(1); seed <= 9; seed++ {
			th, err := NewThompson(adaptive.Config{Seed: seed}, env.Arms())
			if err != nil {
				t.Fatal(err)
			}
			r, err := env.Run(th, seed)
			th.Close()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("h100 nominal ×%v, seed %d: thompson regret %.3f%%", f, seed, r.RegretPct)
			if r.RegretPct > 4 {
				t.Errorf("h100 nominal ×%v, seed %d: thompson regret %.2f%%, target ≤ 4%%", f, seed, r.RegretPct)
			}
		}
	}
}

func TestTargetThrottle(t *testing.T) {
	n, at := 2*reducedOps, int64(reducedOps)
	window := int64(n / 10)
	env := scenario(t, sim.MustProfile("h100"), []sim.Event{{At: at, Kind: sim.Throttle, Factor: 3}}, n, window/10)
	ps, err := Policies(env.Arms(), env.Truth, adaptive.Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	r, err := env.Run(ps[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	w, err := r.RegretBetween(at, at+window)
	if err != nil {
		t.Fatal(err)
	}
	if w > 5 {
		t.Errorf("thompson regret over the %d ops after a ×3 throttle: %.2f%%, target ≤ 5%%", window, w)
	}
}

// TestTargetSpikes: 1% of the GPU's runs take 100× (a preempted GPU, a
// page fault). The spikes must not starve the GPU (StarPU's failure): its
// share stays within 3 points of the oracle's or above it, and the regret
// within half a point of the oracle policy's (which pays the same spikes).
//
// Above is allowed: the spikes double the GPU's true mean, so in the
// buckets where the CPU is within 2× the oracle prefers the CPU (GPU
// share 96.0%), while the lognormal mean that the bandit scores by
// (DESIGN.md § The bandit) puts a 1% × 100 mixture at about 1.16× its
// base and keeps the GPU (99.9%); since a settled arm's slow outliers are
// winsorized (bandit/bucket.go, settledAfter) it sees little of the
// spikes at all (100%). Those buckets are near ties: thompson's regret is
// 8.674% against the oracle policy's 8.665% (8.671% before winsorizing).
// Before the GPU's warm-up run was set aside (adaptive's engine.observe)
// the shares matched (97.5%) by accident: the 4× first runs pushed
// near-tie buckets to the CPU.
func TestTargetSpikes(t *testing.T) {
	rs := runAll(t, scenario(t, sim.MustProfile("h100").WithSpikes(0.01, 100), nil, reducedOps, 0))
	th := rs["thompson"]
	if d := (th.Share[0] - th.OracleShare[0]) * 100; d < -3 {
		t.Errorf("spikes: thompson's GPU share %.2f%%, oracle's %.2f%%: want no more than 3 points below", th.Share[0]*100, th.OracleShare[0]*100)
	}
	if o := rs["oracle"].RegretPct; th.RegretPct > o+0.5 {
		t.Errorf("spikes: thompson's regret %.2f%%, the oracle policy's %.2f%%: want within half a point", th.RegretPct, o)
	}
}

// BenchmarkTargets reports every policy's regret on every target at full
// size; the figures go to BENCHMARKS.md.
func BenchmarkTargets(b *testing.B) {
	report := func(b *testing.B, env *Env, metric func(Result) (string, float64)) {
		ps, err := Policies(env.Arms(), env.Truth, adaptive.Config{Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		rs := make([]Result, len(ps))
		b.ReportAllocs()
		for b.Loop() {
			for i, p := range ps {
				if rs[i], err = env.Run(p, 1); err != nil {
					b.Fatal(err)
				}
			}
			ps[0].(*Thompson).Close()
			if ps, err = Policies(env.Arms(), env.Truth, adaptive.Config{Seed: 1}); err != nil {
				b.Fatal(err)
			}
		}
		ps[0].(*Thompson).Close()
		for _, r := range rs {
			unit, v := metric(r)
			b.ReportMetric(v, r.Policy+"_"+unit)
		}
	}
	regret := func(r Result) (string, float64) { return "regret_pct", r.RegretPct }
	for _, g := range servingProfiles {
		b.Run("mixed-serving/"+g, func(b *testing.B) { report(b, scenario(b, sim.MustProfile(g), nil, fullOps, 0), regret) })
	}
	for _, f := range []float64{0.1, 10} {
		b.Run(fmt.Sprintf("wrong-prior-x%v/h100", f), func(b *testing.B) {
			report(b, scenario(b, sim.MustProfile("h100").WithNominalScale(f), nil, fullOps, 0), regret)
		})
	}
	b.Run("throttle-x3/h100", func(b *testing.B) {
		env := scenario(b, sim.MustProfile("h100"), []sim.Event{{At: fullOps / 2, Kind: sim.Throttle, Factor: 3}}, fullOps, 1000)
		report(b, env, func(r Result) (string, float64) {
			w, err := r.RegretBetween(fullOps/2, fullOps/2+20_000)
			if err != nil {
				b.Fatal(err)
			}
			return "post_event_regret_pct", w
		})
	})
	b.Run("spikes/h100", func(b *testing.B) {
		report(b, scenario(b, sim.MustProfile("h100").WithSpikes(0.01, 100), nil, fullOps, 0), func(r Result) (string, float64) {
			return "gpu_share_minus_oracle_pts", (r.Share[0] - r.OracleShare[0]) * 100
		})
	})
}

// BenchmarkRun measures the harness: one policy over 200,000 ops.
func BenchmarkRun(b *testing.B) {
	env := scenario(b, sim.MustProfile("h100"), nil, fullOps, 0)
	for _, mk := range []func() Policy{
		func() Policy { return NewStatic2x(env.Arms()) },
		func() Policy { ps, _ := Policies(env.Arms(), env.Truth, adaptive.Config{Seed: 1}); return ps[0] },
	} {
		b.Run(mk().Name(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := env.Run(mk(), 1); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/fullOps, "ns/simulated-op")
		})
	}
}
