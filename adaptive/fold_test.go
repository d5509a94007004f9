package adaptive

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/learned"
)

// TestFold checks the Fold (DESIGN.md § Persistence): foreign evidence
// set before a bucket is made becomes its prior when it is; set again
// later it replaces the first (a total, not an increment) and keeps the
// arm's own evidence; Changes hands out only arms whose own evidence
// changed, not what Foreign set; and a bucket made under a Fold keeps
// the store's posterior (this node's own evidence).
func TestFold(t *testing.T) {
	spec := matmul(64, 512, 512)
	name := kernels.BucketName(spec)
	kc, kg := learned.Key{Backend: "cpu", Bucket: name}, learned.Key{Backend: "gpu", Bucket: name}
	warm := map[learned.Key]bandit.NormalGamma{kg: {Mu: 9, Kappa: 50, Alpha: 25, Beta: 5}}
	s := newTestScheduler(t, Config{Warm: warm, Bandit: bandit.Config{Discount: 1}})
	defer s.Close()
	s.Track(1)
	f := s.Fold()
	if f != s.Fold() {
		t.Fatal("a second Fold call attached another Fold")
	}
	foreign := bandit.Stats{N: 40, Sum: 40 * 5.5, SumSq: 40 * (5.5*5.5 + 0.04)}
	if f.Foreign([]learned.Foreign{{Key: kc, Stats: foreign}}) != 0 {
		t.Error("Foreign before the bucket was made reported a change")
	}
	d, err := s.Select(spec, Residency{})
	if err != nil {
		t.Fatal(err)
	}
	own, got, ok := f.Evidence(kg)
	if !ok || own.N < 49 || got != (bandit.Stats{}) {
		t.Errorf("gpu arm: own %+v, foreign %+v (%v): want the store's posterior kept as own evidence", own, got, ok)
	}
	own, got, _ = f.Evidence(kc)
	if got != foreign || math.Abs(own.N) > 1e-12 {
		t.Errorf("cpu arm: own %+v, foreign %+v: want none, %+v", own, got, foreign)
	}
	if d.Reason == Prior {
		t.Errorf("decision %v: an arm with the fleet's evidence has data", d.Reason)
	}
	var emitted []learned.Change
	collect := func() { emitted = s.Changes(emitted[:0]) }
	collect()
	if len(emitted) != 0 {
		t.Errorf("Changes before any Observe handed out %v", emitted)
	}
	// A GPU's first run in the bucket is its warm-up, not learned from.
	for i := 0; len(emitted) == 0; i++ {
		if i == 3 {
			t.Fatal("Changes after 3 Observes handed out nothing")
		}
		if i > 0 {
			if d, err = s.Select(spec, Residency{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Observe(d, us(250)); err != nil {
			t.Fatal(err)
		}
		collect()
	}
	ownBefore, _, _ := f.Evidence(learned.Key{Backend: d.Name, Bucket: name})
	for _, c := range emitted {
		if o := c.Own(); c.Key.Backend == d.Name && (math.Abs(o.N-ownBefore.N) > 1e-9 || math.Abs(o.Sum-ownBefore.Sum) > 1e-9*math.Abs(o.Sum) || math.Abs(o.SumSq-ownBefore.SumSq) > 1e-9*o.SumSq) {
			t.Errorf("handed out own evidence %+v, Evidence says %+v", c.Own(), ownBefore)
		}
	}
	half := bandit.Stats{N: foreign.N / 2, Sum: foreign.Sum / 2, SumSq: foreign.SumSq / 2}
	if f.Foreign([]learned.Foreign{{Key: kc, Stats: half}, {Key: kc, Stats: half}}) != 2 {
		t.Error("Foreign on a made bucket reported no change")
	}
	if _, got, _ := f.Evidence(kc); got != half {
		t.Errorf("foreign %+v after setting %+v twice", got, half)
	}
	ownAfter, _, _ := f.Evidence(learned.Key{Backend: d.Name, Bucket: name})
	if math.Abs(ownAfter.N-ownBefore.N) > 1e-9 || math.Abs(ownAfter.Sum-ownBefore.Sum) > 1e-9*math.Abs(ownBefore.Sum) {
		t.Errorf("own evidence %+v became %+v when the prior changed", ownBefore, ownAfter)
	}
	collect()
	if len(emitted) != 0 {
		t.Errorf("Changes after Foreign alone handed out %v", emitted)
	}
}

// TestFoldCap checks that with discounting the fleet's evidence enters a
// prior as at most foldMemory/(1−γ) observations, its mean kept.
func TestFoldCap(t *testing.T) {
	s := newTestScheduler(t, Config{})
	defer s.Close()
	f := s.Fold()
	spec := matmul(64, 512, 512)
	k := learned.Key{Backend: "cpu", Bucket: kernels.BucketName(spec)}
	st := bandit.Stats{N: 5000, Sum: 5000 * 5.5, SumSq: 5000 * (5.5*5.5 + 0.04)}
	f.Foreign([]learned.Foreign{{Key: k, Stats: st}})
	if _, err := s.Select(spec, Residency{}); err != nil {
		t.Fatal(err)
	}
	b := f.byName[k.Bucket]
	want := foldMemory / (1 - bandit.DefaultDiscount)
	got := b.b.bb.Priors[0].Since(b.base[0])
	if math.Abs(got.N-want) > 1e-9*want || math.Abs(got.Sum/got.N-5.5) > 1e-9 {
		t.Errorf("prior holds %+v, want %v observations of mean 5.5", got, want)
	}
	if _, foreign, _ := f.Evidence(k); foreign != st {
		t.Errorf("Evidence reports %+v, want %+v unscaled", foreign, st)
	}
}

// TestFoldedPriorAdapts: the fleet says cpu takes 100 µs and gpu 150 µs
// (5,000 observations each), but on this machine cpu now takes 300 µs.
// With the fleet's evidence capped (foldMemory) the bucket moves to gpu;
// folded whole it would have stayed on cpu (its mean after 2,000 local
// runs: about 136 µs).
func TestFoldedPriorAdapts(t *testing.T) {
	s := newTestScheduler(t, Config{Seed: 3})
	defer s.Close()
	f := s.Fold()
	spec := matmul(64, 512, 512)
	name := kernels.BucketName(spec)
	at := func(us float64) bandit.Stats {
		y := math.Log(us)
		return bandit.Stats{N: 5000, Sum: 5000 * y, SumSq: 5000 * (y*y + 0.01)}
	}
	f.Foreign([]learned.Foreign{{Key: learned.Key{Backend: "cpu", Bucket: name}, Stats: at(100)},
		{Key: learned.Key{Backend: "gpu", Bucket: name}, Stats: at(150)}})
	truth := map[string]float64{"cpu": 300, "gpu": 150}
	onGPU := 0
	for i := range 2000 {
		d, err := s.Select(spec, Residency{})
		if err != nil {
			t.Fatal(err)
		}
		if i >= 1500 && d.Name == "gpu" {
			onGPU++
		}
		if err := s.Observe(d, us(truth[d.Name])); err != nil {
			t.Fatal(err)
		}
	}
	if onGPU < 450 {
		t.Errorf("%d of the last 500 decisions on gpu, want at least 450", onGPU)
	}
}

// TestFoldZeroWeight: foreign evidence of no weight (N 0) with a Σy is
// not evidence: folded, it would move the prior's mean by any amount with
// nothing for the cap to scale, and the check of this node's
// measurements against it (verify.go) divides by N, so it never ran.
// Nor is evidence claiming a spread over ln 10: it widens the prior for
// good, so the arm is explored whatever the node measures.
func TestFoldZeroWeight(t *testing.T) {
	f, k, fb := selectedFold(t, false)
	before := fb.b.bb.Priors[0]
	mu := before.Mu
	foreignLeavesPrior(t, f, k, fb,
		bandit.Stats{N: 0, Sum: 1e4, SumSq: 1e8},                        // no weight
		bandit.Stats{N: 1e-6, Sum: 1e-6 * mu, SumSq: 1e2},               // σ 10⁴
		bandit.Stats{N: 100, Sum: 100 * mu, SumSq: 100 * (mu*mu + 5.4)}) // σ just over ln 10
	ok := bandit.Stats{N: 100, Sum: 100 * mu, SumSq: 100 * (mu*mu + 5.2)}
	if f.Foreign([]learned.Foreign{{Key: k, Stats: ok}}); fb.b.bb.Priors[0] == before {
		t.Errorf("%+v (σ just under ln 10) left the prior", ok)
	}
}

// TestFoldNoDurationsMean: foreign evidence whose mean ln µs no duration
// has enters nothing, once the backend's check has agreed with the fleet
// (which lifts the bound on distance from the model, verify.go) too: a
// spread that overflowed (Σy²/N − (Σy/N)² as −Inf or NaN) passed the
// check on spread, and one claim of N 1 moved the prior's mean to 1e300.
func TestFoldNoDurationsMean(t *testing.T) {
	f, k, fb := selectedFold(t, true)
	foreignLeavesPrior(t, f, k, fb,
		bandit.Stats{N: 1, Sum: 1e300, SumSq: 1e300},                           // spread −Inf
		bandit.Stats{N: 1e-300, Sum: 1e-10, SumSq: 1e-10},                      // spread NaN
		bandit.Stats{N: 1, Sum: math.Ldexp(1, 450), SumSq: math.Ldexp(1, 900)}, // spread 0, mean 2⁴⁵⁰
		bandit.Stats{N: 10, Sum: -1e4, SumSq: 1e7})                             // mean −1000
}

// TestFoldNegativeSpread: foreign evidence whose spread Σy²/N − (Σy/N)²
// is negative beyond rounding, which no durations have, enters nothing,
// once the backend's check has agreed with the fleet too: it made the
// arm's prior overconfident. Evidence negative only by rounding enters.
func TestFoldNegativeSpread(t *testing.T) {
	f, k, fb := selectedFold(t, true)
	foreignLeavesPrior(t, f, k, fb,
		bandit.Stats{N: 10, Sum: 50, SumSq: 240},           // σ² −1
		bandit.Stats{N: 1, Sum: 5, SumSq: 25 - 1e-6},       // σ² −1e-6
		bandit.Stats{N: 1, Sum: 5, SumSq: 25 * (1 - 1e-8)}) // σ² −2.5e-7
	rounded := bandit.Stats{N: 10, Sum: 50, SumSq: 250 * (1 - 1e-12)}
	f.Foreign([]learned.Foreign{{Key: k, Stats: rounded}})
	if _, got, _ := f.Evidence(k); got != rounded {
		t.Errorf("%+v, negative by rounding only: folded %+v", rounded, got)
	}
}

// TestFoldRemovedPriorRefreshes: a bucket whose arms all hold the
// fleet's evidence re-derives no prior (prior.go leaves loaded arms
// alone, and a bucket with none young stops refreshing). Once Foreign
// takes the CPU arm's evidence away, the arm, which never ran here, is
// young again: as buckets of its op measure both arms, its prior is
// re-derived from them (as in TestPriorsSelfCorrect), not left at the
// model's, 50× pessimistic, of when the bucket was made.
func TestFoldRemovedPriorRefreshes(t *testing.T) {
	bes := []backends.Backend{newFake("cpu", backends.CPU, slowModelCPU), newFake("gpu", backends.GPU, gpuNominal)}
	s := newTestScheduler(t, Config{Backends: bes, Seed: 3})
	defer s.Close()
	f := s.Fold()
	r := rand.New(rand.NewPCG(3, 4))
	truth := func(m, arm int) float64 {
		flops := 2 * float64(m) * 512 * 512
		if arm == 0 {
			return 1 + flops/100e3
		}
		return 10 + flops/10000e3
	}
	y := matmul(16, 512, 512)
	name := kernels.BucketName(y)
	d, err := s.Select(y, Residency{})
	if err != nil {
		t.Fatal(err)
	}
	b := d.b
	model := math.Exp(b.per[0].lnModel)
	f.Foreign([]learned.Foreign{{Key: learned.Key{Backend: "cpu", Bucket: name}, Stats: claim(50, model)},
		{Key: learned.Key{Backend: "gpu", Bucket: name}, Stats: claim(50, truth(16, 1))}})
	teach(t, s, d, 1, truth(16, 1), 0.05, 64, r)
	s.Select(y, Residency{}) // both arms loaded: y stops refreshing
	f.Foreign([]learned.Foreign{{Key: learned.Key{Backend: "cpu", Bucket: name}, Stats: bandit.Stats{}}})
	for _, m := range []int{64, 256, 1024, 4096} {
		x := matmul(m, 512, 512)
		dx, err := s.Select(x, Residency{})
		if err != nil {
			t.Fatal(err)
		}
		teach(t, s, dx, 0, truth(m, 0), 0.05, 64, r)
		teach(t, s, dx, 1, truth(m, 1), 0.05, 64, r)
		s.Select(y, Residency{})
	}
	b.mu.Lock()
	b.bb.Settle(&s.e.cfg)
	got := b.bb.Priors[0].MeanUs()
	b.mu.Unlock()
	if off := math.Abs(math.Log(got / truth(16, 0))); off > math.Log(1.5) {
		t.Errorf("CPU prior %.1f µs, truth %.1f µs (model %.1f): e^%.2f off, want within 1.5×", got, truth(16, 0), model, off)
	}
}

// TestFoldShapes: a shape's own bucket starts from its parent's
// posterior, the fleet's evidence included (engine.newShape), and that
// evidence stays the fleet's there too: Changes hand the store only the
// shape's own evidence on its base, and when Foreign takes the fleet's
// evidence away the shape's prior drops it as its parent's does (and
// takes it again when it comes back, and drops it when the Fold sets it
// aside), rather than keeping, for good, what the fleet said when the
// shape was made. The same holds of a
// shape made before the Fold was attached (Fold.addShape).
func TestFoldShapes(t *testing.T) {
	for _, foldFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "fold first", false: "shape first"}[foldFirst], func(t *testing.T) {
			testFoldShapes(t, foldFirst)
		})
	}
}

