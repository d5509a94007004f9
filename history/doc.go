// Package history persists what the scheduler learns and records what it
// does (DESIGN.md § Persistence, § Traces).
//
// The posterior store, DB, keeps one bandit.NormalGamma per (backend,
// bucket) in Badger, under a schema version and a hardware Fingerprint.
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
// The trace format is JSON Lines: a Header, then one Event per op.
// Recorder writes it without ever blocking the caller; Reader streams it
// back in constant memory (gzip too); ImportChrome turns a PyTorch
// profiler (Kineto) trace into events with measured GPU durations.
//
// # Usage
//
// Example (example_test.go) opens a store, puts a posterior with its
// prior and loads it back (a warm start); ExampleNewRecorder records a
// trace and reads it back. A Scheduler's posteriors reach the store by
// pulls at each flush (DB implements adaptive.Store: Load, Attach);
// DB.PutWithPrior, which never waits for the disk, is for tools; Export
// and Import move snapshots between machines.
//
// DB, Recorder.Record and Recorder.Dropped are safe for concurrent use; a
// Reader is not.
package history
