package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
)

// source is where the duration of one replayed decision came from.
type source uint8

const (
	srcMeasured source = iota // the event ran on the chosen backend
	srcShadow                 // a shadow run of the event on the chosen backend
	srcTrace                  // counterfactual: the bucket's measurements elsewhere in the trace
	srcTable                  // counterfactual: the -table perf table
	srcProfile                // counterfactual: the -sim-gpu / -sim-cpu model
	srcSim                    // the simulator drew it (-workload, -table without TRACE)
	numSources
)

var sourceNames = [numSources]string{"measured", "shadow", "trace", "table", "profile", "sim"}

var _ fmt.Stringer = srcTrace

// String returns the source's name in the report, or source(n).
func (s source) String() string {
	if s < numSources {
		return sourceNames[s]
	}
	return fmt.Sprintf("source(%d)", uint8(s))
}

// counterfactual reports whether the duration was not measured on the op.
func (s source) counterfactual() bool { return s == srcTrace || s == srcTable || s == srcProfile }

// Report is the comparison the command prints, as a table or as JSON.
type Report struct {
	Input    string   `json:"input"`
	Ops      int64    `json:"ops"`
	Buckets  int      `json:"buckets"`
	Backends []string `json:"backends"`
	Seed     uint64   `json:"seed"`
	// Policies are in the order of -policies.
	Policies []PolicyResult `json:"policies"`
	// Counterfactual counts every policy's decisions by where their
	// duration came from (sources that fed no decision are left out).
	Counterfactual map[string]int64 `json:"counterfactual,omitempty"`
	// Excluded are the ops (and their buckets) left out because some
	// backend had neither a measurement nor a model for them.
	ExcludedOps     int64    `json:"excluded_ops,omitempty"`
	ExcludedBuckets []string `json:"excluded_buckets,omitempty"`
	// Excluded sums them by reason.
	Excluded      []ExcludedGroup `json:"excluded,omitempty"`
	Skipped       int             `json:"skipped,omitempty"`
	Notes         []string        `json:"notes,omitempty"`
	Disagreements []Disagreement  `json:"disagreements,omitempty"`
}

// PolicyResult is one policy's replay against the oracle.
type PolicyResult struct {
	Name     string  `json:"name"`
	TotalUs  float64 `json:"total_us"`
	OracleUs float64 `json:"oracle_us"`
	// Ratio is TotalUs / OracleUs.
	Ratio     float64 `json:"ratio"`
	RegretPct float64 `json:"regret_pct"`
	Switches  int64   `json:"switches"`
	// ShapeRegretPct is the regret against the per-shape oracle (the best
	// backend for each shape rather than each bucket), ShapeSwitches the
	// decisions whose backend differs from the previous decision of the
	// same shape: simulator and table workloads only.
	ShapeRegretPct *float64 `json:"shape_regret_pct,omitempty"`
	ShapeSwitches  *int64   `json:"shape_switches,omitempty"`
	// MakespanUs is the run's time on the simulator's timeline under the
	// async or sync execution model (-exec), the critical path rather
	// than TotalUs's sum; BoundUs the least time of the placement that
	// ran. Simulator and table workloads only, not under -exec serial.
	MakespanUs *float64 `json:"makespan_us,omitempty"`
	BoundUs    *float64 `json:"bound_us,omitempty"`
	// LearnPct is the share of its decisions the policy made to learn
	// (thompson: reason Explore or Prior; egreedy: its random picks;
	// calibrate: forced samples; ucb1: a bonus overturning the best mean).
	LearnPct float64 `json:"learn_pct"`
	// OffOraclePct is the share of its decisions not on the oracle's
	// backend for that op, whatever the reason.
	OffOraclePct float64            `json:"off_oracle_pct"`
	Share        map[string]float64 `json:"share"`
	// Reasons counts thompson's decisions by the Scheduler's reason; they
	// add up to its decisions.
	Reasons map[string]int64 `json:"reasons,omitempty"`
	// CounterfactualPct is the share of its decisions whose duration was
	// not measured on the op itself (trace statistics, table, profile).
	CounterfactualPct float64 `json:"counterfactual_pct"`
}

