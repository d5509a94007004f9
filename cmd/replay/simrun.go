package main

import (
	"fmt"
	"io"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/eval"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/sim"
)

// workloadNames are the simulator workloads of -workload.
var workloadNames = []string{"mixed-serving", "decode", "prefill"}

// The simulator workloads' defaults.
const (
	defaultSimOps = 50_000 // ops of -workload and -table without -ops
	decodeBatch   = 8      // sequences of -workload decode
	decodeContext = 1024   // their starting context, tokens
	defaultGPU    = "h100" // the simulated GPU without -sim-gpu
)

// replayWorkload runs -workload on the simulator: the GPU of -sim-gpu
// and the CPU of -sim-cpu, through eval's harness.
func replayWorkload(o *options, stderr io.Writer) (*runSet, *plotData, error) {
	m, err := sim.LookupModel(o.model)
	if err != nil {
		return nil, nil, fmt.Errorf("replay: -model: %w", err)
	}
	n := o.ops
	if n == 0 {
		n = defaultSimOps
	}
	mk := func() (sim.Workload, error) {
		switch o.workload {
		case "decode":
			return sim.Decode(m, decodeBatch, decodeContext, n)
		case "prefill":
			return sim.Prefill(m, n, o.seed)
		}
		return sim.MixedServing(m, n, o.seed, sim.ServingOptions{})
	}
	gpu := o.profile
	if gpu == "" {
		gpu = defaultGPU
	}
	arms := []sim.Arm{{Profile: sim.MustProfile(gpu)}, {Profile: sim.MustProfile(o.cpuProfile)}}
	return replayEnv(o, mk, arms, stderr)
}

// replayTable runs a perf table's workload (rows drawn with Zipf
// frequencies, durations lognormal around the measured means).
func replayTable(o *options, t *sim.Table, stderr io.Writer) (*runSet, *plotData, error) {
	n := o.ops
	if n == 0 {
		n = defaultSimOps
	}
	mk := func() (sim.Workload, error) { return t.Workload(n, o.zipf, o.seed) }
	return replayEnv(o, mk, t.Arms(), stderr)
}

// replayEnv replays a simulator workload under every policy with
// eval.Env (each policy's durations drawn with the seed -seed).
func replayEnv(o *options, mk func() (sim.Workload, error), arms []sim.Arm, stderr io.Writer) (rs *runSet, pd *plotData, err error) {
	w, err := mk()
	if err != nil {
		return nil, nil, err
	}
	env, err := eval.NewEnv(w, arms, eval.EnvOptions{Stop: interrupted.Load, Model: o.exec})
	if err != nil {
		return nil, nil, err
	}
	ps, done, notes, err := buildPolicies(o, env.Arms(), env.Truth, &storeSetup{log: stderr})
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if cerr := done(); cerr != nil && err == nil {
			rs, pd, err = nil, nil, cerr
		}
	}()
	rs = &runSet{input: env.Name(), bucketNames: env.Buckets(), notes: notes, seed: o.seed, top: o.top}
	for _, a := range env.Arms() {
		rs.arms = append(rs.arms, a.Name)
	}
	pd = &plotData{arms: rs.arms}
	for _, p := range ps {
		var dm *decisionMap
		if p.Name() == "thompson" {
			dm = newDecisionMap(int64(env.Ops()), len(arms))
			pd.dmap = dm
		}
		op := int64(0)
		each := func(t *eval.Task, arm int, _ float64) {
			if onOp != nil {
				onOp(op)
			}
			if dm != nil {
				w := kernels.Work{FLOPs: int64(t.FLOPs), BytesRead: int64(t.BytesRead), BytesWritten: int64(t.BytesWritten)}
				dm.add(op, kernels.SizeClass(w), arm)
			}
			op++
		}
		res, err := env.RunEach(p, o.seed, each)
		if err != nil {
			return nil, nil, err
		}
		if res.Stopped {
			fmt.Fprintln(stderr, "replay: interrupted: reporting the ops replayed so far (again to quit at once)")
			rs.notes = append(rs.notes, fmt.Sprintf("interrupted: %s covers the first %d of %d ops; the policies after it were not run", p.Name(), res.Ops, env.Ops()))
			rs.runs = append(rs.runs, runOf(res))
			if rs.bucketOps == nil {
				rs.bucketOps, rs.oracleArm = bucketsOf(res)
			}
			break
		}
		run := runOf(res)
		run.reasons = reasonsOf(p)
		rs.runs = append(rs.runs, run)
		if rs.bucketOps == nil {
			rs.bucketOps, rs.oracleArm = bucketsOf(res)
		}
	}
	return rs, pd, nil
}

// bucketsOf returns each bucket's ops in a run and the oracle's majority
// backend of it.
func bucketsOf(res eval.Result) (ops []int64, oracleArm []int) {
	for _, b := range res.Buckets {
		ops = append(ops, b.Ops)
		best := 0
		for a := range b.Oracle {
			if b.Oracle[a] > b.Oracle[best] {
				best = a
			}
		}
		oracleArm = append(oracleArm, best)
	}
	return ops, oracleArm
}

// runOf converts a harness result.
func runOf(res eval.Result) policyRun {
	r := policyRun{name: res.Policy, totalUs: res.TotalUs, oracleUs: res.OracleUs, ops: res.Ops, switches: res.Switches,
		shapeOracleUs: res.ShapeOracleUs, shapeSwitches: res.ShapeSwitches,
		learn:     int64(res.LearnPct/100*float64(res.Ops) + 0.5),
		offOracle: int64(res.OffOraclePct/100*float64(res.Ops) + 0.5)}
	r.sources[srcSim] = res.Ops
	if res.Model != sim.Serial {
		r.makespanUs, r.boundUs = res.MakespanUs, res.BoundUs
	}
	for _, s := range res.Share {
		r.counts = append(r.counts, int64(s*float64(res.Ops)+0.5))
	}
	for _, b := range res.Buckets {
		r.perBucket = append(r.perBucket, b.Decisions)
	}
	for _, p := range res.Points {
		r.points = append(r.points, point{op: p.Op, policyUs: p.PolicyUs, oracle: p.OracleUs})
	}
	return r
}

// reasonsOf returns thompson's decisions by reason (name → count), nil
// for the other policies.
func reasonsOf(p eval.Policy) map[string]int64 {
	th, ok := p.(*eval.Thompson)
	if !ok {
		return nil
	}
	m := map[string]int64{}
	for r, n := range th.Reasons() {
		if n > 0 {
			m[adaptive.Reason(r).String()] = n
		}
	}
	return m
}
