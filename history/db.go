package history

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/hardware"
	"github.com/adaptsched/adaptsched/learned"
	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/rs/zerolog"
)

// DB is the Badger-backed posterior store. Load gives a Scheduler its
// warm start (adaptive.Config.Warm); Write keeps a Scheduler's changes
// and writes them in one batch (package relay calls it, on its own
// goroutine and schedule); Put records a posterior in memory for the
// next write. The DB starts no goroutine and never calls a Scheduler.
// All methods are safe for concurrent use.
type DB struct {
	opts   Options
	bdb    *badger.DB
	fp     string
	log    zerolog.Logger
	faults *faults // the first write fault: from it on nothing is written

	mu     sync.Mutex
	recs   map[learned.Key]*entry // every record of the current fingerprint
	dirty  []*entry
	spare  []*entry
	closed bool
	stats  Stats

	old map[learned.Key]bandit.NormalGamma // weakened records of other fingerprints

	// unread holds the current fingerprint's keys that Open found in
	// Badger but skipped (a newer build's record, or one that does not
	// decode). An entry made for one is already stored: counting it as a
	// new key would put the state file ahead of Badger and fail the next
	// Open as damaged (TestRewriteSkippedKeyIsNotDamage).
	unread map[learned.Key]bool

	// seen caches recs by the identity of a key's strings: a Scheduler
	// hands out the same strings in every change of a key, and comparing
	// two addresses costs less than hashing two strings
	// (BenchmarkStorePut holds the lookup's cost).
	seen [1 << seenBits]struct {
		k learned.Key
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
	Rejected int    // Puts and Changes refused: a non-finite or non-positive posterior or prior, a key too long, or after Close
	Flushes  int    // successful flushes that wrote at least one record
	Failed   int    // flushes that failed (their records stay dirty and are retried)
	Pending  int    // records waiting for the next flush
	Durable  uint64 // updates (Puts, and Changes' N) written by successful flushes, counted per record as N
	// Busy is the time spent in flushes that wrote records, from the
	// collection to Badger's commit (the flusher's share of a core).
	Busy time.Duration
}

// Open opens (creating it, mode 0700) the store that opts describe and
// reads its records. A directory that another process holds fails at once
// with ErrLocked; one of other files, or another program's Badger store,
// with ErrNotStore. Stored values that do not decode are skipped, counted in
// Stats.Skipped and logged. Records of another hardware fingerprint are
// kept on disk and offered by Load, weakened by opts.PriorWeight, for the
// keys the current fingerprint has not learned yet; a log line says so.
//
// A damaged store fails with a *DamagedError (ErrDamaged) naming the
// directory and what is wrong, and nothing in it is changed: a MANIFEST
// missing, unreadable or out of step with the tables; a table that does
// not open or fails its checksums; fewer keys or an older version than
// the store's state file (stateFile) recorded when it was last written. With
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
			if faultKind(err) != "" {
				return nil, &PermissionError{Dir: opts.Dir, Path: opts.Dir, Err: err}
			}
			return nil, fmt.Errorf("history: create %s: %w", opts.Dir, err)
		}
		// Refusals that are not damage come first: permissions, a
		// directory of other files, a disk too full to write safely.
		if err := checkAccess(opts.Dir); err != nil {
			return nil, err
		}
		if err := checkIsStore(opts.Dir); err != nil {
			return nil, err
		}
		if err := checkSpace(opts.Dir, spaceReserve(opts)); err != nil && !opts.trial {
			return nil, &FaultError{Dir: opts.Dir, What: "disk full", Err: err}
		}
		unlock, free, err := lockDir(opts.Dir)
		if err != nil {
			return nil, fmt.Errorf("history: open %s: %w", opts.Dir, err)
		}
		if !free {
			return nil, fmt.Errorf("%w: %s (Badger's directory lock)", ErrLocked, opts.Dir)
		}
		orphans, err := checkFiles(opts.Dir)
		if _, serr := os.Stat(filepath.Join(opts.Dir, badger.ManifestFilename)); err == nil && serr == nil && !opts.trial {
			// Badger writes as it opens (it replays its log into a new
			// table, rewrites the MANIFEST, truncates logs): what only an
			// open store shows is looked for in a copy, so that a damaged
			// store is never written to.
			if _, ok, _ := readState(opts.Dir); !ok && len(orphans) > 0 {
				opts.Logger.Warn().Str("dir", opts.Dir).Strs("tables", orphans).
					Msg("history: tables not in the MANIFEST (left by a crash, or a MANIFEST truncated); the store has no state file to tell, so Badger deletes them")
				orphans = nil
			}
			err = trialOpen(opts, orphans)
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
	fl := newFaults(opts.Dir, opts.Logger)
	bo = bo.WithLogger(badgerLogger{opts.Logger, fl}).
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
			return nil, fmt.Errorf("%w: %s (Badger's directory lock)", ErrLocked, opts.Dir)
		}
		switch k := faultKind(err); k {
		case "permission denied", "read-only file system":
			return nil, &PermissionError{Dir: opts.Dir, Path: opts.Dir, Err: shortErr(err)}
		case "disk full", "I/O error":
			return nil, &FaultError{Dir: opts.Dir, What: k, Err: shortErr(err)}
		}
		return nil, &DamagedError{Dir: opts.Dir, Reason: "Badger cannot open it: " + shortErr(err).Error()}
	}
	db := &DB{
		opts: opts, bdb: bdb, fp: opts.Fingerprint.Hash, log: opts.Logger, faults: fl,
		recs: make(map[learned.Key]*entry), old: make(map[learned.Key]bandit.NormalGamma),
		unread: make(map[learned.Key]bool),
	}
	if err := db.loadChecked(); err != nil {
		bdb.Close()
		return nil, err
	}
	fl.armed.Store(true)
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

