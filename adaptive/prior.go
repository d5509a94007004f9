package adaptive

import (
	"math"
	"math/bits"
	"sync"

	"github.com/adaptsched/adaptsched/adaptive/prior"
	"github.com/adaptsched/adaptsched/bandit"
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
	// prior is left alone: by then, at the default discount (γ = 0.999),
	// its evidence is about 62 pseudo-observations against the prior's
	// κ0 = 0.2.
	youngArm = 64
	// trialBudget bounds a forced trial of an arm with no data: its
	// predicted cost (prior mean and transfer) is at most this share of
	// the bucket's time so far.
	trialBudget = 0.02
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

// milestone reports whether an arm's n-th learned observation publishes
// its ratio: 1, 4, 16, then every youngArm (64), a grown arm's only
// where it moved (news). Rule: a few early publications, then a steady
// trickle. Reason: each takes the engine's lock, which every bucket
// shares, so publishing at every power of two costs buckets that stay
// young a measurable share of Select+Observe (BenchmarkSelectObserve
// over 10,000 buckets holds it).
func milestone(n int64) bool {
	return n == 1 || n == 4 || n == 16 || n > 0 && n%youngArm == 0
}

// news reports whether rho, an arm's ratio (c its counters), is news to
// the hierarchy: while the arm is young (up to youngArm learned) or has
// not published, always; after that only when the ratio has moved at
// least a quarter of the prior's spread (0.05 in ln at the default) from
// what it last published. Rule: a grown arm publishes what changed, not what it said
// already. Reason: a sibling's prior is sure of its mean to about
// spread/√κ0 (0.45), so a smaller move changes no prior that matters,
// while each publication takes the lock every bucket shares and writes
// lines every core reads: republishing every 64 runs cost about 5% of a
// decision by handle and 8–11% from two goroutines
// (BenchmarkSelectObserve, TestRepublishOnMove). A level that moves, as a
// throttled device's, publishes at its next milestone.
func (e *engine) news(c *armCounts, rho float64) bool {
	if c.learned <= youngArm || !c.pub.OK {
		return true
	}
	return math.Abs(rho-c.pub.Rho) >= e.cfg.PriorSpread/4
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
	return b.per[arm].lnMean + e.cfg.PriorSpread*e.cfg.PriorSpread/2 - b.per[arm].lnModel
}

// corrections is the hierarchy of learned corrections (package prior)
// under the engine's lock, which also guards every family's sums and
// snapshots, the buckets' publications (armCounts.pub) and view, where
// familyView writes.
type corrections struct {
	mu   sync.Mutex
	h    prior.Hierarchy
	view prior.View
}

// pubs returns what b's arms have published (e.corr.mu held), as the
// hierarchy takes them.
func (e *engine) pubs(b *bucket) (out [MaxBackends]prior.Published) {
	for a := range e.n {
		out[a] = b.per[a].pub
	}
	return out
}

// publish tells the engine arm's ratio in b (b.mu held), at a milestone:
// the epoch counts every milestone, and the hierarchy takes the ratio
// where it is news. Rule: the epoch counts evidence learned, not
// publications. Reason: counted as publications, it doubled more slowly
// once grown arms published only news, young arms re-derived their
// priors less often, and thompson's regret against the per-shape oracle
// with the CPU's figures 30× optimistic rose from 0.98% to 2.37% (eval
// TestShapesLearnApart, seeds 1-10).
func (e *engine) publish(b *bucket, arm int) {
	if b.parent != nil { // its parent publishes what it learns (newShape)
		if b.per[arm].learned == 1 && b.epoch != math.MaxUint64 {
			b.epoch = 0
		}
		return
	}
	e.epoch.add()
	rho := e.rho(b, arm)
	if !e.news(&b.per[arm], rho) {
		return
	}
	now := prior.Published{Rho: rho, OK: true}
	e.corr.mu.Lock()
	old := b.per[arm].pub
	pubs := e.pubs(b)
	b.per[arm].pub = e.corr.h.Publish(b.fam, b.class, pubs[:e.n], arm, old, now)
	e.corr.mu.Unlock()
	if !old.OK && b.epoch != math.MaxUint64 {
		b.epoch = 0 // a new arm of b's has data: refresh at its next Select
	}
}

// refresh re-derives the priors of b's young arms (b.mu held) when the
// evidence has moved on since b last did: when the engine's epoch has
// more than doubled, or an arm of b's has published for the first time (which
// zeroes b.epoch). Rule: a bucket refreshes O(log publishes) times.
// Reason: refreshing at every publish anywhere makes every Select of
// 10,000 young buckets re-derive priors (BenchmarkSelectObserve holds
// the cost).
func (e *engine) refresh(b *bucket) {
	if b.epoch == math.MaxUint64 {
		return
	}
	ep, moved := e.epoch.above(2 * b.epoch)
	if !moved {
		return
	}
	b.epoch = ep
	b.bb.Settle(&e.cfg) // what the arms owe is owed toward their old priors
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
		p := e.derivedPrior(b, a, fam)
		if b.per[a].learned == 0 {
			b.bb.Arms[a] = p
			b.per[a].trialMean = e.trialCost(b, a, p)
		} else if r := bandit.Rebase(b.bb.Priors[a], b.bb.Arms[a], p); validPosterior(r) {
			b.bb.Arms[a] = r
		} else {
			continue
		}
		b.bb.Priors[a] = p
	}
	e.corr.mu.Unlock()
	b.bb.Changed()
}

