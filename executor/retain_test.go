package executor_test

import (
	"runtime"
	"testing"
)

// TestQueuedWorkNotRetained runs many decode-like steps of queued and
// gathered work: the heap after them is what it was after the first few.
// Each piece of queued work kept the tensor's state before it and the
// work it ran after, so every piece kept every older one reachable and a
// long run held all it ever queued (about 1.4 KB per op: some 50 MB
// here); recovery no longer reaches work that has left the log, which
// then lets go of both (DESIGN.md § Queued execution).
func TestQueuedWorkNotRetained(t *testing.T) {
	for _, gathered := range []bool{false, true} {
		_, step := execStep(t, &hostGPU{}, 21, gathered, false)
		heap := func() uint64 {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			return ms.HeapAlloc
		}
		for range 50 {
			step()
		}
		before := heap()
		const steps = 600
		for range steps {
			step()
		}
		if after := heap(); after > before+8<<20 {
			t.Errorf("gathered %v: heap %.1f MB after %d more steps of 63 ops, %.1f MB before: queued work is retained",
				gathered, float64(after)/1e6, steps, float64(before)/1e6)
		}
	}
}
