package adaptive

import (
	"math"
	"sync"

	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/learned"
)

// Fold is a Scheduler's link to evidence learned elsewhere: other machines
// of the same kind (package fleet) whose statistics are folded into the
// priors (DESIGN.md § Persistence). Get it with Scheduler.Fold before the
// first Select. This Scheduler's own evidence leaves it with its changes
// (Scheduler.Changes, learned.Change.Own).
//
// For each bucket and backend the Fold keeps the base prior (the cost
// model's, as the bucket was made) and the foreign evidence last set; the
// arm's prior is the base updated by the foreign evidence, and the arm's
// posterior is that prior updated by what this Scheduler learned itself
// (its own evidence, discounted as the bandit discounts it). Foreign
// evidence is never discounted away: discounting pulls a posterior back
// toward its prior, which holds it. So, with Discount 1, the posterior is
// exactly the base prior updated by the pooled observations of every node.
// A shape's own bucket (engine.newShape) folds what its bucket folds,
// moved to the shape's model (Fold.addShape).
//
// With Discount γ < 1 the foreign evidence enters the prior scaled down
// to at most foldMemory/(1−γ) observations (100 at the default γ = 0.999),
// its mean and spread kept: a hundred nodes' evidence would otherwise
// outweigh the 1/(1−γ) observations this Scheduler remembers a
// hundredfold, and a change on this machine (a throttled GPU, a busy
// CPU), which the change detector answers by widening the arm back to
// its prior, would never be learned. Evidence reports it unscaled.
//
// A bucket's posteriors loaded from the store are this node's own
// evidence (Changes hand the store nothing of the fleet's), and stay
// under the foreign evidence. The foreign evidence is a prior only while
// this node's own measurements agree with it (verify.go): Select probes
// arms the fleet says are slow, Observe checks, and a contradiction sets
// it all aside.
//
// The Scheduler's hot path (Select, Observe) sees the Fold only through
// the bucket's record of it, under the bucket's lock:
// Foreign changes the priors under the buckets' locks. Its methods are
// safe for concurrent use.
type Fold struct {
	s   *Scheduler
	cap float64 // the most foreign observations a prior holds
	mu  sync.Mutex
	// foreign holds the evidence last set for each key, for buckets made
	// later; buckets and byName the buckets made so far.
	foreign map[learned.Key]bandit.Stats
	buckets []*foldBucket
	byName  map[string]*foldBucket
	v       verifier // own measurements against the foreign evidence (verify.go)
}

// foldBucket is what the Fold keeps of one bucket, or of a shape's own
// bucket (engine.newShape), which holds its parent's foreign evidence.
type foldBucket struct {
	b *bucket
	// base is each arm's prior before foreign evidence (while folded is
	// zero, the bucket's own prior, which the engine may re-derive:
	// prior.go), folded the foreign evidence in its prior.
	base   [MaxBackends]bandit.NormalGamma
	folded [MaxBackends]bandit.Stats
	// held is foreign evidence too far from the cost model to fold in
	// before this node's measurements agree with the fleet's (verify.go).
	held [MaxBackends]bandit.Stats
	// shift is, of a shape's bucket, ln of its model over its parent's
	// per arm: the parent's evidence enters it moved by that (newShape).
	shift [MaxBackends]float64
	// shapes are the records of the bucket's shapes' own buckets, under
	// the bucket's lock: each folds what the bucket folds (rebase).
	shapes []*foldBucket
}

// foldMemory is the most foreign evidence an arm's prior holds, as a
// fraction of the bandit's memory 1/(1−γ) (Fold).
const foldMemory = 0.1

// Fold returns the Scheduler's Fold, attaching one on the first call.
// Buckets made before then keep their posteriors: what they hold beyond
// their prior counts as this Scheduler's own evidence.
func (s *Scheduler) Fold() *Fold {
	s.regMu.Lock()
	defer s.regMu.Unlock()
	if f := s.fold.Load(); f != nil {
		return f
	}
	f := &Fold{s: s, cap: math.Inf(1), foreign: map[learned.Key]bandit.Stats{}, byName: map[string]*foldBucket{}}
	if g := s.cfg.Bandit.Discount; g < 1 {
		f.cap = foldMemory / (1 - g)
	}
	f.mu.Lock()
	for _, b := range s.buckets {
		b.mu.Lock()
		f.add(b)
		b.mu.Unlock()
	}
	for _, c := range s.shapes {
		f.addShape(c)
	}
	f.mu.Unlock()
	s.fold.Store(f)
	return f
}

