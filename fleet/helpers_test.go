package fleet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/hardware"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/learned"
	"github.com/adaptsched/adaptsched/relay"
)

// testFP is the fingerprint of the tests' nodes.
var testFP = hardware.Fingerprint{Hash: "00112233aabbccdd", Desc: "test machine"}

// newScheduler returns a Scheduler of one CPU backend, "cpu", whose
// bandit does not discount (Discount 1): its posteriors are then exactly
// its prior updated by the undiscounted sums of what it observed.
func newScheduler(t testing.TB, discount float64) *adaptive.Scheduler {
	t.Helper()
	cpu := backends.Described(backends.Info{Name: "cpu", Kind: backends.CPU, SharedMemory: true,
		Nominal: backends.Nominal{GFLOPS: 100, MemGBps: 50, DispatchUs: 1}})
	s, err := adaptive.New(adaptive.Config{Backends: []backends.Backend{cpu}, Seed: 1,
		Bandit: bandit.Config{Discount: discount}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// spec returns the matmul of bucket i (each i its own size class).
func spec(i int) kernels.Spec {
	m := 4 << i
	return kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{m, 64}, {64, 64}}}
}

// obs is one observation: the bucket's index and the duration.
type obs struct {
	bucket int
	us     float64
}

// observations returns n observations over buckets, each bucket's
// durations within ±1% of its own level, so that no observation is far
// enough out to be winsorized (bandit.Bucket.Observe) or to raise a
// change alarm.
func observations(n, buckets int, seed uint64) []obs {
	var out []obs
	x := seed
	for i := range n {
		x = x*6364136223846793005 + 1442695040888963407
		u := float64(x>>11)/(1<<53)*0.02 - 0.01
		b := i % buckets
		out = append(out, obs{b, 20 * float64(b+1) * math.Exp(u)})
	}
	return out
}

// feed runs each observation through s's Select and Observe.
func feed(t testing.TB, s *adaptive.Scheduler, os []obs) {
	t.Helper()
	for _, o := range os {
		d, err := s.Select(spec(o.bucket), adaptive.Residency{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Observe(d, backends.Timing{Duration: time.Duration(o.us * 1e3), Clock: backends.WallClock}); err != nil {
			t.Fatal(err)
		}
	}
}

// keyOf returns the key of bucket i's cpu arm.
func keyOf(i int) learned.Key {
	return learned.Key{Backend: "cpu", Bucket: kernels.BucketName(spec(i))}
}

// pooled returns the evidence of one Scheduler fed every observation.
func pooled(t testing.TB, buckets int, os []obs) []bandit.Stats {
	t.Helper()
	s := newScheduler(t, 1)
	f := s.Fold()
	feed(t, s, os)
	out := make([]bandit.Stats, buckets)
	for i := range out {
		own, _, ok := f.Evidence(keyOf(i))
		if !ok {
			t.Fatalf("pooled: no bucket %d", i)
		}
		out[i] = own
	}
	return out
}

// relDiff returns the largest relative difference of two Stats' fields.
func relDiff(a, b bandit.Stats) float64 {
	d := func(x, y float64) float64 { return math.Abs(x-y) / math.Max(math.Abs(y), 1e-300) }
	return max(d(a.N, b.N), d(a.Sum, b.Sum), d(a.SumSq, b.SumSq))
}

// matches reports (as an error) whether the evidence behind s's
// posteriors, its own and the fleet's, equals want within 1e-9 relative.
func matches(s *adaptive.Scheduler, want []bandit.Stats) error {
	f := s.Fold()
	for i, w := range want {
		own, foreign, ok := f.Evidence(keyOf(i))
		if !ok {
			return fmt.Errorf("bucket %d not made", i)
		}
		if got := own.Add(foreign); !(relDiff(got, w) <= 1e-9) {
			return fmt.Errorf("bucket %d: own %+v + fleet %+v, want %+v (relative %.3g)", i, own, foreign, w, relDiff(got, w))
		}
	}
	return nil
}

// provider is an in-process server that a test can stop and replace: the
// clients' reconnections reach whichever server it holds (none: refused).
type provider struct {
	mu sync.Mutex
	ns *server.Server
}

func (p *provider) InProcessConn() (net.Conn, error) {
	p.mu.Lock()
	ns := p.ns
	p.mu.Unlock()
	if ns == nil {
		return nil, errors.New("test: server down")
	}
	return ns.InProcessConn()
}

func (p *provider) ReadyForConnections(d time.Duration) bool {
	p.mu.Lock()
	ns := p.ns
	p.mu.Unlock()
	return ns != nil && ns.ReadyForConnections(d)
}

// start starts an embedded server (no listener) on dir and makes it p's.
func (p *provider) start(t testing.TB, dir string) {
	t.Helper()
	ns, err := Serve("", dir)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.ns = ns
	p.mu.Unlock()
	t.Cleanup(func() { p.stop() })
}

// stop shuts p's server down.
func (p *provider) stop() {
	p.mu.Lock()
	ns := p.ns
	p.ns = nil
	p.mu.Unlock()
	if ns != nil {
		ns.Shutdown()
		ns.WaitForShutdown()
	}
}

// connect connects to p's server in process, retrying every 20 ms.
func connect(t testing.TB, p *provider) *nats.Conn {
	t.Helper()
	nc, err := Connect(nats.DefaultURL, zerolog.Nop(), nats.InProcessServer(p),
		nats.CustomReconnectDelay(func(int) time.Duration { return 20 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// member is a node and the relay between it and its Scheduler, as a
// command runs them.
type member struct {
	*Node
	relay *relay.Relay
}

// join starts a node with opts and a relay between it and s, relaying
// every 10 ms; the test's end closes both.
func join(t testing.TB, nc *nats.Conn, s *adaptive.Scheduler, opts Options) *member {
	t.Helper()
	n, err := Start(nc, opts)
	if err != nil {
		t.Fatal(err)
	}
	r, err := relay.Start(s, relay.Options{Fleet: n, Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m := &member{Node: n, relay: r}
	t.Cleanup(func() { m.Close() })
	return m
}

// startNode joins node id to bucket for s, publishing every 10 ms.
func startNode(t testing.TB, nc *nats.Conn, s *adaptive.Scheduler, id, bucket string) *member {
	t.Helper()
	return join(t, nc, s, DefaultOptions(id, testFP).WithBucket(bucket).WithInterval(10*time.Millisecond))
}

// Close closes the relay (its last round reaches the node), then the
// node.
func (m *member) Close() error {
	m.relay.Close()
	return m.Node.Close()
}

// Flush runs a relay round and publishes.
func (m *member) Flush(ctx context.Context) error { return m.relay.Flush(ctx) }

// eventually retries f until it returns nil or d has passed.
func eventually(t testing.TB, d time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", d, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// flushed flushes n until it publishes.
func flushed(t testing.TB, n *member) {
	t.Helper()
	eventually(t, 10*time.Second, func() error { return n.Flush(context.Background()) })
}

func mathNaN() float64 { return math.NaN() }

// splitHostPort splits a listener's address.
func splitHostPort(addr string) (string, int, error) { return splitAddr(addr) }

// fleetBucket starts an embedded server, connects to it and makes the
// key-value bucket name in memory, for a test that puts peers' values
// itself before a node starts.
func fleetBucket(tb testing.TB, name string) (*nats.Conn, jetstream.KeyValue) {
	tb.Helper()
	var p provider
	p.start(tb, tb.TempDir())
	nc := connect(tb, &p)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	kv, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: name, History: 1, TTL: time.Hour, Storage: jetstream.MemoryStorage})
	if err != nil {
		tb.Fatal(err)
	}
	return nc, kv
}
