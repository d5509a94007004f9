package main

import "errors"

// Sentinel errors of the command; run maps them to exit statuses.
var (
	// errUsage marks bad flags or arguments: usage printed, exit status 2.
	errUsage = errors.New("replay: usage")
	// errInput marks input that cannot be replayed as a whole (no
	// comparable op, too many backends, a model that names nothing); bad
	// lines report their own file:line and wrap history's or sim's
	// sentinels instead.
	errInput = errors.New("replay: bad input")
)
