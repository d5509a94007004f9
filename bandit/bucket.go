package bandit

import (
	"math"
	"math/rand/v2"
)

// minUs is the shortest duration an observation is taken to have (1 ns):
// a zero or negative timer reading is clamped to it, since ln(0) = −∞.
const minUs = 1e-3

// Bucket is one bucket's bandit (DESIGN.md § The bandit): the arms'
// posteriors over ln(duration_us), the priors they grew from (the targets
// of discounting and widening), the incumbent that hysteresis protects and
// the CUSUM detector watching the incumbent's residuals. Build one with
// NewBucket or as a literal with Arms and Priors of equal length and
// Incumbent −1. A Bucket is not safe for concurrent use; the caller
// serialises Choose and Observe (one lock or one shard per bucket).
//
// The discount is lazy: Observe discounts the arm it updates, and every
// other arm owes one discount per observation of the bucket since its
// last, paid in one step (γ^k) when it is next read. So Arms[i] is
// current only after Settle (or SettleArm(i)); Choose and Observe settle
// what they read. Write an arm or a prior only after Settle, so that
// what it owed is paid toward the prior it grew from.
type Bucket struct {
	Arms      []NormalGamma // posteriors, one per arm
	Priors    []NormalGamma // the priors the posteriors grew from
	Incumbent int           // the arm hysteresis protects; −1 before the first choice
	Detector  CUSUM         // change detector on the incumbent (K, H set from Config by Observe)
	Switches  int           // changes of incumbent, each a change of the arm chosen (the first choice is not one)
	Alarms    int           // change alarms raised

	// The re-check of an incumbent that a change displaced (Choose):
	// recheck is 1 + its arm (0: none, so that a literal Bucket has
	// none), due the decision at which its posterior is next widened, gap
	// the decisions until the one after. changed reports an alarm on the
	// incumbent since it took over.
	// The flags and the re-check share a word: a scheduler keeps a
	// bucket's hot fields in four cache lines (adaptive's
	// TestBucketLayout).
	changed   bool
	recheck   int32
	due, gap  int64
	decisions int64

	// observed counts the bucket's observations; state holds each arm's
	// discount stamp (observed when it last paid) and skip bound (nil
	// until the first Observe: a literal Bucket owes nothing).
	observed int64
	state    []ArmState
	// The draws skipped (skip.go): the challengers' bounds were computed
	// at observation boundAt; bounded holds the challengers that have
	// one, probed those of them probeable in the window. They are
	// computed again skipWindow observations later. skipped: the last
	// Choose skipped; spared: the arms it did not draw; coin: the probe's
	// coin, where skip tossed it. noSkip: always draw
	// (TestSkipSameChoices).
	boundAt                       int64
	bounded, probed, spared, coin uint8
	skipped, noSkip               bool
}

// ArmState is a bucket's bookkeeping of one arm beyond its posterior
// (its lazy discount, its skip bound); the zero value is ready for use.
type ArmState struct {
	stamp int64
	bound armBound
	kept  int64 // decisions that kept it, as incumbent, drawing no challenger
}

// Skips returns how many decisions kept the incumbent without drawing
// any challenger's cost.
func (b *Bucket) Skips() (n int64) {
	for i := range b.state {
		n += b.state[i].kept
	}
	return n
}

// State returns the memory UseState handed over (nil before), for a
// caller that prefetches it.
func (b *Bucket) State() []ArmState { return b.state }

// UseState hands the bucket the memory it keeps its ArmStates in
// (len(Arms) values, reset by it), so that a caller that allocates many
// buckets from slabs allocates these too; without it the first Observe
// allocates them. Call it before the first Observe.
func (b *Bucket) UseState(s []ArmState) {
	s = s[:len(b.Arms)]
	for i := range s {
		s[i] = ArmState{stamp: b.observed}
	}
	b.state = s
}

// SettleArm pays the discount arm i owes: its evidence scaled by γ^k for
// the k observations of the bucket since it last paid (NormalGamma.Discount
// applied k times is exactly that, the statistics being linear in their
// weights: TestLazyDiscount).
func (b *Bucket) SettleArm(cfg *Config, i int) {
	if b.state == nil {
		return
	}
	k := b.observed - b.state[i].stamp
	if k == 0 {
		return
	}
	b.state[i].stamp = b.observed
	if cfg.Discount < 1 {
		b.Arms[i].Discount(b.Priors[i], powInt(cfg.Discount, k))
	}
}

