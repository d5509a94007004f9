package adaptive

import "errors"

// Sentinel errors. Every error that New, Select and Observe return wraps
// one of these (or a kernels error for a malformed Spec), so callers test
// them with errors.Is.
var (
	// ErrConfig marks an impossible Config: no backends, more than
	// MaxBackends, a nil backend, duplicate names, Only naming an unknown
	// backend, bad bandit tuning.
	ErrConfig = errors.New("adaptive: invalid config")
	// ErrNoBackend marks an op that no allowed backend can run: every
	// backend lacks the capability, is excluded by the caller's mask, or
	// the Only strategy's backend cannot run it. It wraps nothing further;
	// the message names the op and each backend's reason.
	ErrNoBackend = errors.New("adaptive: no backend can run this op")
	// ErrBadTiming marks a Timing that cannot be an observation: a zero,
	// negative or absurd duration.
	ErrBadTiming = errors.New("adaptive: bad timing")
	// ErrForeignDecision marks a Decision that this Scheduler did not
	// make (a zero Decision, or one from another Scheduler).
	ErrForeignDecision = errors.New("adaptive: decision not made by this scheduler")
	// ErrUnknownBackend marks a backend name or index that is not in the
	// Config, or has no host link (ObserveTransfer, ObserveTransferAt); an
	// Only strategy naming none is ErrConfig.
	ErrUnknownBackend = errors.New("adaptive: unknown backend")
	// ErrClosed marks a call after Close.
	ErrClosed = errors.New("adaptive: scheduler closed")
)
