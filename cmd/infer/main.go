// Command infer is a long-running inference program on the adaptive
// Executor: a small Llama-style decoder (RMSNorm, RoPE, grouped-query
// attention with a KV cache, SwiGLU FFN, Q8_0 weights) with deterministic
// random weights, decoding batches of requests as a server would, every op
// placed by adaptsched on the backends given.
//
// Usage:
//
//	infer [-backends cpu,cpu1] [-strategy auto|perop|only:NAME|gpu|cpu|static2x|pcie5x|llamacpp|oracle]
//	      [-tokens N] [-batch N] [-requests N] [-prompt N[,N...]] [-ubatch N] [-warmup N]
//	      [-gpu-mem BYTES|N%] [-moe E,K [-routing FILE | -zipf S] [-routing-drift FILE@F]]
//	      [-db DIR] [-trace FILE] [-cpuprofile FILE] [-json [-step-times]] [-sync | -exec async|sync|serial] [-graphs=false] [-overlap=false]
//	      [-metrics ADDR] [-stream] [-reset-damaged-store] [-log-json] [-v] [fleet flags]
//	      [-dim N] [-layers N] [-heads N] [-kv-heads N] [-ffn N] [-vocab N] [-ctx N] [-seed N]
//
// Serving: each batch of requests draws a prompt length from -prompt,
// prefills the prompts in micro-batches of -ubatch tokens per sequence,
// then decodes -tokens tokens. -gpu-mem keeps the weights in host memory
// and gives each GPU a budget for them (bytes, or a share of the model's
// weights), loading those that fit, the last layers first (llama.cpp's
// -ngl); the Executor then prices each op's weight copy and caches the
// weights worth their bytes (DESIGN.md § Weights in host memory).
// -strategy llamacpp is llama.cpp's rule through the same Executor: the
// loaded weights pinned, an op run where its weights live unless its
// batch is at least 32 tokens. -moe E,K makes every FFN a mixture of E
// experts, the top K per token drawn from -routing's per-layer counts
// (sim/testdata/moe: Mixtral 8x7B, 32 layers of 8) or a Zipf skew, the
// -routing-drift file taking over from the fraction F of the requests.
//
// Fleet learning (package fleet): -fleet nats://HOST:PORT
// shares the posteriors with the other processes of the same hardware
// fingerprint through that NATS JetStream server (-fleet-creds,
// -fleet-password-file, -fleet-nkey, -fleet-ca, -fleet-cert and -fleet-key
// pass credentials and TLS through; a refusal stops the run unless
// -fleet-optional); -fleet-serve ADDR runs an embedded JetStream server in
// this process, listening on ADDR (loopback unless a host is given, and
// only there without -fleet-serve-users), its data in -fleet-dir, and
// shares through it (-fleet-serve-cert, -fleet-serve-key and
// -fleet-serve-ca give it TLS). -fleet-node names this node (the same
// across restarts); -fleet-interval sets how often its evidence is
// published, and -fleet-max-peer-keys the most records it holds of each
// other node. A server that is down is retried in the background; the
// process schedules on its own evidence meanwhile.
// -metrics ADDR serves Prometheus metrics at /metrics (loopback unless a
// host is given; ":0" picks a port, and the address bound is printed):
// adaptsched_decisions_total by backend and reason,
// adaptsched_explorations_total (reason explore) by backend,
// adaptsched_decision_latency_seconds (one decision in 64 timed), ops, op seconds and switches by backend, fallbacks, backend failures
// and health, transfers (bytes, copies and seconds by backend; the link
// model's latency and bandwidth by direction), the store's flushes,
// failed flushes and pending records (-db), the fleet's peers, sync,
// connection, published, received and errors (-fleet), and the Go and
// process collectors. Nothing listens unless asked. -db says on stderr
// what it loaded.
//
// auto runs each decode step with the per-op learner's placement, with
// that placement frozen as it was in the learner's fastest step, with
// every op on one backend (each backend the learner's posteriors put
// within 1.5× of the best for a whole step, weight copies included), or,
// with -gpu-mem, with each op where its weights live, chosen step by step
// by Thompson sampling on the steps' times after 8 steps of the learner
// alone, a change of mode priced apart from the steps after it: the
// learner prices each op alone and cannot see what its device switches
// cost a step. -json's step_modes counts the steps of each, and with
// -step-times step_mode names each step's. perop is the per-op learner
// alone.
//
// static2x and pcie5x run the static baselines of DESIGN.md § Evaluation
// through the Executor; oracle (simulated backends only) places each op
// where the simulator's true mean duration plus transfer is lowest.
//
// Gathering: a decode step whose placement is set before it runs
// (only:NAME, or an auto step in a mode other than the learner's) has its
// GPU ops gathered and launched at once, replayed as graphs
// (backends.Recorder; -graphs=false queues them op by op); -json reports
// gathered_steps and the GPU's graph counts and device time.
//
// Overlap: every decode step looks its input tokens up where the last
// step's Argmax wrote them (GetRows of the tied embedding), so the host
// can issue a step before it reads the tokens of the one before, as
// vLLM's and SGLang's overlapped schedulers do: the device runs that step
// while the host reads and issues the next. Every step of a fixed
// strategy has its successor issued early, and under auto a step of a
// one-backend mode followed by another of that mode (-overlap=false:
// none); -json reports overlapped_steps.
//
// Throughputs reported: tokens per wall-clock second, and tokens per
// modelled second. When every backend is simulated (sim:*), they share
// one virtual clock (sim.Timeline) and the modelled time is the run's
// makespan under -exec (async: queued work, the host waiting only for
// what it reads; -sync or -exec sync: a wait after every op; -exec
// serial: the model before queues, durations summed), beside
// bound_tokens_per_s, the placement's bound (the largest of the host's
// issue time and each device's busy time). Otherwise the modelled time is
// the sum of the durations the backends reported for every op and copy.
// With simulated devices only the modelled figure means anything (they
// report modelled durations without sleeping); compare strategies on
// sim:* backends by modelled_tokens_per_s. The first -warmup steps
// (prefill micro-batches and decode steps alike) are left out of both
// figures (cold_modelled_tokens_per_s keeps them), so strategies that
// learn and those that do not can be compared after the same warm-up.
//
// Ctrl-C stops after the current step and flushes the store and trace. On
// a terminal a status line on stderr shows tokens/s, each backend's share
// of ops and the switches; at exit a placement table per bucket is
// printed. With -json, one JSON object goes to stdout at exit.
//
// A bad flag prints one line and a hint (-h prints the usage) and exits
// 2, as replay's; bad input (a -routing or -routing-drift file) and any
// other failure print their message and exit 1.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/rs/zerolog/log"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	_ "github.com/adaptsched/adaptsched/backends/all"
	"github.com/adaptsched/adaptsched/executor"
	"github.com/adaptsched/adaptsched/fleet"
	"github.com/adaptsched/adaptsched/hardware"
	"github.com/adaptsched/adaptsched/history"
	"github.com/adaptsched/adaptsched/internal/clilog"
	"github.com/adaptsched/adaptsched/relay"
	"github.com/adaptsched/adaptsched/sim"
)

