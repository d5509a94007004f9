package fleet

// The merge ledger: what this node learned and what every other node put,
// summed per key. It is pure (no connection, no clock of its own, no
// Scheduler): the Node feeds it the watched values and its Scheduler's
// evidence, and takes from it the shards to publish and the totals to
// fold in, so that the merge is tested without a server (ledger_test.go).

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/learned"
)

// ledger is one node's view of the fleet's evidence. Its methods are
// called from one goroutine (the Node's loop).
type ledger struct {
	fingerprint, node string // this node's fingerprint hash and ID
	nonce             uint64 // this process's, in the values it puts
	prefix            string // "FINGERPRINT."

	counts   counts
	synced   bool
	dec      decoder
	val      value
	local    map[learned.Key]bandit.Stats // the Scheduler's own evidence
	baseline map[learned.Key]bandit.Stats // this node's values before this run
	own      [Shards]map[learned.Key]struct{}
	dirty    [Shards]bool
	putAt    [Shards]time.Time
	nodes    map[string]int32 // other nodes, by index into contributions
	// The keys with foreign evidence (or a baseline), numbered in order of
	// first sight: their IDs index keys, contrib and marked.
	ids     map[learned.Key]int32
	keys    []learned.Key
	contrib [][]contribution
	held    int                     // keys with other nodes' evidence
	seen    map[nodeShard]time.Time // when each other node's value was put
	changed []int32                 // keys whose total changed, each once
	marked  []bool
}

// errConflict is put's answer to a value under this node's ID that
// another process put.
var errConflict = errors.New("fleet: another process publishes under this node's ID")

// counts is what the ledger counts of the values it is given (Stats).
type counts struct {
	Received, Malformed, Foreign, Expired, Conflicts uint64
}

// contribution is one other node's evidence for a key.
type contribution struct {
	node int32
	st   bandit.Stats
}

// nodeShard names one value of another node.
type nodeShard struct {
	node  int32
	shard string
}

func newLedger(fingerprint, node string, nonce uint64) *ledger {
	l := &ledger{
		fingerprint: fingerprint, node: node, nonce: nonce, prefix: fingerprint + ".",
		local: map[learned.Key]bandit.Stats{}, baseline: map[learned.Key]bandit.Stats{},
		nodes: map[string]int32{}, ids: map[learned.Key]int32{}, seen: map[nodeShard]time.Time{},
	}
	for i := range l.own {
		l.own[i] = map[learned.Key]struct{}{}
	}
	return l
}

// sync records that every value put before the watch began has been
// given (the watcher's nil entry). It reports whether it is the first.
func (l *ledger) sync() bool {
	if l.synced {
		return false
	}
	l.synced = true
	return true
}

// put applies a value put under key at created. A value that is not a
// node's of this fingerprint, or does not decode, is skipped, counted,
// and returned as an error saying why (errConflict: another process put
// it under this node's ID); this node's own values of a previous run
// become its baseline.
func (l *ledger) put(key string, v []byte, created time.Time) error {
	node, shard, err := l.parseKey(key)
	if err != nil {
		return err
	}
	if err := l.decode(key, node, shard, v); err != nil {
		l.counts.Malformed++
		return err
	}
	if l.val.fingerprint != l.fingerprint {
		l.counts.Foreign++
		return fmt.Errorf("fleet: a value of other hardware (fingerprint %s)", l.val.fingerprint)
	}
	if node == l.node {
		return l.putOwn()
	}
	l.putOther(node, shard, created)
	return nil
}

// parseKey splits a watched key into its node and shard, counting a key
// that is not a node's as malformed.
func (l *ledger) parseKey(key string) (node, shard string, err error) {
	rest, ok := strings.CutPrefix(key, l.prefix)
	node, shard, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 || !idRE.MatchString(node) || strings.Contains(shard, ".") {
		l.counts.Malformed++
		return "", "", fmt.Errorf("%w: key %q is not a node's", ErrMalformed, key)
	}
	return node, shard, nil
}

// decode decodes v into l.val and checks it against its key.
func (l *ledger) decode(key, node, shard string, v []byte) error {
	err := l.dec.decode(v, &l.val)
	if err == nil && l.val.node != node {
		err = fmt.Errorf("%w: node %q under key %q", ErrMalformed, l.val.node, key)
	}
	if err == nil {
		err = checkShard(shard, l.val.recs)
	}
	return err
}

// putOwn applies a value under this node's ID (in l.val): this
// process's own is ignored, a previous run's read before the sync is
// the baseline, and anything else is another process using the ID.
func (l *ledger) putOwn() error {
	switch {
	case l.val.nonce == l.nonce:
	case !l.synced:
		for _, r := range l.val.recs {
			l.baseline[r.key] = r.st
			l.own[shardOf(r.key.Bucket)][r.key] = struct{}{}
			l.change(l.id(r.key))
		}
	default:
		l.counts.Conflicts++
		return errConflict
	}
	return nil
}

// putOther applies another node's value of shard (in l.val).
func (l *ledger) putOther(node, shard string, created time.Time) {
	idx, ok := l.nodes[node]
	if !ok {
		idx = int32(len(l.nodes))
		l.nodes[node] = idx
	}
	// Before a node's first value of a shard it holds nothing of that
	// shard's keys (checkShard): no need to search for its contribution.
	_, known := l.seen[nodeShard{idx, shard}]
	for _, r := range l.val.recs {
		id := l.id(r.key)
		cs := l.contrib[id]
		i := len(cs)
		if known {
			i = 0
			for i < len(cs) && cs[i].node != idx {
				i++
			}
		}
		if i == len(cs) {
			if len(cs) == 0 {
				l.held++
			}
			l.contrib[id] = append(cs, contribution{node: idx, st: r.st})
		} else {
			cs[i].st = r.st
		}
		l.change(id)
	}
	l.seen[nodeShard{idx, shard}] = created
	l.counts.Received++
}

