package relay_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/learned"
	"github.com/adaptsched/adaptsched/relay"
)

// store is a Store in memory that takes `cost` per Write and fails the
// Writes it is told to.
type store struct {
	mu    sync.Mutex
	cost  time.Duration
	fail  int // Writes left to fail
	n     map[learned.Key]uint64
	calls int
}

func (st *store) Write(cs []learned.Change) error {
	time.Sleep(st.cost)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.calls++
	if st.fail > 0 {
		st.fail--
		return errors.New("disk unplugged")
	}
	if st.n == nil {
		st.n = map[learned.Key]uint64{}
	}
	for _, c := range cs {
		st.n[c.Key] += c.N
	}
	return nil
}

func (st *store) total() uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	var t uint64
	for _, n := range st.n {
		t += n
	}
	return t
}

// fleet is a Fleet that keeps the own evidence it is handed and gives
// out the totals it is told to once; each Exchange takes cost, which
// busy and exchanges count.
type fleet struct {
	mu        sync.Mutex
	own       map[learned.Key]bandit.Stats
	shapes    int
	give      []learned.Foreign
	flushes   int
	updated   chan struct{}
	cost      time.Duration
	busy      time.Duration
	exchanges int
}

func (f *fleet) Exchange(cs []learned.Change, dst []learned.Foreign) []learned.Foreign {
	time.Sleep(f.cost)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.busy += f.cost
	f.exchanges++
	if f.own == nil {
		f.own = map[learned.Key]bandit.Stats{}
	}
	for _, c := range cs {
		if c.Shape {
			f.shapes++
			continue
		}
		f.own[c.Key] = c.Own()
	}
	dst = append(dst, f.give...)
	f.give = nil
	return dst
}

func (f *fleet) Updated() <-chan struct{} { return f.updated }

func (f *fleet) Flush(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flushes++
	return nil
}

