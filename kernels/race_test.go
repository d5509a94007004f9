//go:build race

package kernels

// raceEnabled: under the race detector sync.Pool drops a random share of
// the items put back (to shake out reuse bugs), so pooled scratch is
// reallocated and allocation counts mean nothing.
const raceEnabled = true
