package history_test

import (
	"context"
	"errors"
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
	"github.com/adaptsched/adaptsched/learned"
	"github.com/adaptsched/adaptsched/relay"
	"github.com/rs/zerolog"
)

func openPathDB(t *testing.T, dir string) *history.DB {
	t.Helper()
	fp := hardware.FingerprintOf([]backends.Info{warmBackends()[0].Info(), warmBackends()[1].Info()})
	db, err := history.Open(history.DefaultOptions(dir).WithFingerprint(fp).WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// The DB is what a relay writes a Scheduler's changes to.
var _ relay.Store = (*history.DB)(nil)

// newPathScheduler returns a Scheduler warm-started from db, with
// Config.ShapeHits shapeHits, and a relay to db that takes its changes
// once every changed records wait (and otherwise only when asked).
func newPathScheduler(t *testing.T, db *history.DB, shapeHits, every int) (*adaptive.Scheduler, *relay.Relay) {
	t.Helper()
	s, err := adaptive.New(adaptive.Config{Backends: warmBackends(), Warm: db.Load(), Seed: 3, NoCalibration: true, ShapeHits: shapeHits})
	if err != nil {
		t.Fatal(err)
	}
	r, err := relay.Start(s, relay.Options{Store: db, Interval: time.Hour, Every: every})
	if err != nil {
		t.Fatal(err)
	}
	return s, r
}

// DESIGN.md § The data path, the Scheduler's changes as data: the relay
// takes the changed posteriors from the scheduler and writes them to the
// DB, and what the DB stores, once reopened from disk, is the
// scheduler's own state as its Telemetry shows it: each arm's posterior
// (its mean and its evidence κ − κ0, to the bit) and N, the arm's
// Observes. Checked with a relay round in the middle of the run and for
// each way of ending it: the relay's Close alone, the scheduler's Close
// then the relay's, and an Observe after the scheduler's Close (of a
// decision made before), which the relay's last round takes too.
func TestPath(t *testing.T) {
	for _, end := range []string{"relay close", "scheduler close", "observe after scheduler close"} {
		t.Run(end, func(t *testing.T) {
			dir := t.TempDir()
			db := openPathDB(t, dir)
			s, rl := newPathScheduler(t, db, 0, 1<<30)
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
					if err := rl.Flush(context.Background()); err != nil {
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
			if err := errors.Join(rl.Close(), db.Close()); err != nil {
				t.Fatal(err)
			}
			db = openPathDB(t, dir)
			defer db.Close()
			got := map[learned.Key]history.Record{}
			for _, rec := range db.Records() {
				got[rec.Key] = rec
			}
			arms := 0
			for _, bt := range tel.Buckets {
				for _, at := range bt.Arms {
					k := learned.Key{Backend: at.Backend, Bucket: bt.Name}
					rec, ok := got[k]
					if at.Learned == 0 {
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
					if rec.N != uint64(at.Learned) || rec.Prior == (bandit.NormalGamma{}) {
						t.Errorf("%v: N %d and prior %+v, want N %d and a prior", k, rec.N, rec.Prior, at.Learned)
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

// learnedTotal returns the observations every posterior of s learned from.
func learnedTotal(s *adaptive.Scheduler) int {
	n := 0
	for _, bt := range s.Telemetry().Buckets {
		for _, at := range bt.Arms {
			n += int(at.Learned)
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
			if at.Learned > 0 {
				n++
			}
		}
	}
	return n
}

// Write-behind: Every changed records of a scheduler make the relay
// write them before the interval, and fewer do not, however often they
// change. Below 16 times the scheduler's stripes of counters (at least
// 128) it counts every record; at the default, 1,024, a write may come
// up to an eighth late.
func TestPathEvery(t *testing.T) {
	waitFlush := func(db *history.DB) history.Stats {
		deadline := time.Now().Add(5 * time.Second)
		for db.Stats().Flushes == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		return db.Stats()
	}
	for _, every := range []int{10, 40} {
		db := openPathDB(t, t.TempDir())
		s, rl := newPathScheduler(t, db, -1, every) // per bucket: the test re-observes buckets by name
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
					if at.Learned == 0 {
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
		if st := db.Stats(); st.Flushes != 0 || st.Durable != 0 || rl.Stats().Rounds != 0 {
			t.Fatalf("every %d: %d records waiting after %d updates: %+v, want no write", every, every-1, learnedTotal(s), st)
		}
		for withData(s) < every {
			observe()
		}
		st := waitFlush(db)
		if st.Flushes != 1 || st.Durable != uint64(learnedTotal(s)) {
			t.Fatalf("every %d: after the %dth record: %+v, want one flush of all %d updates", every, every, st, learnedTotal(s))
		}
		s.Close()
		rl.Close()
		db.Close()
	}
}

// The path under concurrency (run with -race): goroutines observe while
// the relay writes every few updates and is asked for a round; after the
// scheduler's, the relay's and the DB's Close, the stored N add up to
// every Observe.
func TestPathConcurrent(t *testing.T) {
	dir := t.TempDir()
	db := openPathDB(t, dir)
	s, rl := newPathScheduler(t, db, 0, 64)
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
			rl.Flush(context.Background())
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
	if err := errors.Join(rl.Close(), db.Close()); err != nil {
		t.Fatal(err)
	}
	db = openPathDB(t, dir)
	defer db.Close()
	var total uint64
	for _, rec := range db.Records() {
		total += rec.N
	}
	if total != uint64(want) {
		t.Errorf("stored N add up to %d, want the %d Observes learned from", total, want)
	}
}
