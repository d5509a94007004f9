package executor_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/executor"
	"github.com/adaptsched/adaptsched/kernels"
)

// BenchmarkExecutorOverhead measures what the Executor adds to a tiny op
// (Add of 16 floats on "cpu") once residency is resolved: Executor.Run
// against the backend's own Run on the same buffers. overhead-ns/op is
// the difference (the target: at most 1000 ns; docs/targets.csv).
func BenchmarkExecutorOverhead(b *testing.B) {
	cpu := open(b, "cpu")
	e := newExec(b, executor.Config{}, cpu)
	s := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{16}, {16}}}
	x := kernels.AsBytes(make([]float32, 16))
	mk := func(be backends.Backend) (in []backends.Buffer, out backends.Buffer) {
		for range 2 {
			buf, _ := be.Alloc(64)
			be.Write(buf, x)
			in = append(in, buf)
		}
		out, _ = be.Alloc(64)
		return in, out
	}
	din, dout := mk(cpu)
	ein, eout := mk(e)
	if _, err := e.Run(s, ein, eout); err != nil { // resolve residency
		b.Fatal(err)
	}
	b.ReportAllocs()
	var execNs time.Duration
	start := time.Now()
	for b.Loop() {
		if _, err := e.Run(s, ein, eout); err != nil {
			b.Fatal(err)
		}
	}
	execNs = time.Since(start)
	start = time.Now()
	for range b.N {
		if _, err := cpu.Run(s, din, dout); err != nil {
			b.Fatal(err)
		}
	}
	direct := time.Since(start)
	b.ReportMetric(float64(execNs-direct)/float64(b.N), "overhead-ns/op")
	b.ReportMetric(float64(direct)/float64(b.N), "direct-ns/op")
}

// BenchmarkExecutorParallel runs the same tiny op from every goroutine on
// private tensors: the Executor's locks under contention.
func BenchmarkExecutorParallel(b *testing.B) {
	e := newExec(b, executor.Config{}, open(b, "cpu1"))
	s := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{16}, {16}}}
	w, _ := e.Alloc(64)
	e.Write(w, make([]byte, 64))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		x, _ := e.Alloc(64)
		e.Write(x, make([]byte, 64))
		out, _ := e.Alloc(64)
		in := []backends.Buffer{x, w}
		for pb.Next() {
			if _, err := e.Run(s, in, out); err != nil {
				panic(fmt.Sprint(err))
			}
		}
	})
}
