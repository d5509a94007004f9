package bandit

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Modes chooses, step by step, among a few ways of running the whole of a
// step that a program repeats (a decoder's token: the per-op learner's
// placement, or every op on one device), by Thompson sampling over each
// mode's measured step times. A per-op learner prices each op alone and
// cannot see what a device switch costs the step as a whole (the host
// waiting on another device, a cache that must follow); choosing between
// it and the rules it could replace, on the steps' own clock, bounds it
// below by the better of them (cmd/infer TestAutoStepModes).
//
// The first steps after a change of mode pay for the change (caches,
// weights and activations moving to where the new mode wants them, which
// cost its first step up to 2.5× its later ones in cmd/infer's simulated
// offload runs, and its second 1.2×), so a mode is judged on its steady
// steps and the change is priced apart: each mode keeps the excess of
// each of a run's first steps over its first steady one (ln µs; warming
// says which are steady), and a mode other than the running one is drawn
// with those excesses spread over the steps it may expect to run before
// a change is forced anyway (Resume: a prompt). Judged on all its steps,
// a mode whose changes are slow loses to a slower one it changes from
// (TestModesChangeCost); judged on its steady steps alone, a slow mode
// looks closer than it is and is retried, paying the change each time.
//
// Every mode's steps grow and shrink with the workload (a decoder's
// context growing, requests joining), so the modes share a workload
// level: each steady step moves it by modesLevelRate of the step's
// excess over its mode's record, by at most modesLevelStep, records are
// kept less the level, and every mode is compared at the level of now. A
// record kept at the level it was measured at made a slower mode look as
// fast as the running one once the workload had grown past it, and it
// was drawn again (TestModesWorkloadDrift). The bound per step leaves an
// abrupt change of the running mode to its own record, so that a device
// that slows is still left (TestModesRunningSlows).
//
// Each mode's posterior is a NormalGamma over ln(steady step µs), less
// the level. A mode without one (Observe) runs ModesWarm steps in a row
// before any is compared, and the first modesPriced changes to a mode run
// to their first steady step; every Done discounts the running mode's
// record by ModesGamma, and a mode left alone for the memory's length runs again (modesRetry):
// the per-op learner improves as it learns, and the device a rule relies
// on may slow. Each retry that leaves the mode surely slower than the
// best other record doubles its next wait, up to modesBackoff times; a
// retry surely faster than every record, or surely slower than its own,
// starts its mode's record over (TestModesRetryBacksOff,
// TestModesRetryGrownSlower); and the change back from a retry is priced
// over the steps left, as a retry was not chosen.
// A mode left alone keeps its record as it was until then:
// discounted towards its prior's spread, a record of a few steps was
// drawn again long before its retry, which checks it anyway
// (TestModesLeftAloneWaits). Modes is not safe for concurrent use.
type Modes struct {
	post   []NormalGamma
	prior  []NormalGamma // set at each mode's first steady step
	seen   []bool        // the mode's posterior has evidence
	warm   []warmup      // each mode's cost of changing to it, step by step
	priced []int         // changes to each mode priced
	runs   []int64
	last   int // the mode of the last step or Resume; -1: none
	runLen int // steps of last run since its change
	// steps holds the ln µs of last's first steps while held: they are
	// not observed yet, as the run is pricing its change (its warm-up).
	steps  [modesWarmMax]float64
	held   bool
	span   [2]float64 // steps between Resumes: discounted Σ steps, Σ weight
	since  int        // steps since the last Resume; -1: none yet
	forced bool       // the running run began at a Resume, not by a choice
	done   int64      // steps done
	ranAt  []int64    // each mode's last step (done's count then)
	level  float64    // the workload's level, ln µs: records are steps less it
	// adopted is the mean (ln µs, less the level) of the record each
	// mode last adopted (Adopt), NaN for none; replay its steady steps'
	// excess over that mean since, which Adopt adds to a record it copies.
	adopted []float64
	replay  []excess
	// bound is each mode's least steady step (ln µs, less the level of
	// when it was given; NaN for none: Bound).
	bound []float64
	// backoff is each mode's retries in a row that left it surely slower
	// (retryAfter doubles its wait for each, up to modesBackoff); due is
	// the retry Next returned, until it returns a draw (a caller that
	// issues a step before the last one's is done calls Next before
	// Done), retried the mode whose running run began as one (-1: none).
	backoff      []int
	due, retried int
	r            *rand.Rand
}

