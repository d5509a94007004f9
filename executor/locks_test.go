package executor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/executor"
	"github.com/adaptsched/adaptsched/kernels"
)

// TestOpsOverCrossingTensors: synchronous and queued ops from several
// goroutines over three tensors in crossing roles (each written by one
// op and read by others, one op in place, one reading a tensor twice)
// neither deadlock, though a synchronous op tries its locks in argument
// order (lockSet), nor leave a lock held: afterwards ops on every tensor
// run and give the right values.
func TestOpsOverCrossingTensors(t *testing.T) {
	for _, synchronous := range []bool{true, false} {
		e := newExec(t, executor.Config{Synchronous: synchronous}, open(t, "cpu"), open(t, "cpu1"))
		crossOps(t, e)
	}
}

func crossOps(t *testing.T, e *executor.Executor) {
	s := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{16}, {16}}}
	zero := make([]byte, 64)
	a, b, c := alloc(t, e, zero), alloc(t, e, zero), alloc(t, e, zero)
	ops := [][3]backends.Buffer{{b, c, a}, {a, c, b}, {a, a, c}, {a, b, a}} // two inputs, output
	var wg sync.WaitGroup
	errs := make(chan error, len(ops))
	for _, op := range ops {
		wg.Go(func() {
			for range 2000 {
				if _, err := e.Run(s, []backends.Buffer{op[0], op[1]}, op[2]); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("ops over crossing tensors did not finish: deadlock")
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	one := kernels.AsBytes([]float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	for _, x := range []backends.Buffer{a, b} {
		if _, err := e.Write(x, one); err != nil {
			t.Fatal(err)
		}
	}
	for _, op := range [][3]backends.Buffer{{a, b, c}, {c, a, b}, {b, c, a}} { // c = 2, b = 3, a = 5
		if _, err := e.Run(s, []backends.Buffer{op[0], op[1]}, op[2]); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, x := range []backends.Buffer{a, b, c} {
		got := make([]byte, 64)
		if _, err := e.Read(got, x); err != nil {
			t.Fatal(err)
		}
		want := []float32{5, 3, 2}[i]
		for _, v := range kernels.AsF32(got) {
			if v != want {
				t.Fatalf("tensor %d holds %v, want %v", i, v, want)
			}
		}
	}
}
