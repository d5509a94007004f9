package trace

import (
	"fmt"
	"time"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// TraceFormat and TraceVersion are the header's format name and the
// version this package writes and reads.
const (
	TraceFormat  = "adaptsched-trace"
	TraceVersion = 1
)

// Header is a trace's first line (DESIGN.md § Traces).
type Header struct {
	Format      string          `json:"format"`  // TraceFormat
	Version     int             `json:"version"` // TraceVersion
	Created     time.Time       `json:"created"`
	Fingerprint string          `json:"fingerprint,omitempty"` // Fingerprint.Hash of the recording machine
	Backends    []backends.Info `json:"backends,omitempty"`
}

// Params are an event's non-shape op arguments, kernels.Params with JSON
// names; zero fields are omitted.
type Params struct {
	Causal   bool    `json:"causal,omitempty"`
	Scale    float32 `json:"scale,omitempty"`
	Eps      float32 `json:"eps,omitempty"`
	RopeBase float32 `json:"rope_base,omitempty"`
	Pos      int     `json:"pos,omitempty"`
	Name     string  `json:"name,omitempty"`
	FLOPs    int64   `json:"flops,omitempty"`
	Bytes    int64   `json:"bytes,omitempty"`
}

// Event is one op of a trace: what ran, where, why, and how long it took.
// Durations are in µs. Shadow holds durations measured on other backends
// (shadow runs) for counterfactual replay, by backend name.
type Event struct {
	Seq        int64              `json:"seq"`
	Op         string             `json:"op"`    // the catalogue's name: "MatMul", "Opaque"
	DType      string             `json:"dtype"` // "f32", "q4_0"
	Shape      [][]int            `json:"shape"` // the inputs' shapes
	Params     Params             `json:"params,omitzero"`
	Bucket     string             `json:"bucket,omitempty"`
	Backend    string             `json:"backend,omitempty"`
	Reason     string             `json:"reason,omitempty"`
	ActualUs   float64            `json:"actual_duration_us"`
	TransferUs float64            `json:"transfer_us,omitempty"`
	Shadow     map[string]float64 `json:"shadow_us,omitempty"`
}

// Spec returns the op that e describes, validated.
func (e Event) Spec() (kernels.Spec, error) {
	op, err := kernels.ParseOp(e.Op)
	if err != nil {
		return kernels.Spec{}, fmt.Errorf("event %d: %w", e.Seq, err)
	}
	dt, err := kernels.ParseDType(e.DType)
	if err != nil {
		return kernels.Spec{}, fmt.Errorf("event %d: %w", e.Seq, err)
	}
	s := kernels.Spec{Op: op, DType: dt, In: make([]kernels.Shape, len(e.Shape)), Params: kernels.Params{
		Causal: e.Params.Causal, Scale: e.Params.Scale, Eps: e.Params.Eps, RopeBase: e.Params.RopeBase,
		Pos: e.Params.Pos, Name: e.Params.Name, FLOPs: e.Params.FLOPs, Bytes: e.Params.Bytes,
	}}
	for i, sh := range e.Shape {
		s.In[i] = kernels.Shape(sh)
	}
	if err := s.Validate(); err != nil {
		return kernels.Spec{}, fmt.Errorf("event %d: %w", e.Seq, err)
	}
	return s, nil
}

// EventOf returns an event describing s, with the other fields zero. The
// event has its own copy of the shapes.
func EventOf(s kernels.Spec) Event {
	e := Event{Op: s.Op.String(), DType: s.DType.String(), Shape: make([][]int, len(s.In)), Params: Params{
		Causal: s.Params.Causal, Scale: s.Params.Scale, Eps: s.Params.Eps, RopeBase: s.Params.RopeBase,
		Pos: s.Params.Pos, Name: s.Params.Name, FLOPs: s.Params.FLOPs, Bytes: s.Params.Bytes,
	}}
	for i, sh := range s.In {
		e.Shape[i] = append([]int{}, sh...)
	}
	return e
}