// familyView returns what b's family has published, b's own publications
// left out, from the family's snapshot (prior.Family.ViewInto), in
// e.corr.view: e.corr.mu held, until it is released.
func (e *engine) familyView(b *bucket) *prior.View {
	pubs := e.pubs(b)
	b.fam.ViewInto(b.class, pubs[:e.n], &e.corr.view)
	return &e.corr.view
}

// trialCost is what a forced trial of arm a (no data in b) is budgeted
// at (e.corr.mu held): its prior mean p, but at most the model's estimate
// while fewer than trialEvidence buckets have measured a. Evidence that
// thin may hasten a trial, not forbid it: one bucket's run of a, perhaps
// a spike, priced every other bucket's trial out of reach for good
// (TestSpikeFirstRun).
func (e *engine) trialCost(b *bucket, a int, p bandit.NormalGamma) float32 {
	m := p.MeanUs()
	if e.corr.h.All.Arm[a].N < trialEvidence {
		m = math.Min(m, math.Exp(b.per[a].lnModel))
	}
	return float32(m)
}

// crossMu returns the mean of the prior arm a would take in b without a
// run of its own there (crossRho): a doubted first run's refresh may have
// moved b's prior to that run (b.mu held; it takes e.corr.mu).
func (e *engine) crossMu(b *bucket, a int) float64 {
	e.corr.mu.Lock()
	rho, _ := e.crossRho(b, a, e.familyView(b))
	e.corr.mu.Unlock()
	return bandit.NewPriorLn(b.per[a].lnModel+rho, e.cfg.PriorStrength, e.cfg.PriorSpread).Mu
}

// derivedPrior returns arm a's prior in b: the model's estimate corrected
// by priorRho (b.mu and e.corr.mu held), worth shapeStrength.
func (e *engine) derivedPrior(b *bucket, a int, fam *prior.View) bandit.NormalGamma {
	return bandit.NewPriorLn(b.per[a].lnModel+e.priorRho(b, a, fam), e.shapeStrength(b, a), e.cfg.PriorSpread)
}

// shapeDevWeight is the weight of a shape's newest level in its parent's
// shapeDev: a moving mean over about four shapes, which starts from the
// default prior's spread (PriorSpread²/PriorStrength).
const shapeDevWeight = 0.25

