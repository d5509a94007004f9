package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/eval"
	"github.com/adaptsched/adaptsched/sim"
	"github.com/adaptsched/adaptsched/trace"
)

// maxArms is the most backends a replay compares: thompson's limit.
const maxArms = adaptive.MaxBackends

// eventIter is a stream of trace events: a trace.Reader, or the ops of
// an imported Chrome trace.
type eventIter interface {
	// NextInto decodes the next event into e (trace.Reader.NextInto):
	// e's slices and map are valid until the next call.
	NextInto(e *trace.Event) error
	Line() int
	Skipped() int
}

// traceInput is a trace to replay, read once.
type traceInput struct {
	name   string
	header trace.Header
	note   string // said in the report
	// open returns the stream of events (an adaptsched trace's after its
	// header, which it sets); it may be called once.
	open   func() (eventIter, error)
	opened bool
	it     eventIter // opened by readHeader, for the scan
	closer io.Closer // the file under it, or nil
}

// events returns the trace's events, opening it unless readHeader has.
func (in *traceInput) events() (eventIter, error) {
	if in.it != nil {
		it := in.it
		in.it = nil
		return it, nil
	}
	return in.open()
}

// close closes the file under the trace, if any.
func (in *traceInput) close() {
	if in.closer != nil {
		in.closer.Close()
	}
}

// armInfo is one backend of a trace replay.
type armInfo struct {
	name     string
	gpu      bool
	info     backends.Info // what policies see: kind and nominal figures
	prof     *sim.Profile  // model of counterfactual durations, or nil
	tableCol int           // column of the -table model, or -1
	model    bool          // added for a model: no event ran on it
	// described is true when the header or the backend's name (a
	// profile's) gave its nominal figures; otherwise a model's profile
	// gives them, or the defaults.
	described bool
}

// tracePolicy is one policy of a trace replay with its own accounting.
type tracePolicy struct {
	p    eval.Policy
	ex   eval.Explorer // p's, or nil
	run  policyRun
	last []int8 // per bucket, the previous decision (-1: none)
	dmap *decisionMap
}

// replayTrace replays a trace: pass 1 parses it (the only time) into
// the scanner and its spool, and pass 2 replays the spool under every
// policy, solving the oracle on the same durations as it goes.
func replayTrace(o *options, in *traceInput, table *sim.Table, prog *progress, stderr io.Writer) (rs *runSet, pd *plotData, err error) {
	s, err := newScanner(o, in, table)
	if err != nil {
		return nil, nil, err
	}
	defer s.spool.close()
	prog.phase("reading")
	if err := s.scan(); err != nil {
		return nil, nil, err
	}
	notes, err := s.finish()
	if err != nil {
		return nil, nil, err
	}
	if in.note != "" {
		notes = append([]string{in.note}, notes...)
	}
	rs = &runSet{input: in.name, skipped: s.bad, notes: notes, seed: o.seed, top: o.top}
	var included int64
	for _, a := range s.arms {
		rs.arms = append(rs.arms, a.name)
	}
	for _, b := range s.buckets {
		rs.bucketNames = append(rs.bucketNames, b.name)
		if b.excluded {
			rs.excludedOps += b.ops
			rs.excludedBkts = append(rs.excludedBkts, b.name)
			rs.bucketOps = append(rs.bucketOps, 0)
			continue
		}
		included += b.ops
		rs.bucketOps = append(rs.bucketOps, b.ops)
	}
	rs.excluded = s.excludedGroups(o.top)
	if included == 0 {
		return nil, nil, fmt.Errorf("%w: %s: no op can be compared (%d ops read, %d excluded: %s)",
			errInput, in.name, s.ops, rs.excludedOps, excludedSummary(rs.excluded))
	}
	warning, err := checkExcluded(o, s)
	if err != nil {
		return nil, nil, err
	}
	arms := make([]eval.Arm, len(s.arms))
	for i, a := range s.arms {
		arms[i] = eval.ArmOf(a.info)
	}
	truth := func(bucket, arm int) float64 {
		if bucket < 0 || bucket >= len(s.buckets) || arm < 0 || arm >= len(s.arms) || s.buckets[bucket].excluded {
			return math.Inf(1)
		}
		return s.buckets[bucket].mean[arm]
	}
	ps, closeDB, pnotes, err := buildPolicies(o, arms, truth, &storeSetup{fingerprint: in.header.Fingerprint, log: stderr})
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if cerr := closeDB(); cerr != nil && err == nil {
			rs, pd, err = nil, nil, cerr
		}
	}()
	rs.notes = append(rs.notes, pnotes...)
	if warning != "" {
		fmt.Fprintln(stderr, warning)
	}
	pd = &plotData{arms: rs.arms}
	tps, oraclePos := newTracePolicies(ps, len(s.buckets), len(arms), included, pd)
	prog.phase("replaying")
	ho := newHindsight(len(s.buckets), len(s.arms))
	op, err := s.replaySpool(tps, newOpCosts(o.seed), ho, included, rs, stderr)
	if err != nil {
		return nil, nil, err
	}
	ho.point(op)
	for i, b := range s.buckets {
		rs.oracleArm = append(rs.oracleArm, ho.finish(i, b))
	}
	for _, tp := range tps {
		tp.run.reasons = reasonsOf(tp.p)
		tp.run.oracleUs = ho.totalUs
		tp.run.offOracle = ho.offOracle(tp.run.perBucket)
		tp.run.points = append(tp.run.points, point{op: op, policyUs: tp.run.totalUs, oracle: ho.totalUs})
		rs.runs = append(rs.runs, tp.run)
	}
	if oraclePos >= 0 {
		rs.runs = slices.Insert(rs.runs, oraclePos, ho.run(op, len(s.arms)))
	}
	return rs, pd, nil
}

