package kernels

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error that Validate or a kernel returns wraps one
// of these, so callers test them with errors.Is.
var (
	// ErrInvalidSpec marks a malformed Spec: wrong rank, mismatched or
	// non-positive dimensions, sizes that overflow, wrong input count.
	ErrInvalidSpec = errors.New("kernels: invalid spec")
	// ErrUnknownOp marks an op outside the catalogue.
	ErrUnknownOp = errors.New("kernels: unknown op")
	// ErrUnknownDType marks a dtype outside the catalogue.
	ErrUnknownDType = errors.New("kernels: unknown dtype")
	// ErrBufferSize marks an input or output buffer whose length does not
	// match what the Spec's shapes require, an f32 buffer that is not
	// 4-byte aligned, or a quantization call whose lengths do not match.
	ErrBufferSize = errors.New("kernels: wrong buffer size")
	// ErrNotExecutable marks an Opaque op: it can be scheduled and
	// replayed, not run.
	ErrNotExecutable = errors.New("kernels: op is not executable")
	// ErrIndex marks a GetRows index that is not a row of its table: not
	// an integer, or outside [0, rows).
	ErrIndex = errors.New("kernels: index is not a row of the table")
)

// SpecError describes what is wrong with a Spec: the op, the input (or -1
// for the spec as a whole) and the offending dimension.
type SpecError struct {
	Op    Op
	Input int // index of the offending input; -1 when not about one input
	Msg   string
	Err   error // the sentinel: ErrInvalidSpec, ErrUnknownOp, ErrUnknownDType, ErrBufferSize, ErrNotExecutable or ErrIndex
}

// Error implements error.
func (e *SpecError) Error() string {
	if e.Input >= 0 {
		return fmt.Sprintf("%v: %v input %d: %s", e.Err, e.Op, e.Input, e.Msg)
	}
	return fmt.Sprintf("%v: %v: %s", e.Err, e.Op, e.Msg)
}

// Unwrap returns the sentinel.
func (e *SpecError) Unwrap() error { return e.Err }

func specErr(op Op, input int, format string, args ...any) error {
	return &SpecError{Op: op, Input: input, Msg: fmt.Sprintf(format, args...), Err: ErrInvalidSpec}
}
