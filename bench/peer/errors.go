package peer

import "errors"

// The errors of the package.
var (
	// ErrStream wraps every error of a malformed stream file.
	ErrStream = errors.New("peer: bad stream")
	// ErrNoBLAS means OpenBLAS (libopenblas.so.0) could not be loaded, or
	// this build has no cgo; the error says which.
	ErrNoBLAS = errors.New("peer: no OpenBLAS")
	// ErrStarPU wraps a failed or unreadable run of the StarPU program.
	ErrStarPU = errors.New("peer: starpu run")
)