// remove applies the deletion of key: another node's value leaves. A key
// that is not a node's is counted as malformed, and returned as an error.
func (l *ledger) remove(key string) error {
	node, shard, err := l.parseKey(key)
	if err == nil && node != l.node {
		l.drop(nodeShard{l.nodes[node], shard}, node)
	}
	return err
}

// checkShard reports records that do not belong in the shard named
// shard ("sNN"): a node's contributions are found by shard.
func checkShard(shard string, recs []record) error {
	var s int
	if _, err := fmt.Sscanf(shard, "s%02d", &s); err != nil || fmt.Sprintf("s%02d", s) != shard || s >= Shards {
		return fmt.Errorf("%w: shard %q", ErrMalformed, shard)
	}
	for _, r := range recs {
		if shardOf(r.key.Bucket) != s {
			return fmt.Errorf("%w: %s in shard %q", ErrMalformed, r.key.Bucket, shard)
		}
	}
	return nil
}

// id returns k's ID, numbering it on first sight.
func (l *ledger) id(k learned.Key) int32 {
	id, ok := l.ids[k]
	if !ok {
		id = int32(len(l.keys))
		l.ids[k] = id
		l.keys = append(l.keys, k)
		l.contrib = append(l.contrib, nil)
		l.marked = append(l.marked, false)
	}
	return id
}

// change marks key id's total to be folded again.
func (l *ledger) change(id int32) {
	if !l.marked[id] {
		l.marked[id] = true
		l.changed = append(l.changed, id)
	}
}

// drop removes another node's value ns (deleted, or aged out).
func (l *ledger) drop(ns nodeShard, node string) {
	if _, ok := l.nodes[node]; !ok {
		return
	}
	delete(l.seen, ns)
	for id, cs := range l.contrib {
		if len(cs) == 0 || fmt.Sprintf("s%02d", shardOf(l.keys[id].Bucket)) != ns.shard {
			continue
		}
		for i := range cs {
			if cs[i].node == ns.node {
				l.contrib[id] = append(cs[:i], cs[i+1:]...)
				l.change(int32(id))
				if len(cs) == 1 {
					l.held--
				}
				break
			}
		}
	}
}

// expire drops the other nodes' values put more than maxAge before now:
// a departed node's evidence ages out here as its values do in the
// bucket (where nats-server 2.9 deletes them without telling the
// watchers).
func (l *ledger) expire(now time.Time, maxAge time.Duration) {
	for ns, at := range l.seen {
		if now.Sub(at) > maxAge {
			for name, idx := range l.nodes {
				if idx == ns.node {
					l.drop(ns, name)
					break
				}
			}
			l.counts.Expired++
		}
	}
}

// totals appends to dst the new totals of the keys that changed since
// the last call (each key's evidence from elsewhere: this node's baseline
// plus every other node's), and forgets that they changed.
func (l *ledger) totals(dst []learned.Foreign) []learned.Foreign {
	for _, id := range l.changed {
		k := l.keys[id]
		t := l.baseline[k]
		for _, c := range l.contrib[id] {
			t = t.Add(c.st)
		}
		dst = append(dst, learned.Foreign{Key: k, Stats: t})
		l.marked[id] = false
	}
	l.changed = l.changed[:0]
	return dst
}

// learned records the Scheduler's own evidence for k, all of it: its
// shard is published again.
func (l *ledger) learned(k learned.Key, own bandit.Stats) {
	l.local[k] = own
	s := shardOf(k.Bucket)
	l.own[s][k] = struct{}{}
	l.dirty[s] = true
}

// republish marks every shard this node holds evidence in to be put
// again (a new bucket, or one that may have lost its values).
func (l *ledger) republish() {
	for i := range l.dirty {
		l.dirty[i] = len(l.own[i]) > 0
	}
}

// due reports whether shard s is to be put at now: it changed, or its
// value would age out (maxAge) before the next chance.
func (l *ledger) due(s int, now time.Time, maxAge time.Duration) bool {
	return len(l.own[s]) > 0 && (l.dirty[s] || now.Sub(l.putAt[s]) >= maxAge/4)
}

// encode appends to dst the value of shard s: this node's cumulative
// evidence (its baseline plus what it learned this run) for every key
// of the shard.
func (l *ledger) encode(dst []byte, s int) []byte {
	l.val = value{fingerprint: l.fingerprint, node: l.node, nonce: l.nonce, recs: l.val.recs[:0]}
	for k := range l.own[s] {
		l.val.recs = append(l.val.recs, record{key: k, st: l.baseline[k].Add(l.local[k])})
	}
	return appendValue(dst, &l.val)
}

// published records that shard s was put at now.
func (l *ledger) published(s int, now time.Time) {
	l.dirty[s], l.putAt[s] = false, now
}

// nodesLive counts the other nodes with a value held.
func (l *ledger) nodesLive() int {
	live := map[int32]bool{}
	for ns := range l.seen {
		live[ns.node] = true
	}
	return len(live)
}
