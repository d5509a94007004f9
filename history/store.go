package history

import "github.com/adaptsched/adaptsched/bandit"

// Key names one posterior: a backend and a bucket, under the store's
// hardware fingerprint and schema version.
type Key struct {
	Backend string // the backend's registered name ("cpu", "sim:mi300x")
	Bucket  string // the bucket's stable name, as adaptive formats it ("MatMul/f32/s42")
}

// Store persists posteriors. The scheduler loads it at start-up (warm
// start) and hands it every updated posterior. Implementations are safe for
// concurrent use; Put never waits for the disk.
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
