package kernels

import (
	"fmt"
	"math"
	"unsafe"
)

// CheckBuffers validates s and checks that in holds one buffer per input
// and that every buffer has exactly the bytes its shape and dtype require
// (s.InBytes(i), s.OutBytes()), and that f32 buffers are 4-byte aligned.
// A size error is a *SpecError wrapping ErrBufferSize that names the op,
// the input (-1 for the output) and the expected and actual sizes.
func CheckBuffers(s Spec, in [][]byte, out []byte) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if len(in) != len(s.In) {
		return &SpecError{Op: s.Op, Input: -1, Err: ErrBufferSize,
			Msg: fmt.Sprintf("%d input buffers for %d inputs", len(in), len(s.In))}
	}
	for i, b := range in {
		if want := s.InBytes(i); int64(len(b)) != want {
			return &SpecError{Op: s.Op, Input: i, Err: ErrBufferSize,
				Msg: fmt.Sprintf("buffer of %d bytes, want %d (%v %v)", len(b), want, s.InDType(i), s.In[i])}
		}
		if s.InDType(i) == F32 && misaligned(b) {
			return &SpecError{Op: s.Op, Input: i, Err: ErrBufferSize, Msg: "f32 buffer not 4-byte aligned"}
		}
	}
	if want := s.OutBytes(); int64(len(out)) != want {
		return &SpecError{Op: s.Op, Input: -1, Err: ErrBufferSize,
			Msg: fmt.Sprintf("output buffer of %d bytes, want %d (%v %v)", len(out), want, s.OutDType(), s.OutShape())}
	}
	if s.OutDType() == F32 && misaligned(out) {
		return &SpecError{Op: s.Op, Input: -1, Err: ErrBufferSize, Msg: "f32 output buffer not 4-byte aligned"}
	}
	return nil
}

func misaligned(b []byte) bool {
	return len(b) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%4 != 0
}

// checkIndices reports the first of GetRows' indices idx that is not a
// row of its table (ErrIndex): a kernel checks them all before it writes.
func checkIndices(s Spec, idx []float32) error {
	rows := s.In[0][0]
	for k, v := range idx {
		if !(v >= 0 && v < float32(rows)) || v != float32(int(v)) {
			return &SpecError{Op: s.Op, Input: 1, Err: ErrIndex,
				Msg: fmt.Sprintf("index %d is %v, not a row of the table's %d", k, v, rows)}
		}
	}
	return nil
}

// notExecutable is the error of running an Opaque op.
func notExecutable(s Spec) error {
	return &SpecError{Op: s.Op, Input: -1, Err: ErrNotExecutable,
		Msg: fmt.Sprintf("%q has no kernel", s.Params.Name)}
}

// lastDim returns the last dimension of a validated shape.
func lastDim(sh Shape) int { return sh[len(sh)-1] }

// rows returns the product of every dimension but the last.
func rows(sh Shape) int { return int(sh[:len(sh)-1].Elements()) }

// eps returns the epsilon of a norm op.
func (p Params) eps() float64 {
	if p.Eps == 0 {
		return 1e-5
	}
	return float64(p.Eps)
}

// ropeBase returns RoPE's theta.
func (p Params) ropeBase() float64 {
	if p.RopeBase == 0 {
		return 10000
	}
	return float64(p.RopeBase)
}

// attnScale returns the attention score scale for head dimension d.
func (p Params) attnScale(d int) float64 {
	if p.Scale == 0 {
		return 1 / math.Sqrt(float64(d))
	}
	return float64(p.Scale)
}
