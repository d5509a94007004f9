package history

import (
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

func (db *DB) run() {
	t := time.NewTicker(db.opts.FlushInterval)
	defer t.Stop()
	var busy time.Duration // the last flush's duration
	var end time.Time      // when it ended
	for {
		full := false
		select {
		case <-t.C:
		case <-db.kick:
			full = true
			if wait := flushPace*busy - time.Since(end); wait > 0 {
				pause := time.NewTimer(wait)
				select {
				case <-pause.C:
				case <-t.C: // the interval's flush, which writes whatever waits
					full = false
				case <-db.stop:
					pause.Stop()
					close(db.done)
					return
				}
				pause.Stop()
			}
		case <-db.stop:
			close(db.done)
			return
		}
		start := time.Now()
		err := db.flush(false, full)
		end = time.Now()
		busy = end.Sub(start)
		if db.faults.get() != nil {
			close(db.done) // the fault was logged; nothing more is written
			return
		}
		if err != nil {
			db.log.Error().Err(err).Msg("history: flush failed; will retry")
		}
	}
}

// flushPace paces the flushes that FlushEvery triggers: the next one
// starts at least flushPace times the last flush's duration after it
// ended, so that writing takes at most about 1/(1+flushPace) of a core
// (5%) however fast records change. The records that change meanwhile
// wait, at most until the interval's flush, which is never paced: a crash
// still loses at most FlushInterval. Below that rate FlushEvery applies as
// set. Unpaced, a scheduler that changes a new record at every Observe
// (10,000 buckets in turn, millions of Observes a second) kept the
// flusher writing without pause (TestFlushPacing: 99% of the time), and
// on the 2-core test VM, where it has no idle core, Select+Observe from 2
// goroutines cost +77% to +105% with the store (history's
// SelectObserve/10k-buckets/parallel, 2 s runs); paced by 9, +10% to
// +24%; by 19, −4% to +11%.
const flushPace = 19

// Flush collects the attached Schedulers, writes the pending records now, in
// one batch, and returns when they are written. The background flusher
// calls it; callers rarely need to (Close and Export flush).
func (db *DB) Flush() error { return db.flush(false, false) }

// flush is Flush; last (Close's flush) makes its collection the last: the
// Schedulers are let go. full (the flush a kick asked for) writes only if
// FlushEvery records wait once the Schedulers are collected: reports lag and
// may, in a race with a collection, count a record twice, so the
// collected count decides. That first collection is not a flush's (the
// Schedulers hold back their reports of what it took); when the count is
// reached, a flush's collection follows and the batch is written.
func (db *DB) flush(last, full bool) error {
	db.flushMu.Lock()
	defer db.flushMu.Unlock()
	if fe := db.faults.get(); fe != nil {
		return fe
	}
	start := time.Now()
	db.mu.Lock()
	if full {
		db.pull(false)
		if len(db.dirty) < db.opts.FlushEvery {
			db.kicked.Store(false)
			db.mu.Unlock()
			return nil
		}
	}
	db.pull(true)
	if last {
		db.srcs = nil
	}
	batch := db.dirty
	db.dirty, db.spare = db.spare[:0], nil
	db.held.Store(0)
	db.kicked.Store(false)
	now := time.Now()
	db.slab, db.items = db.slab[:0], db.items[:0]
	for _, e := range batch {
		e.dirty = false
		e.rec.Updated = now
		off := len(db.slab)
		db.slab = append(db.slab, e.key...)
		db.slab = appendValue(db.slab, &e.rec)
		db.items = append(db.items, flushItem{e: e, n: e.rec.N, off: off, k: len(e.key), end: len(db.slab)})
	}
	db.mu.Unlock()
	if len(batch) == 0 {
		db.mu.Lock()
		db.spare = batch
		db.mu.Unlock()
		return nil
	}
	err := db.checkSpace()
	if err == nil {
		err = db.write()
	}
	if k := faultKind(err); k != "" {
		db.faults.set(k, err)
		err = db.faults.get()
	}
	db.mu.Lock()
	db.stats.Busy += time.Since(start)
	if err != nil {
		db.stats.Failed++
		for _, it := range db.items {
			db.markDirty(it.e)
		}
	} else {
		db.stats.Flushes++
		for _, it := range db.items {
			db.stats.Durable += it.n - it.e.flushedN
			it.e.flushedN = it.n
			if !it.e.stored {
				it.e.stored = true
				db.keys++
			}
		}
	}
	clear(batch)
	db.spare = batch[:0]
	db.mu.Unlock()
	if err == nil {
		if serr := db.saveState(last); serr != nil && db.faults.get() == nil {
			db.log.Warn().Err(serr).Msg("history: could not record the store's state; damage to it may go unnoticed")
		}
	}
	return err
}

// smallBatch is the most records written in one transaction rather than a
// WriteBatch: a WriteBatch starts goroutines and throttles, which costs
// more than the write itself for a few hot records (BenchmarkFlush).
const smallBatch = 256

// write sends the encoded batch to Badger in one transaction, or one
// WriteBatch when it is large. Keys and values are sliced from the slab by
// offset because it may have moved while it grew.
func (db *DB) write() error {
	if len(db.items) <= smallBatch {
		err := db.bdb.Update(func(txn *badger.Txn) error {
			for _, it := range db.items {
				mid := it.off + it.k
				if err := txn.Set(db.slab[it.off:mid:mid], db.slab[mid:it.end:it.end]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("history: flush: %w", err)
		}
		return nil
	}
	wb := db.bdb.NewWriteBatch()
	for _, it := range db.items {
		mid := it.off + it.k
		if err := wb.Set(db.slab[it.off:mid:mid], db.slab[mid:it.end:it.end]); err != nil {
			wb.Cancel()
			return fmt.Errorf("history: flush: %w", err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("history: flush: %w", err)
	}
	return nil
}

// checkSpace returns a "disk full" error, before anything is written,
// when the store's file system has less than spaceReserve free.
func (db *DB) checkSpace() error {
	if db.opts.InMemory {
		return nil
	}
	return checkSpace(db.opts.Dir, spaceReserve(db.opts))
}