// options are the command's flags.
type options struct {
	backends, strategy, db, trace string
	cpuProfile                    string // -cpuprofile: where the host's CPU profile goes
	tokens, batch, requests       int
	prompt, warmup                int    // prompt: the longest of prompts
	prompts                       []int  // -prompt: the lengths drawn from
	promptList                    string // -prompt as given
	ubatch                        int    // -ubatch: prompt tokens per micro-batch
	gpuMemS                       string // -gpu-mem as given
	gpuMem                        gpuMem
	moe, routingFile, drift       string  // -moe, -routing, -routing-drift as given
	driftFile                     string  // -routing-drift's FILE
	zipf                          float64 // -zipf
	routing                       moeRouting
	json, stream, stepTimes       bool
	sync                          bool          // -sync: the synchronous execution model
	graphs                        bool          // -graphs: gather a placed decode step's GPU ops and replay them as graphs
	overlap                       bool          // -overlap: issue a placed decode step's successor before reading its tokens
	exec                          string        // -exec: the simulated devices' execution model
	execModel                     sim.ExecModel // -exec and -sync, parsed
	resetStore, logJSON, verbose  bool
	model                         ModelConfig
	fleet                         fleet.Flags
	metrics                       string
}

const usageText = `usage: infer [flags]

infer decodes batches of requests with a small Llama-style model (random
Q8_0 weights) as a server would, every op placed by adaptsched on the
backends given, and reports tokens per second and where each bucket ran.
Ctrl-C stops after the current step and flushes the store and the trace.

flags:
`

