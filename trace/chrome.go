package trace

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/adaptsched/adaptsched/internal/input"
	"github.com/adaptsched/adaptsched/kernels"
)

// ChromeOp is one op imported from a Chrome trace. Its Event has Backend
// "gpu" and ActualUs = the sum of the durations of the GPU kernels it
// launched (0 with Kernels = 0 when none joined: the op ran no kernel, or
// its kernels were not traced).
type ChromeOp struct {
	Event
	Source   string  // the cpu_op's name in the trace ("aten::addmm")
	Mapped   bool    // Event.Op is a catalogue op; otherwise "Opaque", with Source in Params.Name
	LaunchUs float64 // the cpu_op's own dur: host launch time, never a CPU compute time
	TsUs     float64 // the cpu_op's start, trace µs
	Index    int     // the cpu_op's index in the trace's traceEvents array
	Kernels  int     // kernels joined to it or to an op nested in it
	Nested   int     // cpu_ops nested inside it (folded into it, not imported)
}

// ChromeCounts describe an import.
type ChromeCounts struct {
	CPUOps     int // cpu_op (or Operator) events
	WithShapes int // of which carry Input Dims with at least one tensor
	Imported   int // ops imported (len(Ops))
	Mapped     int // imported ops mapped onto the catalogue
	Opaque     int // imported ops kept as Opaque
	Kernels    int // GPU kernel events
	Joined     int // kernels joined to a cpu_op
	Unjoined   int // kernels with no launching op found
	Outside    int // joined kernels whose op lies under no imported op
	KernelUs   float64
	JoinedUs   float64 // Σ dur of joined kernels
	ImportedUs float64 // Σ ActualUs of the imported ops (JoinedUs less Outside's)
}

// ChromeTrace is the result of ImportChrome: the imported ops in start
// order, with Seq numbering them.
type ChromeTrace struct {
	Ops    []ChromeOp
	Counts ChromeCounts
	// Legacy is true for the 2021 format (categories Operator, Kernel,
	// Runtime), whose kernels join through "External id".
	Legacy bool
}

// MaxChromeUs bounds an event's dur in a Chrome trace (about 11.6 days,
// the replay's bound on any duration): beyond it, or negative, or not a
// number, ImportChrome rejects the trace, naming the event's index.
const MaxChromeUs = 1e12

// maxChromeTs bounds an event's ts: µs since the Unix epoch reach 1.8e15
// in 2027, so 1e17 leaves room while keeping sums of durations exact
// enough and finite.
const maxChromeTs = 1e17

type chromeEvent struct {
	Ph   string          `json:"ph"`
	Cat  string          `json:"cat"`
	Name string          `json:"name"`
	Pid  json.RawMessage `json:"pid"`
	Tid  json.RawMessage `json:"tid"`
	// TsIn and DurIn are the fields as read: nil when absent or null,
	// which add rejects in a complete event (TestImportChromeErrors).
	TsIn  *float64 `json:"ts"`
	DurIn *float64 `json:"dur"`
	Ts    float64  `json:"-"`
	Dur   float64  `json:"-"`
	index int      // in traceEvents
	Args  struct {
		Dims        []json.RawMessage `json:"Input Dims"`
		Types       []json.RawMessage `json:"Input type"`
		Correlation *int64            `json:"correlation"`
		External    *int64            `json:"External id"`
	} `json:"args"`
}

type chromeOp struct {
	ev       chromeEvent
	thread   string
	parent   int
	shapes   [][]int // tensors among the inputs
	dtype    kernels.DType
	f32      bool
	spec     *kernels.Spec // the catalogue op, when it maps
	kernels  int
	kernelUs float64
	subMap   bool // a strict descendant maps
	children []int
}

