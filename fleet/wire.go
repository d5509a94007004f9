package fleet

// The node's keys on the wire: its own shards, published, and the other
// nodes' entries, read.

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/adaptsched/adaptsched/learned"
)

// trunc returns name cut to 120 bytes and "…", for a warning.
func trunc(name string) string {
	if len(name) <= 120 {
		return name
	}
	return name[:120] + "…"
}

// shardOf returns the shard of a bucket's keys.
func shardOf(bucket string) int {
	h := fnv.New32a()
	h.Write([]byte(bucket))
	return int(h.Sum32() % Shards)
}

// key returns the key of this node's shard s.
func (n *Node) key(s int) string { return fmt.Sprintf("%s%s.s%02d", n.ledger.prefix, n.opts.NodeID, s) }

// publish puts every shard that changed, or is due to be rewritten
// before it ages out, each put waiting at most timeout. The shards are
// encoded under n.mu and put without it.
func (n *Node) publish(timeout time.Duration) error {
	if n.kv == nil || !n.nc.IsConnected() {
		return ErrOffline
	}
	now := n.opts.Now()
	type shardValue struct {
		s int
		v []byte
	}
	var due []shardValue
	n.mu.Lock()
	l := n.ledger
	if !l.synced {
		n.mu.Unlock()
		return ErrOffline
	}
	for s := range Shards {
		if l.due(s, now, n.maxAge) {
			due = append(due, shardValue{s, l.take(s)})
		}
	}
	long := l.longKey
	warn := long != (learned.Key{}) && !n.longWarned
	n.longWarned = n.longWarned || warn
	n.mu.Unlock()
	if warn {
		// Rule: an own key left out for a long name is a warning, once a
		// run. Reason: peers refuse it only at debug level, so its
		// evidence would go unshared unseen (TestLongOwnNameLeftOut).
		n.log.Warn().Str("backend", trunc(long.Backend)).Str("bucket", trunc(long.Bucket)).
			Int("backend_bytes", len(long.Backend)).Int("bucket_bytes", len(long.Bucket)).Int("max_name", maxName).
			Msgf("fleet: a key whose backend or bucket name is longer than the %d bytes peers accept is not shared (nor any other such key); the rest of its shard is", maxName)
	}
	for i, sv := range due {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		_, err := n.kv.Put(ctx, n.key(sv.s), sv.v)
		cancel()
		if err != nil {
			n.mu.Lock()
			for _, rest := range due[i:] {
				l.unsent(rest.s)
			}
			n.mu.Unlock()
			n.fail(err)
			return err
		}
		n.mu.Lock()
		l.published(sv.s, now)
		n.st.Published++
		n.mu.Unlock()
	}
	return nil
}

// entry applies one watched value (nil: the initial values are all in).
func (n *Node) entry(e jetstream.KeyValueEntry) {
	if e == nil {
		n.mu.Lock()
		first := n.ledger.sync()
		n.notify()
		n.mu.Unlock()
		if first {
			n.gauges()
			close(n.syncedCh)
		}
		return
	}
	var err error
	n.mu.Lock()
	if e.Operation() == jetstream.KeyValuePut {
		err = n.ledger.put(e.Key(), e.Value(), e.Created())
	} else {
		err = n.ledger.remove(e.Key())
	}
	n.counted()
	if n.ledger.synced {
		n.notify()
	}
	n.mu.Unlock()
	switch {
	case errors.Is(err, errConflict):
		n.log.Warn().Str("key", e.Key()).Msg(err.Error())
	case errors.Is(err, ErrLimit) && !n.limitWarned:
		// Rule: the first value over the limits is a warning, once a run.
		// Reason: the limits also cut an honest peer of more than 8,192
		// keys (4,096 buckets of two backends), or of names longer than
		// 64 bytes on average, which a debug line alone would hide
		// (TestOverLimitsWarnsOnce).
		n.limitWarned = true
		n.log.Warn().Err(err).Str("key", e.Key()).
			Msg("fleet: a peer's value over the limits on what a node holds of its peers is left out; Stats.Limited counts them (a peer's keys, and their names' bytes: -fleet-max-peer-keys, Options.MaxPeerKeys)")
	case err != nil:
		n.log.Debug().Err(err).Str("key", e.Key()).Msg("fleet: skipped a value")
	}
}