// warmup is a mode's excess at each of a run's first modesWarmMax steps
// over the run's first steady step (ln µs): its warm-up.
type warmup [modesWarmMax]excess

// price returns the excess of w's steps, in steady steps: what a change
// to its mode costs over the steps it runs.
func (w *warmup) price() float64 {
	p := 0.0
	for _, e := range w {
		p += max(0, math.Expm1(e.mean()))
	}
	return p
}

// excess is a discounted mean of a mode's excess (a change's step over
// its first steady one; a replay over the record it adopted): Σ weight·x
// over Σ weight.
type excess struct{ sum, w float64 }

// add adds x at weight 1.
func (e *excess) add(x float64) { e.sum, e.w = e.sum+x, e.w+1 }

// discount weighs what e holds by g.
func (e *excess) discount(g float64) { e.sum, e.w = e.sum*g, e.w*g }

// mean returns the excess, 0 without evidence.
func (x excess) mean() float64 {
	if x.w <= 0 {
		return 0
	}
	return x.sum / x.w
}

const (
	// ModesWarm is the steps a mode without a record runs, in a row,
	// before the modes are compared: the first prices the change to it,
	// the second is its first steady step unless it is still warming.
	ModesWarm = 2
	// modesWarmMax is the most steps of a run that may be its warm-up
	// (warming): a weight cache refilled over 3 steps in cmd/infer's
	// offload runs.
	modesWarmMax = 4
	// ModesGamma is the weight of a step per later step: a memory of about
	// 200 steps. With it a mode 1.4× slower runs at most 2% of the steps
	// once the modes are told apart (TestModesPicksFaster).
	ModesGamma = 0.995
	// modesPriced is the changes to a mode that run to their first steady
	// step, pricing the change, before a change's first steps are
	// observed less their excess: one difference of two steps is as noisy
	// as both, and taken off every later first step it biased the mode (in
	// TestModesPicksFaster's setting, 11 of 200 seeds ran the slower mode
	// more than 2% of the late steps with one, 3 with two, 2 when changes
	// were not priced).
	modesPriced = 2
	// modesSpread is the prior's spread of ln(step time): a step's noise
	// of 10%, which steady steps measured soon narrow. The steps of one
	// placement vary by 1–5% (cmd/infer's simulated runs); a spread of
	// 30% kept modes 5–15% slower drawn for tens of steps (the CPU alone
	// in 2–14 of 124 offload steps with it, 2 with this).
	modesSpread = 0.1
	// modesStrength is the prior's weight in steps: the first steady
	// step's time sets the level, which the steps after it soon outweigh.
	modesStrength = 0.5
	// modesRetry is the steps a mode is left alone, the memory's length
	// (1/(1−ModesGamma)), before it runs again whatever its record (more
	// the longer its change, and the slower its record: a retry pays for
	// both, retryAfter), so a mode that became faster is found: a mode's
	// steady record narrows too fast to be drawn from (TestModesRetry).
	modesRetry = 200
	// modesLevelRate is the share of a steady step's excess over its
	// mode's record (in ln µs) that moves the workload's level, and
	// modesLevelStep the most the level moves in a step: 0.5%, three
	// times a 192-step decode's growth per step on igpu at batch 16
	// (1,100 to 1,480 µs). Unbounded, a running mode 2× slower from one
	// step on ran 72 of the next 150 steps (TestModesRunningSlows).
	modesLevelRate = 0.1
	modesLevelStep = 0.005
	// modesRestored is the most steps a restored record weighs (Restore),
	// as many as the learner's first record (cmd/infer's learnerRecord).
	// The steps may have changed since it was kept (the per-op learner
	// learned on), and a strong record the running mode no longer meets
	// puts its excess into the workload level that every mode shares:
	// restored at full weight, a frozen mode 2% slower than the GPU alone
	// ran 119 of 199 steps in a run, against 18–51 in 5 runs with 4
	// (cmd/infer, mi300x beside cpu2 at batch 1, BENCHMARKS.md).
	modesRestored = 4
	// modesBackoff is the most doublings of a mode's retry wait: a mode
	// each retry leaves surely slower is retried after 2, 4, then 8 times
	// modesRetry's wait, so that over a long run its retries cost about
	// (k−1)/(8·modesRetry·k) of the steps, not (k−1)/(modesRetry·k), and a
	// mode that became faster is still found within 8 memories
	// (TestModesRetryBacksOff).
	modesBackoff = 3
)

