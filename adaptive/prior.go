package adaptive

import (
	"math"
	"math/bits"
	"sync"

	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/kernels"
)

// Self-correcting priors (DESIGN.md § Priors). A cost model can be wrong by
// a large factor for a backend it does not know (a many-core CPU given a
// 2-core machine's figures is 50× pessimistic); an arm whose prior is that
// far off is never drawn, so nothing corrects it. So the prior of an arm
// with little data in a bucket is re-derived from what the scheduler has
// measured:
//
//	ln prior(a) = ln model_a + ρ_r(b) + δ(a, r)
//
// where r is an arm the bucket has measured, ρ_r(b) = ln(measured /
// model) of r in this bucket (it cancels an error in the work estimate
// that every arm shares), and δ(a, r) the learned ρ_a − ρ_r of buckets that
// measured both: the same op at nearby sizes first (weighted 2^(−Δclass/2)),
// shrunk toward the op class's, shrunk toward every bucket's, shrunk
// toward 0 (the model's own ratio). A bucket that has measured nothing
// takes ρ_a from the same hierarchy. The bucket re-derives its young arms'
// priors (fewer than youngArm observations) when the evidence anywhere
// has moved on (engine.epoch), and carries an arm's observations over to
// its new prior (bandit.Rebase), so discounting pulls toward a prior that
// is right. An arm with no data at all is tried once, but only when that
// trial is predicted to cost at most trialBudget of what the bucket has
// spent: a trial is bounded by what it can cost.

const (
	// youngArm is how many observations an arm has in a bucket before its
	// prior is left alone: with the default discount (γ = 0.995) its
	// evidence is then about 60 times the prior's.
	youngArm = 64
	// shrinkWeight is the pseudo-weight, in buckets, of a level's parent
	// in the hierarchy of corrections.
	shrinkWeight = 1.0
	// trialBudget bounds a forced trial of an arm with no data: its
	// predicted cost (prior mean and transfer) is at most this share of
	// the bucket's time so far.
	trialBudget = 0.02
	// priorRhoVar is the variance across buckets, in ln², believed of a
	// learned ratio until buckets measure it: a model can be off by 50×
	// (e^3.9) for hardware it does not know, two standard deviations.
	priorRhoVar = 4.0
	// trialZ is how many standard deviations of its learned ratio an arm
	// may sit behind a measured arm and still be tried (worthTrial), and
	// how far above what the rest says one run of an arm may be and still
	// be its level (priorRho).
	trialZ = 3.0
	// trialEvidence is how many buckets must have measured a pair of arms
	// before their learned ratio can rule a trial out, and an arm before
	// its learned level can price a trial above the model (trialCost).
	trialEvidence = 3
)

// published is what a bucket has told the engine of one arm: ρ = ln(mean
// measured / model) and whether it has said anything.
type published struct {
	rho float64
	ok  bool
}

// levelSums are the corrections of one level (an op class, or all):
// per arm Σρ, Σρ² and count, per ordered pair Σ(ρ_a − ρ_r), its squares
// and count.
type levelSums struct {
	arm, armSq   [MaxBackends]float64
	armN         [MaxBackends]float64
	pair, pairSq [MaxBackends][MaxBackends]float64
	pairN        [MaxBackends][MaxBackends]float64
}

// corrections holds the levels above a family: one per op class, and all.
type corrections struct {
	mu    sync.Mutex
	class [3]levelSums
	all   levelSums
}

// add folds a change of bucket b's arm a from old to now into the levels
// (c.mu held): the arm's own sums, and each pair with another arm b has
// published (per, b's counters, hold what it published).
func (c *corrections) add(class kernels.Class, per []armCounts, a int, old, now published) {
	c.class[class%3].add(per, a, old, now)
	c.all.add(per, a, old, now)
}

// classSums are a family's sums of one size class.
type classSums struct {
	class int
	levelSums
}

// sumsOf returns the family's sums of size class c, made on first use
// (engine.corr.mu held).
func (f *family) sumsOf(c int) *levelSums {
	for i := range f.sums {
		if f.sums[i].class == c {
			return &f.sums[i].levelSums
		}
	}
	f.sums = append(f.sums, classSums{class: c})
	return &f.sums[len(f.sums)-1].levelSums
}

