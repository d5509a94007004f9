// Package spin provides Mutex, a lock for critical sections of tens of
// nanoseconds, such as a scheduler bucket's decision or update.
//
// Rule: Unlock is one store with release order, no read-modify-write.
// Reason: sync.Mutex's Unlock is an atomic add, as it must learn whether
// a goroutine sleeps on the lock; on amd64 that is a locked instruction,
// and a Lock/Unlock pair costs about 1.7 times one that releases with a
// plain store (BenchmarkMutex, its spin and sync cases). A Select and
// Observe take two pairs. So no goroutine sleeps on a Mutex to be woken:
// a waiter spins, then yields, then sleeps for growing spells and looks
// again, which suits a lock held for nanoseconds and seldom contended.
// No hand-written lock in a library fits: sync.Mutex is the one the
// standard library offers, and it wakes waiters.
//
// # Usage
//
// A Mutex's zero value is unlocked; it must not be copied once used.
//
//	var mu spin.Mutex
//	mu.Lock()
//	n++ // tens of nanoseconds, nothing that blocks for long
//	mu.Unlock()
package spin

import (
	"runtime"
	"sync/atomic"
	"time"
)

// Mutex is a mutual-exclusion lock whose holder should not block: a
// waiter polls it rather than sleeping until woken. The zero value is
// unlocked. It is a sync.Locker.
type Mutex struct {
	state uint32 // 1: held
}

// Waiting: a waiter polls the lock spins times, then yields its
// processor yields times, then sleeps from minSleep, doubling to
// maxSleep, between looks. Spinning covers a holder that runs (its
// section takes tens of nanoseconds); yielding, one that was preempted
// and waits for this processor; sleeping, one held off for longer (a
// holder waiting on another lock), without burning a core on it.
const (
	spins    = 64
	yields   = 64
	minSleep = time.Microsecond
	maxSleep = time.Millisecond
)

// Lock locks m, waiting while it is held.
func (m *Mutex) Lock() {
	if atomic.CompareAndSwapUint32(&m.state, 0, 1) {
		return
	}
	m.lockSlow()
}

// lockSlow waits for m and locks it (see the waiting constants).
func (m *Mutex) lockSlow() {
	sleep := minSleep
	for i := 0; ; i++ {
		if atomic.LoadUint32(&m.state) == 0 && atomic.CompareAndSwapUint32(&m.state, 0, 1) {
			return
		}
		switch {
		case i < spins:
		case i < spins+yields:
			runtime.Gosched()
		default:
			time.Sleep(sleep)
			sleep = min(2*sleep, maxSleep)
		}
	}
}

// Unlock unlocks m. Unlocking a Mutex that is not locked is a
// programmer's error and panics; as with sync.Mutex, a goroutine may
// unlock a Mutex another locked.
func (m *Mutex) Unlock() {
	if atomic.LoadUint32(&m.state) != 1 {
		panic("spin: unlock of unlocked mutex")
	}
	release(&m.state)
}
