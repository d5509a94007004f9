// Command infer is a long-running inference program on the adaptive
// Executor: a small Llama-style decoder (RMSNorm, RoPE, grouped-query
// attention with a KV cache, SwiGLU FFN, Q8_0 weights) with deterministic
// random weights, decoding batches of requests as a server would, every op
// placed by adaptsched on the backends given (issue 6).
//
// Usage:
//
//	infer [-backends cpu,cpu1] [-strategy auto|only:NAME|gpu|cpu] [-tokens N] [-batch N]
//	      [-requests N] [-db DIR] [-trace FILE] [-json] [model flags]
//
// Ctrl-C stops after the current step and flushes the store and trace. On
// a terminal a status line on stderr shows tokens/s, each backend's share
// of ops and the switches; at exit a placement table per bucket is
// printed. With -json, one JSON object goes to stdout at exit.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	_ "github.com/adaptsched/adaptsched/backends/all"
	"github.com/adaptsched/adaptsched/history"
)

// options are the command's flags.
type options struct {
	backends, strategy, db, trace string
	tokens, batch, requests       int
	prompt                        int
	json, stream                  bool
	model                         ModelConfig
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	o := options{model: DefaultModel}
	fs := flag.NewFlagSet("infer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.backends, "backends", "cpu,cpu1", "comma-separated backends: cpu, cpu1, sim:<profile>, rocm")
	fs.StringVar(&o.strategy, "strategy", "auto", "auto, gpu, cpu, or only:NAME")
	fs.StringVar(&o.db, "db", "", "posterior store directory (empty: none)")
	fs.StringVar(&o.trace, "trace", "", "write a trace (JSON Lines) to this file")
	fs.IntVar(&o.tokens, "tokens", 32, "tokens generated per request")
	fs.IntVar(&o.batch, "batch", 1, "requests decoded together")
	fs.IntVar(&o.requests, "requests", 1, "batches to serve (0: until Ctrl-C)")
	fs.IntVar(&o.prompt, "prompt", 4, "prompt tokens per request (random ids)")
	fs.BoolVar(&o.json, "json", false, "print one JSON summary on stdout at exit")
	fs.BoolVar(&o.stream, "stream", false, "print each generated token (request:token) on stdout")
	fs.IntVar(&o.model.Dim, "dim", o.model.Dim, "model width")
	fs.IntVar(&o.model.Layers, "layers", o.model.Layers, "transformer blocks")
	fs.IntVar(&o.model.Heads, "heads", o.model.Heads, "attention heads")
	fs.IntVar(&o.model.KVHeads, "kv-heads", o.model.KVHeads, "key/value heads (grouped-query attention)")
	fs.IntVar(&o.model.FFN, "ffn", o.model.FFN, "FFN width")
	fs.IntVar(&o.model.Vocab, "vocab", o.model.Vocab, "vocabulary size")
	fs.IntVar(&o.model.Ctx, "ctx", o.model.Ctx, "context length")
	fs.Uint64Var(&o.model.Seed, "seed", o.model.Seed, "seed of the weights, prompts and scheduler")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.tokens <= 0 || o.batch <= 0 || o.requests < 0 || o.prompt <= 0:
		return o, fmt.Errorf("infer: -tokens, -batch and -prompt must be positive, -requests not negative")
	case o.prompt+o.tokens > o.model.Ctx:
		return o, fmt.Errorf("infer: -prompt %d + -tokens %d exceed -ctx %d", o.prompt, o.tokens, o.model.Ctx)
	}
	return o, o.model.validate()
}

// parseStrategy reads -strategy.
func parseStrategy(s string) (adaptive.Strategy, error) {
	switch {
	case s == "auto":
		return adaptive.Automatic, nil
	case s == "gpu":
		return adaptive.GPUPreferred, nil
	case s == "cpu":
		return adaptive.CPUPreferred, nil
	case strings.HasPrefix(s, "only:") && len(s) > 5:
		return adaptive.Only(s[5:]), nil
	}
	return adaptive.Strategy{}, fmt.Errorf("infer: unknown -strategy %q (auto, gpu, cpu, only:NAME)", s)
}

