package rocm

import (
	"errors"
	"fmt"
)

// Sentinel errors of package rocm. Failures of ops and transfers come back
// as *backends.DeviceError wrapping backends.ErrOutOfMemory,
// backends.ErrDeviceLost or a *CallError.
var (
	// ErrOptions marks an invalid Options value or registry argument.
	ErrOptions = errors.New("rocm: invalid options")
	// ErrCompile marks a kernel source that the runtime compiler rejected;
	// the error carries the compiler's log.
	ErrCompile = errors.New("rocm: kernel compile failed")
	// ErrClosed marks a call on a closed Device.
	ErrClosed = errors.New("rocm: device closed")
)

// CallError is a vendor call that returned a failure status.
type CallError struct {
	Call string // the function, as the vendor names it: "hipMalloc"
	Code int    // the status it returned
	Msg  string // the vendor's text for Code, empty if none
}

// Error implements error.
func (e *CallError) Error() string {
	if e.Msg != "" {
		return fmt.Sprintf("rocm: %s: error %d (%s)", e.Call, e.Code, e.Msg)
	}
	return fmt.Sprintf("rocm: %s: error %d", e.Call, e.Code)
}
