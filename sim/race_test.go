//go:build race

package sim

// raceEnabled: the race detector slows reading several-fold, so the
// timing bounds of TestTableBounded hold without it only.
const raceEnabled = true
