// Command peer runs adaptsched and StarPU side by side on one task stream
// (make peer): both choose, per task, between the same two matmul
// implementations (bench/peer's peerkern.c), and it prints each one's
// time against the oracle and their per-task overheads.
//
// # Usage
//
//	peer -gen bench/peer/testdata/stream.txt          # write the stream (seed 24)
//	peer -starpu bin/peer_starpu -stream FILE -rounds 3
//
// Each round runs, in alternating order, StarPU (dmda, a fresh
// STARPU_HOME; then its per-task overhead probe), adaptsched cold (no
// store; then its probe), adaptsched with an empty store (the store's
// cost, and what fills it), adaptsched warm (that store, reopened), and
// the oracle's measurement (both implementations on every task, in turn).
// Ratios and regrets are taken within a round and their medians printed.
//
// -gen writes a stream and reads -seed and -tasks besides; a run (no
// -gen) reads -stream, -starpu, -rounds and -empty. A flag the mode does
// not read is a bad flag (exit 2).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/adaptsched/adaptsched/bench/peer"
	"github.com/adaptsched/adaptsched/history"
	"github.com/adaptsched/adaptsched/internal/clilog"
	"github.com/adaptsched/adaptsched/internal/host"
)

func main() {
	c, err := parseFlags(os.Args[1:], os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return
	case err != nil: // parseFlags said why
		os.Exit(2)
	}
	if c.gen != "" {
		err = writeStream(c.gen, peer.GenOptions{Seed: c.seed, Tasks: c.tasks})
	} else {
		err = run(os.Stdout, c.stream, c.starpu, c.rounds, c.empty)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		os.Exit(1)
	}
}

// usageHint follows a bad flag: the flags are one -h away.
const usageHint = "run peer -h for the flags"

// config is the command line.
type config struct {
	gen, stream, starpu  string
	seed                 uint64
	tasks, rounds, empty int
}

// genOnly and runOnly are the flags that only -gen, or only a run (no
// -gen), reads.
var (
	genOnly = []string{"seed", "tasks"}
	runOnly = []string{"stream", "starpu", "rounds", "empty"}
)

// parseFlags reads the command line; -h prints the flags and returns
// flag.ErrHelp, and a bad flag or value prints one line and the hint on
// stderr and returns the error, for exit status 2. Rule: -tasks, -rounds
// and -empty below 1, an argument, and a flag the mode does not read are
// such errors. Reason: -rounds 0 and -empty 0 panicked after the stream's
// calibration, -tasks 0 wrote 20,000 tasks, a stream named without
// -stream ran the default one (TestFlagErrors), and a flag of the other
// mode was dropped (TestInapplicableFlags).
func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("peer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {} // a bad flag: the flag package's line, then the hint
	fs.StringVar(&c.gen, "gen", "", "write the generated stream to this file and exit")
	fs.Uint64Var(&c.seed, "seed", 24, "with -gen: the generator's seed")
	fs.IntVar(&c.tasks, "tasks", 20000, "with -gen: the generated stream's tasks")
	fs.StringVar(&c.stream, "stream", "bench/peer/testdata/stream.txt", "without -gen: the task stream to run")
	fs.StringVar(&c.starpu, "starpu", "", "without -gen: the StarPU program (make peer builds it); empty: adaptsched only")
	fs.IntVar(&c.rounds, "rounds", 3, "without -gen: rounds of alternated runs")
	fs.IntVar(&c.empty, "empty", 20000, "without -gen: empty tasks of each overhead probe")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "usage: peer -gen FILE [-seed N] [-tasks N]\n       peer [-stream FILE] [-starpu PROGRAM] [-rounds N] [-empty N]")
			fs.PrintDefaults()
		} else {
			fmt.Fprintln(stderr, usageHint) // the flag package printed the error
		}
		return c, err
	}
	err := inapplicable(fs, c.gen != "")
	switch {
	case err != nil:
	case fs.NArg() > 0:
		err = fmt.Errorf("unexpected argument %q (peer takes flags only: -stream FILE names the stream)", fs.Arg(0))
	case c.tasks < 1:
		err = fmt.Errorf("-tasks %d: want at least 1", c.tasks)
	case c.rounds < 1:
		err = fmt.Errorf("-rounds %d: want at least 1", c.rounds)
	case c.empty < 1:
		err = fmt.Errorf("-empty %d: want at least 1", c.empty)
	}
	if err != nil {
		fmt.Fprintf(stderr, "peer: %v\n%s\n", err, usageHint)
	}
	return c, err
}