// newTracePolicies gives each policy of ps its accounting over buckets
// and arms, thompson a decision map for the plot; the oracle policy is
// left out, its run derived from the oracle's, and oraclePos is where it
// goes in the report (-1: not asked for).
func newTracePolicies(ps []eval.Policy, buckets, arms int, included int64, pd *plotData) (tps []*tracePolicy, oraclePos int) {
	oraclePos = -1
	for i, p := range ps {
		if p.Name() == "oracle" {
			oraclePos = i
			continue
		}
		tp := &tracePolicy{p: p, last: make([]int8, buckets),
			run: policyRun{name: p.Name(), counts: make([]int64, arms), perBucket: make([][]int64, buckets)}}
		for b := range tp.last {
			tp.last[b] = -1
			tp.run.perBucket[b] = make([]int64, arms)
		}
		if p.Name() == "thompson" {
			tp.dmap = newDecisionMap(included, arms)
			pd.dmap = tp.dmap
		}
		tp.ex, _ = p.(eval.Explorer)
		tps = append(tps, tp)
	}
	return tps, oraclePos
}

// replaySpool is pass 2: every spooled op under every policy, each charged
// the op's costs (measured, or drawn once for all), which ho sums for the
// oracle. It returns the ops replayed.
func (s *scanner) replaySpool(tps []*tracePolicy, costs *opCosts, ho *hindsight, included int64, rs *runSet, stderr io.Writer) (op int64, err error) {
	sr, err := s.spool.reader()
	if err != nil {
		return 0, err
	}
	every := max(included/200, 1)
	var meas []measurement
	for rec := int64(0); ; rec++ {
		if onOp != nil {
			onOp(op)
		}
		if interrupted.Load() {
			fmt.Fprintln(stderr, "replay: interrupted: reporting the ops replayed so far (again to quit at once)")
			rs.notes = append(rs.notes, fmt.Sprintf("interrupted: the figures cover the first %d of %d ops compared", op, included))
			break
		}
		var idx int32
		idx, meas, err = sr.next(meas)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
		if int(idx) >= len(s.entries) {
			return 0, fmt.Errorf("%w: op %d of %d", errSpool, idx, len(s.entries))
		}
		ent := s.entries[idx]
		b := s.buckets[ent.task.Bucket]
		if b.excluded {
			continue
		}
		if op%every == 0 {
			ho.point(op)
			for _, tp := range tps {
				tp.run.points = append(tp.run.points, point{op: op, policyUs: tp.run.totalUs, oracle: ho.totalUs})
			}
		}
		costs.fill(s, rec, b, ent, meas)
		ho.add(ent.task.Bucket, costs)
		for _, tp := range tps {
			a := tp.p.Choose(&ent.task)
			if a < 0 || a >= len(s.arms) {
				return 0, fmt.Errorf("replay: policy %s chose backend %d of %d", tp.p.Name(), a, len(s.arms))
			}
			if tp.ex != nil && tp.ex.Explored() {
				tp.run.learn++
			}
			us := costs.us[a]
			tp.p.Observe(&ent.task, a, us)
			run := &tp.run
			run.totalUs += us
			run.ops++
			run.counts[a]++
			run.perBucket[ent.task.Bucket][a]++
			run.sources[costs.src[a]]++
			if l := tp.last[ent.task.Bucket]; l >= 0 && int(l) != a {
				run.switches++
			}
			tp.last[ent.task.Bucket] = int8(a)
			if tp.dmap != nil {
				tp.dmap.add(op, ent.class, a)
			}
		}
		op++
	}
	return op, nil
}

// drawCounterfactual returns a counterfactual duration of ent on arm a: lognormal
// around the bucket's measured mean on a (σ of its ln µs), or else around
// the model's mean for the op; the draw's mean is that mean.
func drawCounterfactual(b *bucketState, ent *specEntry, a int, r *rand.Rand) (float64, source) {
	mean, sigma, src := ent.model[a], ent.sigma[a], ent.msrc[a]
	if b.meas[a].n > 0 {
		mean, sigma, src = b.traceMean[a], b.traceSigma[a], srcTrace
	}
	return mean * math.Exp(sigma*r.NormFloat64()-sigma*sigma/2), src
}
