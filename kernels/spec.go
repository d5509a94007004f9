package kernels

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
)

// MaxRank is the largest rank any input may have.
const MaxRank = 4

// MaxElements bounds the elements of one tensor (2^40, 4 TiB of f32): a
// larger shape is a malformed spec, not a real op.
const MaxElements = 1 << 40

// Shape is a tensor's dimensions, outermost first, in elements (for a
// quantized tensor: its logical values, not its blocks).
type Shape []int

// String formats s as 2x3x4.
func (s Shape) String() string {
	var b strings.Builder
	for i, d := range s {
		if i > 0 {
			b.WriteByte('x')
		}
		fmt.Fprint(&b, d)
	}
	return b.String()
}

// Elements returns the product of the dimensions (1 for a scalar). It is
// only meaningful for a shape that Validate accepted.
func (s Shape) Elements() int64 {
	n := int64(1)
	for _, d := range s {
		n *= int64(d)
	}
	return n
}

// Equal reports whether s and t have the same dimensions.
func (s Shape) Equal(t Shape) bool {
	if len(s) != len(t) {
		return false
	}
	for i := range s {
		if s[i] != t[i] {
			return false
		}
	}
	return true
}

// Params are the non-shape arguments of an op. Zero values mean the
// documented defaults.
type Params struct {
	// Causal masks future keys in Attention (query i of S sees keys up to
	// T-S+i: decode and prefill with a KV cache).
	Causal bool
	// Scale is the factor of Scale, and the score scale of Attention
	// (0 means 1/sqrt(head dim)).
	Scale float32
	// Eps is the variance epsilon of RMSNorm and LayerNorm (0 means 1e-5).
	Eps float32
	// RopeBase is RoPE's theta (0 means 10000).
	RopeBase float32
	// Pos is RoPE's position of the first row (the KV-cache length), and
	// the cache position KVAppend writes its first row to.
	Pos int
	// Keys is how many leading positions of Attention's keys and values
	// hold data (0: all T of them): a KV cache allocated for the whole
	// context is read up to Keys. Causal then lets query i of S see keys
	// up to Keys-S+i.
	Keys int
	// Name is an Opaque op's name in its source (aten::cat, a kernel name).
	Name string
	// FLOPs and Bytes are an Opaque op's work when its source knows it
	// (0: unknown). Bytes counts bytes read and written together.
	FLOPs, Bytes int64
}

// Spec is one operation: op, dtype, input shapes and parameters. DType is
// the weights' type for QuantizedMatMul and Dequantize and F32 elsewhere
// (F16 for Copy and Dequantize of f16 data). A Spec is a small value; the
// scheduler and backends never keep the In slice beyond a call.
type Spec struct {
	Op     Op
	DType  DType
	In     []Shape
	Params Params
}

// String formats s as "MatMul f32 [64x4096 4096x4096]".
func (s Spec) String() string {
	var b strings.Builder
	b.WriteString(s.Op.String())
	if s.Op == Opaque && s.Params.Name != "" {
		b.WriteString("(" + s.Params.Name + ")")
	}
	b.WriteString(" " + s.DType.String() + " [")
	for i, sh := range s.In {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(sh.String())
	}
	b.WriteByte(']')
	return b.String()
}

// arity returns the number of inputs an op takes, or -1 for any.
func arity(o Op) int {
	switch o {
	case Opaque:
		return -1
	case MatMul, QuantizedMatMul, Add, Mul, RMSNorm, SwiGLU, KVAppend, GetRows:
		return 2
	case Attention, LayerNorm:
		return 3
	}
	return 1
}

// InDType returns the dtype of input i: the weight input of QuantizedMatMul,
// the table of GetRows and the input of Dequantize and Copy carry s.DType;
// everything else is f32.
func (s Spec) InDType(i int) DType {
	switch {
	case s.Op == QuantizedMatMul && i == 1,
		s.Op == Dequantize && i == 0,
		s.Op == GetRows && i == 0,
		s.Op == Copy && i == 0:
		return s.DType
	}
	return F32
}

// IndexRows returns how many rows input i indexes when it holds row
// indices (GetRows' input 1: integers in [0, rows) as f32), else 0:
// inputs made up for such an op must be rows of its table.
func (s Spec) IndexRows(i int) int {
	if s.Op == GetRows && i == 1 && len(s.In) == 2 && len(s.In[0]) == 2 {
		return s.In[0][0]
	}
	return 0
}

// OutDType returns the dtype of the output: Copy keeps its dtype, every
// other op writes f32 (Argmax its indices as f32 integers).
func (s Spec) OutDType() DType {
	if s.Op == Copy {
		return s.DType
	}
	return F32
}

