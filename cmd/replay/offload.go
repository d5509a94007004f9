package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/adaptsched/adaptsched/eval"
	"github.com/adaptsched/adaptsched/sim"
)

// The offload workloads' defaults.
const (
	offloadGPU = "pcie3x8"   // the GPU without -sim-gpu
	offloadCPU = "desktop16" // the CPU without -sim-cpu
)

// isOffload reports whether workload is offload-dense or offload-moe.
func isOffload(workload string) bool {
	return workload == "offload-dense" || workload == "offload-moe"
}

// offloadFlags are the flags of the offload workloads.
type offloadFlags struct {
	gpuMem, moe, routing, drift string
	prompt, ubatch, batch       int
	decode, rounds              int
	opt                         sim.OffloadOptions // parsed
	driftFile                   string             // -routing-drift's FILE
}

func (f *offloadFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.gpuMem, "gpu-mem", "", "offload: GPU memory for weights, `BYTES` or a share such as 50% (dense: of the weights, filled from the last layer; moe: of the experts, the experts' cache); default 50%")
	fs.StringVar(&f.moe, "moe", "8,2", "offload-moe: `E,K`, E experts per layer, top-K routing")
	fs.StringVar(&f.routing, "routing", "", "offload-moe: expert popularity `FILE` (the JSON of sim/testdata/moe); default a Zipf skew of -zipf")
	fs.StringVar(&f.drift, "routing-drift", "", "offload-moe: a second routing `FILE@F`, drawn from the fraction F of the run on")
	fs.IntVar(&f.prompt, "prompt", 0, "offload: prompt length in tokens (0: decode only)")
	fs.IntVar(&f.ubatch, "ubatch", 512, "offload: micro-batch of prompt processing, tokens")
	fs.IntVar(&f.batch, "batch", 1, "offload: sequences per round: prompts prefilled one by one, then decoded together")
	fs.IntVar(&f.decode, "decode", 0, "offload: decode steps per round (default 256 without -prompt)")
	fs.IntVar(&f.rounds, "rounds", 1, "offload: rounds of prompts then decode steps")
}

// parse builds the workload's options from the flags; readRouting reads
// the routing files.
func (f *offloadFlags) parse(workload string, zipf float64, seed uint64) error {
	if f.ubatch < 1 { // sim reads 0 as its default: a flag of 0 is a mistake
		return fmt.Errorf("-ubatch %d: want ≥ 1", f.ubatch)
	}
	o := sim.OffloadOptions{MoE: workload == "offload-moe", Rounds: f.rounds, Batch: f.batch, Prompt: f.prompt, UBatch: f.ubatch, Decode: f.decode, Seed: seed}
	if o.Prompt == 0 && o.Decode == 0 {
		o.Decode = 256
	}
	if err := parseGPUMem(f.gpuMem, &o); err != nil {
		return err
	}
	if o.MoE {
		e, k, ok := strings.Cut(f.moe, ",")
		var err1, err2 error
		o.Experts, err1 = strconv.Atoi(strings.TrimSpace(e))
		o.TopK, err2 = strconv.Atoi(strings.TrimSpace(k))
		if !ok || err1 != nil || err2 != nil || o.Experts < 1 || o.TopK < 1 || o.TopK > o.Experts {
			return fmt.Errorf("-moe %q: want E,K with 1 ≤ K ≤ E", f.moe)
		}
		if f.routing == "" {
			r, err := sim.ZipfRouting(sim.Mixtral8x7B.Layers, o.Experts, zipf, seed)
			if err != nil {
				return fmt.Errorf("-zipf: %w", err)
			}
			o.Routing = &r
		}
		if f.drift != "" {
			// The last @, as infer's: a file's path may hold one.
			i := strings.LastIndex(f.drift, "@")
			file, at := f.drift[:max(i, 0)], f.drift[i+1:]
			frac, err := strconv.ParseFloat(at, 64)
			if i < 0 || err != nil || !(frac >= 0 && frac <= 1) {
				return fmt.Errorf("-routing-drift %q: want FILE@F with F a fraction in [0, 1]", f.drift)
			}
			f.driftFile, o.DriftAt = file, frac
		}
	} else if f.routing != "" || f.drift != "" {
		return fmt.Errorf("-routing and -routing-drift route a MoE's tokens: use -workload offload-moe")
	}
	f.opt = o
	return nil
}

