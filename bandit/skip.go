package bandit

import (
	"math"
	"math/bits"
	"math/rand/v2"

	"gonum.org/v1/gonum/stat/distuv"
)

// Drawing only what can change the choice (DESIGN.md § The bandit). A
// challenger c takes the bucket from incumbent i only with a sampled
// cost below th = (1−h)·(i's posterior mean cost), a copy of the op's
// own taken at face value (ChooseCopies), or when its mean is surely
// cheaper (surelyCheaper), or by a probe, as the cheapest cost of a held
// decision while probeable. c is dead where its bound holds
// (windowBound), its floor, the cost below which it falls with
// probability at most skipTail, is at least th, and its mean cannot be
// surely cheaper: drawn by inversion, its ln-mean m = F⁻¹(U), U
// uniform, is then at least ln floor whenever U ≥ skipTail, and there
// it cannot win, and matters to the choice only if it is the cheapest
// cost (held's probe coin). A challenger that may be probeable in the
// window (probed) matters only where a probe may run, so the probe's
// coin is tossed first (it is independent of the draws), and where it
// allows a probe the incumbent is drawn: only that draw says whether
// the challenger is the cheapest.
//
// One uniform decides whether any dead challenger's U falls below
// skipTail (tailDraws). Where every challenger is dead and none
// probeable, or the coin allows no probe: if none does, the decision is
// the incumbent without drawing anything else (skipKept); if one does,
// the incumbent is drawn in full, and in a bucket of two arms the
// challenger from its U by inversion, its variance from the conditional
// τ | m (drawByInversion); in a wider one each challenger whose U fell
// in its tail or whose floor is not above the incumbent's draw is drawn
// so, the others spared as below (an inversion costs microseconds:
// inverting every dead challenger was 3% of a 4-arm decision). Otherwise
// the incumbent and the live challengers are drawn in full; a dead
// challenger whose floor is above the cheapest of those costs cannot be
// the cheapest, so it is not drawn (its cost is given as its mean), a
// dead one whose floor is not is drawn in full, and one whose U fell in
// its tail by inversion. Where no dead challenger may be probed, or
// the coin allows no probe, the live ones are drawn first, and where
// none of them drew below th or may be surely cheaper or probed, and no
// dead one's U fell in its tail, the incumbent is kept undrawn
// (skipHeld). Every cost that pick or a probe reads is so distributed
// exactly as Choose's, and so is the chosen arm (TestSkipSameChoices
// and the tests beside it). The stream of draws is not Choose's: a
// seed's regret on a real table moves by up to 0.3 point with the
// stream alone, while the mean over many seeds does not move
// (BENCHMARKS.md, the rows of regret under skipped draws).
//
// The floors hold for the next skipWindow observations of the bucket
// whatever the lazy discount does to the challengers meanwhile
// (windowBound), so they are computed once per window, and again at once
// when a challenger is observed, the incumbent changes or the caller
// changes a posterior (Changed). The incumbent's side (its mean, and its
// ln-mean and variance for surelyCheaper) is read at every decision.
const (
	// skipTail is the chance, per challenger and decision, that a
	// settled bucket's decision draws in full.
	skipTail = 1e-3
	// skipWindow is how many observations a challenger's floor is
	// computed for (its discount over them at most γ^skipWindow).
	skipWindow = 64
	// maxSkipArms bounds the arms of a bucket that skips (their uniforms
	// live on the stack, their flags in a byte); a wider one always
	// draws.
	maxSkipArms = 8
)

// The probe's coin (Bucket.coin): not tossed yet, or tossed by skip.
const (
	coinUntossed = iota
	coinHeads    // a held decision probes (probeOdds)
	coinTails
)

// probeCoin reports whether a held decision probes: the coin skip
// tossed, or one tossed now, with odds 1 in probeOdds either way.
func (b *Bucket) probeCoin(r *rand.Rand) bool {
	switch b.coin {
	case coinHeads:
		return true
	case coinTails:
		return false
	}
	return r.Uint64()%probeOdds == 0
}

// What skip did.
const (
	skipNone  = iota // nothing drawn: draw as Choose does
	skipKept         // the incumbent, nothing drawn
	skipDrawn        // costs holds every cost pick reads, as Choose draws it
	skipHeld         // the incumbent, undrawn; live challengers drawn, dead ones at their mean
)

// tailAny[k] is the chance that one of k uniforms falls below skipTail.
var tailAny = func() (t [maxSkipArms + 1]float64) {
	for k := range t {
		t[k] = -math.Expm1(float64(k) * math.Log1p(-skipTail))
	}
	return t
}()