// stateEvery is how often flushes that add no key rewrite the state file.
// Rule: at most once a second, always when keys were added or at Close.
// Reason: the rewrite is a write and a rename, a disk round trip that
// costs more than a flush of a few hot records, and a state file behind
// the store by up to a second still catches a rollback to before it
// (TestStateFile).
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
	// Badger's writes reach the disk before a state file that counts
	// them: the state is never ahead of the store after a power cut,
	// which Open would take for a store rolled back (without SyncWrites,
	// Badger's log is synced only here).
	err := db.bdb.Sync()
	if err == nil {
		err = writeState(db.opts.Dir, st)
	}
	if err != nil {
		if k := faultKind(err); k != "" && db.faults.armed.Load() {
			db.faults.set(k, err) // an unwritable directory shows here first: the log's writes go through a map
		}
		return fmt.Errorf("history: write %s: %w", stateFile, err)
	}
	db.state, db.stateAt = st, time.Now()
	return nil
}

const metaPrefix = "m/fp/"

// scanKeys counts the store's keys and skips, counted and logged, those
// outside both prefixes, which belong to no schema this build knows
// ("r/2/..." records were counted by load). A store with keys and none
// of them ours is another program's: refused before a word is logged or
// a byte written (TestOtherProgramsStore).
func (db *DB) scanKeys(it *badger.Iterator) error {
	var ours bool
	var first []byte // the first key not ours
	var unknown [][]byte
	for it.Rewind(); it.Valid(); it.Next() {
		db.keys++
		key := it.Item().Key()
		if bytes.HasPrefix(key, []byte("r/")) || bytes.HasPrefix(key, []byte(metaPrefix)) {
			ours = true
			continue
		}
		if first == nil {
			first = it.Item().KeyCopy(nil)
		}
		if len(key) < 2 || (key[0] != 'r' && key[0] != 'm') || key[1] != '/' {
			unknown = append(unknown, it.Item().KeyCopy(nil))
		}
	}
	if !ours && db.keys > 0 {
		return &foreignStoreError{Dir: db.opts.Dir, Keys: db.keys, Key: string(first)}
	}
	for _, key := range unknown {
		db.stats.Skipped++
		db.log.Warn().Str("key", fmt.Sprintf("%q", key)).Msg("history: skipped a key of unknown schema")
	}
	return nil
}

