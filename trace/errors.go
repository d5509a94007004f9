package trace

import "errors"

// Sentinel errors of the trace format. Errors returned by this package
// wrap one of these; test them with errors.Is.
var (
	// ErrInvalidOptions marks RecorderOptions or ReaderOptions that
	// NewRecorder or NewReader rejects (a negative queue or line length).
	ErrInvalidOptions = errors.New("trace: invalid options")
	// ErrTrace marks a malformed trace line or header; the error text
	// names the file and line (name:line: message).
	ErrTrace = errors.New("trace: bad trace")
	// ErrLineTooLong marks a trace line longer than the reader's MaxLine.
	ErrLineTooLong = errors.New("trace: line too long")
	// ErrChrome marks a Chrome trace that cannot be imported.
	ErrChrome = errors.New("trace: bad chrome trace")
)
