// Package history persists what the scheduler learns (DESIGN.md §
// Persistence); the trace format, what it does, is package trace.
//
// The posterior store, DB, keeps one bandit.NormalGamma per (backend,
// bucket) in Badger, under a schema version and a hardware fingerprint
// (package hardware).
// Load gives a Scheduler its warm start (adaptive.Config.Warm); Write
// keeps a batch of a Scheduler's changes (learned.Change) and writes it,
// with every pending record, in one Badger batch: package relay calls it
// from its goroutine, on its schedule (every second, or once 1,024
// changed records wait, by default), so a crash loses at most the last
// interval and never corrupts the store. The DB starts no goroutine and
// never calls a Scheduler. Put (and PutWithPrior) write one posterior
// into memory for the next write, for tools and tests. A record changed
// many times between two writes is written once.
// Each record keeps the prior it grew from (a Scheduler's, or PutWithPrior's),
// which is what makes Export/Import with ImportMerge exact: posteriors are
// sufficient statistics, so a fleet of identical machines can pool what
// each learned. Opening with another fingerprint keeps the old records and
// offers them through Load only as weakened priors.
//
// # Usage
//
// Example (example_test.go) opens a store, puts a posterior with its
// prior and loads it back (a warm start). A Scheduler's posteriors reach
// the store through a relay (relay.Start(s, relay.Options{Store: db}));
// DB.PutWithPrior, which never waits for the disk, is for tools; Export
// and Import move snapshots between machines.
//
// DB is safe for concurrent use.
package history
