package adaptive

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/adaptsched/adaptsched/adaptive/cost"
	"github.com/adaptsched/adaptsched/adaptive/prior"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/internal/spin"
	"github.com/adaptsched/adaptsched/kernels"
)

// engine is the Scheduler's bucket logic (DESIGN.md § The bandit,
// § Priors): priors from the roofline model corrected by what other
// buckets measured (prior.go), bandit.Bucket for the Thompson choice
// with hysteresis, discounting and change detection, and the reasons and
// counters around them. Its methods on a bucket expect the bucket's mutex
// held by the caller.
type engine struct {
	cfg   bandit.Config // validated
	n     int           // arms
	model [MaxBackends]cost.Roofline
	seed  uint64
	// warmup holds the arms whose first run in a bucket is a device's
	// warm-up (GPUs): see observe.
	warmup Mask

	famMu sync.Mutex
	fams  map[string]*prior.Family
	// picksOver holds the decisions by arm and reason that buckets' 16-bit
	// counters handed over when full (record).
	picksOver [MaxBackends][NumReasons]atomic.Int64
	// corr holds the learned corrections above a family, and epoch counts
	// what buckets have published into them (prior.go).
	corr  corrections
	epoch epochCounter
	// The slabs that alloc hands buckets, posteriors and counters out of.
	slab      []bucket
	ngSlab    []bandit.NormalGamma
	cntSlab   []armCounts
	stateSlab []bandit.ArmState
}

func newEngine(cfg bandit.Config, models []cost.Roofline, warmup Mask, seed uint64) *engine {
	e := &engine{cfg: cfg, n: len(models), warmup: warmup, seed: seed, fams: map[string]*prior.Family{}}
	copy(e.model[:], models)
	return e
}

// bucket is one bucket's state: the bandit, its random source and its
// counters, under one mutex. Each bucket is its own shard: it has its own
// lock and its own PCG source, seeded from the scheduler's seed and the
// bucket's name, so concurrent Selects of different buckets never contend
// and a bucket's draws do not depend on what other goroutines do.
type bucket struct {
	// The fields one Select and Observe work on come first, up to epoch:
	// 256 bytes, four cache lines, which prefetch fetches. Each also
	// reads name and fb, in the fifth line: prefetching that one
	// too measured no change (BenchmarkSelectObserve's handle case). A
	// bucket is a whole number of lines (TestBucketLayout), so that
	// neighbours in a slab never share one.
	// Rule: the posteriors and priors (bb.Arms, bb.Priors) and the
	// counters (per) are exactly n long, from the engine's slabs
	// (engine.alloc), not arrays of MaxBackends inline. Reason: inline, a
	// bucket of 2 arms spans more than three times the bytes it uses, and
	// a loop over 10,000 buckets walks that much more memory
	// (BenchmarkSelectObserve, 10,000 buckets, holds it). The rand.Rand
	// around the PCG lives on each Select's stack.
	mu  spin.Mutex
	bb  bandit.Bucket
	pcg rand.PCG
	per []armCounts
	// seen holds the arms with data (observed, or loaded from the store).
	seen Mask
	// warmed holds the warm-up arms whose first run in the bucket has
	// been set aside (engine.observe).
	warmed Mask
	// queued: the bucket waits for Changes, from its first change after
	// the last Changes; next links it on the Scheduler's stack. Observe
	// reads it on every call, so it sits in the hot lines.
	queued bool
	// isShape: the bucket is a shape's (parent is set), read where the
	// hot fields are.
	isShape bool
	// doubt holds the arms of a shape's bucket whose first run there was a
	// suspected spike, run once more at their next Select (doubtRun).
	doubt Mask
	id    BucketID
	// shapes counts the shapes the cache holds for the bucket
	// (shard.add): from two on, a shape seen often enough learns on its
	// own (Scheduler.shapeBucket).
	shapes atomic.Int32
	// epoch is the engine's epoch at the bucket's last prior refresh,
	// which every Select reads (prior.go): in the cold lines it costs a
	// memory miss a Select over 10,000 buckets.
	epoch uint64

	class int
	name  string
	fam   *prior.Family
	// parent is the bucket of a shape's bucket (newShape), nil for a
	// bucket; own holds the arms of a shape's bucket with evidence of its
	// own (observed here, or its own stored posterior), which Changes
	// hands out.
	parent *bucket
	own    Mask
	// loaded holds the arms whose posterior or prior holds evidence from
	// elsewhere (the store's warm start, a fleet's Fold), which prior.go
	// leaves alone.
	loaded Mask
	// known is seen|warmed of a bucket (share), which its shapes' buckets
	// read without its lock (engine.inherit).
	known atomic.Uint32
	next  *bucket // the Scheduler's stack of queued buckets (Changes)
	// fb is the Fold's record of this bucket (nil without a Fold): the
	// foreign evidence that Select probes and Observe checks (verify.go).
	fb *foldBucket
}

