package sim

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/adaptsched/adaptsched/internal/input"
	"github.com/adaptsched/adaptsched/kernels"
)

// StarPUVersion is the on-disk format version of StarPU's history-based
// performance models that LoadStarPU reads (the "Performance Model
// Version" line, and the directory $STARPU_HOME/.starpu/sampling/codelets/45).
const StarPUVersion = 45

// LoadStarPU reads one StarPU performance-model file (format version 45)
// as a perf table. name is the file's name: its base up to the last '.' is
// the codelet's symbol (StarPU names the files symbol.hostname), and error
// messages read "name:line: what is wrong", wrapping ErrBadTable. A
// leading byte-order mark is skipped, as LoadTable skips one.
//
// The file lists device combinations, each with its implementations; each
// (combination, implementation) becomes one arm, labelled as StarPU names
// it: the devices' type and id joined by '_', then "_impl" and the
// implementation ("cpu0_impl0", "cuda1_impl0", "cpu0_cuda0_impl0"), with
// "x" and the core count after a device of more than one core, or none
// ("cpu0x4_impl0"), so that no two arms share a label. Device types are
// named by the file's own "# device type (CPU - 0, CUDA - 1, ...)" comment,
// lower-cased, else cpu, cuda, opencl, mic for 0 to 3 and "type"N above.
// Table.Arms then gives a "cpu" label cpu2's figures and any other the RLX
// ROCm default.
//
// Each history entry (hash, size, flops, mean (us), dev (us), sum, sum2, n)
// is one measurement of a footprint: the row of footprint F of symbol S is
// the opaque op named "S[F]" (F in eight hex digits, a key as for a free-
// text shape in LoadTable), with Bytes the entry's size and FLOPs its flops
// (0, unknown, when 0 or nan on every arm); mean and dev give the
// lognormal, within LoadTable's bounds; sum, sum2 and n are checked and
// not used (the table weighs nothing by n). The regression blocks are checked for form and not
// used. A table workload needs every row on every arm, so a footprint that
// some arm lacks, that has no samples on one (n = 0), or whose size or
// (known) flops differ between arms is left out, and Table.Dropped says which and
// why; a file where nothing is left is an error.
func LoadStarPU(r io.Reader, name string) (*Table, error) {
	m, err := parseStarPU(r, name)
	if err != nil {
		return nil, err
	}
	return starpuTable(name, []*starpuModel{m})
}

// LoadStarPUDir reads every StarPU performance-model file of a directory
// (a codelets/45 directory: files named symbol.hostname) as one perf
// table, rows of every codelet on the union of their arms (LoadStarPU).
// Hidden files and subdirectories are skipped. The files must be of one
// machine (one hostname suffix): arms of different machines are not the
// same devices.
func LoadStarPUDir(dir string) (*Table, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadTable, err)
	}
	var models []*starpuModel
	host := ""
	for _, e := range ents {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		_, h := splitModelName(e.Name())
		if len(models) > 0 && h != host {
			return nil, fmt.Errorf("%w: %s: models of more than one machine (%s and %s): give one file, or a directory of one machine's", ErrBadTable, dir, input.Quote(host), input.Quote(h))
		}
		host = h
		path := filepath.Join(dir, e.Name())
		f, err := openTableFile(path)
		if err != nil {
			return nil, err
		}
		m, err := parseStarPU(f, path)
		f.Close()
		if err != nil {
			return nil, err
		}
		models = append(models, m)
	}
	if len(models) == 0 {
		return nil, fmt.Errorf("%w: %s: no performance-model files", ErrBadTable, dir)
	}
	return starpuTable(dir, models)
}

// splitModelName splits a model file's base name at its last '.' into the
// codelet's symbol and the hostname.
func splitModelName(name string) (symbol, host string) {
	base := filepath.Base(name)
	if i := strings.LastIndexByte(base, '.'); i > 0 {
		return base[:i], base[i+1:]
	}
	return base, ""
}

// starpuModel is one parsed file.
type starpuModel struct {
	name, symbol string
	arms         []starpuArm
}

type starpuArm struct {
	label   string
	line    int
	entries []starpuEntry
}

type starpuEntry struct {
	footprint   uint32
	size, flops int64
	mean, sigma float64
	n           float64
	line        int
	noSamples   bool
}

// starpuScanner returns the data lines of a model file: blank lines and
// comments (lines starting with '#') skipped, the last comment kept.
type starpuScanner struct {
	sc      *bufio.Scanner
	name    string
	line    int
	comment string
	eof     bool // next found no more data lines
}

