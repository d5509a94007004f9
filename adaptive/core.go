package adaptive

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/adaptsched/adaptsched/bandit"
)

// engine is the bucket logic that the Scheduler and the thompson policy
// share (DESIGN.md § The bandit, § Priors): priors from the roofline model
// corrected by neighbouring buckets, bandit.Bucket for the Thompson choice
// with hysteresis, discounting and change detection, and the reasons and
// counters around them. Its methods on a bucket expect the bucket's mutex
// held by the caller.
type engine struct {
	cfg   bandit.Config // validated
	n     int           // arms
	model [MaxBackends]roofline
	seed  uint64

	famMu sync.Mutex
	fams  map[string]*family
}

func newEngine(cfg bandit.Config, models []roofline, seed uint64) *engine {
	e := &engine{cfg: cfg, n: len(models), seed: seed, fams: map[string]*family{}}
	copy(e.model[:], models)
	return e
}

// family is one op family's buckets (an op and dtype at every size), whose
// learned corrections set the priors of new buckets.
type family struct {
	mu      sync.Mutex
	buckets []*bucket
}

// bucket is one bucket's state: the bandit, its random source and its
// counters, under one mutex. Each bucket is its own shard: it has its own
// lock and its own PCG source, seeded from the scheduler's seed and the
// bucket's name, so concurrent Selects of different buckets never contend
// and a bucket's draws do not depend on what other goroutines do.
type bucket struct {
	// The hot fields come first and the posteriors live in the bucket
	// itself (bb's slices point into arms and priors): one Select touches
	// a few adjacent cache lines, not four heap objects.
	mu     sync.Mutex
	bb     bandit.Bucket
	rng    rand.Rand
	pcg    rand.PCG
	seen   Mask  // arms with data (observed, or loaded from the store)
	obs    int64 // observations in this process
	arms   [MaxBackends]bandit.NormalGamma
	priors [MaxBackends]bandit.NormalGamma

	id    BucketID
	name  string
	class int
	fam   *family

	per     [MaxBackends]armState
	reasons [numReasons]int64
}

// armState is one arm's model figure and counters in a bucket, kept
// together so that a decision touches one cache line per arm.
type armState struct {
	lnModel float64 // ln of the uncorrected model estimate, µs
	// ratio is ln(posterior mean / model estimate), published for the
	// priors of neighbouring buckets (NaN bits: no data yet).
	ratio        atomic.Uint64
	decisions    int64
	explorations int64
	switchesTo   int64
	ops          int64
	timeUs       float64
}

var nanBits = math.Float64bits(math.NaN())

// newBucket builds a bucket whose arms start from the cost model's
// estimate of an op of flops and bytes, corrected by what the family's
// observed buckets have taught, and joins it to its family.
func (e *engine) newBucket(id BucketID, name, fam string, class int, flops, bytes float64) *bucket {
	e.famMu.Lock()
	f := e.fams[fam]
	if f == nil {
		f = &family{}
		e.fams[fam] = f
	}
	e.famMu.Unlock()

	b := &bucket{id: id, name: name, class: class, fam: f}
	h := fnv.New64a()
	h.Write([]byte(name))
	b.pcg = *rand.NewPCG(e.seed, h.Sum64())
	b.rng = *rand.New(&b.pcg)

	priors := b.priors[:e.n]
	f.mu.Lock()
	for a := range e.n {
		est := e.model[a].computeUs(flops, bytes)
		b.per[a].lnModel = math.Log(est)
		corr := f.correction(class, a)
		priors[a] = bandit.NewPrior(est*math.Exp(corr), e.cfg.PriorStrength, e.cfg.PriorSpread)
		b.per[a].ratio.Store(nanBits)
	}
	f.buckets = append(f.buckets, b)
	f.mu.Unlock()
	copy(b.arms[:], priors)
	b.bb = bandit.Bucket{Arms: b.arms[:e.n], Priors: priors, Incumbent: -1,
		Detector: bandit.CUSUM{K: e.cfg.CUSUMK, H: e.cfg.CUSUMH}}
	return b
}

