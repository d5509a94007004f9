package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Pool is a bounded pool of long-lived worker goroutines that run the
// chunks of a parallel loop. An idle worker parks (see idleSpin): a pool
// without work burns no CPU. The goroutine calling Parallel works too, and
// claims chunks from the same counter as the workers, so a call always
// finishes even when every worker is busy: Parallel may be called
// concurrently and from inside another Parallel's fn (a parallel gemm
// called by a parallel kernel) without deadlock. Pool is safe for
// concurrent use.
type Pool struct {
	threads int
	jobs    chan *job
	closed  atomic.Bool
	once    sync.Once

	idleSpin  time.Duration // how long an idle worker polls before it parks
	parked    atomic.Int32  // workers blocked on jobs
	idlePolls atomic.Int64  // polls of jobs by idle workers, in all
}

// ranger is one parallel loop body: run covers the indices [lo, hi).
type ranger interface{ run(lo, hi int) }

// funcRanger adapts a func to ranger without allocating (a func value is
// pointer-shaped).
type funcRanger func(lo, hi int)

func (f funcRanger) run(lo, hi int) { f(lo, hi) }

// job is one Parallel call as the workers see it. It is recycled through
// jobPool once the caller and every worker that was handed it let go
// (refs), so a worker that dequeues it late never sees a reused job.
type job struct {
	task   ranger
	n      int
	chunks int
	next   atomic.Int64
	done   atomic.Int64 // chunks finished, which the caller spins on
	refs   atomic.Int32
	wg     sync.WaitGroup
}

var jobPool = sync.Pool{New: func() any { return new(job) }}

// chunksPerThread is how many chunks each thread gets on average: more
// than one so that a slow or preempted thread does not hold up the loop.
const chunksPerThread = 4

// NewPool returns a pool of threads workers (runtime.NumCPU() when
// threads ≤ 0). The calling goroutine counts as one, so threads-1
// goroutines are started; a pool of 1 runs every loop inline.
func NewPool(threads int) *Pool { return newPool(threads, idleSpin) }

// newPool is NewPool with the idle workers' poll window: the benchmarks
// compare windows.
func newPool(threads int, spin time.Duration) *Pool {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	p := &Pool{threads: threads, jobs: make(chan *job, threads), idleSpin: spin}
	for range threads - 1 {
		go p.worker()
	}
	return p
}

// Threads returns the number of threads the pool runs loops on.
func (p *Pool) Threads() int { return p.threads }

// Parallel splits [0, n) into contiguous chunks, runs fn on each (fn(lo,
// hi) covers lo ≤ i < hi) on the pool's workers and the calling goroutine,
// and returns when every chunk is done. Chunks may run in any order and
// concurrently; fn must not panic. After Close, Parallel runs fn inline.
// Parallel allocates nothing itself; a closure fn that captures variables
// is allocated by the caller.
func (p *Pool) Parallel(n int, fn func(lo, hi int)) {
	p.run(n, funcRanger(fn))
}

// run is Parallel for a ranger: kernels pass pooled task structs, which
// reach the workers without a per-call closure.
func (p *Pool) run(n int, t ranger) {
	if n <= 0 {
		return
	}
	if p.threads == 1 || n == 1 || p.closed.Load() {
		t.run(0, n)
		return
	}
	chunks := min(n, p.threads*chunksPerThread)
	j := jobPool.Get().(*job)
	j.task, j.n, j.chunks = t, n, chunks
	j.next.Store(0)
	j.done.Store(0)
	j.refs.Store(1)
	j.wg.Add(chunks)
	for range min(chunks-1, p.threads-1) {
		j.refs.Add(1)
		select {
		case p.jobs <- j:
		default:
			j.refs.Add(-1) // every worker busy: the caller does the rest
		}
	}
	j.work()
	j.wait(callerSpin)
	j.release()
}

// callerSpin is how long the caller of a parallel loop, its own chunks
// done, polls for the workers' chunks before it blocks. Blocking hands
// its wake-up to the worker that finishes last, and the runtime queues
// the woken goroutine on that worker's processor, behind the polling
// worker itself, while the caller's own processor goes idle: the next
// calls then run their chunks one after another on one processor
// (BenchmarkPoolSpread; figures in docs/TUNING.md). A chunk takes
// microseconds, so the poll seldom lasts long.
const callerSpin = 200 * time.Microsecond