func testFoldShapes(t *testing.T, foldFirst bool) {
	a, other := matmul(16, 512, 512), matmul(17, 512, 512)
	name := kernels.BucketName(a)
	// The GPU arm's posterior is the store's: the shape holds it as its
	// parent's, none of it the fleet's.
	warm := map[learned.Key]bandit.NormalGamma{{Backend: "gpu", Bucket: name}: {Mu: 3, Kappa: 50, Alpha: 25, Beta: 1}}
	s := newTestScheduler(t, Config{Seed: 3, Warm: warm})
	defer s.Close()
	s.Track(1)
	var f *Fold
	if foldFirst {
		f = s.Fold()
	}
	if kernels.BucketName(other) != name {
		t.Fatalf("%v and %v in two buckets", a, other)
	}
	kc := learned.Key{Backend: "cpu", Bucket: name}
	const claimUs, ownUs = 30.0, 80.0 // the fleet's CPU, and this node's
	d, err := s.Select(other, Residency{})
	if err != nil {
		t.Fatal(err)
	}
	p := d.b
	if foldFirst {
		f.Foreign([]learned.Foreign{{Key: kc, Stats: claim(50, claimUs)}})
	}
	for i := 0; !d.b.isShape; i++ {
		if i > 2*DefaultShapeHits {
			t.Fatalf("%v has no bucket of its own after %d Selects", a, i)
		}
		if d, err = s.Select(a, Residency{}); err != nil {
			t.Fatal(err)
		}
	}
	c := d.b
	if !foldFirst {
		f = s.Fold()
		f.Foreign([]learned.Foreign{{Key: kc, Stats: claim(50, claimUs)}})
	}
	cpuPrior := func(b *bucket) float64 {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.bb.Settle(&s.e.cfg)
		return b.bb.Priors[0].MeanUs()
	}
	if got := cpuPrior(c); math.Abs(math.Log(got/claimUs)) > 0.2 {
		t.Fatalf("the shape's CPU prior %.1f µs, want about the fleet's %.0f µs, as its parent's", got, claimUs)
	}
	teach(t, s, d, 0, ownUs, 0.02, 3, rand.New(rand.NewPCG(1, 2)))
	for _, ch := range s.Changes(nil) {
		if ch.Key.Backend == "cpu" && ch.Posterior.MeanUs() < 0.8*ownUs {
			t.Errorf("%v: the store would keep a CPU at %.1f µs, the fleet's %.0f folded in; its own runs took %.0f µs",
				ch.Key, ch.Posterior.MeanUs(), claimUs, ownUs)
		}
	}
	f.Foreign([]learned.Foreign{{Key: kc, Stats: bandit.Stats{}}})
	if pp, cp := cpuPrior(p), cpuPrior(c); math.Abs(math.Log(pp/claimUs)) < 0.5 || math.Abs(math.Log(cp/claimUs)) < 0.5 {
		t.Errorf("the fleet's evidence taken away: CPU prior %.1f µs in the bucket, %.1f µs in the shape, want neither at the fleet's %.0f µs", pp, cp, claimUs)
	}
	f.Foreign([]learned.Foreign{{Key: kc, Stats: claim(50, claimUs)}})
	if got := cpuPrior(c); math.Abs(math.Log(got/claimUs)) > 0.2 {
		t.Errorf("the fleet's evidence set again: the shape's CPU prior %.1f µs, want about the fleet's %.0f µs", got, claimUs)
	}
	f.setAside() // as a contradiction does (verify.go)
	if got := cpuPrior(c); math.Abs(math.Log(got/claimUs)) < 0.5 {
		t.Errorf("the fleet's evidence set aside: the shape's CPU prior %.1f µs, want it away from the fleet's %.0f µs", got, claimUs)
	}
}

