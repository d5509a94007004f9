// Package weightcache decides which weights a device keeps in its memory
// budget when their home is host memory: the rule the executor's GPU
// weight cache and the simulator's thompson policy share.
//
// A weight is worth keeping by the time it is expected to save per byte
// of budget: its recent use rate (uses decayed with a half-life, in the
// caller's steps) × what a resident use saves (Weight.SavedUs, averaged
// over its uses: at most one copy over the link) ÷ its bytes
// (TestWorthBySavings). A weight is admitted when it fits in free budget, or when every
// weight it would evict is worth less by the hysteresis margin, so two
// weights of about the same worth do not evict each other in turn
// (TestNoThrashing). A weight the op did not copy (it ran elsewhere) is
// copied in for its own sake only when its expected uses × what a
// resident use saves (averaged over its uses) cover the copy
// (TestCopyMustPayBack, TestFreeRoomFillsByRate, TestSavedAveraged);
// Wants tells a caller beforehand, so that the op can run on the copy,
// and the Use that follows keeps that copy as Wants said (TestWantsPromise).
// Resident bytes never exceed the budget (TestBudgetNeverExceeded). A
// caller that places ops in a few ways as a whole names each (SetRegime),
// and a weight is weighed by what its uses in the current one saved
// (TestSavedPerRegime). A Cache is not safe for concurrent use.
package weightcache

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// ErrInvalid wraps the errors of bad arguments.
var ErrInvalid = errors.New("weightcache: invalid")

// Options tune the rule; the zero value takes the defaults.
type Options struct {
	// HalfLife is the steps after which a use counts half (default 32):
	// long enough that a weight used once per decode step keeps its worth
	// across a step's other weights, short enough to follow a drift of
	// the routing within a few hundred steps.
	HalfLife float64
	// Margin is the hysteresis: a weight evicts others only if it is worth
	// more than (1 + Margin) × each of them (default 0.25).
	Margin float64
	// MinUses is the decayed uses a weight needs before it evicts another
	// for its own sake (Use with copied false; default 2): a weight used
	// once is not worth another's place. Into free room the rate of its
	// uses decides, which one use does not give.
	MinUses float64
}

// Weight is one tensor whose home is host memory.
type Weight struct {
	ID     int     // the caller's dense index, ≥ 0
	Bytes  int64   // > 0
	CopyUs float64 // one copy's expected time over the link, µs (> 0)
	// SavedUs is what one use expects to save when the weight is
	// resident: the cheapest way to run the op without it (its copy, or
	// another device) less running it resident, µs (0: CopyUs). The rule
	// weighs its average over the weight's uses, and only for a copy the
	// op did not make.
	SavedUs float64
}

// MaxRegimes bounds the regimes a caller names (Cache.SetRegime).
const MaxRegimes = 16

type entry struct {
	w     Weight
	saved float64 // SavedUs averaged over the uses, weighted as score counts them
	// savedIn is saved over the uses in each regime (SetRegime) alone,
	// usesIn their count.
	savedIn  [MaxRegimes]float64
	usesIn   [MaxRegimes]float64
	score    float64 // decayed uses at step last
	last     float64
	first    float64 // step of the first use
	resident bool
}

// Cache is one device's weight cache.
type Cache struct {
	budget, used int64
	o            Options
	decay        float64 // ln 2 / HalfLife
	entries      []entry
	victims      []int
	regime       int // SetRegime's
}

// SetRegime names how the caller places ops from now on (0 until it is
// called): what a resident use saves is averaged per regime as well, and
// the rule weighs the uses in the current regime where a weight has any.
// Rule: a weight's worth follows the placement that will use it. Reason:
// a caller that changes how a step is placed as a whole (cmd/infer's
// step modes) ran the GPU alone with the weight caches the per-op
// learner's placement had filled: the output projection, run on the CPU
// there, saving nothing resident, stayed below the small weights' worth
// for about 50 steps of the GPU alone, which ran 2,031–2,186 µs a step
// against 1,809–1,829 with it resident (TestSavedPerRegime). A regime
// outside [0, MaxRegimes) is an error, and changes nothing.
func (c *Cache) SetRegime(r int) error {
	if r < 0 || r >= MaxRegimes {
		return fmt.Errorf("%w: regime %d of %d", ErrInvalid, r, MaxRegimes)
	}
	c.regime = r
	return nil
}