// Disagreement is a bucket where the policies' placements differ most.
// Split is 1 − the largest mean share of one backend over the policies
// that learn or follow a rule (fixed cpu and gpu are left out: they
// differ everywhere by construction): 0 when they all place the bucket
// alike, up to 1 − 1/backends when they spread it evenly.
type Disagreement struct {
	Bucket string            `json:"bucket"`
	Ops    int64             `json:"ops"`
	Split  float64           `json:"split"`
	Oracle string            `json:"oracle"`
	Choice map[string]string `json:"choice"` // policy → its majority backend
}

// point is a policy's and the oracle's cumulative cost before op op.
type point struct {
	op               int64
	policyUs, oracle float64
}

// policyRun is what a replay of one policy yields, in either mode.
type policyRun struct {
	name              string
	totalUs, oracleUs float64
	ops               int64
	switches          int64
	// shapeOracleUs is the per-shape oracle's total (0: not known, as for
	// traces), shapeSwitches the switches counted per shape.
	shapeOracleUs float64
	shapeSwitches int64
	// makespanUs and boundUs are PolicyResult's (0: not timed).
	makespanUs, boundUs float64
	// learn counts the decisions made to learn (eval.Explorer);
	// offOracle those not on the oracle's backend.
	learn, offOracle int64
	reasons          map[string]int64 // thompson's decisions by reason
	counts           []int64          // per arm
	perBucket        [][]int64        // [bucket][arm]
	sources          [numSources]int64
	points           []point
}

// runSet is every policy's run over the same ops.
type runSet struct {
	input        string
	arms         []string
	bucketNames  []string
	bucketOps    []int64
	oracleArm    []int // per bucket: the oracle's majority arm
	runs         []policyRun
	excludedOps  int64
	excludedBkts []string
	excluded     []ExcludedGroup
	skipped      int
	notes        []string
	seed         uint64
	top          int
}

// roundingPct is the regret below which two totals differ by the order
// of their sums alone (a fixed policy adds its ops in time order, the
// oracle bucket by bucket): shown as 0, not −0.00.
const roundingPct = 1e-9

// report turns runs into the printed Report.
func (rs *runSet) report() *Report {
	r := &Report{Input: rs.input, Backends: rs.arms, Seed: rs.seed, ExcludedOps: rs.excludedOps,
		ExcludedBuckets: rs.excludedBkts, Excluded: rs.excluded, Skipped: rs.skipped, Notes: rs.notes}
	for _, n := range rs.bucketOps {
		if n > 0 {
			r.Buckets++
		}
	}
	var cf [numSources]int64
	for _, run := range rs.runs {
		r.Ops = run.ops
		pr := PolicyResult{Name: run.name, TotalUs: run.totalUs, OracleUs: run.oracleUs, Switches: run.switches,
			Share: map[string]float64{}, Reasons: run.reasons}
		if run.oracleUs > 0 {
			pr.Ratio = run.totalUs / run.oracleUs
			pr.RegretPct = (run.totalUs - run.oracleUs) / run.oracleUs * 100
			if math.Abs(pr.RegretPct) < roundingPct {
				pr.Ratio, pr.RegretPct = 1, 0
			}
		}
		if run.name == "oracle" {
			// The reference: its regret is 0 by definition. The oracle
			// policy plays the oracle's assignment on the same draws, so
			// its own total is the oracle's unless the run was cut short.
			if d := pr.RegretPct; math.Abs(d) >= 0.005 {
				r.Notes = append(r.Notes, fmt.Sprintf("the oracle policy's own total (%.3f ms) is %.2f%% from the oracle's %.3f ms; every regret is against the oracle's", run.totalUs/1e3, d, run.oracleUs/1e3))
			}
			pr.TotalUs, pr.Ratio, pr.RegretPct = run.oracleUs, 1, 0
		}
		if run.makespanUs > 0 {
			pr.MakespanUs, pr.BoundUs = &run.makespanUs, &run.boundUs
		}
		if run.shapeOracleUs > 0 {
			reg := (pr.TotalUs - run.shapeOracleUs) / run.shapeOracleUs * 100
			pr.ShapeRegretPct, pr.ShapeSwitches = &reg, &run.shapeSwitches
		}
		var cfn int64
		for s, n := range run.sources {
			cf[s] += n
			if source(s).counterfactual() {
				cfn += n
			}
		}
		if run.ops > 0 {
			pr.LearnPct = float64(run.learn) / float64(run.ops) * 100
			pr.OffOraclePct = float64(run.offOracle) / float64(run.ops) * 100
			pr.CounterfactualPct = float64(cfn) / float64(run.ops) * 100
			for a, c := range run.counts {
				pr.Share[rs.arms[a]] = float64(c) / float64(run.ops)
			}
		}
		r.Policies = append(r.Policies, pr)
	}
	for s, n := range cf {
		if n > 0 {
			if r.Counterfactual == nil {
				r.Counterfactual = map[string]int64{}
			}
			r.Counterfactual[source(s).String()] = n
		}
	}
	r.Disagreements = rs.disagreements()
	return r
}