// armCounts is what one arm of a bucket holds beside its posterior:
// every op run (ops, timeUs), those the posterior learned from (learned:
// all but a warm-up run), the decisions by reason (picks: one per
// Select), its model and trial cost. Rule: per-arm data lives here, n
// long from the engine's slab, not in MaxBackends arrays in the bucket.
// Reason: a bucket of 2 arms then holds 2 arms' worth
// (BenchmarkSelectObserve's 1M case reports B/bucket).
type armCounts struct {
	lnModel   float64 // ln of the arm's uncorrected model estimate, µs
	collected int64   // learned when Changes last handed the arm out
	ops       int64
	timeUs    float64
	learned   int64
	lnMean    float64            // mean of the learned ln µs (bucket.learnLn)
	pub       prior.Published    // what the engine was last told (under engine.corr.mu)
	picks     [NumReasons]uint16 // since the last overflow into engine.picksOver
	// trialMean is the arm's posterior mean µs while it has no data, the
	// predicted cost of its trial (engine.trial), kept so that a Select
	// takes no exponential for it; beside picks, it takes no padding.
	trialMean float32
	// switchesTo counts the bucket's switches to the arm: 32 bits, as a
	// switch needs the posteriors to cross the hysteresis margin, far
	// rarer than ops.
	switchesTo uint32
	// shapeDev is, in a bucket with shapes of their own, the float32 bits
	// of the mean square of how far the arm's first level in each shape
	// fell from the prior it had there (engine.shapeLevel, read by
	// engine.shapeStrength); 0 until one has.
	shapeDev atomic.Uint32
}

// newBucket builds a bucket of family fam whose arms start from the cost
// model's estimate of an op of work w, corrected by what other
// buckets measured (engine.derivedPrior).
func (e *engine) newBucket(id BucketID, name, fam string, opClass kernels.Class, class int, w kernels.Work) *bucket {
	e.famMu.Lock()
	f := e.fams[fam]
	if f == nil {
		f = &prior.Family{Class: opClass}
		e.fams[fam] = f
	}
	b := e.alloc()
	e.famMu.Unlock()
	e.setUp(b, id, name, f, class, w, nil)
	return b
}