// savedNow is what a resident use of e saves in the current regime: its
// average over the regime's uses, or over all uses where it has none.
func (c *Cache) savedNow(e *entry) float64 {
	if e.usesIn[c.regime] > 0 {
		return e.savedIn[c.regime]
	}
	return e.saved
}

// New returns an empty cache of budget bytes.
func New(budget int64, o Options) (*Cache, error) {
	if o.HalfLife == 0 {
		o.HalfLife = 32
	}
	if o.Margin == 0 {
		o.Margin = 0.25
	}
	if o.MinUses == 0 {
		o.MinUses = 2
	}
	if budget < 0 || !(o.HalfLife > 0) || !(o.Margin >= 0) || !(o.MinUses >= 0) || math.IsInf(o.HalfLife+o.Margin+o.MinUses, 0) {
		return nil, fmt.Errorf("%w: budget %d, options %+v", ErrInvalid, budget, o)
	}
	return &Cache{budget: budget, o: o, decay: math.Ln2 / o.HalfLife}, nil
}

// Budget and Used return the bytes the cache may hold and holds.
func (c *Cache) Budget() int64 { return c.budget }

// Used returns the resident bytes.
func (c *Cache) Used() int64 { return c.used }

// Resident reports whether weight id is resident.
func (c *Cache) Resident(id int) bool {
	return id >= 0 && id < len(c.entries) && c.entries[id].resident
}

// Uses returns weight id's uses decayed to step now, what its worth
// counts (0 for a weight never used).
func (c *Cache) Uses(id int, now float64) float64 {
	if id < 0 || id >= len(c.entries) {
		return 0
	}
	return c.scoreAt(&c.entries[id], now)
}

// Plan is what to do after a use.
type Plan struct {
	// Hit: the weight was resident (nothing to copy).
	Hit bool
	// Admit: keep the weight resident from now on (copy it in unless the
	// op already did), after evicting Evict.
	Admit bool
	// Evict lists the weights dropped to make room (valid until the next
	// call).
	Evict []int
}

// Use records a use of w at step now (non-decreasing) and applies the
// rule: copied says the op copied w to the device anyway (it ran there,
// or its caller copied w for it after Wants), so keeping it costs nothing
// but room. The returned Plan is already applied to the cache's state.
func (c *Cache) Use(w Weight, now float64, copied bool) (Plan, error) {
	if w.ID < 0 || w.Bytes <= 0 || !(w.CopyUs > 0) || math.IsInf(w.CopyUs, 0) || !(w.SavedUs >= 0) || math.IsInf(w.SavedUs, 0) {
		return Plan{}, fmt.Errorf("%w: weight %+v", ErrInvalid, w)
	}
	for w.ID >= len(c.entries) {
		c.entries = append(c.entries, entry{})
	}
	e := &c.entries[w.ID]
	if e.score == 0 && e.last == 0 {
		e.first = now
	}
	before := *e
	e.w = w
	prev := c.scoreAt(e, now)
	x := savedOf(w)
	e.saved = (e.saved*prev + x) / (prev + 1)
	r := c.regime
	k := min(prev, e.usesIn[r]) // the regime's uses, no more than score counts
	e.savedIn[r], e.usesIn[r] = (e.savedIn[r]*k+x)/(k+1), e.usesIn[r]+1
	e.score = prev + 1
	e.last = now
	if e.resident {
		return Plan{Hit: true}, nil
	}
	// A copy made because Wants said yes is kept as Wants said, by the
	// figures before this use (the same victims, where this use's figure
	// admits it too): averaged in first, a use saving less had the copy
	// made refused (TestWantsPromise). Its figure counts from now on.
	if !c.admits(e, now, copied) && !(copied && before.w.Bytes == w.Bytes && c.wants(before, now)) {
		return Plan{}, nil
	}
	for _, id := range c.victims {
		c.entries[id].resident = false
		c.used -= c.entries[id].w.Bytes
	}
	e.resident = true
	c.used += w.Bytes
	return Plan{Admit: true, Evict: c.victims}, nil
}

// Wants reports whether a use of weight id at step now, one its op does
// not copy, would admit it for its own sake, by the figures of its last
// Use (a weight never used is not wanted). It changes nothing: a caller
// that copies the weight before the op, so that the op runs on it, then
// calls Use with copied true at step now, which admits it with the same
// evictions, whatever that use saves (TestWantsPromise).
func (c *Cache) Wants(id int, now float64) bool {
	if id < 0 || id >= len(c.entries) {
		return false
	}
	return c.wants(c.entries[id], now)
}