// readInputs parses the flags and then reads the files they name
// (-routing, -routing-drift), before any output file is touched: a bad
// flag is a usage error (exit 2), a bad file bad input (exit 1).
func readInputs(args []string, stderr io.Writer) (options, error) {
	o, err := parseFlags(args, stderr)
	if err == nil {
		err = o.readRouting() // sets o.routing: not in the return list, whose order Go leaves open
	}
	return o, err
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	o := options{model: DefaultModel}
	fs := flag.NewFlagSet("infer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// A bad flag gets the flag package's one line and a hint; -h the
	// whole usage (both printed once Parse returns).
	fs.Usage = func() {}
	fs.StringVar(&o.backends, "backends", "cpu,cpu1", "comma-separated backends: cpu, cpu1, sim:<profile>, rocm")
	fs.StringVar(&o.strategy, "strategy", "auto", "auto (the per-op learner or one backend, chosen step by step), perop (the per-op learner alone), gpu, cpu, only:NAME, static2x, pcie5x, llamacpp (a weight's home, offload iff batch ≥ 32), or oracle (sim:* backends)")
	fs.StringVar(&o.db, "db", "", "posterior store directory, -strategy auto's step modes too (empty: none)")
	fs.BoolVar(&o.resetStore, "reset-damaged-store", false, "move a damaged -db aside (DIR.damaged-TIME) and start an empty one, with a warning")
	fs.BoolVar(&o.logJSON, "log-json", false, "log JSON lines on stderr (default: plain lines)")
	fs.BoolVar(&o.verbose, "v", false, "log informational lines too (the CPU backend's matmul path)")
	fs.StringVar(&o.trace, "trace", "", "write a trace (JSON Lines) to this file")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write the process's CPU profile (pprof) to this file: where the host's time per op goes")
	fs.IntVar(&o.tokens, "tokens", 32, "tokens generated per request")
	fs.IntVar(&o.batch, "batch", 1, "requests decoded together")
	fs.IntVar(&o.requests, "requests", 1, "batches to serve (0: until Ctrl-C)")
	fs.StringVar(&o.promptList, "prompt", "4", "prompt tokens per request (random ids): N, or N1,N2,... drawn per batch of requests")
	fs.StringVar(&o.moe, "moe", "", "E,K: every FFN a mixture of E experts, the top K per token")
	fs.StringVar(&o.routingFile, "routing", "", "with -moe: per-layer expert counts (JSON of sim/testdata/moe) that tokens are routed by")
	fs.Float64Var(&o.zipf, "zipf", 1, "with -moe and no -routing: Zipf exponent of the experts' popularity (0: uniform)")
	fs.StringVar(&o.drift, "routing-drift", "", "FILE@F: with -moe, route by FILE from the fraction F of the requests on")
	fs.IntVar(&o.ubatch, "ubatch", 512, "prompt tokens per sequence in one prefill micro-batch")
	fs.StringVar(&o.gpuMemS, "gpu-mem", "", "weight budget of each GPU: bytes (512M, 8G) or a share of the model's weights (50%); the weights beyond it stay in host memory (default: no budget, weights wherever ops need them)")
	fs.IntVar(&o.warmup, "warmup", 0, "first steps (prefill micro-batches and decode steps) left out of the tokens/s figures")
	fs.BoolVar(&o.json, "json", false, "print one JSON summary on stdout at exit")
	fs.BoolVar(&o.stepTimes, "step-times", false, "with -json: each step's modelled and wall-clock µs (and -strategy auto's mode for it)")
	fs.BoolVar(&o.overlap, "overlap", true, "issue each decode step before the tokens of the one before are read (a fixed strategy's, and auto's in a one-backend mode): the step looks its tokens up where they were written")
	fs.BoolVar(&o.graphs, "graphs", true, "gather the GPU ops of each decode step placed before it runs and launch them at once, replayed as graphs (only:NAME, and auto's modes but the learner's)")
	fs.BoolVar(&o.sync, "sync", false, "the synchronous model for comparison: the host waits for every op (-exec sync)")
	fs.StringVar(&o.exec, "exec", "async", "execution model of simulated devices: async (queued work, timed by makespan), sync (a wait after every op) or serial (the model before queues, durations summed)")
	fs.BoolVar(&o.stream, "stream", false, "print each generated token (request:token) on stdout")
	fs.IntVar(&o.model.Dim, "dim", o.model.Dim, "model width")
	fs.IntVar(&o.model.Layers, "layers", o.model.Layers, "transformer blocks")
	fs.IntVar(&o.model.Heads, "heads", o.model.Heads, "attention heads")
	fs.IntVar(&o.model.KVHeads, "kv-heads", o.model.KVHeads, "key/value heads (grouped-query attention)")
	fs.IntVar(&o.model.FFN, "ffn", o.model.FFN, "FFN width")
	fs.IntVar(&o.model.Vocab, "vocab", o.model.Vocab, "vocabulary size")
	fs.IntVar(&o.model.Ctx, "ctx", o.model.Ctx, "context length")
	fs.Uint64Var(&o.model.Seed, "seed", o.model.Seed, "seed of the weights, prompts and scheduler")
	fs.StringVar(&o.metrics, "metrics", "", "serve Prometheus metrics over HTTP on ADDR (HOST:PORT, :PORT or PORT; loopback unless a host is given; port 0 picks one, printed) at /metrics")
	o.fleet.Register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, usageText)
			fs.PrintDefaults()
			return o, err
		}
		fmt.Fprintln(stderr, usageHint)
		return o, &usageError{err: err, shown: true}
	}
	o, err := checkFlags(o, fs)
	if err != nil {
		return o, &usageError{err: err}
	}
	return o, nil
}

