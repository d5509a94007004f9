package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/eval"
	"github.com/adaptsched/adaptsched/fleet"
	"github.com/adaptsched/adaptsched/sim"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

// options are the parsed flags.
type options struct {
	policies    []string // names, in eval.PolicyNames order
	ops         int
	seed        uint64
	json        bool
	plot        string
	db          string
	bandit      bandit.Config
	skipBad     bool
	table       string
	figures     []string // -figures, in order
	workload    string
	exec        sim.ExecModel // -exec: the execution model of simulator workloads
	model       string
	profile     string
	cpuProfile  string
	zipf        float64
	format      string
	top         int
	record      string
	progressMin int64 // input bytes from which a terminal gets a progress bar
	input       string
	guardOptions
	fleet   fleet.Flags  // thompson's fleet (-fleet, -fleet-serve)
	offload offloadFlags // -workload offload-dense and offload-moe
}

// run is the command: it parses args, replays, writes the report to stdout
// and errors to stderr, and returns the exit status (0 ok, 1 failure, 2 a
// usage error, 130 interrupted).
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if o.record != "" {
		if err := recordDefault(o.record); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		return 0
	}
	if isOffload(o.workload) {
		if err := runOffload(o, stdout); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		return 0
	}
	rep, pd, err := replay(o, stdin, stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		if errors.Is(err, errInterrupted) {
			return 130
		}
		return 1
	}
	if o.json {
		err = writeJSON(stdout, rep)
	} else {
		err = writeTable(stdout, rep)
	}
	if err != nil {
		fmt.Fprintf(stderr, "replay: %s: writing the report: %v\n", rep.Input, err)
		return 1
	}
	if o.plot != "" {
		if err := writePlot(o.plot, rep, pd); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		fmt.Fprintf(stderr, "replay: plot written to %s\n", o.plot)
	}
	if interrupted.Load() {
		return 130
	}
	return 0
}

const usageText = `usage: replay [flags] [TRACE]

Replays operations through placement policies and compares each with the
oracle: the best fixed backend per bucket in hindsight, on the same
durations every policy is charged (each op's duration on each backend is
drawn once, for all). No fixed policy beats it; a learner can, by placing
one bucket's shapes apart or following drift.

TRACE is an adaptsched JSONL trace (gzip accepted; "-" reads stdin) or a
Chrome trace (PyTorch profiler / Kineto). Without TRACE, -workload replays
a simulator workload, -table a perf table's workload, and with neither an
embedded trace, recorded from a simulated mixed-serving run (sim:h100 +
sim:cpu2), is replayed.

-workload offload-dense and offload-moe keep weights in host memory
(Llama-3-8B's first layers; every Mixtral 8x7B expert) beside a GPU
budget (-gpu-mem), and compare thompson with llama.cpp's rule (llamacpp:
offload iff the batch ≥ 32; ikllama: experts at 32·E/K), the best single
threshold in hindsight (threshold-best), expert caches (lru, frequency)
and an oracle that prices weight copies: total = compute + weight and
activation copies. Their flags: -gpu-mem, -moe, -routing, -routing-drift,
-zipf, -prompt, -ubatch, -batch, -decode, -rounds; -sim-gpu defaults to
pcie3x8 and -sim-cpu to desktop16 there. Other flags than those, -policies,
-sim-cpu, -exec, -seed and -json are refused there, and theirs elsewhere.

thompson is adaptsched's Scheduler itself, called as the Executor calls
it (Select with where each op's inputs live, Observe with the measured
duration); -db gives it a posterior store as in production, and -fleet
nats://HOST:PORT (or -fleet-serve ADDR, an embedded JetStream server)
shares its posteriors with the other processes of the same hardware
fingerprint (package fleet): a later run starts from what earlier ones
learned.

The report's columns, one row per policy:
  total ms     the policy's total time over the ops (compute and transfers)
  ×oracle      total / the oracle's expected total
  regret %     (total − oracle) / oracle × 100; the oracle's row is 0 by
               definition; never negative for a fixed policy
  switches     decisions whose backend differs from the bucket's previous
  regret/shape %  regret against the per-shape oracle (the best backend
               for each shape, where the oracle takes one per bucket;
               workloads and tables, not traces)
  switches/shape  decisions whose backend differs from the shape's previous
  learn %      decisions the policy made to learn: thompson's Explore and
               Prior, egreedy's random picks, calibrate's forced samples,
               ucb1's bonus picks; 0 for rules that never learn ("explore"
               elsewhere, as in infer and the metrics, is reason Explore
               alone; Prior is the reason line below)
  off-oracle % decisions not on the oracle's backend for that op
  cf %         decisions whose duration was not measured on the op itself
               (drawn from trace statistics, a table or a profile)
  <backend>    the share of decisions placed on each backend

flags:
`

