package bandit_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/bandit/bandittest"
)

// settledBucket returns a bucket whose arm 0, the incumbent, ran 200
// times at 100 µs and arm 1 runs times at mean1 µs (σ = 0.2 in ln).
func settledBucket(cfg *bandit.Config, mean1 float64, runs int) *bandit.Bucket {
	r := rand.New(rand.NewPCG(11, 11))
	b := bandit.NewBucket(bandittest.Priors(cfg, 100, 100))
	for range runs {
		b.Observe(cfg, 1, bandittest.LogNormal(r, mean1, 0.2))
	}
	for range 200 {
		b.Observe(cfg, 0, bandittest.LogNormal(r, 100, 0.2))
	}
	b.Incumbent = 0
	b.Settle(cfg) // the copies share its discount stamps
	return b
}

// chosen makes n decisions, each from a copy of base (ChooseCopies with
// extra and copies), with the skip or without it (noSkip), drawing from a
// generator seeded with seed, and returns how often each arm was chosen
// and how many decisions kept the incumbent undrawn.
func chosen(cfg *bandit.Config, base *bandit.Bucket, extra, copies []float64, n int, noSkip bool, seed uint64) (won []int, kept int64) {
	r := rand.New(rand.NewPCG(seed, 1))
	won = make([]int, len(base.Arms))
	costs := make([]float64, len(base.Arms))
	arms := append([]bandit.NormalGamma(nil), base.Arms...)
	before := base.Skips() // the copies share its ArmStates
	for range n {
		b := *base
		b.Arms = arms
		bandit.SetNoSkip(&b, noSkip)
		arm, _ := b.ChooseCopies(cfg, extra, copies, r, costs)
		won[arm]++
	}
	return won, base.Skips() - before
}

// TestSkipSameChoices checks that skipping draws (skip.go) keeps the
// chosen arm's distribution (DESIGN.md § The bandit): from one settled
// state, n decisions each from a copy of it choose the challenger as
// often with the skip as without, to within 5 standard errors of the
// difference of two binomial counts, while the skip keeps at least 99%
// of them without a draw. The states are ones where the challenger wins
// a few in ten thousand draws: the tail that the skip must still draw.
// The last also prices a copy of 100 µs on the incumbent that the margin
// does not scale (ChooseCopies).
func TestSkipSameChoices(t *testing.T) {
	cfg := defaultCfg(t)
	const n = 2_000_000
	for _, c := range []struct {
		mean1 float64
		runs  int
		copy0 float64
	}{{130, 4, 0}, {150, 3, 0}, {200, 2, 0}, {1500, 2, 100}} {
		var extra, copies []float64
		if c.copy0 > 0 {
			extra, copies = []float64{c.copy0, 0}, []float64{c.copy0, 0}
		}
		base := settledBucket(&cfg, c.mean1, c.runs)
		won, kept := chosen(&cfg, base, extra, copies, n, false, 21)
		lost, _ := chosen(&cfg, base, extra, copies, n, true, 22)
		with, without := won[1], lost[1]
		tol, same := sameCount(with, without)
		t.Logf("challenger at %g µs, %d runs: won %d of %d with the skip (%d kept undrawn), %d without",
			c.mean1, c.runs, with, n, kept, without)
		if !same {
			t.Errorf("challenger at %g µs: won %d with the skip, %d without: differ by more than %.0f", c.mean1, with, without, tol)
		}
		if kept < n*99/100 {
			t.Errorf("challenger at %g µs: %d of %d decisions kept without a draw, want ≥ 99%%", c.mean1, kept, n)
		}
	}
}

