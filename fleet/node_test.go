package fleet

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/learned"
)

// TestMergeEqualsPooled checks DESIGN.md § Persistence: evidence merged
// over the fleet gives every node the posterior of the pooled
// observations — the same observations split over 1 to 8 nodes at random
// give, on each node, the posteriors of one Scheduler fed them all,
// within 1e-9 relative.
func TestMergeEqualsPooled(t *testing.T) {
	const buckets = 3
	all := observations(1800, buckets, 7)
	want := pooled(t, buckets, all)
	var p provider
	p.start(t, t.TempDir())
	nc := connect(t, &p)
	for k := 1; k <= 8; k++ {
		t.Run(fmt.Sprint(k, "nodes"), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(k), 3))
			split := make([][]obs, k)
			for _, o := range all {
				i := r.IntN(k)
				split[i] = append(split[i], o)
			}
			nodes := make([]*member, k)
			scheds := make([]*adaptive.Scheduler, k)
			for i := range k {
				s := newScheduler(t, 1)
				scheds[i] = s
				nodes[i] = startNode(t, nc, s, fmt.Sprint("n", i), fmt.Sprint("pool", k))
				feed(t, s, split[i])
				// A node that saw none of a bucket makes it now, to
				// hold the others' evidence.
				for b := range buckets {
					if _, err := s.Select(spec(b), adaptive.Residency{}); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, n := range nodes {
				flushed(t, n)
			}
			for i, s := range scheds {
				eventually(t, 10*time.Second, func() error {
					if err := matches(s, want); err != nil {
						return fmt.Errorf("node %d: %w", i, err)
					}
					return nil
				})
			}
		})
	}
}

// TestRestartNoDoubleCount restarts a node under the same ID, without a
// store: it never adopts the values under its ID (anyone who can write
// to the bucket can write them), and replaces them with what it learns
// now, so the fleet never counts anything twice and holds what the
// restarted node knows.
func TestRestartNoDoubleCount(t *testing.T) {
	const buckets = 2
	all := observations(900, buckets, 11)
	before, after := all[:500], all[500:]
	want := pooled(t, buckets, after)
	var p provider
	p.start(t, t.TempDir())
	nc := connect(t, &p)

	a := newScheduler(t, 1)
	na := startNode(t, nc, a, "a", "restart")
	feed(t, a, before)
	flushed(t, na)
	na.Close()
	a.Close()

	b := newScheduler(t, 1)
	nb := startNode(t, nc, b, "b", "restart")
	for i := range buckets {
		if _, err := b.Select(spec(i), adaptive.Residency{}); err != nil {
			t.Fatal(err)
		}
	}
	a2 := newScheduler(t, 1)
	na2 := startNode(t, nc, a2, "a", "restart")
	feed(t, a2, after)
	flushed(t, na2)
	eventually(t, 10*time.Second, func() error { return matches(b, want) })
	if err := matches(a2, want); err != nil {
		t.Errorf("restarted a adopted its previous run's values: %v", err)
	}
	if st := nb.Stats(); st.Nodes != 1 || st.Conflicts != 0 {
		t.Errorf("b: %+v: want 1 other node, no conflicts", st)
	}
	if st := na2.Stats(); st.Conflicts != 0 {
		t.Errorf("restarted a: %+v: want no conflicts", st)
	}
}