// add folds a change of a bucket's arm a from old to now into l: the
// arm's own sums, and each pair with another arm the bucket has
// published (per, its counters, hold what it published).
func (l *levelSums) add(per []armCounts, a int, old, now published) {
	if old.ok {
		l.arm[a] -= old.rho
		l.armSq[a] -= old.rho * old.rho
		l.armN[a]--
	}
	l.arm[a] += now.rho
	l.armSq[a] += now.rho * now.rho
	l.armN[a]++
	for r := range per {
		pr := per[r].pub
		if r == a || !pr.ok {
			continue
		}
		if old.ok {
			d := old.rho - pr.rho
			l.pair[a][r] -= d
			l.pair[r][a] += d
			l.pairSq[a][r] -= d * d
			l.pairSq[r][a] -= d * d
			l.pairN[a][r]--
			l.pairN[r][a]--
		}
		d := now.rho - pr.rho
		l.pair[a][r] += d
		l.pair[r][a] -= d
		l.pairSq[a][r] += d * d
		l.pairSq[r][a] += d * d
		l.pairN[a][r]++
		l.pairN[r][a]++
	}
}

// shrink blends a level's sum s over weight w with its parent's estimate.
func shrink(s, w, parent float64) float64 { return (s + shrinkWeight*parent) / (w + shrinkWeight) }

// milestone reports whether an arm's n-th learned observation publishes
// its ratio: 1, 4, 16, then every youngArm (64). Each publish takes the
// engine's lock: at every power of two, 10,000 buckets that stay young
// through BenchmarkSelectObserve spent 5% of its time publishing.
func milestone(n int64) bool {
	return n == 1 || n == 4 || n == 16 || n > 0 && n%youngArm == 0
}

// recip[n] is 1/n, for learnLn's running mean without a division.
var recip = func() (r [youngArm + 1]float64) {
	for n := 1; n <= youngArm; n++ {
		r[n] = 1 / float64(n)
	}
	return r
}()

// learnLn folds y = ln µs into arm's measured mean (b.mu held; learned
// counts y): an exact mean for youngArm observations, then a moving one
// over about as many, which follows a device that changed.
func (b *bucket) learnLn(arm int, y float64) {
	c := &b.per[arm]
	c.lnMean += (y - c.lnMean) * recip[min(c.learned, youngArm)]
}

// rho returns ln(measured / model) of arm in b (b.mu held; learned > 0):
// the measured mean of ln µs, taken to a lognormal mean with the prior's
// spread (NewPrior's convention), against the model's estimate. A model
// that is right gives about 0.
func (e *engine) rho(b *bucket, arm int) float64 {
	return b.per[arm].lnMean + e.cfg.PriorSpread*e.cfg.PriorSpread/2 - b.lnModel[arm]
}

// publish tells the engine arm's ratio in b (b.mu held), at a milestone.
func (e *engine) publish(b *bucket, arm int) {
	if b.parent != nil { // its parent publishes what it learns (newShape)
		if b.per[arm].learned == 1 && b.epoch != math.MaxUint64 {
			b.epoch = 0
		}
		return
	}
	now := published{rho: e.rho(b, arm), ok: true}
	e.corr.mu.Lock()
	old := b.per[arm].pub
	b.per[arm].pub = now
	e.corr.add(b.fam.class, b.per, arm, old, now)
	b.fam.sumsOf(b.class).add(b.per, arm, old, now)
	e.corr.mu.Unlock()
	e.epoch.Add(1)
	if !old.ok && b.epoch != math.MaxUint64 {
		b.epoch = 0 // a new arm of b's has data: refresh at its next Select
	}
}

// refresh re-derives the priors of b's young arms (b.mu held) when the
// evidence has moved on since b last did: when the engine's epoch has at
// least doubled, or an arm of b's has published for the first time (which
// zeroes b.epoch). So a bucket refreshes O(log publishes) times, not at
// every publish anywhere: over 10,000 young buckets that made every
// Select refresh, 2.5× slower.
func (e *engine) refresh(b *bucket) {
	ep := e.epoch.Load()
	if ep <= 2*b.epoch || b.epoch == math.MaxUint64 {
		return
	}
	b.epoch = ep
	var young Mask
	for a := range e.n {
		if b.per[a].learned < youngArm && !b.loaded.Has(a) {
			young |= Backend(a)
		}
	}
	if young == 0 {
		b.epoch = math.MaxUint64 // grown up: never again
		return
	}
	e.corr.mu.Lock()
	fam := e.familyView(b)
	for a := range e.n {
		if !young.Has(a) {
			continue
		}
		p := e.derivedPrior(b, a, &fam)
		if b.per[a].learned == 0 {
			b.bb.Arms[a] = p
			b.trialMean[a] = e.trialCost(b, a, p)
		} else if r := bandit.Rebase(b.bb.Priors[a], b.bb.Arms[a], p); validPosterior(r) {
			b.bb.Arms[a] = r
		} else {
			continue
		}
		b.bb.Priors[a] = p
	}
	e.corr.mu.Unlock()
}