// disagreements returns the top buckets by Split × ops.
func (rs *runSet) disagreements() []Disagreement {
	var ds []Disagreement
	var score []float64
	for b, name := range rs.bucketNames {
		n := rs.bucketOps[b]
		if n == 0 {
			continue
		}
		mean := make([]float64, len(rs.arms))
		np := 0
		for _, run := range rs.runs {
			if fixedPolicy(run.name) {
				continue
			}
			np++
			for a, c := range run.perBucket[b] {
				mean[a] += float64(c) / float64(n)
			}
		}
		if np == 0 {
			continue
		}
		split := 1 - slices.Max(mean)/float64(np)
		if split < 1e-9 {
			continue
		}
		d := Disagreement{Bucket: name, Ops: n, Split: split, Choice: map[string]string{}}
		if a := rs.oracleArm[b]; a >= 0 {
			d.Oracle = rs.arms[a]
		}
		for _, run := range rs.runs {
			c := run.perBucket[b]
			d.Choice[run.name] = rs.arms[slices.Index(c, slices.Max(c))]
		}
		ds = append(ds, d)
		score = append(score, split*float64(n))
	}
	idx := make([]int, len(ds))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case score[a] > score[b]:
			return -1
		case score[a] < score[b]:
			return 1
		}
		return strings.Compare(ds[a].Bucket, ds[b].Bucket)
	})
	out := make([]Disagreement, 0, min(rs.top, len(ds)))
	for _, i := range idx[:min(rs.top, len(ds))] {
		out = append(out, ds[i])
	}
	return out
}

func fixedPolicy(name string) bool { return name == "cpu" || name == "gpu" }

func writeJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// writeCounterfactuals says how many decisions used counterfactual
// durations, by their source.
func writeCounterfactuals(w io.Writer, r *Report) {
	if len(r.Counterfactual) == 0 {
		return
	}
	keys := make([]string, 0, len(r.Counterfactual))
	for _, s := range sourceNames {
		if _, ok := r.Counterfactual[s]; ok {
			keys = append(keys, s)
		}
	}
	var total, cf int64
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		n := r.Counterfactual[k]
		total += n
		if k == "trace" || k == "table" || k == "profile" {
			cf += n
		}
		parts = append(parts, fmt.Sprintf("%s %d", k, n))
	}
	fmt.Fprintf(w, "decisions: %d, of which %d used counterfactuals (%s)\n", total, cf, strings.Join(parts, ", "))
}

