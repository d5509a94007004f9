package history

import (
	"unsafe"

	"github.com/adaptsched/adaptsched/bandit"
)

// Key names one posterior: a backend and a bucket, under the store's
// hardware fingerprint and schema version.
type Key struct {
	Backend string // the backend's registered name ("cpu", "sim:mi300x")
	Bucket  string // the bucket's stable name, as adaptive formats it ("MatMul/f32/s42")
}

// Put records p as the latest posterior of k, for tools and tests that
// write records themselves (a Scheduler's posteriors reach the store
// through Attach). It never does I/O: the record waits in memory for
// the next flush. The record keeps the prior last given for k by
// PutWithPrior. A non-finite or non-positive posterior is refused and
// counted (Stats.Rejected).
func (db *DB) Put(k Key, p bandit.NormalGamma) { db.put(k, nil, p) }

// PutWithPrior is Put, with the prior p grew from: merging snapshots
// (Import with ImportMerge) is exact only for records whose prior is
// known. A record given by Put keeps the prior last given for its key,
// or none (such records merge by keeping the side with more evidence,
// counted in ImportStats.Inexact).
func (db *DB) PutWithPrior(k Key, prior, p bandit.NormalGamma) { db.put(k, &prior, p) }

func (db *DB) put(k Key, prior *bandit.NormalGamma, p bandit.NormalGamma) {
	// Validation needs no lock: it keeps the critical section to the
	// map lookup and the copy.
	ok := validNG(p) && (prior == nil || validNG(*prior))
	db.mu.Lock()
	if db.closed || !ok {
		db.stats.Rejected++
		db.mu.Unlock()
		return
	}
	e := db.lookup(k)
	e.rec.Posterior = p
	if prior != nil {
		e.rec.Prior = *prior
	}
	e.rec.N++
	db.markDirty(e)
	db.unlockKicking()
}

// unlockKicking releases db.mu and wakes the flusher once the records
// pushed and reported reach FlushEvery (once per batch: claimKick).
func (db *DB) unlockKicking() {
	kick := int64(len(db.dirty))+db.waiting.Load() >= int64(db.opts.FlushEvery) && db.claimKick()
	db.mu.Unlock()
	if kick {
		db.kickFlusher()
	}
}

// markDirty queues e for the next flush. Callers hold db.mu.
func (db *DB) markDirty(e *entry) {
	if e.dirty {
		return
	}
	e.dirty = true
	db.dirty = append(db.dirty, e)
	db.held.Store(int64(len(db.dirty)))
}

// claimKick reports whether the caller is the one to kick the flusher for
// the batch under way. One kick per batch: kicking on every update past
// the threshold queued a second flush right behind each batch, for the few
// updates that came in while it was written (BenchmarkSelectObserve: 800
// to 900 updates per flush; 1,400 to 1,500 with one kick), and a kick
// that wakes the flusher costs the caller a futex call (10 to 12 µs on
// the 2-core test VM).
func (db *DB) claimKick() bool { return !db.kicked.Load() && db.kicked.CompareAndSwap(false, true) }

func (db *DB) kickFlusher() {
	select {
	case db.kick <- struct{}{}:
	default:
	}
}

// lookup returns k's entry, creating it. Callers hold db.mu.
func (db *DB) lookup(k Key) *entry {
	// Fibonacci hashing of the strings' addresses picks the slot.
	h := (uint64(uintptr(unsafe.Pointer(unsafe.StringData(k.Bucket)))) ^
		uint64(uintptr(unsafe.Pointer(unsafe.StringData(k.Backend))))<<1) * 0x9E3779B97F4A7C15
	s := &db.seen[h>>(64-seenBits)]
	if s.e != nil && sameStrings(s.k, k) {
		return s.e
	}
	e := db.recs[k]
	if e == nil {
		e = &entry{key: appendKey(nil, db.fp, k), rec: Record{Key: k}}
		db.recs[k] = e
	}
	s.k, s.e = k, e
	return e
}

// sameStrings reports whether a and b are made of the same strings, by
// address and length. Those imply the same bytes: strings are immutable,
// and a cached key keeps its strings alive, so their memory cannot be
// reused for others.
func sameStrings(a, b Key) bool {
	return unsafe.StringData(a.Bucket) == unsafe.StringData(b.Bucket) && len(a.Bucket) == len(b.Bucket) &&
		unsafe.StringData(a.Backend) == unsafe.StringData(b.Backend) && len(a.Backend) == len(b.Backend)
}
