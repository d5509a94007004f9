package adaptive

import (
	"sync"
	"testing"
)

// TestEpochCounterExact: counted by one goroutine, the epoch answers
// whether it is above t exactly as the count does, for every count up
// to 20,000 and every t around it and around twice a bucket's epoch.
func TestEpochCounterExact(t *testing.T) {
	var c epochCounter
	for n := uint64(0); n <= 20000; n++ {
		if n > 0 {
			c.add()
		}
		for _, th := range []uint64{0, n / 2, n/2 + 1, n - min(n, 1), n, n + 1, n + 7, 2 * n, n + n/64} {
			got, above := c.above(th)
			if above != (n > th) || above && got != n {
				t.Fatalf("count %d: above(%d) = %d, %v; want %v", n, th, got, above, n > th)
			}
		}
	}
	if c.load() != 20000 {
		t.Fatalf("load = %d, want 20000", c.load())
	}
}

// TestEpochCounterConcurrent: adds from several goroutines leave the
// floor at the count's own floor, never above the count.
func TestEpochCounterConcurrent(t *testing.T) {
	var c epochCounter
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5000 {
				c.add()
				if f, n := c.floor.Load(), c.n.Load(); f > n {
					t.Errorf("floor %d above the count %d", f, n)
					return
				}
			}
		}()
	}
	wg.Wait()
	n := c.load()
	if want := n &^ (floorStep(n) - 1); c.floor.Load() != want {
		t.Fatalf("floor %d after %d adds, want %d", c.floor.Load(), n, want)
	}
	if _, above := c.above(n - 1); !above {
		t.Fatalf("above(%d) = false at count %d", n-1, n)
	}
}
