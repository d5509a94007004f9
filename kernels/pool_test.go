package kernels

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
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

// TestPoolParksWhenIdle checks that idle workers park: once a pool's
// calls are done, every worker ends up blocked on the queue, and no
// worker ever polled it (the default window, idleSpin, is none).
func TestPoolParksWhenIdle(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	chunks, fn := gapBody(p)
	for range 20 {
		p.Parallel(chunks, fn)
	}
	// The bound only ends a failing test: a parking worker gets there in
	// microseconds. A stale job still queued (one a busy worker missed)
	// wakes a worker that already counted itself parked.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if parked, _ := p.Idle(); parked == 2 && len(p.jobs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			parked, _ := p.Idle()
			t.Fatalf("%d of 2 workers parked after 10 s idle", parked)
		}
	}
	if _, polls := p.Idle(); polls != 0 {
		t.Errorf("idle workers polled the queue %d times, want 0: they park at once", polls)
	}
	q := newPool(3, time.Millisecond)
	defer q.Close()
	q.Parallel(chunks, fn)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, polls := q.Idle(); polls > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a pool with a poll window never polled: the counter does not count")
		}
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

// gapBody returns a parallel loop body of about 1 µs per chunk that
// shares nothing, and its chunk count for p.
func gapBody(p *Pool) (int, func(lo, hi int)) {
	chunks := p.Threads() * chunksPerThread
	out := make([]float64, chunks*8) // a cache line per chunk
	return chunks, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			x := 1.0
			for range 300 {
				x = x*1.0000001 + 1e-9
			}
			out[c*8] = x
		}
	}
}

// BenchmarkPoolIdle measures both sides of the idle workers' poll
// window (idleSpin). Each iteration is a step: serial work on the caller
// (a single-threaded op of a decode step; serial=N is its rough length
// on a quiet core), then a Parallel call, for pools that park at once
// (spin=0, the default), poll for 50 µs, or poll for 5 ms (the window before
// parking was introduced). ns/op is the step's wall time, call-ns/op the
// Parallel call's alone (what a parked worker's wake-up adds), and
// cpu-ns/op the process's CPU time per step (getrusage): a polling
// worker takes its CPU from the caller's serial work, from other
// backends and from other processes.
func BenchmarkPoolIdle(b *testing.B) {
	for _, spin := range []time.Duration{0, 50 * time.Microsecond, 5 * time.Millisecond} {
		for _, serial := range []int{5, 30, 300} {
			b.Run(fmt.Sprintf("spin=%v/serial=%dµs", spin, serial), func(b *testing.B) {
				p := newPool(0, spin)
				defer p.Close()
				chunks, fn := gapBody(p)
				var call time.Duration
				x := 1.0
				cpu0 := processCPU()
				for b.Loop() {
					for range serial * 300 { // about 1 µs per 300 on a quiet core
						x = x*1.0000001 + 1e-9
					}
					t := time.Now()
					p.Parallel(chunks, fn)
					call += time.Since(t)
				}
				cpu := processCPU() - cpu0
				b.ReportMetric(float64(call.Nanoseconds())/float64(b.N), "call-ns/op")
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
				sinkF = x
			})
		}
	}
}

var sinkF float64

// processCPU returns the user and system CPU time of the process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
