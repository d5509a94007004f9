package sim

import "errors"

// Sentinel errors. Every error of this package wraps one of these (or a
// backends or kernels sentinel, for errors a simulated device injects or
// a spec it rejects), so callers test them with errors.Is.
var (
	// ErrUnknownProfile: no profile has the name asked for.
	ErrUnknownProfile = errors.New("sim: unknown profile")
	// ErrInvalidProfile: a profile figure is impossible (negative, NaN,
	// a non-shared device without a link).
	ErrInvalidProfile = errors.New("sim: invalid profile")
	// ErrInvalidEvent: a scheduled event is malformed, or is of a kind the
	// harness cannot replay (errors are injected by Device only).
	ErrInvalidEvent = errors.New("sim: invalid event")
	// ErrInvalidWorkload: a workload's parameters are out of range.
	ErrInvalidWorkload = errors.New("sim: invalid workload")
	// ErrBadTable: a perf table has a malformed line; the error names the
	// file and the line.
	ErrBadTable = errors.New("sim: bad perf table")
	// ErrInvalidSetup: an arm was asked for the truth of an op it cannot
	// run (Arm.Truth).
	ErrInvalidSetup = errors.New("sim: invalid setup")
	// ErrDependency: queued work did not run because work it was queued
	// after failed; the error wraps that failure too.
	ErrDependency = errors.New("sim: queued after work that failed")
)
