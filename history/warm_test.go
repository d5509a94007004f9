package history_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/hardware"
	"github.com/adaptsched/adaptsched/history"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/relay"
	"github.com/rs/zerolog"
)

// modelBackend is a backend that the scheduler only asks for Info and
// Supports; durations come from the workload's model, not from Run.
type modelBackend struct{ info backends.Info }

var _ backends.Backend = (*modelBackend)(nil)

func (m *modelBackend) Info() backends.Info         { return m.info }
func (m *modelBackend) Supports(kernels.Spec) error { return nil }
func (m *modelBackend) Alloc(n int64) (backends.Buffer, error) {
	return backends.NewHostBuffer(m, n), nil
}
func (m *modelBackend) Write(backends.Buffer, []byte) (backends.Timing, error) {
	return backends.Timing{}, nil
}
func (m *modelBackend) Read([]byte, backends.Buffer) (backends.Timing, error) {
	return backends.Timing{}, nil
}
func (m *modelBackend) Run(kernels.Spec, []backends.Buffer, backends.Buffer) (backends.Timing, error) {
	return backends.Timing{}, kernels.ErrNotExecutable
}
func (m *modelBackend) Close() error { return nil }

func warmBackends() []backends.Backend {
	return []backends.Backend{
		&modelBackend{backends.Info{Name: "cpu", Kind: backends.CPU, Platform: "host", Model: "model cpu", Threads: 8, SharedMemory: true,
			Nominal: backends.Nominal{GFLOPS: 200, MemGBps: 40, DispatchUs: 1}}},
		&modelBackend{backends.Info{Name: "gpu", Kind: backends.GPU, Platform: "sim", Model: "model gpu", Arch: "sim",
			Nominal: backends.Nominal{GFLOPS: 20000, MemGBps: 1000, DispatchUs: 5, LinkGBps: 25, LinkLatencyUs: 10}}},
	}
}

// trueUs is how long the workload's ops really take: the CPU reaches a
// quarter of its nominal FLOP rate and half its bandwidth, the GPU pays
// 30 µs per launch and half its bandwidth; both with
// 20% lognormal noise.
func trueUs(backend string, s kernels.Spec, r *rand.Rand) float64 {
	var us float64
	if s.Op == kernels.Add {
		bytes := float64(12 * s.In[0].Elements())
		us = 1 + bytes/20e3
		if backend == "gpu" {
			us = 30 + bytes/500e3
		}
	} else {
		m, k, n := float64(s.In[0][0]), float64(s.In[0][1]), float64(s.In[1][1])
		us = 2 + 2*m*k*n/50e3
		if backend == "gpu" {
			us = 30 + 2*m*k*n/10e6
		}
	}
	return us * math.Exp(0.2*r.NormFloat64())
}

var warmSpecs = func() []kernels.Spec {
	var out []kernels.Spec
	for _, m := range []int{1, 2, 4, 8, 16, 32, 64, 128, 256, 512} {
		for _, k := range []int{128, 256, 512, 1024, 2048} {
			out = append(out, kernels.Spec{Op: kernels.MatMul, In: []kernels.Shape{{m, k}, {k, k}}})
		}
	}
	for e := 1 << 8; e <= 1<<22; e *= 2 {
		out = append(out, kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{e}, {e}}})
	}
	return out
}()

// runWorkload places n ops with a scheduler on db and returns how many
// decisions explored: chose another backend than the best posterior mean
// (reason Explore), or chose with no data at all (reason Prior: the first
// decisions of every bucket, the ones a warm start saves).
func runWorkload(t *testing.T, db *history.DB, n int, seed uint64) int64 {
	s, err := adaptive.New(adaptive.Config{Backends: warmBackends(), Warm: db.Load(), Seed: seed, NoCalibration: true})
	if err != nil {
		t.Fatal(err)
	}
	rl, err := relay.Start(s, relay.Options{Store: db})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 99))
	for i := range n {
		spec := warmSpecs[i%len(warmSpecs)]
		d, err := s.Select(spec, adaptive.Residency{})
		if err != nil {
			t.Fatal(err)
		}
		us := trueUs(d.Name, spec, r)
		if err := s.Observe(d, backends.Timing{Duration: time.Duration(us * 1e3), Clock: backends.Simulated}); err != nil {
			t.Fatal(err)
		}
	}
	tel := s.Telemetry()
	if err := errors.Join(s.Close(), rl.Close()); err != nil {
		t.Fatal(err)
	}
	return tel.Reasons[adaptive.Explore] + tel.Reasons[adaptive.Prior]
}

