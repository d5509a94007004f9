package eval

import (
	"math"
	"math/rand/v2"
)

// perBucket returns the state of bucket b, growing s on demand; every
// bucket holds one T per arm.
func perBucket[T any](s *[][]T, b, arms int) []T {
	if b < 0 {
		b = 0
	}
	for len(*s) <= b {
		*s = append(*s, make([]T, arms))
	}
	return (*s)[b]
}

// StarPU's history-model constants (perfmodel_history.c).
const (
	// CalibrationMinimum is the number of accepted samples per arm and
	// bucket before the model is trusted (STARPU_CALIBRATE_MINIMUM).
	CalibrationMinimum = 10
	// historyMaxError is STARPU_HISTORY_MAX_ERROR, in percent.
	historyMaxError = 50
)

type calArm struct {
	entry           bool // an entry exists: the first measurement was seen (and discarded)
	nsample, nerror int
	sum             float64
}

func (a *calArm) mean() float64 { return a.sum / float64(a.nsample) }

type calibrate struct {
	arms    int
	buckets [][]calArm
	forced  bool // the last Choose forced a calibration sample
}

// NewCalibrate returns "calibrate", StarPU's history-based model as
// perfmodel_history.c implements it, per bucket and arm: the first
// measurement only creates the entry ("very often quite bogus"); a later
// one whose ratio to the mean exceeds 1 + 50% either way is an error and
// is not recorded, and when errors reach the recorded samples the entry is
// flushed and starts again; an arm with fewer than CalibrationMinimum
// recorded samples is forced (the lowest such index first); once every arm
// is calibrated the lowest mean wins and the others are never tried again.
// Only the chosen arm is measured, so a mean poisoned during calibration
// is never corrected: that is the comparison DESIGN.md draws.
func NewCalibrate(arms []Arm) Policy { return &calibrate{arms: len(arms)} }

func (p *calibrate) Name() string { return "calibrate" }

func (p *calibrate) Choose(t *Task) int {
	st := perBucket(&p.buckets, t.Bucket, p.arms)
	best, bestMean := 0, math.Inf(1)
	p.forced = false
	for i := range st {
		if st[i].nsample < CalibrationMinimum {
			p.forced = true
			return i
		}
		if m := st[i].mean(); m < bestMean {
			best, bestMean = i, m
		}
	}
	return best
}

// Explored implements Explorer: the last choice forced a calibration
// sample.
func (p *calibrate) Explored() bool { return p.forced }

func (p *calibrate) Observe(t *Task, arm int, us float64) {
	st := perBucket(&p.buckets, t.Bucket, p.arms)
	if arm < 0 || arm >= len(st) || !(us >= 0) || math.IsInf(us, 0) {
		return
	}
	a := &st[arm]
	if !a.entry {
		a.entry = true
		return
	}
	if a.nsample > 0 {
		dev := us / a.mean()
		if 100*dev > 100+historyMaxError || 100/dev > 100+historyMaxError {
			a.nerror++
			if a.nerror >= a.nsample {
				a.nsample, a.nerror, a.sum = 0, 0, 0 // flush
			}
			return
		}
	}
	a.sum += us
	a.nsample++
}

// CalibrationState reports, for tests and telemetry, the recorded samples
// and mean (µs) of arm in bucket under a "calibrate" policy; ok is false
// for another policy or an unseen bucket.
func CalibrationState(p Policy, bucket, arm int) (samples int, meanUs float64, ok bool) {
	c, isCal := p.(*calibrate)
	if !isCal || bucket < 0 || bucket >= len(c.buckets) || arm < 0 || arm >= c.arms {
		return 0, 0, false
	}
	a := c.buckets[bucket][arm]
	if a.nsample == 0 {
		return 0, math.NaN(), true
	}
	return a.nsample, a.mean(), true
}

// minUs is the shortest duration ucb1 takes the log of (1 ns).
const minUs = 1e-3

type meanArm struct {
	n    int
	mean float64
}

func (a *meanArm) add(x float64) {
	a.n++
	a.mean += (x - a.mean) / float64(a.n)
}

type egreedy struct {
	arms    int
	eps     float64
	r       *rand.Rand
	buckets [][]meanArm
	random  bool // the last Choose was a random pick or an untried arm
}

// NewEpsilonGreedy returns "egreedy": per bucket, with probability eps a
// uniformly random arm, otherwise the arm with the lowest mean duration
// in µs (arms not yet tried first). eps is clamped to [0, 1].
func NewEpsilonGreedy(arms []Arm, eps float64, r *rand.Rand) Policy {
	return &egreedy{arms: len(arms), eps: math.Min(math.Max(eps, 0), 1), r: r}
}