// familyView is what b's family has published, at two levels: near,
// weighted by size distance to b (2^(−Δclass/2)), and op, every size of
// the op at weight 1. Each holds per arm Σwρ, Σwρ² and Σw, per pair
// Σw(ρ_a − ρ_r), its square and Σw, b's own publications left out. It
// reads the family's sums per size class, not its buckets (engine.corr.mu
// held).
type familyView struct{ near, op viewLevel }

type viewLevel struct {
	arm, armSq, armW    [MaxBackends]float64
	pair, pairSq, pairW [MaxBackends][MaxBackends]float64
}

// add adds w times l's sums to v.
func (v *viewLevel) add(n int, w float64, l *levelSums) {
	for a := range n {
		v.arm[a] += w * l.arm[a]
		v.armSq[a] += w * l.armSq[a]
		v.armW[a] += w * l.armN[a]
		for r := range n {
			v.pair[a][r] += w * l.pair[a][r]
			v.pairSq[a][r] += w * l.pairSq[a][r]
			v.pairW[a][r] += w * l.pairN[a][r]
		}
	}
}

// drop takes b's own publications out of v, at weight 1 (its own size
// class).
func (v *viewLevel) drop(n int, per []armCounts) {
	for a := range n {
		pa := per[a].pub
		if !pa.ok {
			continue
		}
		v.arm[a] -= pa.rho
		v.armSq[a] -= pa.rho * pa.rho
		v.armW[a]--
		for r := range n {
			if pr := per[r].pub; r != a && pr.ok {
				d := pa.rho - pr.rho
				v.pair[a][r] -= d
				v.pairSq[a][r] -= d * d
				v.pairW[a][r]--
			}
		}
	}
}

func (e *engine) familyView(b *bucket) familyView {
	var v familyView
	for i := range b.fam.sums {
		cs := &b.fam.sums[i]
		v.near.add(e.n, neighbourWeight(b.class-cs.class), &cs.levelSums)
		v.op.add(e.n, 1, &cs.levelSums)
	}
	v.near.drop(e.n, b.per)
	v.op.drop(e.n, b.per)
	return v
}

// trialCost is what a forced trial of arm a (no data in b) is budgeted
// at (e.corr.mu held): its prior mean p, but at most the model's estimate
// while fewer than trialEvidence buckets have measured a. Evidence that
// thin may hasten a trial, not forbid it: one bucket's run of a, perhaps
// a spike, priced every other bucket's trial out of reach for good
// (TestSpikeFirstRun).
func (e *engine) trialCost(b *bucket, a int, p bandit.NormalGamma) float32 {
	m := p.MeanUs()
	if e.corr.all.armN[a] < trialEvidence {
		m = math.Min(m, math.Exp(b.lnModel[a]))
	}
	return float32(m)
}

// derivedPrior returns arm a's prior in b: the model's estimate corrected
// by priorRho (b.mu and e.corr.mu held).
func (e *engine) derivedPrior(b *bucket, a int, fam *familyView) bandit.NormalGamma {
	return bandit.NewPrior(math.Exp(b.lnModel[a]+e.priorRho(b, a, fam)), e.cfg.PriorStrength, e.cfg.PriorSpread)
}