// inapplicable returns an error naming the first flag given that the
// mode (-gen, or a run without it) does not read, or an empty -gen.
func inapplicable(fs *flag.FlagSet, gen bool) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		switch {
		case err != nil:
		case gen && slices.Contains(runOnly, f.Name):
			err = fmt.Errorf("-%s does not apply to -gen (writing a stream): it is read by a run of -stream", f.Name)
		case !gen && slices.Contains(genOnly, f.Name):
			err = fmt.Errorf("-%s does not apply to a run (no -gen): it is read by -gen FILE, writing a stream", f.Name)
		case !gen && f.Name == "gen":
			err = errors.New(`-gen "": want the file to write the stream to`)
		}
	})
	return err
}

func writeStream(path string, o peer.GenOptions) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := peer.Generate(o).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// round is one round's measurements. The oracle is measured in each
// round too: on a shared machine the speed of the minutes in which the
// policies ran is the only fair reference.
type round struct {
	starpu, cold, primed, warm peer.Result
	starpuEmpty, starpuAsync   float64 // ns per empty task
	adaptEmpty                 float64 // ns per empty task
	hasStarPU                  bool
	oracle                     peer.Oracle // measured in the round
}

func run(w io.Writer, path, bin string, rounds, empty int) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	st, err := peer.Read(f, path)
	f.Close()
	if err != nil {
		return err
	}
	if err := peer.Load(); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "adaptsched-peer-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintf(w, "peer: %s, %d logical CPUs, %s\n", host.CPUModel(), runtime.NumCPU(), time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "peer: %s: %d tasks over %d shapes; drift: %v %g× from task %d\n",
		path, len(st.Tasks), len(st.Shapes), st.Drift.Impl, st.Drift.Factor, st.Drift.From)
	delays, err := peer.Calibrate(st)
	if err != nil {
		return err
	}
	delayFile := filepath.Join(tmp, "delays.txt")
	df, err := os.Create(delayFile)
	if err != nil {
		return err
	}
	err = peer.WriteDelays(df, delays)
	if cerr := df.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "peer: the drift's busy-wait after each %v kernel, µs per shape:", st.Drift.Impl)
	for _, d := range delays {
		fmt.Fprintf(w, " %.1f", float64(d)/1e3)
	}
	fmt.Fprintln(w)
	var rs []round
	for r := range rounds {
		var rd round
		steps := []func() error{
			func() error {
				if bin == "" {
					return nil
				}
				var err error
				rd.starpu, rd.starpuEmpty, err = peer.RunStarPU(bin, path, delayFile, tmp, empty)
				rd.starpuAsync, rd.hasStarPU = rd.starpu.EmptyAsync, err == nil
				return err
			},
			func() error {
				var err error
				if rd.cold, err = peer.RunAdaptsched(st, peer.RunOptions{Seed: uint64(r), Delays: delays}); err != nil {
					return err
				}
				ns, err := peer.Overhead(empty)
				rd.adaptEmpty = float64(ns)
				return err
			},
		}
		warm := func() error {
			return primeAndWarm(st, delays, filepath.Join(tmp, fmt.Sprintf("store-%d", r)), uint64(r), &rd)
		}
		oracle := func() error {
			var err error
			rd.oracle, err = peer.MeasureOracle(st, delays)
			return err
		}
		if r%2 == 0 {
			steps = append(steps, warm, oracle)
		} else {
			steps = []func() error{oracle, warm, steps[1], steps[0]}
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return err
			}
		}
		printRound(w, r+1, rd)
		rs = append(rs, rd)
	}
	last := rs[len(rs)-1]
	printOracle(w, st, last.oracle)
	printChoices(w, st, last)
	summary(w, rs)
	return nil
}