// ImportChrome reads a Chrome trace-event JSON file (PyTorch profiler /
// Kineto; gzip recognised by its magic bytes) and returns its ops.
//
// Join: a kernel's "correlation" names the runtime call that launched it
// (cudaLaunchKernel, hipLaunchKernel); the smallest cpu_op on that call's
// thread enclosing its start is the launching op. In the 2021 format the
// kernel's "External id" names the op directly. Kernels are attributed to
// the innermost op that launched them.
//
// Nesting: ops on one thread nest (aten::linear → aten::t, aten::addmm).
// An op is imported when it carries tensor shapes, no enclosing op is
// imported, and either it maps onto the catalogue or nothing nested in it
// does: so aten::linear is imported as MatMul with its addmm's kernels,
// an autograd node (AddmmBackward0) is looked through to the aten::mm
// inside it, and aten::cat stays one Opaque op. Its kernels are summed
// over everything nested in it, so no kernel counts twice.
//
// Mapping: aten::mm, bmm, addmm, baddbmm, linear and matmul to MatMul
// (batch dimensions folded to rank ≤ 3), softmax and _softmax to
// Softmax, add/add_ and mul/mul_ with two broadcastable tensors to Add and
// Mul, layer_norm and native_layer_norm to LayerNorm, rms_norm to
// RMSNorm, gelu, silu to GELU, SiLU, and scaled dot-product attention
// (aten::scaled_dot_product_attention and its _flash, _efficient and
// _cudnn kernels) to Attention. An op maps only with f32 inputs and shapes
// that kernels.Spec.Validate accepts; otherwise it is Opaque with its
// tensor shapes (dimensions folded to rank ≤ 4, zero-size tensors
// dropped, at most 16 inputs).
//
// Errors read "name:line:column: message" (of the decompressed JSON for
// a gzipped trace, as the JSONL Reader's lines), at the event's start for
// a bad event, and wrap ErrChrome.
func ImportChrome(r io.Reader, name string) (*ChromeTrace, error) {
	// Past a BOM too (cmd/replay's TestChromeBOM).
	src, err := input.Gunzip(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: gzip: %w", ErrChrome, name, err)
	}
	pos := &posReader{r: src, lastNL: -1}
	im := &importer{name: name, dec: json.NewDecoder(pos), pos: pos, runtime: map[int64]chromeEvent{}}
	if err := im.read(); err != nil {
		return nil, err
	}
	im.ct = &ChromeTrace{Legacy: im.legacy}
	im.ct.Counts.CPUOps = len(im.ops)
	im.nest()
	im.join()
	im.classify()
	im.collect()
	return im.ct, nil
}

// importer is one ImportChrome, step by step: read the events, nest the
// ops of each thread, join the kernels to the ops that launched them,
// classify each op (its shapes, its catalogue op), collect the imported
// ops.
type importer struct {
	name    string
	dec     *json.Decoder
	pos     *posReader
	ops     []*chromeOp
	kernels []chromeEvent
	runtime map[int64]chromeEvent // runtime calls by correlation ID
	legacy  bool
	threads map[string][2]int // thread → [first, end) in ops, once nested
	ct      *ChromeTrace
}

// fail returns an ErrChrome naming the file and where the decoder
// stopped.
func (im *importer) fail(format string, args ...any) error {
	return im.failAt(im.dec.InputOffset(), format, args...)
}

// failAt returns an ErrChrome naming the file and the line and column of
// the first token at or after byte off of the (decompressed) JSON.
func (im *importer) failAt(off int64, format string, args ...any) error {
	line, col := im.pos.lineCol(im.pos.skip(off))
	return fmt.Errorf("%w: %s:%d:%d: %s", ErrChrome, im.name, line, col, fmt.Sprintf(format, args...))
}

// read reads the top-level object, skipping every key but traceEvents.
func (im *importer) read() error {
	dec := im.dec
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return im.failAt(0, "not a JSON object (%v)", err)
	}
	found := false
	for dec.More() {
		at := dec.InputOffset()
		im.pos.drop(at)
		t, err := dec.Token()
		if err != nil {
			return im.fail("%v", err)
		}
		if key, _ := t.(string); key != "traceEvents" {
			var skip json.RawMessage
			at := dec.InputOffset()
			if err := dec.Decode(&skip); err != nil {
				return im.failAt(at, "%v", err)
			}
			continue
		}
		// A second traceEvents key would add its events to the first's
		// (counting each kernel twice): the trace is ambiguous, so it is
		// rejected (TestImportChromeErrors).
		if found {
			return im.failAt(at, "a second traceEvents key")
		}
		found = true
		if err := im.readEvents(); err != nil {
			return err
		}
	}
	if !found {
		return im.fail("no traceEvents")
	}
	at, err := chromeEnd(dec)
	if err != nil {
		return im.failAt(at, "%v", err)
	}
	return nil
}