// wants is Wants for e (a copy: nothing of the cache changes but
// c.victims, left with the weights it would evict).
func (c *Cache) wants(e entry, now float64) bool {
	if e.resident || e.score == 0 {
		return false
	}
	e.score = c.scoreAt(&e, now) + 1
	e.last = now
	return c.admits(&e, now, false)
}

// admits applies the rule to e, just used and not resident, and leaves
// the weights it would evict in c.victims; it changes no entry.
//
// Copied in for its own sake, the uses a weight is expected to have must
// pay for the copy. Where it evicts: its recent (decayed) uses, at least
// MinUses, by the margin. Into free room, which costs nothing else: the
// more of as many uses again as it has had over its age (a weight used
// for n steps is expected to be used for n more; TestFreeRoomFillsWithAge)
// and its use rate since its first use kept over the rule's memory, the
// steps a use's weight takes to fall to 1/e (TestFreeRoomFillsByRate).
func (c *Cache) admits(e *entry, now float64, copied bool) bool {
	w, saved := e.w, c.savedNow(e)
	free := c.budget - c.used
	uses, pay := e.score, w.CopyUs
	if free < w.Bytes {
		pay *= 1 + c.o.Margin
	} else {
		uses = max(uses*max(1, (now-e.first)*c.decay), c.usesAhead(e, now))
	}
	if w.Bytes > c.budget || !copied && (free < w.Bytes && e.score < c.o.MinUses || uses*saved < pay) {
		return false
	}
	worth := c.worth(e, now)
	c.victims = c.victims[:0]
	if free >= w.Bytes {
		return true
	}
	// The least worth first, until w fits; each must be worth less than w
	// by the margin.
	for _, id := range c.residentsByWorth(now) {
		if free >= w.Bytes {
			break
		}
		if c.worth(&c.entries[id], now)*(1+c.o.Margin) >= worth {
			return false
		}
		c.victims = append(c.victims, id)
		free += c.entries[id].w.Bytes
	}
	return free >= w.Bytes
}

// savedOf is what one resident use of w saves (SavedUs, or its copy).
func savedOf(w Weight) float64 {
	if w.SavedUs <= 0 {
		return w.CopyUs
	}
	return w.SavedUs
}

// usesAhead is e's expected uses over the rule's memory (1/decay steps)
// at the rate of its uses after its first over its age, both decayed as
// the score is: (score − f)/(1 − f), f the first use's weight now. Zero
// before a second step: one use gives no rate.
func (c *Cache) usesAhead(e *entry, now float64) float64 {
	age := now - e.first
	if !(age > 0) {
		return 0
	}
	f := math.Exp(-c.decay * age)
	return max(e.score-f, 0) / (1 - f)
}

// Invalidate drops weight id's device copy: its host copy was written, so
// the copy is stale.
func (c *Cache) Invalidate(id int) {
	if c.Resident(id) {
		c.entries[id].resident = false
		c.used -= c.entries[id].w.Bytes
	}
}

// scoreAt is e's decayed uses at step now.
func (c *Cache) scoreAt(e *entry, now float64) float64 {
	if e.score == 0 {
		return 0
	}
	return e.score * math.Exp(-c.decay*max(now-e.last, 0))
}

// worth is e's expected time saved per byte per step: its use rate ×
// what a resident use saves ÷ its bytes. By the copy alone, an expert
// run on few tokens per use, which the CPU runs nearly as fast, would
// be worth as much as one run on many (pcie3x8 prompt34 in
// BenchmarkOffloadTargets).
func (c *Cache) worth(e *entry, now float64) float64 {
	return c.scoreAt(e, now) * c.decay * c.savedNow(e) / float64(e.w.Bytes)
}

// residentsByWorth returns the resident weights, the least worth first
// (ties by id, so the rule is deterministic).
func (c *Cache) residentsByWorth(now float64) []int {
	var ids []int
	for id := range c.entries {
		if c.entries[id].resident {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b int) int {
		wa, wb := c.worth(&c.entries[a], now), c.worth(&c.entries[b], now)
		switch {
		case wa < wb:
			return -1
		case wa > wb:
			return 1
		}
		return a - b
	})
	return ids
}
