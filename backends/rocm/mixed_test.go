//go:build cgo

package rocm

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/backends/cpu"
	"github.com/adaptsched/adaptsched/executor"
	"github.com/adaptsched/adaptsched/kernels"
)

// everyThird places every third op of a chain on backend 0 (the CPU) and
// the others on backend 1 (the GPU): cmd/infer's frozen step mode, a
// placement set before the step with some ops on the CPU.
type everyThird struct{ n int }

func (*everyThird) Name() string                             { return "every-third" }
func (*everyThird) Observed(adaptive.BucketID, int, float64) {}
func (p *everyThird) Place(kernels.Spec, adaptive.Residency, adaptive.BucketID) int {
	p.n++
	if p.n%3 == 0 {
		return 0
	}
	return 1
}

// TestFakeGatheredWithCPU gathers steps whose ops alternate between the
// GPU and the CPU through the Executor: each CPU op reads a gathered
// op's output, which launches the gathering so far, so a step is
// launched in pieces. Every step's result is the CPU's reference for its
// new input (no stale read, no replay of an old argument), and from the
// third step on the pieces are replayed as graphs.
func TestFakeGatheredWithCPU(t *testing.T) {
	const n, ops, steps = 256, 12, 4
	d := openFake(t, fakeOptions(t, "blas"))
	c, err := cpu.New("cpu", cpu.Options{Threads: 1, CalibrationFile: "-"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := executor.New(executor.Config{Backends: []backends.Backend{c, d}, Placer: &everyThird{},
		NoCalibration: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	bufs := make([]backends.Buffer, ops+1)
	for i := range bufs {
		if bufs[i], err = e.Alloc(4 * n); err != nil {
			t.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(7, 7))
	in, out := make([]byte, 4*n), make([]byte, 4*n)
	for step := range steps {
		want := make([]float32, n)
		for i := range want {
			want[i] = r.Float32()*2 - 1
			binary.LittleEndian.PutUint32(in[4*i:], math.Float32bits(want[i]))
		}
		if _, err := e.Write(bufs[0], in); err != nil {
			t.Fatal(err)
		}
		if err := e.Record(); err != nil {
			t.Fatal(err)
		}
		for i := range ops {
			scale := float32(1 + 0.125*float64(i%4)) // exact in float32: the GPU's result equals the CPU's
			s := kernels.Spec{Op: kernels.Scale, In: []kernels.Shape{{n}}, Params: kernels.Params{Scale: scale}}
			if _, err := e.Run(s, bufs[i:i+1], bufs[i+1]); err != nil {
				t.Fatalf("step %d, op %d: %v", step, i, err)
			}
			for k := range want {
				want[k] *= scale
			}
		}
		if err := e.Flush(); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Read(out, bufs[ops]); err != nil {
			t.Fatal(err)
		}
		for k, w := range want {
			if got := math.Float32frombits(binary.LittleEndian.Uint32(out[4*k:])); got != w {
				t.Fatalf("step %d: element %d is %v, want %v", step, k, got, w)
			}
		}
	}
	st := d.Graphs()
	t.Logf("graphs %+v", st)
	if st.Launches < 2*steps || st.Replays == 0 || st.NoGraphs != "" {
		t.Errorf("graphs %+v: want each step launched in pieces (≥ %d launches), some replayed", st, 2*steps)
	}
	if cs := e.Stats(); cs.Backends[0].Ops != steps*ops/3 {
		t.Errorf("CPU ran %d ops, want %d", cs.Backends[0].Ops, steps*ops/3)
	}
}
