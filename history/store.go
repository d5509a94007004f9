package history

import (
	"unsafe"

	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/learned"
)

// Write keeps a Scheduler's changes and writes every pending record in
// one batch (Flush): each change replaces its key's posterior and prior
// and adds its N to the record's count. A change whose posterior or
// prior is not finite and positive, or whose key is longer than Badger
// takes, is refused and counted (Stats.Rejected). When the write fails the records stay pending, and
// the next Write or Flush retries them: nothing is lost while the DB is
// open. After Close it keeps nothing and returns ErrClosed.
func (db *DB) Write(changes []learned.Change) error {
	db.mu.Lock()
	if db.closed {
		db.stats.Rejected += len(changes)
		db.mu.Unlock()
		return ErrClosed
	}
	for i := range changes {
		c := &changes[i]
		if !validNG(c.Posterior) || !validNG(c.Prior) || keySize(db.fp, c.Key) > maxKeySize {
			db.stats.Rejected++
			continue
		}
		e := db.lookup(c.Key)
		e.rec.Posterior, e.rec.Prior = c.Posterior, c.Prior
		e.rec.N += c.N
		db.markDirty(e)
	}
	db.mu.Unlock()
	return db.Flush()
}

// Put records p as the latest posterior of k, for tools and tests that
// write records themselves (a Scheduler's changes reach the store through
// Write). It never does I/O: the record waits in memory for the next
// Write, Flush or Close. The record keeps the prior last given for k by
// PutWithPrior. A non-finite or non-positive posterior, or a key longer
// than Badger takes, is refused and counted (Stats.Rejected).
func (db *DB) Put(k learned.Key, p bandit.NormalGamma) { db.put(k, nil, p) }

// PutWithPrior is Put, with the prior p grew from: merging snapshots
// (Import with ImportMerge) is exact only for records whose prior is
// known. A record given by Put keeps the prior last given for its key,
// or none (such records merge by keeping the side with more evidence,
// counted in ImportStats.Inexact).
func (db *DB) PutWithPrior(k learned.Key, prior, p bandit.NormalGamma) { db.put(k, &prior, p) }

func (db *DB) put(k learned.Key, prior *bandit.NormalGamma, p bandit.NormalGamma) {
	// Validation needs no lock: it keeps the critical section to the
	// map lookup and the copy.
	ok := validNG(p) && (prior == nil || validNG(*prior)) && keySize(db.fp, k) <= maxKeySize
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed || !ok {
		db.stats.Rejected++
		return
	}
	e := db.lookup(k)
	e.rec.Posterior = p
	if prior != nil {
		e.rec.Prior = *prior
	}
	e.rec.N++
	db.markDirty(e)
}

// markDirty queues e for the next flush. Callers hold db.mu.
func (db *DB) markDirty(e *entry) {
	if e.dirty {
		return
	}
	e.dirty = true
	db.dirty = append(db.dirty, e)
}

// lookup returns k's entry, creating it. Callers hold db.mu.
func (db *DB) lookup(k learned.Key) *entry {
	// Fibonacci hashing of the strings' addresses picks the slot.
	h := (uint64(uintptr(unsafe.Pointer(unsafe.StringData(k.Bucket)))) ^
		uint64(uintptr(unsafe.Pointer(unsafe.StringData(k.Backend))))<<1) * 0x9E3779B97F4A7C15
	s := &db.seen[h>>(64-seenBits)]
	if s.e != nil && sameStrings(s.k, k) {
		return s.e
	}
	e := db.recs[k]
	if e == nil {
		e = db.newEntry(Record{Key: k})
	}
	s.k, s.e = k, e
	return e
}

// newEntry adds an entry for r to recs. A key Open skipped is in Badger
// already (stored), and the record this build could not read is
// overwritten with a warning rather than silently
// (TestRewriteSkippedKeyIsNotDamage). Callers hold db.mu.
func (db *DB) newEntry(r Record) *entry {
	e := &entry{key: appendKey(nil, db.fp, r.Key), rec: r}
	if db.unread[r.Key] {
		e.stored = true
		delete(db.unread, r.Key)
		db.log.Warn().Str("backend", r.Key.Backend).Str("bucket", r.Key.Bucket).
			Msg("history: a stored record this build could not read (skipped at Open) will be overwritten")
	}
	db.recs[r.Key] = e
	return e
}

// sameStrings reports whether a and b are made of the same strings, by
// address and length. Those imply the same bytes: strings are immutable,
// and a cached key keeps its strings alive, so their memory cannot be
// reused for others.
func sameStrings(a, b learned.Key) bool {
	return unsafe.StringData(a.Bucket) == unsafe.StringData(b.Bucket) && len(a.Bucket) == len(b.Bucket) &&
		unsafe.StringData(a.Backend) == unsafe.StringData(b.Backend) && len(a.Backend) == len(b.Backend)
}