// TestSkipSameChoicesThreeArms is TestSkipSameChoices with two
// challengers, so that a decision whose one challenger fell in its tail
// also inverts the other's uniform, outside its tail, where its floor is
// not above the incumbent's draw (drawDead): each challenger is chosen
// as often with the skip as without, to within 5 standard errors.
func TestSkipSameChoicesThreeArms(t *testing.T) {
	cfg := defaultCfg(t)
	const n = 2_000_000
	r := rand.New(rand.NewPCG(12, 12))
	base := bandit.NewBucket(bandittest.Priors(&cfg, 100, 100, 100))
	for range 4 {
		base.Observe(&cfg, 1, bandittest.LogNormal(r, 170, 0.2))
		base.Observe(&cfg, 2, bandittest.LogNormal(r, 170, 0.2))
	}
	for range 200 {
		base.Observe(&cfg, 0, bandittest.LogNormal(r, 100, 0.2))
	}
	base.Incumbent = 0
	base.Settle(&cfg)
	with, kept := chosen(&cfg, base, nil, nil, n, false, 31)
	without, _ := chosen(&cfg, base, nil, nil, n, true, 32)
	t.Logf("chosen with the skip %v (%d kept undrawn), without %v", with, kept, without)
	for a := 1; a < 3; a++ {
		if tol, same := sameCount(with[a], without[a]); !same || with[a] == 0 {
			t.Errorf("challenger %d: chosen %d times with the skip, %d without (tolerance %.0f, want some)", a, with[a], without[a], tol)
		}
	}
	if kept < n*99/100 {
		t.Errorf("%d of %d decisions kept without a draw, want ≥ 99%%", kept, n)
	}
}

// TestSkipSameChoicesMixed is TestSkipSameChoices with arms of every
// kind at once (skip.go): a live challenger near the incumbent, which is
// drawn at every decision, a dead one a little slower than the
// incumbent, whose floor is at times below the cheapest drawn cost, and
// a dead one far slower, drawn only from its tail. Each challenger is
// chosen as often with the skip as without, to within 5 standard
// errors, and at least half of the decisions (the live one drawn above
// its threshold, no dead one's uniform in its tail) keep the incumbent
// undrawn (Skipped).
func TestSkipSameChoicesMixed(t *testing.T) {
	cfg := defaultCfg(t)
	const n = 1_000_000
	r := rand.New(rand.NewPCG(14, 14))
	base := bandit.NewBucket(bandittest.Priors(&cfg, 100, 100, 150, 600))
	for range 3 {
		base.Observe(&cfg, 1, bandittest.LogNormal(r, 105, 0.2))
		base.Observe(&cfg, 2, bandittest.LogNormal(r, 150, 0.2))
	}
	for range 4 {
		base.Observe(&cfg, 3, bandittest.LogNormal(r, 600, 0.2))
	}
	for range 200 {
		base.Observe(&cfg, 0, bandittest.LogNormal(r, 100, 0.2))
	}
	if dead, live, _ := settledDead(&cfg, base); dead != 0b1100 || live != 0b0010 {
		t.Fatalf("dead %04b, live %04b: want dead 1100, live 0010", dead, live)
	}
	with, _ := chosen(&cfg, base, nil, nil, n, false, 51)
	without, _ := chosen(&cfg, base, nil, nil, n, true, 52)
	held := skippedOf(&cfg, base, n, 53)
	t.Logf("chosen with the skip %v (%d kept the incumbent undrawn), without %v", with, held, without)
	for a := 1; a < 4; a++ {
		if tol, same := sameCount(with[a], without[a]); !same {
			t.Errorf("challenger %d: chosen %d times with the skip, %d without (tolerance %.0f)", a, with[a], without[a], tol)
		}
	}
	if with[1] == 0 || with[2] == 0 {
		t.Errorf("the nearer challengers were never chosen: %v", with)
	}
	if held < n/2 {
		t.Errorf("%d of %d decisions kept the incumbent undrawn, want at least half", held, n)
	}
}

