package fleet

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/learned"
)

// The merge ledger's rules (DESIGN.md § Persistence), without a server:
// values are fed as a watcher would give them.

const ledgerFP = "fp0"

func ledgerKey(node string, k learned.Key) string {
	return fmt.Sprintf("%s.%s.s%02d", ledgerFP, node, shardOf(k.Bucket))
}

func ledgerValue(fp, node string, nonce uint64, recs ...record) []byte {
	return appendValue(nil, &value{fingerprint: fp, node: node, nonce: nonce, recs: recs})
}

// totalsOf returns the ledger's changed totals by key.
func totalsOf(l *ledger) map[learned.Key]bandit.Stats {
	out := map[learned.Key]bandit.Stats{}
	for _, t := range l.totals(nil) {
		out[t.Key] = t.Stats
	}
	return out
}

// TestLedgerSumsReplacesDrops: each other node's value is a total, so a
// second put of a node replaces its contribution; the key's total is the
// sum over nodes; a deleted or aged-out value leaves the sum.
func TestLedgerSumsReplacesDrops(t *testing.T) {
	k := learned.Key{Backend: "cpu", Bucket: "MatMul/f32/s3"}
	a := bandit.Stats{N: 2, Sum: 4, SumSq: 9}
	b := bandit.Stats{N: 3, Sum: 6, SumSq: 13}
	l := newLedger(ledgerFP, "me", 1, DefaultMaxPeerKeys)
	t0 := time.Unix(1000, 0)
	for _, p := range []struct {
		node string
		st   bandit.Stats
	}{{"n1", a}, {"n2", b}, {"n1", a}} {
		if err := l.put(ledgerKey(p.node, k), ledgerValue(ledgerFP, p.node, 9, record{k, p.st}), t0); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := totalsOf(l)[k], a.Add(b); got != want {
		t.Fatalf("total %+v, want %+v (a repeated value counts once)", got, want)
	}
	if len(l.totals(nil)) != 0 {
		t.Fatal("totals reported again without a change")
	}
	if l.held != 1 || l.nodesLive() != 2 || l.counts.Received != 3 {
		t.Fatalf("held %d, nodes %d, received %d; want 1, 2, 3", l.held, l.nodesLive(), l.counts.Received)
	}
	if err := l.remove(ledgerKey("n2", k)); err != nil {
		t.Fatal(err)
	}
	if got := totalsOf(l)[k]; got != a {
		t.Fatalf("after n2's value left: %+v, want %+v", got, a)
	}
	if err := l.put(ledgerKey("n2", k), ledgerValue(ledgerFP, "n2", 9, record{k, b}), t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	l.totals(nil)
	l.expire(t0.Add(90*time.Minute), time.Hour) // n1's value is 90 minutes old, n2's 30
	if got := totalsOf(l)[k]; got != b || l.counts.Expired != 1 {
		t.Fatalf("after n1 aged out: %+v (expired %d), want %+v (1)", got, l.counts.Expired, b)
	}
}

// TestLedgerOwnIDNeverAdopted: a value under this node's ID that this
// process did not put is never evidence: one there before the sync (a
// previous run's, or a forger's while the node was away) is ignored, one
// after is a conflict; its own process's is ignored; and what the node
// publishes is its own evidence only.
func TestLedgerOwnIDNeverAdopted(t *testing.T) {
	k := learned.Key{Backend: "cpu", Bucket: "Add/f32/s1"}
	forged := bandit.Stats{N: 1e4, Sum: 1e4 * 6, SumSq: 1e4 * 36}
	l := newLedger(ledgerFP, "me", 7, DefaultMaxPeerKeys)
	if err := l.put(ledgerKey("me", k), ledgerValue(ledgerFP, "me", 6, record{k, forged}), time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := l.put(ledgerKey("me", k), ledgerValue(ledgerFP, "me", 7, record{k, bandit.Stats{N: 99}}), time.Time{}); err != nil {
		t.Fatal(err)
	}
	if !l.sync() || l.sync() {
		t.Fatal("sync: want true once, then false")
	}
	if got := totalsOf(l); len(got) != 0 {
		t.Fatalf("totals %+v: a value under this node's ID was adopted", got)
	}
	err := l.put(ledgerKey("me", k), ledgerValue(ledgerFP, "me", 8, record{k, bandit.Stats{N: 1}}), time.Time{})
	if !errors.Is(err, errConflict) || l.counts.Conflicts != 1 || len(l.totals(nil)) != 0 {
		t.Fatalf("another process's value: %v, conflicts %d", err, l.counts.Conflicts)
	}
	own := bandit.Stats{N: 1, Sum: 2, SumSq: 4}
	l.learned(k, own)
	s := shardOf(k.Bucket)
	now := time.Unix(50, 0)
	if !l.due(s, now, time.Hour) {
		t.Fatal("a shard with new evidence is not due")
	}
	v := taken(t, l, s)
	if len(v.recs) != 1 || v.recs[0].st != own || v.nonce != 7 || v.node != "me" {
		t.Fatalf("published %+v, want one record of its own evidence %+v", v, own)
	}
	l.published(s, now)
	if l.due(s, now.Add(14*time.Minute), time.Hour) || !l.due(s, now.Add(15*time.Minute), time.Hour) {
		t.Fatal("an unchanged shard is due again at a quarter of the age limit, not before")
	}
}

// TestLedgerLearnedDuringPut: evidence learned while a shard's value is
// being put (the node's lock is not held over the network) leaves the
// shard due, so that the next put carries it; and a shard whose put
// failed is due again. Cleared when the put returned, the newer evidence
// was never published: TestMergeEqualsPooled's peers kept an older total
// (1 run in about 80 with -race and two at once).
func TestLedgerLearnedDuringPut(t *testing.T) {
	k := learned.Key{Backend: "cpu", Bucket: "Add/f32/s1"}
	l := newLedger(ledgerFP, "me", 7, DefaultMaxPeerKeys)
	l.sync()
	s := shardOf(k.Bucket)
	now := time.Unix(50, 0)
	l.learned(k, bandit.Stats{N: 1, Sum: 2, SumSq: 4})
	l.take(s)
	l.published(s, now)
	if l.due(s, now, time.Hour) {
		t.Fatal("a shard just put, with nothing new, is due")
	}
	l.learned(k, bandit.Stats{N: 2, Sum: 4, SumSq: 8})
	l.take(s)
	l.learned(k, bandit.Stats{N: 3, Sum: 6, SumSq: 12}) // while the put is in flight
	l.published(s, now)
	if !l.due(s, now, time.Hour) {
		t.Fatal("evidence learned during the put is not due: it would never be published")
	}
	v := taken(t, l, s)
	if len(v.recs) != 1 || v.recs[0].st.N != 3 {
		t.Fatalf("next value %+v, want the newer evidence (N 3)", v.recs)
	}
	l.unsent(s) // its put failed
	if !l.due(s, now, time.Hour) {
		t.Fatal("a shard whose put failed is not due")
	}
}

// TestLedgerVet: a peer whose evidence the node's own contradicts (3×
// off and more, on at least three keys) is set aside: its contributions
// leave the totals and its later values are skipped; a peer that agrees
// stays.
func TestLedgerVet(t *testing.T) {
	l := newLedger(ledgerFP, "me", 7, DefaultMaxPeerKeys)
	l.sync()
	for i := range 4 {
		k := learned.Key{Backend: "gpu", Bucket: fmt.Sprintf("MatMul/f32/s%d", i)}
		if err := l.put(ledgerKey("liar", k), ledgerValue(ledgerFP, "liar", 1, record{k, claimStats(1e4, 403)}), time.Time{}); err != nil {
			t.Fatal(err)
		}
		if err := l.put(ledgerKey("honest", k), ledgerValue(ledgerFP, "honest", 2, record{k, claimStats(50, 21)}), time.Time{}); err != nil {
			t.Fatal(err)
		}
		if i < 3 {
			l.learned(k, claimStats(2, 20))
		}
	}
	names, ratios := l.vet()
	if len(names) != 1 || names[0] != "liar" || ratios[0] < 9.9 {
		t.Fatalf("set aside %v (%v), want liar alone, ×10 (×20, clamped)", names, ratios)
	}
	for k, st := range totalsOf(l) {
		if st != claimStats(50, 21) {
			t.Errorf("%v: total %+v, want the honest peer's alone", k, st)
		}
	}
	k := learned.Key{Backend: "gpu", Bucket: "MatMul/f32/s0"}
	if err := l.put(ledgerKey("liar", k), ledgerValue(ledgerFP, "liar", 1, record{k, claimStats(1e4, 500)}), time.Time{}); err == nil || l.counts.SetAside != 1 {
		t.Errorf("a later value of the liar: %v, set-aside count %d", err, l.counts.SetAside)
	}
}

// TestLedgerLimits: values over the limits are refused before they are
// decoded.
func TestLedgerLimits(t *testing.T) {
	l := newLedger(ledgerFP, "me", 7, DefaultMaxPeerKeys)
	k := learned.Key{Backend: "gpu", Bucket: "MatMul/f32/s0"}
	if err := l.put(ledgerKey("big", k), make([]byte, maxValueBytes+1), time.Time{}); !errors.Is(err, ErrLimit) {
		t.Errorf("a value of %d bytes: %v", maxValueBytes+1, err)
	}
	for i := range maxPeers {
		node := fmt.Sprintf("n%d", i)
		if err := l.put(ledgerKey(node, k), ledgerValue(ledgerFP, node, 1, record{k, claimStats(1, 20)}), time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.put(ledgerKey("one-more", k), ledgerValue(ledgerFP, "one-more", 1, record{k, claimStats(1, 20)}), time.Time{}); !errors.Is(err, ErrLimit) {
		t.Errorf("node %d: %v", maxPeers+1, err)
	}
	if l.counts.Limited != 2 {
		t.Errorf("limited %d, want 2", l.counts.Limited)
	}
	// A peer's records past the ledger's maxKeys (Options.MaxPeerKeys).
	small := newLedger(ledgerFP, "me", 7, 1)
	cpu := learned.Key{Backend: "cpu", Bucket: k.Bucket}
	if err := small.put(ledgerKey("wide", k), ledgerValue(ledgerFP, "wide", 1, record{cpu, claimStats(1, 20)}, record{k, claimStats(1, 20)}), time.Time{}); !errors.Is(err, ErrLimit) {
		t.Errorf("2 keys of a peer, at most 1: %v", err)
	}
	if err := small.put(ledgerKey("narrow", k), ledgerValue(ledgerFP, "narrow", 1, record{k, claimStats(1, 20)}), time.Time{}); err != nil {
		t.Errorf("1 key of a peer, at most 1: %v", err)
	}
}

// claimStats returns n observations of mean µs (σ 0.1 of ln).
func claimStats(n, meanUs float64) bandit.Stats {
	m := math.Log(meanUs)
	return bandit.Stats{N: n, Sum: n * m, SumSq: n * (m*m + 0.01)}
}

// TestLedgerSkips: a value that is not a node's of this fingerprint, or
// does not check, is skipped, counted, and names why; it folds nothing.
func TestLedgerSkips(t *testing.T) {
	k := learned.Key{Backend: "cpu", Bucket: "MatMul/f32/s3"}
	good := record{k, bandit.Stats{N: 1, Sum: 1, SumSq: 1}}
	wrong := fmt.Sprintf("%s.n1.s%02d", ledgerFP, (shardOf(k.Bucket)+1)%Shards)
	cases := []struct {
		name, key string
		v         []byte
		want      error
	}{
		{"not a node's key", ledgerFP + ".n1", ledgerValue(ledgerFP, "n1", 1, good), ErrMalformed},
		{"undecodable", ledgerKey("n1", k), []byte("junk"), ErrMalformed},
		{"another node's name inside", ledgerKey("n1", k), ledgerValue(ledgerFP, "n2", 1, good), ErrMalformed},
		{"record of another shard", wrong, ledgerValue(ledgerFP, "n1", 1, good), ErrMalformed},
		{"other hardware", ledgerKey("n1", k), ledgerValue("fp1", "n1", 1, good), nil},
	}
	l := newLedger(ledgerFP, "me", 1, DefaultMaxPeerKeys)
	for _, c := range cases {
		err := l.put(c.key, c.v, time.Time{})
		if err == nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want an error (%v)", c.name, err, c.want)
		}
	}
	if l.counts.Malformed != 4 || l.counts.Foreign != 1 || l.counts.Received != 0 || len(l.totals(nil)) != 0 {
		t.Fatalf("counts %+v, totals %d; want 4 malformed, 1 foreign, nothing folded", l.counts, len(l.totals(nil)))
	}
}

// taken returns the value l.take encodes for shard s, decoded.
func taken(t *testing.T, l *ledger, s int) value {
	t.Helper()
	var v value
	var d decoder
	if err := d.decode(l.take(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}