// made registers a bucket that bucketFor has just built (s.regMu held,
// the bucket not yet visible to other goroutines).
func (f *Fold) made(b *bucket) {
	f.mu.Lock()
	f.add(b)
	f.mu.Unlock()
}

// add registers b (f.mu and b's lock held, or b not yet visible). What
// b loaded from the store is this node's own evidence (the store keeps
// no other: Changes), and stays: the fleet never gives a node its own
// values back.
func (f *Fold) add(b *bucket) {
	fb := &foldBucket{b: b}
	b.fb = fb
	s := f.s
	b.bb.Settle(&s.e.cfg)
	for a := range s.n {
		fb.base[a] = b.bb.Priors[a]
		if st, ok := f.foreign[learned.Key{Backend: s.names[a], Bucket: b.name}]; ok && !f.v.suspended {
			f.apply(fb, a, st)
		}
	}
	f.buckets = append(f.buckets, fb)
	f.byName[b.name] = fb
}

// addShape registers shape's own bucket c under its parent's record
// (s.regMu held, with the parent registered; c's and its parent's locks
// not held): c folds what its parent folds from then on, and what the
// parent's folded evidence became since newShape read it is folded in
// now. Rule: a shape's bucket holds its parent's foreign evidence as
// foreign evidence, not as its own. Reason: kept as part of its prior,
// the fleet's claim stayed there after Foreign took it away or the
// Fold set it aside, and Changes handed it to the store as the shape's
// own evidence (TestFoldShapes).
func (f *Fold) addShape(c *bucket) {
	p := c.parent
	p.mu.Lock()
	defer p.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	fb := c.fb
	if fb == nil { // made before the Fold: nothing of the fleet's in it
		c.bb.Settle(&f.s.e.cfg)
		fb = &foldBucket{b: c}
		for a := range f.s.n {
			fb.base[a] = c.bb.Priors[a]
			fb.shift[a] = c.per[a].lnModel - p.per[a].lnModel
		}
		c.fb = fb
	}
	for a := range f.s.n {
		if st := p.fb.folded[a]; fb.folded[a] != st {
			f.rebase(fb, a, st)
		}
	}
	p.fb.shapes = append(p.fb.shapes, fb)
}

// shiftStats returns st with every observation moved by d: what a
// posterior moved by d (its prior's mean too) holds beyond its prior.
func shiftStats(st bandit.Stats, d float64) bandit.Stats {
	if d == 0 {
		return st
	}
	return bandit.Stats{N: st.N, Sum: st.Sum + st.N*d, SumSq: st.SumSq + 2*d*st.Sum + st.N*d*d}
}

// rebase makes arm a's prior its base updated by st, and its posterior
// that prior updated by the arm's own evidence (f.mu and the bucket's
// lock held; of a shape's bucket, its parent's lock), and so in the
// bucket's shapes' own buckets, st moved to each shape's model. An arm
// given foreign observations has data, as one warm started from the
// store has: its decisions are Exploit or Explore, not Prior, a GPU's
// first run in the bucket is learned from (the fleet's evidence dilutes
// it), and the engine no longer re-derives its prior from the model
// (prior.go), which would drop the fleet's evidence.
func (f *Fold) rebase(fb *foldBucket, a int, st bandit.Stats) {
	b := fb.b
	bb := &b.bb
	bb.Settle(&f.s.e.cfg)
	if fb.folded[a] == (bandit.Stats{}) {
		fb.base[a] = bb.Priors[a] // as the engine last derived it
	}
	own := bb.Arms[a].Since(bb.Priors[a])
	in := st
	if st.N > f.cap {
		k := f.cap / st.N
		in = bandit.Stats{N: f.cap, Sum: st.Sum * k, SumSq: st.SumSq * k}
	}
	bb.Priors[a] = fb.base[a].With(shiftStats(in, fb.shift[a]))
	bb.Arms[a] = bb.Priors[a].With(own)
	bb.Changed()
	fb.folded[a] = st
	if st.N > 0 {
		b.seen |= Backend(a)
		b.loaded |= Backend(a)
	} else {
		b.loaded &^= Backend(a)
		// Rule: an arm the fleet's evidence leaves with no data of its
		// own (no run learned here, no stored posterior, and of a
		// shape's bucket none its parent had) has none, as before it
		// came. Reason: kept as data, the GPU's first run here was
		// learned as its whole evidence, not set aside as its warm-up
		// (TestFoldRemovedUnseen).
		if b.per[a].learned == 0 && !b.own.Has(a) && (b.parent == nil || !(b.parent.seen | b.parent.warmed).Has(a)) {
			b.seen &^= Backend(a)
		}
		// Rule: an arm the fleet's evidence leaves reopens its bucket's
		// prior refreshes. Reason: a bucket whose arms were all loaded
		// or grown stopped refreshing for good (engine.refresh), and the
		// arm kept the model's prior as of the bucket's making however
		// much the hierarchy learned since: 50× off on a CPU the model
		// does not know (TestFoldRemovedPriorRefreshes).
		if b.epoch == math.MaxUint64 {
			b.epoch = 0
		}
	}
	b.share() // before the shapes' rebase: no shape's inherit then brings back an arm it clears
	for _, sh := range fb.shapes {
		sh.b.mu.Lock()
		f.rebase(sh, a, st)
		sh.b.mu.Unlock()
	}
}

