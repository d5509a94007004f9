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
// Each mode's posterior is a NormalGamma over ln(step µs). A mode runs
// ModesWarm steps before any is compared; every Done discounts every mode
// by ModesGamma, so a mode left alone regains uncertainty and is tried
// again: the per-op learner improves as it learns, and the device a rule
// relies on may slow. Modes is not safe for concurrent use.
type Modes struct {
	post  []NormalGamma
	prior []NormalGamma // set at each mode's first step
	runs  []int64
	r     *rand.Rand
}

const (
	// ModesWarm is the steps each mode runs before the modes are compared:
	// two give each a variance of its own.
	ModesWarm = 2
	// ModesGamma is the weight of a step per later step: a memory of about
	// 200 steps. With it a mode 1.4× slower runs at most 2% of the steps
	// once the modes are told apart (TestModesPicksFaster).
	ModesGamma = 0.995
	// modesSpread is the prior's spread of ln(step time), wide: a mode
	// left alone drifts back to its prior, and from there one 2× slower
	// than the incumbent draws below it about one step in twenty, so it is
	// tried again and taken if it has become faster (TestModesRetry).
	modesSpread = 0.3
	// modesStrength is the prior's weight in steps: the first step's time
	// sets the level, which the steps after it soon outweigh.
	modesStrength = 0.5
)

// NewModes returns a chooser over n modes (at least 1) drawing from a
// generator seeded with seed.
func NewModes(n int, seed uint64) (*Modes, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: %d modes", ErrBadStep, n)
	}
	return &Modes{post: make([]NormalGamma, n), prior: make([]NormalGamma, n), runs: make([]int64, n),
		r: rand.New(rand.NewPCG(seed, 0x6d6f646573))}, nil
}

// Next returns the mode to run the next step with: the first mode that
// has run fewer than ModesWarm steps, else the one whose Thompson draw of
// the expected step time is lowest.
func (m *Modes) Next() int {
	for i, n := range m.runs {
		if n < ModesWarm {
			return i
		}
	}
	best, bestUs := 0, math.Inf(1)
	for i := range m.post {
		if us := m.post[i].Sample(m.r); us < bestUs {
			best, bestUs = i, us
		}
	}
	return best
}

// Done records that a step run with mode took us µs. Non-positive or
// non-finite times and unknown modes are errors, and change nothing.
func (m *Modes) Done(mode int, us float64) error {
	if mode < 0 || mode >= len(m.post) {
		return fmt.Errorf("%w: mode %d of %d", ErrBadStep, mode, len(m.post))
	}
	if !(us > 0 && us < math.MaxFloat64) {
		return fmt.Errorf("%w: a step of %v µs", ErrBadStep, us)
	}
	for i := range m.post {
		if m.runs[i] > 0 {
			m.post[i].Discount(m.prior[i], ModesGamma)
		}
	}
	if m.runs[mode] == 0 {
		m.prior[mode] = NewPrior(us, modesStrength, modesSpread)
		m.post[mode] = m.prior[mode]
	}
	m.post[mode].Update(LnUs(us))
	m.runs[mode]++
	return nil
}

// Runs returns how many steps each mode has run.
func (m *Modes) Runs() []int64 { return append([]int64(nil), m.runs...) }
