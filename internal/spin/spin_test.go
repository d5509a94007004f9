package spin

import (
	"sync"
	"testing"
	"time"
)

// TestMutexExcludes: goroutines that each add to a plain counter under
// the lock lose no increment (and the race detector, in make test, sees
// no race on it).
func TestMutexExcludes(t *testing.T) {
	const goroutines, adds = 8, 20000
	var mu Mutex
	n := 0
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range adds {
				mu.Lock()
				n++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if n != goroutines*adds {
		t.Fatalf("counter %d, want %d", n, goroutines*adds)
	}
}

// TestMutexWaitsForSlowHolder: a waiter gets the lock only after a
// holder that keeps it for milliseconds (past the spins and yields, into
// the sleeps) lets it go, and then promptly.
func TestMutexWaitsForSlowHolder(t *testing.T) {
	var mu Mutex
	mu.Lock()
	released := make(chan time.Time, 1)
	got := make(chan time.Time, 1)
	go func() {
		mu.Lock()
		got <- time.Now()
		mu.Unlock()
	}()
	time.Sleep(20 * time.Millisecond)
	select {
	case <-got:
		t.Fatal("waiter took a held lock")
	default:
	}
	released <- time.Now()
	mu.Unlock()
	at := <-got
	if wait := at.Sub(<-released); wait > 50*time.Millisecond {
		t.Fatalf("waiter took the lock %v after its release; its sleeps are at most %v", wait, maxSleep)
	}
}

func TestUnlockUnlockedPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Unlock of an unlocked Mutex did not panic")
		}
	}()
	var mu Mutex
	mu.Unlock()
}

// BenchmarkMutex: an uncontended Lock/Unlock pair, the case of a
// bucket's lock (package doc), for this Mutex and for sync.Mutex.
func BenchmarkMutex(b *testing.B) {
	for name, mu := range lockers() {
		b.Run(name, func(b *testing.B) {
			n := 0
			for b.Loop() {
				mu.Lock()
				n++
				mu.Unlock()
			}
			_ = n
		})
	}
}

// BenchmarkMutexContended: every goroutine on one lock, the worst case
// for a lock no one sleeps on, beside sync.Mutex's.
func BenchmarkMutexContended(b *testing.B) {
	for name, mu := range lockers() {
		b.Run(name, func(b *testing.B) {
			n := 0
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					mu.Lock()
					n++
					mu.Unlock()
				}
			})
			_ = n
		})
	}
}

// lockers returns the locks the benchmarks compare, by name.
func lockers() map[string]sync.Locker {
	return map[string]sync.Locker{"spin": new(Mutex), "sync": new(sync.Mutex)}
}
