package fleet

// The merge ledger: what this node learned and what every other node put,
// summed per key. It is pure (no connection, no clock of its own, no
// Scheduler): the Node feeds it the watched values and its Scheduler's
// evidence, and takes from it the shards to publish and the totals to
// fold in, so that the merge is tested without a server (ledger_test.go).

import (
	"errors"
	"fmt"
	"math"
	"slices"
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

	counts counts
	synced bool
	dec    decoder
	val    value
	local  map[learned.Key]bandit.Stats // the Scheduler's own evidence
	own    [Shards]map[learned.Key]struct{}
	dirty  [Shards]bool
	putAt  [Shards]time.Time
	// longKey is the first own key left out of a value for a name longer
	// than maxName (encode), for the node to warn of once; zero if none.
	longKey learned.Key
	// nodes are the other nodes with a value held, by index; names and
	// values are by index, and free holds the indices of nodes whose
	// values all left, for the next new node (TestLedgerPeerSlotFreed).
	nodes  map[string]int32
	names  []string
	values []int
	free   []int32
	// The keys with foreign evidence, numbered on first sight: their IDs
	// index keys, contrib and marked. A key's ID is freed (freeIDs) once
	// its evidence has left and its empty total was handed out, for the
	// next new key (TestLedgerKeysBounded).
	ids     map[learned.Key]int32
	keys    []learned.Key
	freeIDs []int32
	contrib [][]contribution
	held    int                     // keys with other nodes' evidence
	seen    map[nodeShard]time.Time // when each other node's value was put
	changed []int32                 // keys whose total changed, each once
	marked  []bool
	// aside are the peers set aside: their own evidence contradicted them
	// (vet); their values are ignored from then on.
	aside map[string]bool
	// peerKeys counts each other node's records held, against maxKeys
	// (Options.MaxPeerKeys), and peerNames the bytes of their names,
	// against maxKeys × keyNameBytes; shardIDs are the keys of each of its
	// values, whose contributions a later value without them withdraws
	// (TestLedgerLaterValueDropsKeys).
	peerKeys  map[int32]int
	peerNames map[int32]int
	shardIDs  map[nodeShard][]int32
	maxKeys   int
	dup       map[learned.Key]struct{} // checkRecords' scratch
	inValue   []bool                   // putOther's scratch, by key ID
}

// Limits on what other nodes may put, checked before their values are
// decoded (bytes, nodes) or held (keys, Options.MaxPeerKeys): a peer is
// untrusted. A value of 10,000 buckets × 2 backends is about 16 KB, one
// shard's; a node holds at most Shards values.
const (
	maxValueBytes = 256 << 10
	maxPeers      = 64
	// maxAside bounds the names of peers set aside that are remembered;
	// past it no new node is admitted, since a fleet that has set aside
	// so many is under attack.
	maxAside = 16 * maxPeers
	// keyNameBytes is what the names (backend and bucket) of a peer's
	// records held may hold on average: Options.MaxPeerKeys ×
	// keyNameBytes a peer. Real bucket names hold 10 to 120 bytes, 26 on
	// average (trace/testdata's traces). Rule: a peer's names count
	// against it. Reason: names of maxName that no other node names made
	// a record cost 2 KB, not 70–90 bytes (TestLedgerNamesBounded).
	keyNameBytes = 64
)

// ErrLimit reports a value over the limits on what a peer may put.
var ErrLimit = errors.New("fleet: over the limits on a peer's values")

// errConflict is put's answer to a value under this node's ID that
// another process put.
var errConflict = errors.New("fleet: another process publishes under this node's ID")