// worthTrial reports whether a forced trial of arm a (no data in b) may
// still pay (b.mu held; it takes e.corr.mu): not when, for an arm r that
// b has measured and at least trialEvidence buckets measured with a, the
// learned ratio between them (pairRho, on top of their models' ratio)
// puts a more than trialZ standard deviations of that ratio behind r.
// What the other buckets learned then says, firmly, that a loses here (a
// CPU 30× slower than three GPUs, StarPU's mirage models). A ratio that varies between buckets (two CPU kernels whose
// winner turns with the shape, bench/peer) keeps the trial; a model
// alone never stops one (TestTrialBounded); Thompson draws can still pick
// a. It is asked when the trial is within budget, so with the evidence
// of that moment.
func (e *engine) worthTrial(b *bucket, a int) bool {
	cl, all := &e.corr.class[b.fam.class%3], &e.corr.all
	e.corr.mu.Lock()
	defer e.corr.mu.Unlock()
	fam := e.familyView(b)
	own, up := e.ownRho(b, a, cl, &fam)
	for r := range e.n {
		if r == a || b.per[r].learned == 0 || all.pairN[a][r] < trialEvidence {
			continue
		}
		// ln of a's cost over r's, as the learned ratio predicts it.
		behind := b.lnModel[a] - b.lnModel[r] + e.pairRho(a, r, own, up, cl, &fam)
		if behind > trialZ*math.Sqrt(pairSpread(&fam, cl, all, a, r)) {
			return false
		}
	}
	return true
}

// priorRho returns the ρ of arm a's prior in b (b.mu and e.corr.mu held):
// its own measured level, the data rather than a model of it, once a has
// run in b; but one run more than trialZ standard deviations slower than
// what the rest says (crossRho) is taken for a spike, and the rest
// stands. A spike only slows a run, and as the arm's own level it was
// the prior with the run again on top, which held the arm at the spike's
// cost for good (TestSpikeFirstRun).
func (e *engine) priorRho(b *bucket, a int, fam *familyView) float64 {
	n := b.per[a].learned
	if n >= 2 {
		return e.rho(b, a)
	}
	cross, v := e.crossRho(b, a, fam)
	if n == 1 && e.rho(b, a) <= cross+trialZ*math.Sqrt(v) {
		return e.rho(b, a)
	}
	return cross
}

// crossRho returns the ρ of arm a in b that the other buckets and b's
// other arms say, and its variance (b.mu and e.corr.mu held).
// Its own ratio elsewhere (the hierarchy of armRho) stands until buckets
// that measured both a and an arm r that b has measured say how the two
// compare: then ρ_r(b) + δ(a, r), weighted by how many such buckets there
// are (against shrinkWeight for the arm's own), since b's own ratio on r
// carries over to a only in so far as the model's error is shared, which
// those buckets show.
func (e *engine) crossRho(b *bucket, a int, fam *familyView) (rho, variance float64) {
	cl := &e.corr.class[b.fam.class%3]
	all := &e.corr.all
	own, up := e.ownRho(b, a, cl, fam)
	ownVar := spread(
		level{fam.near.arm[a], fam.near.armSq[a], fam.near.armW[a]},
		level{fam.op.arm[a], fam.op.armSq[a], fam.op.armW[a]},
		level{cl.arm[a], cl.armSq[a], cl.armN[a]},
		level{all.arm[a], all.armSq[a], all.armN[a]})
	sum, weight := clampRho(own)/ownVar, 1/ownVar
	noise := e.cfg.PriorSpread * e.cfg.PriorSpread
	for r := range e.n {
		n := b.per[r].learned
		if r == a || n == 0 {
			continue
		}
		d := e.pairRho(a, r, own, up, cl, fam)
		v := pairSpread(fam, cl, all, a, r) + noise/float64(min(n, youngArm))
		sum += (e.rho(b, r) + d) / v
		weight += 1 / v
	}
	return sum / weight, 1 / weight
}

// ownRho returns arm a's own ratio for b (armRho, or that of b's parent
// when b is a shape's bucket and its parent has published a) and the
// parent's counters, nil for a bucket (e.corr.mu held).
func (e *engine) ownRho(b *bucket, a int, cl *levelSums, fam *familyView) (float64, []armCounts) {
	own := e.armRho(a, cl, fam)
	if b.parent == nil {
		return own, nil
	}
	up := b.parent.per // their pub, under e.corr.mu
	if pa := up[a].pub; pa.ok {
		own = pa.rho
	}
	return own, up
}

