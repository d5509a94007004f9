package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"syscall"

	"github.com/adaptsched/adaptsched/internal/input"
)

// ErrBadRouting wraps every error of a routing file.
var ErrBadRouting = errors.New("sim: bad routing")

// Routing is how often a MoE model's router picks each expert of each
// layer: Counts[layer][expert] (the JSON of sim/testdata/moe, recorded by
// Fiddler from Mixtral 8x7B), or a Zipf skew. A workload draws each
// token's experts in proportion to a layer's counts.
type Routing struct {
	// Source names where the counts come from: a file, or "zipf(s)".
	Source string
	// Tokens is the tokens the counts were recorded over (0 if unknown).
	Tokens int64
	Counts [][]int64
}

// routingFile is the JSON of a routing file.
type routingFile struct {
	Tokens     *int64    `json:"total_input_tokens"`
	Popularity [][]int64 `json:"expert_popularity"`
}

// MaxRoutingBytes bounds a routing file, so that a huge or endless one
// (/dev/zero, a sparse file) is an error at once rather than all the
// memory there is: the Mixtral files of sim/testdata/moe are under 2 KB,
// and 4 MiB holds 128 layers of 1024 experts with 20-digit counts
// (TestReadRoutingRefuses).
const MaxRoutingBytes = 4 << 20

// ReadRouting reads a routing file (ParseRouting). What is not a regular
// file is refused before it is read, and a file over MaxRoutingBytes too.
// The file is opened without blocking (a FIFO's open waits for a writer)
// and checked through the descriptor opened, so that what is read is
// what was checked.
func ReadRouting(path string, layers, experts int) (Routing, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return Routing{}, fmt.Errorf("%w: %w", ErrBadRouting, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Routing{}, fmt.Errorf("%w: %w", ErrBadRouting, err)
	}
	if !st.Mode().IsRegular() {
		return Routing{}, fmt.Errorf("%w: %s is %s, %w", ErrBadRouting, path, input.KindOf(st.Mode()), input.ErrNotRegular)
	}
	tooBig := func(n int64) error {
		return fmt.Errorf("%w: %s: %d bytes or more, larger than %d MiB, the most a routing file may hold",
			ErrBadRouting, path, n, MaxRoutingBytes>>20)
	}
	if st.Size() > MaxRoutingBytes {
		return Routing{}, tooBig(st.Size())
	}
	// Bounded as well: the file may grow while it is read.
	data, err := io.ReadAll(io.LimitReader(f, MaxRoutingBytes+1))
	if err != nil {
		return Routing{}, fmt.Errorf("%w: %w", ErrBadRouting, err)
	}
	if len(data) > MaxRoutingBytes {
		return Routing{}, tooBig(int64(len(data)))
	}
	return ParseRouting(path, data, layers, experts)
}