// NewModes returns a chooser over n modes (at least 1) drawing from a
// generator seeded with seed.
func NewModes(n int, seed uint64) (*Modes, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: %d modes", ErrBadStep, n)
	}
	adopted, bound := make([]float64, n), make([]float64, n)
	for i := range adopted {
		adopted[i], bound[i] = math.NaN(), math.NaN()
	}
	return &Modes{post: make([]NormalGamma, n), prior: make([]NormalGamma, n), seen: make([]bool, n),
		warm: make([]warmup, n), priced: make([]int, n), ranAt: make([]int64, n), runs: make([]int64, n), last: -1, since: -1,
		adopted: adopted, replay: make([]excess, n), bound: bound, backoff: make([]int, n), due: -1, retried: -1,
		r: rand.New(rand.NewPCG(seed, 0x6d6f646573))}, nil
}

// Next returns the mode to run the next step with: the running one while
// its change is not priced, else the first mode without a steady step
// yet that is not surely slower than one with a record (Bound), else one
// left alone past modesRetry, else the one whose Thompson
// draw of the steady step time, with the change to it spread over the
// steps it may run (horizon) unless it is running, is lowest.
func (m *Modes) Next() int {
	if m.held {
		return m.last // its change is not priced yet
	}
	for i, seen := range m.seen {
		if !seen && !m.boundedOut(i) {
			return i
		}
	}
	for i := range m.post {
		if i != m.last && float64(m.done-m.ranAt[i]) >= m.retryAfter(i) {
			m.due = i
			return i // a retry
		}
	}
	m.due = -1
	best, bestUs := 0, math.Inf(1)
	h := m.horizon()
	for i := range m.post {
		if !m.seen[i] {
			continue // bounded out: left for its retry
		}
		us := m.post[i].Sample(m.r)
		if i != m.last {
			us *= 1 + m.warm[i].price()/m.over(i, h)
		}
		if us < bestUs {
			best, bestUs = i, us
		}
	}
	return best
}

// retryAfter returns the steps mode i is left alone before it runs again
// whatever its record: modesRetry, more the longer its change, times how
// much slower its record (or, without one, its Bound) is than the running
// mode's, doubled for each retry in a row that left it surely slower
// (backoff). A retry of a mode k× slower costs about k−1 steps; left
// alone k× as long, its retries cost about as much of the time whatever
// k (TestModesRetrySlower). Without the doubling, the learner's
// placement (2.2× the GPU alone's step) and its frozen one (1.3×) cost
// h100 beside cpu2 at batch 1 1.1–1.3% of every 1,000 steps of a decode
// (cmd/infer, BENCHMARKS.md).
func (m *Modes) retryAfter(i int) float64 {
	n := modesRetry * (1 + m.warm[i].price()) * float64(int(1)<<m.backoff[i])
	if m.last >= 0 && m.seen[m.last] {
		mu := m.post[i].Mu
		if !m.seen[i] {
			mu = m.bound[i] // a mode bounded out (Bound); NaN: none
		}
		if mu == mu {
			n *= max(1, math.Exp(mu-m.post[m.last].Mu))
		}
	}
	return n
}

