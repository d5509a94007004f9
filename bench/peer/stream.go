package peer

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Impl is one of the two matmul implementations both schedulers choose
// between.
type Impl uint8

// The implementations, in the order of the StarPU codelet's cpu_funcs and
// of the Scheduler's backends.
const (
	BLAS    Impl = iota // OpenBLAS cblas_sgemm, one thread
	Blocked             // the k-blocked C loop of peerkern.c
	numImpls
)

var _ fmt.Stringer = Blocked

// String returns "blas", "blocked", or Impl(n).
func (i Impl) String() string {
	switch i {
	case BLAS:
		return "blas"
	case Blocked:
		return "blocked"
	}
	return fmt.Sprintf("Impl(%d)", uint8(i))
}

// parseImpl returns the implementation called s.
func parseImpl(s string) (Impl, bool) {
	for i := range numImpls {
		if i.String() == s {
			return i, true
		}
	}
	return 0, false
}

// Shape is a row-major product C(M×N) = A(M×K)·B(K×N).
type Shape struct{ M, K, N int }

// FLOPs returns 2·M·K·N.
func (s Shape) FLOPs() int64 { return 2 * int64(s.M) * int64(s.K) * int64(s.N) }

// Drift is the injected slowdown: from task From on, implementation Impl
// takes Factor times its normal time on each shape, as on a throttled or
// contended core: after each kernel, peer_exec busy-waits (Factor − 1) ×
// the kernel's calibrated median on that shape (Calibrate).
type Drift struct {
	Impl   Impl
	Factor float64
	From   int
}

// Stream is a task stream: the shapes, and the shape of each task in
// order.
type Stream struct {
	Drift  Drift
	Shapes []Shape
	Tasks  []int // indices into Shapes
}

// Counts returns how many tasks of each shape fall before the drift
// (first) and from it on (second). The caller owns the returned slices.
func (s Stream) Counts() (first, second []int) {
	first, second = make([]int, len(s.Shapes)), make([]int, len(s.Shapes))
	for i, t := range s.Tasks {
		if i < s.Drift.From {
			first[t]++
		} else {
			second[t]++
		}
	}
	return first, second
}

// The stream file, text:
//
//	adaptsched-peer-stream 1
//	# comment lines anywhere before "tasks"
//	drift blas 3 10000          (implementation, factor, first drifted task)
//	shape 1 256 256             (M K N; shapes are numbered from 0)
//	tasks 20000
//	0 3 0 1 ...                 (one shape index per task, any number a line)
const (
	streamMagic   = "adaptsched-peer-stream"
	streamVersion = 1
	maxLine       = 1 << 16 // bytes in one line
	maxDim        = 1 << 14
	maxTasks      = 1 << 24
	maxShapes     = 1 << 10
)

// WriteTo writes s in the stream format.
func (s Stream) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%s %d\n", streamMagic, streamVersion)
	fmt.Fprintf(bw, "drift %v %g %d\n", s.Drift.Impl, s.Drift.Factor, s.Drift.From)
	for _, sh := range s.Shapes {
		fmt.Fprintf(bw, "shape %d %d %d\n", sh.M, sh.K, sh.N)
	}
	fmt.Fprintf(bw, "tasks %d\n", len(s.Tasks))
	for i, t := range s.Tasks {
		bw.WriteString(strconv.Itoa(t))
		if i%40 == 39 || i == len(s.Tasks)-1 {
			bw.WriteByte('\n')
		} else {
			bw.WriteByte(' ')
		}
	}
	return 0, bw.Flush()
}

// Read parses a stream; name prefixes errors, which read
// "name:line: what is wrong" and wrap ErrStream.
func Read(r io.Reader, name string) (Stream, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), maxLine)
	sr := streamReader{name: name, want: -1}
	for sc.Scan() {
		sr.line++
		f := strings.Fields(sc.Text())
		if len(f) == 0 || sr.header && sr.want < 0 && strings.HasPrefix(f[0], "#") {
			continue
		}
		var err error
		switch {
		case !sr.header:
			err = sr.readHeader(f)
		case sr.want >= 0:
			err = sr.readTasks(f)
		default:
			err = sr.readDirective(f)
		}
		if err != nil {
			return Stream{}, err
		}
	}
	if err := sc.Err(); err != nil {
		return Stream{}, fmt.Errorf("%w: %s:%d: %w", ErrStream, name, sr.line+1, err)
	}
	return sr.finish()
}

// streamReader is Read's state: the stream so far, the line, and what
// has been seen.
type streamReader struct {
	name   string
	line   int
	s      Stream
	want   int // tasks announced; -1 before the tasks line
	drift  bool
	header bool
}

// bad returns an ErrStream naming the file and line.
func (sr *streamReader) bad(format string, a ...any) error {
	return fmt.Errorf("%w: %s:%d: %s", ErrStream, sr.name, sr.line, fmt.Sprintf(format, a...))
}

// readHeader checks the first line: the magic and the version.
func (sr *streamReader) readHeader(f []string) error {
	if len(f) != 2 || f[0] != streamMagic || f[1] != strconv.Itoa(streamVersion) {
		return sr.bad("want %q first", fmt.Sprintf("%s %d", streamMagic, streamVersion))
	}
	sr.header = true
	return nil
}

// readTasks reads a line of task shape indices, after the tasks line.
func (sr *streamReader) readTasks(f []string) error {
	for _, w := range f {
		t, err := strconv.Atoi(w)
		if err != nil || t < 0 || t >= len(sr.s.Shapes) {
			return sr.bad("task %q is not a shape index below %d", w, len(sr.s.Shapes))
		}
		if len(sr.s.Tasks) == sr.want {
			return sr.bad("more than the %d tasks announced", sr.want)
		}
		sr.s.Tasks = append(sr.s.Tasks, t)
	}
	return nil
}

