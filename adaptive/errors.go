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
	// Config (ObserveTransfer, Only).
	ErrUnknownBackend = errors.New("adaptive: unknown backend")
	// ErrClosed marks a call after Close.
	ErrClosed = errors.New("adaptive: scheduler closed")
	// ErrAllFailed marks an Executor op that every capable backend
	// failed; the error joins each backend's *backends.DeviceError.
	ErrAllFailed = errors.New("adaptive: every capable backend failed")
	// ErrTensorLost marks a tensor whose only valid copy was on a lost
	// device and that cannot be recomputed: it was written by the host
	// and never read back, or an input of the op that produced it has
	// since been written or freed.
	ErrTensorLost = errors.New("adaptive: tensor lost with its device")
	// ErrBadTensor marks a buffer that is not a live Tensor of this
	// Executor, or one whose size does not match the op.
	ErrBadTensor = errors.New("adaptive: bad tensor")
)