// checkFlags checks the parsed flags together.
func checkFlags(o options, fs *flag.FlagSet) (options, error) {
	if err := o.fleet.Validate(); err != nil {
		return o, err
	}
	var err error
	if o.prompts, o.prompt, err = parsePrompts(o.promptList); err != nil {
		return o, err
	}
	if o.gpuMem, err = parseGPUMem(o.gpuMemS); err != nil {
		return o, err
	}
	// The model's sizes first: -moe's routing tables are sized by -layers,
	// and parseMoE checks its E and K as validate would.
	if err := o.model.validate(); err != nil {
		return o, err
	}
	if err := o.parseMoE(); err != nil {
		return o, err
	}
	if err := ignoredFlag(o, fs); err != nil {
		return o, err
	}
	if err := checkMetricsAddr(o.metrics); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("infer: unexpected argument %q (infer takes flags only; -h lists them)", fs.Arg(0))
	case o.tokens <= 0 || o.batch <= 0 || o.requests < 0 || o.ubatch <= 0 || o.warmup < 0:
		return o, fmt.Errorf("infer: -tokens, -batch and -ubatch must be positive, -requests and -warmup not negative")
	// A request fills -prompt + -tokens - 1 positions: its last token
	// is generated, never fed back (TestContextBoundary). Apart, not
	// summed: the sum wraps for a -tokens near MaxInt (TestFlagErrorsOnce).
	case o.prompt > o.model.Ctx || o.tokens-1 > o.model.Ctx-o.prompt:
		return o, fmt.Errorf("infer: -prompt %d and -tokens %d need %d positions of the KV cache, more than -ctx %d (the last token generated is not fed back)",
			o.prompt, o.tokens, uint64(o.prompt)+uint64(o.tokens)-1, o.model.Ctx)
	}
	if err := o.parseExec(); err != nil {
		return o, err
	}
	avail, known := availableBytes()
	// The longest prompt: its first micro-batch, and its KV positions.
	return o, checkMemory(o.model, o.batch, min(o.ubatch, o.prompt), o.prompt, o.tokens, avail, known)
}