// Settle pays every arm's owed discount (SettleArm): afterwards Arms
// holds the current posteriors until the next Observe.
func (b *Bucket) Settle(cfg *Config) {
	for i := range b.state {
		b.SettleArm(cfg, i)
	}
}

// powInt returns g^k for k ≥ 0 by repeated squaring.
func powInt(g float64, k int64) float64 {
	r := 1.0
	for k > 0 {
		if k&1 != 0 {
			r *= g
		}
		g *= g
		k >>= 1
	}
	return r
}

// NewBucket returns a bucket whose arms start at priors (copied).
func NewBucket(priors []NormalGamma) *Bucket {
	return &Bucket{
		Arms:      append([]NormalGamma(nil), priors...),
		Priors:    append([]NormalGamma(nil), priors...),
		Incumbent: -1,
	}
}

// Choose picks an arm with Choose (the package function) under
// cfg.Hysteresis and makes it the incumbent; a change of incumbent counts
// a switch and resets the detector, and an incumbent displaced after a
// change alarm is re-checked later (firstRecheckGap). extra and costs are
// as for Choose. cfg must have been validated. It does not allocate.
//
// In a settled bucket it draws only what can change the choice
// (skip.go): most decisions keep the incumbent after one uniform, with
// costs the posterior mean costs and held false (Skipped reports it),
// and the others draw only the arms that can be the cheapest, or only
// the challengers where none of them can take the bucket (Skipped too,
// the incumbent's cost its mean); the chosen arm's distribution is
// Choose's.
func (b *Bucket) Choose(cfg *Config, extra []float64, r *rand.Rand, costs []float64) (arm int, held bool) {
	return b.ChooseCopies(cfg, extra, nil, r, costs)
}

// ChooseCopies is Choose where copies[i] µs of extra[i] is a copy that
// this op alone needs on arm i (a weight the arm does not hold, where the
// bucket's other ops may find theirs held; nil: none). Such a copy is
// priced at its face value: the margin is taken of the incumbent's cost
// without it, and a challenger that wins only by the copies runs this op
// but does not take the bucket (adaptive's TestWeightCopyPerOp). Transfers of a chain's
// activations stay in the margin (DESIGN.md § The bandit). copies, when
// not nil, must be as long as extra, each copies[i] at most extra[i].
func (b *Bucket) ChooseCopies(cfg *Config, extra, copies []float64, r *rand.Rand, costs []float64) (arm int, held bool) {
	if extra == nil {
		copies = nil
	}
	b.decisions++
	b.skipped, b.spared, b.coin = false, 0, coinUntossed
	switch s := b.skip(cfg, extra, copies, r, costs); s {
	case skipKept:
		b.skipped = true
		b.state[b.Incumbent].kept++
		return b.Incumbent, false
	case skipHeld:
		b.skipped = true
		return b.Incumbent, false
	case skipDrawn: // costs holds what pick reads, as Choose draws it
		arm, held = pick(b.Arms, b.Incumbent, cfg.margin(), extra, copies, costs[:len(b.Arms)])
	default:
		b.Settle(cfg)
		if b.recheck > 0 && b.decisions >= b.due {
			if a := int(b.recheck) - 1; a != b.Incumbent {
				b.Arms[a].Widen(b.Priors[a])
			}
			b.gap *= 2
			b.due = b.decisions + b.gap
			if b.gap > maxRecheckGap {
				b.recheck = 0
			}
		}
		costs = costs[:len(b.Arms)]
		draw(b.Arms, extra, r, costs)
		arm, held = pick(b.Arms, b.Incumbent, cfg.margin(), extra, copies, costs)
	}
	if held && b.probeCoin(r) {
		if c := cheapest(costs[:len(b.Arms)]); unpriced(extra, c, arm) && b.probeable(c) {
			return c, false
		}
	}
	if arm != b.Incumbent && !displaces(b.Arms, arm, b.Incumbent, cfg.margin(), extra, copies, costs) {
		return arm, false // this op's copies chose it; the bucket keeps its incumbent
	}
	if arm != b.Incumbent {
		if b.Incumbent >= 0 {
			b.Switches++
			if b.changed {
				b.recheck, b.gap = int32(b.Incumbent+1), firstRecheckGap
				b.due = b.decisions + b.gap
			}
		}
		b.Incumbent = arm
		b.changed = false
		b.Detector.Reset()
		b.Changed() // the bounds were of the old incumbent's challengers
	}
	return arm, held
}

