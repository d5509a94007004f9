package fleet

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/adaptsched/adaptsched/learned"
)

// Shards is how many keys a node's evidence is spread over: bucket
// names hash to one of them, and a change re-publishes only its shard.
// 10,000 buckets × 2 backends make values of about 16 KB.
const Shards = 64

// Timeouts of one JetStream request (a put, the bucket's set-up) and of
// a put by Close, and the back-off between failed set-ups.
const (
	requestTimeout = 5 * time.Second
	closeTimeout   = time.Second
	minBackoff     = 250 * time.Millisecond
	maxBackoff     = 30 * time.Second
)

// Stats counts what a Node did. Malformed and Foreign values are
// skipped whole.
type Stats struct {
	Connected bool // the key-value bucket is set up and the connection is up
	// Synced: the node has read the values put before it started, and
	// publishes.
	Synced    bool
	Nodes     int    // other nodes whose values are held
	Keys      int    // keys (bucket, backend) with other nodes' evidence
	Published uint64 // values put
	Received  uint64 // other nodes' values folded in
	Malformed uint64 // values that do not decode, or whose key is not a node's
	Foreign   uint64 // values of another fingerprint under this one's keys
	Expired   uint64 // other nodes' values aged out (MaxAge)
	Conflicts uint64 // values under this node's ID put by another process
	Errors    uint64 // failed set-ups and puts
	Limited   uint64 // other nodes' values over the limits (bytes, nodes, keys), skipped
	SetAside  uint64 // values of peers set aside (their evidence contradicted by this node's), skipped
	Aside     int    // peers set aside
}

// Node shares a Scheduler's evidence with the other nodes of a fleet
// through a NATS JetStream key-value bucket (DESIGN.md § Persistence). It
// never calls the Scheduler: it takes the Scheduler's changes and gives
// back the fleet's evidence as data (Exchange), which package relay
// carries between the two.
//
// Each node puts its own evidence, per bucket and backend, under keys of
// its own, FINGERPRINT.NODE.sNN (one writer per key: no conflicts), and
// watches FINGERPRINT.>: the other nodes' evidence is summed per key
// (the ledger) and handed out to be folded into the Scheduler's priors
// (adaptive.Fold.Foreign), so only machines of the same kind are merged.
// A value is cumulative — everything the node has learned, with what its
// store gave it — so a lost or repeated message changes nothing; a
// restarted node replaces its previous values and never adopts a value
// under its ID that it did not put (anyone who can write to the bucket
// can write one).
//
// Peers are untrusted. Their values are bounded before they are decoded
// (maxValueBytes, maxPeers, Options.MaxPeerKeys); their evidence reaches the
// Scheduler as a prior of bounded weight (adaptive.Fold), never its store
// (adaptive's Changes hold its own evidence only); and a peer whose
// evidence this node's own measurements contradict is set aside by name,
// its values ignored from then on (ledger.vet; the Scheduler's own check
// sets the fleet's evidence aside at once, adaptive's verify.go).
//
// Evidence is bandit.Stats: N, Σy and Σy² of y = ln(duration_us), as the
// Scheduler's bandit holds them (discounted per bucket when
// bandit.Config.Discount < 1; exactly the undiscounted sums with 1). With
// Discount 1 the merged posterior is the posterior of the pooled
// observations, whichever node made them.
//
// The network is the node's own goroutine's, every Interval and as soon
// as Exchange hands it changes: reading the other nodes' values as they
// come, publishing the shards that changed (and every shard each
// MaxAge/4, so that live values do not age out). If the server is down
// the Scheduler runs on alone: the node retries with back-off, and on
// reconnection republishes everything, so nothing learned meanwhile is
// lost. Exchange, Stats, Flush and Close are safe for concurrent use.
type Node struct {
	opts Options
	nc   *nats.Conn
	log  zerolog.Logger

	cancel   context.CancelFunc
	done     chan struct{}
	syncedCh chan struct{} // closed once the node is synced
	flushReq chan chan error
	kick     chan struct{} // Exchange took changes: publish them
	updated  chan struct{} // totals changed since the last Exchange (Updated)
	once     sync.Once

	// mu guards st and the ledger, which the loop and Exchange share; the
	// loop never holds it over the network.
	mu     sync.Mutex
	st     Stats
	ledger *ledger

	// The loop's state.
	kv         jetstream.KeyValue
	w          jetstream.KeyWatcher
	maxAge     time.Duration // Options.MaxAge, or the bucket's if shorter
	retryAt    time.Time
	backoff    time.Duration
	failing    bool
	reconnects uint64
	// limitWarned: a peer's value over the limits has been logged at
	// warn level (entry); later ones go to debug, as Stats counts them.
	limitWarned bool
	// longWarned: an own key left out of the values put for a name
	// longer than peers accept has been logged (publish).
	longWarned bool
	// bucketWarned: the bucket's unsafe configuration has been logged
	// (checkBucket).
	bucketWarned bool
}

