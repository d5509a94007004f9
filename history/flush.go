package history

import (
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Flush writes the pending records now, in one batch, and returns when
// they are written. Write flushes; Close and Export do too.
func (db *DB) Flush() error { return db.flush(false) }

// flush is Flush; last says it is Close's, which always records the
// store's state.
func (db *DB) flush(last bool) error {
	db.flushMu.Lock()
	defer db.flushMu.Unlock()
	if fe := db.faults.get(); fe != nil {
		return fe // nothing is written after a fault
	}
	start := time.Now()
	db.mu.Lock()
	batch := db.dirty
	db.dirty, db.spare = db.spare[:0], nil
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
		if last {
			db.recordState(true) // after the relay's flushes (TestStateFileAtClose)
		}
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
		db.recordState(last)
	}
	return err
}

// recordState is saveState, with a failure that is not a write fault
// logged. Callers hold flushMu.
func (db *DB) recordState(force bool) {
	if err := db.saveState(force); err != nil && db.faults.get() == nil {
		db.log.Warn().Err(err).Msg("history: could not record the store's state; damage to it may go unnoticed")
	}
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
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, badger.ErrTxnTooBig):
			return fmt.Errorf("history: flush: %w", err)
		}
		// A transaction holds 15% of the memtable: a few records with
		// long keys fill it, and a WriteBatch splits them
		// (TestFlushLongKeys).
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
