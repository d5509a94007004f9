package sim

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/internal/input"
	"github.com/adaptsched/adaptsched/kernels"
)

// DefaultSpread is the σ of ln(duration) assumed for a perf-table row whose
// std_us is blank: the run-to-run spread DESIGN.md § The bandit takes for
// s0, about 20%.
const DefaultSpread = 0.2

// MinTableUs and MaxTableUs bound a measured mean (1 ns to about 11.6
// days, the replay's bound on any duration): outside them the lognormal's
// σ and the workload's totals would overflow or vanish (a mean of 5e-324
// gives σ = NaN, one of 1e300 an infinite total). A deviation is 0 or a
// normal float of at most MaxTableUs and maxStdRatio times the mean.
const (
	MinTableUs = 1e-3
	MaxTableUs = 1e12
)

// maxStdRatio bounds std / mean: 100 gives a lognormal σ of ln µs of 3.03.
const maxStdRatio = 100

// Table is a perf table: measured mean durations of ops on backends, one
// row per (op, shape, backend).
//
// The CSV has a header naming its columns, in any order: op, shape,
// backend, mean_us, std_us, n, and optionally flops and bytes. A UTF-8
// byte-order mark before the header is skipped; lines may end in CRLF.
// op is a catalogue op, optionally with its dtype ("QuantizedMatMul/q4_0";
// f32 when absent), or any other name, which makes the op opaque.
//
// shape lists the input shapes separated by ';', dimensions by 'x'
// ("1x4096;4096x4096"); a catalogue op needs that form. An opaque op's
// shape may be that form too (its In shapes, and so its bytes as f32 when
// bytes is blank, if they make a valid spec), or any other text, which is
// then a key: a row of opaque op "sgemm" with shape "M=1760,N=16" gets
// Params.Name "sgemm[M=1760,N=16]", no In shapes and no work beyond its
// flops and bytes columns (0, unknown, when blank). Putting the key in the
// name is what keeps distinct shapes distinct specs and distinct buckets:
// an opaque op's bucket is its name and the size class of its work, so
// rows of unknown work that shared a name would all share one bucket, and
// one posterior, however different their durations. The cost is that the
// shapes of one op are separate op families (kernels.BucketKey.Family);
// nothing about their work is invented to group them.
//
// mean_us is in [MinTableUs, MaxTableUs]; std_us is 0 to at most
// maxStdRatio × mean_us (a positive denormal is rejected), or blank for
// DefaultSpread; n is the count of measurements (≥ 1), or blank when the
// source does not say. flops and bytes give an opaque op its work. op and
// shape are UTF-8 without control characters. An (op, shape, backend)
// given again is pooled with the earlier lines into the lognormal of
// their mixture (weighted by n, 1 when blank): DeepBench lists some
// shapes twice.
//
// Lines starting with '#' are comments, except hardware figures for a
// backend label, which its arm's prior then uses instead of the defaults
// of Table.Arms:
//
//	# backend gpu: kind=gpu gflops=10974 membw_gbps=480 dispatch_us=5 link_gbps=12 link_latency_us=10
//
// A comment whose first words are "backend" and a word ending in ':' is
// such a line: the label is that word without the ':', then come any of
// kind (cpu or gpu), gflops, membw_gbps, dispatch_us, link_gbps and
// link_latency_us (backends.Nominal's fields, in its units), each once.
// A figure left out keeps the default of the kind's base profile. The
// label must have rows in the table. SetFigures gives the same figures
// from outside the file.
type Table struct {
	name     string
	backends []string // arm labels, in order of first appearance
	rows     []tableKey
	rowOf    map[string]int // specKey → row
	cells    [][]cell       // [row][backend]
	figures  map[string]figures
	dropped  []string // rows a reader left out, with why (StarPU)
}

// figures are hardware figures given for a backend label.
type figures struct {
	kind string             // "cpu", "gpu" or "" (the label's default)
	vals map[string]float64 // backends.Nominal's fields given, by key
	line int
}

type tableKey struct {
	spec   kernels.Spec
	label  string // "op,shape" as written, for messages
	bucket string
}

type cell struct {
	mean, sigma float64
	ok          bool
	// Pooling repeated measurements: their count, total weight, Σ w·mean
	// and Σ w·E[x²].
	n          int
	w, sx, sxx float64
}

var tableCols = []string{"op", "shape", "backend", "mean_us", "std_us", "n", "flops", "bytes"}