// wait returns once every chunk of j is done, polling for up to spin
// before it blocks.
func (j *job) wait(spin time.Duration) {
	start := time.Now()
	for i := 0; j.done.Load() < int64(j.chunks); i++ {
		if i%64 == 63 && time.Since(start) > spin {
			break
		}
	}
	j.wg.Wait()
}

// work claims and runs chunks until none is left.
func (j *job) work() {
	for {
		c := int(j.next.Add(1) - 1)
		if c >= j.chunks {
			return
		}
		j.task.run(c*j.n/j.chunks, (c+1)*j.n/j.chunks)
		j.done.Add(1)
		j.wg.Done()
	}
}

func (j *job) release() {
	if j.refs.Add(-1) == 0 {
		j.task = nil
		jobPool.Put(j)
	}
}

func (p *Pool) worker() {
	for {
		j := p.next()
		if j == nil {
			return
		}
		j.work()
		j.wait(othersSpin)
		j.release()
	}
}

// othersSpin is how long a worker whose chunks are done polls for the
// chunks others are still running before it blocks until they finish.
// Its polls keep a goroutine runnable while the caller may sit in a long
// cgo call (a BLAS panel of a large matmul): the runtime then hands the
// caller's processor to another thread, and three threads share two
// cores until the call returns, which is why a worker does not poll for
// the next job instead (backends/cpu BenchmarkMatMul; docs/TUNING.md).
// 200 µs covers the pure-Go chunks of a decode step at batch 16, which a
// worker that blocked would have to be woken for at the next call. The
// next job can only come once this one is done, unless another goroutine
// calls Parallel meanwhile, which then waits no longer than this job's
// last chunk.
const othersSpin = 200 * time.Microsecond

// idleSpin is how long an idle worker polls the queue for the next job
// before it parks (blocks on the queue): none. A poll saves the wake-up
// of a parked worker for an op that follows within the window, but takes
// a core for the window after every op from whatever else the process
// (the caller's single-threaded ops, another backend's queue, the host
// thread launching GPU work) or the machine runs. On a loaded 2-core
// machine, kernels BenchmarkPoolIdle found no window that pays: a step
// of serial work and a parallel call took as long or longer with a
// 50 µs poll, and 1.5–2× as long with the 5 ms poll the pool once had.
const idleSpin = 0

// next returns the next job (nil: the pool is closing), polling for
// p.idleSpin (none but in benchmarks) before it parks. Polls yield
// (runtime.Gosched), so goroutines of this process that need the
// processor get it.
func (p *Pool) next() *job {
	if p.idleSpin > 0 {
		start := time.Now()
		for i := 0; ; i++ {
			// len reads the queue without its lock, which a poll by
			// receive would take, and contend for with Parallel's send.
			if len(p.jobs) > 0 {
				select {
				case j := <-p.jobs:
					return j
				default: // another worker took it
				}
			}
			p.idlePolls.Add(1)
			if i%16 == 15 && time.Since(start) > p.idleSpin {
				break
			}
			runtime.Gosched()
		}
	}
	p.parked.Add(1)
	j := <-p.jobs
	p.parked.Add(-1)
	return j
}

// Idle reports the pool's idle state: how many workers are parked now
// (blocked on the queue, burning no CPU), and how many times in all an
// idle worker has polled the queue instead. A quiet pool has every
// worker parked and a poll count that no longer moves
// (TestPoolParksWhenIdle).
func (p *Pool) Idle() (parked int, polls int64) {
	return int(p.parked.Load()), p.idlePolls.Load()
}

// Close stops the workers; later Parallel calls run inline. Close is
// idempotent and may be called while Parallel calls are running (they
// finish on their own goroutines).
func (p *Pool) Close() {
	p.once.Do(func() {
		p.closed.Store(true)
		for range p.threads - 1 {
			p.jobs <- nil
		}
	})
}