// TestFoldRemovedUnseen: an arm the fleet's evidence alone gave data
// (Fold.rebase) has none once Foreign takes it away, as when the Fold
// sets it aside: a GPU's first run here is then its warm-up, set aside
// (Scheduler.Observe), not its whole evidence. An arm whose posterior
// the store gave keeps it through both: that is data of its own.
func TestFoldRemovedUnseen(t *testing.T) {
	spec := matmul(64, 512, 512)
	name := kernels.BucketName(spec)
	kg := learned.Key{Backend: "gpu", Bucket: name}
	for _, c := range []struct {
		what   string
		stored bool
		remove func(f *Fold)
	}{
		{"removed", false, func(f *Fold) { f.Foreign([]learned.Foreign{{Key: kg, Stats: bandit.Stats{}}}) }},
		{"set aside", false, func(f *Fold) { f.setAside() }},
		{"stored, removed", true, func(f *Fold) { f.Foreign([]learned.Foreign{{Key: kg, Stats: bandit.Stats{}}}) }},
		{"stored, set aside", true, func(f *Fold) { f.setAside() }},
	} {
		cfg := Config{Seed: 3}
		if c.stored {
			cfg.Warm = map[learned.Key]bandit.NormalGamma{kg: {Mu: 3, Kappa: 50, Alpha: 25, Beta: 1}}
		}
		s := newTestScheduler(t, cfg)
		f := s.Fold()
		f.Foreign([]learned.Foreign{{Key: kg, Stats: claim(50, 25)}})
		d, err := s.Select(spec, Residency{})
		if err != nil {
			t.Fatal(err)
		}
		c.remove(f)
		d.Backend, d.Name = 1, "gpu"
		if err := s.Observe(d, us(5000)); err != nil {
			t.Fatal(err)
		}
		arm := s.Telemetry().Buckets[0].Arms[1]
		if want := !c.stored; arm.Warmup != want || arm.Learned != int64(b2u(!want)) {
			t.Errorf("%s: the GPU's first run here: warm-up %v, learned %d; want warm-up %v", c.what, arm.Warmup, arm.Learned, want)
		}
		s.Close()
	}
}

