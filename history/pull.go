package history

import (
	"math/bits"
	"runtime"
	"slices"
	"sync/atomic"

	"github.com/adaptsched/adaptsched/bandit"
)

// Attach implements adaptive.Store: from now on each flush, Close,
// Records, Load and Stats first call collect (the Scheduler's
// collection), whose posteriors replace the records of their keys (prior
// included) and add their n to the records' N; a flush's call says so
// (flush), and the others' records are held for the next flush. The
// records that changed reports count toward FlushEvery like Puts. A
// collected posterior or prior that is not finite and positive is
// refused and counted (Stats.Rejected). detach collects once more and
// stops the flushes' collections; it collects again each time it is
// called, until the DB's Close. Attach after Close returns functions that
// do nothing.
//
// What changed counts toward FlushEvery is records waiting to be
// written, per stripe of buckets rather than in one counter, which every
// core would pull to itself; a stripe reports to the DB every chunk
// records. The flush trigger so lags by less than the stripes times
// chunk: chunk is the largest power of two at most FlushEvery / (8 ·
// stripes), so the lag stays under an eighth of FlushEvery (exact when
// FlushEvery < 16 · stripes).
//
// Records, not Observes: a bucket observed 10,000 times between two
// flushes is still one write per arm, so that a few hot buckets at
// millions of ops a second do not rewrite the same records thousands of
// times a second (history BenchmarkSelectObserve holds the store's cost).
func (db *DB) Attach(collect func(emit func(backend, bucket string, prior, p bandit.NormalGamma, n uint64), flush bool)) (
	changed func(bucket uint32, records int), detach func()) {
	stripes := max(8, 1<<bits.Len(uint(4*runtime.GOMAXPROCS(0)-1)))
	a := &attachment{db: db, collect: collect, counts: make([]stripeCount, stripes), mask: uint32(stripes - 1), chunk: 1}
	for a.chunk*2*8*uint64(stripes) <= uint64(db.opts.FlushEvery) {
		a.chunk *= 2
	}
	db.mu.Lock()
	if !db.closed {
		db.srcs = append(db.srcs, a)
	}
	db.mu.Unlock()
	return a.changed, a.detach
}

// attachment is a Scheduler attached to a DB: its collection and the
// striped counters of the records it reported.
type attachment struct {
	db      *DB
	collect func(emit func(backend, bucket string, prior, p bandit.NormalGamma, n uint64), flush bool)
	counts  []stripeCount
	mask    uint32
	chunk   uint64 // a power of two
}

// stripeCount is one stripe's record counter, alone on its cache line.
type stripeCount struct {
	n atomic.Uint64
	_ [56]byte
}

// changed counts records on bucket's stripe and, every chunk of them,
// adds them to the records waiting, kicking the flusher once they and the
// records the DB holds (held) reach FlushEvery.
func (a *attachment) changed(bucket uint32, records int) {
	c, n := &a.counts[bucket&a.mask], uint64(records)
	t := c.n.Add(n)
	if chunks := t/a.chunk - (t-n)/a.chunk; chunks > 0 {
		db := a.db
		if db.waiting.Add(int64(chunks*a.chunk))+db.held.Load() >= int64(db.opts.FlushEvery) && db.claimKick() {
			db.kickFlusher()
		}
	}
}

func (a *attachment) detach() {
	db := a.db
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return // Close collects the attached a last time
	}
	a.collect(db.emit, false)
	if i := slices.Index(db.srcs, a); i >= 0 {
		db.srcs = slices.Delete(db.srcs, i, i+1)
	}
}

// pull collects every attached Scheduler into recs; flush says that this
// is a flush's collection. Every record reported so far is collected then
// (and counted in held): waiting restarts from the reports that come
// after. Callers hold db.mu (which also keeps one collection at a time).
func (db *DB) pull(flush bool) {
	reported := db.waiting.Load()
	for _, a := range db.srcs {
		a.collect(db.emit, flush)
	}
	db.waiting.Add(-reported)
}

// collected is the emit function of pull: a Scheduler's posterior of
// (backend, bucket), grown from prior by n updates since the last
// collection. Callers hold db.mu.
func (db *DB) collected(backend, bucket string, prior, p bandit.NormalGamma, n uint64) {
	if !validNG(p) || !validNG(prior) {
		db.stats.Rejected++
		return
	}
	e := db.lookup(Key{Backend: backend, Bucket: bucket})
	e.rec.Posterior, e.rec.Prior = p, prior
	e.rec.N += n
	db.markDirty(e)
}
