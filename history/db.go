package history

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/adaptsched/adaptsched/bandit"
	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/rs/zerolog"
)

// DB is the Badger-backed posterior store. Put records the posterior in
// memory and returns; a background goroutine writes the dirty records in
// one batch per flush (every FlushInterval, or as soon as FlushEvery
// records wait, whichever comes first, the latter paced to about 5% of a
// core: flushPace) and on Close. Sources attached by
// Attach are collected at the start of each flush (and by Records, Load
// and Stats, so that those include their pending updates). All methods
// are safe for concurrent use.
type DB struct {
	opts Options
	bdb  *badger.DB
	fp   string
	log  zerolog.Logger

	mu     sync.Mutex
	recs   map[Key]*entry // every record of the current fingerprint
	dirty  []*entry
	spare  []*entry
	closed bool
	stats  Stats
	srcs   []*attachment
	emit   func(k Key, prior, p bandit.NormalGamma, n uint64) // db.collected

	// waiting counts the records that attached Sources reported through
	// Updated since the last collection: it lags the records they hold by
	// what they have not reported yet. Atomic, so that a Source
	// reports without db.mu.
	waiting atomic.Int64
	// held is len(dirty), for Sources' reports to read without db.mu.
	// FlushEvery counts records waiting (held + waiting), not updates: a
	// flush writes each record once however often it changed.
	held   atomic.Int64
	kicked atomic.Bool // the flusher was kicked for the waiting batch

	old map[Key]bandit.NormalGamma // weakened records of other fingerprints

	// seen caches recs by the identity of a key's strings: the scheduler
	// passes the same strings on every Observe, and comparing addresses
	// costs less than hashing the strings (the store's share of
	// BenchmarkSelectObserve without flushes: 8.5% → 6.5%).
	seen [1 << seenBits]struct {
		k Key
		e *entry
	}

	flushMu sync.Mutex // one flush at a time
	slab    []byte     // encoded keys and values of the flush in progress
	items   []flushItem

	// keys counts the keys in Badger (every schema's; none is ever
	// deleted) and state is what the state file last recorded. Both
	// belong to flushMu after Open.
	keys    int
	state   storeState
	stateAt time.Time // when state was written

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

// seenBits sets DB.seen's size: 512 slots, a few times the records a
// scheduler keeps hot.
const seenBits = 9

type entry struct {
	key      []byte // encoded Badger key
	rec      Record
	dirty    bool
	stored   bool   // the key is in Badger
	flushedN uint64 // rec.N at the last successful flush
}

type flushItem struct {
	e      *entry
	n      uint64 // e.rec.N as written
	off, k int    // the item's offset in the slab and its key's length
	end    int    // offset of the value's end
}

// Stats are a DB's counters since Open.
type Stats struct {
	Records  int    // records of the current fingerprint (in memory)
	Old      int    // records of other fingerprints offered by Load as weakened priors
	Skipped  int    // stored values skipped at Open: undecodable, unknown version, bad key
	Rejected int    // Puts refused: a non-finite or non-positive posterior, or after Close; also invalid collected posteriors
	Flushes  int    // successful flushes that wrote at least one record
	Failed   int    // flushes that failed (their records stay dirty and are retried)
	Pending  int    // records waiting for the next flush (attached Sources' included: Stats collects them)
	Durable  uint64 // updates (Puts, and those collected from Sources) written by successful flushes, counted per record as N
	// Busy is the time spent in flushes that wrote records, from the
	// collection to Badger's commit (the flusher's share of a core).
	Busy time.Duration
}

var (
	_ Store       = (*DB)(nil)
	_ PriorPutter = (*DB)(nil)
	_ Puller      = (*DB)(nil)
)

// Open opens (creating it, mode 0700) the store that opts describe and
// reads its records. A directory that another process holds fails at once
// with ErrLocked. Stored values that do not decode are skipped, counted in
// Stats.Skipped and logged. Records of another hardware fingerprint are
// kept on disk and offered by Load, weakened by opts.PriorWeight, for the
// keys the current fingerprint has not learned yet; a log line says so.
//
// A damaged store fails with a *DamagedError (ErrDamaged) naming the
// directory and what is wrong, and nothing in it is changed: a MANIFEST
// missing, unreadable or out of step with the tables; a table that does
// not open or fails its checksums; fewer keys or an older version than
// the store's state file (stateFile) recorded at its last flush. With
// opts.MoveDamaged the directory is renamed to DIR.damaged-TIMESTAMP
// instead, a warning says so, and an empty store is opened in its place.
func Open(opts Options) (*DB, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	db, err := open(opts)
	var de *DamagedError
	if err == nil || !opts.MoveDamaged || !errors.As(err, &de) {
		return db, err
	}
	to, merr := moveAside(opts.Dir, time.Now())
	if merr != nil {
		return nil, errors.Join(err, merr)
	}
	opts.Logger.Warn().Str("dir", opts.Dir).Str("moved_to", to).Str("damage", de.Reason).
		Msg("history: the store was damaged; moved it aside and started an empty one")
	return open(opts)
}

func open(opts Options) (*DB, error) {
	bo := badger.DefaultOptions(opts.Dir)
	if opts.InMemory {
		bo = badger.DefaultOptions("").WithInMemory(true)
	} else {
		if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("history: create %s: %w", opts.Dir, err)
		}
		unlock, free, err := lockDir(opts.Dir)
		if err != nil {
			return nil, fmt.Errorf("history: open %s: %w", opts.Dir, err)
		}
		if !free {
			return nil, fmt.Errorf("history: store %s is in use by another process: %w", opts.Dir, ErrLocked)
		}
		orphans, err := checkFiles(opts.Dir)
		if err == nil && len(orphans) > 0 && !opts.trial {
			if _, ok, _ := readState(opts.Dir); ok {
				err = trialOpen(opts, orphans)
			} else {
				opts.Logger.Warn().Str("dir", opts.Dir).Strs("tables", orphans).
					Msg("history: tables not in the MANIFEST (left by a crash, or a MANIFEST truncated); the store has no state file to tell, so Badger deletes them")
			}
		}
		unlock() // closing the descriptor releases the flock
		if err != nil {
			return nil, err
		}
	}
	// The store holds a few thousand 81-byte records: small value log
	// files and caches keep Open fast; the memtable is sized for rewrites
	// (DefaultMemTableSize). checkFiles verified every table's checksums;
	// the blocks read later are verified as they are read.
	bo = bo.WithLogger(badgerLogger{opts.Logger}).
		WithSyncWrites(opts.SyncWrites).
		WithNumVersionsToKeep(1).
		WithMemTableSize(opts.MemTableSize).
		WithValueLogFileSize(16 << 20).
		WithBlockCacheSize(8 << 20).
		WithNumCompactors(2).
		WithMetricsEnabled(false).
		WithChecksumVerificationMode(options.OnBlockRead).
		WithVerifyValueChecksum(true)
	bdb, err := badger.Open(bo)
	if err != nil {
		// Badger formats the lock failure without %w, so its message is
		// the only thing to recognise it by.
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("history: store %s is in use by another process: %w", opts.Dir, ErrLocked)
		}
		return nil, &DamagedError{Dir: opts.Dir, Reason: "Badger cannot open it: " + shortErr(err).Error()}
	}
	db := &DB{
		opts: opts, bdb: bdb, fp: opts.Fingerprint.Hash, log: opts.Logger,
		recs: make(map[Key]*entry), old: make(map[Key]bandit.NormalGamma),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	db.emit = db.collected
	if err := db.loadChecked(); err != nil {
		bdb.Close()
		return nil, err
	}
	go db.run()
	return db, nil
}

