package fleet

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/learned"
	"github.com/adaptsched/adaptsched/relay"
)

// BenchmarkConverge measures what a new node takes to converge to the
// largest fleet state the default limits on peers let it hold (maxPeers,
// DefaultMaxPeerKeys): 64 nodes have each published their evidence on 4,096
// buckets × 2 backends (524,288 records in 4,096 values); one iteration
// starts a node on a fresh Scheduler and waits until it has read every
// value and folded the 8,192 totals in (WaitSynced). heap-MB is the live
// heap the node and its Scheduler's Fold hold once synced, after a GC.
func BenchmarkConverge(b *testing.B) { converge(b, false) }

// BenchmarkConvergeDistinct is BenchmarkConverge where no two nodes name
// the same key: each of the 64 names 8,192 buckets of its own, of one
// backend, with names of keyNameBytes (the most the limits let a peer's
// names hold), so that the node folds 524,288 totals in: the most heap
// the default limits let the peers take.
func BenchmarkConvergeDistinct(b *testing.B) { converge(b, true) }

// converge is BenchmarkConverge, each node naming keys of its own where
// distinct.
func converge(b *testing.B, distinct bool) {
	const nodes, buckets = maxPeers, DefaultMaxPeerKeys / 2
	keys := 2 * buckets
	if distinct {
		keys = nodes * DefaultMaxPeerKeys
	}
	nc, kv := fleetBucket(b, "converge")
	ctx := context.Background()
	var shared [Shards][]learned.Key
	for i := range buckets {
		name := fmt.Sprintf("Opaque:op%05d/f32/s%d", i, 20+i%20)
		for _, be := range []string{"cpu", "gpu"} {
			shared[shardOf(name)] = append(shared[shardOf(name)], learned.Key{Backend: be, Bucket: name})
		}
	}
	for n := range nodes {
		id := fmt.Sprintf("node%03d", n)
		shards := &shared
		if distinct {
			shards = new([Shards][]learned.Key)
			for i := range DefaultMaxPeerKeys {
				name := fmt.Sprintf("Opaque:%s-%05d/f32/s20", id, i)
				name += strings.Repeat("x", keyNameBytes-len("cpu")-len(name))
				shards[shardOf(name)] = append(shards[shardOf(name)], learned.Key{Backend: "cpu", Bucket: name})
			}
		}
		for s, keys := range shards {
			v := value{fingerprint: testFP.Hash, node: id, nonce: uint64(n)}
			for i, k := range keys {
				y := 3 + float64(i%7)/10
				c := float64(10 + (n+i)%50)
				v.recs = append(v.recs, record{key: k, st: bandit.Stats{N: c, Sum: c * y, SumSq: c * (y*y + 0.01)}})
			}
			if _, err := kv.Put(ctx, fmt.Sprintf("%s.%s.s%02d", testFP.Hash, id, s), appendValue(nil, &v)); err != nil {
				b.Fatal(err)
			}
		}
	}
	var ms runtime.MemStats
	var heap float64
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		before := ms.HeapAlloc
		s, err := adaptive.New(adaptive.Config{Backends: benchBackends()})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		n, err := Start(nc, DefaultOptions("new", testFP).WithBucket("converge"))
		if err != nil {
			b.Fatal(err)
		}
		if err := n.WaitSynced(ctx); err != nil {
			b.Fatal(err)
		}
		r, err := relay.Start(s, relay.Options{Fleet: n}) // folds the fleet's evidence in
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if st := n.Stats(); st.Keys != keys || st.Nodes != nodes {
			b.Fatalf("synced with %+v, want %d keys of %d nodes", st, keys, nodes)
		}
		runtime.GC()
		runtime.ReadMemStats(&ms)
		heap = float64(ms.HeapAlloc-before) / (1 << 20)
		r.Close()
		n.Close()
		s.Close()
		b.StartTimer()
	}
	b.ReportMetric(heap, "heap-MB")
}

// BenchmarkSelectObserve is one Select and Observe over 1,000 shapes
// (two backends), with no fleet (off), and with a node attached whose
// Scheduler holds another node's evidence on every bucket, collecting,
// publishing and folding every second (on, the default Interval) or
// every 10 ms (on-10ms): the fleet works off the hot path, so off and on
// should not differ beyond noise. (The 2 allocations an op are the
// benchmark's: b.Loop keeps each Decision alive.)
func BenchmarkSelectObserve(b *testing.B) {
	const shapes = 1000
	specs := make([]kernels.Spec, shapes)
	for i := range specs {
		specs[i] = kernels.Spec{Op: kernels.Opaque, DType: kernels.F32, In: []kernels.Shape{{64}},
			Params: kernels.Params{Name: fmt.Sprintf("op%d", i), FLOPs: int64(1e6 + i), Bytes: 4096}}
	}
	timing := [2]backends.Timing{{Duration: 30 * time.Microsecond, Clock: backends.WallClock}, {Duration: 20 * time.Microsecond, Clock: backends.WallClock}}
	for _, mode := range []struct {
		name     string
		interval time.Duration
	}{{"off", 0}, {"on", time.Second}, {"on-10ms", 10 * time.Millisecond}} {
		on := mode.interval > 0
		b.Run("fleet="+mode.name, func(b *testing.B) {
			s, err := adaptive.New(adaptive.Config{Backends: benchBackends(), Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if on {
				var p provider
				p.start(b, b.TempDir())
				other := newScheduler(b, 1)
				for _, sp := range specs {
					if _, err := other.Select(sp, adaptive.Residency{}); err != nil {
						b.Fatal(err)
					}
				}
				no := join(b, connect(b, &p), other, DefaultOptions("other", testFP).WithBucket("bench"))
				for i, sp := range specs {
					d, _ := other.Select(sp, adaptive.Residency{})
					other.Observe(d, timing[i%2])
				}
				flushed(b, no)
				n := join(b, connect(b, &p), s, DefaultOptions("me", testFP).WithBucket("bench").
					WithInterval(mode.interval).WithLogger(zerolog.Nop()))
				if err := n.WaitSynced(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			for _, sp := range specs {
				d, _ := s.Select(sp, adaptive.Residency{})
				s.Observe(d, timing[d.Backend])
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				d, err := s.Select(specs[i], adaptive.Residency{})
				if err != nil {
					b.Fatal(err)
				}
				s.Observe(d, timing[d.Backend])
				if i++; i == shapes {
					i = 0
				}
			}
		})
	}
}

// benchBackends are the benchmarks' two described backends, a CPU and a
// GPU with the test figures.
func benchBackends() []backends.Backend {
	return []backends.Backend{
		backends.Described(backends.Info{Name: "cpu", Kind: backends.CPU, SharedMemory: true,
			Nominal: backends.Nominal{GFLOPS: 100, MemGBps: 50, DispatchUs: 1}}),
		backends.Described(backends.Info{Name: "gpu", Kind: backends.GPU,
			Nominal: backends.Nominal{GFLOPS: 10000, MemGBps: 1000, DispatchUs: 10, LinkGBps: 25, LinkLatencyUs: 20}}),
	}
}