// armBound is what a challenger's posterior can be over the window:
// floor, its Thompson cost's skipTail quantile at the least (µs); lnMean
// and vmean, the least ln of its mean cost and variance of its mean
// (surelyCheaper's lc, vc); mean, its mean cost when computed (µs), for
// the skipped decision's costs. In 32 bits, each bound rounded down
// (down32), as a bucket keeps one per arm.
type armBound struct{ floor, lnMean, vmean, mean float32 }

// down32 returns the largest float32 at most x.
func down32(x float64) float32 {
	f := float32(x)
	if float64(f) > x {
		f = math.Nextafter32(f, float32(math.Inf(-1)))
	}
	return f
}

// tQuantiles[j] is the 1−skipTail quantile of Student's t with tNus[j]
// degrees of freedom, for interpolation (tQuantile).
var (
	tNus       = [...]float64{1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5, 5.5, 6, 6.5, 7, 7.5, 8, 9, 10, 12, 14, 16, 20, 24, 32, 48, 64, 96, 128, 256, 512, 1024}
	tQuantiles = quantilesAt(tNus[:])
)

// quantilesAt returns the 1−skipTail quantiles of Student's t at each
// of nus degrees of freedom.
func quantilesAt(nus []float64) []float64 {
	q := make([]float64, len(nus))
	for j, nu := range nus {
		q[j] = distuv.StudentsT{Mu: 0, Sigma: 1, Nu: nu}.Quantile(1 - skipTail)
	}
	return q
}

// tQuantile returns a 1−skipTail quantile of Student's t at least that
// of nu degrees of freedom, ok false below the table's least: the
// table interpolated linearly in the degrees, which the quantile's
// convexity in them keeps at or above it (TestTQuantile); beyond the
// table, its last. A quantile falls as the degrees rise, so the floor
// it gives is conservative.
func tQuantile(nu float64) (z float64, ok bool) {
	if !(nu >= tNus[0]) {
		return 0, false
	}
	j := len(tNus) - 1
	for tNus[j] > nu {
		j--
	}
	if j+1 < len(tNus) {
		w := (nu - tNus[j]) / (tNus[j+1] - tNus[j])
		return tQuantiles[j] + w*(tQuantiles[j+1]-tQuantiles[j]), true
	}
	return tQuantiles[j], true
}

// windowBound returns the bound on p, grown from prior, over its next
// skipWindow discounts at most (weights scaled by s in [sK, 1]); ok is
// false where no useful bound holds (a posterior too weak to take a
// variance). probe: p is probeable somewhere in the window.
//
// With the statistics n, A = Σy, B = Σy² since the prior, scaled by s:
// κ(s) = κ0 + sn and α(s) = α0 + sn/2 are linear, μ(s) = (κ0μ0 + sA)/κ(s)
// is a Möbius map, monotone: each is extreme at an end of the window.
// 2β(s) = 2β0 + κ0μ0² + f(s), f(s) = sB − (κ0μ0 + sA)²/κ(s), is
// concave (linear minus quadratic-over-linear): least at an end, and at
// most its tangent at s = 1 anywhere. The Thompson cost is at least
// exp(m), m Student's t with 2α degrees, location μ and scale
// √(β/(ακ)): its quantile is bounded with the least μ, α, κ and the
// most β.
func windowBound(p, prior NormalGamma, sK float64) (bd armBound, probe, ok bool) {
	st := p.statsSince(prior)
	k0, m0 := prior.Kappa, prior.Mu
	c := k0 * m0
	type at struct{ kappa, alpha, mu, beta float64 }
	eval := func(s float64) at {
		k := k0 + s*st.n
		mu := (c + s*st.sum) / k
		return at{k, prior.Alpha + s*st.n/2, mu, prior.Beta + (k0*m0*m0+s*st.sumSq-(c+s*st.sum)*(c+s*st.sum)/k)/2}
	}
	one, end := eval(1), eval(sK)
	if !(one.kappa > 0 && end.kappa > 0 && one.alpha > 1 && end.alpha > 1 && one.beta > 0 && end.beta > 0) {
		return armBound{}, false, false
	}
	// The builtins, as math.Min and math.Max (NaN passes through), are
	// calls on amd64.
	kLo, kHi := min(one.kappa, end.kappa), max(one.kappa, end.kappa)
	probe = windowProbe(k0, st.n, sK)
	aLo, aHi := min(one.alpha, end.alpha), max(one.alpha, end.alpha)
	muLo := min(one.mu, end.mu)
	// f'(1), for the tangent bound on β.
	u := c + st.sum
	df := st.sumSq - (2*st.sum*u*one.kappa-st.n*u*u)/(one.kappa*one.kappa)
	bHi := max(one.beta, one.beta+df*(sK-1)/2)
	bLo := min(one.beta, end.beta)
	z, ok := tQuantile(2 * aLo)
	if !ok {
		return armBound{}, false, false
	}
	return armBound{
		floor:  down32(expCapped(muLo - z*math.Sqrt(bHi/(aLo*kLo)))),
		lnMean: down32(muLo + bLo/(aHi-1)/2),
		vmean:  down32(bLo / (aHi * kHi)),
		mean:   float32(p.MeanUs()),
	}, probe, true
}