// TestSkipSameChoicesMixedProbeable is TestSkipSameChoicesMixed with a
// live challenger beside a dead one measured once, which a held decision
// may probe: the probe's coin is tossed first, and where it allows no
// probe the decision may keep the incumbent undrawn. Each challenger is
// chosen as often with the skip as without, to within 5 standard
// errors, and at least a third of the decisions keep the incumbent
// undrawn.
func TestSkipSameChoicesMixedProbeable(t *testing.T) {
	cfg := defaultCfg(t)
	const n = 1_000_000
	r := rand.New(rand.NewPCG(16, 16))
	base := bandit.NewBucket(bandittest.Priors(&cfg, 100, 100, 300))
	for range 3 {
		base.Observe(&cfg, 1, bandittest.LogNormal(r, 105, 0.2))
	}
	base.Observe(&cfg, 2, bandittest.LogNormal(r, 300, 0.2))
	for range 200 {
		base.Observe(&cfg, 0, bandittest.LogNormal(r, 100, 0.2))
	}
	if dead, live, probed := settledDead(&cfg, base); dead != 0b100 || live != 0b010 || probed != 0b100 {
		t.Fatalf("dead %03b, live %03b, probeable %03b: want dead 100, live 010, probeable 100", dead, live, probed)
	}
	with, _ := chosen(&cfg, base, nil, nil, n, false, 71)
	without, _ := chosen(&cfg, base, nil, nil, n, true, 72)
	held := skippedOf(&cfg, base, n, 73)
	t.Logf("chosen with the skip %v (%d kept the incumbent undrawn), without %v", with, held, without)
	for a := 1; a < 3; a++ {
		if tol, same := sameCount(with[a], without[a]); !same || without[a] == 0 {
			t.Errorf("challenger %d: chosen %d times with the skip, %d without (tolerance %.0f, want some)", a, with[a], without[a], tol)
		}
	}
	if held < n/3 {
		t.Errorf("%d of %d decisions kept the incumbent undrawn, want at least a third", held, n)
	}
}

// TestSkipSameChoicesProbeable is TestSkipSameChoices with challengers
// measured once, which a held decision may probe (Bucket.ChooseCopies),
// in buckets of two and of three arms: the probe's coin is tossed first,
// and where it allows a probe the incumbent is drawn and a challenger's
// draw spared only where its floor is above that draw (skip.go). The
// challengers' priors are at their level, so that one run leaves a
// narrow posterior. Each is chosen as often with the skip as without,
// to within 5 standard errors, and where every challenger is 4× or more
// slower at least 99% of the decisions draw no challenger.
func TestSkipSameChoicesProbeable(t *testing.T) {
	cfg := defaultCfg(t)
	const n = 1_000_000
	for _, c := range []struct {
		arms           int
		mean1, minKept float64
	}{{2, 130, 0}, {2, 400, 0.99}, {3, 130, 0}, {3, 400, 0.99}, {3, 500, 0.99}} {
		r := rand.New(rand.NewPCG(13, 13))
		levels := []float64{100, c.mean1, 2 * c.mean1}[:c.arms]
		base := bandit.NewBucket(bandittest.Priors(&cfg, levels...))
		for a := 1; a < c.arms; a++ {
			base.Observe(&cfg, a, bandittest.LogNormal(r, levels[a], 0.2))
		}
		for range 200 {
			base.Observe(&cfg, 0, bandittest.LogNormal(r, 100, 0.2))
		}
		if _, _, probed := settledDead(&cfg, base); probed != uint8(1<<c.arms-2) {
			t.Fatalf("%d arms, challenger at %g µs: probeable %03b, want %03b", c.arms, c.mean1, probed, 1<<c.arms-2)
		}
		with, kept := chosen(&cfg, base, nil, nil, n, false, 41)
		without, _ := chosen(&cfg, base, nil, nil, n, true, 42)
		t.Logf("%d arms, challenger at %g µs, 1 run: chosen %v with the skip (%d drew no challenger), %v without", c.arms, c.mean1, with, kept, without)
		for a := 1; a < c.arms; a++ {
			if tol, same := sameCount(with[a], without[a]); !same {
				t.Errorf("%d arms, challenger %d at %g µs: chosen %d with the skip, %d without: differ by more than %.0f", c.arms, a, c.mean1, with[a], without[a], tol)
			}
		}
		if without[1] == 0 {
			t.Errorf("%d arms, challenger at %g µs: never chosen", c.arms, c.mean1)
		}
		if float64(kept) < c.minKept*n {
			t.Errorf("%d arms, challenger at %g µs: %d of %d decisions drew no challenger, want ≥ %g", c.arms, c.mean1, kept, n, c.minKept)
		}
	}
}

