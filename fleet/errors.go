package fleet

import "errors"

var (
	// ErrOptions reports an invalid Options value.
	ErrOptions = errors.New("fleet: invalid options")
	// ErrMalformed reports a value that is not a fleet record set this
	// build reads.
	ErrMalformed = errors.New("fleet: malformed value")
	// ErrClosed reports a call on a closed Node.
	ErrClosed = errors.New("fleet: node closed")
)

// ErrOffline reports that the node cannot publish now: it has no
// key-value bucket (the server is down or unreachable), or has not yet
// read its own values back after a start (Node.Flush).
var ErrOffline = errors.New("fleet: offline")