// TestServerDownAtStart starts a node with no server: the Scheduler runs
// on its own evidence, Flush reports ErrOffline, and once the server is
// up the node publishes all it learned meanwhile.
func TestServerDownAtStart(t *testing.T) {
	const buckets = 2
	all := observations(400, buckets, 13)
	want := pooled(t, buckets, all)
	var p provider
	nc := connect(t, &p)
	a := newScheduler(t, 1)
	na := startNode(t, nc, a, "a", "down")
	feed(t, a, all[:200])
	if err := na.Flush(context.Background()); !errors.Is(err, ErrOffline) {
		t.Fatalf("Flush with the server down: %v, want ErrOffline", err)
	}
	if st := na.Stats(); st.Connected || st.Synced {
		t.Fatalf("server down: %+v", st)
	}
	feed(t, a, all[200:])
	p.start(t, t.TempDir())
	b := newScheduler(t, 1)
	startNode(t, connect(t, &p), b, "b", "down")
	for i := range buckets {
		if _, err := b.Select(spec(i), adaptive.Residency{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, func() error { return matches(b, want) })
}

// TestServerLostMidRun stops the server while two nodes run and starts
// it again on the same data: both keep scheduling, and what a learned
// while it was down reaches b once it is back.
func TestServerLostMidRun(t *testing.T) {
	const buckets = 2
	all := observations(600, buckets, 17)
	want := pooled(t, buckets, all)
	var p provider
	dir := t.TempDir()
	p.start(t, dir)
	a, b := newScheduler(t, 1), newScheduler(t, 1)
	na := startNode(t, connect(t, &p), a, "a", "lost")
	startNode(t, connect(t, &p), b, "b", "lost")
	for i := range buckets {
		if _, err := b.Select(spec(i), adaptive.Residency{}); err != nil {
			t.Fatal(err)
		}
	}
	feed(t, a, all[:300])
	flushed(t, na)
	eventually(t, 10*time.Second, func() error { return matches(b, pooled(t, buckets, all[:300])) })

	p.stop()
	feed(t, a, all[300:])
	if err := na.Flush(context.Background()); err == nil {
		t.Fatal("Flush with the server stopped: nil error")
	}
	p.start(t, dir)
	eventually(t, 15*time.Second, func() error { return matches(b, want) })
}

// TestServerLostNoData is TestServerLostMidRun with a server that comes
// back without its data (another machine, a wiped disk): the nodes set
// the bucket up again and republish everything.
func TestServerLostNoData(t *testing.T) {
	const buckets = 2
	all := observations(400, buckets, 19)
	want := pooled(t, buckets, all)
	var p provider
	p.start(t, t.TempDir())
	a, b := newScheduler(t, 1), newScheduler(t, 1)
	na := startNode(t, connect(t, &p), a, "a", "wiped")
	startNode(t, connect(t, &p), b, "b", "wiped")
	for i := range buckets {
		if _, err := b.Select(spec(i), adaptive.Residency{}); err != nil {
			t.Fatal(err)
		}
	}
	feed(t, a, all[:200])
	flushed(t, na)
	p.stop()
	feed(t, a, all[200:])
	p.start(t, t.TempDir())
	eventually(t, 15*time.Second, func() error { return matches(b, want) })
}

// TestOverLimitsWarnsOnce: values over the limits on what a node holds
// of its peers (bytes, and keys: Options.MaxPeerKeys) are left out and
// counted, and the first is logged at warn level, once, naming the peer
// and what it exceeds: the limits also cut an honest peer of many buckets.
func TestOverLimitsWarnsOnce(t *testing.T) {
	nc, kv := fleetBucket(t, "limits")
	ctx := context.Background()
	for _, peer := range []string{"big1", "big2"} {
		if _, err := kv.Put(ctx, testFP.Hash+"."+peer+".s00", make([]byte, maxValueBytes+1)); err != nil {
			t.Fatal(err)
		}
	}
	// Two records of a peer where the node holds one (MaxPeerKeys 1), and
	// one of another.
	gpu := learned.Key{Backend: "gpu", Bucket: "MatMul/f32/s0"}
	cpu := learned.Key{Backend: "cpu", Bucket: gpu.Bucket}
	st := bandit.Stats{N: 1, Sum: 3, SumSq: 9}
	for peer, recs := range map[string][]record{"wide": {{cpu, st}, {gpu, st}}, "narrow": {{gpu, st}}} {
		key := fmt.Sprintf("%s.%s.s%02d", testFP.Hash, peer, shardOf(gpu.Bucket))
		if _, err := kv.Put(ctx, key, appendValue(nil, &value{fingerprint: testFP.Hash, node: peer, nonce: 1, recs: recs})); err != nil {
			t.Fatal(err)
		}
	}
	var log syncBuf
	n, err := Start(nc, DefaultOptions("me", testFP).WithBucket("limits").WithMaxPeerKeys(1).WithLogger(zerolog.New(&log).Level(zerolog.WarnLevel)))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if st := n.Stats(); st.Limited != 3 || st.Nodes != 1 || st.Keys != 1 {
		t.Errorf("stats %+v, want 3 values limited and narrow's key held", st)
	}
	if got := strings.Count(log.String(), "is left out; Stats.Limited counts them"); got != 1 {
		t.Errorf("%d warnings of values over the limits, want 1:\n%s", got, log.String())
	}
	if !regexp.MustCompile(`(big1|big2) put a value of|wide would hold 2 keys`).MatchString(log.String()) {
		t.Errorf("the warning names no peer and its excess:\n%s", log.String())
	}
}

// TestMaxPeerKeysChecked: a limit on a peer's keys outside 1 to
// maxMaxPeerKeys is an error naming it, as an option and as a flag.
func TestMaxPeerKeysChecked(t *testing.T) {
	for _, n := range []int{-1, 0, maxMaxPeerKeys + 1} {
		if n != 0 { // 0 is the option's default
			if _, err := Start(nil, DefaultOptions("me", testFP).WithMaxPeerKeys(n)); !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "MaxPeerKeys") {
				t.Errorf("MaxPeerKeys %d: %v", n, err)
			}
		}
		var f Flags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f.Register(fs)
		if err := fs.Parse([]string{"-fleet-max-peer-keys", fmt.Sprint(n)}); err != nil {
			t.Fatal(err)
		}
		if err := f.Validate(); !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "-fleet-max-peer-keys") {
			t.Errorf("-fleet-max-peer-keys %d: %v", n, err)
		}
	}
}