// primeAndWarm runs the stream into an empty store in dir (rd.primed),
// closes it, and runs again from it (rd.warm).
func primeAndWarm(st peer.Stream, delays []time.Duration, dir string, seed uint64, rd *round) error {
	for i, dst := range []*peer.Result{&rd.primed, &rd.warm} {
		db, err := history.Open(history.DefaultOptions(dir).WithLogger(clilog.New(os.Stderr, false, zerolog.WarnLevel)))
		if err != nil {
			return err
		}
		*dst, err = peer.RunAdaptsched(st, peer.RunOptions{Store: db, Seed: seed + uint64(100*(i+1)), Delays: delays})
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func printOracle(w io.Writer, st peer.Stream, o peer.Oracle) {
	first, second := st.Counts()
	fmt.Fprintf(w, "oracle of the last round: both implementations on every task, in turn; median µs per task (best: the lower):\n")
	fmt.Fprintf(w, "  %-12s %5s %5s  %9s %9s  %9s %9s  %s\n", "shape M·K·N", "n1", "n2", "blas", "blocked", "blas(d)", "blocked(d)", "best before/after drift")
	for i, sh := range st.Shapes {
		m := o.Median[i]
		fmt.Fprintf(w, "  %-12s %5d %5d  %9.1f %9.1f  %9.1f %9.1f  %v/%v\n", fmt.Sprintf("%d·%d·%d", sh.M, sh.K, sh.N),
			first[i], second[i], m[0][peer.BLAS]/1e3, m[0][peer.Blocked]/1e3, m[1][peer.BLAS]/1e3, m[1][peer.Blocked]/1e3,
			o.Best(i, false), o.Best(i, true))
	}
	fmt.Fprintf(w, "  oracle at the means %.3f s (first half %.3f, second half %.3f), at the medians %.3f s (%.3f, %.3f); only blas %.3f s, only blocked %.3f s (means)\n",
		o.Total.Seconds(), o.Half1.Seconds(), o.Half2.Seconds(), (o.Typical1 + o.Typical2).Seconds(), o.Typical1.Seconds(), o.Typical2.Seconds(),
		o.Only[peer.BLAS].Seconds(), o.Only[peer.Blocked].Seconds())
}

// printChoices prints, per shape and half, the share of each scheduler's
// tasks on the oracle's implementation.
func printChoices(w io.Writer, st peer.Stream, rd round) {
	o := rd.oracle
	fmt.Fprintf(w, "  tasks on the oracle's implementation, before / after the drift:\n")
	fmt.Fprintf(w, "  %-12s", "shape")
	names := []string{"adapt cold", "adapt warm"}
	rs := []peer.Result{rd.cold, rd.warm}
	if rd.hasStarPU {
		names, rs = append([]string{"starpu"}, names...), append([]peer.Result{rd.starpu}, rs...)
	}
	for _, n := range names {
		fmt.Fprintf(w, " %17s", n)
	}
	fmt.Fprintln(w)
	for i, sh := range st.Shapes {
		fmt.Fprintf(w, "  %-12s", fmt.Sprintf("%d·%d·%d", sh.M, sh.K, sh.N))
		for _, r := range rs {
			var cells [2]string
			for h := range 2 {
				best := o.Best(i, h == 1)
				var n, on int
				if i < len(r.PerShape) {
					c := r.PerShape[i][h]
					n, on = c[peer.BLAS].N+c[peer.Blocked].N, c[best].N
				}
				cells[h] = "-"
				if n > 0 {
					cells[h] = fmt.Sprintf("%.0f%%", 100*float64(on)/float64(n))
				}
			}
			fmt.Fprintf(w, " %17s", cells[0]+" / "+cells[1])
		}
		fmt.Fprintln(w)
	}
}

func pct(x, ref time.Duration) float64 { return 100 * (float64(x) - float64(ref)) / float64(ref) }

func printRound(w io.Writer, n int, rd round) {
	o := rd.oracle
	fmt.Fprintf(w, "round %d (regret: against the oracle's %.3f s; 2nd half: kernel time against its %.3f s):\n", n, o.Total.Seconds(), o.Half2.Seconds())
	line := func(name string, r peer.Result, emptyNs float64) {
		fmt.Fprintf(w, "  %-12s total %.3f s (regret %+5.1f%%)  kernels %.3f s (%+5.1f%%)  2nd half %.3f s (%+5.1f%%)  blas/blocked %d/%d then %d/%d",
			name, r.Total.Seconds(), pct(r.Total, o.Total), (r.Kernel1 + r.Kernel2).Seconds(), pct(r.Kernel1+r.Kernel2, o.Total),
			r.Kernel2.Seconds(), pct(r.Kernel2, o.Half2),
			r.Chosen[0][peer.BLAS], r.Chosen[0][peer.Blocked], r.Chosen[1][peer.BLAS], r.Chosen[1][peer.Blocked])
		if emptyNs > 0 {
			fmt.Fprintf(w, "  empty task %.0f ns", emptyNs)
		}
		p1, p2 := o.Price(r)
		fmt.Fprintf(w, "\n  %-12s its choices at the oracle's medians: %.3f s (%+5.1f%%), 2nd half %.3f s (%+5.1f%%)\n",
			"", (p1 + p2).Seconds(), pct(p1+p2, o.Typical1+o.Typical2), p2.Seconds(), pct(p2, o.Typical2))
	}
	if rd.hasStarPU {
		line("starpu dmda", rd.starpu, rd.starpuEmpty)
		fmt.Fprintf(w, "  %-12s empty tasks submitted together, waited for once: %.0f ns each\n", "", rd.starpuAsync)
	}
	line("adapt cold", rd.cold, rd.adaptEmpty)
	line("adapt +store", rd.primed, 0)
	line("adapt warm", rd.warm, 0)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func summary(w io.Writer, rs []round) {
	var cold, warm, spEmpty, spAsync, adEmpty, coldH2, warmH2, spH2, coldReg, warmReg, spReg []float64
	var pCold, pWarm, pSP, pColdH2, pWarmH2, pSPH2, pRatioCold, pRatioWarm []float64
	priced := func(r peer.Result, o peer.Oracle, tot, h2 *[]float64) {
		p1, p2 := o.Price(r)
		*tot, *h2 = append(*tot, pct(p1+p2, o.Typical1+o.Typical2)), append(*h2, pct(p2, o.Typical2))
	}
	for _, r := range rs {
		o := r.oracle
		warmReg = append(warmReg, pct(r.warm.Total, o.Total))
		priced(r.cold, o, &pCold, &pColdH2)
		priced(r.warm, o, &pWarm, &pWarmH2)
		if r.hasStarPU {
			priced(r.starpu, o, &pSP, &pSPH2)
			spAsync = append(spAsync, r.starpuAsync)
			ratio := func(a peer.Result) float64 {
				a1, a2 := o.Price(a)
				s1, s2 := o.Price(r.starpu)
				return float64(a1+a2) / float64(s1+s2)
			}
			pRatioCold, pRatioWarm = append(pRatioCold, ratio(r.cold)), append(pRatioWarm, ratio(r.warm))
		}
		adEmpty = append(adEmpty, r.adaptEmpty)
		coldH2 = append(coldH2, pct(r.cold.Kernel2, o.Half2))
		warmH2 = append(warmH2, pct(r.warm.Kernel2, o.Half2))
		coldReg = append(coldReg, pct(r.cold.Total, o.Total))
		if r.hasStarPU {
			cold = append(cold, r.cold.Total.Seconds()/r.starpu.Total.Seconds())
			warm = append(warm, r.warm.Total.Seconds()/r.starpu.Total.Seconds())
			spEmpty = append(spEmpty, r.starpuEmpty)
			spH2 = append(spH2, pct(r.starpu.Kernel2, o.Half2))
			spReg = append(spReg, pct(r.starpu.Total, o.Total))
		}
	}
	// starpu adds StarPU's median of v, when StarPU ran.
	starpu := func(v []float64) {
		if len(cold) > 0 {
			fmt.Fprintf(w, ", starpu %+.1f%%", median(v))
		}
	}
	fmt.Fprintf(w, "medians over %d rounds (each against its round's oracle):\n", len(rs))
	fmt.Fprintf(w, "  measured: regret of the total: adaptsched cold %+.1f%%, warm %+.1f%%", median(coldReg), median(warmReg))
	starpu(spReg)
	fmt.Fprintf(w, "; second half (kernels): adaptsched cold %+.1f%%, warm %+.1f%%", median(coldH2), median(warmH2))
	starpu(spH2)
	fmt.Fprintf(w, "\n  choices at the oracle's medians: regret of the total: adaptsched cold %+.1f%%, warm %+.1f%%", median(pCold), median(pWarm))
	starpu(pSP)
	fmt.Fprintf(w, "; second half: adaptsched cold %+.1f%%, warm %+.1f%%", median(pColdH2), median(pWarmH2))
	starpu(pSPH2)
	if len(cold) > 0 {
		fmt.Fprintf(w, "\n  choices at the oracle's medians, adaptsched/starpu: %.2f (cold), %.2f (warm)", median(pRatioCold), median(pRatioWarm))
		fmt.Fprintf(w, "\n  starpu empty tasks submitted together and waited for once: %.0f ns each", median(spAsync))
	}
	fmt.Fprintln(w)
	if len(cold) == 0 {
		fmt.Fprintf(w, "peer: no StarPU run; adaptsched per-task overhead %.0f ns\n", median(adEmpty))
		return
	}
	fmt.Fprintf(w, "peer: adaptsched/starpu total time %.2f (cold), %.2f (warm); per-task overhead adaptsched %.0f ns, starpu %.0f ns\n",
		median(cold), median(warm), median(adEmpty), median(spEmpty))
}
