package cpu

import "errors"

// ErrInvalidOptions marks Options that New rejects: a negative thread
// count or an empty backend name.
var ErrInvalidOptions = errors.New("cpu: invalid options")

// ErrUnknownArg marks a registry argument the CPU backends do not know
// ("cpu:xyz"); the only one is "gonum".
var ErrUnknownArg = errors.New("cpu: unknown backend argument")

// ErrClosed marks a call on a closed backend.
var ErrClosed = errors.New("cpu: backend closed")
