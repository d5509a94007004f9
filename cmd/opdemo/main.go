package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/adaptsched/adaptsched/backends"
	_ "github.com/adaptsched/adaptsched/backends/all"
	"github.com/adaptsched/adaptsched/kernels"
)

// errMismatch marks a run whose output differs from the reference.
var errMismatch = errors.New("opdemo: result differs from the reference")

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case errors.As(err, new(usageError)):
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// usageError is a bad command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return "opdemo: " + e.msg }

// config is the parsed command line.
type config struct {
	backends []string
	named    bool // -backends named them: a driver that needs a parameter is an error
	reps     int
	sizes    []string // which of small, medium, large
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("opdemo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	list := fs.String("backends", "", "comma-separated backends to run (default: every registered one)")
	reps := fs.Int("reps", 5, "timed runs per op and size; the median is printed")
	sizes := fs.String("sizes", "small,medium,large", "comma-separated sizes to run")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return config{}, err
		}
		return config{}, usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return config{}, usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	if *reps < 1 {
		return config{}, usageError{fmt.Sprintf("-reps %d: must be at least 1", *reps)}
	}
	c := config{reps: *reps, backends: backends.Drivers()}
	if *list != "" {
		c.backends, c.named = splitList(*list), true
	}
	for _, s := range splitList(*sizes) {
		if !slices.Contains(sizeNames, s) {
			return config{}, usageError{fmt.Sprintf("-sizes: unknown size %q (want %s)", s, strings.Join(sizeNames, ", "))}
		}
		c.sizes = append(c.sizes, s)
	}
	if len(c.backends) == 0 || len(c.sizes) == 0 {
		return config{}, usageError{"nothing to run: no backend or no size"}
	}
	return c, nil
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// run is main without the exits: it prints the table to stdout and
// returns the first failure, after running everything.
func run(args []string, stdout, stderr io.Writer) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	var opened []backends.Backend
	var param []string
	for _, name := range c.backends {
		b, err := backends.Open(name)
		if errors.Is(err, backends.ErrNeedsParam) && !c.named {
			param = append(param, name)
			continue
		}
		if err != nil {
			fmt.Fprintf(stdout, "%s: skipped: %v\n", name, err)
			continue
		}
		defer b.Close()
		line := fmt.Sprintf("%s: %s %s, %d threads", name, b.Info().Kind, b.Info().Model, b.Info().Threads)
		if bl, ok := b.(interface{ BLAS() string }); ok {
			line += ", matmul through " + bl.BLAS()
		}
		fmt.Fprintln(stdout, line)
		opened = append(opened, b)
	}
	if len(param) > 0 {
		fmt.Fprintf(stdout, "not run: %s (they need a parameter: -backends %s:...)\n", strings.Join(param, ", "), param[0])
	}
	if len(opened) == 0 {
		return errors.New("opdemo: no backend could be opened")
	}
	cases, err := makeCases(c.sizes)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintln(tw, "op\tsize\tshapes\tbackend\tµs\tok\t")
	var first error
	for _, cs := range cases {
		for _, b := range opened {
			us, err := runCase(b, cs, c.reps)
			status, cell := "ok", fmt.Sprintf("%.1f", us)
			switch {
			case errors.Is(err, backends.ErrUnsupported):
				status, cell = "unsupported", "-"
			case err != nil:
				status, cell = "FAIL", "-"
				if first == nil {
					first = err
				}
				fmt.Fprintf(stderr, "%s: %v\n", b.Info().Name, err)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", cs.spec.Op, cs.size, shapes(cs.spec), b.Info().Name, cell, status)
		}
	}
	tw.Flush()
	return first
}

func shapes(s kernels.Spec) string {
	parts := make([]string, len(s.In))
	for i, sh := range s.In {
		parts[i] = sh.String()
	}
	return strings.Join(parts, " ")
}

// testCase is one op at one size, with its inputs and expected output.
type testCase struct {
	spec kernels.Spec
	size string
	in   [][]byte
	want []byte
}

// makeCases builds every catalogue op at the chosen sizes with random
// inputs and computes each reference output once.
func makeCases(sizes []string) ([]testCase, error) {
	r := rand.New(rand.NewPCG(2024, 7))
	var cases []testCase
	for _, op := range kernels.Ops() {
		for _, size := range sizes {
			s := specFor(op, size)
			if err := s.Validate(); err != nil {
				return nil, fmt.Errorf("opdemo: %v %s: %w", op, size, err)
			}
			in, err := randomInputs(r, s)
			if err != nil {
				return nil, err
			}
			want := make([]byte, s.OutBytes())
			if err := kernels.Reference(s, in, want); err != nil {
				return nil, fmt.Errorf("opdemo: reference %v: %w", s, err)
			}
			cases = append(cases, testCase{spec: s, size: size, in: in, want: want})
		}
	}
	return cases, nil
}

func randomInputs(r *rand.Rand, s kernels.Spec) ([][]byte, error) {
	in := make([][]byte, len(s.In))
	for i, sh := range s.In {
		v := make([]float32, sh.Elements())
		for j := range v {
			v[j] = float32(r.NormFloat64())
			if n := s.IndexRows(i); n > 0 {
				v[j] = float32(r.IntN(n))
			}
		}
		if dt := s.InDType(i); dt != kernels.F32 {
			q, err := kernels.Quantize(dt, v)
			if err != nil {
				return nil, fmt.Errorf("opdemo: quantize %v input %d: %w", s, i, err)
			}
			in[i] = q
			continue
		}
		in[i] = kernels.AsBytes(v)
	}
	return in, nil
}

// runCase uploads the inputs, runs the op reps times, checks the output
// and returns the median kernel time in µs.
func runCase(b backends.Backend, c testCase, reps int) (float64, error) {
	s := c.spec
	if err := b.Supports(s); err != nil {
		return 0, err
	}
	bufs := make([]backends.Buffer, len(c.in))
	for i, d := range c.in {
		buf, err := b.Alloc(int64(len(d)))
		if err != nil {
			return 0, fmt.Errorf("%v: alloc: %w", s, err)
		}
		defer buf.Free()
		if _, err := b.Write(buf, d); err != nil {
			return 0, fmt.Errorf("%v: write: %w", s, err)
		}
		bufs[i] = buf
	}
	out, err := b.Alloc(s.OutBytes())
	if err != nil {
		return 0, fmt.Errorf("%v: alloc: %w", s, err)
	}
	defer out.Free()
	times := make([]time.Duration, reps)
	for i := range times {
		t, err := b.Run(s, bufs, out)
		if err != nil {
			return 0, fmt.Errorf("%v: %w", s, err)
		}
		times[i] = t.Duration
	}
	got := make([]byte, len(c.want))
	if _, err := b.Read(got, out); err != nil {
		return 0, fmt.Errorf("%v: read: %w", s, err)
	}
	if err := compare(s, got, c.want); err != nil {
		return 0, err
	}
	return medianUs(times), nil
}

// medianUs returns the median of times in µs, sorting them: for an even
// count the mean of the middle two (the upper one alone made the median
// of -reps 2 their maximum: TestMedianUs).
func medianUs(times []time.Duration) float64 {
	slices.Sort(times)
	n := len(times)
	m := float64(times[n/2])
	if n%2 == 0 {
		m = (float64(times[n/2-1]) + m) / 2
	}
	return m / float64(time.Microsecond)
}

// compare checks got against the reference: bytes exactly for a non-f32
// output, floats within 1e-3 of the output's largest magnitude otherwise
// (sums in another order).
func compare(s kernels.Spec, got, want []byte) error {
	if s.OutDType() != kernels.F32 {
		if !bytes.Equal(got, want) {
			return fmt.Errorf("%w: %v: bytes differ", errMismatch, s)
		}
		return nil
	}
	g, w := kernels.AsF32(got), kernels.AsF32(want)
	scale := 1.0
	for _, x := range w {
		scale = max(scale, math.Abs(float64(x)))
	}
	for i := range w {
		if d := math.Abs(float64(g[i] - w[i])); !(d <= 1e-3*scale) {
			return fmt.Errorf("%w: %v: out[%d] = %v, reference %v", errMismatch, s, i, g[i], w[i])
		}
	}
	return nil
}