// pairRho returns the learned ratio ρ_a − ρ_r, clamped: every bucket's,
// shrunk toward the difference of the two arms' own ratios, then the op
// class's, the family's at every size and near b's, and the parent's
// (up, when b is a shape's bucket) (e.corr.mu held).
func (e *engine) pairRho(a, r int, own float64, up []armCounts, cl *levelSums, fam *familyView) float64 {
	all := &e.corr.all
	d := shrink(all.pair[a][r], all.pairN[a][r], own-e.armRho(r, cl, fam))
	d = shrink(cl.pair[a][r], cl.pairN[a][r], d)
	d = shrink(fam.op.pair[a][r], fam.op.pairW[a][r], d)
	d = shrink(fam.near.pair[a][r], fam.near.pairW[a][r], d)
	if up != nil && up[a].pub.ok && up[r].pub.ok {
		d = shrink(up[a].pub.rho-up[r].pub.rho, 1, d)
	}
	return clampRho(d)
}

// level is one level's sums of a ratio: Σx, Σx² and their weight.
type level struct{ sum, sq, w float64 }

// spread returns the variance across buckets of a ratio, from the first
// of levels (innermost first) with at least two buckets' weight, shrunk
// toward priorRhoVar by one pseudo-bucket; priorRhoVar when none has.
// Estimates are weighted by 1/spread (priorRho): a ratio that differs
// from bucket to bucket says little about one more bucket.
func spread(levels ...level) float64 {
	for _, l := range levels {
		if l.w >= 2 {
			ss := math.Max(l.sq-l.sum*l.sum/l.w, 0)
			return (ss + priorRhoVar) / (l.w + 1)
		}
	}
	return priorRhoVar
}

// pairSpread is spread of the learned ratio between arms a and r: from
// the family's buckets near b's size, the family's at every size, its op
// class's, all.
func pairSpread(fam *familyView, cl, all *levelSums, a, r int) float64 {
	return spread(
		level{fam.near.pair[a][r], fam.near.pairSq[a][r], fam.near.pairW[a][r]},
		level{fam.op.pair[a][r], fam.op.pairSq[a][r], fam.op.pairW[a][r]},
		level{cl.pair[a][r], cl.pairSq[a][r], cl.pairN[a][r]},
		level{all.pair[a][r], all.pairSq[a][r], all.pairN[a][r]})
}

// armRho is arm a's ratio from the family's buckets near b's size,
// shrunk toward the family's at every size, its op class's, every
// bucket's, and 0, the model's.
func (e *engine) armRho(a int, cl *levelSums, fam *familyView) float64 {
	all := &e.corr.all
	g := shrink(all.arm[a], all.armN[a], 0)
	g = shrink(cl.arm[a], cl.armN[a], g)
	g = shrink(fam.op.arm[a], fam.op.armW[a], g)
	return shrink(fam.near.arm[a], fam.near.armW[a], g)
}

func clampRho(x float64) float64 { return math.Max(-correctionMax, math.Min(correctionMax, x)) }

// trial returns an allowed arm with no data in b that may be tried now
// (b.mu held): its predicted cost, prior mean and transfer, is at most
// trialBudget of the time b has spent. A GPU's first run is its warm-up,
// not learned from (observe), so such an arm may be tried twice.
func (e *engine) trial(b *bucket, allowed Mask, extra *[MaxBackends]float64) (int, bool) {
	var spent float64
	for a := range e.n {
		spent += b.per[a].timeUs
	}
	if spent == 0 {
		return 0, false
	}
	for m := allowed &^ b.seen; m != 0; m &= m - 1 {
		a := bits.TrailingZeros16(uint16(m))
		cost := float64(b.trialMean[a])
		if extra != nil {
			cost += extra[a]
		}
		if !(cost <= trialBudget*spent) {
			continue
		}
		if c := &b.per[a]; c.learned > 0 || c.ops >= 2 {
			continue
		}
		if e.worthTrial(b, a) {
			return a, true
		}
		b.trialMean[a] = float32(math.Inf(1)) // until a refresh re-derives it
	}
	return 0, false
}

// correctionMax caps a learned |ln(actual/predicted)| (prior.go): a factor
// of about 1100.
const correctionMax = 7.0

// neighbourWeight is the weight, in the corrections a prior takes from its
// family (prior.go), of a bucket dc size classes away: half per octave.
func neighbourWeight(dc int) float64 {
	if dc < 0 {
		dc = -dc
	}
	return math.Exp2(-float64(dc) / 2)
}