// LoadTable reads a perf table of at most MaxTableBytes. name is used in
// errors: "name:line: what is wrong" (fields cut to 80), wrapping ErrBadTable.
func LoadTable(r io.Reader, name string) (*Table, error) {
	bad := func(line int, format string, args ...any) error {
		return fmt.Errorf("%w: %s:%d: %s", ErrBadTable, name, line, fmt.Sprintf(format, args...))
	}
	data, err := readTableBytes(r, name)
	if err != nil {
		return nil, err
	}
	data = input.TrimBOM(data)
	figs, err := scanFigures(data, bad)
	if err != nil {
		return nil, err
	}
	cr := csv.NewReader(bytes.NewReader(data))
	cr.FieldsPerRecord = -1
	cr.Comment = '#'
	cr.TrimLeadingSpace = true
	t := &Table{name: name, rowOf: map[string]int{}, figures: figs}
	var col map[string]int // by column name, its field; nil before the header
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, bad(pe.Line, "%v", pe.Err)
			}
			return nil, fmt.Errorf("%w: %s: %w", ErrBadTable, name, err)
		}
		line, _ := cr.FieldPos(0)
		if len(col) == 0 {
			if col, err = tableHeader(rec); err != nil {
				return nil, bad(line, "%v", err)
			}
			continue
		}
		if err := t.addRecord(rec, col); err != nil {
			return nil, bad(line, "%v", err)
		}
	}
	t.pool()
	if len(col) == 0 {
		return nil, fmt.Errorf("%w: %s: no header", ErrBadTable, name)
	}
	if len(t.rows) == 0 {
		return nil, fmt.Errorf("%w: %s: no rows", ErrBadTable, name)
	}
	for label, fg := range t.figures {
		if !slices.Contains(t.backends, label) {
			return nil, bad(fg.line, "figures for backend %s, which has no rows", input.Quote(label))
		}
	}
	return t, nil
}

// tableHeader returns the header's columns by name: each one of
// tableCols, none twice, the first six all there.
func tableHeader(rec []string) (map[string]int, error) {
	col := map[string]int{}
	for i, h := range rec {
		h = strings.ToLower(strings.TrimSpace(h))
		if !slices.Contains(tableCols, h) {
			return nil, fmt.Errorf("unknown column %s (want %s)", input.Quote(h), strings.Join(tableCols, ","))
		}
		if _, dup := col[h]; dup {
			return nil, fmt.Errorf("column %s twice", input.Quote(h))
		}
		col[h] = i
	}
	for _, h := range tableCols[:6] {
		if _, ok := col[h]; !ok {
			return nil, fmt.Errorf("missing column %q", h)
		}
	}
	return col, nil
}

// addRecord adds a row's measurement, its fields found by col.
func (t *Table) addRecord(rec []string, col map[string]int) error {
	if len(rec) != len(col) {
		return fmt.Errorf("%d fields, want %d", len(rec), len(col))
	}
	f := func(h string) string {
		if i, ok := col[h]; ok {
			return strings.TrimSpace(rec[i])
		}
		return ""
	}
	spec, err := parseTableSpec(f("op"), f("shape"), f("flops"), f("bytes"))
	if err != nil {
		return err
	}
	mean, sigma, err := parseMeanStd("mean_us", f("mean_us"), "std_us", f("std_us"))
	if err != nil {
		return err
	}
	w := 1.0
	if n := f("n"); n != "" {
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil || v < 1 || v > 1<<50 {
			return fmt.Errorf("n %s: want a count in [1, 2^50], or blank", input.Quote(n))
		}
		w = float64(v)
	}
	back := f("backend")
	if back == "" {
		return errors.New("empty backend")
	}
	t.add(spec, f("op")+","+f("shape"), back, mean, sigma, w)
	return nil
}

// add records a measurement of spec on backend back: mean µs, σ of ln,
// and weight w (its count of runs), adding the row or the backend when
// new. A second measurement of one cell is pooled with the first (pool).
func (t *Table) add(spec kernels.Spec, label, back string, mean, sigma, w float64) {
	row, ok := t.rowOf[specKey(spec)]
	if !ok {
		row = len(t.rows)
		t.rowOf[specKey(spec)] = row
		t.rows = append(t.rows, tableKey{spec: spec, label: label, bucket: kernels.BucketName(spec)})
		t.cells = append(t.cells, make([]cell, len(t.backends)))
	}
	col := slices.Index(t.backends, back)
	if col < 0 {
		col = len(t.backends)
		t.backends = append(t.backends, back)
		for i := range t.cells {
			t.cells[i] = append(t.cells[i], cell{})
		}
	}
	c := &t.cells[row][col]
	// E[x²] of a lognormal with this mean and σ is mean²·exp(σ²).
	c.w, c.sx, c.sxx, c.n = c.w+w, c.sx+w*mean, c.sxx+w*mean*mean*math.Exp(sigma*sigma), c.n+1
	c.mean, c.sigma, c.ok = mean, sigma, true
}

