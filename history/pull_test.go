package history_test

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/hardware"
	"github.com/adaptsched/adaptsched/history"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/rs/zerolog"
)

func openPullDB(t *testing.T, dir string, every int) *history.DB {
	t.Helper()
	fp := hardware.FingerprintOf([]backends.Info{warmBackends()[0].Info(), warmBackends()[1].Info()})
	db, err := history.Open(history.DefaultOptions(dir).WithFingerprint(fp).WithLogger(zerolog.Nop()).
		WithFlushInterval(time.Hour).WithFlushEvery(every))
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// The DB is what adaptive's Scheduler keeps its posteriors in.
var _ adaptive.Store = (*history.DB)(nil)

func newPullScheduler(t *testing.T, st adaptive.Store) *adaptive.Scheduler {
	t.Helper()
	return newPullSchedulerShapes(t, st, 0)
}

// newPullSchedulerShapes is newPullScheduler with Config.ShapeHits.
func newPullSchedulerShapes(t *testing.T, st adaptive.Store, shapeHits int) *adaptive.Scheduler {
	t.Helper()
	s, err := adaptive.New(adaptive.Config{Backends: warmBackends(), Store: st, Seed: 3, NoCalibration: true, ShapeHits: shapeHits})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// DESIGN.md § Persistence, write-behind by pulling: a history.DB collects
// the posteriors from the scheduler at its flushes, and what it stores,
// once reopened from disk, is the scheduler's own state as its Telemetry
// shows it: each arm's posterior (its mean and its evidence κ − κ0, to
// the bit) and N, the arm's Observes. Checked with a flush in the middle of
// the run and for each way of ending it: the DB's Close alone, the
// scheduler's Close then the DB's, and an Observe after the scheduler's
// Close (of a decision made before), which the scheduler hands over by a
// collection of its own.
func TestPullPath(t *testing.T) {
	for _, end := range []string{"db close", "scheduler close", "observe after scheduler close"} {
		t.Run(end, func(t *testing.T) {
			dir := t.TempDir()
			db := openPullDB(t, dir, 1<<30)
			s := newPullScheduler(t, db)
			rng := rand.New(rand.NewPCG(5, 5))
			observe := func(i int, closeFirst bool) {
				spec := warmSpecs[i%len(warmSpecs)]
				d, err := s.Select(spec, adaptive.Residency{})
				if err != nil {
					t.Fatal(err)
				}
				if closeFirst {
					s.Close()
				}
				tm := backends.Timing{Duration: time.Duration(trueUs(d.Name, spec, rng) * 1e3), Clock: backends.Simulated}
				if err := s.Observe(d, tm); err != nil {
					t.Fatal(err)
				}
			}
			const n = 4000
			for i := range n {
				observe(i, false)
				if i == n/2 {
					if err := db.Flush(); err != nil {
						t.Fatal(err)
					}
				}
			}
			switch end {
			case "scheduler close":
				s.Close()
			case "observe after scheduler close":
				observe(n, true)
			}
			tel := s.Telemetry()
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = openPullDB(t, dir, 1<<30)
			defer db.Close()
			got := map[history.Key]history.Record{}
			for _, rec := range db.Records() {
				got[rec.Key] = rec
			}
			arms := 0
			for _, bt := range tel.Buckets {
				for _, at := range bt.Arms {
					k := history.Key{Backend: at.Backend, Bucket: bt.Name}
					rec, ok := got[k]
					if learned(at) == 0 {
						if ok {
							t.Errorf("%v: stored, but the scheduler has no data", k)
						}
						continue
					}
					arms++
					if !ok {
						t.Errorf("%v: not stored (%d observations)", k, at.N)
						continue
					}
					if rec.N != uint64(learned(at)) || rec.Prior == (bandit.NormalGamma{}) {
						t.Errorf("%v: N %d and prior %+v, want N %d and a prior", k, rec.N, rec.Prior, learned(at))
					}
					if m, ev := rec.Posterior.MeanUs(), rec.Posterior.Kappa-rec.Prior.Kappa; m != at.MeanUs || ev != at.Evidence {
						t.Errorf("%v: stored mean %v µs, evidence %v; the scheduler's %v µs, %v", k, m, ev, at.MeanUs, at.Evidence)
					}
				}
			}
			if len(got) != arms {
				t.Errorf("%d records, want %d", len(got), arms)
			}
		})
	}
}

// learned returns the observations an arm's posterior learned from: a
// GPU's warm-up run is counted in N but neither learned from nor stored.
func learned(at adaptive.ArmTelemetry) int64 {
	if at.Warmup {
		return at.N - 1
	}
	return at.N
}

// learnedTotal returns the observations every posterior of s learned from.
func learnedTotal(s *adaptive.Scheduler) int {
	n := 0
	for _, bt := range s.Telemetry().Buckets {
		for _, at := range bt.Arms {
			n += int(learned(at))
		}
	}
	return n
}

// withData returns how many arms of s have learned from an observation:
// the records a store holds for s before any flush.
func withData(s *adaptive.Scheduler) int {
	n := 0
	for _, bt := range s.Telemetry().Buckets {
		for _, at := range bt.Arms {
			if learned(at) > 0 {
				n++
			}
		}
	}
	return n
}

// Write-behind: FlushEvery records collected from a scheduler
// trigger a flush before the interval, and fewer do not, however often
// they change. Below 16 times the attachment's stripes of counters (at
// least 128) it counts every record; at the default, 1,024, a flush may
// come up to an eighth late.
func TestPullFlushEvery(t *testing.T) {
	waitFlush := func(db *history.DB) history.Stats {
		deadline := time.Now().Add(5 * time.Second)
		for db.Stats().Flushes == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		return db.Stats()
	}
	for _, every := range []int{10, 40} {
		db := openPullDB(t, t.TempDir(), every)
		s := newPullSchedulerShapes(t, db, -1) // per bucket: the test re-observes buckets by name
		rng := rand.New(rand.NewPCG(6, 6))
		i := 0
		observe := func() {
			spec := warmSpecs[i%len(warmSpecs)]
			i++
			d, err := s.Select(spec, adaptive.Residency{})
			if err != nil {
				t.Fatal(err)
			}
			s.Observe(d, backends.Timing{Duration: time.Duration(trueUs(d.Name, spec, rng) * 1e3), Clock: backends.Simulated})
		}
		for withData(s) < every-1 {
			observe()
		}
		// Observe the arms with data again and again: their records
		// change, no new one waits.
		specOf := map[string]kernels.Spec{}
		for _, sp := range warmSpecs {
			specOf[kernels.BucketName(sp)] = sp
		}
		names := s.Backends()
		for range 20 {
			for _, bt := range s.Telemetry().Buckets {
				for a, at := range bt.Arms {
					if learned(at) == 0 {
						continue
					}
					d, err := s.Select(specOf[bt.Name], adaptive.Residency{})
					if err != nil {
						t.Fatal(err)
					}
					d.Backend, d.Name = a, names[a]
					s.Observe(d, backends.Timing{Duration: time.Duration(trueUs(d.Name, specOf[bt.Name], rng) * 1e3), Clock: backends.Simulated})
				}
			}
		}
		if n := withData(s); n != every-1 {
			t.Fatalf("every %d: %d records after re-observing, want %d", every, n, every-1)
		}
		time.Sleep(20 * time.Millisecond)
		if st := db.Stats(); st.Flushes != 0 || st.Pending != every-1 || st.Durable != 0 {
			t.Fatalf("every %d: %d records waiting after %d updates: %+v, want no flush", every, every-1, learnedTotal(s), st)
		}
		for withData(s) < every {
			observe()
		}
		st := waitFlush(db)
		if st.Flushes != 1 || st.Durable != uint64(learnedTotal(s)) {
			t.Fatalf("every %d: after the %dth record: %+v, want one flush of all %d updates", every, every, st, learnedTotal(s))
		}
		s.Close()
		db.Close()
	}
}

// The pull path under concurrency (run with -race): goroutines observe
// while the DB flushes every few updates and Stats collects; after the
// scheduler's and the DB's Close, the stored N add up to every Observe.
func TestPullConcurrent(t *testing.T) {
	dir := t.TempDir()
	db := openPullDB(t, dir, 64)
	s := newPullScheduler(t, db)
	const workers, each = 4, 2000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 8))
			for i := range each {
				spec := warmSpecs[(i*7+w)%len(warmSpecs)]
				d, err := s.Select(spec, adaptive.Residency{})
				if err != nil {
					t.Error(err)
					return
				}
				s.Observe(d, backends.Timing{Duration: time.Duration(trueUs(d.Name, spec, rng) * 1e3), Clock: backends.Simulated})
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			db.Stats()
			time.Sleep(100 * time.Microsecond)
		}
	})
	wg.Wait()
	want := learnedTotal(s)
	if want < workers*each-2*len(warmSpecs) {
		t.Fatalf("%d of %d Observes learned from: more than one warm-up run per bucket and GPU", want, workers*each)
	}
	s.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openPullDB(t, dir, 64)
	defer db.Close()
	var total uint64
	for _, rec := range db.Records() {
		total += rec.N
	}
	if total != uint64(want) {
		t.Errorf("stored N add up to %d, want the %d Observes learned from", total, want)
	}
}