// Done records that a step run with mode took us µs. Non-positive or
// non-finite times and unknown modes are errors, and change nothing.
func (m *Modes) Done(mode int, us float64) error {
	if err := m.check(mode, us); err != nil {
		return err
	}
	if m.seen[mode] {
		m.post[mode].Discount(m.prior[mode], ModesGamma) // the others wait for their retry
	}
	for i := range m.post {
		for k := range m.warm[i] {
			m.warm[i][k].discount(ModesGamma)
		}
		m.replay[i].discount(ModesGamma)
	}
	y := LnUs(us)
	m.runs[mode]++
	m.done++
	m.ranAt[mode] = m.done
	if m.since >= 0 {
		m.since++
	}
	if mode != m.last {
		m.endRun()
		m.judgeRetry(mode, m.due == mode)
		m.last, m.runLen, m.forced = mode, 1, false
		m.steps[0] = y
		// Without a warm-up priced yet the step waits for the run's first
		// steady one; with one it is observed less its excess.
		if m.held = m.priced[mode] < modesPriced; !m.held {
			m.observe(mode, y-m.warm[mode][0].mean()-m.level)
		}
		return nil
	}
	m.runLen++
	k := m.runLen - 1 // this step's index in its run
	switch {
	case m.held && m.warming(mode, y):
		m.steps[k] = y
		return nil
	case m.held:
		for j := range m.warm[mode] {
			x := 0.0 // this step and those after it: steady
			if j < k {
				x = m.steps[j] - y
			}
			m.warm[mode][j].add(x)
		}
		m.priced[mode]++
		m.held = false
	case k < modesWarmMax:
		y -= m.warm[mode][k].mean() // a priced change's warm-up
	}
	if m.seen[mode] {
		x := modesLevelRate * (y - m.level - m.post[mode].Mu)
		m.level += min(modesLevelStep, max(-modesLevelStep, x))
	}
	if a := m.adopted[mode]; a == a {
		m.replay[mode].add(y - m.level - a)
	}
	m.observe(mode, y-m.level)
	return nil
}

// Observe records a steady step of mode, of us µs, run before the modes
// were chosen between (the placement a mode stands for, measured on its
// own): a mode with one needs no warm-up. Errors as Done's, and they
// change nothing.
func (m *Modes) Observe(mode int, us float64) error {
	if err := m.check(mode, us); err != nil {
		return err
	}
	m.observe(mode, LnUs(us)-m.level)
	return nil
}

// Mean returns mode's posterior mean steady step time in µs (the
// geometric mean) at the workload's level of now, +Inf for a mode with
// no steady step yet or an unknown mode.
func (m *Modes) Mean(mode int) float64 {
	if mode < 0 || mode >= len(m.post) || !m.seen[mode] {
		return math.Inf(1)
	}
	return math.Exp(m.post[mode].Mu + m.level)
}

// Record returns mode's steady record at the workload's level of now:
// its posterior over ln(steady step µs) and the prior it grew from, and
// whether it has one (an unknown mode has none). Another run of the same
// steps on the same machine starts from it (Restore) instead of trying
// every mode again.
func (m *Modes) Record(mode int) (prior, post NormalGamma, ok bool) {
	if mode < 0 || mode >= len(m.post) || !m.seen[mode] {
		return NormalGamma{}, NormalGamma{}, false
	}
	return m.prior[mode].shifted(m.level), m.post[mode].shifted(m.level), true
}

// Restore gives mode the record Record returned in an earlier run of the
// same steps, weighing at most modesRestored steps: the mode is then
// compared from the first step, with no warm-up, and its record decays
// towards prior as it did there. An unknown mode, or a record that is
// not finite with positive κ, α and β, is an error, and changes nothing
// (TestModesRestore).
func (m *Modes) Restore(mode int, prior, post NormalGamma) error {
	if err := m.check(mode, 1); err != nil {
		return err
	}
	if !prior.usable() || !post.usable() {
		return fmt.Errorf("%w: mode %d's record: prior %+v, posterior %+v", ErrBadStep, mode, prior, post)
	}
	if n := post.Kappa - prior.Kappa; n > modesRestored {
		post.Discount(prior, modesRestored/n)
	}
	m.prior[mode], m.post[mode] = prior.shifted(-m.level), post.shifted(-m.level)
	m.seen[mode], m.adopted[mode] = true, math.NaN()
	return nil
}