// counts is what the ledger counts of the values it is given (Stats).
type counts struct {
	Received, Malformed, Foreign, Expired, Conflicts uint64
	Limited, SetAside                                uint64 // over the limits; from peers set aside
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

// newLedger returns the ledger of node, holding at most maxKeys records of
// each other node.
func newLedger(fingerprint, node string, nonce uint64, maxKeys int) *ledger {
	l := &ledger{
		fingerprint: fingerprint, node: node, nonce: nonce, prefix: fingerprint + ".", maxKeys: maxKeys,
		local: map[learned.Key]bandit.Stats{},
		nodes: map[string]int32{}, ids: map[learned.Key]int32{}, seen: map[nodeShard]time.Time{},
		aside: map[string]bool{}, peerKeys: map[int32]int{}, peerNames: map[int32]int{}, shardIDs: map[nodeShard][]int32{},
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
// it under this node's ID); a value under this node's own ID is never
// adopted (putOwn).
func (l *ledger) put(key string, v []byte, created time.Time) error {
	node, shard, err := l.parseKey(key)
	if err != nil {
		return err
	}
	if err := l.admit(node, v); err != nil {
		return err
	}
	defer l.trimNames()
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
	return l.putOther(node, shard, created)
}

// admit refuses, before decoding, a value from a peer set aside, one of
// more than maxValueBytes, and one from a node beyond maxPeers.
func (l *ledger) admit(node string, v []byte) error {
	switch _, known := l.nodes[node]; {
	case node == l.node:
	case l.aside[node]:
		l.counts.SetAside++
		return fmt.Errorf("fleet: a value of %s, set aside", node)
	case !known && len(l.nodes) >= maxPeers:
		l.counts.Limited++
		return fmt.Errorf("%w: more than %d other nodes", ErrLimit, maxPeers)
	case !known && len(l.aside) >= maxAside:
		l.counts.Limited++
		return fmt.Errorf("%w: %d peers set aside, no new one admitted", ErrLimit, len(l.aside))
	}
	if len(v) > maxValueBytes {
		l.counts.Limited++
		return fmt.Errorf("%w: %s put a value of %d bytes, more than %d", ErrLimit, node, len(v), maxValueBytes)
	}
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
	if err == nil {
		err = l.checkRecords(l.val.recs)
	}
	if err == nil {
		// Rule: a record of no weight (N 0) is left out. Reason: its Σy
		// would move the key's total mean with nothing for the Fold's cap
		// to weigh, and vet skips it (TestLedgerWeightless). A node's arm
		// widened back to its prior (bandit.NormalGamma.Widen) sends one.
		// Rule: so is a record wider than bandit.MaxSpreadLn, on its own
		// (Stats.SpreadWithin). Reason: summed in, it made the key's total
		// too wide for the Fold, which then dropped every peer's evidence
		// for the key (TestLedgerWideRecord).
		// Rule: so is a record whose spread is negative beyond rounding.
		// Reason: no durations have one, and summed in it made the key's
		// total narrower than the honest peers' evidence, overconfident
		// (TestLedgerNegativeSpread).
		l.val.recs = slices.DeleteFunc(l.val.recs, func(r record) bool {
			return r.st.N == 0 || !r.st.SpreadWithin()
		})
	}
	return err
}

// maxStat bounds a peer's N, Σy and Σy² in size: figures merely finite
// could sum, over maxPeers values, to ±Inf or NaN in totals and poison
// the posterior (TestLedgerTotalsFinite). No node's evidence comes near.
const maxStat = 1e300

// checkRecords reports a record with a figure over maxStat or a mean
// over bandit.MaxMeanLn (no durations give one: with a tiny N it would
// move the key's total by any amount, TestLedgerWeightless), and a key
// named twice, whose second copy would count the peer's evidence twice
// and outlive the value (TestLedgerDuplicateRecord).
func (l *ledger) checkRecords(recs []record) error {
	if l.dup == nil {
		l.dup = map[learned.Key]struct{}{}
	}
	defer clear(l.dup)
	for _, r := range recs {
		if !(math.Abs(r.st.N) <= maxStat && math.Abs(r.st.Sum) <= maxStat && math.Abs(r.st.SumSq) <= maxStat) {
			return fmt.Errorf("%w: %s %s: %+v, over %g", ErrMalformed, r.key.Backend, r.key.Bucket, r.st, maxStat)
		}
		if r.st.N > 0 && !r.st.MeanWithin() {
			return fmt.Errorf("%w: %s %s: %+v, a mean ln µs over %d", ErrMalformed, r.key.Backend, r.key.Bucket, r.st, bandit.MaxMeanLn)
		}
		if _, ok := l.dup[r.key]; ok {
			return fmt.Errorf("%w: %s %s twice", ErrMalformed, r.key.Backend, r.key.Bucket)
		}
		l.dup[r.key] = struct{}{}
	}
	return nil
}

// putOwn applies a value under this node's ID (in l.val): this
// process's own is ignored, and any other is never adopted, since anyone
// who can write to the bucket can write it. One there before the sync is
// most likely this node's previous run (its evidence is in its store,
// and its next put replaces it); one after is another process using the
// ID, a conflict.
func (l *ledger) putOwn() error {
	switch {
	case l.val.nonce == l.nonce, !l.synced:
	default:
		l.counts.Conflicts++
		return errConflict
	}
	return nil
}

// putOther applies another node's value of shard (in l.val), unless it
// would hold more than l.maxKeys of the node's records, or names of more
// than keyNameBytes a record on average. The value replaces the node's
// previous one of the shard: its keys that the new one lacks lose the
// node's contribution.
func (l *ledger) putOther(node, shard string, created time.Time) error {
	idx, known := l.nodes[node]
	ns := nodeShard{idx, shard}
	var prior, priorNames int
	var old []int32
	if known {
		prior, priorNames, old = l.peerKeys[idx], l.peerNames[idx], l.shardIDs[ns]
	}
	if keys := prior - len(old) + len(l.val.recs); keys > l.maxKeys {
		l.counts.Limited++
		return fmt.Errorf("%w: %s would hold %d keys, more than %d", ErrLimit, node, keys, l.maxKeys)
	}
	oldNames, newNames := l.namesOf(old), 0
	for _, r := range l.val.recs {
		newNames += len(r.key.Backend) + len(r.key.Bucket)
	}
	if names := priorNames - oldNames + newNames; names > l.maxKeys*keyNameBytes {
		l.counts.Limited++
		return fmt.Errorf("%w: %s would hold %d bytes of key names, more than %d (%d a key)", ErrLimit, node, names, l.maxKeys*keyNameBytes, keyNameBytes)
	}
	if !known {
		idx = l.addNode(node)
		ns.node = idx
	}
	_, held := l.seen[ns]
	if !held {
		l.values[idx]++
	}
	ids := make([]int32, len(l.val.recs))
	for j, r := range l.val.recs {
		id := l.id(r.key)
		ids[j] = id
		l.inValue[id] = true
		cs := l.contrib[id]
		i := len(cs)
		if held { // before a node's first value of a shard, it holds none of its keys
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
	for _, id := range old {
		if !l.inValue[id] {
			l.withdraw(id, idx)
		}
	}
	for _, id := range ids {
		l.inValue[id] = false
	}
	l.peerKeys[idx] += len(ids) - len(old)
	l.peerNames[idx] += newNames - oldNames
	l.shardIDs[ns] = ids
	l.seen[ns] = created
	l.counts.Received++
	return nil
}

// namesOf returns the bytes of the names of keys ids, which a value
// held holds.
func (l *ledger) namesOf(ids []int32) int {
	n := 0
	for _, id := range ids {
		n += len(l.keys[id].Backend) + len(l.keys[id].Bucket)
	}
	return n
}

// addNode gives node an index, a freed one if there is one.
func (l *ledger) addNode(node string) int32 {
	var idx int32
	if n := len(l.free); n > 0 {
		idx, l.free = l.free[n-1], l.free[:n-1]
		l.names[idx] = node
	} else {
		idx = int32(len(l.names))
		l.names = append(l.names, node)
		l.values = append(l.values, 0)
	}
	l.nodes[node] = idx
	return idx
}

// withdraw removes node idx's contribution to key id.
func (l *ledger) withdraw(id, idx int32) {
	cs := l.contrib[id]
	for i := range cs {
		if cs[i].node == idx {
			l.contrib[id] = append(cs[:i], cs[i+1:]...)
			l.change(id)
			if len(cs) == 1 {
				l.held--
			}
			return
		}
	}
}

// remove applies the deletion of key: another node's value leaves. A key
// that is not a node's is counted as malformed, and returned as an error.
func (l *ledger) remove(key string) error {
	node, shard, err := l.parseKey(key)
	if err == nil && node != l.node {
		if idx, ok := l.nodes[node]; ok {
			l.drop(nodeShard{idx, shard})
		}
	}
	return err
}

// checkShard reports records that do not belong in the shard named
// shard ("sNN"): a node's contributions are found by shard.
func checkShard(shard string, recs []record) error {
	var s int
	if _, err := fmt.Sscanf(shard, "s%02d", &s); err != nil || fmt.Sprintf("s%02d", s) != shard || s < 0 || s >= Shards {
		return fmt.Errorf("%w: shard %q", ErrMalformed, shard)
	}
	for _, r := range recs {
		if shardOf(r.key.Bucket) != s {
			return fmt.Errorf("%w: %s in shard %q", ErrMalformed, r.key.Bucket, shard)
		}
	}
	return nil
}

// id returns k's ID, numbering it on first sight, with a freed ID if
// there is one.
func (l *ledger) id(k learned.Key) int32 {
	id, ok := l.ids[k]
	if ok {
		return id
	}
	if n := len(l.freeIDs); n > 0 {
		id, l.freeIDs = l.freeIDs[n-1], l.freeIDs[:n-1]
		l.keys[id] = k
	} else {
		id = int32(len(l.keys))
		l.keys = append(l.keys, k)
		l.contrib = append(l.contrib, nil)
		l.marked = append(l.marked, false)
		l.inValue = append(l.inValue, false)
	}
	l.ids[k] = id
	return id
}

// forget frees key id, which no value holds and whose total has been
// handed out.
func (l *ledger) forget(id int32) {
	delete(l.ids, l.keys[id])
	l.keys[id] = learned.Key{}
	l.contrib[id] = nil
	l.freeIDs = append(l.freeIDs, id)
}

// maxSpareNames bounds the decoder's interned names beyond two a key
// held (its backend's and its bucket's): past it they are dropped
// (trimNames), as values refused, and keys gone, leave theirs behind.
const maxSpareNames = 1024

// trimNames drops the decoder's interned names once they outnumber the
// keys held by more than maxSpareNames; the keys keep their own.
func (l *ledger) trimNames() {
	if len(l.dec.names) > 2*len(l.ids)+maxSpareNames {
		l.dec.names = nil
	}
}

// change marks key id's total to be folded again.
func (l *ledger) change(id int32) {
	if !l.marked[id] {
		l.marked[id] = true
		l.changed = append(l.changed, id)
	}
}

// drop removes another node's value ns (deleted, aged out, or set
// aside), and frees the node's index once it holds no value.
func (l *ledger) drop(ns nodeShard) {
	if _, ok := l.seen[ns]; !ok {
		return
	}
	delete(l.seen, ns)
	for _, id := range l.shardIDs[ns] {
		l.withdraw(id, ns.node)
	}
	l.peerKeys[ns.node] -= len(l.shardIDs[ns])
	l.peerNames[ns.node] -= l.namesOf(l.shardIDs[ns])
	delete(l.shardIDs, ns)
	if l.values[ns.node]--; l.values[ns.node] == 0 {
		delete(l.nodes, l.names[ns.node])
		delete(l.peerKeys, ns.node)
		delete(l.peerNames, ns.node)
		l.names[ns.node] = ""
		l.free = append(l.free, ns.node)
	}
}

// expire drops the other nodes' values put more than maxAge before now:
// a departed node's evidence ages out here as its values do in the
// bucket (where nats-server 2.9 deletes them without telling the
// watchers).
func (l *ledger) expire(now time.Time, maxAge time.Duration) {
	for ns, at := range l.seen {
		if now.Sub(at) > maxAge {
			l.drop(ns)
			l.counts.Expired++
		}
	}
}

// totals appends to dst the new totals of the keys that changed since
// the last call (each key's evidence from elsewhere: every other node's
// not set aside), and forgets that they changed.
func (l *ledger) totals(dst []learned.Foreign) []learned.Foreign {
	for _, id := range l.changed {
		k := l.keys[id]
		var t bandit.Stats
		for _, c := range l.contrib[id] {
			t = t.Add(c.st)
		}
		dst = append(dst, learned.Foreign{Key: k, Stats: t})
		l.marked[id] = false
		if len(l.contrib[id]) == 0 {
			l.forget(id)
		}
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

// encode appends to dst the value of shard s: this node's own evidence
// (what its Scheduler learned, with what it loaded from its store) for
// every key of the shard, but a key with a name longer than maxName.
// Rule: such a key is left out, and the rest of the shard goes. Reason:
// peers' decoders refuse a value holding it as malformed, at debug level,
// and so lost every key of the shard (TestLongOwnNameLeftOut).
func (l *ledger) encode(dst []byte, s int) []byte {
	l.val = value{fingerprint: l.fingerprint, node: l.node, nonce: l.nonce, recs: l.val.recs[:0]}
	for k := range l.own[s] {
		if len(k.Backend) > maxName || len(k.Bucket) > maxName {
			if l.longKey == (learned.Key{}) {
				l.longKey = k
			}
			continue
		}
		l.val.recs = append(l.val.recs, record{key: k, st: l.local[k]})
	}
	return appendValue(dst, &l.val)
}

// take returns the value of shard s to put (encode) and marks the shard
// clean: the value holds everything learned so far. Evidence learned
// while the put is in flight marks it dirty again, for the next put;
// cleared once the put returned, it stayed unpublished and the peers
// kept an older total (TestLedgerLearnedDuringPut).
func (l *ledger) take(s int) []byte {
	l.dirty[s] = false
	return l.encode(nil, s)
}

// published records that shard s was put at now.
func (l *ledger) published(s int, now time.Time) { l.putAt[s] = now }

// unsent marks shard s, taken but not put, to be put again.
func (l *ledger) unsent(s int) { l.dirty[s] = true }

// nodesLive counts the other nodes with a value held.
func (l *ledger) nodesLive() int { return len(l.nodes) }

// vet sets aside every peer whose evidence this node's own contradicts,
// and returns their names and the ratio of their durations to this
// node's: over the keys where both have evidence, the mean difference of
// ln µs (each clamped to ±ln 10, so that one key cannot decide) is more
// than ln 3 either way once at least vetKeys keys or 3 own observations are in
// (the Scheduler's own check, adaptive's verify.go, on the same terms).
// A peer set aside loses every contribution, and its later values are
// ignored.
func (l *ledger) vet() (names []string, ratios []float64) {
	type acc struct{ sum, n, own float64 }
	per := map[int32]*acc{}
	for id, cs := range l.contrib {
		own := l.local[l.keys[id]]
		if own.N <= 0 {
			continue
		}
		for _, c := range cs {
			if c.st.N <= 0 {
				continue
			}
			a := per[c.node]
			if a == nil {
				a = &acc{}
				per[c.node] = a
			}
			a.sum += max(-vetClamp, min(vetClamp, own.Sum/own.N-c.st.Sum/c.st.N))
			a.n++
			a.own += own.N
		}
	}
	for name, idx := range l.nodes {
		a := per[idx]
		if a == nil || l.aside[name] || a.n < vetKeys && a.own < 3 {
			continue
		}
		if mean := a.sum / a.n; math.Abs(mean) > math.Log(vetRatio) {
			l.setAside(name, idx)
			names, ratios = append(names, name), append(ratios, math.Exp(-mean))
		}
	}
	return names, ratios
}

// The terms of vet.
const (
	vetKeys  = 3
	vetRatio = 3.0
	vetClamp = 2.302585092994046 // ln 10
)

// setAside drops every value of peer name (index idx) and ignores its
// later ones.
func (l *ledger) setAside(name string, idx int32) {
	l.aside[name] = true
	for ns := range l.seen {
		if ns.node == idx {
			l.drop(ns)
		}
	}
}
