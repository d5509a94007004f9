// Package trace is adaptsched's trace format (DESIGN.md § Traces): what
// a scheduler did, op by op, as JSON Lines: a Header, then one Event per
// op. Recorder writes it without ever blocking the caller; Reader streams
// it back in constant memory (gzip too); ImportChrome turns a PyTorch
// profiler (Kineto) trace into events with measured GPU durations.
//
// # Usage
//
// ExampleNewRecorder (example_test.go) records a trace and reads it
// back; the Executor records through a Recorder (executor.Config.Recorder),
// and cmd/replay reads traces and Chrome traces back.
//
// Recorder.Record and Recorder.Dropped are safe for concurrent use; a
// Reader is not.
package trace