// ignoredFlag returns an error naming a flag given where nothing reads
// it: -zipf without -moe or beside -routing, -step-times without -json.
// Accepted, each was silently dropped, as replay refuses its own
// (TestFlagErrorsOnce).
func ignoredFlag(o options, fs *flag.FlagSet) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		switch {
		case err != nil:
		case f.Name == "zipf" && o.moe == "":
			err = errors.New("infer: -zipf skews the popularity of -moe's experts: use it with -moe E,K")
		case f.Name == "zipf" && o.routingFile != "":
			err = errors.New("infer: -zipf and -routing both route -moe's tokens: give one of them")
		case f.Name == "step-times" && o.stepTimes && !o.json:
			err = errors.New("infer: -step-times adds each step's times to the -json summary: use it with -json")
		}
	})
	return err
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// againstBackends checks -backends, -strategy and -gpu-mem against the
// opened backends, as usage errors, and returns the strategy and the
// weight budgets. Rule: run calls it before the first file is created or
// truncated. Reason: a bad flag leaves -trace's and -cpuprofile's files
// as they were (TestBadFlagKeepsTrace).
func (o *options) againstBackends(infos []backends.Info, bes []backends.Backend) (choice, []int64, error) {
	if err := checkBackends(infos, o.strategy); err != nil {
		return choice{}, nil, &usageError{err: err}
	}
	st, err := parseStrategy(o.strategy, bes)
	if err != nil {
		return choice{}, nil, &usageError{err: err}
	}
	budgets, err := o.weightBudgets(bes) // a usageError
	return st, budgets, err
}

func run(ctx context.Context, args []string, stdoutW, stderr io.Writer) (err error) {
	o, err := readInputs(args, stderr)
	if err != nil {
		return err
	}
	stdout := &stickyWriter{w: stdoutW}
	defer func() { err = errors.Join(err, stdout.failed()) }()
	logger := clilog.New(stderr, o.logJSON, logLevel(o.verbose))
	log.Logger = logger
	bes, infos, clock, err := openBackends(o.backends, o.execModel, logBLAS(logger))
	if err != nil {
		return err
	}
	defer func() {
		for _, b := range bes {
			b.Close()
		}
	}()
	st, budgets, err := o.againstBackends(infos, bes)
	if err != nil {
		return err
	}
	ml, err := listenMetrics(o.metrics) // bound here, served once the Executor is
	if err != nil {
		return err
	}
	if ml != nil {
		defer ml.Close() // closed already once served
	}
	stopProfile, err := startCPUProfile(o.cpuProfile)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopProfile()) }()
	steps := o.stepPlacer(&st, bes)
	// Only the async model queues: -sync (and serial) wait for every op.
	cfg := executor.Config{Backends: bes, Strategy: st.strategy, Placer: st.placer, Seed: o.model.Seed,
		Synchronous: o.execModel != sim.Async,
		Logger:      clilog.Slog(logger), WeightBudget: budgets}
	ro := relay.Options{Logger: logger}
	var src metricSources
	var store stepStore // -db's, for auto's step modes
	// No err := below: the defers join into the named err (TestWriteErrorsReachExit).
	if o.db != "" {
		var db *history.DB
		if db, err = history.Open(history.DefaultOptions(o.db).WithFingerprint(hardware.FingerprintOf(infos)).
			WithLogger(logger).WithMoveDamaged(o.resetStore)); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, db.Close()) }()
		cfg.Warm, ro.Store, src.store, store = db.Load(), db, db, db
		fmt.Fprintln(stderr, loadedLine(o.db, db.Stats()))
	}
	if o.trace != "" {
		var closeTrace func() error
		if cfg.Recorder, closeTrace, err = openTrace(o.trace, infos); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, closeTrace()) }()
	}
	e, err := executor.New(cfg)
	if err != nil {
		return err
	}
	node, stopFleet, err := o.fleet.Start(ctx, hardware.FingerprintOf(infos), logger)
	if err != nil {
		return errors.Join(err, e.Close())
	}
	defer func() { stopFleet(); err = errors.Join(err, o.fleet.Err()) }() // Err: authorisation refused while running
	if node != nil {
		ro.Fleet = node
	}
	rl, err := relay.Start(e.Scheduler(), ro)
	if err != nil {
		return errors.Join(err, e.Close())
	}
	// The Executor first: the relay's last round then takes every change,
	// before the fleet's node and the store close.
	defer func() { err = errors.Join(err, e.Close(), rl.Close()) }()
	src.sched, src.exec = e.Scheduler(), e
	if err = steps.attach(e.Scheduler(), e, store); err != nil {
		return err
	}
	steps.sayRestored(stderr, o.db)
	stopMetrics := startMetrics(ml, src, node, logger, stderr)
	defer stopMetrics()
	m, err := NewModel(e, o.model)
	if err != nil {
		return err
	}
	defer m.Free()
	if err := o.loadWeights(e, m, bes); err != nil {
		return err
	}
	sum := Summary{Strategy: o.strategy, Params: o.model.Params(), Batch: o.batch, ExecModel: clock.modelName()}
	status := newStatusLine(stderr, e)
	gather := newStepGather(o.graphs, e, bes, st, steps, cfg.Synchronous)
	o.overlap = overlaps(o.overlap, st, bes)
	sv, err := serve(ctx, m, o, stdout, status, clock, steps, gather)
	if status != nil {
		status.clear()
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	sum.Stopped = ctx.Err() != nil
	sv.summarise(&sum, o.stepTimes)
	tel := sum.addRun(e, infos)
	sum.StepModes = steps.runs()
	sum.GatheredSteps, sum.Graphs = gather.count(), gather.graphs(bes)
	sum.OverlappedSteps = sv.overlapped
	if node != nil {
		if err := rl.Flush(ctx); err != nil && !errors.Is(err, context.Canceled) {
			logger.Warn().Err(err).Msg("fleet: last publish before exit failed; Close tries again")
		}
		sum.Fleet = fleetSummary(node.Stats())
	}
	return writeSummary(stdout, sum, tel, o.json)
}

