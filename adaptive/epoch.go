package adaptive

import (
	"math/bits"
	"sync/atomic"
)

// epochCounter is the engine's epoch: it counts the arms' milestones of
// learning (publish), where they publish into the corrections if their
// ratio is news (prior.go), and every Select asks whether it has more
// than doubled since its bucket last refreshed its priors (engine.refresh).
// Rule: a Select reads the count's floor, the count with all but its
// floorBits leading bits cleared, which changes 2^(floorBits−1) times
// per doubling, and the count itself only when the floor cannot tell; the
// two sit on different cache lines. Reason: a publication, one in about
// 64 decisions, writes the count, and each Select on the other core that
// read it then missed that line (BenchmarkSelectObserve's
// handle/2backends/parallel). The answers are the count's own.
type epochCounter struct {
	n     atomic.Uint64
	_     [56]byte // n, which every publication writes, apart from floor
	floor atomic.Uint64
}

// floorBits is how many leading bits of the count its floor keeps.
const floorBits = 6

// floorStep returns the distance from a floor f to the next: 1 while the
// count has at most floorBits bits.
func floorStep(f uint64) uint64 { return 1 << max(bits.Len64(f)-floorBits, 0) }

// add counts a publication. The adder whose count is a floor stores it,
// never lowering one that a later adder stored first.
func (c *epochCounter) add() {
	n := c.n.Add(1)
	if n&(floorStep(n)-1) != 0 {
		return
	}
	for f := c.floor.Load(); f < n && !c.floor.CompareAndSwap(f, n); f = c.floor.Load() {
	}
}

// load returns the count.
func (c *epochCounter) load() uint64 { return c.n.Load() }

// above returns the count and whether it is above t, reading the count
// only when its floor cannot tell: when t lies between the floor and the
// next. A floor that lags an add under way (another goroutine's) can
// only say no where the count would say yes, until that add stores it.
func (c *epochCounter) above(t uint64) (uint64, bool) {
	f := c.floor.Load()
	if f <= t && t-f >= floorStep(f)-1 {
		return 0, false // the count is below the next floor: at most t
	}
	n := c.n.Load()
	return n, n > t
}
