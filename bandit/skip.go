package bandit

import (
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/stat/distuv"
)

// Drawing only what can change the choice (DESIGN.md § The bandit). A
// challenger c takes the bucket from incumbent i only with a sampled
// cost below th = (1−h)·(i's posterior mean cost), a copy of the op's
// own taken at face value (ChooseCopies), or when its
// mean is surely cheaper (surelyCheaper), or by a probe of a challenger
// with at most probeEvidence. In a settled bucket the last two cannot
// happen (windowBound, skip) and c's Thompson cost is at least its floor,
// the cost below which it falls with probability at most skipTail, and
// floor ≥ th. Drawn by inversion, c's ln-mean m = F⁻¹(U), U uniform, is
// then at least ln floor whenever U ≥ skipTail: there c cannot win, and
// the decision is the incumbent without drawing anything else. When some
// challenger's U < skipTail (a chance of skipTail per challenger), every
// arm is drawn in full, each challenger's m by F⁻¹ of its own U and its
// variance from the conditional τ | m: the draws, and so the chosen
// arm's distribution, are exactly Choose's (TestSkipSameChoices).
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
	// live on the stack); a wider one always draws.
	maxSkipArms = 8
)

// What skip did.
const (
	skipNone  = iota // not settled: draw as Choose does
	skipKept         // the incumbent, nothing drawn
	skipDrawn        // costs holds every arm's exact draw
)

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
// degrees of freedom: a quantile falls as the degrees rise, so the
// tabulated one at or below a posterior's is conservative.
var (
	tNus       = [...]float64{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128, 256, 1024}
	tQuantiles = func() (q [len(tNus)]float64) {
		for j, nu := range tNus {
			q[j] = distuv.StudentsT{Mu: 0, Sigma: 1, Nu: nu}.Quantile(1 - skipTail)
		}
		return q
	}()
)

// tQuantile returns a 1−skipTail quantile of Student's t at least that
// of nu degrees of freedom; ok is false below the table's least.
func tQuantile(nu float64) (z float64, ok bool) {
	if !(nu >= tNus[0]) {
		return 0, false
	}
	j := len(tNus) - 1
	for tNus[j] > nu {
		j--
	}
	return tQuantiles[j], true
}

// windowBound returns the bound on p, grown from prior, over its next
// skipWindow discounts at most (weights scaled by s in [sK, 1]); ok is
// false where no useful bound holds (a probeable arm, a posterior too
// weak to take a variance).
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
func windowBound(p, prior NormalGamma, sK float64) (armBound, bool) {
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
		return armBound{}, false
	}
	kLo, kHi := math.Min(one.kappa, end.kappa), math.Max(one.kappa, end.kappa)
	if kHi > k0 && kLo <= k0+probeEvidence {
		return armBound{}, false // probeable somewhere in the window
	}
	aLo, aHi := math.Min(one.alpha, end.alpha), math.Max(one.alpha, end.alpha)
	muLo := math.Min(one.mu, end.mu)
	// f'(1), for the tangent bound on β.
	u := c + st.sum
	df := st.sumSq - (2*st.sum*u*one.kappa-st.n*u*u)/(one.kappa*one.kappa)
	bHi := math.Max(one.beta, one.beta+df*(sK-1)/2)
	bLo := math.Min(one.beta, end.beta)
	z, ok := tQuantile(2 * aLo)
	if !ok {
		return armBound{}, false
	}
	return armBound{
		floor:  down32(expCapped(muLo - z*math.Sqrt(bHi/(aLo*kLo)))),
		lnMean: down32(muLo + bLo/(aHi-1)/2),
		vmean:  down32(bLo / (aHi * kHi)),
		mean:   float32(p.MeanUs()),
	}, true
}

// Changed tells the bucket that the caller wrote Arms or Priors: the
// challengers' bounds are computed again before a decision skips its
// draws. Write only after Settle (see Bucket).
func (b *Bucket) Changed() { b.boundOK, b.boundAt = false, b.observed-skipWindow }

// Skipped reports whether the last Choose kept the incumbent without
// drawing (its costs are then posterior means).
func (b *Bucket) Skipped() bool { return b.skipped }