// newShape builds the bucket of one shape of bucket p (a shape seen often
// enough to learn on its own, Scheduler.shapeBucket) that does flops and
// bytes of work. Its priors are p's: what p measured of an arm, at this
// shape's model (engine.priorRho reads p's published ratios), and what p
// holds from the store or a fleet as it is. Its observations also go to
// p (Scheduler.Observe), which so pools what its shapes teach; it
// publishes nothing itself, so that nothing is counted twice.
func (e *engine) newShape(p *bucket, name string, w kernels.Work) *bucket {
	e.famMu.Lock()
	c := e.alloc()
	e.famMu.Unlock()
	c.parent, c.isShape = p, true
	p.mu.Lock()
	p.bb.Settle(&e.cfg)
	// What p knows counts as known here (no forced trial, no warm-up set
	// aside: the device ran this kernel), now and as p learns more
	// (engine.inherit), but only the shape's own evidence (own) is stored
	// under its name.
	c.seen, c.loaded = p.seen|p.warmed, p.loaded
	var held [MaxBackends]bandit.NormalGamma
	var fb *foldBucket // the Fold's record of c, where p has one
	if p.fb != nil {
		fb = &foldBucket{b: c}
	}
	for a := range e.n {
		d := e.lnModel(a, w) - p.per[a].lnModel
		if fb != nil {
			fb.shift[a] = d
		}
		if p.loaded.Has(a) { // p's evidence, moved to this shape's model
			held[a] = p.bb.Arms[a]
			held[a].Mu += d
			if fb != nil && p.fb.folded[a] != (bandit.Stats{}) {
				// The fleet's part stays the fleet's (Fold.addShape):
				// the base is p's without it.
				fb.base[a] = p.fb.base[a].With(p.bb.Arms[a].Since(p.bb.Priors[a]))
				fb.base[a].Mu += d
				fb.folded[a] = p.fb.folded[a]
			}
		}
	}
	p.mu.Unlock()
	e.setUp(c, p.id, name, p.fam, p.class, w, &held)
	if fb != nil {
		for a := range e.n {
			if fb.folded[a] == (bandit.Stats{}) {
				fb.base[a] = c.bb.Priors[a]
			}
		}
		c.fb = fb
	}
	return c
}

// lnModel returns ln of arm a's model estimate, µs, of an op of work w.
func (e *engine) lnModel(a int, w kernels.Work) float64 {
	return math.Log(e.model[a].ComputeUs(float64(w.FLOPs), float64(w.Bytes())))
}

// setUp fills a bucket from alloc: identity, random source, model and
// priors (derivedPrior, or held[a] for an arm in b.loaded).
func (e *engine) setUp(b *bucket, id BucketID, name string, f *prior.Family, class int, w kernels.Work, held *[MaxBackends]bandit.NormalGamma) {
	b.id, b.name, b.class, b.fam = id, name, class, f
	h := fnv.New64a()
	h.Write([]byte(name))
	b.pcg = *rand.NewPCG(e.seed, h.Sum64())

	for a := range e.n {
		b.per[a].lnModel = e.lnModel(a, w)
	}
	b.epoch = e.epoch.load()
	priors := b.bb.Priors
	e.corr.mu.Lock()
	view := e.familyView(b)
	for a := range e.n {
		if held != nil && b.loaded.Has(a) {
			priors[a] = held[a]
		} else {
			priors[a] = e.derivedPrior(b, a, view)
		}
		b.per[a].trialMean = e.trialCost(b, a, priors[a])
	}
	e.corr.mu.Unlock()
	copy(b.bb.Arms, priors)
	b.bb.Incumbent = -1 // the rest of b.bb is alloc's (zero, and its slabs)
	b.bb.Detector = bandit.CUSUM{K: e.cfg.CUSUMK, H: e.cfg.CUSUMH}
}

// prefetch starts loading, all at once, the cache lines of b that Select
// and Observe touch with n arms: the header, then the posteriors and
// priors, the counters and the bandit's arm states in their slabs (their
// addresses are in the header). Out of cache, each is otherwise fetched in turn as the code
// reaches it, one memory latency after another (BenchmarkSelectObserve,
// 10,000 buckets).
func (b *bucket) prefetch(n int) {
	prefetch(unsafe.Pointer(b), unsafe.Offsetof(b.epoch)+unsafe.Sizeof(b.epoch))
	prefetch(unsafe.Pointer(unsafe.SliceData(b.bb.Arms)), uintptr(2*n)*unsafe.Sizeof(b.bb.Arms[0]))
	prefetch(unsafe.Pointer(unsafe.SliceData(b.per)), uintptr(n)*unsafe.Sizeof(b.per[0]))
	st := b.bb.State()
	prefetch(unsafe.Pointer(unsafe.SliceData(st)), uintptr(len(st))*unsafe.Sizeof(bandit.ArmState{}))
}