// pool turns the cells measured more than once into one lognormal with
// the mixture's mean and variance: the means weighted by their counts of
// runs (1 when unknown), the variance within and between them. DeepBench
// lists some shapes twice, with different GPU figures.
func (t *Table) pool() {
	for _, cs := range t.cells {
		for i := range cs {
			c := &cs[i]
			if c.n < 2 {
				continue
			}
			m := c.sx / c.w
			c.mean, c.sigma = m, math.Sqrt(max(0, math.Log(c.sxx/c.w/(m*m))))
		}
	}
}

// parseMeanStd checks a measured mean and deviation in µs (the deviation
// blank for DefaultSpread) and returns the mean and the σ of ln of a
// lognormal with that mean and deviation.
// The errors call them meanName and stdName.
func parseMeanStd(meanName, meanS, stdName, stdS string) (mean, sigma float64, err error) {
	mean, err = strconv.ParseFloat(meanS, 64)
	if err != nil || !(mean >= MinTableUs && mean <= MaxTableUs) {
		return 0, 0, fmt.Errorf("%s %s: want a number of µs in [%g, %g]", meanName, input.Quote(meanS), MinTableUs, MaxTableUs)
	}
	if stdS == "" {
		return mean, DefaultSpread, nil
	}
	std, err := strconv.ParseFloat(stdS, 64)
	if err != nil || !(std == 0 || std >= 0x1p-1022 && std <= min(MaxTableUs, maxStdRatio*mean)) {
		return 0, 0, fmt.Errorf("%s %s: want 0 or a normal number of µs up to %g× the mean and %g", stdName, input.Quote(stdS), float64(maxStdRatio), MaxTableUs)
	}
	return mean, math.Sqrt(math.Log1p(std / mean * (std / mean))), nil
}

// parseTableSpec builds the spec of a table row (Table's doc).
func parseTableSpec(op, shape, flops, bytes string) (kernels.Spec, error) {
	for _, v := range []string{op, shape} {
		if !utf8.ValidString(v) || strings.ContainsFunc(v, unicode.IsControl) {
			return kernels.Spec{}, fmt.Errorf("%s: want UTF-8 text without control characters", input.Quote(v))
		}
	}
	name, dt, _ := strings.Cut(op, "/")
	if name == "" {
		return kernels.Spec{}, errors.New("empty op")
	}
	in, shapeErr := parseShapes(shape)
	s := kernels.Spec{DType: kernels.F32, In: in}
	if dt != "" {
		d, err := kernels.ParseDType(dt)
		if err != nil {
			return kernels.Spec{}, err
		}
		s.DType = d
	}
	o, err := kernels.ParseOp(name)
	if err != nil || o == kernels.Opaque {
		s.Op, s.Params.Name = kernels.Opaque, name
		if shapeErr != nil || s.Validate() != nil { // free text: a key, in the name
			s.In, s.Params.Name = nil, name+"["+shape+"]"
		}
		for _, w := range []struct {
			v   string
			dst *int64
		}{{flops, &s.Params.FLOPs}, {bytes, &s.Params.Bytes}} {
			if w.v == "" {
				continue
			}
			if *w.dst, err = strconv.ParseInt(w.v, 10, 64); err != nil || *w.dst < 0 || *w.dst > kernels.MaxFLOPs {
				return kernels.Spec{}, fmt.Errorf("flops/bytes %s: want an integer in [0, 2^60]", input.Quote(w.v))
			}
		}
	} else {
		if shapeErr != nil {
			return kernels.Spec{}, shapeErr
		}
		s.Op = o
	}
	if err := s.Validate(); err != nil {
		return kernels.Spec{}, err
	}
	return s, nil
}

// parseShapes parses "1x4096;4096x4096" into shapes ("" is none).
func parseShapes(shape string) ([]kernels.Shape, error) {
	if shape == "" {
		return nil, nil
	}
	var in []kernels.Shape
	for _, part := range strings.Split(shape, ";") {
		var sh kernels.Shape
		for _, d := range strings.Split(strings.TrimSpace(part), "x") {
			v, err := strconv.Atoi(d)
			if err != nil || v <= 0 {
				return nil, fmt.Errorf("shape %s: dimension %s is not a positive integer", input.Quote(shape), input.Quote(d))
			}
			sh = append(sh, v)
		}
		in = append(in, sh)
	}
	return in, nil
}

// Name returns the name the table was loaded under.
func (t *Table) Name() string { return t.name }

// Backends returns the backend labels, in order of first appearance.
func (t *Table) Backends() []string { return slices.Clone(t.backends) }

// Len returns the number of distinct (op, shape) rows.
func (t *Table) Len() int { return len(t.rows) }

// truth returns the measured mean and σ of ln of s on backend col.
func (t *Table) truth(s kernels.Spec, col int) (mean, sigma float64, ok bool) {
	row, ok := t.rowOf[specKey(s)]
	if !ok {
		return 0, 0, false
	}
	c := t.cells[row][col]
	return c.mean, c.sigma, c.ok
}