// refreshBounds computes every challenger's bound for the next
// skipWindow observations and reports whether all hold one.
func (b *Bucket) refreshBounds(cfg *Config) bool {
	b.Settle(cfg)
	sK := powInt(cfg.Discount, skipWindow)
	for i := range b.Arms {
		if i == b.Incumbent {
			continue
		}
		bd, ok := windowBound(b.Arms[i], b.Priors[i], sK)
		if !ok {
			b.boundOK, b.boundAt = false, b.observed
			return false
		}
		b.state[i].bound = bd
	}
	b.boundOK, b.boundAt = true, b.observed
	return true
}

// skip decides a settled bucket's choice without drawing where no
// challenger can win (skipKept: costs holds the mean costs), or draws
// every arm exactly after a challenger's uniform fell in its tail
// (skipDrawn); skipNone where the bucket is not settled. extra and
// copies are as for ChooseCopies.
func (b *Bucket) skip(cfg *Config, extra, copies []float64, r *rand.Rand, costs []float64) int {
	inc, h := b.Incumbent, cfg.margin()
	if inc < 0 || b.recheck > 0 || b.noSkip || !(h > 0 && h < 1) || b.state == nil || len(b.Arms) > maxSkipArms {
		return skipNone
	}
	if b.observed-b.boundAt >= skipWindow {
		b.refreshBounds(cfg)
	}
	if !b.boundOK {
		return skipNone
	}
	b.SettleArm(cfg, inc)
	p := &b.Arms[inc]
	xi := at(extra, inc)
	m := p.MeanUs() + xi
	li, vi := p.Mu+p.Variance()/2, p.Beta/(p.Alpha*p.Kappa)
	th := margined(m, at(copies, inc), h)
	for c := range b.Arms {
		if c == inc {
			continue
		}
		bd := &b.state[c].bound
		xc := at(extra, c)
		if !(float64(bd.floor)+xc >= th) {
			return skipNone
		}
		if d := li - float64(bd.lnMean); xc == 0 && xi == 0 && d > 0 && d*d > sureZ*sureZ*(float64(bd.vmean)+vi) {
			return skipNone // possibly surely cheaper
		}
	}
	tail := false
	var u [maxSkipArms]float64
	for c := range b.Arms {
		if c != inc {
			u[c] = r.Float64()
			tail = tail || u[c] < skipTail
		}
	}
	if tail {
		b.drawByInversion(cfg, extra, r, &u, costs)
		return skipDrawn
	}
	for c := range b.Arms {
		costs[c] = float64(b.state[c].bound.mean)
		if extra != nil {
			costs[c] += extra[c]
		}
	}
	costs[inc] = m
	return skipKept
}

// at returns x[i], 0 for a nil x (no transfer, no copy).
func at(x []float64, i int) float64 {
	if x == nil {
		return 0
	}
	return x[i]
}

// drawByInversion draws every arm's Thompson cost into costs (extra
// added): the incumbent's as Sample does, each challenger's from its
// uniform u: m = F⁻¹(u), F Student's t with 2α degrees, location μ and
// scale √(β/(ακ)) (m's marginal), then τ | m ~ Gamma(α + 1/2, rate
// β + κ(m − μ)²/2), cost exp(m + 1/(2τ)).
func (b *Bucket) drawByInversion(cfg *Config, extra []float64, r *rand.Rand, u *[maxSkipArms]float64, costs []float64) {
	b.Settle(cfg)
	for c := range b.Arms {
		p := b.Arms[c]
		if c == b.Incumbent {
			costs[c] = p.Sample(r)
		} else {
			m := p.Mu + math.Sqrt(p.Beta/(p.Alpha*p.Kappa))*tInv(u[c], 2*p.Alpha)
			d := m - p.Mu
			v := (p.Beta + p.Kappa*d*d/2) / gammaRand(r, p.Alpha+0.5)
			if !(v <= 1e300) {
				v = 1e300
			}
			costs[c] = expCapped(m + v/2)
		}
		if extra != nil {
			costs[c] += extra[c]
		}
	}
}
