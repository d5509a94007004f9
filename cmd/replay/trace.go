package main

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"

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

// traceInput is a trace that can be read twice (the replay's two passes).
type traceInput struct {
	name   string
	header trace.Header
	note   string // said in the report
	// open returns a fresh stream positioned at the first event.
	open func() (eventIter, io.Closer, error)
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

// seedOf derives a policy's stream from the seed and its name.
func seedOf(seed uint64, name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// tracePolicy is one policy of a trace replay with its own accounting.
type tracePolicy struct {
	p    eval.Policy
	ex   eval.Explorer // p's, or nil
	r    *rand.Rand
	run  policyRun
	last []int8 // per bucket, the previous decision (-1: none)
	dmap *decisionMap
}

// replayTrace is the two-pass replay of a trace.
func replayTrace(o *options, in *traceInput, table *sim.Table, prog *progress, stderr io.Writer) (rs *runSet, pd *plotData, err error) {
	s, err := newScanner(o, in, table)
	if err != nil {
		return nil, nil, err
	}
	prog.phase("pass 1/2")
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
			rs.oracleArm = append(rs.oracleArm, -1)
			continue
		}
		included += b.ops
		rs.bucketOps = append(rs.bucketOps, b.ops)
		rs.oracleArm = append(rs.oracleArm, b.oracle)
	}
	if included == 0 {
		return nil, nil, fmt.Errorf("%w: %s: no op can be compared (%d ops read, %d excluded: every backend needs a measurement in the trace or a -table / -profile model)",
			errInput, in.name, s.ops, rs.excludedOps)
	}
	warning, err := checkExcluded(o, s, rs.excludedOps)
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
	every := max(included/200, 1)
	pd = &plotData{arms: rs.arms}
	tps := make([]*tracePolicy, len(ps))
	for i, p := range ps {
		tp := &tracePolicy{p: p, r: seedOf(o.seed, p.Name()), last: make([]int8, len(s.buckets)),
			run: policyRun{name: p.Name(), counts: make([]int64, len(arms)), perBucket: make([][]int64, len(s.buckets))}}
		for b := range tp.last {
			tp.last[b] = -1
			tp.run.perBucket[b] = make([]int64, len(arms))
		}
		if p.Name() == "thompson" {
			tp.dmap = newDecisionMap(included, len(arms))
			pd.dmap = tp.dmap
		}
		tp.ex, _ = p.(eval.Explorer)
		tps[i] = tp
	}
	prog.phase("pass 2/2")
	it, c, err := in.open()
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	var read, op int64
	var bad int
	var oracleUs float64
	var meas [maxArms]float64
	var msrc [maxArms]source
	for {
		if onOp != nil {
			onOp(op)
		}
		if interrupted.Load() {
			fmt.Fprintln(stderr, "replay: interrupted: reporting the ops replayed so far (again to quit at once)")
			rs.notes = append(rs.notes, fmt.Sprintf("interrupted: the figures cover the first %d of %d ops compared", op, included))
			break
		}
		ev, ent, err := s.next(it, &read, &bad)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		if ent.n == 0 {
			return nil, nil, badLine(in, it, errors.New("an op that the first pass did not see: the input changed while it was replayed"))
		}
		b := s.buckets[ent.task.Bucket]
		if b.excluded {
			continue
		}
		if op%every == 0 {
			for _, tp := range tps {
				tp.run.points = append(tp.run.points, point{op: op, policyUs: tp.run.totalUs, oracle: oracleUs})
			}
		}
		meas = [maxArms]float64{}
		if ev.Backend != "" && measured(ev.ActualUs) {
			a := s.armIdx[ev.Backend]
			meas[a], msrc[a] = ev.ActualUs, srcMeasured
		}
		for k, v := range ev.Shadow {
			if a, ok := s.armIdx[k]; ok && measured(v) && meas[a] == 0 {
				meas[a], msrc[a] = v, srcShadow
			}
		}
		oracleUs += b.mean[b.oracle]
		for _, tp := range tps {
			a := tp.p.Choose(&ent.task)
			if a < 0 || a >= len(arms) {
				return nil, nil, fmt.Errorf("replay: policy %s chose backend %d of %d", tp.p.Name(), a, len(arms))
			}
			if tp.ex != nil && tp.ex.Explored() {
				tp.run.explore++
			}
			us, src := meas[a], msrc[a]
			if us == 0 {
				us, src = drawCounterfactual(b, ent, a, tp.r)
			}
			tp.p.Observe(&ent.task, a, us)
			run := &tp.run
			run.totalUs += us
			run.ops++
			run.counts[a]++
			run.perBucket[ent.task.Bucket][a]++
			run.sources[src]++
			if l := tp.last[ent.task.Bucket]; l >= 0 && int(l) != a {
				run.switches++
			}
			tp.last[ent.task.Bucket] = int8(a)
			if a != b.oracle {
				run.offOracle++
			}
			if tp.dmap != nil {
				tp.dmap.add(op, ent.class, a)
			}
		}
		op++
	}
	for _, tp := range tps {
		tp.run.reasons = reasonsOf(tp.p)
		tp.run.oracleUs = oracleUs
		tp.run.points = append(tp.run.points, point{op: op, policyUs: tp.run.totalUs, oracle: oracleUs})
		rs.runs = append(rs.runs, tp.run)
	}
	return rs, pd, nil
}

// drawCounterfactual returns a counterfactual duration of ent on arm a: lognormal
// around the bucket's measured mean on a (σ of its ln µs), or else around
// the model's mean for the op; the draw's mean is that mean.
func drawCounterfactual(b *bucketState, ent *specEntry, a int, r *rand.Rand) (float64, source) {
	mean, sigma, src := ent.model[a], ent.sigma[a], ent.msrc[a]
	if w := &b.meas[a]; w.n > 0 {
		mean, sigma, src = w.meanUs(), w.sigma(), srcTrace
	}
	return mean * math.Exp(sigma*r.NormFloat64()-sigma*sigma/2), src
}