// readRouting reads the files of -routing and -routing-drift, of
// Mixtral 8x7B's layers and -moe's experts. Their errors are bad input,
// as a bad trace's or table's: exit status 1, not a bad flag's 2
// (TestOffloadRoutingFileErrors).
func (f *offloadFlags) readRouting() error {
	layers := sim.Mixtral8x7B.Layers
	if f.routing != "" {
		r, err := sim.ReadRouting(f.routing, layers, f.opt.Experts)
		if err != nil {
			return fmt.Errorf("replay: -routing: %w", err)
		}
		f.opt.Routing = &r
	}
	if f.driftFile != "" {
		d, err := sim.ReadRouting(f.driftFile, layers, f.opt.Experts)
		if err != nil {
			return fmt.Errorf("replay: -routing-drift: %w", err)
		}
		f.opt.Drift = &d
	}
	return nil
}

// parseGPUMem reads -gpu-mem: bytes, or a share with %.
func parseGPUMem(s string, o *sim.OffloadOptions) error {
	if s == "" {
		o.GPUShare = 0.5
		return nil
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || !(v >= 0 && v <= 100) {
			return fmt.Errorf("-gpu-mem %q: want a share in 0–100%%", s)
		}
		o.GPUShare = v / 100
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return fmt.Errorf("-gpu-mem %q: want bytes or a share such as 50%%", s)
	}
	o.GPUMem = v
	return nil
}

// OffloadReport is replay's report of an offload workload (-json).
type OffloadReport struct {
	Workload string `json:"workload"`
	GPU      string `json:"gpu"`
	CPU      string `json:"cpu"`
	Ops      int    `json:"ops"`
	Steps    int    `json:"steps"`
	// BudgetBytes is the GPU memory for weights whose home is host
	// memory (the cache's budget).
	BudgetBytes int64                 `json:"budget_bytes"`
	Seed        uint64                `json:"seed"`
	Policies    []OffloadPolicyResult `json:"policies"`
}

// OffloadPolicyResult is one policy's run.
type OffloadPolicyResult struct {
	Policy string `json:"policy"`
	// TotalMs = compute + weight copies + activation copies, ms; XBest
	// the total over the least total of the policies run.
	TotalMs        float64 `json:"total_ms"`
	XBest          float64 `json:"x_best"`
	ComputeMs      float64 `json:"compute_ms"`
	WeightCopyMs   float64 `json:"weight_copy_ms"`
	ActCopyMs      float64 `json:"act_copy_ms"`
	WeightCopies   int64   `json:"weight_copies"`
	GPUPct         float64 `json:"gpu_pct"`
	MaxCachedBytes int64   `json:"max_cached_bytes"`
	// Threshold is the batch threshold (of experts, for offload-moe) of
	// threshold-best (the best in hindsight), llamacpp, ikllama and
	// lru/frequency's rule; omitted for thompson and oracle.
	Threshold *int `json:"threshold,omitempty"`
}

