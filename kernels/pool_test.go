package kernels

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPoolCoversOnce checks that Parallel visits every index exactly once,
// for pools of 1 and several threads and sizes around the chunk counts.
func TestPoolCoversOnce(t *testing.T) {
	for _, threads := range []int{1, 2, 5} {
		p := NewPool(threads)
		for _, n := range []int{0, 1, 2, 7, 19, 20, 21, 1000} {
			hits := make([]atomic.Int32, n)
			p.Parallel(n, func(lo, hi int) {
				if lo >= hi {
					t.Errorf("empty chunk [%d, %d)", lo, hi)
				}
				for i := lo; i < hi; i++ {
					hits[i].Add(1)
				}
			})
			for i := range hits {
				if h := hits[i].Load(); h != 1 {
					t.Fatalf("threads=%d n=%d: index %d run %d times", threads, n, i, h)
				}
			}
		}
		p.Close()
	}
}

// TestPoolConcurrentAndNested runs Parallel from many goroutines at once,
// each call nesting another Parallel inside its chunks (a kernel calling a
// parallel gemm): every call must finish with every index visited.
func TestPoolConcurrentAndNested(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for range 50 {
				var sum atomic.Int64
				p.Parallel(10+g, func(lo, hi int) {
					for range hi - lo {
						p.Parallel(16, func(lo, hi int) { sum.Add(int64(hi - lo)) })
					}
				})
				if got := sum.Load(); got != int64(16*(10+g)) {
					t.Errorf("goroutine %d: sum %d, want %d", g, got, 16*(10+g))
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestPoolThreadsAndClose(t *testing.T) {
	if n := NewPool(0).Threads(); n < 1 {
		t.Fatalf("NewPool(0).Threads() = %d", n)
	}
	p := NewPool(4)
	if p.Threads() != 4 {
		t.Fatalf("Threads() = %d, want 4", p.Threads())
	}
	p.Close()
	p.Close() // idempotent
	n := 0
	p.Parallel(10, func(lo, hi int) { n += hi - lo }) // inline after Close: no race on n
	if n != 10 {
		t.Fatalf("after Close covered %d of 10", n)
	}
}

// BenchmarkPoolParallel measures one Parallel call's overhead (waking the
// workers, splitting, waiting) with a trivial body.
func BenchmarkPoolParallel(b *testing.B) {
	p := NewPool(0)
	defer p.Close()
	var sink atomic.Int64
	fn := func(lo, hi int) { sink.Add(int64(hi - lo)) }
	b.ReportAllocs()
	for b.Loop() {
		p.Parallel(64, fn)
	}
}

// BenchmarkPoolGap measures a Parallel call that comes some time after
// the last one (the single-threaded ops of a decode step in between):
// wall time of the call alone, in call-ns/op, for a body of about 1 µs
// per chunk that shares nothing. Right after the last call the workers are
// still polling; past spinFor they have blocked and must be woken.
func BenchmarkPoolGap(b *testing.B) {
	for _, gap := range []time.Duration{0, 200 * time.Microsecond, 2 * spinFor} {
		b.Run(gap.String(), func(b *testing.B) {
			p := NewPool(0)
			defer p.Close()
			chunks := p.Threads() * chunksPerThread
			out := make([]float64, chunks*8) // a cache line per chunk
			fn := func(lo, hi int) {
				for c := lo; c < hi; c++ {
					x := 1.0
					for range 300 {
						x = x*1.0000001 + 1e-9
					}
					out[c*8] = x
				}
			}
			var in time.Duration
			for b.Loop() {
				for t := time.Now(); time.Since(t) < gap; {
				}
				t := time.Now()
				p.Parallel(chunks, fn)
				in += time.Since(t)
			}
			b.ReportMetric(float64(in.Nanoseconds())/float64(b.N), "call-ns/op")
		})
	}
}

// BenchmarkPoolSpread measures whether a parallel loop's chunks really
// run side by side: calls of chunksPerThread chunks a thread, each chunk
// busy for 7 µs, back to back, as a decode step's matmuls come. It
// reports the median and 90th-percentile call (p50-µs, p90-µs) against
// the time the chunks take one after another (serial-µs): near
// serial-µs/threads when every thread works, near serial-µs when the
// caller runs them alone.
func BenchmarkPoolSpread(b *testing.B) {
	p := NewPool(0)
	defer p.Close()
	const chunk = 7 * time.Microsecond
	chunks := p.Threads() * chunksPerThread
	fn := func(lo, hi int) {
		for t := time.Now(); time.Since(t) < time.Duration(hi-lo)*chunk; {
		}
	}
	var calls []time.Duration
	for b.Loop() {
		t := time.Now()
		p.Parallel(chunks, fn)
		calls = append(calls, time.Since(t))
	}
	slices.Sort(calls)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	b.ReportMetric(us(calls[len(calls)/2]), "p50-µs")
	b.ReportMetric(us(calls[len(calls)*9/10]), "p90-µs")
	b.ReportMetric(us(time.Duration(chunks)*chunk), "serial-µs")
}