// readDirective reads a drift, shape or tasks line.
func (sr *streamReader) readDirective(f []string) error {
	switch f[0] {
	case "drift":
		return sr.readDrift(f)
	case "shape":
		return sr.readShape(f)
	case "tasks":
		n, err := 0, error(nil)
		if len(f) == 2 {
			n, err = strconv.Atoi(f[1])
		}
		if len(f) != 2 || err != nil || n <= 0 || n > maxTasks {
			return sr.bad("want \"tasks N\", N from 1 to %d", maxTasks)
		}
		if len(sr.s.Shapes) == 0 {
			return sr.bad("tasks before any shape")
		}
		sr.want = n
		sr.s.Tasks = make([]int, 0, n)
		return nil
	}
	return sr.bad("unknown line %q", f[0])
}

// readDrift reads the one "drift IMPL FACTOR FROM" line.
func (sr *streamReader) readDrift(f []string) error {
	if sr.drift || len(f) != 4 {
		return sr.bad("want one line \"drift IMPL FACTOR FROM\"")
	}
	impl, ok := parseImpl(f[1])
	factor, ferr := strconv.ParseFloat(f[2], 64)
	from, terr := strconv.Atoi(f[3])
	if !ok || ferr != nil || terr != nil || !(factor >= 1 && factor <= 1000) || from < 0 {
		return sr.bad("drift %q: want blas|blocked, a factor in [1, 1000], a task index ≥ 0", strings.Join(f[1:], " "))
	}
	sr.s.Drift, sr.drift = Drift{Impl: impl, Factor: factor, From: from}, true
	return nil
}

// readShape reads a "shape M K N" line.
func (sr *streamReader) readShape(f []string) error {
	if len(f) != 4 {
		return sr.bad("want \"shape M K N\"")
	}
	var d [3]int
	for i := range d {
		v, err := strconv.Atoi(f[1+i])
		if err != nil || v <= 0 || v > maxDim {
			return sr.bad("dimension %q: want 1 to %d", f[1+i], maxDim)
		}
		d[i] = v
	}
	if len(sr.s.Shapes) == maxShapes {
		return sr.bad("more than %d shapes", maxShapes)
	}
	sr.s.Shapes = append(sr.s.Shapes, Shape{M: d[0], K: d[1], N: d[2]})
	return nil
}

// finish checks what the whole stream must hold.
func (sr *streamReader) finish() (Stream, error) {
	switch {
	case sr.line == 0:
		return Stream{}, sr.bad("empty")
	case sr.want < 0:
		return Stream{}, sr.bad("no tasks line")
	case len(sr.s.Tasks) != sr.want:
		return Stream{}, sr.bad("%d tasks, %d announced", len(sr.s.Tasks), sr.want)
	case !sr.drift:
		return Stream{}, sr.bad("no drift line")
	case sr.s.Drift.From > sr.want:
		return Stream{}, sr.bad("drift from task %d of %d", sr.s.Drift.From, sr.want)
	}
	return sr.s, nil
}

// GenOptions configure Generate. Zero fields take the defaults named.
type GenOptions struct {
	Seed  uint64  // PCG seed; the checked-in stream uses 24
	Tasks int     // tasks in the stream; default 20,000
	Zipf  float64 // exponent s of the shape frequencies ∝ 1/rank^s; default 1.1
	// Drift defaults to blas 3× from the middle of the stream.
	Drift *Drift
}

// inferenceShapes are the shapes of a small transformer's matmuls (hidden
// 256, MLP 1024) at 1 (decode), 4 and 16 tokens, and 64 (a prefill
// chunk), plus a 64-wide projection and a 16³ attention-head product,
// most frequent first: decode dominates an inference server's op stream.
// Both sides of the crossover are there: the blocked kernel wins every
// M = 1 product (OpenBLAS's M = 1 sgemm path is slow) and OpenBLAS every
// M ≥ 4, each by about 2× or more on a 2-core x86 (cmd/peer's oracle).
var inferenceShapes = []Shape{
	{1, 256, 256}, {1, 256, 1024}, {1, 1024, 256},
	{4, 256, 256}, {1, 64, 64}, {4, 64, 64},
	{4, 256, 1024}, {4, 1024, 256}, {16, 16, 16},
	{16, 256, 256}, {16, 256, 1024}, {16, 1024, 256},
	{64, 256, 256}, {64, 256, 1024}, {64, 1024, 256},
}

// Generate returns an inference-like stream: the shapes of
// inferenceShapes drawn independently with Zipf frequencies, and the
// drift.
func Generate(o GenOptions) Stream {
	if o.Tasks <= 0 {
		o.Tasks = 20000
	}
	if o.Zipf <= 0 {
		o.Zipf = 1.1
	}
	d := Drift{Impl: BLAS, Factor: 3, From: o.Tasks / 2}
	if o.Drift != nil {
		d = *o.Drift
	}
	cum := make([]float64, len(inferenceShapes))
	sum := 0.0
	for r := range cum {
		sum += 1 / math.Pow(float64(r+1), o.Zipf)
		cum[r] = sum
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x9e3779b97f4a7c15))
	s := Stream{Drift: d, Shapes: append([]Shape(nil), inferenceShapes...), Tasks: make([]int, o.Tasks)}
	for i := range s.Tasks {
		u := rng.Float64() * sum
		r := 0
		for r < len(cum)-1 && cum[r] < u {
			r++
		}
		s.Tasks[i] = r
	}
	return s
}