// warm installs a posterior loaded from the store as arm a's.
func (b *bucket) warm(a int, p bandit.NormalGamma) {
	b.bb.Arms[a] = p
	b.bb.Changed()
	b.seen |= Backend(a)
	b.loaded |= Backend(a)
	b.own |= Backend(a)
	b.share()
}

// share publishes b's seen|warmed in known (b.mu held, or b not yet
// visible), after every change of either.
func (b *bucket) share() { b.known.Store(uint32(b.seen | b.warmed)) }

// inherit adds to shape's bucket b (b.mu held) the arms its parent has
// run since newShape copied its marks (bucket.known), and has b's next
// refresh re-derive its priors from what the parent measured. Rule: a
// shape's bucket forces no trial of, and sets aside no warm-up run of,
// an arm its parent had run when the decision was made
// (Scheduler.decideInto calls it first). Reason: copied once, the marks
// had a shape made before its parent's first GPU runs try the GPU twice
// more, the first run not learned from (TestShapeInheritsSeen). An arm
// the parent first runs after a decision reaches the next one, and that
// decision's Observe of it (bucket.parentRan): the choice alone is stale.
func (e *engine) inherit(b *bucket) {
	m := b.seen | Mask(b.parent.known.Load())
	if m == b.seen {
		return
	}
	b.seen = m
	if b.epoch != math.MaxUint64 {
		b.epoch = 0
	}
}

// parentRan reports whether b is a shape's bucket whose parent has run
// an arm of a (bucket.known) that b has not inherited: the parent ran it
// after b's decision. Rule: the Observe of a run on such an arm first
// inherits and refreshes (engine.observe), so that only the decision was
// stale. Reason: judged as the decision saw it, the run was set aside as
// the GPU's warm-up though the parent's came first, a spike escaped
// doubt, and the parent's shapeDev took the run against a prior not its
// own (TestShapeObserveAfterParentsFirstRun).
func (b *bucket) parentRan(a Mask) bool {
	return b.isShape && Mask(b.parent.known.Load())&a != 0
}

// kept returns the arms of b the store keeps: those with data, and of a
// shape's bucket, with evidence of its own.
func (b *bucket) kept() Mask {
	if b.isShape {
		return b.own
	}
	return b.seen
}

// choice is what choose decided.
type choice struct {
	arm      int
	reason   Reason
	switched bool
}

// choose runs the bandit over the allowed arms (b.mu held). extra holds
// each arm's predicted transfer in µs (nil: none), copies the part of it
// that copies weights (nil: none; bandit.Bucket.ChooseCopies); est
// receives each allowed arm's sampled cost (NaN for the others). With a
// single allowed arm among several nothing is sampled and the reason is
// Unsupported.
func (e *engine) choose(b *bucket, allowed Mask, extra, copies *[MaxBackends]float64, est *[MaxBackends]float64) choice {
	all := Mask(1)<<uint(e.n) - 1
	if allowed.Count() == 1 {
		a := lowest(allowed)
		e.means(b, allowed, extra, est)
		r := Unsupported
		if e.n == 1 {
			r = e.dataReason(b, a, allowed, nil, nil, 0, false)
		}
		return choice{arm: a, reason: r}
	}
	var ext []float64
	if allowed&all != all {
		var x [MaxBackends]float64
		if extra != nil {
			x = *extra
		}
		for a := range e.n {
			if !allowed.Has(a) {
				x[a] = math.Inf(1)
			}
		}
		extra = &x
	}
	if extra != nil {
		ext = extra[:e.n]
	}
	if d := b.doubt & allowed; d != 0 {
		e.means(b, allowed, extra, est)
		return choice{arm: lowest(d), reason: Explore}
	}
	if b.seen&allowed != allowed {
		if a, ok := e.trial(b, allowed, extra); ok {
			e.means(b, allowed, extra, est)
			return choice{arm: a, reason: Explore}
		}
	}
	before := b.bb.Switches
	var cp []float64
	if copies != nil {
		cp = copies[:e.n]
	}
	arm, held := b.bb.ChooseCopies(&e.cfg, ext, cp, rand.New(&b.pcg), est[:e.n])
	for a := range e.n {
		if !allowed.Has(a) {
			est[a] = math.NaN()
		}
	}
	var r Reason
	if b.bb.Skipped() {
		r = skippedReason(b, arm, allowed, est)
	} else {
		r = e.dataReason(b, arm, allowed, extra, est, Mask(b.bb.Spared()), held)
	}
	return choice{arm: arm, reason: r, switched: b.bb.Switches != before}
}

