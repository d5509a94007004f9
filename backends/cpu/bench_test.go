package cpu

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// benchRun times s on b with inputs already resident, reporting GFLOP/s
// for a matmul and GB/s (bytes read and written) otherwise.
func benchRun(b *testing.B, be backends.Backend, s kernels.Spec) {
	r := rand.New(rand.NewPCG(11, 12))
	in := randInputs(b, r, s)
	bufs := make([]backends.Buffer, len(in))
	for i, d := range in {
		buf, err := be.Alloc(int64(len(d)))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := be.Write(buf, d); err != nil {
			b.Fatal(err)
		}
		bufs[i] = buf
	}
	out, err := be.Alloc(s.OutBytes())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := be.Run(s, bufs, out); err != nil {
			b.Fatal(err)
		}
	}
	sec := b.Elapsed().Seconds()
	w := s.Work()
	if s.Op == kernels.MatMul || s.Op == kernels.QuantizedMatMul {
		b.ReportMetric(float64(w.FLOPs)*float64(b.N)/sec/1e9, "GFLOP/s")
	} else {
		b.ReportMetric(float64(w.Bytes())*float64(b.N)/sec/1e9, "GB/s")
	}
}

func benchBackend(b *testing.B, name string, opts Options) *Backend {
	be, err := New(name, opts.WithLogger(nil))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.Close() })
	return be
}

func square(n int) kernels.Spec {
	return kernels.Spec{Op: kernels.MatMul, In: []kernels.Shape{{n, n}, {n, n}}}
}

// BenchmarkMatMul measures a 1024³ f32 matmul through the backend on
// every core: the CBLAS path (which must load, see cblasOrSkip) and the
// gonum path beside it.
func BenchmarkMatMul(b *testing.B) {
	b.Run("1024x1024x1024", func(b *testing.B) {
		cblasOrSkip(b)
		benchRun(b, benchBackend(b, "cpu", DefaultOptions()), square(1024))
	})
	b.Run("gonum/1024x1024x1024", func(b *testing.B) {
		benchRun(b, benchBackend(b, "cpu", DefaultOptions().WithGonum(true)), square(1024))
	})
}

// BenchmarkCrossover runs the same op on "cpu1" (one worker) and "cpu"
// (every core) across sizes: the size from which "cpu" wins is where
// splitting an op starts to pay on this machine.
func BenchmarkCrossover(b *testing.B) {
	type backendDef struct {
		name    string
		threads int
	}
	defs := []backendDef{{"cpu1", 1}, {"cpu", runtime.NumCPU()}}
	bes := make([]*Backend, len(defs))
	for i, d := range defs {
		bes[i] = benchBackend(b, d.name, DefaultOptions().WithThreads(d.threads))
	}
	for _, n := range []int{16, 32, 64, 128, 256, 512, 1024} {
		for i, be := range bes {
			b.Run(fmt.Sprintf("MatMul/%dx%dx%d/%s", n, n, n, defs[i].name), func(b *testing.B) {
				benchRun(b, be, square(n))
			})
		}
	}
	for _, rows := range []int{1, 4, 16, 64, 256, 1024, 4096} {
		s := kernels.Spec{Op: kernels.Softmax, In: []kernels.Shape{{rows, 4096}}}
		for i, be := range bes {
			b.Run(fmt.Sprintf("Softmax/%dx4096/%s", rows, defs[i].name), func(b *testing.B) {
				benchRun(b, be, s)
			})
		}
	}
}