// loadChecked is load, with a panic in Badger's reader turned into a
// DamagedError, and the keys and version found checked against the
// store's state file (then brought up to date).
func (db *DB) loadChecked() (err error) {
	defer func() {
		if r := recover(); r != nil {
			msg, _, _ := strings.Cut(strings.TrimSpace(fmt.Sprint(r)), "\n")
			err = &DamagedError{Dir: db.opts.Dir, Reason: "reading its records failed: " + msg}
		}
	}()
	if err := db.load(); err != nil {
		return err
	}
	if db.opts.InMemory {
		return nil
	}
	version := db.bdb.MaxVersion()
	st, ok, err := readState(db.opts.Dir)
	if err != nil {
		return &DamagedError{Dir: db.opts.Dir, Reason: err.Error()}
	}
	if ok && (db.keys < st.Keys || version < st.Version) {
		return &DamagedError{Dir: db.opts.Dir, Reason: fmt.Sprintf(
			"it opens with %d keys at version %d, where its last flush left %d at version %d "+
				"(a MANIFEST lost or truncated, or a table rolled back)", db.keys, version, st.Keys, st.Version)}
	}
	return db.saveState(true)
}

// stateEvery is how often flushes that add no key rewrite the state file
// (a write and a rename: 1.1 ms each on the 2-core test VM's disk, more
// than a flush of a few hot records): a state file behind the store by
// up to this much still catches a rollback to before it. Flushes that
// add keys, and Close's, always rewrite it.
const stateEvery = time.Second

