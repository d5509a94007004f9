package fleet

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/learned"
)

// ledgerModel is what the ledger's totals must be: per node and shard the
// records of its latest value; a node set aside holds none.
type ledgerModel struct {
	vals  map[[2]string]map[learned.Key]bandit.Stats
	at    map[[2]string]time.Time
	aside map[string]bool
}

func (m *ledgerModel) total(k learned.Key) bandit.Stats {
	var t bandit.Stats
	for _, recs := range m.vals {
		t = t.Add(recs[k])
	}
	return t
}

// runLedgerModel applies ops drawn from r to a ledger and the model, and
// checks after each that every key's total, the keys held (and numbered)
// and each node's counts of records and of their names' bytes agree.
func runLedgerModel(t *testing.T, r *rand.Rand, ops int) {
	t.Helper()
	const nodes, keys = 6, 12
	var ks []learned.Key
	for i := range keys {
		ks = append(ks, learned.Key{Backend: []string{"cpu", "gpu"}[i%2], Bucket: fmt.Sprintf("MatMul/f32/s%d", i/2)})
	}
	l := newLedger(ledgerFP, "me", 1, 8)
	m := &ledgerModel{vals: map[[2]string]map[learned.Key]bandit.Stats{}, at: map[[2]string]time.Time{}, aside: map[string]bool{}}
	now := time.Unix(1000, 0)
	totals := map[learned.Key]bandit.Stats{}
	for op := range ops {
		node := fmt.Sprintf("n%d", r.IntN(nodes))
		switch x := r.IntN(10); {
		case x < 6: // a value of one shard: a random subset of its keys
			s := shardOf(ks[r.IntN(keys)].Bucket)
			recs := []record{}
			want := map[learned.Key]bandit.Stats{}
			for _, k := range ks {
				if shardOf(k.Bucket) == s && r.IntN(2) == 0 {
					st := claimStats(float64(1+r.IntN(5)), float64(10+r.IntN(90)))
					recs = append(recs, record{k, st})
					want[k] = st
				}
			}
			key := fmt.Sprintf("%s.%s.s%02d", ledgerFP, node, s)
			prior := 0
			for ns, v := range m.vals {
				if ns[0] == node && ns[1] != key {
					prior += len(v)
				}
			}
			err := l.put(key, ledgerValue(ledgerFP, node, 9, recs...), now)
			switch {
			case m.aside[node]:
				if err == nil {
					t.Fatalf("op %d: a value of %s, set aside, was taken", op, node)
				}
			case prior+len(recs) > l.maxKeys:
				if err == nil {
					t.Fatalf("op %d: %s holds %d keys, over %d, and the value was taken", op, node, prior+len(recs), l.maxKeys)
				}
			case err != nil:
				t.Fatalf("op %d: %v", op, err)
			default:
				m.vals[[2]string{node, key}] = want
				m.at[[2]string{node, key}] = now
			}
		case x < 7: // a value deleted
			s := shardOf(ks[r.IntN(keys)].Bucket)
			key := fmt.Sprintf("%s.%s.s%02d", ledgerFP, node, s)
			if err := l.remove(key); err != nil {
				t.Fatal(err)
			}
			delete(m.vals, [2]string{node, key})
			delete(m.at, [2]string{node, key})
		case x < 8: // time passes; values over an hour old age out
			now = now.Add(time.Duration(r.IntN(40)) * time.Minute)
			l.expire(now, time.Hour)
			for ns, at := range m.at {
				if now.Sub(at) > time.Hour {
					delete(m.vals, ns)
					delete(m.at, ns)
				}
			}
		case x < 9: // a node set aside
			if idx, ok := l.nodes[node]; ok && r.IntN(4) == 0 {
				l.setAside(node, idx)
				m.aside[node] = true
				for ns := range m.vals {
					if ns[0] == node {
						delete(m.vals, ns)
						delete(m.at, ns)
					}
				}
			}
		default:
			for _, f := range l.totals(nil) {
				totals[f.Key] = f.Stats
			}
		}
		for _, f := range l.totals(nil) {
			totals[f.Key] = f.Stats
		}
		held := 0
		for _, k := range ks {
			want, got := m.total(k), totals[k]
			if math.Abs(want.N-got.N) > 1e-9 || math.Abs(want.Sum-got.Sum) > 1e-9 || math.Abs(want.SumSq-got.SumSq) > 1e-6 {
				t.Fatalf("op %d: %s %s: total %+v, want %+v", op, k.Backend, k.Bucket, got, want)
			}
			if want.N > 0 {
				held++
			}
		}
		if l.held != held || len(l.ids) != held {
			t.Fatalf("op %d: held %d, %d keys numbered; want %d", op, l.held, len(l.ids), held)
		}
		per, names := map[string]int{}, map[string]int{}
		for ns, v := range m.vals {
			per[ns[0]] += len(v)
			for k := range v {
				names[ns[0]] += len(k.Backend) + len(k.Bucket)
			}
		}
		if l.nodesLive() != len(per) {
			t.Fatalf("op %d: %d nodes live, want %d", op, l.nodesLive(), len(per))
		}
		for name, n := range per {
			if got := l.peerKeys[l.nodes[name]]; got != n {
				t.Fatalf("op %d: %s counted %d records, holds %d", op, name, got, n)
			}
			if got := l.peerNames[l.nodes[name]]; got != names[name] {
				t.Fatalf("op %d: %s counted %d bytes of names, holds %d", op, name, got, names[name])
			}
		}
		if len(l.peerKeys) != len(per) || len(l.peerNames) != len(per) {
			t.Fatalf("op %d: counts of %d and %d nodes, %d live", op, len(l.peerKeys), len(l.peerNames), len(per))
		}
	}
}

// TestLedgerModel: over random puts, deletions, ageing and peers set
// aside, the ledger's totals are the sum of every live node's latest
// value, key by key, and its counts of keys and records agree.
func TestLedgerModel(t *testing.T) {
	for seed := range uint64(200) {
		runLedgerModel(t, rand.New(rand.NewPCG(seed, 1)), 300)
	}
}

// FuzzLedgerModel is TestLedgerModel over the fuzzer's seeds.
func FuzzLedgerModel(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Fuzz(func(t *testing.T, a, b uint64) {
		runLedgerModel(t, rand.New(rand.NewPCG(a, b)), 300)
	})
}