// readEvents reads the traceEvents array, keeping its complete events
// ("ph": "X").
func (im *importer) readEvents() error {
	dec := im.dec
	at := dec.InputOffset()
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return im.failAt(at, "traceEvents is not an array (%v)", err)
	}
	for i := 0; dec.More(); i++ {
		// The event's place: before its comma (More stops there), which
		// failAt skips; the bytes from here on are kept until the next.
		at := dec.InputOffset()
		im.pos.drop(at)
		var ev chromeEvent
		if err := dec.Decode(&ev); err != nil {
			return im.failAt(at, "traceEvents[%d]: %v", i, err)
		}
		if ev.Ph != "X" {
			continue
		}
		ev.index = i
		if err := im.add(ev, at); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return im.fail("%v", err)
	}
	return nil
}

// add checks one complete event's times and files it by category: an
// op, a runtime call (by correlation) or a kernel; at is the event's
// place, for errors.
func (im *importer) add(ev chromeEvent, at int64) error {
	// A complete event without a numeric ts or dur has no time to join or
	// sum: read as 0 it would silently drop or zero measured kernel times
	// (TestImportChromeErrors).
	if ev.TsIn == nil || ev.DurIn == nil {
		field := "ts"
		if ev.TsIn != nil {
			field = "dur"
		}
		return im.failAt(at, "traceEvents[%d] (%s %s): no %s: a complete event (ph X) needs a numeric ts and dur", ev.index, input.Quote(ev.Cat), input.Quote(ev.Name), field)
	}
	ev.Ts, ev.Dur = *ev.TsIn, *ev.DurIn
	if !(ev.Dur >= 0 && ev.Dur <= MaxChromeUs) {
		return im.failAt(at, "traceEvents[%d] (%s %s): dur %v: want a duration in [0, %g] µs", ev.index, input.Quote(ev.Cat), input.Quote(ev.Name), ev.Dur, MaxChromeUs)
	}
	if !(math.Abs(ev.Ts) <= maxChromeTs) {
		return im.failAt(at, "traceEvents[%d] (%s %s): ts %v: want a time within ±%g µs", ev.index, input.Quote(ev.Cat), input.Quote(ev.Name), ev.Ts, maxChromeTs)
	}
	switch ev.Cat {
	case "cpu_op", "Operator":
		im.legacy = im.legacy || ev.Cat == "Operator"
		im.ops = append(im.ops, &chromeOp{ev: ev, thread: string(ev.Pid) + "/" + string(ev.Tid), parent: -1})
	case "cuda_runtime", "cuda_driver", "hip_runtime", "Runtime":
		if ev.Args.Correlation != nil {
			im.runtime[*ev.Args.Correlation] = ev
		}
	case "kernel", "Kernel":
		im.kernels = append(im.kernels, ev)
	}
	return nil
}