// Start joins the fleet through nc, which the caller owns (and closes
// after Close), and starts the node's goroutine. It returns at once,
// whether the server is up or not. Hand the node to a relay
// (relay.Options.Fleet) before the Scheduler's first Select.
func Start(nc *nats.Conn, opts Options) (*Node, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if nc == nil {
		return nil, fmt.Errorf("%w: nil connection", ErrOptions)
	}
	var nb [8]byte
	_, _ = crand.Read(nb[:])
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{
		opts: opts, nc: nc, log: opts.Logger,
		ledger: newLedger(opts.Fingerprint.Hash, opts.NodeID, binary.LittleEndian.Uint64(nb[:]), opts.MaxPeerKeys),
		cancel: cancel, done: make(chan struct{}), syncedCh: make(chan struct{}),
		flushReq: make(chan chan error), kick: make(chan struct{}, 1), updated: make(chan struct{}, 1),
		maxAge: opts.MaxAge, backoff: minBackoff,
	}
	go n.loop(ctx)
	return n, nil
}

// Stats returns the node's counters.
func (n *Node) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.st
}

// Exchange takes a Scheduler's changes (package relay's batch): their
// own evidence is published, at once, in the background (a shape's
// bucket is not shared: its bucket's evidence holds it). It appends to
// dst, and returns, the evidence from elsewhere (every other node's; this
// node's previous runs are in its store) of each key whose total changed
// since the last call, for adaptive.Fold.Foreign. It never waits for the network.
func (n *Node) Exchange(changes []learned.Change, dst []learned.Foreign) []learned.Foreign {
	took := false
	n.mu.Lock()
	for i := range changes {
		if c := &changes[i]; !c.Shape {
			n.ledger.learned(c.Key, c.Own())
			took = true
		}
	}
	aside, ratios := n.ledger.vet()
	dst = n.ledger.totals(dst)
	n.counted()
	n.mu.Unlock()
	for i, name := range aside {
		n.log.Warn().Str("peer", name).Float64("theirs_over_ours", ratios[i]).
			Msg("fleet: peer " + name + "'s evidence contradicts this node's own measurements; set aside, its values ignored from now on")
	}
	if took {
		select {
		case n.kick <- struct{}{}:
		default:
		}
	}
	return dst
}

// Updated returns a channel that receives (at most one value waits) when
// the evidence from elsewhere of some key changed since the last
// Exchange: a relay then exchanges, paced, so that what arrives is
// folded in without waiting for its interval.
func (n *Node) Updated() <-chan struct{} { return n.updated }

// notify signals Updated when the ledger holds changed totals (n.mu
// held).
func (n *Node) notify() {
	if len(n.ledger.changed) == 0 {
		return
	}
	select {
	case n.updated <- struct{}{}:
	default:
	}
}