func (s *starpuScanner) errf(line int, format string, args ...any) error {
	return fmt.Errorf("%w: %s:%d: %s", ErrBadTable, s.name, line, fmt.Sprintf(format, args...))
}

// next returns the fields of the next data line; what names what the
// line should hold, for the error at the end of the file.
func (s *starpuScanner) next(what string) ([]string, error) {
	for s.sc.Scan() {
		s.line++
		t := s.sc.Text()
		if s.line == 1 {
			// A byte-order mark, as perf tables accept (TestStarPUBOM).
			t = strings.TrimPrefix(t, input.BOM)
		}
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		if strings.HasPrefix(t, "#") {
			s.comment = t
			continue
		}
		return strings.Fields(t), nil
	}
	if err := s.sc.Err(); err != nil {
		return nil, s.errf(s.line+1, "%v", err)
	}
	s.eof = true
	return nil, s.errf(s.line, "file ends where %s was due", what)
}

// int reads a line holding one integer in [lo, hi].
func (s *starpuScanner) int(what string, lo, hi int) (int, error) {
	f, err := s.next(what)
	if err != nil {
		return 0, err
	}
	v, perr := strconv.Atoi(f[0])
	if len(f) != 1 || perr != nil || v < lo || v > hi {
		return 0, s.errf(s.line, "%s: got %s, want one integer in [%d, %d]", what, input.Quote(strings.Join(f, " ")), lo, hi)
	}
	return v, nil
}

// floats reads a line of n numbers (nan allowed).
func (s *starpuScanner) floats(what string, n int) ([]string, error) {
	f, err := s.next(what)
	if err != nil {
		return nil, err
	}
	if len(f) != n {
		return nil, s.errf(s.line, "%s: %d fields, want %d", what, len(f), n)
	}
	for _, v := range f {
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			return nil, s.errf(s.line, "%s: %s is not a number", what, input.Quote(v))
		}
	}
	return f, nil
}

var archtypeRE = regexp.MustCompile(`([A-Za-z][A-Za-z0-9_]*) - (\d+)`)

// archtypeName names device type typ, by the comment before it when that
// lists the types.
func archtypeName(typ int, comment string) string {
	for _, m := range archtypeRE.FindAllStringSubmatch(comment, -1) {
		if v, err := strconv.Atoi(m[2]); err == nil && v == typ {
			return strings.ToLower(m[1])
		}
	}
	if typ < 4 {
		return []string{"cpu", "cuda", "opencl", "mic"}[typ]
	}
	return "type" + strconv.Itoa(typ)
}

// starpuMaxLine bounds a line of a model file.
const starpuMaxLine = 1 << 16

// parseStarPU reads one model file.
func parseStarPU(r io.Reader, name string) (*starpuModel, error) {
	sc := bufio.NewScanner(newBoundedReader(r))
	sc.Buffer(nil, starpuMaxLine)
	s := &starpuScanner{sc: sc, name: name}
	m := &starpuModel{name: name}
	m.symbol, _ = splitModelName(name)
	f, err := s.next("the format version")
	if err != nil {
		return nil, err
	}
	if len(f) != 1 || f[0] != strconv.Itoa(StarPUVersion) {
		return nil, s.errf(s.line, "format version %s, want %d (a StarPU history-based performance model)", input.Quote(strings.Join(f, " ")), StarPUVersion)
	}
	ncombs, err := s.int("the number of combinations", 1, 1<<20)
	if err != nil {
		return nil, err
	}
	for range ncombs {
		ndev, err := s.int("the number of devices", 1, 1<<10)
		if err != nil {
			return nil, err
		}
		var devs []string
		for range ndev {
			typ, err := s.int("a device type", 0, 1<<10)
			if err != nil {
				return nil, err
			}
			dev := archtypeName(typ, s.comment)
			id, err := s.int("a device id", 0, 1<<20)
			if err != nil {
				return nil, err
			}
			cores, err := s.int("a number of cores", 0, 1<<20)
			if err != nil {
				return nil, err
			}
			dev += strconv.Itoa(id)
			if cores != 1 {
				dev += "x" + strconv.Itoa(cores)
			}
			devs = append(devs, dev)
		}
		nimpl, err := s.int("the number of implementations", 0, 1<<10)
		if err != nil {
			return nil, err
		}
		for impl := range nimpl {
			a := starpuArm{label: strings.Join(devs, "_") + "_impl" + strconv.Itoa(impl)}
			if err := s.arm(&a); err != nil {
				return nil, err
			}
			for _, b := range m.arms {
				if b.label == a.label {
					return nil, s.errf(a.line, "arm %s twice (first on line %d)", a.label, b.line)
				}
			}
			m.arms = append(m.arms, a)
		}
	}
	if f, err := s.next("nothing"); err == nil {
		return nil, s.errf(s.line, "%s after the last combination", input.Quote(strings.Join(f, " ")))
	} else if !s.eof {
		return nil, err
	}
	return m, nil
}

