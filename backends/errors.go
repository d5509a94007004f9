package backends

import (
	"errors"
	"fmt"
)

// Sentinel errors. A backend's errors wrap one of these so that the
// scheduler and the executor can tell a capability gap from a failure.
var (
	// ErrUnavailable: the backend cannot be opened on this machine (no
	// library, no device). Open returns an *UnavailableError with the reason.
	ErrUnavailable = errors.New("backends: unavailable")
	// ErrUnsupported: the backend cannot run this op, dtype or size.
	ErrUnsupported = errors.New("backends: op not supported")
	// ErrOutOfMemory: an allocation failed; freeing cold buffers may help.
	ErrOutOfMemory = errors.New("backends: out of memory")
	// ErrDeviceLost: the device stopped responding; the backend is unusable
	// until reopened.
	ErrDeviceLost = errors.New("backends: device lost")
	// ErrTransient: the call failed but the same call may succeed later.
	ErrTransient = errors.New("backends: transient failure")
	// ErrForeignBuffer: a buffer of another backend, or a freed one, was
	// passed in.
	ErrForeignBuffer = errors.New("backends: buffer does not belong to this backend")
	// ErrNeedsParam: the driver opens nothing by its bare name: it needs a
	// parameter ("sim:h100", "adaptive:cpu,cpu1"). An *UnavailableError
	// with NeedsParam set wraps it besides ErrUnavailable.
	ErrNeedsParam = errors.New("backends: the driver needs a parameter (NAME:PARAM)")
	// ErrUnknownBackend: Open was given a name no driver is registered
	// under; the error lists the registered ones.
	ErrUnknownBackend = errors.New("backends: unknown backend")
)

// UnavailableError says why a backend could not be opened: every library
// path tried and its dlerror text, or the device count that came back.
type UnavailableError struct {
	Backend string
	Reason  string
	// NeedsParam says that the driver was opened without the parameter
	// it needs (ErrNeedsParam), rather than being unavailable here.
	NeedsParam bool
	// Cause, when not nil, is the error Reason tells of, for errors.Is
	// (a simulator profile that does not exist: sim.ErrUnknownProfile).
	Cause error
}

// Error implements error.
func (e *UnavailableError) Error() string {
	return fmt.Sprintf("backends: %s unavailable: %s", e.Backend, e.Reason)
}

// Unwrap returns ErrUnavailable, ErrNeedsParam when NeedsParam is set,
// and Cause when there is one.
func (e *UnavailableError) Unwrap() []error {
	errs := []error{ErrUnavailable}
	if e.NeedsParam {
		errs = append(errs, ErrNeedsParam)
	}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	return errs
}

// DeviceError is a failure of one op (or transfer, Op "write"/"read") on
// one backend. Err wraps one of the sentinels or a kernels error.
type DeviceError struct {
	Backend string
	Op      string
	Err     error
}

// Error implements error.
func (e *DeviceError) Error() string {
	return fmt.Sprintf("%s: %s: %v", e.Backend, e.Op, e.Err)
}

// Unwrap returns the underlying error.
func (e *DeviceError) Unwrap() error { return e.Err }
