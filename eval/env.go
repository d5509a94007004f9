package eval

import (
	"fmt"
	"math"
	"slices"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/sim"
)

// EnvOptions configure NewEnv.
type EnvOptions struct {
	// Checkpoint is the interval, in ops, of Result.Points (default: a
	// hundredth of the workload, at least 1).
	Checkpoint int64
	// Stop, when set, is asked at every checkpoint: when it says true the
	// run ends there (Ctrl-C in replay) and its Result covers the ops run
	// so far, against the oracle's cost of those ops.
	Stop func() bool
	// Model is the execution model runs are timed under (default
	// sim.Serial, the model before queues): under Async and Synchronous
	// an op's duration is the time it occupies its device
	// (sim.Arm.TruthIn), and Result.MakespanUs is the run's critical
	// path on a sim.Timeline; thompson is told each arm's queue wait.
	Model sim.ExecModel
	// Seed draws the durations that OracleUs and Truth report before the
	// first Run (Run redraws for its own seed).
	Seed uint64
}

// Env is a workload materialised against a set of arms, with everything
// the policies are compared on precomputed once: each distinct spec's task
// and true means, and the oracle. Run replays it under any policy,
// deterministically by seed.
//
// # Cost and oracle
//
// The cost of a policy is the sum, over ops, of the drawn compute
// duration on the arm it chose (noise, spikes, warm-up and the events
// included) and the transfer of the op's activations when they lie on the
// other side of a link: an op it reads (sim.Op.After; the previous op
// when nil) ran on a device that does not share memory with the chosen
// one (latency + bytes / bandwidth of every link crossed, at the
// profile's true figures, without noise). The oracle prices the same
// copies (TestOracleReadsAfter).
//
// Durations are drawn once per seed, for every op on every arm, and every
// policy run with that seed is charged those draws (common random
// numbers): two policies differ only by their choices, never by luck.
//
// The oracle (DESIGN.md § Evaluation) is the best fixed arm per bucket in
// hindsight on those draws, per stationary segment: events split the
// stream into segments, and in each the oracle keeps one arm per bucket.
// Transfers and warm-up couple buckets, so the assignment is found by
// coordinate descent, each move the exact change of the total, started
// from the compute-optimal assignment and from every arm for all: its
// cost is never above a fixed arm's, so a fixed policy's regret is never
// negative. A policy that learns can still beat it: it may place the
// shapes of one bucket apart, or follow drift inside a segment, which a
// per-bucket assignment cannot.
// Regret % = (policy − oracle) / oracle × 100.
//
// Two shares describe a policy's decisions: OffOraclePct, the decisions
// not on the oracle's arm for that op (every policy measured the same
// way, whatever it believes), and LearnPct, the decisions the policy
// made to learn (Explorer; 0 for a policy that never explores).
type Env struct {
	name     string
	model    sim.ExecModel
	arms     []sim.Arm
	bArms    []Arm
	nA       int
	ops      []opRec
	keys     []keyInfo
	kernels  map[string]int32 // kernel (op or opaque name, dtype) → index: what warms up
	bNames   []string
	bounds   []int64     // segment starts, bounds[0] = 0
	factor   [][]float64 // [segment][arm] compute slowdown
	linkF    [][]float64 // [segment][arm] link slowdown (sim.Contention)
	assign   []int32     // [segment·buckets + bucket] oracle arm
	marginal []float64   // [(segment·buckets + bucket)·arms + arm] oracle's mean cost, µs
	every    int64
	stop     func() bool
	oracle   []float64 // cumulative oracle cost at each checkpoint
	oracleUs float64
	// shapeOracleUs is the per-shape oracle's expected total: the best
	// arm for each shape (key) and segment, transfers included.
	shapeOracleUs float64
	oShare        []int64
	oBucket       [][]int64 // [bucket][arm] oracle decisions
	cur           int64     // op being run, for Truth
	// afters are the distinct sim.Op.After lists (afters[0] = nil), found
	// by their first element's address: an opRec keeps an index.
	afters  [][]int
	afterOf map[*int]int32
	// ins[inStart[t]:inStart[t+1]] are op t's input groups, outs[outStart[t]:
	// outStart[t+1]] those other ops read from it (flows): the copies the
	// oracle prices as Run charges them.
	ins, outs         []flow
	inStart, outStart []int32
	// noise[t·arms + a] is op t's drawn multiplicative noise on arm a for
	// drawSeed (draw).
	noise    []float64
	drawSeed uint64
	drawn    bool
	warms    bool // some arm's first run of a kernel is slower (WarmupFactor > 1)
}

type opRec struct {
	key, bucket int32
	act         int64
	after       int32 // index of its sim.Op.After in Env.afters; 0: the op before
	wait        bool  // sim.Op.HostWait
}