// load reads every record: the current fingerprint's into recs, the
// others' (the most recent per key) into old, weakened.
func (db *DB) load() error {
	type oldRec struct {
		r  Record
		fp string
	}
	olds := map[learned.Key]oldRec{}
	descs := map[string]string{}
	err := db.bdb.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Seek([]byte(metaPrefix)); it.ValidForPrefix([]byte(metaPrefix)); it.Next() {
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
				if err != nil && fp == db.fp {
					db.unread[k] = true
				}
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
		return db.scanKeys(it)
	})
	var fe *foreignStoreError
	if errors.As(err, &fe) {
		return err
	}
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

// Load returns the posteriors a Scheduler warm-starts from
// (adaptive.Config.Warm): every record of the current fingerprint,
// pending updates included, and for each key the current one lacks the
// weakened record of an old fingerprint. The caller owns the map.
func (db *DB) Load() map[learned.Key]bandit.NormalGamma {
	db.mu.Lock()
	defer db.mu.Unlock()
	out := make(map[learned.Key]bandit.NormalGamma, len(db.recs)+len(db.old))
	for k, p := range db.old {
		out[k] = p
	}
	for k, e := range db.recs {
		out[k] = e.rec.Posterior
	}
	return out
}

// Records returns the current fingerprint's records, pending updates
// included, in no particular order. The caller owns the slice.
func (db *DB) Records() []Record {
	db.mu.Lock()
	defer db.mu.Unlock()
	out := make([]Record, 0, len(db.recs))
	for _, e := range db.recs {
		out = append(out, e.rec)
	}
	return out
}

// Stats returns the DB's counters.
func (db *DB) Stats() Stats {
	db.mu.Lock()
	defer db.mu.Unlock()
	s := db.stats
	s.Records = len(db.recs)
	s.Pending = len(db.dirty)
	return s
}

// Fingerprint returns the fingerprint that scopes this DB's records.
func (db *DB) Fingerprint() hardware.Fingerprint { return db.opts.Fingerprint }

// Close writes what is pending and closes Badger. Puts and Writes after
// Close are refused (Stats.Rejected); a second Close returns ErrClosed.
//
// After a write fault (a *FaultError, which Close returns) Badger is left
// as it is rather than closed: closing writes its memtable into a table,
// through a memory map that a full disk answers with SIGBUS, and Badger
// retries a table it cannot create every second for ever. What was
// flushed is in its log, which the next Open replays; the directory stays
// locked until the process exits. Close returns as soon as such a fault
// occurs, whatever Badger is doing (TestCloseUnwritable).
func (db *DB) Close() error {
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return ErrClosed
	}
	db.closed = true
	db.mu.Unlock()
	closed := make(chan error, 1)
	go func() {
		ferr := db.flush(true)
		if fe := db.faults.get(); fe != nil {
			closed <- fe
			return
		}
		if !db.opts.InMemory {
			if err := checkSpace(db.opts.Dir, spaceReserve(db.opts)); err != nil {
				db.faults.set("disk full", err)
				closed <- db.faults.get()
				return
			}
		}
		closed <- errors.Join(ferr, db.bdb.Close())
	}()
	select {
	case err := <-closed:
		return err
	case <-db.faults.ch:
		return db.faults.get()
	}
}

// badgerLogger routes Badger's log to zerolog: its warnings and errors
// only (its info lines report every compaction and vlog rotation). Once
// the store is open, an error is a write fault (f): Badger logs the
// failures of its own writes, and retries them every second for ever.
type badgerLogger struct {
	l zerolog.Logger
	f *faults
}

func (b badgerLogger) Errorf(f string, a ...any) {
	msg := "badger: " + strings.TrimSpace(fmt.Sprintf(f, a...))
	if b.f != nil && b.f.armed.Load() {
		b.f.set(faultKindOf(msg), errors.New(msg)) // logs the first only
		return
	}
	b.l.Error().Msg(msg)
}

func (b badgerLogger) Warningf(f string, a ...any) {
	b.l.Warn().Msg("badger: " + strings.TrimSpace(fmt.Sprintf(f, a...)))
}
func (badgerLogger) Infof(string, ...any)  {}
func (badgerLogger) Debugf(string, ...any) {}