// shapeStrength returns κ0 of arm a's prior in b (b.mu held): the
// configured one, but in a shape's bucket, while a has not run there,
// PriorSpread² over the mean square of how far a's first level in the
// parent's other shapes fell from the prior it had there (shapeDev),
// within [PriorStrength, MaxPriorStrength]. Rule: a shape's prior is as
// sure of the parent's level as the parent's shapes have shown it to be
// (TestShapePriorFromShapes). Reason: a prior worth 0.2 runs drew a CPU
// 2× slower than an iGPU in new expert shapes that every earlier shape
// had run at the parent's level (eval OffloadTargets, igpu prompt 5,000:
// 1.013× lru before, 1.006× after); where shapes differ it stays as wide.
func (e *engine) shapeStrength(b *bucket, a int) float64 {
	k := e.cfg.PriorStrength
	if b.parent == nil || b.per[a].learned > 0 {
		return k
	}
	v := float64(math.Float32frombits(b.parent.per[a].shapeDev.Load()))
	if v == 0 {
		return k
	}
	return min(max(e.cfg.PriorSpread*e.cfg.PriorSpread/v, k), bandit.MaxPriorStrength)
}

// firstShapeLevel hands shapeLevel arm's first level in shape b, once
// it has one (b.mu held; doubted: the run just learned resolved a doubt):
// a first run not doubted, against the prior it ran under; the run that
// resolved a doubt, forgotten or confirmed, against crossMu.
func (e *engine) firstShapeLevel(b *bucket, arm int, doubted bool) {
	if b.doubt.Has(arm) || b.loaded.Has(arm) {
		return
	}
	switch n := b.per[arm].learned; {
	case doubted && n <= 2:
		e.shapeLevel(b, arm, e.crossMu(b, arm))
	case !doubted && n == 1:
		e.shapeLevel(b, arm, b.bb.Priors[arm].Mu)
	}
}

// shapeLevel folds into the parent's shapeDev how far arm's first level
// in shape b (its own mean: a first run, or the run that resolved a
// doubted one) fell from mu, the prior's mean it had before any run of
// its own (b.mu held).
func (e *engine) shapeLevel(b *bucket, arm int, mu float64) {
	d := b.per[arm].lnMean - mu
	dev := &b.parent.per[arm].shapeDev
	for {
		old := dev.Load()
		v := float64(math.Float32frombits(old))
		if old == 0 {
			v = e.cfg.PriorSpread * e.cfg.PriorSpread / e.cfg.PriorStrength
		}
		v += (d*d - v) * shapeDevWeight
		if dev.CompareAndSwap(old, math.Float32bits(float32(max(v, 1e-12)))) {
			return
		}
	}
}

// worthTrial reports whether a forced trial of arm a (no data in b) may
// still pay (b.mu held; it takes e.corr.mu): not when, for an arm r that
// b has measured and at least trialEvidence buckets measured with a, the
// learned ratio between them (prior.Hierarchy.PairRho, on top of their
// models' ratio) puts a more than trialZ standard deviations of that
// ratio behind r.
// What the other buckets learned then says, firmly, that a loses here (a
// CPU 30× slower than three GPUs, StarPU's mirage models). A ratio that varies between buckets (two CPU kernels whose
// winner turns with the shape, bench/peer) keeps the trial; a model
// alone never stops one (TestTrialBounded); Thompson draws can still pick
// a. It is asked when the trial is within budget, so with the evidence
// of that moment.
func (e *engine) worthTrial(b *bucket, a int) bool {
	h := &e.corr.h
	cl := h.Class(b.fam.Class)
	e.corr.mu.Lock()
	defer e.corr.mu.Unlock()
	fam := e.familyView(b)
	var held [MaxBackends]prior.Published
	up := e.parentPubs(b, &held)
	own := h.OwnRho(a, up, cl, fam)
	for r := range e.n {
		if r == a || b.per[r].learned == 0 || h.All.Pair[a][r].N < trialEvidence {
			continue
		}
		// ln of a's cost over r's, as the learned ratio predicts it.
		behind := b.per[a].lnModel - b.per[r].lnModel + h.PairRho(a, r, own, up, cl, fam)
		if behind > trialZ*math.Sqrt(h.PairSpread(a, r, cl, fam)) {
			return false
		}
	}
	return true
}