// windowProbe reports whether an arm of n observations' weight over a
// prior of κ0 may be probeable in the window: its evidence, κ − κ0
// between sK·n and n, above 0 and at most probeEvidence somewhere.
func windowProbe(k0, n, sK float64) bool {
	kLo, kHi := min(k0+n, k0+sK*n), max(k0+n, k0+sK*n)
	return kHi > k0 && kLo <= k0+probeEvidence
}

// Changed tells the bucket that the caller wrote Arms or Priors: the
// challengers' bounds are computed again before a decision skips its
// draws. Write only after Settle (see Bucket).
func (b *Bucket) Changed() { b.bounded, b.boundAt = 0, b.observed-skipWindow }

// Skipped reports whether the last Choose kept the incumbent without
// drawing its cost: its cost is then its posterior mean, and each
// challenger's its mean where Spared, else its draw.
func (b *Bucket) Skipped() bool { return b.skipped }

// Spared returns the challengers, by bit, whose cost in the last
// Choose's costs is not a draw but their mean cost (as of their bound,
// transfer included): those it did not need to draw.
func (b *Bucket) Spared() uint8 { return b.spared }

// refreshBounds computes every challenger's bound for the next
// skipWindow observations: bounded holds those that have one, probed
// those of them that may be probeable in the window.
func (b *Bucket) refreshBounds(cfg *Config) {
	b.Settle(cfg)
	sK := powInt(cfg.Discount, skipWindow)
	b.bounded, b.probed = 0, 0
	for i := range b.Arms {
		if i == b.Incumbent {
			continue
		}
		bd, probe, ok := windowBound(b.Arms[i], b.Priors[i], sK)
		if !ok {
			continue
		}
		b.state[i].bound = bd
		b.bounded |= 1 << i
		if probe {
			b.probed |= 1 << i
		}
	}
	b.boundAt = b.observed
}

// skip decides a settled bucket's choice drawing only what can change
// it (see above): skipKept where nothing needs drawing (costs holds the
// mean costs), skipHeld where the incumbent needed no draw
// (drawSomeDead), skipDrawn where costs holds what pick reads, skipNone
// where the bucket has no bounds to skip by. extra and copies are as
// for ChooseCopies.
func (b *Bucket) skip(cfg *Config, extra, copies []float64, r *rand.Rand, costs []float64) int {
	inc, h := b.Incumbent, cfg.margin()
	if inc < 0 || b.recheck > 0 || b.noSkip || !(h > 0 && h < 1) || b.state == nil || len(b.Arms) > maxSkipArms {
		return skipNone
	}
	if b.observed-b.boundAt >= skipWindow {
		b.refreshBounds(cfg)
	}
	if b.bounded == 0 {
		return skipNone
	}
	dead, live, m := b.deadArms(cfg, extra, copies, h)
	if dead&b.probed != 0 {
		// A probed challenger matters only to a probe: with the probe's
		// coin tossed first, the decisions it spares need no draw.
		b.coin = coinTails
		if r.Uint64()%probeOdds == 0 {
			b.coin = coinHeads
		}
	}
	if live == 0 && (dead&b.probed == 0 || b.coin == coinTails) {
		return b.skipAllDead(cfg, extra, r, dead, m, costs)
	}
	return b.drawSomeDead(cfg, extra, copies, r, dead, live, m, h, costs)
}

// skipAllDead is skip where every challenger is dead (dead) and none
// may be probed: skipKept, costs the mean costs (the incumbent's m),
// unless a challenger's uniform fell in its tail; then skipDrawn, the
// incumbent drawn in full and the challengers by inversion (drawDead).
func (b *Bucket) skipAllDead(cfg *Config, extra []float64, r *rand.Rand, dead uint8, m float64, costs []float64) int {
	inc := b.Incumbent
	var u [maxSkipArms]float64
	if !tailDraws(r, dead, &u) {
		for c := range b.Arms {
			costs[c] = float64(b.state[c].bound.mean) + at(extra, c)
		}
		costs[inc] = m
		b.spared = dead
		return skipKept
	}
	if len(b.Arms) == 2 {
		b.drawByInversion(cfg, extra, r, &u, costs)
		return skipDrawn
	}
	low := b.drawFull(cfg, extra, r, 1<<inc, costs)
	b.drawDead(cfg, extra, r, dead, dead, low, &u, costs)
	return skipDrawn
}