// Adopt gives mode the steady record of mode from (its posterior, not its
// change's cost): mode now stands for from's placement as it was lately.
// The record is moved by how far mode's steady steps have fallen from
// the records it adopted before: a placement replayed (cmd/infer's frozen
// mode, gathered, its MoE routing another step's) need not run as fast
// as it did where it was learned. Copied as it is, the record of a mode
// 1.3× slower than the one it adopted from was copied again each time
// that one ran a fast step, and it ran 37% of the steps
// (TestModesAdoptSlower). An unknown mode is an error, and changes
// nothing.
func (m *Modes) Adopt(mode, from int) error {
	if err := m.check(mode, 1); err != nil {
		return err
	}
	if err := m.check(from, 1); err != nil {
		return err
	}
	d := m.replay[mode].mean()
	m.post[mode], m.prior[mode], m.seen[mode] = m.post[from].shifted(d), m.prior[from].shifted(d), m.seen[from]
	m.adopted[mode] = math.NaN()
	if m.seen[from] {
		m.adopted[mode] = m.post[from].Mu
	}
	return nil
}

// Skip tells m that the step Next gave mode ran another mode's placement
// (the caller had none of mode's to run): mode's wait for its retry
// starts over from now, as if it had run, and its record is unchanged.
// Rule: a mode Next chose and the caller did not run is not due again at
// once. Reason: a retry left undone stays due, so Next returned it at
// every step and the caller's stand-in ran on: in a run restored from a
// store (cmd/infer, no frozen placement yet), the CPU alone, 1.3× the
// GPU alone's step, ran 96 steps in a row (TestModesSkip). An unknown
// mode is an error, and changes nothing.
func (m *Modes) Skip(mode int) error {
	if err := m.check(mode, 1); err != nil {
		return err
	}
	m.ranAt[mode] = m.done
	if m.due == mode {
		m.due = -1
	}
	return nil
}

// Resume tells m that a step it does not time ran with mode's placement
// (a prompt, by the learner): mode's next step follows no change, and
// another mode's does; the steps between Resumes are what a change can
// expect to run (left). An unknown mode is an error, and changes nothing.
func (m *Modes) Resume(mode int) error {
	if err := m.check(mode, 1); err != nil {
		return err
	}
	// A prompt ends the running run whatever its mode: a first step held
	// for its second is observed as it is (left held, every later step
	// was the running mode's: TestModesResumeEndsHeld).
	m.endRun()
	m.retried = -1 // a run a prompt ends is not judged
	m.last, m.runLen, m.forced = mode, modesWarmMax, true
	if m.since > 0 {
		m.span[0] = m.span[0]*ModesGamma + float64(m.since)
		m.span[1] = m.span[1]*ModesGamma + 1
	}
	m.since = 0
	return nil
}

// left returns the steps a mode chosen now may expect to run before a
// change is forced anyway: what is left of the mean span between
// Resumes, or the modes' memory (1/(1−ModesGamma) steps) before a span
// is known; at least 1.
func (m *Modes) left() float64 {
	if m.span[1] <= 0 {
		return 1 / (1 - ModesGamma)
	}
	return max(1, m.span[0]/m.span[1]-float64(m.since))
}

// horizon returns the steps over which a change drawn now must pay for
// itself: what is left (left), but no more than the running run has
// lasted when a choice began it. Between modes whose draws cross often
// (near-ties), a change priced over the whole memory was drawn at every
// crossing, paying its first step each time (25–112 changes in 300 steps
// in TestModesTieChanges' setting); priced over the run behind it, a run
// must last as long as the loss it can recover, so changes thin out as
// the evidence grows and a mode 2× faster still wins at once. A run a
// Resume forced, or a retry began, was not chosen, and is priced over
// what is left: priced over a retry's one step, the change back to the
// best mode lost its draws to the other retried modes, which took turns
// for 23 steps on rx7900xtx beside cpu2 at batch 1 (cmd/infer;
// TestModesRetryGrownSlower).
func (m *Modes) horizon() float64 {
	left := m.left()
	if m.forced || m.last < 0 || m.retried == m.last {
		return left
	}
	return min(left, float64(max(ModesWarm, m.runLen)))
}

