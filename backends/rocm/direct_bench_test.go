//go:build cgo

package rocm

import (
	"runtime"
	"testing"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
	"golang.org/x/sys/unix"
)

// threadCPU is the CPU time the calling OS thread has run, in ns.
func threadCPU() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return ts.Nano()
}

// BenchmarkFakeGatheredDirect is the device's own host cost of a
// decode-like chain of 64 small ops gathered and replayed (Record, 64
// RunAsync each after the op before, Flush, a Read), on the fake
// runtime; every figure is per op. ns/kernel is wall clock, most of it
// the fake runtime's thread that runs each kernel; cpu-ns/kernel the
// calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID: blind to waits for
// a core on a shared machine), the Go side and the fake's enqueue calls;
// B/kernel and allocs/kernel the Go side's alone.
func BenchmarkFakeGatheredDirect(b *testing.B) {
	d, err := Open(fakeOptions(&testing.T{}, "blas"))
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	benchGatheredDirect(b, d)
}

// BenchmarkGPUGatheredDirect is BenchmarkFakeGatheredDirect on the real
// device (skipped without one): cpu-ns/kernel is then the host's own
// cost of a gathered op, the runtime's calls included.
func BenchmarkGPUGatheredDirect(b *testing.B) {
	benchGatheredDirect(b, openGPU(b))
}

// directChain returns a step of ops Scale ops chained on d alone, each
// after the last, between bufs, gathered or not, read back at its end:
// the device's own share of the benchmarks that run the same step
// through the Executor.
func directChain(b *testing.B, d *Device, sc kernels.Spec, bufs [2]backends.Buffer, ops int, gathered bool) func() {
	out := make([]byte, 1024)
	prev := []backends.Event{nil}
	return func() {
		if gathered {
			if err := d.Record(); err != nil {
				b.Fatal(err)
			}
		}
		for i := range ops {
			ev, err := d.RunAsync(sc, bufs[i%2:i%2+1], bufs[1-i%2], prev[:min(i, 1)])
			if err != nil {
				b.Fatal(err)
			}
			prev[0] = ev
		}
		if err := d.Flush(); err != nil {
			b.Fatal(err)
		}
		if _, err := d.Read(out, bufs[ops%2]); err != nil {
			b.Fatal(err)
		}
	}
}

// benchGatheredDirect is BenchmarkFakeGatheredDirect on d.
func benchGatheredDirect(b *testing.B, d *Device) {
	const ops = 64
	var err error
	sc := kernels.Spec{Op: kernels.Scale, In: []kernels.Shape{{256}}, Params: kernels.Params{Scale: 1}}
	var bufs [2]backends.Buffer
	for i := range bufs {
		if bufs[i], err = d.Alloc(1024); err != nil {
			b.Fatal(err)
		}
		if _, err := d.Write(bufs[i], make([]byte, 1024)); err != nil {
			b.Fatal(err)
		}
	}
	step := directChain(b, d, sc, bufs, ops, true)
	step()
	step()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu0 := threadCPU()
	for b.Loop() {
		step()
	}
	cpu := threadCPU() - cpu0
	runtime.ReadMemStats(&after)
	n := float64(b.N * ops)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/kernel")
	b.ReportMetric(float64(cpu)/n, "cpu-ns/kernel")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "B/kernel")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "allocs/kernel")
}
