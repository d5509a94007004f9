package executor

import "errors"

// Sentinel errors of the Executor's own. An op's error otherwise wraps a
// backend's (*backends.DeviceError), a kernels error for a malformed
// Spec, or the Scheduler's (adaptive.ErrNoBackend, adaptive.ErrClosed);
// test them with errors.Is.
var (
	// ErrAllFailed marks an op that every capable backend failed; the
	// error joins each backend's *backends.DeviceError.
	ErrAllFailed = errors.New("executor: every capable backend failed")
	// ErrTensorLost marks a tensor whose only valid copy was on a lost
	// device and that cannot be recomputed: it was written by the host
	// and never read back, or an input of the op that produced it has
	// since been written or freed.
	ErrTensorLost = errors.New("executor: tensor lost with its device")
	// ErrBadTensor marks a buffer that is not a live Tensor of this
	// Executor, or one whose size does not match the op.
	ErrBadTensor = errors.New("executor: bad tensor")
)
