package adaptive

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// benchSpecs returns n specs in n distinct buckets: every catalogue bucket
// that random shapes reach (MatMul, QuantizedMatMul, element-wise and
// reduction ops across sizes), topped up with opaque ops of distinct
// names, as a replayed trace has.
func benchSpecs(n int) []kernels.Spec {
	r := rand.New(rand.NewPCG(1, 1))
	seen := map[string]bool{}
	var specs []kernels.Spec
	add := func(s kernels.Spec) {
		name := kernels.BucketName(s)
		if name != "" && !seen[name] && len(specs) < n {
			seen[name] = true
			specs = append(specs, s)
		}
	}
	dim := func() int { return 1 << r.IntN(13) * (1 + r.IntN(3)) }
	for range 20000 {
		m, k, c := dim(), 32*(1+r.IntN(128)), dim()
		add(matmul(m, k, c))
		add(kernels.Spec{Op: kernels.QuantizedMatMul, DType: kernels.Q8_0 + kernels.DType(r.IntN(2)), In: []kernels.Shape{{m, k}, {c, k}}})
		sh := kernels.Shape{m, c}
		for _, op := range []kernels.Op{kernels.Add, kernels.Mul, kernels.SwiGLU} {
			add(kernels.Spec{Op: op, DType: kernels.F32, In: []kernels.Shape{sh, sh}})
		}
		for _, op := range []kernels.Op{kernels.Softmax, kernels.Scale, kernels.SiLU, kernels.GELU, kernels.Transpose} {
			add(kernels.Spec{Op: op, DType: kernels.F32, In: []kernels.Shape{sh}})
		}
		add(kernels.Spec{Op: kernels.RMSNorm, DType: kernels.F32, In: []kernels.Shape{sh, {c}}})
	}
	for i := 0; len(specs) < n; i++ {
		add(kernels.Spec{Op: kernels.Opaque, DType: kernels.F32, In: []kernels.Shape{{1 + i%4096}},
			Params: kernels.Params{Name: fmt.Sprintf("kernel_%d", i), Bytes: int64(1) << (10 + i%20)}})
	}
	return specs
}

