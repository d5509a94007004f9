package executor_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/executor"
	"github.com/adaptsched/adaptsched/kernels"
)

// TestQueuedWriteWaitsForReaders: Write and Free of a tensor that queued
// ops still read wait for them (DESIGN.md § Queued execution, Ordering),
// so those ops read the value they were queued with: y = x·w on a device
// whose work is delayed, z = y+x on the CPU after it, then x is
// overwritten; u = x·w on the device, then x is freed. Once freed, x is
// refused by Read, Write and Run, and a second Free does nothing.
func TestQueuedWriteWaitsForReaders(t *testing.T) {
	const n = 64
	gpu := newFakeQueuer(t, open(t, "sim:h100"), 2*time.Millisecond, 3)
	e := newExec(t, executor.Config{Placer: mulOn(1)}, open(t, "cpu"), gpu)
	mul := kernels.Spec{Op: kernels.Mul, In: []kernels.Shape{{n}, {n}}}
	add := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{n}, {n}}}
	xs := f32s(n, func(i int) float32 { return float32(i) })
	ws := f32s(n, func(i int) float32 { return float32(i%5 + 1) })
	x, w := alloc(t, e, kernels.AsBytes(xs)), alloc(t, e, kernels.AsBytes(ws))
	y, _ := e.Alloc(4 * n)
	z, _ := e.Alloc(4 * n)
	u, _ := e.Alloc(4 * n)
	run := func(s kernels.Spec, a, b, out backends.Buffer) {
		t.Helper()
		if _, err := e.Run(s, []backends.Buffer{a, b}, out); err != nil {
			t.Fatal(err)
		}
	}
	run(mul, x, w, y) // the device
	run(add, y, x, z) // the CPU, in place in host memory, after y's read
	if _, err := e.Write(x, kernels.AsBytes(f32s(n, func(int) float32 { return -1 }))); err != nil {
		t.Fatal(err)
	}
	run(mul, x, w, u) // the device, on x's new value
	x.Free()
	for i, v := range readF32(t, e, z) {
		if want := xs[i]*ws[i] + xs[i]; v != want {
			t.Fatalf("z[%d] = %v, want %v: a queued op read x after Write", i, v, want)
		}
	}
	for i, v := range readF32(t, e, u) {
		if want := -ws[i]; v != want {
			t.Fatalf("u[%d] = %v, want %v: a queued op read x after Free", i, v, want)
		}
	}
	x.Free()
	buf := make([]byte, 4*n)
	if _, err := e.Read(buf, x); !errors.Is(err, executor.ErrBadTensor) {
		t.Errorf("Read of a freed tensor: %v", err)
	}
	if _, err := e.Write(x, buf); !errors.Is(err, executor.ErrBadTensor) {
		t.Errorf("Write of a freed tensor: %v", err)
	}
	if _, err := e.Run(mul, []backends.Buffer{x, w}, u); !errors.Is(err, executor.ErrBadTensor) {
		t.Errorf("Run reading a freed tensor: %v", err)
	}
	settle(t, e)
}

// TestQueuedConcurrentFailures runs chains from several goroutines over
// shared weights on the CPU and a device that queues work and fails one
// op transiently (run it with -race): every result is right, Run and
// Sync report nothing, and each op is counted and observed once.
func TestQueuedConcurrentFailures(t *testing.T) {
	gpu := newFakeQueuer(t, open(t, "sim:h100"), 50*time.Microsecond, 6)
	gpu.failAt = 7
	e := newExec(t, executor.Config{Strategy: adaptive.GPUPreferred}, open(t, "cpu"), gpu)
	c := newChain(t, rand.New(rand.NewPCG(12, 13)), 9, 4, 64)
	ws := make([]backends.Buffer, len(c.ws))
	for i, w := range c.ws {
		ws[i] = alloc(t, e, w)
	}
	const workers = 4
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for g := range workers {
		wg.Go(func() {
			x, err := e.Alloc(int64(len(c.x)))
			if err == nil {
				_, err = e.Write(x, c.x)
			}
			prev := x
			for i, op := range c.ops {
				if err != nil {
					break
				}
				var out backends.Buffer
				if out, err = e.Alloc(int64(len(c.want[i]))); err == nil {
					_, err = e.Run(c.specOf(op), []backends.Buffer{prev, ws[i]}, out)
				}
				prev = out
			}
			if err == nil {
				got := make([]byte, prev.Size())
				if _, err = e.Read(got, prev); err == nil {
					err = near(kernels.F32, got, c.want[len(c.want)-1], 1e-4)
				}
			}
			if err != nil {
				errs <- fmt.Errorf("worker %d: %w", g, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	settle(t, e)
	st := e.Stats()
	if st.Backends[1].Failures != 1 {
		t.Errorf("GPU failures %d, want the one injected", st.Backends[1].Failures)
	}
	if got, want := st.Backends[0].Ops+st.Backends[1].Ops, int64(workers*len(c.ops)); got != want || observed(e) != want {
		t.Errorf("%d ops counted, %d observed, for %d ops", got, observed(e), want)
	}
}