// arm reads one (combination, implementation) block: its entry count, the
// regression models, then the history.
func (s *starpuScanner) arm(a *starpuArm) error {
	n, err := s.int("the number of entries of "+a.label, 0, 1<<24)
	if err != nil {
		return err
	}
	a.line = s.line
	if _, err := s.floats("the linear regression of "+a.label, 9); err != nil {
		return err
	}
	if _, err := s.floats("the non-linear regression (a b c) of "+a.label, 3); err != nil {
		return err
	}
	f, err := s.next("the multiple regression of " + a.label)
	if err != nil {
		return err
	}
	if k, perr := strconv.Atoi(f[0]); perr != nil || k < 0 || len(f) != 1+k {
		return s.errf(s.line, "multiple regression of %s: want a count of coefficients then as many numbers, got %s", a.label, input.Quote(strings.Join(f, " ")))
	}
	for _, v := range f[1:] {
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			return s.errf(s.line, "multiple regression of %s: %s is not a number", a.label, input.Quote(v))
		}
	}
	seen := map[uint32]int{}
	for range n {
		e, err := s.entry(a.label)
		if err != nil {
			return err
		}
		if l, dup := seen[e.footprint]; dup {
			return s.errf(e.line, "footprint %08x of %s again (first on line %d)", e.footprint, a.label, l)
		}
		seen[e.footprint] = e.line
		a.entries = append(a.entries, e)
	}
	return nil
}

// entry reads one history line: hash size flops mean dev sum sum2 n, or
// without flops (older files, as StarPU itself accepts).
func (s *starpuScanner) entry(label string) (starpuEntry, error) {
	f, err := s.next("a history entry of " + label)
	if err != nil {
		return starpuEntry{}, err
	}
	e := starpuEntry{line: s.line}
	if len(f) == 7 {
		f = slices.Insert(f, 2, "nan")
	}
	if len(f) != 8 {
		return e, s.errf(s.line, "history entry of %s: %d fields, want hash size flops mean dev sum sum2 n", label, len(f))
	}
	fp, err := strconv.ParseUint(f[0], 16, 32)
	if err != nil {
		return e, s.errf(s.line, "hash %s: want at most 8 hex digits", input.Quote(f[0]))
	}
	e.footprint = uint32(fp)
	size, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || size < 0 || size > kernels.MaxFLOPs {
		return e, s.errf(s.line, "size %s: want bytes in [0, 2^60]", input.Quote(f[1]))
	}
	e.size = size
	flops, err := strconv.ParseFloat(f[2], 64)
	if err != nil || flops < 0 || flops > kernels.MaxFLOPs {
		return e, s.errf(s.line, "flops %s: want nan or a number in [0, 2^60]", input.Quote(f[2]))
	}
	if !math.IsNaN(flops) {
		e.flops = int64(math.Round(flops))
	}
	n, err := strconv.ParseUint(f[7], 10, 32)
	if err != nil {
		return e, s.errf(s.line, "n %s: want a count of samples", input.Quote(f[7]))
	}
	for _, v := range f[5:7] {
		if x, err := strconv.ParseFloat(v, 64); err != nil || !(x >= 0) || math.IsInf(x, 0) {
			return e, s.errf(s.line, "sum/sum2 %s: want a non-negative number", input.Quote(v))
		}
	}
	if n == 0 {
		e.noSamples = true
		return e, nil
	}
	e.n = float64(n)
	if e.mean, e.sigma, err = parseMeanStd("mean (us)", f[3], "dev (us)", f[4]); err != nil {
		return e, s.errf(s.line, "%v", err)
	}
	return e, nil
}