// nest gives each op of a thread its parent: sorted by start, longest
// first, a stack of open ops holds the enclosing ones.
func (im *importer) nest() {
	ops := im.ops
	slices.SortStableFunc(ops, func(a, b *chromeOp) int {
		if x := strings.Compare(a.thread, b.thread); x != 0 {
			return x
		}
		if x := cmp.Compare(a.ev.Ts, b.ev.Ts); x != 0 {
			return x
		}
		return cmp.Compare(b.ev.Dur, a.ev.Dur)
	})
	im.threads = map[string][2]int{}
	var stack []int
	for i, op := range ops {
		if i == 0 || ops[i-1].thread != op.thread {
			stack = stack[:0]
			im.threads[op.thread] = [2]int{i, i}
		}
		rg := im.threads[op.thread]
		rg[1] = i + 1
		im.threads[op.thread] = rg
		for len(stack) > 0 {
			top := ops[stack[len(stack)-1]]
			if op.ev.Ts < top.ev.Ts+top.ev.Dur {
				break
			}
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 {
			op.parent = stack[len(stack)-1]
			ops[op.parent].children = append(ops[op.parent].children, i)
		}
		stack = append(stack, i)
	}
}

// enclosing returns the innermost op of thread enclosing time t, or -1.
func (im *importer) enclosing(thread string, t float64) int {
	rg, ok := im.threads[thread]
	if !ok {
		return -1
	}
	ops := im.ops
	i, _ := slices.BinarySearchFunc(ops[rg[0]:rg[1]], t, func(o *chromeOp, t float64) int {
		if o.ev.Ts <= t {
			return -1
		}
		return 1
	})
	if i == 0 {
		return -1
	}
	for j := rg[0] + i - 1; j >= 0; j = ops[j].parent {
		if o := ops[j]; o.ev.Ts <= t && t <= o.ev.Ts+o.ev.Dur {
			return j
		}
	}
	return -1
}

// join attributes each kernel to the op that launched it: the innermost
// op enclosing its runtime call (by correlation), or in the 2021 format
// the op its External id names.
func (im *importer) join() {
	byExt := map[int64]int{}
	if im.legacy {
		for i, op := range im.ops {
			if op.ev.Args.External != nil {
				byExt[*op.ev.Args.External] = i
			}
		}
	}
	c := &im.ct.Counts
	for _, k := range im.kernels {
		c.Kernels++
		c.KernelUs += k.Dur
		leaf := -1
		if k.Args.Correlation != nil {
			if rt, ok := im.runtime[*k.Args.Correlation]; ok {
				leaf = im.enclosing(string(rt.Pid)+"/"+string(rt.Tid), rt.Ts)
			}
		}
		if leaf < 0 && im.legacy && k.Args.External != nil {
			if i, ok := byExt[*k.Args.External]; ok {
				leaf = i
			}
		}
		if leaf < 0 {
			c.Unjoined++
			continue
		}
		c.Joined++
		c.JoinedUs += k.Dur
		im.ops[leaf].kernels++
		im.ops[leaf].kernelUs += k.Dur
	}
}

// classify reads each op's shapes and catalogue op, then marks the ops
// with a catalogue op nested in them (children come after their parent
// in ops: one backward pass does it).
func (im *importer) classify() {
	ops := im.ops
	for _, op := range ops {
		op.shapes, op.dtype, op.f32 = chromeShapes(op.ev.Args.Dims, op.ev.Args.Types)
		if len(op.shapes) > 0 {
			im.ct.Counts.WithShapes++
		}
		op.spec = mapChrome(op)
	}
	for i := len(ops) - 1; i >= 0; i-- {
		if p := ops[i].parent; p >= 0 && (ops[i].spec != nil || ops[i].subMap) {
			ops[p].subMap = true
		}
	}
}

// collect imports, from each top-level op down, the first op with shapes
// that maps or holds nothing that maps, with its nested kernels; then
// numbers the imported ops in start order and counts them.
func (im *importer) collect() {
	for i, op := range im.ops {
		if op.parent < 0 {
			im.visit(i)
		}
	}
	ct, c := im.ct, &im.ct.Counts
	slices.SortStableFunc(ct.Ops, func(a, b ChromeOp) int { return cmp.Compare(a.TsUs, b.TsUs) })
	for i := range ct.Ops {
		o := &ct.Ops[i]
		o.Seq = int64(i)
		c.ImportedUs += o.ActualUs
		if o.Mapped {
			c.Mapped++
		} else {
			c.Opaque++
		}
	}
	c.Imported = len(ct.Ops)
}

// visit imports op i or looks through it to its children; the kernels of
// an op looked through belong to no imported op (Outside).
func (im *importer) visit(i int) {
	op := im.ops[i]
	if len(op.shapes) > 0 && (op.spec != nil || !op.subMap) {
		im.ct.Ops = append(im.ct.Ops, importOp(op))
		im.sum(i, &im.ct.Ops[len(im.ct.Ops)-1])
		return
	}
	im.ct.Counts.Outside += op.kernels
	for _, ch := range op.children {
		im.visit(ch)
	}
}

// sum adds the kernels of op i and of everything nested in it to co.
func (im *importer) sum(i int, co *ChromeOp) {
	co.Kernels += im.ops[i].kernels
	co.ActualUs += im.ops[i].kernelUs
	for _, ch := range im.ops[i].children {
		co.Nested++
		im.sum(ch, co)
	}
}

func importOp(op *chromeOp) ChromeOp {
	co := ChromeOp{Source: op.ev.Name, LaunchUs: op.ev.Dur, TsUs: op.ev.Ts, Index: op.ev.index, Mapped: op.spec != nil}
	if op.spec != nil {
		co.Event = EventOf(*op.spec)
	} else {
		co.Event = Event{Op: kernels.Opaque.String(), DType: op.dtype.String(), Params: Params{Name: op.ev.Name}}
		for _, sh := range op.shapes {
			co.Shape = append(co.Shape, fold(sh, kernels.MaxRank))
		}
		if len(co.Shape) > 16 {
			co.Shape = co.Shape[:16]
		}
	}
	co.Backend = "gpu"
	return co
}

// chromeEnd reads the end of the trace's object: nothing but white space
// may follow it (a file cut and pasted onto another is not one trace).
// A failure's place is returned with it.
func chromeEnd(dec *json.Decoder) (int64, error) {
	at := dec.InputOffset()
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return at, fmt.Errorf("want the end of the object (%v)", err)
	}
	at = dec.InputOffset()
	if _, err := dec.Token(); err != io.EOF {
		return at, fmt.Errorf("data after the end of the trace's object")
	}
	return at, nil
}