// Flush publishes what changed now, rather than at the next Interval
// or in the background after Exchange. It returns ErrOffline when the
// node cannot publish (nothing is lost: it publishes once it can),
// ErrClosed after Close.
func (n *Node) Flush(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case n.flushReq <- reply:
	case <-n.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WaitSynced waits until the node has read the fleet's values (and read
// back its own), or ctx ends: a program that wants to start from the
// fleet's evidence calls it before it starts its relay (whose start folds
// them into the Scheduler), with a timeout (a server that is down never
// syncs).
func (n *Node) WaitSynced(ctx context.Context) error {
	select {
	case <-n.syncedCh:
		return nil
	case <-n.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close publishes one last time (if the server is reachable) what
// Exchange took, stops watching and stops the node: close the relay
// first, so that its last round reaches the node. It does not close the
// connection. A second Close does nothing.
func (n *Node) Close() error {
	n.once.Do(n.cancel)
	<-n.done
	return nil
}

// loop is the node's goroutine.
func (n *Node) loop(ctx context.Context) {
	defer close(n.done)
	t := time.NewTicker(n.opts.Interval)
	defer t.Stop()
	n.tick(ctx)
	for {
		var updates <-chan jetstream.KeyValueEntry
		if n.w != nil {
			updates = n.w.Updates()
		}
		select {
		case <-ctx.Done():
			n.syncBeforeClose()
			_ = n.publish(closeTimeout)
			n.unwatch()
			return
		case e, ok := <-updates:
			if !ok {
				n.fail(errors.New("watcher closed"))
				continue
			}
			n.entry(e)
		case <-t.C:
			_ = n.tick(ctx)
		case <-n.kick:
			_ = n.publish(requestTimeout)
		case reply := <-n.flushReq:
			reply <- n.tick(ctx)
		}
	}
}

// syncBeforeClose gives a node that has not synced yet (a short run)
// closeTimeout to do so, so that Close can publish what it learned.
func (n *Node) syncBeforeClose() {
	if n.isSynced() || !n.nc.IsConnected() {
		return
	}
	deadline := time.Now().Add(closeTimeout)
	if n.kv == nil {
		n.setup(context.Background())
	}
	for n.w != nil && !n.isSynced() {
		t := time.NewTimer(time.Until(deadline))
		select {
		case e, ok := <-n.w.Updates():
			t.Stop()
			if !ok {
				return
			}
			n.entry(e)
		case <-t.C:
			return
		}
	}
}

// tick sets the bucket up if needed, ages values out and publishes.
func (n *Node) tick(ctx context.Context) error {
	if r := n.nc.Stats().Reconnects; r != n.reconnects {
		// The server may have restarted without its data: read
		// everything again and republish everything.
		n.reconnects = r
		n.unwatch()
	}
	if n.kv == nil && !n.opts.Now().Before(n.retryAt) {
		n.setup(ctx)
	}
	n.mu.Lock()
	n.ledger.expire(n.opts.Now(), n.maxAge)
	n.notify()
	n.mu.Unlock()
	err := n.publish(requestTimeout)
	n.gauges()
	return err
}

// isSynced reports whether the node has read the values put before it
// watched.
func (n *Node) isSynced() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ledger.synced
}

// gauges updates what Stats reports of the ledger and the connection.
func (n *Node) gauges() {
	connected := n.kv != nil && n.nc.IsConnected()
	n.mu.Lock()
	l := n.ledger
	nodes := l.nodesLive()
	n.st.Connected = connected
	n.st.Synced = l.synced
	n.st.Keys = l.held
	n.st.Nodes = nodes
	n.counted()
	n.mu.Unlock()
}

// counted copies the ledger's counters into st (n.mu held).
func (n *Node) counted() {
	c := &n.ledger.counts
	n.st.Received, n.st.Malformed, n.st.Foreign = c.Received, c.Malformed, c.Foreign
	n.st.Expired, n.st.Conflicts = c.Expired, c.Conflicts
	n.st.Limited, n.st.SetAside, n.st.Aside = c.Limited, c.SetAside, len(n.ledger.aside)
}

// setup finds or creates the key-value bucket and watches this
// fingerprint's keys until ctx ends.
func (n *Node) setup(loop context.Context) {
	if !n.nc.IsConnected() {
		return // the connection retries, with its own back-off
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	js, err := jetstream.New(n.nc)
	if err != nil {
		n.fail(err)
		return
	}
	kv, err := js.KeyValue(ctx, n.opts.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		_, err = js.CreateStream(ctx, bucketStream(n.opts.Bucket, n.opts.MaxAge))
		if err == nil || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) { // or another node made it
			kv, err = js.KeyValue(ctx, n.opts.Bucket)
		}
	}
	if err != nil {
		n.fail(err)
		return
	}
	n.maxAge = n.opts.MaxAge
	if st, err := kv.Status(ctx); err == nil {
		if st.TTL() > 0 && st.TTL() < n.maxAge {
			n.maxAge = st.TTL()
		}
		n.checkBucket(st)
	}
	w, err := kv.Watch(loop, n.ledger.prefix+">")
	if err != nil {
		n.fail(err)
		return
	}
	n.kv, n.w = kv, w
	n.backoff = minBackoff
	n.mu.Lock()
	n.ledger.republish()
	n.mu.Unlock()
	if n.failing {
		n.log.Info().Str("bucket", n.opts.Bucket).Msg("fleet: connected")
		n.failing = false
	}
}

// bucketStream is the stream of a key-value bucket as the key-value
// client makes it (jetstream.CreateKeyValue) with history 1 and maxAge,
// what nats-server 2.9 offers (no per-key TTL, no limit markers), but
// refusing rollups. Rule: the node makes the bucket's stream itself.
// Reason: the client's allow rollups, for its Purge, and a put of a
// node's own key with the header "Nats-Rollup: all" purged every other
// node's values (TestBucketRefusesRollups).
func bucketStream(bucket string, maxAge time.Duration) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name: "KV_" + bucket, Description: "adaptsched fleet evidence", Subjects: []string{"$KV." + bucket + ".>"},
		MaxMsgsPerSubject: 1, MaxAge: maxAge, MaxBytes: -1, MaxMsgs: -1, MaxMsgSize: -1, MaxConsumers: -1,
		Storage: jetstream.FileStorage, Replicas: 1, Discard: jetstream.DiscardNew,
		Duplicates: min(2*time.Minute, maxAge), AllowDirect: true, DenyDelete: true,
	}
}