// runOffload runs an offload workload under o's policies and writes the
// report.
func runOffload(o options, stdout io.Writer) error {
	if err := o.offload.readRouting(); err != nil {
		return err
	}
	w, err := sim.NewOffload(o.offload.opt)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	gpu, cpu := sim.MustProfile(o.profile), sim.MustProfile(o.cpuProfile)
	env, err := eval.NewOffloadEnv(w, cpu, gpu, o.seed)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	rep := OffloadReport{Workload: w.Name, GPU: "sim:" + gpu.Name, CPU: "sim:" + cpu.Name, Ops: len(w.Ops), Steps: w.Steps, BudgetBytes: w.Budget, Seed: o.seed}
	best := 0.0
	for _, p := range o.policies {
		r, err := env.Run(p)
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		pr := OffloadPolicyResult{Policy: p, TotalMs: r.TotalUs / 1e3, ComputeMs: r.ComputeUs / 1e3, WeightCopyMs: r.WeightCopyUs / 1e3,
			ActCopyMs: r.ActCopyUs / 1e3, WeightCopies: r.WeightCopies, GPUPct: r.GPUShare * 100, MaxCachedBytes: r.MaxCachedBytes}
		if p != "thompson" && p != "oracle" {
			t := r.Threshold
			if w.Model.Experts > 0 {
				t = r.ExpertThreshold
			}
			pr.Threshold = &t
		}
		if best == 0 || pr.TotalMs < best {
			best = pr.TotalMs
		}
		rep.Policies = append(rep.Policies, pr)
	}
	for i := range rep.Policies {
		rep.Policies[i].XBest = rep.Policies[i].TotalMs / best
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return writeOffloadTable(stdout, rep)
}

func writeOffloadTable(w io.Writer, r OffloadReport) error {
	fmt.Fprintf(w, "replay %s: %d ops, %d steps, backends %s, %s, GPU budget %.0f MiB for weights in host memory, seed %d\n\n",
		r.Workload, r.Ops, r.Steps, r.CPU, r.GPU, float64(r.BudgetBytes)/(1<<20), r.Seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\ttotal ms\t×best\tcompute ms\tweight copies ms\tactivation copies ms\tcopies\tGPU %\tcached MiB\tthreshold\t")
	for _, p := range r.Policies {
		th := "-"
		if p.Threshold != nil {
			th = "never"
			if *p.Threshold < 1<<40 {
				th = strconv.Itoa(*p.Threshold)
			}
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.3f\t%.1f\t%.1f\t%.1f\t%d\t%.1f\t%.0f\t%s\t\n", p.Policy, p.TotalMs, p.XBest, p.ComputeMs, p.WeightCopyMs,
			p.ActCopyMs, p.WeightCopies, p.GPUPct, float64(p.MaxCachedBytes)/(1<<20), th)
	}
	return tw.Flush()
}

// offloadPolicies picks the offload policies of -policies (all of them
// when the flag was not given).
func offloadPolicies(pol string, given bool) ([]string, error) {
	if !given {
		return slices.Clone(eval.OffloadPolicies), nil
	}
	var ps []string
	for _, p := range strings.Split(pol, ",") {
		p = strings.TrimSpace(p)
		if p == "" || slices.Contains(ps, p) {
			continue
		}
		if !slices.Contains(eval.OffloadPolicies, p) {
			return nil, fmt.Errorf("unknown offload policy %q (known: %s)", p, strings.Join(eval.OffloadPolicies, ", "))
		}
		ps = append(ps, p)
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("-policies names no policy")
	}
	return ps, nil
}

// offloadOnly are the flags that only the offload workloads read.
var offloadOnly = []string{"gpu-mem", "moe", "routing", "routing-drift", "prompt", "ubatch", "batch", "decode", "rounds"}

// offloadTakes are the other flags an offload workload reads; the rest
// (-ops, -top, -plot, -db, -figures, -model, thompson's tuning, the
// trace and store guards, the fleet flags) runOffload never looks at.
var offloadTakes = []string{"workload", "policies", "sim-gpu", "sim-cpu", "profile", "cpu-profile", "exec", "seed", "json", "zipf", "record-default"}

// checkOffloadFlags returns the first given flag that the workload
// ignores: an offload-only flag outside the offload workloads, a flag
// runOffload does not read inside them, -moe or -zipf with offload-dense.
// Accepted, each would be silently dropped (TestOffloadFlagsIgnored).
func checkOffloadFlags(fs *flag.FlagSet, workload string) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		switch {
		case err != nil:
		case !isOffload(workload) && slices.Contains(offloadOnly, f.Name):
			err = fmt.Errorf("-%s sets an offload workload: use it with -workload offload-dense or offload-moe", f.Name)
		case isOffload(workload) && !slices.Contains(offloadOnly, f.Name) && !slices.Contains(offloadTakes, f.Name):
			err = fmt.Errorf("-%s does not apply to -workload %s", f.Name, workload)
		case workload == "offload-dense" && (f.Name == "moe" || f.Name == "zipf"):
			err = fmt.Errorf("-%s applies to -workload offload-moe only", f.Name)
		}
	})
	return err
}

// parseOffload finishes parseFlags for an offload workload: its policies,
// profiles and options.
func parseOffload(o options, fs *flag.FlagSet, pol, execName string, fail func(string, ...any) (options, error)) (options, error) {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if err := checkOffloadFlags(fs, o.workload); err != nil {
		return fail("%v", err)
	}
	switch {
	case fs.NArg() > 0 || o.table != "":
		return fail("-workload %s is a simulator workload: give it no TRACE or -table", o.workload)
	case execName != "" && execName != "serial":
		return fail("-workload %s sums its ops' compute and copies (-exec serial only)", o.workload)
	}
	ps, err := offloadPolicies(pol, given["policies"])
	if err != nil {
		return fail("%v", err)
	}
	o.policies = ps
	if !given["sim-gpu"] && !given["profile"] {
		o.profile = offloadGPU
	}
	if !given["sim-cpu"] && !given["cpu-profile"] {
		o.cpuProfile = offloadCPU
	}
	if err := checkProfiles(o.profile, o.cpuProfile, true); err != nil {
		return fail("%v", err)
	}
	if err := o.offload.parse(o.workload, o.zipf, o.seed); err != nil {
		return fail("%v", err)
	}
	return o, nil
}