// cpuTimer reports a serial benchmark's CPU time per op (cpu-ns/op)
// from the thread's CPU clock (Linux; threadCPU), which time spent
// waiting for a core on a machine shared with other work does not
// inflate. Call it before the loop and its result after.
func cpuTimer(b *testing.B) func() {
	runtime.LockOSThread()
	start, ok := threadCPU()
	return func() {
		end, _ := threadCPU()
		runtime.UnlockOSThread()
		if ok && b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

// parallelCPUTimer reports a parallel benchmark's CPU time per op
// (cpu-ns/op) from the process's CPU clock (Linux; processCPU): every
// goroutine's, summed, so that on an idle machine it is the wall time per
// op times the goroutines, and above the serial case's cpu-ns/op by what
// the goroutines cost each other (shared cache lines, lock waits that
// spin). Time spent waiting for a core on a shared machine does not
// inflate it. Call it before b.RunParallel and its result after.
func parallelCPUTimer(b *testing.B) func() {
	start, ok := processCPU()
	return func() {
		end, _ := processCPU()
		if ok && b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

// BenchmarkSelectObserve measures one Select plus one Observe (DESIGN.md §
// The data path; 0 allocs) over 10,000 buckets, with the inputs'
// residency given, serially and from GOMAXPROCS goroutines, by spec and
// by handle (Handle.Select, one handle per op site and goroutine), and
// over a million shapes, each its own bucket, serially (1M), reporting
// the heap the scheduler holds per bucket (B/bucket). Each loop cycles
// through the buckets in order, as an inference loop replays its ops
// (parallel goroutines start at different points).
func BenchmarkSelectObserve(b *testing.B) {
	b.Run("1M", benchSelectObserve1M)
	const buckets = 10000
	specs := benchSpecs(buckets)
	if len(specs) != buckets {
		b.Fatalf("%d specs", len(specs))
	}
	res := make([]Residency, len(specs))
	for i, sp := range specs {
		res[i].Add(Host, sp.InBytes(0))
		if len(sp.In) > 1 {
			res[i].Add(Backend(1), sp.InBytes(1))
		}
	}
	for _, nb := range []int{2, 4} {
		bes := []backends.Backend{
			newFake("cpu", backends.CPU, cpuNominal),
			newFake("gpu", backends.GPU, gpuNominal),
			newFake("cpu1", backends.CPU, backends.Nominal{GFLOPS: 20, MemGBps: 20, DispatchUs: 1}),
			newFake("gpu1", backends.GPU, gpuNominal),
		}[:nb]
		// Durations per spec and backend, fixed ahead.
		dur := make([][4]backends.Timing, len(specs))
		r := rand.New(rand.NewPCG(2, 2))
		for i := range dur {
			for a := range dur[i] {
				dur[i][a] = us(1 + 1000*r.Float64())
			}
		}
		s, err := New(Config{Backends: bes, Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		for i, sp := range specs { // warm the shape cache: every bucket exists
			d, err := s.Select(sp, res[i])
			if err != nil {
				b.Fatal(err)
			}
			s.Observe(d, dur[i][d.Backend])
		}
		b.Run(fmt.Sprintf("%dbackends/serial", nb), func(b *testing.B) {
			b.ReportAllocs()
			done := cpuTimer(b)
			i := 0
			for b.Loop() {
				j := i % buckets
				d, _ := s.Select(specs[j], res[j])
				s.Observe(d, dur[j][d.Backend])
				i++
			}
			done()
		})
		b.Run(fmt.Sprintf("%dbackends/parallel", nb), func(b *testing.B) {
			b.ReportAllocs()
			done := parallelCPUTimer(b)
			var seed atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				i := int(seed.Add(1)) * 104729
				for pb.Next() {
					j := i % buckets
					d, _ := s.Select(specs[j], res[j])
					s.Observe(d, dur[j][d.Backend])
					i++
				}
			})
			done()
		})
		handles := make([][]*Handle, runtime.GOMAXPROCS(0))
		for g := range handles {
			handles[g] = make([]*Handle, buckets)
			for j, sp := range specs {
				if handles[g][j], err = s.Handle(sp); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.Run(fmt.Sprintf("handle/%dbackends/serial", nb), func(b *testing.B) {
			b.ReportAllocs()
			done := cpuTimer(b)
			i := 0
			var d Decision
			for b.Loop() {
				j := i % buckets
				handles[0][j].SelectInto(&d, &res[j], 0, 0)
				s.ObserveRef(&d, dur[j][d.Backend])
				i++
			}
			done()
		})
		b.Run(fmt.Sprintf("handle/%dbackends/parallel", nb), func(b *testing.B) {
			b.ReportAllocs()
			done := parallelCPUTimer(b)
			var seed atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				g := int(seed.Add(1))
				hs := handles[(g-1)%len(handles)]
				i := g * 104729
				var d Decision
				for pb.Next() {
					j := i % buckets
					hs[j].SelectInto(&d, &res[j], 0, 0)
					s.ObserveRef(&d, dur[j][d.Backend])
					i++
				}
			})
			done()
		})
	}
}

// benchSelectObserve1M is BenchmarkSelectObserve's million shapes: opaque
// ops of one family ("kernel[i]"), each shape its own bucket, 2 backends.
// B/bucket is the heap the scheduler holds once every bucket has been
// selected and observed, over the buckets.
func benchSelectObserve1M(b *testing.B) {
	const buckets = 1_000_000
	specs, res, dur := opaqueSpecs(buckets)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := setUpOpaque(b, specs, res, dur)
	runtime.GC()
	runtime.ReadMemStats(&after)
	perBucket := float64(after.HeapAlloc-before.HeapAlloc) / buckets
	b.Run("2backends/serial", func(b *testing.B) {
		b.ReportAllocs()
		done := cpuTimer(b)
		i := 0
		for b.Loop() {
			j := i % buckets
			d, _ := s.Select(specs[j], res[j])
			s.Observe(d, dur[j][d.Backend])
			i++
		}
		done()
		b.ReportMetric(perBucket, "B/bucket")
	})
	runtime.KeepAlive(s)
}

// opaqueSpecs returns the 1M case's first n shapes: opaque ops of one
// family, each shape its own bucket, the residency of their input and
// each's duration on 2 backends.
func opaqueSpecs(n int) ([]kernels.Spec, []Residency, [][2]backends.Timing) {
	specs := make([]kernels.Spec, n)
	res := make([]Residency, n)
	dur := make([][2]backends.Timing, n)
	r := rand.New(rand.NewPCG(3, 3))
	for i := range specs {
		specs[i] = kernels.Spec{Op: kernels.Opaque, DType: kernels.F32, In: []kernels.Shape{{1 + i%4096}},
			Params: kernels.Params{Name: fmt.Sprintf("kernel[%d]", i), Bytes: int64(1) << (10 + i%20)}}
		res[i].Add(Host, specs[i].InBytes(0))
		for a := range dur[i] {
			dur[i][a] = us(1 + 1000*r.Float64())
		}
	}
	return specs, res, dur
}

// setUpOpaque returns a Scheduler of 2 backends that has selected and
// observed each of specs once, in order.
func setUpOpaque(b *testing.B, specs []kernels.Spec, res []Residency, dur [][2]backends.Timing) *Scheduler {
	s, err := New(Config{Backends: []backends.Backend{newFake("cpu", backends.CPU, cpuNominal), newFake("gpu", backends.GPU, gpuNominal)}, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	for i, sp := range specs {
		d, err := s.Select(sp, res[i])
		if err != nil {
			b.Fatal(err)
		}
		s.Observe(d, dur[i][d.Backend])
	}
	return s
}

// BenchmarkSelectObserveYoung measures Select+Observe by spec, serially,
// over the 1M case's shapes while their buckets are young: the first
// youngPasses passes after the set-up pass, from a new Scheduler each
// iteration (its set-up untimed), at 10,000 and 1,000,000 shapes
// (ns/decision; its allocations are the family's sums of each size
// class, made at the class's first publication, prior.Family). A young
// bucket draws every arm and re-derives its priors (prior.go), where
// BenchmarkSelectObserve's 10,000 buckets are settled when it measures
// them and its 1M case's (about ten passes in 5 s) are as young as here:
// of what that 1M case costs over those 10,000 buckets, this 10k case
// less them is youth, and this 1M case less this 10k case memory.
func BenchmarkSelectObserveYoung(b *testing.B) {
	const youngPasses = 10
	for _, c := range []struct {
		name string
		n    int
	}{{"10k", 10_000}, {"1M", 1_000_000}} {
		n := c.n
		b.Run(c.name+"/2backends/serial", func(b *testing.B) {
			specs, res, dur := opaqueSpecs(n)
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				s := setUpOpaque(b, specs, res, dur)
				b.StartTimer()
				for range youngPasses {
					for j := range specs {
						d, _ := s.Select(specs[j], res[j])
						s.Observe(d, dur[j][d.Backend])
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*youngPasses*n), "ns/decision")
		})
	}
}

// BenchmarkMemoryFloor is the memory floor under BenchmarkSelectObserve's
// 1M case: per op, one read of a word at a hashed position of an index
// of twice as many words as buckets (the shape cache's probe, there of
// 4-byte words, here of 8: this floor's index is twice the bytes, so its
// figure bounds memory's share from above), then one
// word of each 64-byte line of the op's 1 KiB block (about the heap one
// bucket holds, B/bucket), the blocks walked in order as the slabs are,
// for 10,000 and 1,000,000 blocks; no arithmetic beyond a sum, and each
// op's reads wait on the last op's, as one decision's wait on the one
// before (its instructions fill the core's window). Its 1M figure less
// its 10k one is what memory alone adds to a decision at a million
// shapes.
func BenchmarkMemoryFloor(b *testing.B) {
	const block = 1024
	for _, n := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("%d", n), func(b *testing.B) {
			index := make([]uint64, 1<<bits.Len(uint(2*n-1)))
			for i := range index {
				index[i] = uint64(i)
			}
			blocks := make([]byte, n*block)
			for i := range blocks {
				blocks[i] = byte(i)
			}
			mask := uint64(len(index) - 1)
			var sum uint64
			done := cpuTimer(b)
			j := 0
			for b.Loop() {
				// sum>>63 is 0, but the loads wait on it: one op's
				// reads start after the last op's, as a decision's do.
				w := index[mum(uint64(j)+sum>>63, 0x9e3779b97f4a7c15)&mask]
				sum += w
				o := j*block + int(w>>63)
				blk := blocks[o : o+block]
				for l := 0; l < block; l += 64 {
					sum += uint64(blk[l])
				}
				if j++; j == n {
					j = 0
				}
			}
			done()
			runtime.KeepAlive(sum)
		})
	}
}