// drawSomeDead is skip where some challenger is live (live), or one
// may be probed: the incumbent and the live ones drawn in full, a dead
// one whose floor is not above the cheapest of those costs drawn in full
// too, the others (far) spared unless a uniform fell in their tail:
// skipDrawn. Where no dead one may be probed, or the probe's coin,
// tossed first, allows no probe, the live ones are drawn first: if none
// of them can take the bucket (liveHeld) and no dead one's uniform fell
// in its tail, no draw of the incumbent's can change the choice, and it
// is kept undrawn, its cost its mean m: skipHeld (in
// BenchmarkSelectObserve's settled buckets, 11.5% of the decisions with
// two backends, 18.6% with four). m and h are as for deadArms.
func (b *Bucket) drawSomeDead(cfg *Config, extra, copies []float64, r *rand.Rand, dead, live uint8, m, h float64, costs []float64) int {
	inc := b.Incumbent
	var u [maxSkipArms]float64
	var low float64
	if live != 0 && (dead&b.probed == 0 || b.coin == coinTails) {
		low = b.drawFull(cfg, extra, r, live, costs)
		if b.liveHeld(extra, copies, live, low, m, h) {
			if !tailDraws(r, dead, &u) {
				b.drawDead(cfg, extra, r, dead, 0, low, &u, costs) // each its mean
				costs[inc] = m
				return skipHeld
			}
			low = min(low, b.drawFull(cfg, extra, r, 1<<inc, costs))
			b.drawDead(cfg, extra, r, dead, dead, low, &u, costs)
			return skipDrawn
		}
		low = min(low, b.drawFull(cfg, extra, r, 1<<inc, costs))
	} else {
		low = b.drawFull(cfg, extra, r, live|1<<inc, costs)
	}
	var far uint8
	for c := range b.Arms {
		if dead&(1<<c) != 0 && float64(b.state[c].bound.floor)+at(extra, c) > low {
			far |= 1 << c
		}
	}
	b.drawFull(cfg, extra, r, dead&^far, costs)
	var tail uint8
	if tailDraws(r, far, &u) {
		tail = far
	}
	b.drawDead(cfg, extra, r, far, tail, low, &u, costs)
	if live == 0 && far == dead && tail == 0 {
		b.state[inc].kept++ // no challenger drawn
	}
	return skipDrawn
}

// liveHeld reports whether no challenger in live, drawn (costs) with
// low the cheapest, can take the bucket from the incumbent of mean cost
// m (extra added) whatever the incumbent draws: none drew below th, the
// margin h off m (its copy at face value), and none can be surely
// cheaper (surelyCheaper) or probed (a probe runs the cheapest cost,
// which the incumbent's draw would decide).
func (b *Bucket) liveHeld(extra, copies []float64, live uint8, low, m, h float64) bool {
	inc := b.Incumbent
	if !(low >= margined(m, at(copies, inc), h)) {
		return false
	}
	for c := range b.Arms {
		// A probe and surelyCheaper both need a cost without transfer.
		if live&(1<<c) != 0 && unpriced(extra, c, inc) && (b.probeable(c) || surelyCheaper(b.Arms, c, inc, extra)) {
			return false
		}
	}
	return true
}

// deadArms returns the challengers that are dead this decision (see
// above), the rest, the live ones, and m, the incumbent's mean cost
// (extra added), settled first. m gives th, and its ln-mean and
// variance surelyCheaper's.
func (b *Bucket) deadArms(cfg *Config, extra, copies []float64, h float64) (dead, live uint8, m float64) {
	inc := b.Incumbent
	b.SettleArm(cfg, inc)
	p := &b.Arms[inc]
	xi := at(extra, inc)
	li := p.Mu + p.Variance()/2
	m = expCapped(li) + xi // p.MeanUs() + xi
	th := margined(m, at(copies, inc), h)
	vi := math.NaN() // surelyCheaper's variance of i's mean, where read
	for c := range b.Arms {
		if c == inc {
			continue
		}
		bd := &b.state[c].bound
		xc := at(extra, c)
		if b.bounded&(1<<c) == 0 || !(float64(bd.floor)+xc >= th) {
			live |= 1 << c
			continue
		}
		if d := li - float64(bd.lnMean); xc == 0 && xi == 0 && d > 0 {
			if vi != vi {
				vi = p.muScale2()
			}
			if d*d > sureZ*sureZ*(float64(bd.vmean)+vi) {
				live |= 1 << c // possibly surely cheaper
				continue
			}
		}
		dead |= 1 << c
	}
	return dead, live, m
}