// checkBucket warns, once a run, of a bucket that lets a node purge or
// forge the other nodes' values, which the server's permissions (each
// node puts its own keys) do not stop: one that allows rollups, or
// whose stream transforms or takes in subjects (a node may make the
// bucket, and another node may have made it so: TestUnsafeBucketWarned).
func (n *Node) checkBucket(st jetstream.KeyValueStatus) {
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok || n.bucketWarned {
		return
	}
	cfg := bs.StreamInfo().Config
	var why string
	switch {
	case cfg.AllowRollup && !cfg.DenyPurge:
		why = "it allows rollups: a put of a node's own key can purge every value"
	case cfg.SubjectTransform != nil, len(cfg.Sources) > 0, cfg.Mirror != nil:
		why = "its stream transforms or takes in subjects: a node's puts can be stored under another's keys"
	default:
		return
	}
	n.bucketWarned = true
	n.log.Warn().Str("bucket", n.opts.Bucket).Str("why", why).
		Msg("fleet: the bucket lets a node purge or forge the others' values; delete it, and a node makes it anew without")
}

// fail drops the bucket after err and schedules the next set-up.
func (n *Node) fail(err error) {
	n.unwatch()
	n.mu.Lock()
	n.st.Errors++
	n.mu.Unlock()
	if !n.failing {
		n.log.Warn().Err(err).Str("bucket", n.opts.Bucket).Msg("fleet: unavailable; scheduling on local evidence, retrying")
		n.failing = true
	}
	n.retry()
}

// retry schedules the next set-up after a doubling back-off.
func (n *Node) retry() {
	n.retryAt = n.opts.Now().Add(n.backoff)
	n.backoff = min(2*n.backoff, maxBackoff)
}

// unwatch stops the watcher and forgets the bucket. The watcher stops
// in the background: unsubscribing waits for a lost server. Rule: its
// Updates are drained until they close. Reason: its delivery blocks on
// a full channel (256 values), holding its lock, so it never saw the
// unsubscription: a goroutine, and the values pending, leaked at each
// stop (TestStoppedWatcherDrained).
func (n *Node) unwatch() {
	if w := n.w; w != nil {
		go func() {
			for range w.Updates() {
			}
		}()
		go func() { _ = w.Stop() }()
	}
	n.kv, n.w = nil, nil
}