// skippedReason classifies a decision the bandit kept without drawing
// (bandit.Bucket.Skipped) from the mean costs it left in est, the
// challengers' as of their bound: Exploit where the incumbent's is the
// lowest, else HysteresisHold. Rule: no posterior is read here. Reason:
// reading one pays its lazy discount, which a skipped decision spares
// (BenchmarkSelectObserve).
func skippedReason(b *bucket, arm int, allowed Mask, est *[MaxBackends]float64) Reason {
	if b.seen == 0 {
		return Prior
	}
	for a := range len(b.per) {
		if a != arm && allowed.Has(a) && est[a] < est[arm] {
			return HysteresisHold
		}
	}
	return Exploit
}

// dataReason classifies a bandit choice (DESIGN.md § Strategies); only
// Explore against Exploit needs the posterior means, which est holds of
// the arms in spared (bandit.Bucket.Spared).
func (e *engine) dataReason(b *bucket, arm int, allowed Mask, extra, est *[MaxBackends]float64, spared Mask, held bool) Reason {
	switch {
	case b.seen == 0:
		return Prior
	case held:
		return HysteresisHold
	case e.bestMean(b, arm, allowed, extra, est, spared):
		return Exploit
	}
	return Explore
}

// bestMean reports whether arm has the lowest posterior mean cost
// (transfer included) of the allowed arms, the lowest index winning a
// tie. A mean cost is exp(μ + E[1/τ]/2) plus the transfer: an arm that
// is no cheaper than arm in either term, or cheaper in both, is settled
// without the exponentials, which only the arms that trade one term for
// the other need. The arms in spared, which the bandit did not draw,
// are neither settled nor read: est holds their mean costs, as of their
// skip bound (bandit.Bucket.Spared). Reason: settling them, to label a
// decision that spared their draws, was a tenth of a decision with 4
// backends (BenchmarkSelectObserve's handle/4backends/serial).
func (e *engine) bestMean(b *bucket, arm int, allowed Mask, extra, est *[MaxBackends]float64, spared Mask) bool {
	b.bb.SettleArm(&e.cfg, arm)
	lnMean := func(a int) float64 { p := &b.bb.Arms[a]; return p.Mu + p.Variance()/2 }
	l := lnMean(arm)
	var x float64
	if extra != nil {
		x = extra[arm]
	}
	c := math.NaN() // arm's mean cost, once needed
	for a := range e.n {
		if a == arm || !allowed.Has(a) {
			continue
		}
		if spared.Has(a) {
			if c != c {
				c = b.bb.Arms[arm].MeanUs() + x
			}
			if est[a] < c || est[a] == c && a < arm {
				return false
			}
			continue
		}
		b.bb.SettleArm(&e.cfg, a)
		la, xa := lnMean(a), 0.0
		if extra != nil {
			xa = extra[a]
		}
		switch {
		case la > l && xa >= x || la >= l && xa > x || la == l && xa == x && a > arm:
			continue // no cheaper
		case la <= l && xa <= x:
			return false // as cheap or cheaper, and first on a tie
		}
		if c, ca := b.bb.Arms[arm].MeanUs()+x, b.bb.Arms[a].MeanUs()+xa; ca < c || ca == c && a < arm {
			return false
		}
	}
	return true
}