// correction returns the learned ln(actual/predicted) for arm a at size
// class c from the family's observed buckets (f.mu held).
func (f *family) correction(c, a int) float64 {
	var sum, weight float64
	for _, nb := range f.buckets {
		r := math.Float64frombits(nb.per[a].ratio.Load())
		if math.IsNaN(r) {
			continue
		}
		w := neighbourWeight(c - nb.class)
		sum += w * r
		weight += w
	}
	if weight == 0 {
		return 0
	}
	return math.Max(-correctionMax, math.Min(correctionMax, sum/(weight+correctionShrink)))
}

// warm installs a posterior loaded from the store as arm a's.
func (b *bucket) warm(a int, p bandit.NormalGamma) {
	b.bb.Arms[a] = p
	b.seen |= Backend(a)
	b.publish(a)
}

// publish updates arm a's learned ratio from its posterior.
func (b *bucket) publish(a int) {
	p := &b.bb.Arms[a]
	b.per[a].ratio.Store(math.Float64bits(p.Mu + p.Variance()/2 - b.per[a].lnModel))
}

// choice is what choose decided.
type choice struct {
	arm      int
	reason   Reason
	switched bool
}

// choose runs the bandit over the allowed arms (b.mu held). extra holds
// each arm's predicted transfer in µs (nil: none); est receives each
// allowed arm's sampled cost (NaN for the others). With a single allowed
// arm among several nothing is sampled and the reason is Unsupported.
func (e *engine) choose(b *bucket, allowed Mask, extra *[MaxBackends]float64, est *[MaxBackends]float64) choice {
	all := Mask(1)<<uint(e.n) - 1
	if allowed.Count() == 1 {
		a := lowest(allowed)
		e.means(b, allowed, extra, est)
		r := Unsupported
		if e.n == 1 {
			r = e.dataReason(b, a, a, false)
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
	before := b.bb.Switches
	arm, held := b.bb.Choose(&e.cfg, ext, &b.rng, est[:e.n])
	for a := range e.n {
		if !allowed.Has(a) {
			est[a] = math.NaN()
		}
	}
	best := e.bestMean(b, allowed, extra)
	return choice{arm: arm, reason: e.dataReason(b, arm, best, held), switched: b.bb.Switches != before}
}

// dataReason classifies a bandit choice (DESIGN.md § Strategies).
func (e *engine) dataReason(b *bucket, arm, best int, held bool) Reason {
	switch {
	case b.seen == 0:
		return Prior
	case held:
		return HysteresisHold
	case arm == best:
		return Exploit
	}
	return Explore
}

// bestMean returns the allowed arm with the lowest posterior mean cost
// (transfer included). Without transfers it compares ln means and skips
// the exponentials.
func (e *engine) bestMean(b *bucket, allowed Mask, extra *[MaxBackends]float64) int {
	best, bestC := -1, math.Inf(1)
	for a := range e.n {
		if !allowed.Has(a) {
			continue
		}
		p := &b.bb.Arms[a]
		var c float64
		if extra == nil {
			c = p.Mu + p.Variance()/2
		} else {
			c = p.MeanUs() + extra[a]
		}
		if best < 0 || c < bestC {
			best, bestC = a, c
		}
	}
	return best
}

// means writes each allowed arm's posterior mean cost (transfer included)
// into est, NaN for the others: the estimates of a decision that did not
// sample.
func (e *engine) means(b *bucket, allowed Mask, extra *[MaxBackends]float64, est *[MaxBackends]float64) {
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

// record counts a decision's telemetry (b.mu held).
func (b *bucket) record(arm int, r Reason, switched bool) {
	b.per[arm].decisions++
	b.reasons[r]++
	if r == Explore {
		b.per[arm].explorations++
	}
	if switched {
		b.per[arm].switchesTo++
	}
}

// observe folds a measured compute duration of us µs on arm into the
// bucket (b.mu held) and reports a change alarm.
func (e *engine) observe(b *bucket, arm int, us float64) (alarm bool) {
	alarm = b.bb.Observe(&e.cfg, arm, us)
	b.seen |= Backend(arm)
	b.obs++
	b.per[arm].ops++
	b.per[arm].timeUs += us
	b.publish(arm)
	return alarm
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