// selectedFold returns a Scheduler's Fold, the key of the cpu arm of a
// bucket it has selected in, and the bucket's fold entry; verified: the
// cpu's check has agreed with the fleet (which lifts the bound on
// distance from the model, verify.go).
func selectedFold(t *testing.T, verified bool) (*Fold, learned.Key, *foldBucket) {
	t.Helper()
	s := newTestScheduler(t, Config{})
	t.Cleanup(func() { s.Close() })
	f := s.Fold()
	spec := matmul(64, 512, 512)
	k := learned.Key{Backend: "cpu", Bucket: kernels.BucketName(spec)}
	if _, err := s.Select(spec, Residency{}); err != nil {
		t.Fatal(err)
	}
	if verified {
		f.v.mu.Lock()
		f.v.n[0] = verifyMin
		f.v.mu.Unlock()
	}
	return f, k, f.byName[k.Bucket]
}

// foreignLeavesPrior folds each of sts as k's foreign evidence and fails
// the test where the cpu arm's prior moved.
func foreignLeavesPrior(t *testing.T, f *Fold, k learned.Key, fb *foldBucket, sts ...bandit.Stats) {
	t.Helper()
	before := fb.b.bb.Priors[0]
	for _, st := range sts {
		f.Foreign([]learned.Foreign{{Key: k, Stats: st}})
		if after := fb.b.bb.Priors[0]; after != before {
			t.Errorf("%+v: prior %+v became %+v", st, before, after)
		}
	}
}
