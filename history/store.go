package history

import "github.com/adaptsched/adaptsched/bandit"

// Key names one posterior: a backend and a bucket, under the store's
// hardware fingerprint and schema version.
type Key struct {
	Backend string // the backend's registered name ("cpu", "sim:mi300x")
	Bucket  string // the bucket's stable name, as adaptive formats it ("MatMul/f32/s42")
}

// Store persists posteriors. The scheduler loads it at start-up (warm
// start) and hands it every updated posterior, by Put, or, when the store
// is also a Puller, by letting it collect them at each flush.
// Implementations are safe for concurrent use; Put never waits for the
// disk.
type Store interface {
	// Load calls fn for every stored posterior (for a changed fingerprint:
	// the old records, weakened into priors).
	Load(fn func(k Key, p bandit.NormalGamma)) error
	// Put records p as the latest posterior of k (write-behind).
	Put(k Key, p bandit.NormalGamma)
	// Close flushes what is pending and releases the store.
	Close() error
}

// PriorPutter is an optional capability of a Store: Put together with the
// prior the posterior grew from. Merging snapshots (DB.Import with
// ImportMerge) is exact only for records whose prior is known, because
// bandit.Merge recovers each side's observations as posterior minus prior.
// The scheduler calls PutWithPrior when the store has it (type assertion)
// and Put otherwise. When a store lacks it, or Put is used, the record
// keeps the prior last given for its key, or none: such records merge by
// keeping the side with more evidence (counted in ImportStats.Inexact).
type PriorPutter interface {
	// PutWithPrior records p as the latest posterior of k, grown from
	// prior (write-behind, like Put).
	PutWithPrior(k Key, prior, p bandit.NormalGamma)
}

// Source holds posteriors that a store pulls when it flushes, instead of
// having each update handed to it by Put: the owner of the posteriors
// (adaptive.Scheduler) only marks what changed, and the store's flusher
// collects it. See Puller.
type Source interface {
	// Collect calls emit once for every posterior changed since the
	// previous Collect: its key, the prior it grew from, the posterior,
	// and n, the updates (observations) it has had since, which the
	// store adds to the record's N; n may be 0 for a posterior changed
	// otherwise (discounted by its bucket's other observations). flush
	// says that the store writes what it collects now; otherwise (Stats,
	// Records, Load) it holds the records until its next flush, and the
	// Source does not report them again (Attachment.Updated) when they
	// change before then. The store calls Collect from one goroutine at
	// a time; emit must not call back into the Source, and Collect must
	// not call into the store.
	Collect(emit func(k Key, prior, p bandit.NormalGamma, n uint64), flush bool)
}

// Puller is an optional capability of a Store: pulling posteriors from a
// Source at each flush (and on Close) rather than receiving them by Put,
// which takes the store off its caller's hot path. The scheduler attaches
// itself when its store has it (type assertion) and falls back to
// PutWithPrior or Put otherwise.
type Puller interface {
	// Attach makes the store collect src at every flush, and on Close,
	// until the returned Attachment is detached.
	Attach(src Source) Attachment
}

// Attachment is a Source's registration with a Puller.
type Attachment interface {
	// Updated reports n more records waiting in the Source: posteriors
	// changed since its last collection (one per key, however often it
	// changed). It only counts: once Threshold records (pushed or
	// reported) wait, the store flushes before its interval is up. It
	// never blocks or does I/O, and is safe for concurrent use.
	Updated(n int)
	// Threshold returns how many waiting records trigger a flush (DB:
	// Options.FlushEvery).
	Threshold() int
	// Detach collects the Source one last time, keeps what it gives for
	// the next flush, and stops pulling from it. Updates the Source makes
	// later are not stored. Detach after the store's Close does nothing;
	// a second Detach does nothing.
	Detach()
}