// tailDraws decides with one uniform whether any of the uniforms U of
// the arms in set falls below skipTail: when one does, it draws them
// all into u, given that, and reports true. Given that one does, the
// first of k is below with chance skipTail / tailAny[k]; if it is, the
// rest are plain uniforms; if not, it is uniform above skipTail and the
// rest are drawn so again. An arm alone takes the deciding uniform as
// its U.
func tailDraws(r *rand.Rand, set uint8, u *[maxSkipArms]float64) bool {
	k := bits.OnesCount8(set)
	if k == 0 {
		return false
	}
	v := r.Float64()
	if k == 1 {
		u[bits.TrailingZeros8(set)] = v
		return v < skipTail
	}
	if !(v < tailAny[k]) {
		return false
	}
	placed := false
	for c := range maxSkipArms {
		if set&(1<<c) == 0 {
			continue
		}
		switch {
		case placed:
			u[c] = r.Float64()
		case k == 1 || r.Float64()*tailAny[k] < skipTail:
			u[c], placed = skipTail*r.Float64(), true
		default:
			u[c] = skipTail + (1-skipTail)*r.Float64()
		}
		k--
	}
	return true
}

// drawFull draws the Thompson cost (extra added) of each arm in set
// into costs, settled first, and returns the cheapest of them (+Inf for
// none).
func (b *Bucket) drawFull(cfg *Config, extra []float64, r *rand.Rand, set uint8, costs []float64) float64 {
	low := math.Inf(1)
	for c := range b.Arms {
		if set&(1<<c) == 0 {
			continue
		}
		b.SettleArm(cfg, c)
		costs[c] = b.Arms[c].Sample(r) + at(extra, c)
		low = min(low, costs[c])
	}
	return low
}

// drawDead gives each dead arm in set its cost: drawn from u by
// inversion where it is in tail (u holds its uniform) and u is below
// skipTail or its floor is not above low, the cheapest drawn cost;
// otherwise its mean cost, which as its true draw is above low.
func (b *Bucket) drawDead(cfg *Config, extra []float64, r *rand.Rand, set, tail uint8, low float64, u *[maxSkipArms]float64, costs []float64) {
	for c := range b.Arms {
		if set&(1<<c) == 0 {
			continue
		}
		bd := &b.state[c].bound
		xc := at(extra, c)
		if tail&(1<<c) != 0 && (u[c] < skipTail || !(float64(bd.floor)+xc > low)) {
			b.SettleArm(cfg, c)
			costs[c] = b.Arms[c].sampleAt(u[c], r) + xc
		} else {
			costs[c] = float64(max(bd.mean, bd.floor)) + xc
			b.spared |= 1 << c
		}
	}
}

// at returns x[i], 0 for a nil x (no transfer, no copy).
func at(x []float64, i int) float64 {
	if x == nil {
		return 0
	}
	return x[i]
}

// drawByInversion draws every arm's Thompson cost into costs (extra
// added), in their order: the incumbent's as Sample does, each
// challenger's from its uniform u by inversion (sampleAt).
func (b *Bucket) drawByInversion(cfg *Config, extra []float64, r *rand.Rand, u *[maxSkipArms]float64, costs []float64) {
	b.Settle(cfg)
	for c := range b.Arms {
		if c == b.Incumbent {
			costs[c] = b.Arms[c].Sample(r) + at(extra, c)
		} else {
			costs[c] = b.Arms[c].sampleAt(u[c], r) + at(extra, c)
		}
	}
}

// sampleAt is Sample with m's uniform given: m = F⁻¹(u), F Student's t
// with 2α degrees, location μ and scale √(β/(ακ)) (m's marginal), then
// τ | m ~ Gamma(α + 1/2, rate β + κ(m − μ)²/2), cost exp(m + 1/(2τ)).
func (p NormalGamma) sampleAt(u float64, r *rand.Rand) float64 {
	m := p.Mu + math.Sqrt(p.muScale2())*tInv(u, 2*p.Alpha)
	d := m - p.Mu
	v := (p.Beta + p.Kappa*d*d/2) / gammaRand(r, p.Alpha+0.5)
	if !(v <= 1e300) {
		v = 1e300
	}
	return expCapped(m + v/2)
}