// Foreign makes each entry's Stats the evidence from elsewhere behind
// its key's prior, replacing what was set before (a total, not an
// increment: setting the same value twice counts it once). Zero Stats
// removes it, as do Stats of no weight (N ≤ 0), whose Σy alone would move
// the prior's mean by any amount past the cap, Stats whose spread is
// wider than bandit.MaxSpreadLn (TestFoldZeroWeight) or below zero
// (TestFoldNegativeSpread), and Stats whose mean is past bandit.MaxMeanLn
// (TestFoldNoDurationsMean). A key whose bucket
// has not been made yet, or whose backend is not configured, is kept for
// when it is made. It reports how many
// arms of this Scheduler's buckets changed. The change is not handed out
// by Changes: it is the fleet's, not this Scheduler's, evidence.
func (f *Fold) Foreign(batch []learned.Foreign) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	changed := 0
	for _, e := range batch {
		if f.set(e.Key, e.Stats) {
			changed++
		}
	}
	return changed
}

// set is Foreign for one key (f.mu held).
func (f *Fold) set(k learned.Key, st bandit.Stats) bool {
	// Rule: evidence no durations give enters nothing (bandit's bounds).
	// Reasons: a mean past MaxMeanLn moved the prior's mean by any amount
	// (TestFoldNoDurationsMean); a spread wider than MaxSpreadLn kept the
	// arm explored for good (TestFoldZeroWeight), and one below zero made
	// its prior overconfident (TestFoldNegativeSpread).
	if !(st.N > 0) || !st.MeanWithin() || !st.SpreadWithin() {
		st = bandit.Stats{}
	}
	if st == (bandit.Stats{}) {
		delete(f.foreign, k)
	} else {
		f.foreign[k] = st
	}
	fb, a := f.byName[k.Bucket], f.s.index(k.Backend)
	if fb == nil || a < 0 || f.v.suspended {
		return false
	}
	fb.b.mu.Lock()
	f.apply(fb, a, st)
	fb.b.mu.Unlock()
	return true
}

// apply folds st into arm a's prior, or holds it while it is implausible
// and unverified (verify.go) (f.mu and the bucket's lock held).
func (f *Fold) apply(fb *foldBucket, a int, st bandit.Stats) {
	if !plausible(fb.b, a, st) && !f.v.verified(a) {
		fb.held[a] = st
		if fb.folded[a] != (bandit.Stats{}) {
			f.rebase(fb, a, bandit.Stats{})
		}
		return
	}
	fb.held[a] = bandit.Stats{}
	f.rebase(fb, a, st)
}

// Evidence returns the evidence behind k's posterior: own, what this
// Scheduler learned itself (its posterior since its prior), and foreign,
// what Foreign last gave. ok is false for a bucket not made yet or a
// backend not configured.
func (f *Fold) Evidence(k learned.Key) (own, foreign bandit.Stats, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fb, a := f.byName[k.Bucket], f.s.index(k.Backend)
	if fb == nil || a < 0 {
		return own, foreign, false
	}
	fb.b.mu.Lock()
	defer fb.b.mu.Unlock()
	fb.b.bb.Settle(&f.s.e.cfg)
	return fb.b.bb.Arms[a].Since(fb.b.bb.Priors[a]), f.foreign[k], true
}