// A held decision runs the challenger that sampled cheaper, once, with
// odds 1 in probeOdds, without making it the incumbent: the margin keeps
// the incumbent against draws, and these runs gather the evidence that
// overrides it (surelyCheaper) or that stops the challenger's draws from
// winning. Without them a challenger held by the margin is not measured
// again until the discount wears its evidence away: on DeepBench's table
// (replay -table), one unlucky first run of a CPU 20% faster than the GPU
// kept an sgemm of 0.3 s on the GPU for all its 165 runs. Only a
// challenger measured, but at most about once, is probed (probeable),
// and none where a transfer is priced: there the margin also keeps a
// chain of ops from moving its activations back and forth (TestProbe).
const probeOdds = 4

// probeEvidence: only a challenger with at most this evidence is probed.
const probeEvidence = 1

// probeable reports whether arm a has some evidence and at most
// probeEvidence: an arm with none is the caller's to try (its trial is
// bounded by its cost there), and one with more is measured enough for
// the margin to hold against.
func (b *Bucket) probeable(a int) bool {
	k, k0 := b.Arms[a].Kappa, b.Priors[a].Kappa
	return k > k0 && k <= k0+probeEvidence
}

// cheapest returns the index of the lowest of costs.
func cheapest(costs []float64) int {
	best := 0
	for i, c := range costs {
		if c < costs[best] {
			best = i
		}
	}
	return best
}

// unpriced reports whether neither arm's cost holds a transfer.
func unpriced(extra []float64, a, b int) bool {
	return extra == nil || extra[a] == 0 && extra[b] == 0
}

// An incumbent that loses the bucket after a change alarm is re-checked:
// its posterior is widened (Widen) firstRecheckGap decisions later, then
// after twice as many, and so on up to maxRecheckGap, whenever it is not
// the incumbent then (a re-check that wins the bucket back while the
// change lasts loses it again, without an alarm: its schedule goes on).
// A change is often a passing one (another process holding a core of a
// shared CPU, a GPU clocking down for a while), and the arm's evidence
// from it, believed as firmly as any, would keep it away until the
// discount wore it down: about a thousand decisions for γ = 0.999
// (TestPassingSlowdown: 3 of 10 seeds stayed away, none with re-checks).
// Each re-check costs a few tries of the arm if the change persists
// (TestDrift), and none happen without an alarm, so a stationary bucket
// is not disturbed (TestConvergence, TestHysteresis).
//
// The first re-check comes early (16 decisions) because a shared CPU's
// slow spells last a few to a few dozen ops and an alarm after one hands
// the bucket to a slower arm until then (TestShortSpell); the price is a
// little regret in long changes (BenchmarkTuning's drift). Figures:
// docs/TUNING.md.
const (
	firstRecheckGap = 16
	maxRecheckGap   = 4096
)

// Observe records a measured compute duration of us µs on arm: if arm is
// the incumbent, its standardized residual against the posterior
// predictive, clipped to ±residualClip, goes to the CUSUM detector; the
// arm's posterior is updated with ln(us), winsorized from above once the
// arm has settled (settledAfter); every arm of the bucket is discounted
// toward its prior by cfg.Discount; on a change alarm the incumbent is
// widened (Widen) so that its mean can move within a few observations,
// and alarm is true.
//
// us ≤ 0 is clamped to 1 ns; NaN and ±Inf are ignored. An arm out of range
// is a programmer error and panics. cfg must have been validated. It does
// not allocate.
func (b *Bucket) Observe(cfg *Config, arm int, us float64) (alarm bool) {
	if math.IsNaN(us) || math.IsInf(us, 0) {
		return false
	}
	return b.ObserveLn(cfg, arm, LnUs(us))
}