// writeSummary writes the run's summary to w: one JSON object with
// asJSON, else the placement table and then the headline, last, where a
// terminal leaves it in view.
func writeSummary(w *stickyWriter, sum Summary, tel adaptive.Telemetry, asJSON bool) error {
	if asJSON {
		json.NewEncoder(w).Encode(sum) // an error is in w.err
		return nil
	}
	if err := placementTable(w, tel); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d tokens in %.2fs: %.1f tokens/s (modelled %.1f), %d ops, %d switches, %d fallbacks (%s, %.1fM params)\n",
		sum.Tokens, sum.Seconds, sum.TokensPerS, sum.ModelledTokensPerS, sum.Ops, sum.Switches, sum.Fallbacks, sum.Strategy, float64(sum.Params)/1e6)
	return err
}

// logBLAS returns what openBackends tells of each backend it opens: the
// BLAS its matmuls go through, where it has one.
func logBLAS(logger zerolog.Logger) func(backends.Backend) {
	return func(b backends.Backend) {
		if bl, ok := b.(interface{ BLAS() string }); ok {
			logger.Info().Str("backend", b.Info().Name).Msg("matmul through " + bl.BLAS())
		}
	}
}

// statusLine is the live line on a terminal.
type statusLine struct {
	w io.Writer
	e *executor.Executor
}

// newStatusLine returns the status line for w, or nil when w is not a
// terminal.
func newStatusLine(w io.Writer, e *executor.Executor) *statusLine {
	if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		return &statusLine{w: w, e: e}
	}
	return nil
}

func (s *statusLine) show(tokens int64, elapsed time.Duration) {
	st := s.e.Stats()
	var b strings.Builder
	fmt.Fprintf(&b, "\r\033[K%d tokens  %.1f tok/s ", tokens, float64(tokens)/elapsed.Seconds())
	sh := shares(st)
	for _, be := range st.Backends {
		fmt.Fprintf(&b, " %s %.0f%%", be.Name, 100*sh[be.Name])
		if !be.Healthy {
			b.WriteString("(down)")
		}
	}
	var sw int64
	for _, bt := range s.e.Scheduler().Telemetry().Backends {
		sw += bt.Switches
	}
	fmt.Fprintf(&b, "  switches %d  fallbacks %d", sw, st.Fallbacks)
	io.WriteString(s.w, b.String())
}

func (s *statusLine) clear() { io.WriteString(s.w, "\r\033[K") }

// parsePrompts reads -prompt: one length, or lengths separated by commas
// (a batch of requests draws one); it returns them and the longest.
func parsePrompts(s string) ([]int, int, error) {
	var out []int
	longest := 0
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, 0, fmt.Errorf("infer: -prompt %q: %q is not a positive number of tokens", s, f)
		}
		out = append(out, n)
		longest = max(longest, n)
	}
	return out, longest, nil
}

// logLevel is the commands' level: warnings, and information with -v.
func logLevel(verbose bool) zerolog.Level {
	if verbose {
		return zerolog.InfoLevel
	}
	return zerolog.WarnLevel
}