// BenchmarkDecode measures the single-row products of token-by-token
// decoding on one thread, through the path the backend loaded (sgemv for
// a CBLAS that has it) and through gonum.
func BenchmarkDecode(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	paths := []blasPath{cblasOrSkip(b), selectPath(true)}
	for _, sh := range [][2]int{{512, 256}, {4096, 4096}} {
		k, n := sh[0], sh[1]
		x, w, y := randSlice(r, k), randSlice(r, k*n), make([]float32, n)
		for _, p := range paths {
			b.Run(fmt.Sprintf("%s/1x%dx%d", p.runtime, k, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					p.serial(1, n, k, x, k, w, n, y, n)
				}
				b.ReportMetric(2*float64(n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkMatMulDirect times a 1024³ matmul through the backend on every
// core and through the loaded CBLAS called directly with its own threads
// set to the same count, in alternating blocks: per iteration, matmulBlock
// products one way, then matmulBlock the other, the first of each block
// not counted (the other side's threads are still spinning down). It
// reports each side's median and "x-direct", the direct median over the
// backend's: ≥ 0.95 is the target (BENCHMARKS.md).
func BenchmarkMatMulDirect(b *testing.B) {
	p := cblasOrSkip(b)
	if p.threads == nil {
		b.Skipf("%s has no thread-count setter", p.desc)
	}
	be := benchBackend(b, "cpu", DefaultOptions())
	t := be.Info().Threads
	const n, matmulBlock = 1024, 4
	s := square(n)
	in := randInputs(b, rand.New(rand.NewPCG(11, 12)), s)
	bufs := make([]backends.Buffer, len(in))
	for i, d := range in {
		buf, err := be.Alloc(int64(len(d)))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := be.Write(buf, d); err != nil {
			b.Fatal(err)
		}
		bufs[i] = buf
	}
	out, err := be.Alloc(s.OutBytes())
	if err != nil {
		b.Fatal(err)
	}
	x, y, z := kernels.AsF32(in[0]), kernels.AsF32(in[1]), make([]float32, n*n)
	defer p.threads(1)
	var viaBackend, direct []time.Duration
	for b.Loop() {
		for i := range matmulBlock {
			t0 := time.Now()
			if _, err := be.Run(s, bufs, out); err != nil {
				b.Fatal(err)
			}
			if i > 0 {
				viaBackend = append(viaBackend, time.Since(t0))
			}
		}
		p.threads(t)
		for i := range matmulBlock {
			t0 := time.Now()
			p.serial(n, n, n, x, n, y, n, z, n)
			if i > 0 {
				direct = append(direct, time.Since(t0))
			}
		}
		p.threads(1)
	}
	median := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2])
	}
	mb, md := median(viaBackend), median(direct)
	b.ReportMetric(2*n*n*n/mb, "backend-GFLOP/s")
	b.ReportMetric(2*n*n*n/md, "direct-GFLOP/s")
	b.ReportMetric(md/mb, "x-direct")
}

// BenchmarkQueuedChain runs a chain of 16 small dependent ops (Scale of
// 4096 floats, x → y → x …) on a two-thread backend: synchronously (Run
// after Run), and queued (RunAsync after RunAsync, then one Wait). ns/op
// is the chain's wall time; caller-ns/op, for the queued chain, the time
// until the last RunAsync returns: what the host thread spends before it
// is free to launch other work.
func BenchmarkQueuedChain(b *testing.B) {
	const n, ops = 4096, 16
	s := kernels.Spec{Op: kernels.Scale, In: []kernels.Shape{{n}}, Params: kernels.Params{Scale: 1.0001}}
	for _, mode := range []string{"sync", "queued"} {
		b.Run(mode, func(b *testing.B) {
			be := benchBackend(b, "cpu-chain", DefaultOptions().WithThreads(2))
			x, _ := be.Alloc(n * 4)
			y, _ := be.Alloc(n * 4)
			bufs := [2][]backends.Buffer{{x}, {y}}
			var caller time.Duration
			for b.Loop() {
				start := time.Now()
				var last backends.Event
				for i := range ops {
					var err error
					if mode == "sync" {
						_, err = be.Run(s, bufs[i%2], bufs[1-i%2][0])
					} else {
						last, err = be.RunAsync(s, bufs[i%2], bufs[1-i%2][0], nil)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				if last != nil {
					caller += time.Since(start)
					if _, err := last.Wait(); err != nil {
						b.Fatal(err)
					}
				}
			}
			if mode == "queued" {
				b.ReportMetric(float64(caller.Nanoseconds())/float64(b.N), "caller-ns/op")
			}
		})
	}
}