// over returns the steps over which a change to mode i drawn now must pay
// for itself: the horizon h, or what is left (left) where i's record
// beats the running mode's by more than modesSpread and two standard
// errors of the difference. Rule: leaving a mode that is surely slower
// waits for nothing. Reason: priced over the run behind it, the change
// back to a mode whose first step costs most kept a slower one running
// until its run had lasted long enough to pay for it, though it is paid
// on leaving anyway: on h100 beside cpu2 at batch 1 (cmd/infer), a draw
// of the frozen placement, 1.3× the GPU alone's step, ran it 4 steps more
// after the learner's (TestModesLeaveSlower). Without the standard
// errors, a record of one slow step never ran again to be corrected
// (TestModesChangeCost, seed 15).
func (m *Modes) over(i int, h float64) float64 {
	if m.last < 0 || !m.seen[m.last] || !m.seen[i] {
		return h
	}
	if q := &m.post[m.last]; m.surelyAbove(q.Mu, q.muScale2(), i) {
		return m.left()
	}
	return h
}

// surelyAbove reports whether mu (ln µs less the level, its mean's
// squared scale scale2) exceeds mode j's record by more than modesSpread
// and two standard errors of the difference: the rule by which a mode is
// surely slower (over, boundedOut, judgeRetry, observe).
func (m *Modes) surelyAbove(mu, scale2 float64, j int) bool {
	p := &m.post[j]
	return mu-p.Mu > modesSpread+2*math.Sqrt(scale2+p.muScale2())
}

// newBest reports whether a step of y (ln µs less the level) is below
// every mode's record by more than modesSpread and two standard errors
// of the record's mean.
func (m *Modes) newBest(y float64) bool {
	for j := range m.post {
		if p := &m.post[j]; m.seen[j] && p.Mu-y <= modesSpread+2*math.Sqrt(p.muScale2()) {
			return false
		}
	}
	return true
}

// Bound tells m that a steady step of mode takes at least us µs (a
// prediction that leaves costs out: cmd/infer sums a backend's per-op
// means). Rule: a mode without a steady step whose bound is slower than
// another mode's record by more than modesSpread and two standard errors
// is not tried at once, but left for its retry (modesRetry). Reason: its
// trial can only lose; on mi300x beside cpu2 at batch 1 (cmd/infer,
// serial model), the GPU alone's trial, predicted at 957 µs a step
// against the learner's 705 and run at 957, took 3 steps and moved the
// caches twice (TestModesBoundedOut). Errors as Observe's, and they
// change nothing.
func (m *Modes) Bound(mode int, us float64) error {
	if err := m.check(mode, us); err != nil {
		return err
	}
	m.bound[mode] = LnUs(us) - m.level
	return nil
}

// boundedOut reports whether mode i, without a steady step, is surely
// slower than a mode with a record: its bound exceeds the record's mean
// by more than modesSpread and two of the mean's standard errors.
func (m *Modes) boundedOut(i int) bool {
	b := m.bound[i]
	if b != b {
		return false
	}
	for j := range m.post {
		if m.seen[j] && m.surelyAbove(b, 0, j) { // a bound has no error of its own
			return true
		}
	}
	return false
}

// check returns an error wrapping ErrBadStep for an unknown mode or a
// step time that is not positive and finite.
func (m *Modes) check(mode int, us float64) error {
	if mode < 0 || mode >= len(m.post) {
		return fmt.Errorf("%w: mode %d of %d", ErrBadStep, mode, len(m.post))
	}
	if !(us > 0 && us < math.MaxFloat64) {
		return fmt.Errorf("%w: a step of %v µs", ErrBadStep, us)
	}
	return nil
}