// Warm start: a second run of the same workload, in a new
// process's worth of objects on the same store directory, explores at
// most a tenth as often as the first.
func TestWarmStart(t *testing.T) {
	dir := t.TempDir()
	open := func() *history.DB {
		fp := hardware.FingerprintOf([]backends.Info{warmBackends()[0].Info(), warmBackends()[1].Info()})
		db, err := history.Open(history.DefaultOptions(dir).WithFingerprint(fp).WithLogger(zerolog.Nop()))
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	const n = 3000
	db := open()
	first := runWorkload(t, db, n, 1)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open()
	if s := db.Stats(); s.Records == 0 || s.Skipped != 0 {
		t.Fatalf("store after the first run: %+v", s)
	}
	second := runWorkload(t, db, n, 2)
	db.Close()
	t.Logf("explorations: first run %d, second run %d (of %d ops each)", first, second, n)
	if first < 20 {
		t.Fatalf("the first run explored only %d times: the workload teaches nothing", first)
	}
	if second*10 > first {
		t.Errorf("second run explored %d times, more than a tenth of the first's %d", second, first)
	}
}

// manySpecs are 10,000 opaque ops of distinct names: 10,000 buckets, so
// that the records waiting pass FlushEvery and the count, not the
// interval, triggers the flushes.
var manySpecs = func() []kernels.Spec {
	out := make([]kernels.Spec, 10000)
	for i := range out {
		out[i] = kernels.Spec{Op: kernels.Opaque, DType: kernels.F32, In: []kernels.Shape{{1024}},
			Params: kernels.Params{Name: "kernel_" + strconv.Itoa(i), FLOPs: 1 << 20, Bytes: 1 << 16}}
	}
	return out
}()

// BenchmarkSelectObserve compares Select+Observe with and without the
// store attached (target: at most 10% more with it), on the warm-start
// workload (warmSpecs: 45 records, rewritten by the interval's flush
// once a second) and on 10,000 buckets (manySpecs: a flush of 1,024
// records every 512 or so Observes), serially and, over 10,000 buckets,
// from GOMAXPROCS goroutines, where the flusher has no idle core to use.
func BenchmarkSelectObserve(b *testing.B) {
	for _, c := range []struct {
		name                string
		specs               []kernels.Spec
		withStore, parallel bool
	}{
		{"nostore", warmSpecs, false, false}, {"store", warmSpecs, true, false},
		{"10k-buckets/nostore", manySpecs, false, false}, {"10k-buckets/store", manySpecs, true, false},
		{"10k-buckets/parallel/nostore", manySpecs, false, true}, {"10k-buckets/parallel/store", manySpecs, true, true},
	} {
		specs, withStore, parallel := c.specs, c.withStore, c.parallel
		b.Run(c.name, func(b *testing.B) {
			cfg := adaptive.Config{Backends: warmBackends(), Seed: 1, NoCalibration: true}
			var db *history.DB
			if withStore {
				var err error
				db, err = history.Open(history.DefaultOptions(b.TempDir()).WithLogger(zerolog.Nop()))
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				cfg.Warm = db.Load()
			}
			s, err := adaptive.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var rl *relay.Relay
			if withStore {
				if rl, err = relay.Start(s, relay.Options{Store: db}); err != nil {
					b.Fatal(err)
				}
				defer rl.Close()
			}
			r := rand.New(rand.NewPCG(1, 2))
			timings := make([]backends.Timing, 1024)
			for i := range timings {
				timings[i] = backends.Timing{Duration: time.Duration(20e3 * math.Exp(0.1*r.NormFloat64())), Clock: backends.Simulated}
			}
			// op is the i-th Select+Observe: spec i (cyclically), timing i.
			op := func(i int) error {
				d, err := s.Select(specs[i%len(specs)], adaptive.Residency{})
				if err != nil {
					return err
				}
				return s.Observe(d, timings[i&1023])
			}
			for i := range specs { // every bucket made before the timing
				if err := op(i); err != nil {
					b.Fatal(err)
				}
			}
			if rl != nil { // and its records written
				if err := rl.Flush(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			// The previous round's store (64 MiB of memtable) is garbage:
			// collected here, not while timed.
			runtime.GC()
			b.ReportAllocs()
			if parallel {
				var start atomic.Int64
				b.ResetTimer() // RunParallel, unlike b.Loop, would time the setup above
				b.RunParallel(func(pb *testing.PB) {
					i := int(start.Add(1)) * 104729 // goroutines start apart
					for pb.Next() {
						if err := op(i); err != nil {
							b.Error(err)
							return
						}
						i++
					}
				})
				return
			}
			i := 0
			for b.Loop() {
				if err := op(i); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