func newScheduler(t testing.TB) *adaptive.Scheduler {
	t.Helper()
	cpu := backends.Described(backends.Info{Name: "cpu", Kind: backends.CPU, SharedMemory: true,
		Nominal: backends.Nominal{GFLOPS: 100, MemGBps: 50, DispatchUs: 1}})
	s, err := adaptive.New(adaptive.Config{Backends: []backends.Backend{cpu}, Seed: 1, Bandit: bandit.Config{Discount: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func opaque(i int) kernels.Spec {
	return kernels.Spec{Op: kernels.Opaque, DType: kernels.F32, In: []kernels.Shape{{1024}},
		Params: kernels.Params{Name: "kernel_" + strconv.Itoa(i), FLOPs: 1 << 20, Bytes: 1 << 16}}
}

func observe(t testing.TB, s *adaptive.Scheduler, i int) {
	d, err := s.Select(opaque(i), adaptive.Residency{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Observe(d, backends.Timing{Duration: 20 * time.Microsecond, Clock: backends.Simulated}); err != nil {
		t.Fatal(err)
	}
}

// TestRound: a round takes every change once, to the store and to the
// fleet (its own evidence, the Scheduler's as Fold.Evidence sees it),
// and folds the fleet's totals into the priors; Flush makes the fleet
// publish; the last round, at Close, takes what came after the
// Scheduler's Close; after Close, Flush is ErrClosed.
func TestRound(t *testing.T) {
	s := newScheduler(t)
	st, fl := &store{}, &fleet{}
	r, err := relay.Start(s, relay.Options{Store: st, Fleet: fl, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		observe(t, s, i%3)
	}
	k := learned.Key{Backend: "cpu", Bucket: kernels.BucketName(opaque(0))}
	foreign := bandit.Stats{N: 7, Sum: 7 * 3, SumSq: 7 * 9.01}
	fl.give = []learned.Foreign{{Key: k, Stats: foreign}}
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	own, got, ok := s.Fold().Evidence(k)
	near := func(a, b bandit.Stats) bool { // own evidence, recomputed over the new prior
		return math.Abs(a.N-b.N) < 1e-9 && math.Abs(a.Sum-b.Sum) < 1e-9 && math.Abs(a.SumSq-b.SumSq) < 1e-9
	}
	if !ok || got != foreign || !near(fl.own[k], own) || math.Abs(own.N-10) > 1e-9 {
		t.Errorf("after a round: own %+v (fleet was handed %+v), foreign %+v; want 10 observations and %+v", own, fl.own[k], got, foreign)
	}
	if st.total() != 30 || fl.flushes != 1 {
		t.Errorf("store holds %d observations, fleet flushed %d times; want 30 and 1", st.total(), fl.flushes)
	}
	if err := r.Flush(context.Background()); err != nil || st.total() != 30 || r.Stats().Changes != 3 {
		t.Errorf("a second round: %v, %d observations stored, %+v: want nothing new", err, st.total(), r.Stats())
	}
	d, _ := s.Select(opaque(1), adaptive.Residency{})
	s.Close()
	s.Observe(d, backends.Timing{Duration: 20 * time.Microsecond, Clock: backends.Simulated})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if st.total() != 31 {
		t.Errorf("after Close: %d observations stored, want 31 (one after the Scheduler's Close)", st.total())
	}
	if err := r.Flush(context.Background()); !errors.Is(err, relay.ErrClosed) {
		t.Errorf("Flush after Close: %v, want ErrClosed", err)
	}
}

// TestUpdated: evidence that the fleet signals between rounds is folded
// in at once, not at the next interval (here an hour).
func TestUpdated(t *testing.T) {
	s := newScheduler(t)
	defer s.Close()
	fl := &fleet{updated: make(chan struct{}, 1)}
	r, err := relay.Start(s, relay.Options{Fleet: fl, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	observe(t, s, 0)
	k := learned.Key{Backend: "cpu", Bucket: kernels.BucketName(opaque(0))}
	foreign := bandit.Stats{N: 3, Sum: 9, SumSq: 27.03}
	fl.mu.Lock()
	fl.give = []learned.Foreign{{Key: k, Stats: foreign}}
	fl.mu.Unlock()
	fl.updated <- struct{}{}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, got, _ := s.Fold().Evidence(k); got == foreign {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the fleet's signalled evidence was not folded in within 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestUpdatesPaced: a fleet that signals updates without pause (a peer
// putting values as fast as it can, each of which makes the node vet
// every record it holds) does not keep the relay folding without pause:
// the folds still come before the interval (here an hour), each after a
// pause of pace times the last, so the time spent exchanging stays near
// 1/(1+pace). Unpaced it was 100% of the time.
func TestUpdatesPaced(t *testing.T) {
	s := newScheduler(t)
	defer s.Close()
	fl := &fleet{updated: make(chan struct{}, 1), cost: 2 * time.Millisecond}
	r, err := relay.Start(s, relay.Options{Fleet: fl, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fl.mu.Lock()
	fl.busy, fl.exchanges = 0, 0 // Start's own round
	fl.mu.Unlock()
	start := time.Now()
	for time.Since(start) < time.Second {
		select {
		case fl.updated <- struct{}{}:
		default:
		}
		time.Sleep(100 * time.Microsecond)
	}
	elapsed := time.Since(start)
	fl.mu.Lock()
	busy, n := fl.busy, fl.exchanges
	fl.mu.Unlock()
	t.Logf("%d exchanges in %v, %v exchanging (%.1f%%)", n, elapsed, busy, 100*busy.Seconds()/elapsed.Seconds())
	if n < 2 {
		t.Errorf("%d exchanges in %v: updates no longer fold before the interval", n, elapsed)
	}
	if share := busy.Seconds() / elapsed.Seconds(); share > 0.2 {
		t.Errorf("exchanging took %.0f%% of the time, want at most 20%%", 100*share)
	}
}

// TestWriteFails: a failed write is counted and returned by the round
// that made it, and by Close for the last round.
func TestWriteFails(t *testing.T) {
	s := newScheduler(t)
	st := &store{fail: 2}
	r, err := relay.Start(s, relay.Options{Store: st, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	observe(t, s, 0)
	if err := r.Flush(context.Background()); err == nil || r.Stats().Failed != 1 {
		t.Errorf("Flush over a failing store: %v, %+v: want the error, counted", err, r.Stats())
	}
	d, _ := s.Select(opaque(0), adaptive.Residency{})
	s.Close()
	s.Observe(d, backends.Timing{Duration: 20 * time.Microsecond, Clock: backends.Simulated})
	if err := r.Close(); err == nil {
		t.Error("Close over a failing store returned no error")
	}
}

// TestPacing: changes faster than the store writes them (a new record
// at every Observe, as 10,000 buckets observed in turn give) do not keep
// the store writing without pause: Every still triggers rounds before
// the interval (here an hour), each after a pause of pace times the last
// write, so the time spent writing stays near 1/(1+pace) of the time.
// Unpaced (pace 0) it was 99% of the time.
func TestPacing(t *testing.T) {
	s := newScheduler(t)
	defer s.Close()
	st := &store{cost: 2 * time.Millisecond}
	r, err := relay.Start(s, relay.Options{Store: st, Interval: time.Hour, Every: 64})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	i := 0
	for time.Since(start) < time.Second {
		for range 200 {
			observe(t, s, i%2000)
			i++
		}
	}
	elapsed := time.Since(start)
	rs := r.Stats()
	t.Logf("%d Observes in %v: %d rounds, %v writing (%.1f%%)", i, elapsed, rs.Rounds, rs.Busy, 100*rs.Busy.Seconds()/elapsed.Seconds())
	if rs.Rounds < 2 {
		t.Errorf("%d rounds in %v with Every 64: the count no longer triggers them", rs.Rounds, elapsed)
	}
	if share := rs.Busy.Seconds() / elapsed.Seconds(); share > 0.2 {
		t.Errorf("writing took %.0f%% of the time, want at most 20%%", 100*share)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if st.total() != uint64(i) {
		t.Errorf("%d observations written after Close, want all %d", st.total(), i)
	}
}

// keepingStore is a Store that keeps the changes of a failed Write for
// its next Write, as the Store contract (and history.DB) does.
type keepingStore struct {
	mu      sync.Mutex
	fail    int
	pending []learned.Change
	durable uint64
	calls   int
}

func (st *keepingStore) Write(cs []learned.Change) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.calls++
	st.pending = append(st.pending, cs...)
	if st.fail > 0 {
		st.fail--
		return errors.New("disk unplugged")
	}
	for _, c := range st.pending {
		st.durable += c.N
	}
	st.pending = st.pending[:0]
	return nil
}

func (st *keepingStore) state() (uint64, int, int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.durable, len(st.pending), st.calls
}

// TestFailedWriteRetried: after a failed write the relay writes again at
// the next interval though the Scheduler has nothing new, so the kept
// records do not wait for the next change; and Close never returns nil
// while records are unwritten.
func TestFailedWriteRetried(t *testing.T) {
	s := newScheduler(t)
	st := &keepingStore{fail: 1}
	r, err := relay.Start(s, relay.Options{Store: st, Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	observe(t, s, 0)
	if err := r.Flush(context.Background()); err == nil {
		t.Fatal("the first write should fail")
	}
	deadline := time.Now().Add(2 * time.Second) // a hundred intervals: the store works again
	durable, pending, calls := st.state()
	for (durable != 1 || pending != 0) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		durable, pending, calls = st.state()
	}
	if durable != 1 || pending != 0 {
		t.Errorf("after 2 s: %d observations durable, %d changes pending, %d Write calls; want the failed write retried", durable, pending, calls)
	}
	s.Close()
	cerr := r.Close()
	durable, pending, _ = st.state()
	if pending != 0 && cerr == nil {
		t.Errorf("Close returned nil with %d changes never written (%d durable)", pending, durable)
	}
}

// TestCloseRetriesFailedWrite: Close's last round writes again after a
// failed write though no change is new, and returns that write's error.
func TestCloseRetriesFailedWrite(t *testing.T) {
	s := newScheduler(t)
	st := &keepingStore{fail: 2}
	r, err := relay.Start(s, relay.Options{Store: st, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	observe(t, s, 0)
	if err := r.Flush(context.Background()); err == nil {
		t.Fatal("the first write should fail")
	}
	s.Close()
	if err := r.Close(); err == nil {
		t.Errorf("Close returned nil over a store that still fails")
	}
	if _, pending, calls := st.state(); pending == 0 || calls != 2 {
		t.Errorf("%d changes pending after %d Write calls; want Close to retry once and fail", pending, calls)
	}
}