// Summary is the -json output.
type Summary struct {
	Strategy   string             `json:"strategy"`
	Backends   []string           `json:"backends"`
	Params     int64              `json:"params"`
	Batch      int                `json:"batch"`
	Tokens     int64              `json:"tokens"`
	Seconds    float64            `json:"seconds"`
	TokensPerS float64            `json:"tokens_per_s"`
	Ops        int64              `json:"ops"`
	Share      map[string]float64 `json:"share"`
	Switches   int64              `json:"switches"`
	Fallbacks  int64              `json:"fallbacks"`
	Stopped    bool               `json:"stopped"` // by a signal
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	st, err := parseStrategy(o.strategy)
	if err != nil {
		return err
	}
	var bes []backends.Backend
	defer func() {
		for _, b := range bes {
			b.Close()
		}
	}()
	var infos []backends.Info
	for _, name := range strings.Split(o.backends, ",") {
		b, err := backends.Open(strings.TrimSpace(name))
		if err != nil {
			return err
		}
		bes = append(bes, b)
		infos = append(infos, b.Info())
	}
	logger := zerolog.New(zerolog.ConsoleWriter{Out: stderr}).Level(zerolog.WarnLevel).With().Timestamp().Logger()
	cfg := adaptive.ExecutorConfig{Config: adaptive.Config{Backends: bes, Strategy: st, Seed: o.model.Seed, Logger: logger}}
	if o.db != "" {
		db, err := history.Open(history.DefaultOptions(o.db).WithFingerprint(history.FingerprintOf(infos)))
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, db.Close()) }()
		cfg.Store = db
	}
	if o.trace != "" {
		f, err := os.Create(o.trace)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, f.Close()) }()
		rec, err := history.NewRecorder(f, history.Header{Created: time.Now(), Backends: infos}, history.RecorderOptions{})
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, rec.Close()) }()
		cfg.Recorder = rec
	}
	e, err := adaptive.NewExecutor(cfg)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, e.Close()) }()
	m, err := NewModel(e, o.model)
	if err != nil {
		return err
	}
	defer m.Free()
	sum := Summary{Strategy: o.strategy, Params: o.model.Params(), Batch: o.batch}
	for _, in := range infos {
		sum.Backends = append(sum.Backends, in.Name)
	}
	var status *statusLine
	if f, ok := stderr.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		status = &statusLine{w: stderr, e: e}
	}
	start := time.Now()
	sum.Tokens, sum.Ops, err = serve(ctx, m, o, stdout, status)
	sum.Seconds = time.Since(start).Seconds()
	if status != nil {
		status.clear()
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	sum.Stopped = ctx.Err() != nil
	sum.TokensPerS = float64(sum.Tokens) / sum.Seconds
	stats, tel := e.Stats(), e.Scheduler().Telemetry()
	sum.Share = shares(stats)
	sum.Fallbacks = stats.Fallbacks
	for _, b := range tel.Backends {
		sum.Switches += b.Switches
	}
	if o.json {
		return json.NewEncoder(stdout).Encode(sum)
	}
	fmt.Fprintf(stdout, "%d tokens in %.2fs: %.1f tokens/s, %d ops, %d switches, %d fallbacks (%s, %.1fM params)\n",
		sum.Tokens, sum.Seconds, sum.TokensPerS, sum.Ops, sum.Switches, sum.Fallbacks, o.strategy, float64(sum.Params)/1e6)
	placementTable(stdout, tel)
	return nil
}

// serve decodes -requests batches (forever with 0) until ctx ends, and
// returns the tokens generated and the ops run.
func serve(ctx context.Context, m *Model, o options, stdout io.Writer, status *statusLine) (tokens, ops int64, err error) {
	bt, err := m.NewBatch(o.batch)
	if err != nil {
		return 0, 0, err
	}
	defer bt.Free()
	r := rand.New(rand.NewPCG(o.model.Seed, 0x9e3779b9))
	start := time.Now()
	last := start
	for req := 0; o.requests == 0 || req < o.requests; req++ {
		bt.Reset()
		cur := make([]int, o.batch)
		prompts := make([][]int, o.batch)
		for i := range prompts {
			for range o.prompt {
				prompts[i] = append(prompts[i], r.IntN(o.model.Vocab))
			}
			cur[i] = prompts[i][0]
		}
		for p := 0; p < o.prompt+o.tokens-1; p++ {
			if err := ctx.Err(); err != nil {
				return tokens, ops, err
			}
			next, err := bt.Step(cur, &ops)
			if err != nil {
				return tokens, ops, err
			}
			if p+1 < o.prompt {
				for i := range cur {
					cur[i] = prompts[i][p+1]
				}
				continue
			}
			cur = next
			tokens += int64(o.batch)
			if o.stream {
				for i, tok := range next {
					fmt.Fprintf(stdout, "%d:%d ", req*o.batch+i, tok)
				}
				fmt.Fprintln(stdout)
			}
			if status != nil && time.Since(last) >= 250*time.Millisecond {
				last = time.Now()
				status.show(tokens, time.Since(start))
			}
		}
	}
	return tokens, ops, nil
}

// shares returns each backend's share of the ops that ran.
func shares(st adaptive.ExecutorStats) map[string]float64 {
	var total int64
	for _, b := range st.Backends {
		total += b.Ops
	}
	out := map[string]float64{}
	for _, b := range st.Backends {
		if total > 0 {
			out[b.Name] = float64(b.Ops) / float64(total)
		} else {
			out[b.Name] = 0
		}
	}
	return out
}

// statusLine is the live line on a terminal.
type statusLine struct {
	w io.Writer
	e *adaptive.Executor
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

// placementTable prints, per bucket, each backend's share of the ops, its
// mean µs, and the bucket's switches.
func placementTable(w io.Writer, tel adaptive.Telemetry) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprint(tw, "bucket\tincumbent\tswitches")
	for _, b := range tel.Backends {
		fmt.Fprintf(tw, "\t%s ops\t%s µs", b.Name, b.Name)
	}
	fmt.Fprintln(tw)
	buckets := append([]adaptive.BucketTelemetry(nil), tel.Buckets...)
	sort.Slice(buckets, func(i, j int) bool { return buckets[i].Name < buckets[j].Name })
	for _, bk := range buckets {
		var total int64
		for _, a := range bk.Arms {
			total += a.N
		}
		if total == 0 {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d", bk.Name, bk.Incumbent, bk.Switches)
		for _, a := range bk.Arms {
			fmt.Fprintf(tw, "\t%d (%.0f%%)\t%.1f", a.N, 100*float64(a.N)/float64(total), a.MeanUs)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}
