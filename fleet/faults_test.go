package fleet

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/bandit"
)

// put writes a raw value into the test bucket, as another node (or a
// broken one) would.
func put(t *testing.T, nc *nats.Conn, bucket, key string, val []byte) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, key, val); err != nil {
		t.Fatal(err)
	}
}

// TestMalformedAndForeign puts values that no node of this fingerprint
// wrote: undecodable, with non-finite statistics, holding a key of
// another shard, under a key that names no node, of another fingerprint. Each is skipped and
// counted; a valid value put beside them is folded in.
func TestMalformedAndForeign(t *testing.T) {
	var p provider
	p.start(t, t.TempDir())
	nc := connect(t, &p)
	s := newScheduler(t, 1)
	n := startNode(t, nc, s, "me", "faults")
	if _, err := s.Select(spec(0), adaptive.Residency{}); err != nil {
		t.Fatal(err)
	}
	flushed(t, n)
	k := keyOf(0)
	good := bandit.Stats{N: 10, Sum: 30, SumSq: 90.5}
	enc := func(fp, node string, st bandit.Stats) []byte {
		return appendValue(nil, &value{fingerprint: fp, node: node, nonce: 1, recs: []record{{key: k, st: st}}})
	}
	pre := testFP.Hash + "."
	sh := fmt.Sprintf(".s%02d", shardOf(k.Bucket))
	wrong := fmt.Sprintf(".s%02d", (shardOf(k.Bucket)+1)%Shards)
	put(t, nc, "faults", pre+"o1"+sh, []byte("not a value"))
	put(t, nc, "faults", pre+"o2"+sh, enc(testFP.Hash, "o2", bandit.Stats{N: 1, Sum: mathNaN(), SumSq: 1}))
	put(t, nc, "faults", pre+"o3"+wrong, enc(testFP.Hash, "o3", good))
	put(t, nc, "faults", pre+"o4.x.y", enc(testFP.Hash, "o4", good))
	put(t, nc, "faults", pre+"o5"+sh, enc("ffffffffffffffff", "o5", good))
	put(t, nc, "faults", pre+"o6"+sh, enc(testFP.Hash, "o6", good))
	eventually(t, 10*time.Second, func() error {
		st := n.Stats()
		if st.Malformed != 4 || st.Foreign != 1 || st.Received != 1 {
			return fmt.Errorf("stats %+v: want 4 malformed, 1 foreign, 1 received", st)
		}
		if _, foreign, _ := s.Fold().Evidence(k); foreign != good {
			return fmt.Errorf("folded %+v, want %+v", foreign, good)
		}
		return nil
	})
}

// TestAgeOut checks that a departed node's evidence ages out (MaxAge)
// while a live node's, rewritten every MaxAge/4, does not.
func TestAgeOut(t *testing.T) {
	var p provider
	p.start(t, t.TempDir())
	const maxAge = 600 * time.Millisecond
	opts := func(id string) Options {
		return DefaultOptions(id, testFP).WithBucket("age").WithInterval(20 * time.Millisecond).WithMaxAge(maxAge)
	}
	start := func(id string) (*adaptive.Scheduler, *member) {
		s := newScheduler(t, 1)
		return s, join(t, connect(t, &p), s, opts(id))
	}
	a, na := start("a")
	live, _ := start("live")
	b, nb := start("b")
	feed(t, a, observations(50, 1, 1))
	feed(t, live, observations(70, 1, 2))
	feed(t, b, observations(1, 1, 3))
	flushed(t, na)
	eventually(t, 5*time.Second, func() error {
		if _, f, _ := b.Fold().Evidence(keyOf(0)); f.N != 120 {
			return fmt.Errorf("b holds %v observations of the others, want 120", f.N)
		}
		return nil
	})
	na.Close()
	time.Sleep(maxAge)
	eventually(t, 5*time.Second, func() error {
		if _, f, _ := b.Fold().Evidence(keyOf(0)); f.N != 70 {
			return fmt.Errorf("b holds %v observations of the others, want the live node's 70", f.N)
		}
		return nil
	})
	if st := nb.Stats(); st.Expired == 0 || st.Nodes != 1 {
		t.Errorf("b: %+v: want a's values expired, 1 node left", st)
	}
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", DefaultHost+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// exchange runs two nodes through the server at url and checks that each
// holds the other's evidence.
func exchange(t *testing.T, url string) {
	t.Helper()
	const buckets = 2
	all := observations(400, buckets, 23)
	want := pooled(t, buckets, all)
	var scheds [2]*adaptive.Scheduler
	for i := range scheds {
		nc, err := Connect(url, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		scheds[i] = newScheduler(t, 1)
		n := startNode(t, nc, scheds[i], fmt.Sprint("n", i), "loopback")
		feed(t, scheds[i], all[i*200:(i+1)*200])
		flushed(t, n)
	}
	for _, s := range scheds {
		eventually(t, 10*time.Second, func() error { return matches(s, want) })
	}
}

// TestLoopback runs two nodes through the embedded server listening on
// loopback.
func TestLoopback(t *testing.T) {
	ns, err := Serve(":0", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	host, port, err := splitHostPort(ns.Addr().String())
	if err != nil || host != DefaultHost {
		t.Fatalf("listening on %v (%v), want %s", ns.Addr(), err, DefaultHost)
	}
	exchange(t, "nats://"+DefaultHost+":"+strconv.Itoa(port))
}

// TestDebianServer runs two nodes through the nats-server binary on the
// PATH (Debian bookworm packages 2.9, which has no per-key TTL): the
// client must use only what 2.9 offers. It is skipped without one, unless
// ADAPTSCHED_REQUIRE_LIBS is set (make ci installs it).
func TestDebianServer(t *testing.T) {
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		if os.Getenv("ADAPTSCHED_REQUIRE_LIBS") != "" {
			t.Fatal("ADAPTSCHED_REQUIRE_LIBS is set and there is no nats-server on the PATH")
		}
		t.Skip("no nats-server on the PATH (apt-get install nats-server)")
	}
	port := freePort(t)
	cmd := exec.Command(bin, "-js", "-a", DefaultHost, "-p", strconv.Itoa(port), "-sd", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if out, err := exec.Command(bin, "--version").Output(); err == nil {
		t.Logf("%s", out)
	}
	exchange(t, "nats://"+DefaultHost+":"+strconv.Itoa(port))
}