// parentPubs returns, in held, what b's parent published (e.corr.mu
// held) when b is a shape's bucket, nil for a bucket.
func (e *engine) parentPubs(b *bucket, held *[MaxBackends]prior.Published) []prior.Published {
	if b.parent == nil {
		return nil
	}
	*held = e.pubs(b.parent)
	return held[:e.n]
}

// priorRho returns the ρ of arm a's prior in b (b.mu and e.corr.mu held):
// its own measured level, the data rather than a model of it, once a has
// run in b; but one run more than trialZ standard deviations slower than
// what the rest says (crossRho) is taken for a spike, and the rest
// stands. A spike only slows a run, and as the arm's own level it was
// the prior with the run again on top, which held the arm at the spike's
// cost for good (TestSpikeFirstRun).
func (e *engine) priorRho(b *bucket, a int, fam *prior.View) float64 {
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
// Its own ratio elsewhere (the hierarchy's OwnRho) stands until buckets
// that measured both a and an arm r that b has measured say how the two
// compare: then ρ_r(b) + δ(a, r), weighted by how many such buckets there
// are (against the arm's own spread), since b's own ratio on r carries
// over to a only in so far as the model's error is shared, which those
// buckets show.
func (e *engine) crossRho(b *bucket, a int, fam *prior.View) (rho, variance float64) {
	h := &e.corr.h
	cl := h.Class(b.fam.Class)
	var held [MaxBackends]prior.Published
	up := e.parentPubs(b, &held)
	own := h.OwnRho(a, up, cl, fam)
	ownVar := h.ArmSpread(a, cl, fam)
	sum, weight := prior.Clamp(own)/ownVar, 1/ownVar
	noise := e.cfg.PriorSpread * e.cfg.PriorSpread
	for r := range e.n {
		n := b.per[r].learned
		if r == a || n == 0 {
			continue
		}
		d := h.PairRho(a, r, own, up, cl, fam)
		v := h.PairSpread(a, r, cl, fam) + noise/float64(min(n, youngArm))
		sum += (e.rho(b, r) + d) / v
		weight += 1 / v
	}
	return sum / weight, 1 / weight
}

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
		cost := float64(b.per[a].trialMean)
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
		b.per[a].trialMean = float32(math.Inf(1)) // until a refresh re-derives it
	}
	return 0, false
}

// The hierarchy's arrays hold every arm: MaxBackends and prior.MaxArms
// are one number (a difference below zero does not compile as a uint).
const _ = uint(prior.MaxArms-MaxBackends) + uint(MaxBackends-prior.MaxArms)

// doubtRun judges run y (ln µs) of arm in shape's bucket b (b.mu held)
// before b learns it. Rule: an arm's first run here more than trialZ
// standard deviations (of its prior's predictive) slower than the prior
// that b's parent measured is doubted, and the arm runs once more at its
// next Select (engine.choose); if the first run was that much slower
// than this one too, it is forgotten, else both stand. Reason: one spike
// as the arm's whole evidence here, against a prior worth κ0 = 0.2 runs,
// kept a shape on a CPU 2× slower for about 1,400 ops
// (TestSpikeFirstShapeRun); the second run is judged against the first,
// not the prior, which a refresh may have moved to the first run's level
// meanwhile (TestSlowFirstShapeRunConfirmed).
func (e *engine) doubtRun(b *bucket, arm int, y float64) {
	a, p := Backend(arm), b.bb.Priors[arm]
	far := trialZ * math.Sqrt(p.Variance()*(1+1/p.Kappa))
	switch {
	case b.doubt&a != 0:
		b.doubt &^= a
		// A shape's own bucket learns each run as it is (no shift), so the
		// arm's measured mean is still its first run.
		if b.per[arm].learned == 1 && b.per[arm].lnMean-y > far { // the first run was the exception
			b.bb.Arms[arm] = p
			b.per[arm].learned, b.per[arm].lnMean = 0, 0
			b.bb.Changed()
		}
	case y > p.Mu+far && b.per[arm].learned == 0 && b.seen.Has(arm) && !b.loaded.Has(arm):
		b.doubt |= a
	}
}