// TestSkipSameChoicesLive is TestSkipSameChoices where no challenger is
// dead (challengers near the incumbent, measured a few times, in
// buckets of two and three arms): the challengers are drawn first, and
// the incumbent only where one of them drew below its threshold
// (drawSomeDead). Each challenger is chosen as often with the skip as
// without, to within 5 standard errors, and most decisions (here at
// least 80%) keep the incumbent without drawing it (Skipped).
func TestSkipSameChoicesLive(t *testing.T) {
	cfg := defaultCfg(t)
	const n = 1_000_000
	for _, c := range []struct {
		levels []float64
		runs   int
	}{{[]float64{100, 110}, 3}, {[]float64{100, 125}, 2}, {[]float64{100, 110, 120}, 3}} {
		r := rand.New(rand.NewPCG(15, 15))
		base := bandit.NewBucket(bandittest.Priors(&cfg, c.levels...))
		for a := 1; a < len(c.levels); a++ {
			for range c.runs {
				base.Observe(&cfg, a, bandittest.LogNormal(r, c.levels[a], 0.2))
			}
		}
		for range 200 {
			base.Observe(&cfg, 0, bandittest.LogNormal(r, 100, 0.2))
		}
		all := uint8(1<<len(c.levels) - 2)
		if dead, live, probed := settledDead(&cfg, base); dead != 0 || live != all || probed != 0 {
			t.Fatalf("%v: dead %03b, live %03b, probeable %03b: want every challenger live, none probeable", c.levels, dead, live, probed)
		}
		with, _ := chosen(&cfg, base, nil, nil, n, false, 61)
		without, _ := chosen(&cfg, base, nil, nil, n, true, 62)
		held := skippedOf(&cfg, base, n, 63)
		t.Logf("%v, %d runs: chosen %v with the skip (%d kept the incumbent undrawn), %v without", c.levels, c.runs, with, held, without)
		for a := 1; a < len(c.levels); a++ {
			if tol, same := sameCount(with[a], without[a]); !same || without[a] == 0 {
				t.Errorf("%v: challenger %d chosen %d times with the skip, %d without (tolerance %.0f, want some)", c.levels, a, with[a], without[a], tol)
			}
		}
		if held < n*8/10 {
			t.Errorf("%v: %d of %d decisions kept the incumbent undrawn, want ≥ 80%%", c.levels, held, n)
		}
	}
}

// skippedOf makes n decisions, each from a copy of base, and returns how
// many kept the incumbent without drawing it (Skipped).
func skippedOf(cfg *bandit.Config, base *bandit.Bucket, n int, seed uint64) (held int) {
	r := rand.New(rand.NewPCG(seed, 1))
	costs := make([]float64, len(base.Arms))
	arms := append([]bandit.NormalGamma(nil), base.Arms...)
	for range n {
		b := *base
		b.Arms = arms
		b.ChooseCopies(cfg, nil, nil, r, costs)
		if b.Skipped() {
			held++
		}
	}
	return held
}

// sameCount reports whether a and b, the counts of one outcome in two
// runs of decisions from the same law, differ by at most tol = 5·√(a+b):
// 5 standard errors of the difference of two binomial counts where the
// outcome is rare, more where it is not.
func sameCount(a, b int) (tol float64, same bool) {
	tol = 5 * math.Sqrt(float64(a+b))
	return tol, math.Abs(float64(a-b)) <= tol
}

// settledDead makes arm 0 base's incumbent, settles base, and returns
// what DeadArms finds on a copy of it (DeadArms refreshes the copy's
// bounds, so that base draws as it would have).
func settledDead(cfg *bandit.Config, base *bandit.Bucket) (dead, live, probed uint8) {
	base.Incumbent = 0
	base.Settle(cfg)
	probe := *base
	probe.Arms = append([]bandit.NormalGamma(nil), base.Arms...)
	return bandit.DeadArms(&probe, cfg, nil)
}
