package kernels

import (
	"fmt"
	"strings"

	"github.com/adaptsched/adaptsched/internal/input"
)

// Op is an operation of the catalogue. Ops are data: a backend runs a
// [Spec], never one method per op.
type Op uint8

// The catalogue: every op that the static schedulers adaptsched replaces
// name (DESIGN.md § What it replaces). Opaque stands for an op outside the
// catalogue (imported from a trace or a perf table): it can be scheduled
// and replayed but not executed.
const (
	Opaque Op = iota
	MatMul
	QuantizedMatMul
	Softmax
	Attention
	Add
	Mul
	Scale
	RMSNorm
	LayerNorm
	RoPE
	SiLU
	SwiGLU
	GELU
	Dequantize
	Copy
	Transpose
	KVAppend
	Argmax
	GetRows
	numOps
)

var opNames = [...]string{
	Opaque:          "Opaque",
	MatMul:          "MatMul",
	QuantizedMatMul: "QuantizedMatMul",
	Softmax:         "Softmax",
	Attention:       "Attention",
	Add:             "Add",
	Mul:             "Mul",
	Scale:           "Scale",
	RMSNorm:         "RMSNorm",
	LayerNorm:       "LayerNorm",
	RoPE:            "RoPE",
	SiLU:            "SiLU",
	SwiGLU:          "SwiGLU",
	GELU:            "GELU",
	Dequantize:      "Dequantize",
	Copy:            "Copy",
	Transpose:       "Transpose",
	KVAppend:        "KVAppend",
	Argmax:          "Argmax",
	GetRows:         "GetRows",
}

var _ fmt.Stringer = MatMul

// String returns the op's name, or Op(n) for a value outside the catalogue.
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Valid reports whether o is a known op (Opaque included).
func (o Op) Valid() bool { return o < numOps }

// Ops returns every executable op of the catalogue (Opaque excluded), in
// declaration order. The caller owns the returned slice.
func Ops() []Op {
	out := make([]Op, 0, numOps-1)
	for o := Op(1); o < numOps; o++ {
		out = append(out, o)
	}
	return out
}

// ParseOp returns the op named s (case-insensitive).
func ParseOp(s string) (Op, error) {
	for i, n := range opNames {
		if strings.EqualFold(n, s) {
			return Op(i), nil
		}
	}
	return 0, fmt.Errorf("%w %s", ErrUnknownOp, input.Quote(s))
}

// Class groups ops by how their cost grows, as the static schedulers do
// (BackendSelector's element-wise / reduction / matrix tiers).
type Class uint8

// The op classes.
const (
	ElementWise Class = iota
	Reduction
	Matrix
)

var _ fmt.Stringer = Matrix

// String returns the class's name.
func (c Class) String() string {
	switch c {
	case ElementWise:
		return "elementwise"
	case Reduction:
		return "reduction"
	case Matrix:
		return "matrix"
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// Class returns the op's complexity class. Opaque ops count as matrix ops:
// what a trace cannot name is usually a fused kernel, not an element-wise one.
func (o Op) Class() Class {
	switch o {
	case MatMul, QuantizedMatMul, Attention, Opaque:
		return Matrix
	case Softmax, RMSNorm, LayerNorm, Argmax:
		return Reduction
	}
	return ElementWise
}

// DType is the element type of an op's weights or data.
type DType uint8

// The dtypes. Q8_0 and Q4_0 are ggml's block-quantized formats: blocks of
// 32 values along the last axis, each with one f16 scale (34 and 18 bytes
// per block). F16 is a storage format, converted by Copy and Dequantize.
const (
	F32 DType = iota
	F16
	Q8_0
	Q4_0
	numDTypes
)

// QK is the number of values in one Q8_0 or Q4_0 block.
const QK = 32

var dtypeNames = [...]string{F32: "f32", F16: "f16", Q8_0: "q8_0", Q4_0: "q4_0"}

var _ fmt.Stringer = F32

// String returns the dtype's name, or DType(n) for an unknown value.
func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Valid reports whether d is a known dtype.
func (d DType) Valid() bool { return d < numDTypes }

// Quantized reports whether d is a block-quantized format.
func (d DType) Quantized() bool { return d == Q8_0 || d == Q4_0 }

// ParseDType returns the dtype named s (case-insensitive).
func ParseDType(s string) (DType, error) {
	for i, n := range dtypeNames {
		if strings.EqualFold(n, s) {
			return DType(i), nil
		}
	}
	return 0, fmt.Errorf("%w %s", ErrUnknownDType, input.Quote(s))
}

// RowBytes returns the bytes that n values of dtype d take along a row.
// For quantized formats n must be a multiple of QK.
func (d DType) RowBytes(n int64) int64 {
	switch d {
	case F16:
		return 2 * n
	case Q8_0:
		return n / QK * 34
	case Q4_0:
		return n / QK * 18
	}
	return 4 * n
}
