package executor_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/executor"
	"github.com/adaptsched/adaptsched/kernels"
)

// BenchmarkExecutorOverhead measures what the Executor adds to a tiny op
// (Add of 16 floats on "cpu") once residency is resolved: Executor.Run
// against the backend's own Run on the same buffers, synchronous
// (Config.Synchronous) and queued. Queued, the loop ends with a Sync, so
// that every op has run and been observed: overhead-ns/op is then what
// the queue costs per op in throughput, and issue-ns/op what Run costs
// its caller. The synchronous target: at most 1000 ns (docs/targets.csv).
func BenchmarkExecutorOverhead(b *testing.B) {
	for _, mode := range []struct {
		name string
		sync bool
	}{{"sync", true}, {"queued", false}} {
		b.Run(mode.name, func(b *testing.B) {
			cpu := open(b, "cpu")
			e := newExec(b, executor.Config{Synchronous: mode.sync}, cpu)
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
			if err := e.Sync(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				if _, err := e.Run(s, ein, eout); err != nil {
					b.Fatal(err)
				}
			}
			issue := time.Since(start)
			if err := e.Sync(context.Background()); err != nil {
				b.Fatal(err)
			}
			execNs := time.Since(start)
			start = time.Now()
			for range b.N {
				if _, err := cpu.Run(s, din, dout); err != nil {
					b.Fatal(err)
				}
			}
			direct := time.Since(start)
			b.ReportMetric(float64(execNs-direct)/float64(b.N), "overhead-ns/op")
			b.ReportMetric(float64(issue)/float64(b.N), "issue-ns/op")
			b.ReportMetric(float64(direct)/float64(b.N), "direct-ns/op")
		})
	}
}

// BenchmarkExecutorOnly measures the Executor's own work per op over
// the bare backend call (target ≤ 250 ns, DESIGN.md § The data path):
// the same tiny op (Add of 16 floats) on the same backend, "cpu", once
// through a synchronous Executor over "cpu" and "cpu1" whose Strategy is
// Only("cpu"), once by cpu's own Run. Each iteration is one call, the
// two taken in alternating blocks of 256, so that a busy machine slows
// both alike: overhead-ns/op is the difference per op in wall time, and
// overhead-cpu-ns/op in the thread's CPU time (Linux), which the time
// spent waiting for a core on a shared machine does not inflate;
// exec-allocs/op and direct-allocs/op are each call's allocations.
func BenchmarkExecutorOnly(b *testing.B) {
	cpu := open(b, "cpu")
	e := newExec(b, executor.Config{Synchronous: true, Strategy: adaptive.Only("cpu")}, cpu, open(b, "cpu1"))
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
	runs := [2]func(){func() { // exec, direct
		if _, err := e.Run(s, ein, eout); err != nil {
			b.Fatal(err)
		}
	}, func() {
		if _, err := cpu.Run(s, din, dout); err != nil {
			b.Fatal(err)
		}
	}}
	runs[0]() // resolve residency
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const block = 256
	var wall, cpuNs [2]int64
	var ops [2]int
	i := 0
	mark, _ := threadCPU()
	markWall := time.Now()
	lap := func(phase int) {
		now, _ := threadCPU()
		nowWall := time.Now()
		cpuNs[phase] += now - mark
		wall[phase] += int64(nowWall.Sub(markWall))
		mark, markWall = now, nowWall
	}
	for b.Loop() {
		phase := i / block % 2
		runs[phase]()
		ops[phase]++
		if i++; i%block == 0 {
			lap(phase)
		}
	}
	if i%block != 0 {
		lap(i / block % 2)
	}
	b.StopTimer()
	if ops[1] == 0 { // too few iterations for a direct block: time it alone
		mark, _ = threadCPU()
		markWall = time.Now()
		for range ops[0] {
			runs[1]()
		}
		lap(1)
		ops[1] = ops[0]
	}
	per := func(v [2]int64) float64 {
		return float64(v[0])/float64(ops[0]) - float64(v[1])/float64(ops[1])
	}
	b.ReportMetric(per(wall), "overhead-ns/op")
	b.ReportMetric(float64(wall[1])/float64(ops[1]), "direct-ns/op")
	if _, ok := threadCPU(); ok {
		b.ReportMetric(per(cpuNs), "overhead-cpu-ns/op")
	}
	b.ReportMetric(testing.AllocsPerRun(100, runs[0]), "exec-allocs/op")
	b.ReportMetric(testing.AllocsPerRun(100, runs[1]), "direct-allocs/op")
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

// BenchmarkExecutorOverlap runs bursts of 8 independent ops on two
// backends on separate hardware, each op sleeping 1 ms (a device's
// kernel, which leaves the host free): queued, the Executor prices each
// queue's wait and runs the burst on both at once; synchronous, one op
// at a time. ms/burst is the wall time of a burst, its work included.
func BenchmarkExecutorOverlap(b *testing.B) {
	for _, mode := range []struct {
		name string
		sync bool
	}{{"sync", true}, {"queued", false}} {
		b.Run(mode.name, func(b *testing.B) {
			e := newExec(b, executor.Config{Synchronous: mode.sync},
				&slow{Backend: open(b, "cpu"), d: time.Millisecond}, &slow{Backend: open(b, "cpu1"), d: time.Millisecond})
			s := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{16}, {16}}}
			x := alloc(b, e, kernels.AsBytes(make([]float32, 16)))
			outs := make([]backends.Buffer, 8)
			for i := range outs {
				outs[i], _ = e.Alloc(64)
			}
			burst := func() {
				for _, o := range outs {
					if _, err := e.Run(s, []backends.Buffer{x, x}, o); err != nil {
						b.Fatal(err)
					}
				}
				if err := e.Sync(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			for range 20 { // learn both backends
				burst()
			}
			start := time.Now()
			for b.Loop() {
				burst()
			}
			b.ReportMetric(time.Since(start).Seconds()*1e3/float64(b.N), "ms/burst")
		})
	}
}