// InBytes returns the bytes of input i in its storage format.
func (s Spec) InBytes(i int) int64 {
	sh := s.In[i]
	if len(sh) == 0 {
		return s.InDType(i).RowBytes(1)
	}
	last := int64(sh[len(sh)-1])
	return sh[:len(sh)-1].Elements() * s.InDType(i).RowBytes(last)
}

// OutBytes returns the bytes of the output in its storage format.
func (s Spec) OutBytes() int64 {
	var buf [MaxRank]int
	sh := s.outShape(&buf)
	if len(sh) == 0 {
		return s.OutDType().RowBytes(1)
	}
	last := int64(sh[len(sh)-1])
	return sh[:len(sh)-1].Elements() * s.OutDType().RowBytes(last)
}

// Validate reports the first thing wrong with s: an unknown op or dtype, a
// wrong input count or rank, a zero or negative dimension, a size that
// overflows, mismatched dimensions. The error names the op and the
// offending input and dimension, and wraps ErrInvalidSpec, ErrUnknownOp or
// ErrUnknownDType.
func (s Spec) Validate() error {
	if !s.Op.Valid() {
		return &SpecError{Op: s.Op, Input: -1, Msg: "not in the catalogue", Err: ErrUnknownOp}
	}
	if !s.DType.Valid() {
		return &SpecError{Op: s.Op, Input: -1, Msg: fmt.Sprintf("dtype %v", s.DType), Err: ErrUnknownDType}
	}
	if n := arity(s.Op); n >= 0 && len(s.In) != n {
		return specErr(s.Op, -1, "takes %d inputs, got %d", n, len(s.In))
	}
	if s.Op == Opaque && len(s.In) > 16 {
		return specErr(s.Op, -1, "%d inputs, at most 16", len(s.In))
	}
	for i, sh := range s.In {
		if len(sh) > MaxRank || (len(sh) == 0 && s.Op != Opaque) {
			return specErr(s.Op, i, "rank %d, want 1 to %d", len(sh), MaxRank)
		}
		n := uint64(1)
		for d, v := range sh {
			if v <= 0 {
				return specErr(s.Op, i, "dimension %d is %d, must be positive", d, v)
			}
			hi, lo := bits.Mul64(n, uint64(v))
			if hi != 0 || lo > MaxElements {
				return specErr(s.Op, i, "dimension %d (%d) overflows: more than 2^40 elements", d, v)
			}
			n = lo
		}
	}
	if err := s.validateDType(); err != nil {
		return err
	}
	if err := s.validateShapes(); err != nil {
		return err
	}
	return s.validateSize()
}

// MaxFLOPs bounds the work of one op (2^60): with every input within
// MaxElements, a product's output or its FLOPs could still overflow int64.
const MaxFLOPs = 1 << 60

// validateSize rejects an output beyond MaxElements or work beyond
// MaxFLOPs, computing with saturating products so that nothing overflows.
func (s Spec) validateSize() error {
	if s.Op == Opaque {
		return nil
	}
	var buf [MaxRank]int
	out := uint64(1)
	for _, d := range s.outShape(&buf) {
		out = satMul(out, uint64(d))
	}
	if out > MaxElements {
		return specErr(s.Op, -1, "output %v has more than 2^40 elements", s.OutShape())
	}
	var flops uint64
	switch s.Op {
	case MatMul, QuantizedMatMul:
		flops = satMul(2*out, uint64(s.In[0][len(s.In[0])-1]))
	case Attention:
		q := s.In[0]
		scores := satMul(satMul(satMul(uint64(q[0]), uint64(q[1])), uint64(q[2])), uint64(s.AttentionKeys()))
		flops = satMul(scores, 4*uint64(q[3])+5)
	}
	if flops > MaxFLOPs {
		return specErr(s.Op, -1, "more than 2^60 FLOPs")
	}
	return nil
}

// satMul returns a·b, or MaxUint64 when the product overflows.
func satMul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

func (s Spec) validateDType() error {
	ok := s.DType == F32
	switch s.Op {
	case QuantizedMatMul:
		ok = s.DType.Quantized()
	case Dequantize:
		ok = s.DType.Quantized() || s.DType == F16
	case GetRows:
		ok = true
	case Copy, Opaque:
		ok = true
	}
	if !ok {
		return specErr(s.Op, -1, "dtype %v not supported by this op", s.DType)
	}
	return nil
}

func isBad(f float32) bool { return math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) }

