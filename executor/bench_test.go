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
// Only("cpu"), once by cpu's own Run, and once its decision alone (the
// Scheduler's Handle.SelectInto and ObserveRef, as the Executor calls
// them, with the residency it gives). Each iteration is one call, the three taken in turn in blocks
// of 256, so that a busy machine slows them alike. overhead-ns/op is
// the Executor's time per op over the bare call, in wall time; the
// -cpu- figures are in the thread's CPU time (Linux), which waiting for
// a core on a shared machine does not inflate: overhead-cpu-ns/op, and
// own-cpu-ns/op, that less the decision (decide-cpu-ns/op).
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
	sched := e.Scheduler()
	h, err := sched.Handle(s)
	if err != nil {
		b.Fatal(err)
	}
	var res adaptive.Residency // both inputs in host memory, which cpu maps
	res.Add(adaptive.Host|adaptive.Backend(0), 64)
	res.Add(adaptive.Host|adaptive.Backend(0), 64)
	kernel := backends.Timing{Duration: 200 * time.Nanosecond, Clock: backends.WallClock}
	var d adaptive.Decision
	runs := [3]func(){func() { // exec, direct, decide
		if _, err := e.Run(s, ein, eout); err != nil {
			b.Fatal(err)
		}
	}, func() {
		if _, err := cpu.Run(s, din, dout); err != nil {
			b.Fatal(err)
		}
	}, func() {
		if err := h.SelectInto(&d, &res, 0, 0); err != nil {
			b.Fatal(err)
		}
		sched.ObserveRef(&d, kernel)
	}}
	runs[0]() // resolve residency
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const block = 256
	var wall, cpuNs [3]int64
	var ops [3]int
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
		phase := i / block % 3
		runs[phase]()
		ops[phase]++
		if i++; i%block == 0 {
			lap(phase)
		}
	}
	if i%block != 0 {
		lap(i / block % 3)
	}
	b.StopTimer()
	for p := 1; p < 3; p++ {
		if ops[p] == 0 { // too few iterations for this block: time it alone
			mark, _ = threadCPU()
			markWall = time.Now()
			for range ops[0] {
				runs[p]()
			}
			lap(p)
			ops[p] = ops[0]
		}
	}
	per := func(v *[3]int64, p int) float64 { return float64(v[p]) / float64(ops[p]) }
	b.ReportMetric(per(&wall, 0)-per(&wall, 1), "overhead-ns/op")
	b.ReportMetric(per(&wall, 1), "direct-ns/op")
	if _, ok := threadCPU(); ok {
		b.ReportMetric(per(&cpuNs, 0)-per(&cpuNs, 1), "overhead-cpu-ns/op")
		b.ReportMetric(per(&cpuNs, 2), "decide-cpu-ns/op")
		b.ReportMetric(per(&cpuNs, 0)-per(&cpuNs, 1)-per(&cpuNs, 2), "own-cpu-ns/op")
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