func (p *egreedy) Name() string { return "egreedy" }

func (p *egreedy) Choose(t *Task) int {
	st := perBucket(&p.buckets, t.Bucket, p.arms)
	p.random = true
	if len(st) == 0 {
		return 0
	}
	if p.r.Float64() < p.eps {
		return p.r.IntN(len(st))
	}
	best := 0
	for i := range st {
		if st[i].n == 0 {
			return i
		}
		if st[i].mean < st[best].mean {
			best = i
		}
	}
	p.random = false
	return best
}

// Explored implements Explorer: the last choice was the ε draw or an arm
// not yet tried.
func (p *egreedy) Explored() bool { return p.random }

func (p *egreedy) Observe(t *Task, arm int, us float64) {
	st := perBucket(&p.buckets, t.Bucket, p.arms)
	if arm >= 0 && arm < len(st) && us >= 0 && !math.IsInf(us, 0) {
		st[arm].add(us)
	}
}

type ucb1 struct {
	arms    int
	buckets [][]meanArm
	total   []int
	bonus   bool // the last Choose was not the arm of the best mean
}

// NewUCB1 returns "ucb1": per bucket, each arm once, then the arm with the
// lowest confidence bound mean(y) − sqrt(2·ln N / n) on y = ln(µs), N the
// bucket's plays and n the arm's. Log costs make the bonus scale-free: a
// unit of reward range is one e-fold of duration, which covers the gaps
// between backends that matter (1.2× to 10×) without knowing µs scales.
func NewUCB1(arms []Arm) Policy { return &ucb1{arms: len(arms)} }

func (p *ucb1) Name() string { return "ucb1" }

func (p *ucb1) Choose(t *Task) int {
	st := perBucket(&p.buckets, t.Bucket, p.arms)
	for len(p.total) < len(p.buckets) {
		p.total = append(p.total, 0)
	}
	lnN := math.Log(float64(max(p.total[max(t.Bucket, 0)], 1)))
	best, bestB, greedy := 0, math.Inf(1), 0
	p.bonus = true
	for i := range st {
		if st[i].n == 0 {
			return i
		}
		if b := st[i].mean - math.Sqrt(2*lnN/float64(st[i].n)); b < bestB {
			best, bestB = i, b
		}
		if st[i].mean < st[greedy].mean {
			greedy = i
		}
	}
	p.bonus = best != greedy
	return best
}

// Explored implements Explorer: the last choice was an untried arm, or
// its confidence bonus overturned the best mean.
func (p *ucb1) Explored() bool { return p.bonus }

func (p *ucb1) Observe(t *Task, arm int, us float64) {
	st := perBucket(&p.buckets, t.Bucket, p.arms)
	for len(p.total) < len(p.buckets) {
		p.total = append(p.total, 0)
	}
	if arm >= 0 && arm < len(st) && !math.IsNaN(us) && !math.IsInf(us, 0) {
		st[arm].add(math.Log(math.Max(us, minUs)))
		p.total[max(t.Bucket, 0)]++
	}
}

type oracle struct {
	arms int
	mean func(bucket, arm int) float64
}

// NewOracle returns "oracle": the arm with the lowest true mean duration
// (mean(bucket, arm), µs) for the task's bucket, ties to the lower index.
// It is the only policy that sees the simulator's ground truth.
func NewOracle(arms []Arm, mean func(bucket, arm int) float64) Policy {
	return &oracle{arms: len(arms), mean: mean}
}

func (p *oracle) Name() string { return "oracle" }

func (p *oracle) Choose(t *Task) int {
	best, bestM := 0, math.Inf(1)
	for i := 0; i < p.arms; i++ {
		if m := p.mean(t.Bucket, i); m < bestM {
			best, bestM = i, m
		}
	}
	return best
}

func (p *oracle) Observe(*Task, int, float64) {}

type fixed struct {
	name string
	arm  int
}

// NewFixed returns the policy that puts everything on arm, named "gpu" or
// "cpu" after its kind. An arm out of range is a programmer error and
// panics.
func NewFixed(arms []Arm, arm int) Policy {
	name := "cpu"
	if arms[arm].GPU {
		name = "gpu"
	}
	return &fixed{name: name, arm: arm}
}

func (p *fixed) Name() string                { return p.name }
func (p *fixed) Choose(*Task) int            { return p.arm }
func (p *fixed) Observe(*Task, int, float64) {}

var (
	_ Policy = (*staticPolicy)(nil)
	_ Policy = (*roofline)(nil)
	_ Policy = (*calibrate)(nil)
	_ Policy = (*egreedy)(nil)
	_ Policy = (*ucb1)(nil)
	_ Policy = (*oracle)(nil)
	_ Policy = (*fixed)(nil)
)
