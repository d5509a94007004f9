package history

import "errors"

// Sentinel errors of the posterior store. Errors
// returned by this package wrap one of these; test them with errors.Is.
var (
	// ErrInvalidOptions marks an Options value that Open rejects (a
	// missing directory, a prior weight outside [0, 1], a memtable under
	// 8 MiB, an empty fingerprint or one containing '/').
	ErrInvalidOptions = errors.New("history: invalid options")
	// ErrLocked marks a store directory that another process (or another
	// DB in this one) holds open: Badger's directory lock.
	ErrLocked = errors.New("history: store is in use by another process")
	// ErrClosed marks a call on a closed DB.
	ErrClosed = errors.New("history: store is closed")
	// ErrSnapshot marks a posterior snapshot (Import) that is malformed, of
	// an unknown format or version, or of another hardware fingerprint.
	ErrSnapshot = errors.New("history: bad snapshot")
)

// ErrDamaged marks a store directory whose files are damaged, or that
// opens with fewer records or an older version than it last held: Open
// refuses it rather than let Badger replace or roll it back. The error is
// a *DamagedError naming the directory and the way out.
var ErrDamaged = errors.New("history: store is damaged")

// DamagedError is Open's error for a damaged store: Dir is the store's
// directory, Reason what is wrong with it. It wraps ErrDamaged.
type DamagedError struct {
	Dir    string
	Reason string
}

func (e *DamagedError) Error() string {
	return "history: store " + e.Dir + " is damaged: " + e.Reason +
		"; its tables and MANIFEST were left as they were. Restore it from a backup, or move it aside and start afresh " +
		"(Options.WithMoveDamaged; the commands' -reset-damaged-store flag)"
}

func (e *DamagedError) Unwrap() error { return ErrDamaged }
