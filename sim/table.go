package sim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// DefaultSpread is the σ of ln(duration) assumed for a perf-table row whose
// std_us is blank: the run-to-run spread DESIGN.md § The bandit takes for
// s0, about 20%.
const DefaultSpread = 0.2

// Table is a perf table: measured mean durations of ops on backends, one
// row per (op, shape, backend).
//
// The CSV has a header naming its columns, in any order: op, shape,
// backend, mean_us, std_us, n, and optionally flops and bytes. op is a
// catalogue op, optionally with its dtype ("QuantizedMatMul/q4_0"; f32
// when absent), or any other name, which makes the op opaque. shape lists
// the input shapes separated by ';', dimensions by 'x' ("1x4096;4096x4096").
// mean_us must be positive; a blank std_us means DefaultSpread; n is the
// count of measurements (≥ 1). flops and bytes give an opaque op its work.
// Lines starting with '#' are comments.
type Table struct {
	name     string
	backends []string // arm labels, in order of first appearance
	rows     []tableKey
	rowOf    map[string]int // specKey → row
	cells    [][]cell       // [row][backend]
}

type tableKey struct {
	spec   kernels.Spec
	label  string // "op,shape" as written, for messages
	bucket string
}

type cell struct {
	mean, sigma float64
	ok          bool
}

var tableCols = []string{"op", "shape", "backend", "mean_us", "std_us", "n", "flops", "bytes"}

// LoadTable reads a perf table. name is used in error messages, which
// read "name:line: what is wrong" and wrap ErrBadTable.
func LoadTable(r io.Reader, name string) (*Table, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.Comment = '#'
	cr.TrimLeadingSpace = true
	t := &Table{name: name, rowOf: map[string]int{}}
	bad := func(line int, format string, args ...any) error {
		return fmt.Errorf("%w: %s:%d: %s", ErrBadTable, name, line, fmt.Sprintf(format, args...))
	}
	col := map[string]int{}
	backs := map[string]int{}
	first := map[[2]int]int{} // (row, backend) → line
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
			for i, h := range rec {
				h = strings.ToLower(strings.TrimSpace(h))
				if !slices.Contains(tableCols, h) {
					return nil, bad(line, "unknown column %q (want %s)", h, strings.Join(tableCols, ","))
				}
				if _, dup := col[h]; dup {
					return nil, bad(line, "column %q twice", h)
				}
				col[h] = i
			}
			for _, h := range tableCols[:6] {
				if _, ok := col[h]; !ok {
					return nil, bad(line, "missing column %q", h)
				}
			}
			continue
		}
		if len(rec) != len(col) {
			return nil, bad(line, "%d fields, want %d", len(rec), len(col))
		}
		f := func(h string) string {
			if i, ok := col[h]; ok {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		spec, err := parseTableSpec(f("op"), f("shape"), f("flops"), f("bytes"))
		if err != nil {
			return nil, bad(line, "%v", err)
		}
		mean, err := strconv.ParseFloat(f("mean_us"), 64)
		if err != nil || !(mean > 0) || math.IsInf(mean, 0) {
			return nil, bad(line, "mean_us %q: want a positive number", f("mean_us"))
		}
		sigma := DefaultSpread
		if s := f("std_us"); s != "" {
			std, err := strconv.ParseFloat(s, 64)
			if err != nil || !(std >= 0) || math.IsInf(std, 0) {
				return nil, bad(line, "std_us %q: want a non-negative number or blank", s)
			}
			sigma = math.Sqrt(math.Log1p(std * std / (mean * mean))) // lognormal with this mean and std
		}
		if n, err := strconv.ParseInt(f("n"), 10, 64); err != nil || n < 1 {
			return nil, bad(line, "n %q: want a count of at least 1", f("n"))
		}
		back := f("backend")
		if back == "" {
			return nil, bad(line, "empty backend")
		}
		label := f("op") + "," + f("shape")
		k, ok := t.rowOf[specKey(spec)]
		if !ok {
			k = len(t.rows)
			t.rowOf[specKey(spec)] = k
			t.rows = append(t.rows, tableKey{spec: spec, label: label, bucket: kernels.BucketName(spec)})
			t.cells = append(t.cells, make([]cell, len(t.backends)))
		}
		b, ok := backs[back]
		if !ok {
			b = len(t.backends)
			backs[back] = b
			t.backends = append(t.backends, back)
			for i := range t.cells {
				t.cells[i] = append(t.cells[i], cell{})
			}
		}
		if l, dup := first[[2]int{k, b}]; dup {
			return nil, bad(line, "%s on %s measured again (first on line %d)", label, back, l)
		}
		first[[2]int{k, b}] = line
		t.cells[k][b] = cell{mean: mean, sigma: sigma, ok: true}
	}
	if len(col) == 0 {
		return nil, fmt.Errorf("%w: %s: no header", ErrBadTable, name)
	}
	if len(t.rows) == 0 {
		return nil, fmt.Errorf("%w: %s: no rows", ErrBadTable, name)
	}
	return t, nil
}

// parseTableSpec builds the spec of a table row.
func parseTableSpec(op, shape, flops, bytes string) (kernels.Spec, error) {
	name, dt, _ := strings.Cut(op, "/")
	if name == "" {
		return kernels.Spec{}, errors.New("empty op")
	}
	var in []kernels.Shape
	if shape != "" {
		for _, part := range strings.Split(shape, ";") {
			var sh kernels.Shape
			for _, d := range strings.Split(strings.TrimSpace(part), "x") {
				v, err := strconv.Atoi(d)
				if err != nil || v <= 0 {
					return kernels.Spec{}, fmt.Errorf("shape %q: dimension %q is not a positive integer", shape, d)
				}
				sh = append(sh, v)
			}
			in = append(in, sh)
		}
	}
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
		for _, w := range []struct {
			v   string
			dst *int64
		}{{flops, &s.Params.FLOPs}, {bytes, &s.Params.Bytes}} {
			if w.v == "" {
				continue
			}
			if *w.dst, err = strconv.ParseInt(w.v, 10, 64); err != nil || *w.dst < 0 {
				return kernels.Spec{}, fmt.Errorf("flops/bytes %q: want a non-negative integer", w.v)
			}
		}
	} else {
		s.Op = o
	}
	if err := s.Validate(); err != nil {
		return kernels.Spec{}, err
	}
	return s, nil
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
// (10 TFLOP/s, 800 GB/s, 3 µs dispatch; DESIGN.md § Evaluation). The
// durations are the table's, drawn lognormal around the measured means;
// no spikes, warm-up or transfers are added to them.
func (t *Table) Arms() []Arm {
	arms := make([]Arm, len(t.backends))
	for i, label := range t.backends {
		p, err := LookupProfile(strings.TrimPrefix(label, "sim:"))
		if err != nil {
			if strings.HasPrefix(strings.ToLower(label), "cpu") {
				p = MustProfile("cpu2")
			} else {
				p = MustProfile("mi250")
				p.Nominal = RLXROCm
			}
		}
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