// parsePolicies reads -policies: known names, each once, at least one.
func parsePolicies(list string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !slices.Contains(eval.PolicyNames, p) {
			return nil, fmt.Errorf("unknown policy %q (known: %s)", p, strings.Join(eval.PolicyNames, ", "))
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("-policies names no policy")
	}
	return out, nil
}

// needThompson refuses the flags that only thompson reads when -policies
// lacks it: they would be ignored (TestFleetFlags).
func (o *options) needThompson() error {
	if slices.Contains(o.policies, "thompson") {
		return nil
	}
	switch {
	case o.fleet.Enabled():
		return errors.New("-fleet and -fleet-serve share thompson's evidence: -policies lacks thompson")
	case o.db != "":
		return errors.New("-db warm-starts and saves thompson's posteriors: -policies lacks thompson")
	}
	return nil
}

// checkValues returns the first flag value out of range, or the first
// pair of inputs that do not go together.
func (o *options) checkValues() error {
	switch {
	case o.ops < 0:
		return fmt.Errorf("-ops %d: want ≥ 0", o.ops)
	case o.top < 0:
		return fmt.Errorf("-top %d: want ≥ 0", o.top)
	// Non-finite values are usage errors here, not failures deep in the
	// simulator without the hint (TestErrors "infinite zipf").
	case !(o.zipf >= 0 && o.zipf <= math.MaxFloat64):
		return fmt.Errorf("-zipf %v: want a finite exponent ≥ 0", o.zipf)
	case math.IsInf(o.bandit.Hysteresis, 0):
		return fmt.Errorf("-hysteresis %v: want a finite margin ≤ 1", o.bandit.Hysteresis)
	case o.format != "auto" && o.format != "jsonl" && o.format != "chrome":
		return fmt.Errorf("-format %q: want auto, jsonl or chrome", o.format)
	case o.input != "" && o.workload != "":
		return errors.New("-workload replays the simulator: give it no TRACE")
	case o.workload != "" && o.table != "":
		return errors.New("-workload and -table are two workloads: give one")
	case o.table == "-" && o.input == "-":
		return errors.New("-table - and TRACE - both read stdin: give one of them as a file")
	case len(o.figures) > 0 && o.table == "":
		return errors.New("-figures gives a -table backend its figures: give -table")
	}
	return nil
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// A bad flag gets the flag package's one line and a hint; -h the
	// whole usage (both printed once Parse returns).
	fs.Usage = func() {}
	pol := fs.String("policies", strings.Join(eval.PolicyNames, ","), "comma-separated policies to compare")
	fs.IntVar(&o.ops, "ops", 0, "replay at most N ops (0: the whole trace; simulator workloads default to 50000)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of every random draw (policies, counterfactuals, workloads)")
	fs.BoolVar(&o.json, "json", false, "print the report as one JSON object")
	fs.StringVar(&o.plot, "plot", "", "draw cumulative regret and thompson's decision map to `FILE` (.png or .svg)")
	fs.StringVar(&o.db, "db", "", "warm-start thompson from the posterior store in `DIR` and save to it")
	fs.Float64Var(&o.bandit.Hysteresis, "hysteresis", 0, "thompson's hysteresis margin (0: bandit's default; negative: none)")
	fs.Float64Var(&o.bandit.Discount, "discount", 0, "thompson's discount γ per observation of a bucket (0: default)")
	fs.Float64Var(&o.bandit.PriorStrength, "prior-strength", 0, "thompson's prior strength κ0 in pseudo-observations (0: default)")
	fs.BoolVar(&o.skipBad, "skip-bad", false, "skip malformed trace lines (counted in the report) instead of failing")
	fs.StringVar(&o.table, "table", "", "perf table `FILE.csv`, or a StarPU perfmodel file or codelets/45 directory: a workload of its own, or a counterfactual model for TRACE")
	fs.Func("figures", "hardware figures of a -table backend for the priors, `\"LABEL: key=value ...\"` with keys kind (cpu or gpu), gflops, membw_gbps, dispatch_us, link_gbps, link_latency_us (repeatable)", func(v string) error {
		o.figures = append(o.figures, v)
		return nil
	})
	fs.StringVar(&o.workload, "workload", "", "simulator workload: mixed-serving, decode, prefill, offload-dense or offload-moe")
	fs.StringVar(&o.model, "model", sim.Llama32_1B.Name, "model of the simulator workload")
	execName := fs.String("exec", "", "execution model of a simulator workload: async (queued work, timed by makespan; the default for -workload), sync (a wait after every op) or serial (the model before queues; the default for -table, whose rows were measured one at a time)")
	fs.StringVar(&o.profile, "sim-gpu", "", "simulated GPU `PROFILE`: the GPU of -workload (default h100), or the model of a TRACE's GPU durations it lacks (default h100 for a trace of CPUs only)")
	fs.StringVar(&o.cpuProfile, "sim-cpu", "cpu2", "simulated CPU `PROFILE` paired with -sim-gpu: the CPU of -workload, or the model of a TRACE's CPU durations it lacks")
	deprecated(fs, stderr, "profile", "sim-gpu")
	deprecated(fs, stderr, "cpu-profile", "sim-cpu")
	fs.Float64Var(&o.zipf, "zipf", 1, "Zipf exponent of a perf table's workload (0: rows uniform), and of offload-moe's expert popularity without -routing")
	o.offload.register(fs)
	fs.StringVar(&o.format, "format", "auto", "TRACE format: auto, jsonl or chrome")
	fs.IntVar(&o.top, "top", 5, "buckets listed where the policies disagree most")
	fs.StringVar(&o.record, "record-default", "", "write the embedded default trace to `FILE` and exit (maintainers)")
	fs.Int64Var(&o.progressMin, "progress-min", 64<<20, "input `BYTES` from which a terminal stderr shows a progress bar")
	o.guardOptions.flags(fs)
	o.fleet.Register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, usageText)
			fs.PrintDefaults()
		} else {
			fmt.Fprintln(stderr, usageHint)
		}
		return o, err
	}
	fail := func(format string, args ...any) (options, error) {
		fmt.Fprintf(stderr, "replay: "+format+"\n", args...)
		fmt.Fprintln(stderr, usageHint)
		return o, errUsage
	}
	if isOffload(o.workload) {
		return parseOffload(o, fs, *pol, *execName, fail)
	}
	if err := checkOffloadFlags(fs, o.workload); err != nil {
		return fail("%v", err)
	}
	switch fs.NArg() {
	case 0:
	case 1:
		o.input = fs.Arg(0)
	default:
		return fail("one TRACE at most, got %d", fs.NArg())
	}
	var err error
	if o.policies, err = parsePolicies(*pol); err != nil {
		return fail("%v", err)
	}
	if err := o.bandit.Validate(); err != nil {
		return fail("%v", err)
	}
	if err := o.guardOptions.validate(); err != nil {
		return fail("%v", err)
	}
	if err := o.fleet.Validate(); err != nil {
		return fail("%v", err)
	}
	if err := o.needThompson(); err != nil {
		return fail("%v", err)
	}
	if err := o.checkValues(); err != nil {
		return fail("%v", err)
	}
	simWorkload := o.workload != "" || o.table != "" && o.input == ""
	switch {
	case *execName != "" && !simWorkload:
		return fail("-exec times a simulator workload (-workload, or -table without TRACE): a trace's durations are replayed as recorded")
	case *execName != "":
		x, err := sim.ParseExecModel(*execName)
		if err != nil {
			return fail("-exec: %v", err)
		}
		o.exec = x
	case o.workload != "":
		o.exec = sim.Async
	}
	if o.workload != "" && !slices.Contains(workloadNames, o.workload) {
		return fail("unknown workload %q (known: %s)", o.workload, strings.Join(workloadNames, ", "))
	}
	if err := checkProfiles(o.profile, o.cpuProfile, false); err != nil {
		return fail("%v", err)
	}
	return o, nil
}