// judgeRetry is called as a step of mode begins a run after m.last's
// (retry: Next returned mode as a retry). A run that began as a retry
// and is left while its record is surely slower than the best other
// record doubles its mode's next wait (up to modesBackoff times); left
// otherwise, that mode is close, and its waits start over. The best, not
// the mode that follows: a retry may follow a retry, each as slow.
func (m *Modes) judgeRetry(mode int, retry bool) {
	if r := m.retried; r >= 0 && r == m.last && m.seen[r] {
		if best := m.bestOther(r); best >= 0 {
			if q := &m.post[r]; m.surelyAbove(q.Mu, q.muScale2(), best) {
				m.backoff[r] = min(m.backoff[r]+1, modesBackoff)
			} else {
				m.backoff[r] = 0
			}
		}
	}
	m.retried = -1
	if retry {
		m.retried = mode
	}
}

// bestOther returns the mode other than i with the least record, -1 for
// none.
func (m *Modes) bestOther(i int) int {
	best := -1
	for j := range m.post {
		if j != i && m.seen[j] && (best < 0 || m.post[j].Mu < m.post[best].Mu) {
			best = j
		}
	}
	return best
}

// endRun ends the running run: the last step held for a steady one,
// which never came, is observed as it is, the only evidence of its mode.
func (m *Modes) endRun() {
	if m.held {
		m.observe(m.last, m.steps[m.runLen-1]-m.level)
	}
	m.held = false
}

// warming reports whether a step of y (ln µs) of mode, the running run's
// latest, held for its steady one, is still its warm-up: the run has not
// had modesWarmMax steps, the step fell from the one before by more than
// modesSpread (a step's noise), and by more than its excess over the
// best other record. Rule: a run that still falls that fast is judged on
// a later step. Reason: a weight cache refilling after a change takes
// several steps (the GPU alone at -gpu-mem 50% on pcie3x8 in cmd/infer:
// 4,648, 2,252, 1,888, then 1,829 µs), and judged on its second step a
// mode 9% faster than the best was left for good in 2 of 20 seeds
// (TestModesWarmupSteps). A step that could not win even if it fell as
// much again is steady: holding it would cost a slower mode's trial a
// step and change no choice.
func (m *Modes) warming(mode int, y float64) bool {
	k := m.runLen - 1
	if k >= modesWarmMax {
		return false
	}
	fall := m.steps[k-1] - y
	if fall <= modesSpread {
		return false
	}
	best := m.bestOther(mode)
	return best < 0 || y-m.level-m.post[best].Mu < fall
}

// observe adds a steady step of y = ln µs to mode's posterior, the first
// setting its prior. A step of a retry (a run that began as one) surely
// faster than every mode's record, its own too, or surely slower than
// its own (by more than modesSpread and two of the record's standard
// errors), starts the record over from it: the mode has changed while it
// was left alone. Reasons: averaged with the record of its old level, a
// mode whose steps fell to a quarter of it lost its retry's draws, and
// backed-off retries found it thousands of steps late
// (TestModesRetryBacksOff); a placement with the attention on the CPU
// slows as the context grows, and its record, kept from hundreds of
// steps before, held its draws close to the best mode's for tens of
// steps (TestModesRetryGrownSlower). A retry step that
// beats the best record by its noise only adds to its record: started
// over where a step beat only the mode the retry left, the learner's
// record on mi300x beside cpu2 at batch 1 (cmd/infer) restarted from one
// lucky step and won draws, and the frozen placement that adopted it, 4%
// slower than the GPU alone, ran 24% of a 1,000-step decode.
func (m *Modes) observe(mode int, y float64) {
	if mode == m.retried && m.seen[mode] && (m.newBest(y) || m.surelyAbove(y, 0, mode)) {
		m.seen[mode] = false
	}
	if !m.seen[mode] {
		m.prior[mode] = NewPriorLn(y, modesStrength, modesSpread)
		m.post[mode], m.seen[mode] = m.prior[mode], true
	}
	m.post[mode].Update(y)
}

// Runs returns how many steps each mode has run.
func (m *Modes) Runs() []int64 { return append([]int64(nil), m.runs...) }