// OutShape returns the output's shape. It assumes a Spec that Validate
// accepted; the caller owns the returned slice. An Opaque op's output is
// its first input's shape (or a scalar).
func (s Spec) OutShape() Shape {
	var buf [MaxRank]int
	return append(Shape{}, s.outShape(&buf)...)
}

// outShape is OutShape written into buf, so that the hot path (buffer
// checks before every kernel) does not allocate.
func (s Spec) outShape(buf *[MaxRank]int) Shape {
	in := s.In
	if len(in) == 0 {
		return buf[:0]
	}
	if s.Op == GetRows { // one table row per index
		n := copy(buf[:], in[1])
		buf[n] = in[0][1]
		return buf[:n+1]
	}
	out := Shape(buf[:copy(buf[:], in[0])])
	switch s.Op {
	case MatMul:
		b := in[1]
		out[len(out)-1] = b[len(b)-1]
	case QuantizedMatMul:
		out[len(out)-1] = in[1][0]
	case Transpose:
		r := len(out)
		out[r-1], out[r-2] = out[r-2], out[r-1]
	case Argmax:
		out = out[:len(out)-1]
	}
	return out
}

// Work is what an op costs, independent of where it runs: the numbers the
// cost model and the size classes use.
type Work struct {
	FLOPs        int64 // floating-point operations (a multiply-add counts 2)
	BytesRead    int64 // bytes of every input, in its storage format
	BytesWritten int64 // bytes of the output
}

// Bytes returns the bytes read and written.
func (w Work) Bytes() int64 { return w.BytesRead + w.BytesWritten }

// Work returns the op's FLOPs and bytes. It assumes a Spec that Validate
// accepted. An Opaque op reports Params.FLOPs and Params.Bytes when known,
// else the bytes of its shapes as f32.
func (s Spec) Work() Work {
	var w Work
	if s.Op == Opaque {
		w.FLOPs = s.Params.FLOPs
		if s.Params.Bytes > 0 {
			w.BytesRead = s.Params.Bytes
			return w
		}
		for _, sh := range s.In {
			w.BytesRead += 4 * sh.Elements()
		}
		return w
	}
	switch s.Op {
	case KVAppend:
		// In place: the new rows are read and written, the cache's other
		// positions are left alone.
		w.BytesRead, w.BytesWritten = s.InBytes(1), s.InBytes(1)
		return w
	case GetRows:
		// Only the rows looked up are read, and the indices.
		w.BytesRead = s.In[1].Elements()*s.DType.RowBytes(int64(s.In[0][1])) + s.InBytes(1)
	case Attention:
		// Only the Keys positions in use of K and V are read.
		w.BytesRead = s.InBytes(0) + 2*s.InBytes(1)/int64(s.In[1][2])*int64(s.AttentionKeys())
	default:
		for i := range s.In {
			w.BytesRead += s.InBytes(i)
		}
	}
	out := s.OutShape()
	w.BytesWritten = s.OutBytes()
	n := out.Elements()
	switch s.Op {
	case MatMul:
		k := int64(s.In[0][len(s.In[0])-1])
		w.FLOPs = 2 * n * k
	case QuantizedMatMul:
		k := int64(s.In[0][len(s.In[0])-1])
		w.FLOPs = 2*n*k + s.In[1].Elements() // + dequantizing the weights
	case Attention:
		q := s.In[0]
		scores := int64(q[0]) * int64(q[1]) * int64(q[2]) * int64(s.AttentionKeys())
		w.FLOPs = 4*scores*int64(q[3]) + 5*scores // QK^T, PV, softmax
	case Softmax:
		w.FLOPs = 5 * n
	case RMSNorm:
		w.FLOPs = 4 * n
	case LayerNorm:
		w.FLOPs = 8 * n
	case RoPE:
		w.FLOPs = 6 * n
	case SiLU:
		w.FLOPs = 4 * n
	case GELU:
		w.FLOPs = 8 * n
	case SwiGLU:
		w.FLOPs = 5 * n
	case Dequantize:
		w.FLOPs = n
	case GetRows:
		if s.DType != F32 {
			w.FLOPs = n // decoding the rows
		}
	case Argmax:
		w.FLOPs = s.In[0].Elements() // one comparison per input value
	case Add, Mul, Scale:
		w.FLOPs = n
	}
	return w
}

// AttentionKeys returns how many key positions an Attention reads:
// Params.Keys, or all of input 1's when it is 0. s must be a valid
// Attention.
func (s Spec) AttentionKeys() int {
	if s.Params.Keys > 0 {
		return s.Params.Keys
	}
	return s.In[1][2]
}