// LnUs returns the y = ln(duration_us) that Observe learns from us: us
// clamped to at least 1 ns, through the package's fast logarithm.
func LnUs(us float64) float64 { return log(max(us, minUs)) }

// ObserveLn is Observe of y = LnUs(us), for a caller that needs y itself
// too (one logarithm, not two). y must be finite.
func (b *Bucket) ObserveLn(cfg *Config, arm int, y float64) (alarm bool) {
	if b.state == nil {
		b.UseState(make([]ArmState, len(b.Arms)))
	}
	b.SettleArm(cfg, arm)
	if arm != b.Incumbent {
		b.Changed() // its skip bound no longer holds
	}
	p := &b.Arms[arm]
	settled := p.Kappa >= b.Priors[arm].Kappa+settledAfter
	if arm == b.Incumbent || settled {
		// The scale is at least the hysteresis margin (≈ its ln): a shift
		// the margin absorbs alone cannot change a decision, so it need
		// not alarm, and winsorizing, which narrows the noise variance of
		// a heavy-tailed arm, does not make the detector jumpier
		// (docs/TUNING.md).
		sd := math.Sqrt(p.Variance() * (1 + 1/p.Kappa))
		if f := cfg.margin(); sd < f {
			sd = f
		}
		z := (y - p.Mu) / sd
		if arm == b.Incumbent {
			b.Detector.K, b.Detector.H = cfg.CUSUMK, cfg.CUSUMH
			alarm = b.Detector.Add(clip(z, residualClip))
		}
		if settled && z > residualClip {
			y = p.Mu + residualClip*sd
		}
	}
	// This observation's discount: paid now by arm, owed by the others.
	if cfg.Discount < 1 {
		p.updateDiscounted(b.Priors[arm], y, cfg.Discount)
	} else {
		p.Update(y)
	}
	b.observed++
	b.state[arm].stamp = b.observed
	if alarm {
		w := b.Priors[arm]
		w.Kappa += alarmEvidence
		w.Alpha += alarmEvidence / 2
		p.Widen(w)
		b.Alarms++
		b.changed = true
	}
	return alarm
}

// settledAfter is the evidence, in observations beyond the prior's
// strength, after which an arm's slow outliers are winsorized: an
// observation more than residualClip standard deviations (of the
// predictive, at least the margin: see Observe) slower than the posterior
// mean is learned as exactly that slow. A spike (a preempted thread, a
// garbage collection on the other core, a page fault) then moves a
// settled arm's mean by at most 3σ/κ and its noise variance by a bounded
// amount; unclipped, a few spikes on an arm with a few dozen runs cost a
// faster GPU its bucket (TestSettledSpikes). Faster observations are
// never clipped, so an arm that improves is learned at full speed; a
// sustained slowdown of the incumbent still raises the CUSUM alarm, whose
// widening (κ back to the prior's plus alarmEvidence, under
// settledAfter) lifts the clip until the arm has
// settled again. Before settledAfter observations nothing is clipped, so
// a prior wrong by 10× is overturned as fast (TestConvergence).
const settledAfter = 8

// alarmEvidence is the evidence, in observations beyond the prior's, that
// a change alarm leaves the incumbent (Widen to a prior this much
// stronger): each new observation still moves its mean a third of the way,
// but its Thompson draws are no longer as wide as the prior's (κ0 = 0.2),
// which handed the bucket to a much slower arm after each alarm that a
// shared machine's slow spells raise. Measured with DecodePaired and
// BenchmarkTuning: docs/TUNING.md.
const alarmEvidence = 2

// residualClip bounds the standardized residual the change detector sees:
// one outlier (a preempted thread, a page fault: real timings are heavy
// tailed) adds at most residualClip − K to the CUSUM, so it takes several
// in a row to raise an alarm, as a real change does.
const residualClip = 3

// clip returns z limited to [−c, c].
func clip(z, c float64) float64 {
	if z > c {
		return c
	}
	if z < -c {
		return -c
	}
	return z
}