type keyInfo struct {
	spec   kernels.Spec
	task   Task
	kernel int32     // index in Env.kernels
	base   []float64 // per arm: noise-free mean, µs (spikes excluded)
	sigma  []float64 // per arm: σ of ln
}

// NewEnv reads w to its end and prepares it against arms (1 to
// adaptive.MaxBackends, as many as a Residency tells apart). Every op
// must be runnable by every arm (opaque ops only by table arms).
func NewEnv(w sim.Workload, arms []sim.Arm, opt EnvOptions) (*Env, error) {
	if len(arms) == 0 {
		return nil, fmt.Errorf("%w: no arms", ErrInvalidSetup)
	}
	if len(arms) > adaptive.MaxBackends {
		// Rule: refused here. Reason: Run's queue waits and the oracle's
		// warm-up are sized for MaxBackends, and indexed past it panicked
		// (TestEnvRejectsTooManyArms).
		return nil, fmt.Errorf("%w: %d arms, at most %d", ErrInvalidSetup, len(arms), adaptive.MaxBackends)
	}
	if opt.Model > sim.Synchronous {
		return nil, fmt.Errorf("%w: execution model %v", ErrInvalidSetup, opt.Model)
	}
	e := &Env{name: w.Name(), model: opt.Model, arms: arms, nA: len(arms), kernels: map[string]int32{}}
	seen := map[string]bool{}
	for i, a := range arms {
		if a.Profile == nil {
			return nil, fmt.Errorf("%w: arm %d has no profile", ErrInvalidSetup, i)
		}
		if err := a.Profile.Validate(); err != nil {
			return nil, err
		}
		ba := ArmOf(a.Profile.Info())
		if seen[ba.Name] {
			return nil, fmt.Errorf("%w: arm %q twice", ErrInvalidSetup, ba.Name)
		}
		seen[ba.Name] = true
		e.bArms = append(e.bArms, ba)
		for _, ev := range a.Events {
			if err := ev.Validate(); err != nil {
				return nil, err
			}
			if ev.Kind != sim.Throttle && ev.Kind != sim.Contention {
				return nil, fmt.Errorf("%w: the harness replays throttle and contention, not %v (inject errors through sim.Device)", sim.ErrInvalidEvent, ev.Kind)
			}
		}
	}
	for {
		op, ok := w.Next()
		if !ok {
			break
		}
		if err := e.addOp(op); err != nil {
			return nil, err
		}
	}
	if len(e.ops) == 0 {
		return nil, fmt.Errorf("%w: workload %q is empty", ErrInvalidSetup, e.name)
	}
	e.stop = opt.Stop
	e.every = opt.Checkpoint
	if e.every <= 0 {
		e.every = max(int64(len(e.ops))/100, 1)
	}
	for _, a := range arms {
		e.warms = e.warms || a.Profile.WarmupFactor > 1
	}
	e.flows()
	e.segments()
	e.draw(opt.Seed)
	return e, nil
}

func (e *Env) addOp(op sim.Op) error {
	if op.Key < 0 || op.Key > len(e.keys) || op.Bucket < 0 || op.Bucket > len(e.bNames) {
		return fmt.Errorf("%w: op %d: key %d or bucket %d out of order", ErrInvalidSetup, len(e.ops), op.Key, op.Bucket)
	}
	if op.Bucket == len(e.bNames) {
		e.bNames = append(e.bNames, op.BucketName)
	}
	if op.Key == len(e.keys) {
		k, err := e.newKey(op)
		if err != nil {
			return err
		}
		e.keys = append(e.keys, k)
	}
	for _, b := range op.After {
		if b < 1 || b > len(e.ops) {
			return fmt.Errorf("%w: op %d reads op %d back", ErrInvalidSetup, len(e.ops), b)
		}
	}
	e.ops = append(e.ops, opRec{key: int32(op.Key), bucket: int32(op.Bucket), act: op.ActBytes, after: e.afterIndex(op.After), wait: op.HostWait})
	return nil
}

func (e *Env) newKey(op sim.Op) (keyInfo, error) {
	s := op.Spec
	if err := s.Validate(); err != nil {
		return keyInfo{}, fmt.Errorf("%w: op %d: %w", ErrInvalidSetup, len(e.ops), err)
	}
	k := keyInfo{spec: s, base: make([]float64, e.nA), sigma: make([]float64, e.nA)}
	k.task.Bucket = op.Bucket
	describe(&k.task, &k.spec)
	k.task.Transfer = make([]float64, e.nA)
	kn := sim.KernelKey(s)
	kid, ok := e.kernels[kn]
	if !ok {
		kid = int32(len(e.kernels))
		e.kernels[kn] = kid
	}
	k.kernel = kid
	for a, arm := range e.arms {
		base, sigma, err := arm.TruthIn(s, e.model)
		if err != nil {
			return keyInfo{}, fmt.Errorf("%w: op %d: %w", ErrInvalidSetup, len(e.ops), err)
		}
		k.base[a], k.sigma[a] = base, sigma
	}
	return k, nil
}