// means writes each allowed arm's posterior mean cost (transfer included)
// into est, NaN for the others: the estimates of a decision that did not
// sample.
func (e *engine) means(b *bucket, allowed Mask, extra *[MaxBackends]float64, est *[MaxBackends]float64) {
	b.bb.Settle(&e.cfg)
	for a := range e.n {
		if !allowed.Has(a) {
			est[a] = math.NaN()
			continue
		}
		est[a] = b.bb.Arms[a].MeanUs()
		if extra != nil {
			est[a] += extra[a]
		}
	}
}

// record counts a decision's telemetry (b.mu held). Rule: a bucket
// counts its picks in 16 bits and hands a full counter to the engine's
// totals (picksOver), an atomic add once in 65,535 decisions. Reason: a
// bucket of 2 arms then holds 120 bytes fewer (BenchmarkSelectObserve's
// 1M case, B/bucket), and the totals stay exact (TestPicksOverflow).
func (e *engine) record(b *bucket, arm int, r Reason, switched bool) {
	if c := &b.per[arm].picks[r]; *c == math.MaxUint16 {
		e.picksOver[arm][r].Add(int64(*c))
		*c = 0
	}
	b.per[arm].picks[r]++
	if switched {
		b.per[arm].switchesTo++
	}
}

// observe folds a measured compute duration of us µs on arm into the
// bucket (b.mu held) and reports a change alarm.
//
// The first run of a warm-up arm (a GPU) in a bucket with no data for it
// is counted but not learned from: it pays for loading the kernel's
// module, the library's heuristics and the first touch of its workspace,
// and as the arm's whole evidence it would keep the GPU away (StarPU
// discards the first sample for the same reason; cmd/infer
// TestSimPlacement holds the figure). Later first runs of new shapes are
// learned from: by then the arm's evidence dilutes them.
//
// shift is ln of the model's estimate of the op's shape against b's own
// (0 for b's first shape, or a shape's own bucket): b's measured ratio to
// its model (learnLn, rho) is taken against the op's shape.
func (e *engine) observe(b *bucket, arm int, us, shift float64) (alarm, learned bool) {
	b.per[arm].ops++
	b.per[arm].timeUs += us
	if a := Backend(arm); e.warmup&a != 0 && (b.seen|b.warmed)&a == 0 && !b.parentRan(a) {
		b.warmed |= a
		b.share()
		return false, false
	}
	y := bandit.LnUs(us)
	var doubted bool
	if b.isShape {
		if !b.seen.Has(arm) && b.parentRan(Backend(arm)) { // since b's decision
			e.inherit(b)
			e.refresh(b)
		}
		doubted = b.doubt.Has(arm)
		e.doubtRun(b, arm, y)
	}
	alarm = b.bb.ObserveLn(&e.cfg, arm, y)
	first := !b.seen.Has(arm)
	b.seen |= Backend(arm)
	b.per[arm].learned++
	b.learnLn(arm, y-shift)
	if b.isShape {
		b.own |= Backend(arm)
		e.firstShapeLevel(b, arm, doubted)
	}
	if milestone(b.per[arm].learned) {
		e.publish(b, arm)
	}
	if first { // after publish, whose ratio a shape that inherits it reads
		b.share()
	}
	return alarm, true
}

// lowest returns the index of m's lowest backend bit.
func lowest(m Mask) int {
	for a := range MaxBackends {
		if m.Has(a) {
			return a
		}
	}
	return -1
}
