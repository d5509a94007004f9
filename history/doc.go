// Package history persists what the scheduler learns (DESIGN.md §
// Persistence); the trace format, what it does, is package trace.
//
// The posterior store, DB, keeps one bandit.NormalGamma per (backend,
// bucket) in Badger, under a schema version and a hardware fingerprint
// (package hardware).
// DB implements adaptive.Store: a Scheduler attached with Attach is
// pulled: it only marks what changed and reports a count, and each flush
// starts by collecting the changed posteriors from it, so the store costs
// the scheduler's hot path next to nothing. Put (and PutWithPrior) write
// one posterior into memory, for tools and tests. A background goroutine
// writes the dirty records in one batch
// per flush (every second, or once 1,024 changed records wait, by
// default) and on Close, so a crash loses at most the last interval and
// never corrupts the store. A record changed many times between two
// flushes is written once.
// Each record keeps the prior it grew from (a Scheduler's, or PutWithPrior's),
// which is what makes Export/Import with ImportMerge exact: posteriors are
// sufficient statistics, so a fleet of identical machines can pool what
// each learned. Opening with another fingerprint keeps the old records and
// offers them through Load only as weakened priors.
//
// # Usage
//
// Example (example_test.go) opens a store, puts a posterior with its
// prior and loads it back (a warm start). A Scheduler's posteriors reach the store by
// pulls at each flush (DB implements adaptive.Store: Load, Attach);
// DB.PutWithPrior, which never waits for the disk, is for tools; Export
// and Import move snapshots between machines.
//
// DB is safe for concurrent use.
package history