// blockedWatchers counts the goroutines stuck in a key-value watcher's
// delivery, sending to an Updates channel that no one reads.
func blockedWatchers() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "[chan send") && strings.Contains(g, "jetstream.(*kvs).WatchFiltered") {
			n++
		}
	}
	return n
}

// TestStoppedWatcherDrained: a watcher the node stops (at Close, on a
// failure, on a reconnection) while more values wait than its Updates
// channel holds (256) is drained until it closes: its delivery goroutine
// blocked for good on the full channel, holding the values still
// pending, once per stop.
func TestStoppedWatcherDrained(t *testing.T) {
	nc, kv := fleetBucket(t, "drain")
	n, err := Start(nc, DefaultOptions("me", testFP).WithBucket("drain"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := n.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	before := blockedWatchers()
	n.mu.Lock() // the loop stops at its next value
	for i := range 600 {
		if _, err := kv.Put(ctx, fmt.Sprintf("%s.p%d.s00", testFP.Hash, i), []byte("junk")); err != nil {
			n.mu.Unlock()
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, func() error {
		if blockedWatchers() == before {
			return errors.New("the watcher's channel is not full yet")
		}
		return nil
	})
	n.once.Do(n.cancel) // Close, before the loop reads on
	n.mu.Unlock()
	n.Close()
	eventually(t, 10*time.Second, func() error {
		if got := blockedWatchers(); got != before {
			return fmt.Errorf("%d watchers blocked after Close, %d before", got, before)
		}
		return nil
	})
}

// TestLongOwnNameLeftOut: an own key whose bucket name is longer than
// peers' decoders accept (maxName) is left out of the value put, with
// one warning naming it and the limit, and the rest of its shard goes:
// a peer receives the normal key's evidence. Put in, it made peers
// refuse the whole shard as malformed, at debug level only.
func TestLongOwnNameLeftOut(t *testing.T) {
	nc, _ := fleetBucket(t, "long")
	ctx := context.Background()
	short := learned.Key{Backend: "cpu", Bucket: "MatMul/f32/s3"}
	long := learned.Key{Backend: "cpu"}
	for i := 0; long.Bucket == "" || shardOf(long.Bucket) != shardOf(short.Bucket); i++ {
		long.Bucket = fmt.Sprintf("Opaque:%s%d/f32/s20", strings.Repeat("x", maxName), i)
	}
	prior := bandit.NormalGamma{Mu: 3, Kappa: 1, Alpha: 1, Beta: 1}
	post := prior.With(bandit.Stats{N: 4, Sum: 12, SumSq: 36.04})
	var log syncBuf
	me, err := Start(nc, DefaultOptions("me", testFP).WithBucket("long").WithLogger(zerolog.New(&log).Level(zerolog.WarnLevel)))
	if err != nil {
		t.Fatal(err)
	}
	defer me.Close()
	peer, err := Start(nc, DefaultOptions("peer", testFP).WithBucket("long"))
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	for _, n := range []*Node{me, peer} {
		if err := n.WaitSynced(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // a second put warns no more
		me.Exchange([]learned.Change{{Key: long, Prior: prior, Posterior: post}, {Key: short, Prior: prior, Posterior: post}}, nil)
		if err := me.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := post.Since(prior)
	var got []learned.Foreign
	eventually(t, 10*time.Second, func() error {
		got = peer.Exchange(nil, got)
		for _, f := range got {
			if f.Key == short && f.Stats == want {
				return nil
			}
		}
		return fmt.Errorf("the peer received %+v, want %v's %+v", got, short, want)
	})
	for _, f := range got {
		if f.Key == long {
			t.Errorf("the peer received the long key's %+v", f.Stats)
		}
	}
	if st := peer.Stats(); st.Malformed != 0 {
		t.Errorf("the peer found %d values malformed", st.Malformed)
	}
	if got := strings.Count(log.String(), "is not shared"); got != 1 || !strings.Contains(log.String(), long.Bucket[:120]) ||
		!strings.Contains(log.String(), fmt.Sprint(maxName)) {
		t.Errorf("%d warnings of a long name, want 1 naming it and %d:\n%s", got, maxName, log.String())
	}
}
