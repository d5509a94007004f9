package history

import (
	"bufio"
	"compress/gzip"
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
	Ph    string          `json:"ph"`
	Cat   string          `json:"cat"`
	Name  string          `json:"name"`
	Pid   json.RawMessage `json:"pid"`
	Tid   json.RawMessage `json:"tid"`
	Ts    float64         `json:"ts"`
	Dur   float64         `json:"dur"`
	index int             // in traceEvents
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
func ImportChrome(r io.Reader, name string) (*ChromeTrace, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var src io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: gzip: %w", ErrChrome, name, err)
		}
		defer gz.Close()
		src = gz
	}
	dec := json.NewDecoder(src)
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: offset %d: %s", ErrChrome, name, dec.InputOffset(), fmt.Sprintf(format, args...))
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fail("not a JSON object (%v)", err)
	}
	var ops []*chromeOp
	var kernelsEv []chromeEvent
	runtime := map[int64]chromeEvent{}
	legacy, found := false, false
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fail("%v", err)
		}
		if key, _ := t.(string); key != "traceEvents" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, fail("%v", err)
			}
			continue
		}
		found = true
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			return nil, fail("traceEvents is not an array (%v)", err)
		}
		for i := 0; dec.More(); i++ {
			var ev chromeEvent
			if err := dec.Decode(&ev); err != nil {
				return nil, fail("traceEvents[%d]: %v", i, err)
			}
			if ev.Ph != "X" {
				continue
			}
			ev.index = i
			if !(ev.Dur >= 0 && ev.Dur <= MaxChromeUs) {
				return nil, fail("traceEvents[%d] (%s %s): dur %v: want a duration in [0, %g] µs", i, input.Quote(ev.Cat), input.Quote(ev.Name), ev.Dur, MaxChromeUs)
			}
			if !(math.Abs(ev.Ts) <= maxChromeTs) {
				return nil, fail("traceEvents[%d] (%s %s): ts %v: want a time within ±%g µs", i, input.Quote(ev.Cat), input.Quote(ev.Name), ev.Ts, maxChromeTs)
			}
			switch ev.Cat {
			case "cpu_op", "Operator":
				legacy = legacy || ev.Cat == "Operator"
				ops = append(ops, &chromeOp{ev: ev, thread: string(ev.Pid) + "/" + string(ev.Tid), parent: -1})
			case "cuda_runtime", "cuda_driver", "hip_runtime", "Runtime":
				if ev.Args.Correlation != nil {
					runtime[*ev.Args.Correlation] = ev
				}
			case "kernel", "Kernel":
				kernelsEv = append(kernelsEv, ev)
			}
		}
		if _, err := dec.Token(); err != nil {
			return nil, fail("%v", err)
		}
	}
	if !found {
		return nil, fail("no traceEvents")
	}
	if err := chromeEnd(dec); err != nil {
		return nil, fail("%v", err)
	}
	ct := &ChromeTrace{Legacy: legacy}
	c := &ct.Counts
	c.CPUOps = len(ops)

	// Nest the ops of each thread: sorted by start, longest first, a stack
	// of open ops gives each its parent.
	slices.SortStableFunc(ops, func(a, b *chromeOp) int {
		if x := strings.Compare(a.thread, b.thread); x != 0 {
			return x
		}
		if a.ev.Ts != b.ev.Ts {
			if a.ev.Ts < b.ev.Ts {
				return -1
			}
			return 1
		}
		if a.ev.Dur > b.ev.Dur {
			return -1
		} else if a.ev.Dur < b.ev.Dur {
			return 1
		}
		return 0
	})
	threads := map[string][2]int{} // thread → [first, end) in ops
	var stack []int
	for i, op := range ops {
		if i == 0 || ops[i-1].thread != op.thread {
			stack = stack[:0]
			threads[op.thread] = [2]int{i, i}
		}
		rg := threads[op.thread]
		rg[1] = i + 1
		threads[op.thread] = rg
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
	byExt := map[int64]int{}
	if legacy {
		for i, op := range ops {
			if op.ev.Args.External != nil {
				byExt[*op.ev.Args.External] = i
			}
		}
	}
	// enclosing returns the innermost op of thread enclosing time t, or -1.
	enclosing := func(thread string, t float64) int {
		rg, ok := threads[thread]
		if !ok {
			return -1
		}
		seg := ops[rg[0]:rg[1]]
		i, _ := slices.BinarySearchFunc(seg, t, func(o *chromeOp, t float64) int {
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
	for _, k := range kernelsEv {
		c.Kernels++
		c.KernelUs += k.Dur
		leaf := -1
		if k.Args.Correlation != nil {
			if rt, ok := runtime[*k.Args.Correlation]; ok {
				leaf = enclosing(string(rt.Pid)+"/"+string(rt.Tid), rt.Ts)
			}
		}
		if leaf < 0 && legacy && k.Args.External != nil {
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
		ops[leaf].kernels++
		ops[leaf].kernelUs += k.Dur
	}
	for _, op := range ops {
		op.shapes, op.dtype, op.f32 = chromeShapes(op.ev.Args.Dims, op.ev.Args.Types)
		if len(op.shapes) > 0 {
			c.WithShapes++
		}
		op.spec = mapChrome(op)
	}
	// Children come after their parent in ops: a backward pass marks
	// which subtrees hold a catalogue op.
	for i := len(ops) - 1; i >= 0; i-- {
		if p := ops[i].parent; p >= 0 && (ops[i].spec != nil || ops[i].subMap) {
			ops[p].subMap = true
		}
	}
	var visit func(i int)
	var sum func(i int, co *ChromeOp)
	sum = func(i int, co *ChromeOp) {
		co.Kernels += ops[i].kernels
		co.ActualUs += ops[i].kernelUs
		for _, ch := range ops[i].children {
			co.Nested++
			sum(ch, co)
		}
	}
	visit = func(i int) {
		op := ops[i]
		if len(op.shapes) > 0 && (op.spec != nil || !op.subMap) {
			ct.Ops = append(ct.Ops, importOp(op))
			sum(i, &ct.Ops[len(ct.Ops)-1])
			return
		}
		c.Outside += op.kernels
		for _, ch := range op.children {
			visit(ch)
		}
	}
	for i, op := range ops {
		if op.parent < 0 {
			visit(i)
		}
	}
	slices.SortStableFunc(ct.Ops, func(a, b ChromeOp) int {
		if a.TsUs < b.TsUs {
			return -1
		} else if a.TsUs > b.TsUs {
			return 1
		}
		return 0
	})
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
	return ct, nil
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

// chromeShapes returns the tensors among an op's inputs (a tensor list
// contributes each of its tensors; scalars and zero-size tensors none),
// the dtype to record for it (f16 for half types, else f32), and whether
// its first tensor is f32 (only then can it map onto the catalogue).
func chromeShapes(dims, types []json.RawMessage) (out [][]int, dt kernels.DType, f32 bool) {
	dt, f32 = kernels.F32, true
	for i, d := range dims {
		var sh []int
		if json.Unmarshal(d, &sh) == nil {
			if len(sh) > 0 && positive(sh) {
				if len(out) == 0 && i < len(types) {
					var t string
					json.Unmarshal(types[i], &t)
					if strings.Contains(t, "Half") || strings.Contains(t, "BFloat16") {
						dt = kernels.F16
					}
					f32 = t == "" || t == "float"
				}
				out = append(out, sh)
			}
			continue
		}
		var list [][]int
		if json.Unmarshal(d, &list) == nil {
			for _, sh := range list {
				if len(sh) > 0 && positive(sh) {
					out = append(out, sh)
				}
			}
		}
	}
	return out, dt, f32
}

func positive(sh []int) bool {
	for _, d := range sh {
		if d <= 0 {
			return false
		}
	}
	return true
}

// fold merges leading dimensions until sh has at most rank r.
func fold(sh []int, r int) []int {
	if len(sh) <= r {
		return append([]int{}, sh...)
	}
	out := make([]int, r)
	lead := len(sh) - r + 1
	out[0] = 1
	for _, d := range sh[:lead] {
		out[0] *= d
	}
	copy(out[1:], sh[lead:])
	return out
}

// mapChrome returns the catalogue op that op is, or nil.
func mapChrome(op *chromeOp) *kernels.Spec {
	if !op.f32 || len(op.shapes) == 0 {
		return nil
	}
	in := op.shapes
	name := op.ev.Name
	var s kernels.Spec
	switch name {
	case "aten::mm", "aten::bmm", "aten::matmul":
		if len(in) < 2 {
			return nil
		}
		s = matmulSpec(in[0], in[1])
	case "aten::addmm", "aten::baddbmm":
		if len(in) < 3 {
			return nil
		}
		s = matmulSpec(in[1], in[2])
	case "aten::linear":
		if len(in) < 2 || len(in[1]) != 2 {
			return nil
		}
		s = matmulSpec(in[0], []int{in[1][1], in[1][0]})
	case "aten::softmax", "aten::_softmax":
		s = kernels.Spec{Op: kernels.Softmax, In: []kernels.Shape{fold(in[0], kernels.MaxRank)}}
	case "aten::add", "aten::add_", "aten::mul", "aten::mul_":
		if len(in) != 2 {
			return nil
		}
		s = kernels.Spec{Op: kernels.Add, In: []kernels.Shape{in[0], in[1]}}
		if strings.HasPrefix(name, "aten::mul") {
			s.Op = kernels.Mul
		}
	case "aten::layer_norm", "aten::native_layer_norm":
		x := fold(in[0], kernels.MaxRank)
		d := x[len(x)-1]
		s = kernels.Spec{Op: kernels.LayerNorm, In: []kernels.Shape{x, {d}, {d}}}
	case "aten::rms_norm":
		x := fold(in[0], kernels.MaxRank)
		s = kernels.Spec{Op: kernels.RMSNorm, In: []kernels.Shape{x, {x[len(x)-1]}}}
	case "aten::gelu", "aten::gelu_":
		s = kernels.Spec{Op: kernels.GELU, In: []kernels.Shape{fold(in[0], kernels.MaxRank)}}
	case "aten::silu", "aten::silu_":
		s = kernels.Spec{Op: kernels.SiLU, In: []kernels.Shape{fold(in[0], kernels.MaxRank)}}
	case "aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
		"aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention":
		if len(in) < 3 {
			return nil
		}
		s = kernels.Spec{Op: kernels.Attention, In: []kernels.Shape{in[0], in[1], in[2]}}
	default:
		return nil
	}
	if s.Validate() != nil {
		return nil
	}
	return &s
}

// matmulSpec folds a and b onto MatMul's ranks: a vector becomes a
// matrix, batch dimensions merge into one.
func matmulSpec(a, b []int) kernels.Spec {
	if len(a) == 1 {
		a = []int{1, a[0]}
	}
	if len(b) == 1 {
		b = []int{b[0], 1}
	}
	if len(b) == 2 {
		a = fold(a, 2)
	} else {
		a, b = fold(a, 3), fold(b, 3)
	}
	return kernels.Spec{Op: kernels.MatMul, In: []kernels.Shape{a, b}}
}

// chromeEnd reads the end of the trace's object: nothing but white space
// may follow it (a file cut and pasted onto another is not one trace).
func chromeEnd(dec *json.Decoder) error {
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return fmt.Errorf("want the end of the object (%v)", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("data after the end of the trace's object")
	}
	return nil
}
