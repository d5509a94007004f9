package executor_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/executor"
	"github.com/adaptsched/adaptsched/kernels"
)

// summing runs Opaque ops as the elementwise sum of their f32 inputs
// over the memory of the backend it wraps, each after release is
// closed; it fails an op whose inputs are not of shape [2 2].
type summing struct {
	backends.Backend
	release chan struct{}
}

func (s *summing) Supports(kernels.Spec) error { return nil }

func (s *summing) Run(spec kernels.Spec, in []backends.Buffer, out backends.Buffer) (backends.Timing, error) {
	<-s.release
	for i, sh := range spec.In {
		if len(sh) != 2 || sh[0] != 2 || sh[1] != 2 {
			return backends.Timing{}, fmt.Errorf("input %d of shape %v, queued as [2 2]", i, sh)
		}
	}
	sum := make([]float32, out.Size()/4)
	x := make([]float32, len(sum))
	for _, b := range in {
		if _, err := s.Backend.Read(kernels.AsBytes(x), b); err != nil {
			return backends.Timing{}, err
		}
		for i, v := range x {
			sum[i] += v
		}
	}
	return s.Backend.Write(out, kernels.AsBytes(sum))
}

// TestQueuedWideOp queues an op of more inputs and dimensions than a
// queued op's own storage holds, then changes the caller's spec before
// it runs: it runs on the spec it was given, over all its inputs.
func TestQueuedWideOp(t *testing.T) {
	dev := &summing{Backend: open(t, "cpu1"), release: make(chan struct{})}
	e := newExec(t, executor.Config{Strategy: adaptive.Only("cpu1")}, dev)
	const n = 6
	spec := kernels.Spec{Op: kernels.Opaque, In: make([]kernels.Shape, n)}
	in := make([]backends.Buffer, n)
	for i := range in {
		spec.In[i] = kernels.Shape{2, 2}
		in[i] = alloc(t, e, kernels.AsBytes([]float32{float32(i), 1, 0, 2}))
	}
	out, err := e.Alloc(16)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Run(spec, in, out); err != nil {
		t.Fatal(err)
	}
	for i := range spec.In {
		spec.In[i][0], spec.In[i][1] = 4, 1 // the caller reuses its spec
	}
	close(dev.release)
	if err := e.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 4)
	if _, err := e.Read(kernels.AsBytes(got), out); err != nil {
		t.Fatal(err)
	}
	if want := []float32{0 + 1 + 2 + 3 + 4 + 5, n, 0, 2 * n}; got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Errorf("sum of %d inputs = %v, want %v", n, got, want)
	}
}