// Name returns the workload's name.
func (e *Env) Name() string { return e.name }

// Ops returns the number of ops.
func (e *Env) Ops() int { return len(e.ops) }

// Arms returns what the policies see of the arms: names, kinds and nominal
// figures. The caller owns the returned slice.
func (e *Env) Arms() []Arm { return slices.Clone(e.bArms) }

// Buckets returns the bucket names, by index.
func (e *Env) Buckets() []string { return slices.Clone(e.bNames) }

// OracleUs returns the oracle's total cost in µs on the draws of the
// last Run's seed (EnvOptions.Seed before the first).
func (e *Env) OracleUs() float64 { return e.oracleUs }

// Truth is the ground truth that the oracle policy is given: the oracle's
// cost per op in µs, on the drawn durations, of bucket's ops on arm in the
// segment of the op now being run (compute and the transfers the oracle's assignment implies).
// Its argmin per bucket is the oracle's assignment. It is only meaningful
// while Run runs.
func (e *Env) Truth(bucket, arm int) float64 {
	if bucket < 0 || bucket >= len(e.bNames) || arm < 0 || arm >= e.nA {
		return math.Inf(1)
	}
	s := e.segOf(e.cur, 0)
	return e.marginal[(s*len(e.bNames)+bucket)*e.nA+arm]
}

// Point is the cumulative cost of a policy and of the oracle over the
// ops before Op.
type Point struct {
	Op                 int64
	PolicyUs, OracleUs float64
}

// RegretPct returns the cumulative regret at p, in percent.
func (p Point) RegretPct() float64 { return pct(p.PolicyUs, p.OracleUs) }

// BucketResult is one bucket's decisions.
type BucketResult struct {
	Name      string
	Ops       int64
	Decisions []int64 // per arm: ops the policy placed there
	Oracle    []int64 // per arm: ops the oracle placed there
}

// Result is one policy's run on an Env. Shares are fractions of all ops.
type Result struct {
	Policy, Workload string
	Arms             []string
	Ops              int64
	// TotalUs = ComputeUs + TransferUs: what the policy's choices cost.
	TotalUs, ComputeUs, TransferUs float64
	OracleUs                       float64
	RegretPct                      float64
	// Switches counts decisions whose arm differs from the previous
	// decision of the same bucket; ShapeSwitches from the previous
	// decision of the same shape.
	Switches, ShapeSwitches int64
	// ShapeOracleUs is the per-shape oracle's expected total (the best arm
	// for each shape rather than each bucket), ShapeRegretPct the regret
	// against it: at least RegretPct, where the best arm differs between
	// the shapes of a bucket. Both are 0 for a run Stopped early.
	ShapeOracleUs, ShapeRegretPct float64
	// LearnPct is the share of decisions the policy made to learn, in %
	// (Explorer; 0 for a policy without it): thompson's reasons Explore
	// and Prior, where Telemetry's exploration share is Explore alone.
	LearnPct float64
	// OffOraclePct is the share of decisions not on the oracle's arm for
	// that op, in %.
	OffOraclePct float64
	Share        []float64 // per arm, the policy's decisions
	OracleShare  []float64 // per arm, the oracle's
	Buckets      []BucketResult
	// Points are cumulative costs every EnvOptions.Checkpoint ops, from op
	// 0 to the end: regret over time.
	Points []Point
	// Stopped reports that EnvOptions.Stop ended the run early: Ops,
	// OracleUs and the figures above cover the ops run (the oracle's
	// shares and per-bucket decisions still cover the whole workload).
	Stopped bool
	// The run as timed under EnvOptions.Model (eval/clock.go): its
	// makespan (TotalUs under sim.Serial), its placement's bound (the
	// most of the host's IssueUs and each arm's BusyUs), the host's time
	// synchronising, and Steps, the ops the host waited for (a decode's
	// tokens are Steps × its batch).
	Model                                sim.ExecModel
	MakespanUs, BoundUs, IssueUs, SyncUs float64
	BusyUs                               []float64
	Steps                                int64
}

// RegretBetween returns the regret in percent of the ops in [from, to):
// both must be checkpoints (multiples of the interval, or the end).
func (r Result) RegretBetween(from, to int64) (float64, error) {
	find := func(op int64) (Point, bool) {
		i, ok := slices.BinarySearchFunc(r.Points, op, func(p Point, op int64) int { return int(p.Op - op) })
		if !ok {
			return Point{}, false
		}
		return r.Points[i], true
	}
	a, okA := find(from)
	b, okB := find(to)
	if !okA || !okB || to <= from {
		return 0, fmt.Errorf("%w: ops [%d, %d) do not fall on checkpoints", ErrInvalidSetup, from, to)
	}
	return pct(b.PolicyUs-a.PolicyUs, b.OracleUs-a.OracleUs), nil
}