// ParseRouting parses the JSON of a routing file called name:
// {"total_input_tokens": N, "expert_popularity": [[count per expert]
// per layer]}. It must hold layers layers of experts counts each (a
// value ≤ 0 checks nothing), no negative count, and some count in every
// layer (a layer nobody is routed to cannot be drawn from). A leading
// byte-order mark is skipped, as the trace and perf-table readers skip
// one (TestRoutingBOM). The one error names the file and the place: the
// line and column where the decoder stopped, or the layer and expert.
func ParseRouting(name string, data []byte, layers, experts int) (Routing, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrBadRouting, name, fmt.Sprintf(format, a...))
	}
	data = input.TrimBOM(data)
	var f routingFile
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&f); err != nil {
		return Routing{}, bad("%s", jsonErrorAt(data, err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return Routing{}, bad("%s: data after the JSON object", lineCol(data, dec.InputOffset()))
	}
	switch {
	case f.Popularity == nil:
		return Routing{}, bad("no expert_popularity")
	case f.Tokens != nil && *f.Tokens < 0:
		return Routing{}, bad("total_input_tokens is %d", *f.Tokens)
	case layers > 0 && len(f.Popularity) != layers:
		return Routing{}, bad("%d layers, want %d", len(f.Popularity), layers)
	case len(f.Popularity) == 0:
		return Routing{}, bad("no layer")
	}
	for l, row := range f.Popularity {
		if experts > 0 && len(row) != experts {
			return Routing{}, bad("layer %d: %d experts, want %d", l, len(row), experts)
		}
		if len(row) != len(f.Popularity[0]) {
			return Routing{}, bad("layer %d: %d experts, layer 0 has %d", l, len(row), len(f.Popularity[0]))
		}
		var sum int64
		for e, c := range row {
			if c < 0 {
				return Routing{}, bad("layer %d, expert %d: count %d", l, e, c)
			}
			if sum += c; sum < 0 {
				return Routing{}, bad("layer %d: counts overflow", l)
			}
		}
		if sum == 0 {
			return Routing{}, bad("layer %d: no expert was chosen", l)
		}
	}
	r := Routing{Source: name, Counts: f.Popularity}
	if f.Tokens != nil {
		r.Tokens = *f.Tokens
	}
	return r, nil
}

// jsonErrorAt places a decoder error at its line and column where the
// decoder gives an offset.
func jsonErrorAt(data []byte, err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return lineCol(data, syn.Offset) + ": " + syn.Error()
	case errors.As(err, &typ):
		return fmt.Sprintf("%s: %s is %s, want %v", lineCol(data, typ.Offset), typ.Field, typ.Value, typ.Type)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "line " + fmt.Sprint(bytes.Count(data, []byte{'\n'})+1) + ": unexpected end of JSON"
	}
	return err.Error()
}

// lineCol renders a byte offset as "line L, column C" (1-based).
func lineCol(data []byte, off int64) string {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := bytes.Count(before, []byte{'\n'}) + 1
	col := off - int64(bytes.LastIndexByte(before, '\n'))
	return fmt.Sprintf("line %d, column %d", line, col)
}

// ZipfRouting returns the counts of a Zipf skew of exponent s over
// experts experts in each of layers layers: the expert of rank i (from 1)
// is picked in proportion to i^−s, the ranks shuffled per layer by seed
// (0: uniform). Counts are per million picks.
func ZipfRouting(layers, experts int, s float64, seed uint64) (Routing, error) {
	if layers <= 0 || experts <= 0 || !(s >= 0) || math.IsInf(s, 0) {
		return Routing{}, fmt.Errorf("%w: zipf over %d layers of %d experts, exponent %v", ErrBadRouting, layers, experts, s)
	}
	r := rand.New(rand.NewPCG(seed, 0x21bf))
	w := make([]float64, experts)
	var sum float64
	for i := range w {
		w[i] = math.Pow(float64(i+1), -s)
		sum += w[i]
	}
	counts := make([][]int64, layers)
	for l := range counts {
		row := make([]int64, experts)
		for i, e := range r.Perm(experts) {
			row[e] = max(int64(math.Round(w[i]/sum*1e6)), 1)
		}
		counts[l] = row
	}
	return Routing{Source: fmt.Sprintf("zipf(%g)", s), Counts: counts}, nil
}

// Layers and Experts return the routing's dimensions.
func (r Routing) Layers() int { return len(r.Counts) }

// Experts returns the experts per layer.
func (r Routing) Experts() int {
	if len(r.Counts) == 0 {
		return 0
	}
	return len(r.Counts[0])
}

// Pick draws k distinct experts of layer l for one token, each in
// proportion to its count among those not yet drawn (top-k routing seen
// as sampling without replacement), into dst[:0].
func (r Routing) Pick(rng *rand.Rand, l, k int, dst []int) []int {
	row := r.Counts[l%len(r.Counts)]
	dst = dst[:0]
	var total int64
	for _, c := range row {
		total += c
	}
	for len(dst) < min(k, len(row)) {
		left := total
		for _, e := range dst {
			left -= row[e]
		}
		if left <= 0 { // only zero counts remain: the first not taken
			for e := range row {
				if !containsInt(dst, e) {
					dst = append(dst, e)
					break
				}
			}
			continue
		}
		x := rng.Int64N(left)
		for e, c := range row {
			if containsInt(dst, e) {
				continue
			}
			if x < c {
				dst = append(dst, e)
				break
			}
			x -= c
		}
	}
	return dst
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