// starpuTable builds the table of models (LoadStarPU's doc), rows in the
// order of first appearance, arms in that of first appearance.
func starpuTable(name string, models []*starpuModel) (*Table, error) {
	var labels []string
	for _, m := range models {
		for _, a := range m.arms {
			if !slices.Contains(labels, a.label) {
				labels = append(labels, a.label)
			}
		}
	}
	t := &Table{name: name, rowOf: map[string]int{}}
	total := 0
	for _, m := range models {
		var order []uint32
		per := map[uint32]map[string]starpuEntry{}
		for _, a := range m.arms {
			for _, e := range a.entries {
				if per[e.footprint] == nil {
					per[e.footprint] = map[string]starpuEntry{}
					order = append(order, e.footprint)
				}
				per[e.footprint][a.label] = e
			}
		}
		for _, fp := range order {
			total++
			es := per[fp]
			if why := starpuDrop(es, labels); why != "" {
				first := es[firstLabel(es, labels)]
				t.dropped = append(t.dropped, fmt.Sprintf("%s:%d: footprint %08x of %s: %s", m.name, first.line, fp, m.symbol, why))
				continue
			}
			e0 := es[labels[0]]
			spec := kernels.Spec{Op: kernels.Opaque, DType: kernels.F32, Params: kernels.Params{
				Name: fmt.Sprintf("%s[%08x]", m.symbol, fp), FLOPs: starpuFLOPs(es), Bytes: e0.size}}
			if err := spec.Validate(); err != nil {
				return nil, fmt.Errorf("%w: %s:%d: %v", ErrBadTable, m.name, e0.line, err)
			}
			label := fmt.Sprintf("%s footprint %08x size %d", m.symbol, fp, e0.size)
			for _, l := range labels {
				e := es[l]
				t.add(spec, label, l, e.mean, e.sigma, e.n)
			}
		}
	}
	if len(t.rows) == 0 {
		return nil, fmt.Errorf("%w: %s: no footprint measured on every arm (%s; %d of %d left out)",
			ErrBadTable, name, strings.Join(labels, ", "), len(t.dropped), total)
	}
	return t, nil
}

// firstLabel returns the first of labels that es has.
func firstLabel(es map[string]starpuEntry, labels []string) string {
	for _, l := range labels {
		if _, ok := es[l]; ok {
			return l
		}
	}
	return ""
}

// starpuDrop says why a footprint's entries cannot make a row, "" when
// they can.
func starpuDrop(es map[string]starpuEntry, labels []string) string {
	var missing, empty []string
	for _, l := range labels {
		e, ok := es[l]
		switch {
		case !ok:
			missing = append(missing, l)
		case e.noSamples:
			empty = append(empty, l)
		}
	}
	switch {
	case len(missing) > 0:
		return "not measured on " + strings.Join(missing, ", ")
	case len(empty) > 0:
		return "no samples (n = 0) on " + strings.Join(empty, ", ")
	}
	e0 := es[labels[0]]
	for _, l := range labels[1:] {
		if e := es[l]; e.size != e0.size || e.flops != e0.flops && e.flops != 0 && e0.flops != 0 {
			return fmt.Sprintf("size %d, flops %d on %s but size %d, flops %d on %s (line %d)",
				e0.size, e0.flops, labels[0], e.size, e.flops, l, e.line)
		}
	}
	return ""
}

// starpuFLOPs returns the flops of a footprint's entries: the one that
// is known (entries agree or say 0, starpuDrop).
func starpuFLOPs(es map[string]starpuEntry) int64 {
	var f int64
	for _, e := range es {
		f = max(f, e.flops)
	}
	return f
}

// Dropped returns the rows a reader left out and why, one message each
// ("file:line: footprint F of S: not measured on cuda2_impl0"); LoadTable
// leaves none out. The caller owns the returned slice.
func (t *Table) Dropped() []string { return slices.Clone(t.dropped) }

// IsStarPU reports whether head, the start of a file, is a StarPU
// performance model: its first line that is neither blank nor a comment
// follows a "# Performance Model Version" comment. A leading byte-order
// mark is skipped, as LoadStarPU skips it.
func IsStarPU(head []byte) bool {
	sawVersion := false
	for ln := range bytes.Lines(input.TrimBOM(head)) {
		t := bytes.TrimSpace(ln)
		switch {
		case len(t) == 0:
		case t[0] == '#':
			sawVersion = sawVersion || bytes.Contains(bytes.ToLower(t), []byte("performance model version"))
		default:
			return sawVersion
		}
	}
	return false
}
