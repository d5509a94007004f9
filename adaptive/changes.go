package adaptive

import (
	"math/bits"
	"runtime"
	"sync/atomic"

	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/learned"
)

// The Scheduler's changes as data, in the manner of etcd raft's
// Ready/Advance: once tracked (Track), Observe marks a changed bucket and
// counts the records it adds; Changes hands every changed posterior out
// in one batch, and Track's channel says that a batch is worth taking.
// Whoever takes the changes (package relay) writes them to a store and
// publishes them to a fleet: the Scheduler calls neither, and neither
// calls it.

// tracker counts the records waiting for Changes, per stripe of buckets
// rather than in one counter, which every core would pull to itself; a
// stripe adds to waiting every chunk records. Ready so lags by less than
// the stripes times chunk: chunk is the largest power of two at most
// every / (8 · stripes), so the lag stays under an eighth of every
// (exact when every < 16 · stripes). Records, not Observes: a bucket
// observed 10,000 times between two batches is one record per arm
// (history BenchmarkSelectObserve holds the store's cost).
type tracker struct {
	counts   []stripeCount
	mask     uint32
	chunk    uint64 // a power of two
	every    int64
	waiting  atomic.Int64 // records reported since the last Changes
	signaled atomic.Bool  // ready holds a value, or is being sent one
	ready    chan struct{}
}

// stripeCount is one stripe's record counter, alone on its cache line.
type stripeCount struct {
	n atomic.Uint64
	_ [56]byte
}

func newTracker(every int) *tracker {
	stripes := max(8, 1<<bits.Len(uint(4*runtime.GOMAXPROCS(0)-1)))
	t := &tracker{counts: make([]stripeCount, stripes), mask: uint32(stripes - 1), chunk: 1,
		every: int64(max(every, 1)), ready: make(chan struct{}, 1)}
	for t.chunk*2*8*uint64(stripes) <= uint64(t.every) {
		t.chunk *= 2
	}
	return t
}

// add counts records on bucket's stripe and, every chunk of them, adds
// them to waiting, signalling ready once waiting reaches every. It
// neither blocks nor allocates.
func (t *tracker) add(bucket uint32, records int) {
	c, n := &t.counts[bucket&t.mask], uint64(records)
	v := c.n.Add(n)
	if chunks := v/t.chunk - (v-n)/t.chunk; chunks > 0 {
		if t.waiting.Add(int64(chunks*t.chunk)) >= t.every && !t.signaled.Load() && t.signaled.CompareAndSwap(false, true) {
			select {
			case t.ready <- struct{}{}:
			default:
			}
		}
	}
}

// Track makes Observe mark every bucket whose posteriors change for
// Changes to hand out, and returns a channel that receives a value (at
// most one waits) once every changed records (an arm's posterior each,
// counted once however often it changes) wait for Changes. Call it
// before the first Select: changes made before it are not tracked.
// Later calls return the same channel and keep the first every. Without
// Track, Observe marks nothing.
func (s *Scheduler) Track(every int) <-chan struct{} {
	s.regMu.Lock()
	defer s.regMu.Unlock()
	if t := s.track.Load(); t != nil {
		return t.ready
	}
	t := newTracker(every)
	s.track.Store(t)
	return t.ready
}

// Changes appends to dst, and returns, every posterior changed since the
// previous call: for each bucket marked since, under its lock, every arm
// with data (of a shape's bucket, with evidence of its own), with its
// prior and the observations it learned since it was last handed out.
// The arms not observed are there too (N = 0): an observation of a bucket
// discounts every arm (DESIGN.md § The bandit). It is meant for one
// taker at a time (the package relay's loop); the caller owns the slice.
func (s *Scheduler) Changes(dst []learned.Change) []learned.Change {
	t := s.track.Load()
	if t == nil {
		return dst
	}
	// Every record reported so far is taken below: waiting restarts from
	// the reports that come after.
	reported := t.waiting.Load()
	for b := s.dirty.Swap(nil); b != nil; {
		b.mu.Lock()
		next := b.next
		b.next, b.queued = nil, false
		b.bb.Settle(&s.e.cfg)
		kept := b.kept()
		for a := range s.n {
			if kept.Has(a) {
				n := b.per[a].learned - b.per[a].collected
				b.per[a].collected = b.per[a].learned
				prior, post := b.bb.Priors[a], b.bb.Arms[a]
				if fb := b.fb; fb != nil && fb.folded[a] != (bandit.Stats{}) {
					// The store keeps this node's own evidence only: the
					// fleet's is the fleet's, and may yet be set aside.
					own := post.Since(prior)
					prior = fb.base[a]
					post = prior.With(own)
				}
				dst = append(dst, learned.Change{Key: learned.Key{Backend: s.names[a], Bucket: b.name},
					Prior: prior, Posterior: post, N: uint64(n), Shape: b.isShape})
			}
		}
		b.mu.Unlock()
		b = next
	}
	t.waiting.Add(-reported)
	t.signaled.Store(false)
	return dst
}

// queue pushes b onto the stack for Changes (b.mu held, b not queued).
func (s *Scheduler) queue(b *bucket) {
	b.queued = true
	for {
		top := s.dirty.Load()
		b.next = top
		if s.dirty.CompareAndSwap(top, b) {
			return
		}
	}
}