func pct(policy, oracle float64) float64 {
	if oracle <= 0 {
		return 0
	}
	return (policy - oracle) / oracle * 100
}

// Run replays the workload under p, charging the durations drawn for seed
// (the same for every policy run with seed), and reports its cost against
// the oracle on those draws. p must have been built
// for e.Arms(); it is told the compute µs of each op it placed. Runs of
// one Env must not overlap (Truth reads the op being run). It fails when p
// returns an arm out of range.
func (e *Env) Run(p Policy, seed uint64) (Result, error) { return e.RunEach(p, seed, nil) }

// RunEach is Run that also calls each, when not nil, after every op with
// its Task (valid during the call), the arm chosen and the compute µs
// drawn: what a recorder or a decision map needs, without wrapping p
// (which would hide its optional capabilities).
func (e *Env) RunEach(p Policy, seed uint64, each func(t *Task, arm int, us float64)) (Result, error) {
	xo, _ := p.(TransferObserver)
	ex, _ := p.(Explorer)
	e.draw(seed)
	nA, nb := e.nA, len(e.bNames)
	res := Result{
		Policy: p.Name(), Workload: e.name, Ops: int64(len(e.ops)), OracleUs: e.oracleUs,
		Share: make([]float64, nA), OracleShare: make([]float64, nA),
	}
	for _, a := range e.bArms {
		res.Arms = append(res.Arms, a.Name)
	}
	tl := newTally(nA, nb, len(e.keys))
	warm := make([]bool, len(e.kernels)*nA)
	var explore int64
	ran := int64(len(e.ops))
	seg, oi := 0, 0
	ck := newClock(e.model, e.arms, len(e.ops))
	var inBuf [adaptive.MaxInputs]input
	for t, o := range e.ops {
		ti := int64(t)
		e.cur = ti
		if ti%e.every == 0 {
			if ti > 0 && e.stop != nil && e.stop() {
				res.Stopped, ran = true, ti
				break
			}
			res.Points = append(res.Points, Point{Op: ti, PolicyUs: res.TotalUs, OracleUs: e.oracle[oi]})
			oi++
		}
		seg = e.segOf(ti, seg)
		k := &e.keys[o.key]
		task := &k.task
		ins := ck.inputs(t, &o, e.afters, &inBuf)
		e.residency(task, ins)
		ck.queueWait(&task.Res, ins)
		a := p.Choose(task)
		if ex != nil && ex.Explored() {
			explore++
		}
		if a < 0 || a >= nA {
			return Result{}, fmt.Errorf("%w: policy %s chose arm %d of %d", ErrInvalidSetup, p.Name(), a, nA)
		}
		us := e.cost(t, seg, a)
		if w := &warm[int(k.kernel)*nA+a]; !*w {
			*w = true
			if f := e.arms[a].Profile.WarmupFactor; f > 1 {
				us *= f
			}
		}
		p.Observe(task, a, us)
		if each != nil {
			each(task, a, us)
		}
		x := e.copiesUs(ins, a, seg, xo)
		ck.linkF = e.linkF[seg]
		ck.run(t, ins, a, us, o.wait)
		if o.wait {
			res.Steps++
		}
		res.ComputeUs += us
		res.TransferUs += x
		res.TotalUs += us + x
		tl.add(&res, o.bucket, o.key, a, int(e.assign[seg*nb+int(o.bucket)]) != a)
	}
	n := float64(ran)
	if res.Stopped {
		res.Ops, res.OracleUs = ran, e.oracle[oi]
	}
	res.Points = append(res.Points, Point{Op: ran, PolicyUs: res.TotalUs, OracleUs: res.OracleUs})
	ck.finish(&res)
	res.RegretPct = pct(res.TotalUs, res.OracleUs)
	if !res.Stopped {
		res.ShapeOracleUs = e.shapeOracleUs
		res.ShapeRegretPct = pct(res.TotalUs, e.shapeOracleUs)
	}
	res.LearnPct = float64(explore) / n * 100
	res.OffOraclePct = float64(tl.offOracle) / n * 100
	for a := range nA {
		res.Share[a] = float64(tl.counts[a]) / n
		// The oracle's decisions cover the whole workload, Stopped or not
		// (TestStoppedShares).
		res.OracleShare[a] = float64(e.oShare[a]) / float64(len(e.ops))
	}
	for b, name := range e.bNames {
		br := BucketResult{Name: name, Decisions: tl.perBucket[b], Oracle: e.oBucket[b]}
		for _, c := range tl.perBucket[b] {
			br.Ops += c
		}
		res.Buckets = append(res.Buckets, br)
	}
	return res, nil
}