// writePolicies writes the table of policies, one row each.
func writePolicies(w io.Writer, r *Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	shapes := len(r.Policies) > 0 && r.Policies[0].ShapeRegretPct != nil
	timed := len(r.Policies) > 0 && r.Policies[0].MakespanUs != nil
	head := "policy\ttotal ms\t×oracle\tregret %\tswitches"
	if timed {
		head = "policy\tmakespan ms\tbound ms\ttotal ms\t×oracle\tregret %\tswitches"
	}
	if shapes {
		head += "\tregret/shape %\tswitches/shape"
	}
	head += "\tlearn %\toff-oracle %\tcf %"
	for _, b := range r.Backends {
		head += "\t" + b
	}
	fmt.Fprintln(tw, head+"\t")
	for _, p := range r.Policies {
		line := p.Name + "\t"
		if timed && p.MakespanUs != nil {
			line += fmt.Sprintf("%.3f\t%.3f\t", *p.MakespanUs/1e3, *p.BoundUs/1e3)
		}
		line += fmt.Sprintf("%.3f\t%.4f\t%.2f\t%d", p.TotalUs/1e3, p.Ratio, p.RegretPct, p.Switches)
		if shapes && p.ShapeRegretPct != nil {
			line += fmt.Sprintf("\t%.2f\t%d", *p.ShapeRegretPct, *p.ShapeSwitches)
		}
		line += fmt.Sprintf("\t%.2f\t%.2f\t%.1f", p.LearnPct, p.OffOraclePct, p.CounterfactualPct)
		for _, b := range r.Backends {
			line += fmt.Sprintf("\t%.1f%%", p.Share[b]*100)
		}
		fmt.Fprintln(tw, line+"\t")
	}
	return tw.Flush()
}

func writeTable(w io.Writer, r *Report) error {
	fmt.Fprintf(w, "replay %s: %d ops, %d buckets, backends %s, seed %d\n",
		r.Input, r.Ops, r.Buckets, strings.Join(r.Backends, ", "), r.Seed)
	writeCounterfactuals(w, r)
	writeExcluded(w, r)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	fmt.Fprintln(w)
	if err := writePolicies(w, r); err != nil {
		return err
	}
	if len(r.Policies) > 0 {
		fmt.Fprintf(w, "oracle: %.3f ms\n", r.Policies[0].OracleUs/1e3)
	}
	for _, p := range r.Policies {
		if len(p.Reasons) == 0 {
			continue
		}
		names := make([]string, 0, len(p.Reasons))
		for n := range p.Reasons {
			names = append(names, n)
		}
		slices.Sort(names)
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = fmt.Sprintf("%s %d", n, p.Reasons[n])
		}
		fmt.Fprintf(w, "%s's reasons: %s\n", p.Name, strings.Join(parts, ", "))
	}
	if len(r.Disagreements) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nbuckets where the policies disagree most (split: 1 − the largest mean share of one backend; majority backend of each policy):\n")
	for _, d := range r.Disagreements {
		fmt.Fprintf(w, "  %s  %d ops  split %.2f  oracle %s\n", d.Bucket, d.Ops, d.Split, d.Oracle)
		for _, b := range r.Backends {
			var names []string
			for _, p := range r.Policies {
				if d.Choice[p.Name] == b {
					names = append(names, p.Name)
				}
			}
			if len(names) > 0 {
				fmt.Fprintf(w, "    %s: %s\n", b, strings.Join(names, ", "))
			}
		}
	}
	return nil
}

// writeExcluded says what the comparison left out, by reason, and the
// bad lines it skipped.
func writeExcluded(w io.Writer, r *Report) {
	if r.ExcludedOps > 0 {
		fmt.Fprintf(w, "excluded: %d ops of %d buckets, not compared (the report's figures leave them out):\n", r.ExcludedOps, len(r.ExcludedBuckets))
		for _, g := range r.Excluded {
			fmt.Fprintf(w, "  %d ops, %d buckets: %s; most ops: %s\n", g.Ops, g.Buckets, g.Reason, strings.Join(g.Top, ", "))
		}
	}
	if r.Skipped > 0 {
		fmt.Fprintf(w, "skipped: %d bad lines\n", r.Skipped)
	}
}