// saveState writes the store's state file when the keys or the version
// changed since it was last written: at once when force is set or keys
// were added, otherwise at most every stateEvery. Callers hold flushMu,
// or own db.
func (db *DB) saveState(force bool) error {
	if db.opts.InMemory {
		return nil
	}
	if !force && db.keys == db.state.Keys && time.Since(db.stateAt) < stateEvery {
		return nil
	}
	st := storeState{Keys: db.keys, Version: db.bdb.MaxVersion()}
	if st == db.state {
		return nil
	}
	if err := writeState(db.opts.Dir, st); err != nil {
		return fmt.Errorf("history: write %s: %w", stateFile, err)
	}
	db.state, db.stateAt = st, time.Now()
	return nil
}

const metaPrefix = "m/fp/"

// load reads every record: the current fingerprint's into recs, the
// others' (the most recent per key) into old, weakened.
func (db *DB) load() error {
	type oldRec struct {
		r  Record
		fp string
	}
	olds := map[Key]oldRec{}
	descs := map[string]string{}
	err := db.bdb.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Seek([]byte("m/")); it.ValidForPrefix([]byte(metaPrefix)); it.Next() {
			item := it.Item()
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			descs[string(item.Key()[len(metaPrefix):])] = string(v)
		}
		for it.Seek([]byte(keySchema)); it.ValidForPrefix([]byte("r/")); it.Next() {
			item := it.Item()
			fp, k, err := parseKey(item.Key())
			var r Record
			if err == nil {
				err = item.Value(func(v []byte) error { return decodeValue(v, &r) })
			}
			if err != nil {
				db.stats.Skipped++
				db.log.Warn().Err(err).Str("key", fmt.Sprintf("%q", item.Key())).Msg("history: skipped an unreadable record")
				continue
			}
			r.Key = k
			if fp == db.fp {
				db.recs[k] = &entry{key: item.KeyCopy(nil), rec: r, flushedN: r.N, stored: true}
			} else if o, ok := olds[k]; !ok || r.Updated.After(o.r.Updated) {
				olds[k] = oldRec{r, fp}
			}
		}
		// Keys outside both prefixes belong to no schema this build knows
		// ("r/2/..." records were counted above).
		for it.Rewind(); it.Valid(); it.Next() {
			db.keys++
			if key := it.Item().Key(); len(key) < 2 || (key[0] != 'r' && key[0] != 'm') || key[1] != '/' {
				db.stats.Skipped++
				db.log.Warn().Str("key", fmt.Sprintf("%q", key)).Msg("history: skipped a key of unknown schema")
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("history: read store: %w", err)
	}
	fromFPs := map[string]int{}
	for k, o := range olds {
		if _, ok := db.recs[k]; ok {
			continue
		}
		db.old[k] = weaken(o.r, db.opts.PriorWeight)
		fromFPs[o.fp]++
	}
	for fp, n := range fromFPs {
		db.log.Info().Str("old_fingerprint", fp).Str("old_hardware", descs[fp]).
			Str("fingerprint", db.fp).Str("hardware", db.opts.Fingerprint.Desc).
			Int("records", n).Float64("prior_weight", db.opts.PriorWeight).
			Msg("history: hardware fingerprint changed; old records kept and used only as weakened priors")
	}
	db.stats.Old = len(db.old)
	if _, ok := descs[db.fp]; !ok {
		err = db.bdb.Update(func(txn *badger.Txn) error {
			return txn.Set([]byte(metaPrefix+db.fp), []byte(db.opts.Fingerprint.Desc))
		})
		if err != nil {
			return fmt.Errorf("history: write fingerprint: %w", err)
		}
		db.keys++
	}
	return nil
}

// weaken returns r's posterior with only a fraction w of its evidence kept
// over its prior (or, when the prior is unknown, over a vague prior
// centred on the posterior: κ and α near zero).
func weaken(r Record, w float64) bandit.NormalGamma {
	base := r.Prior
	if base == (bandit.NormalGamma{}) {
		base = bandit.NormalGamma{Mu: r.Posterior.Mu, Kappa: 1e-3, Alpha: 1e-3, Beta: 1e-3 * r.Posterior.Beta / r.Posterior.Alpha}
	}
	p := r.Posterior
	p.Discount(base, w)
	return p
}

// Load implements Store: it calls fn for every posterior of the current
// fingerprint, pending updates included, then for each weakened record of
// an old fingerprint whose key the current one lacks. fn must not call
// back into the DB.
func (db *DB) Load(fn func(k Key, p bandit.NormalGamma)) error {
	for _, r := range db.Records() {
		fn(r.Key, r.Posterior)
	}
	db.mu.Lock()
	olds := make([]Record, 0, len(db.old))
	for k, p := range db.old {
		if _, ok := db.recs[k]; !ok {
			olds = append(olds, Record{Key: k, Posterior: p})
		}
	}
	db.mu.Unlock()
	for _, r := range olds {
		fn(r.Key, r.Posterior)
	}
	return nil
}

// Records returns the current fingerprint's records, pending updates
// included (it collects the attached Sources first), in no particular
// order. The caller owns the slice.
func (db *DB) Records() []Record {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.pull(false)
	out := make([]Record, 0, len(db.recs))
	for _, e := range db.recs {
		out = append(out, e.rec)
	}
	return out
}

// Put implements Store. It never does I/O: the record waits in memory for
// the next flush. The record keeps the prior last given for k by
// PutWithPrior. A non-finite or non-positive posterior is refused and
// counted (Stats.Rejected).
func (db *DB) Put(k Key, p bandit.NormalGamma) { db.put(k, nil, p) }

// PutWithPrior implements PriorPutter: Put, with the prior p grew from.
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

// Attach implements Puller: from now on each flush, Close, Records, Load
// and Stats first collect src into the store's memory, where its
// posteriors replace the records of their keys (prior included) and add
// their n to the records' N. src's reports through Updated count toward
// FlushEvery like Puts. A collected posterior or prior that is not finite
// and positive is refused and counted (Stats.Rejected). Attach after Close
// returns an Attachment that does nothing.
func (db *DB) Attach(src Source) Attachment {
	a := &attachment{db: db, src: src}
	db.mu.Lock()
	if !db.closed {
		db.srcs = append(db.srcs, a)
	}
	db.mu.Unlock()
	return a
}

// attachment is a Source attached to a DB.
type attachment struct {
	db  *DB
	src Source
}

// Updated adds the Source's report to the records waiting and kicks the
// flusher once they and the records the store holds (held) reach
// FlushEvery.
func (a *attachment) Updated(n int) {
	if a.db.waiting.Add(int64(n))+a.db.held.Load() >= int64(a.db.opts.FlushEvery) && a.db.claimKick() {
		a.db.kickFlusher()
	}
}

func (a *attachment) Threshold() int { return a.db.opts.FlushEvery }

func (a *attachment) Detach() {
	db := a.db
	db.mu.Lock()
	defer db.mu.Unlock()
	if i := slices.Index(db.srcs, a); i >= 0 {
		a.src.Collect(db.emit, false)
		db.srcs = slices.Delete(db.srcs, i, i+1)
	}
}

// pull collects every attached Source into recs; flush says that this is
// a flush's collection (Source.Collect). Every record reported so far is
// collected then (and counted in held): waiting restarts from the reports
// that come after. Callers hold db.mu (which also keeps one Collect at a
// time).
func (db *DB) pull(flush bool) {
	reported := db.waiting.Load()
	for _, a := range db.srcs {
		a.src.Collect(db.emit, flush)
	}
	db.waiting.Add(-reported)
}

// collected is the emit function of pull: a Source's posterior of k, grown
// from prior by n updates since the last collection. Callers hold db.mu.
func (db *DB) collected(k Key, prior, p bandit.NormalGamma, n uint64) {
	if !validNG(p) || !validNG(prior) {
		db.stats.Rejected++
		return
	}
	e := db.lookup(k)
	e.rec.Posterior, e.rec.Prior = p, prior
	e.rec.N += n
	db.markDirty(e)
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

// Flush collects the attached Sources, writes the pending records now, in
// one batch, and returns when they are written. The background flusher
// calls it; callers rarely need to (Close and Export flush).
func (db *DB) Flush() error { return db.flush(false, false) }

// flush is Flush; last (Close's flush) makes its collection the last: the
// Sources are let go. full (the flush a kick asked for) writes only if
// FlushEvery records wait once the Sources are collected: reports lag and
// may, in a race with a collection, count a record twice, so the
// collected count decides. That first collection is not a flush's (the
// Sources hold back their reports of what it took); when the count is
// reached, a flush's collection follows and the batch is written.
func (db *DB) flush(last, full bool) error {
	db.flushMu.Lock()
	defer db.flushMu.Unlock()
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
	err := db.write()
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
		if serr := db.saveState(last); serr != nil {
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

// Stats returns the DB's counters. It collects the attached Sources first,
// so that Pending counts their updates exactly.
func (db *DB) Stats() Stats {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.pull(false)
	s := db.stats
	s.Records = len(db.recs)
	s.Pending = len(db.dirty)
	return s
}

// Fingerprint returns the fingerprint that scopes this DB's records.
func (db *DB) Fingerprint() Fingerprint { return db.opts.Fingerprint }

// Close implements Store: it stops the flusher, collects the attached
// Sources a last time, writes what is pending and closes Badger. Puts after
// Close are refused (Stats.Rejected), and Sources are no longer collected;
// a second Close returns ErrClosed.
func (db *DB) Close() error {
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return ErrClosed
	}
	db.closed = true
	db.mu.Unlock()
	close(db.stop)
	<-db.done
	ferr := db.flush(true, false)
	return errors.Join(ferr, db.bdb.Close())
}

// badgerLogger routes Badger's log to zerolog: its warnings and errors
// only (its info lines report every compaction and vlog rotation).
type badgerLogger struct{ l zerolog.Logger }

func (b badgerLogger) Errorf(f string, a ...any) {
	b.l.Error().Msg("badger: " + strings.TrimSpace(fmt.Sprintf(f, a...)))
}

func (b badgerLogger) Warningf(f string, a ...any) {
	b.l.Warn().Msg("badger: " + strings.TrimSpace(fmt.Sprintf(f, a...)))
}
func (badgerLogger) Infof(string, ...any)  {}
func (badgerLogger) Debugf(string, ...any) {}