// posReader is the JSON that the importer's decoder reads, keeping the
// bytes from the last event's place on, so that an error can name its
// line and column. json.Decoder gives byte offsets only, and for an
// error inside an event they fall before it, after it or elsewhere, so
// the importer places an event's errors at its start.
type posReader struct {
	r      io.Reader
	mem    []byte // buf's array, from its start
	base   int64  // offset of buf[0]
	buf    []byte // the bytes read from base on
	lines  int    // newlines before base
	lastNL int64  // offset of the last newline before base, or -1
}

func (p *posReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if need := len(p.buf) + n; need > cap(p.buf) {
		// Slid to the array's start, or to a larger one: the bytes kept
		// stay about one event's, not all of the trace's.
		if need > cap(p.mem) {
			p.mem = make([]byte, 0, 2*need)
		}
		p.buf = p.mem[:copy(p.mem[:cap(p.mem)], p.buf)]
	}
	p.buf = append(p.buf, b[:n]...)
	return n, err
}

// clamp returns off's index in buf, within it.
func (p *posReader) clamp(off int64) int {
	return int(min(max(off-p.base, 0), int64(len(p.buf))))
}

// drop forgets the bytes before off: no error is placed before it.
func (p *posReader) drop(off int64) {
	k := p.clamp(off)
	gone := p.buf[:k]
	p.lines += bytes.Count(gone, []byte{'\n'})
	if i := bytes.LastIndexByte(gone, '\n'); i >= 0 {
		p.lastNL = p.base + int64(i)
	}
	p.buf, p.base = p.buf[k:], p.base+int64(k)
}

// skip returns the offset of the first byte at or after off that is
// neither white space nor a separator (off when none was read).
func (p *posReader) skip(off int64) int64 {
	for k := p.clamp(off); k < len(p.buf); k++ {
		switch p.buf[k] {
		case ' ', '\t', '\r', '\n', ',', ':':
		default:
			return p.base + int64(k)
		}
	}
	return off
}

// lineCol returns the 1-based line and column (in bytes) of offset off.
func (p *posReader) lineCol(off int64) (line, col int) {
	before := p.buf[:p.clamp(off)]
	nl := p.lastNL
	if i := bytes.LastIndexByte(before, '\n'); i >= 0 {
		nl = p.base + int64(i)
	}
	return p.lines + bytes.Count(before, []byte{'\n'}) + 1, int(p.base + int64(len(before)) - nl)
}