// RLXROCm are the RLX cost model's defaults for a ROCm GPU (DESIGN.md §
// Evaluation): 10 TFLOP/s sgemm, 800 GB/s, 3 µs dispatch, and a PCIe link
// of 25 GB/s with 20 µs per copy (its 40 µs round trip). They stand for a
// GPU whose figures are unknown, and eval's roofline baseline uses them.
var RLXROCm = backends.Nominal{GFLOPS: 10_000, MemGBps: 800, DispatchUs: 3, LinkGBps: 25, LinkLatencyUs: 20}

// Arms returns one harness arm per backend label. A label that names a
// profile ("h100", "sim:h100") takes that profile's nominal figures for
// the policies' priors; any other label takes those of cpu2 when it starts
// with "cpu" and those of the RLX cost model's ROCm default otherwise
// (10 TFLOP/s, 800 GB/s, 3 µs dispatch; DESIGN.md § Evaluation). Figures
// given in the table ("# backend", Table's doc) replace these: kind picks
// cpu2 or that ROCm default as the base, and each figure given replaces
// the base's. The durations are the table's, drawn lognormal around the
// measured means; no spikes, warm-up or transfers are added to them.
func (t *Table) Arms() []Arm {
	arms := make([]Arm, len(t.backends))
	for i, label := range t.backends {
		fg := t.figures[label]
		p, err := LookupProfile(strings.TrimPrefix(label, "sim:"))
		if err != nil || fg.kind != "" {
			if fg.kind == "cpu" || fg.kind == "" && strings.HasPrefix(strings.ToLower(label), "cpu") {
				p = MustProfile("cpu2")
			} else {
				p = MustProfile("mi250")
				p.Nominal = RLXROCm
			}
		}
		fg.apply(&p.Nominal)
		p.Name, p.Model = strings.TrimPrefix(label, "sim:"), "perf table "+t.name
		p.Shared, p.SpikeProb, p.WarmupFactor = true, 0, 0
		arms[i] = Arm{Profile: p, table: t, col: i}
	}
	return arms
}

// Workload returns n ops drawn from the table's rows with Zipf
// frequencies: row r (0-based, in file order) is drawn with probability
// ∝ 1/(r+1)^s (s ≥ 0; 0 is uniform), deterministic by seed. Every row
// must be measured on every backend. Activations never move (ActBytes 0):
// a table says nothing of where data lives.
func (t *Table) Workload(n int, s float64, seed uint64) (*TableWorkload, error) {
	if err := checkN(n); err != nil {
		return nil, err
	}
	if !(s >= 0) || math.IsInf(s, 0) {
		return nil, fmt.Errorf("%w: zipf exponent %v, want ≥ 0", ErrInvalidWorkload, s)
	}
	for r, cs := range t.cells {
		for b, c := range cs {
			if !c.ok {
				return nil, fmt.Errorf("%w: %s: %s has no row for backend %s", ErrBadTable, t.name, t.rows[r].label, t.backends[b])
			}
		}
	}
	cdf := make([]float64, len(t.rows))
	var sum float64
	for r := range cdf {
		sum += math.Pow(float64(r+1), -s)
		cdf[r] = sum
	}
	for r := range cdf {
		cdf[r] /= sum
	}
	return &TableWorkload{t: t, n: n, cdf: cdf, rng: rand.New(rand.NewPCG(seed, 0x7ab1e)),
		key: make([]int, len(t.rows)), buckets: map[string]int{}}, nil
}

// TableWorkload is the op stream of a perf table.
type TableWorkload struct {
	t       *Table
	n       int
	cdf     []float64
	rng     *rand.Rand
	key     []int // row → key+1 (0: not seen yet)
	nkeys   int
	buckets map[string]int
}

// Name implements Workload.
func (w *TableWorkload) Name() string { return "table/" + w.t.name }

// Arms returns the table's arms (Table.Arms).
func (w *TableWorkload) Arms() []Arm { return w.t.Arms() }

// Next implements Workload.
func (w *TableWorkload) Next() (Op, bool) {
	if w.n <= 0 {
		return Op{}, false
	}
	w.n--
	u := w.rng.Float64()
	r, _ := slices.BinarySearch(w.cdf, u)
	r = min(r, len(w.cdf)-1)
	if w.key[r] == 0 {
		w.nkeys++
		w.key[r] = w.nkeys
	}
	row := w.t.rows[r]
	b, ok := w.buckets[row.bucket]
	if !ok {
		b = len(w.buckets)
		w.buckets[row.bucket] = b
	}
	return Op{Spec: row.spec, Key: w.key[r] - 1, Bucket: b, BucketName: row.bucket}, true
}