// checkProfiles checks -sim-gpu's and -sim-cpu's profiles: each known
// and of its kind, -sim-cpu never empty (a trace of GPUs alone is
// modelled by it), -sim-gpu empty only where !needGPU (none given: the
// default stands in where one is needed).
func checkProfiles(gpu, cpu string, needGPU bool) error {
	for _, p := range []struct {
		flag, name string
		gpu        bool
	}{{"sim-gpu", gpu, true}, {"sim-cpu", cpu, false}} {
		if p.name == "" && p.gpu && !needGPU {
			continue
		}
		prof, err := sim.LookupProfile(p.name)
		if err != nil {
			return fmt.Errorf("-%s: %w", p.flag, err)
		}
		if isGPU := prof.Kind == backends.GPU; isGPU != p.gpu {
			return fmt.Errorf("-%s %s: want a %s profile", p.flag, p.name, map[bool]string{true: "GPU", false: "CPU"}[p.gpu])
		}
	}
	return nil
}

// usageHint follows a usage error: the flags are one -h away.
const usageHint = "run replay -h for the flags"

// deprecated registers old as an alias of the flag called name, saying
// once on stderr that it is deprecated: -profile and -cpu-profile name
// simulated devices yet read like pprof's flags.
func deprecated(fs *flag.FlagSet, stderr io.Writer, old, name string) {
	warned := false
	fs.Func(old, "deprecated: -"+name, func(v string) error {
		if !warned {
			fmt.Fprintf(stderr, "replay: warning: -%s is deprecated: use -%s\n", old, name)
			warned = true
		}
		return fs.Set(name, v)
	})
}
