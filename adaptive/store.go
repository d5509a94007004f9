package adaptive

import "github.com/adaptsched/adaptsched/bandit"

// Key names one posterior: a backend and a bucket.
type Key struct {
	Backend string // the backend's Info().Name ("cpu", "sim:mi300x")
	Bucket  string // the bucket's stable name (Scheduler.BucketName: "MatMul/f32/s42")
}

// Store is what a Scheduler keeps its posteriors in across runs
// (Config.Store): declared here, where it is used, and implemented by a
// store package (history.DB), in the manner of database/sql/driver. Its
// methods take only strings, funcs and bandit's types, so that a store
// implements it without importing adaptive.
//
// The Scheduler loads the store once, in New, and attaches itself for
// write-behind: from then on the store pulls the changed posteriors from
// the Scheduler when it writes, and the Scheduler only tells it how many
// records wait; Observe never hands a posterior over nor waits for the
// store. A crash loses at most what the store had not written yet
// (history.DB: its flush interval); Close hands everything over
// (detach). The Scheduler does not close its store.
type Store interface {
	// Load calls fn for every stored posterior, keyed by backend name and
	// bucket name; New warm-starts the buckets from them as it makes
	// them. fn must not call back into the store.
	Load(fn func(backend, bucket string, p bandit.NormalGamma)) error

	// Attach makes the store call collect whenever it takes the
	// Scheduler's changes: at least at each of its writes and at detach.
	//
	// collect calls emit once for every posterior changed since its
	// previous call: its backend and bucket, the prior it grew from, the
	// posterior, and n, the observations it learned since, which the
	// store adds to the record's count; n is 0 for an arm changed
	// otherwise (every arm with data of a changed bucket is emitted: an
	// observation discounts them all). flush says that the store writes
	// what it takes now; otherwise (history.DB's Stats and Records) it
	// keeps it until it does, and the Scheduler does not report those
	// records again (changed) until a flush's call has taken them. The
	// store calls collect from one goroutine at a time; emit must not
	// call back into the Scheduler, nor collect into the store.
	//
	// changed reports that records more records wait for the store to
	// collect, from bucket (the Scheduler's BucketID, which a store may
	// spread concurrent reports over counters by): a bucket's records
	// when it first changes after a flush, one more when an arm of a
	// bucket already waiting gets its first data. It counts records, not
	// observations. Observe calls it: it must not block, do I/O or
	// allocate, and must be safe for concurrent use.
	//
	// detach collects the Scheduler, keeps what it gives for the store's
	// next write, and stops collecting it at the store's writes. Calling
	// it again collects again: the Scheduler does so for an Observe that
	// comes after its Close. After the store's own Close it does nothing.
	Attach(collect func(emit func(backend, bucket string, prior, p bandit.NormalGamma, n uint64), flush bool)) (
		changed func(bucket uint32, records int), detach func())
}

// collect is what s's store calls to collect it (Store.Attach): it takes
// the stack of queued buckets and emits, under each bucket's lock, the
// posterior of every arm with data, with its prior and its observations
// since the last collection. The arms not observed are emitted too
// (n = 0): an observation of a bucket discounts every arm (DESIGN.md §
// The bandit), and the store keeps the scheduler's posteriors as they
// are. A bucket stays queued from its first change until a flush's
// collection takes it: a collection that is not a flush's keeps the
// buckets it took (s.kept) and takes them again at the next one, so that
// Observe does not report their records twice.
func (s *Scheduler) collect(emit func(backend, bucket string, prior, p bandit.NormalGamma, n uint64), flush bool) {
	kept := s.kept
	s.kept = nil
	for _, b := range [2]*bucket{s.dirty.Swap(nil), kept} {
		for b != nil {
			b.mu.Lock()
			next := b.next
			if flush {
				b.next, b.queued = nil, false
			} else {
				b.next, s.kept = s.kept, b
			}
			for a := range s.n {
				if b.kept().Has(a) {
					n := b.per[a].learned - b.collected[a]
					b.collected[a] = b.per[a].learned
					emit(s.names[a], b.name, b.bb.Priors[a], b.bb.Arms[a], uint64(n))
				}
			}
			b.mu.Unlock()
			b = next
		}
	}
}

// queue pushes b onto the stack for the store to collect (b.mu held, b not
// queued).
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
