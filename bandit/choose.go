package bandit

import (
	"math"
	"math/rand/v2"
)

// Choose draws one Thompson sample of the expected duration (µs) per arm,
// adds extra[i] µs (the predicted transfer of inputs not resident on arm
// i; nil means none), writes each arm's cost into costs and picks the
// cheapest, subject to hysteresis (DESIGN.md § The bandit): the incumbent
// (−1 = none) is kept unless the cheapest challenger costs less than
// (1−h)·the incumbent's cost, both its sampled cost and its posterior mean
// cost (MeanUs plus extra), or its posterior mean cost is surely below
// the incumbent's (surelyCheaper). held reports that the incumbent was
// kept although a challenger sampled cheaper. h ≤ 0 is no margin (plain
// Thompson sampling); h ≥ 1 never leaves the incumbent.
//
// The incumbent runs at every decision it holds, so its own uncertainty
// resolves without exploring it: a draw of it above its mean is noise, not
// evidence against it. Without the mean, such draws made switches in
// pairs: a challenger the discount had worn down won one draw, and after
// its one run its posterior, now the incumbent's, was still wide enough
// for a high draw to hand the bucket back (config.go has the figures).
//
// costs must hold at least len(arms) values and extra, when not nil, as
// many: shorter slices are a programmer error and panic. Choose does not
// allocate; with no arms it returns −1.
func Choose(arms []NormalGamma, incumbent int, h float64, extra []float64, r *rand.Rand, costs []float64) (arm int, held bool) {
	costs = costs[:len(arms)]
	if extra != nil {
		extra = extra[:len(arms)]
	}
	draw(arms, extra, r, costs)
	return pick(arms, incumbent, h, extra, nil, costs)
}

// draw writes each arm's Thompson cost, plus extra[i] (nil: none), into
// costs.
func draw(arms []NormalGamma, extra []float64, r *rand.Rand, costs []float64) {
	for i := range arms {
		c := arms[i].Sample(r)
		if extra != nil {
			c += extra[i]
		}
		costs[i] = c
	}
}

// pick is Choose's decision from the arms' sampled costs (costs[i],
// transfer included). copies (nil: none) is the part of extra that the
// margin does not scale (Bucket.ChooseCopies).
func pick(arms []NormalGamma, incumbent int, h float64, extra, copies []float64, costs []float64) (arm int, held bool) {
	best := -1
	for i, c := range costs {
		if best < 0 || c < costs[best] {
			best = i
		}
	}
	if incumbent < 0 || incumbent >= len(arms) || best == incumbent {
		return best, false
	}
	if h >= 1 {
		return incumbent, true
	}
	if !beats(arms, best, incumbent, h, extra, copies, costs) && !surelyCheaper(arms, best, incumbent, extra) {
		return incumbent, true
	}
	return best, false
}

// beats reports whether challenger c's sampled cost is below incumbent
// i's, sampled and posterior mean, less the margin h of each taken
// without i's copy (copies nil: none): a copy this op alone needs is
// priced at its face value, not scaled by h.
func beats(arms []NormalGamma, c, i int, h float64, extra, copies []float64, costs []float64) bool {
	ci := at(copies, i)
	if !(costs[c] < margined(costs[i], ci, h)) {
		return false
	}
	if h <= 0 {
		return true
	}
	m := arms[i].MeanUs()
	if extra != nil {
		m += extra[i]
	}
	return costs[c] < margined(m, ci, h)
}

// margined is what a challenger must cost less than to take an
// incumbent that costs x, own µs of it a copy of this op's own: (1−h)
// of the rest, plus the copy at face value.
func margined(x, own, h float64) float64 {
	if own == 0 {
		return (1 - h) * x
	}
	return (1-h)*(x-own) + own
}

// displaces reports whether challenger c, chosen over incumbent i by
// pick, also takes the bucket: it beats i with every copy taken out of
// both costs (copies), so a decision that only a copy of this op's own
// decided leaves the bucket's incumbent as it was.
func displaces(arms []NormalGamma, c, i int, h float64, extra, copies []float64, costs []float64) bool {
	if i < 0 || copies == nil || copies[c] == 0 && copies[i] == 0 {
		return true
	}
	var x, y [2]float64
	pair := []NormalGamma{arms[c], arms[i]}
	x[0], x[1] = costs[c]-copies[c], costs[i]-copies[i]
	y[0], y[1] = extra[c]-copies[c], extra[i]-copies[i]
	return beats(pair, 0, 1, h, y[:], nil, x[:])
}

// surelyCheaper reports whether arm c's posterior mean cost is below arm
// i's by more than sureZ standard errors of the difference, where neither
// cost holds a transfer: the margin keeps an incumbent against draws, not
// against evidence. Without this,
// two settled arms 3.5% apart with 1.5% noise (StarPU's potrf on three
// GPUs) stayed on the worse one for thousands of decisions.
func surelyCheaper(arms []NormalGamma, c, i int, extra []float64) bool {
	pc, pi := &arms[c], &arms[i]
	lc, li := pc.Mu+pc.Variance()/2, pi.Mu+pi.Variance()/2 // ln of the mean costs
	vc, vi := pc.muScale2(), pi.muScale2()
	if !unpriced(extra, c, i) {
		// A transfer in the cost is where the margin also keeps a chain
		// of ops from moving its activations back and forth, which one
		// op's costs do not show (cmd/infer BenchmarkSimPlacement,
		// mi300x batch 16): there the margin stands.
		return false
	}
	// In logs, without an exponential: the held decisions of a settled
	// bucket ask this at every Select (BenchmarkSelectObserve).
	return li-lc > sureZ*math.Sqrt(vc+vi)
}

// sureZ is how many standard errors make a difference of posterior means
// evidence (surelyCheaper).
const sureZ = 4

// Widen keeps p's mean but resets its evidence to the prior's strength
// (κ = κ0, α = α0) with β chosen so that the expected noise variance
// E[1/τ] is kept: after a change alarm the arm's mean can move again
// within a few observations, so the arm is re-examined. Parameters that
// already carry less evidence than the prior are left as they are.
func (p *NormalGamma) Widen(prior NormalGamma) {
	v := p.Variance()
	if prior.Kappa < p.Kappa {
		p.Kappa = prior.Kappa
	}
	if prior.Alpha < p.Alpha {
		p.Alpha = prior.Alpha
	}
	if p.Alpha > 1 {
		p.Beta = v * (p.Alpha - 1)
	} else {
		p.Beta = v * p.Alpha
	}
}
