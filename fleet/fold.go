package fleet

// Folding the other nodes' values: each watched value is checked, summed
// per key with the other contributions, and the changed totals handed to
// the Scheduler.

import (
	"fmt"
	"strings"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/nats-io/nats.go/jetstream"
)

// entry applies one watched value (nil: the initial values are all in).
func (n *Node) entry(e jetstream.KeyValueEntry) {
	if e == nil {
		if !n.synced {
			n.synced = true
			n.foldChanged()
			n.gauges()
			close(n.syncedCh)
		}
		return
	}
	rest, ok := strings.CutPrefix(e.Key(), n.prefix)
	node, shard, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 || !idRE.MatchString(node) || strings.Contains(shard, ".") {
		n.count(&n.st.Malformed)
		n.log.Debug().Str("key", e.Key()).Msg("fleet: skipped a key that is not a node's")
		return
	}
	if e.Operation() != jetstream.KeyValuePut {
		if node != n.opts.NodeID {
			n.drop(nodeShard{n.nodes[node], shard}, node)
		}
		return
	}
	err := n.dec.decode(e.Value(), &n.val)
	if err == nil && n.val.node != node {
		err = fmt.Errorf("%w: node %q under key %q", ErrMalformed, n.val.node, e.Key())
	}
	if err == nil {
		err = checkShard(shard, n.val.recs)
	}
	if err != nil {
		n.count(&n.st.Malformed)
		n.log.Debug().Err(err).Str("key", e.Key()).Msg("fleet: skipped a malformed value")
		return
	}
	if n.val.fingerprint != n.opts.Fingerprint.Hash {
		n.count(&n.st.Foreign)
		n.log.Debug().Str("key", e.Key()).Str("fingerprint", n.val.fingerprint).Msg("fleet: skipped a value of other hardware")
		return
	}
	if node == n.opts.NodeID {
		switch {
		case n.val.nonce == n.nonce: // this process's own
		case !n.synced:
			for _, r := range n.val.recs {
				n.baseline[r.key] = r.st
				n.own[shardOf(r.key.Bucket)][r.key] = struct{}{}
				n.change(n.id(r.key))
			}
		default:
			n.count(&n.st.Conflicts)
			n.log.Warn().Str("node", node).Msg("fleet: another process publishes under this node's ID")
		}
		return
	}
	idx, ok := n.nodes[node]
	if !ok {
		idx = int32(len(n.nodes))
		n.nodes[node] = idx
	}
	// Before a node's first value of a shard it holds nothing of that
	// shard's keys (checkShard): no need to search for its contribution.
	_, known := n.seen[nodeShard{idx, shard}]
	for _, r := range n.val.recs {
		id := n.id(r.key)
		cs := n.contrib[id]
		i := len(cs)
		if known { // a new node has no contribution yet: no search
			i = 0
			for i < len(cs) && cs[i].node != idx {
				i++
			}
		}
		if i == len(cs) {
			if len(cs) == 0 {
				n.held++
			}
			n.contrib[id] = append(cs, contribution{node: idx, st: r.st})
		} else {
			cs[i].st = r.st
		}
		n.change(id)
	}
	n.seen[nodeShard{idx, shard}] = e.Created()
	n.count(&n.st.Received)
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
func (n *Node) id(k adaptive.Key) int32 {
	id, ok := n.ids[k]
	if !ok {
		id = int32(len(n.keys))
		n.ids[k] = id
		n.keys = append(n.keys, k)
		n.contrib = append(n.contrib, nil)
		n.marked = append(n.marked, false)
	}
	return id
}

// change marks key id's total to be folded again.
func (n *Node) change(id int32) {
	if !n.marked[id] {
		n.marked[id] = true
		n.changed = append(n.changed, id)
	}
}

// count adds one to a counter of st.
func (n *Node) count(c *uint64) {
	n.mu.Lock()
	*c++
	n.mu.Unlock()
}

// drop removes another node's value ns (deleted, or aged out).
func (n *Node) drop(ns nodeShard, node string) {
	if _, ok := n.nodes[node]; !ok {
		return
	}
	delete(n.seen, ns)
	for id, cs := range n.contrib {
		if len(cs) == 0 || fmt.Sprintf("s%02d", shardOf(n.keys[id].Bucket)) != ns.shard {
			continue
		}
		for i := range cs {
			if cs[i].node == ns.node {
				n.contrib[id] = append(cs[:i], cs[i+1:]...)
				n.change(int32(id))
				if len(cs) == 1 {
					n.held--
				}
				break
			}
		}
	}
}

// expire drops the other nodes' values older than MaxAge: a departed
// node's evidence ages out here as its values do in the bucket (where
// nats-server 2.9 deletes them without telling the watchers).
func (n *Node) expire() {
	now := n.opts.Now()
	for ns, at := range n.seen {
		if now.Sub(at) > n.maxAge {
			for name, idx := range n.nodes {
				if idx == ns.node {
					n.drop(ns, name)
					break
				}
			}
			n.count(&n.st.Expired)
		}
	}
}

// foldChanged hands the Scheduler the new totals of the keys that
// changed: this node's baseline plus every other node's evidence.
func (n *Node) foldChanged() {
	for _, id := range n.changed {
		k := n.keys[id]
		total := n.baseline[k]
		for _, c := range n.contrib[id] {
			total = total.Add(c.st)
		}
		n.fold.SetForeign(k, total)
		n.marked[id] = false
	}
	n.changed = n.changed[:0]
}
