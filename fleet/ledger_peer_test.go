package fleet

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/learned"
)

// TestLedgerDuplicateRecord: a value naming a key twice is malformed: it
// would count the peer's evidence twice, and its second copy would outlive
// the value's deletion.
func TestLedgerDuplicateRecord(t *testing.T) {
	k := learned.Key{Backend: "cpu", Bucket: "MatMul/f32/s3"}
	a := claimStats(4, 20)
	l := newLedger(ledgerFP, "me", 1, DefaultMaxPeerKeys)
	err := l.put(ledgerKey("n1", k), ledgerValue(ledgerFP, "n1", 9, record{k, a}, record{k, a}), time.Time{})
	if !errors.Is(err, ErrMalformed) {
		t.Errorf("a key twice: %v, want ErrMalformed", err)
	}
	_ = l.remove(ledgerKey("n1", k))
	if st := totalsOf(l)[k]; st != (bandit.Stats{}) || l.held != 0 {
		t.Fatalf("after the value left: total %+v, held %d; want nothing", st, l.held)
	}
}

// TestLedgerTotalsFinite: values each finite cannot sum, over many peers,
// to a total that is not (Inf, NaN): it would poison the posterior.
func TestLedgerTotalsFinite(t *testing.T) {
	k := learned.Key{Backend: "cpu", Bucket: "MatMul/f32/s3"}
	for _, x := range []float64{1e308, maxStat} {
		huge := bandit.Stats{N: x, Sum: x, SumSq: -x}
		l := newLedger(ledgerFP, "me", 1, DefaultMaxPeerKeys)
		for i := range maxPeers {
			node := fmt.Sprintf("n%d", i)
			_ = l.put(ledgerKey(node, k), ledgerValue(ledgerFP, node, 9, record{k, huge}), time.Time{})
		}
		for _, f := range l.totals(nil) {
			for _, v := range []float64{f.Stats.N, f.Stats.Sum, f.Stats.SumSq} {
				if math.IsInf(v, 0) || math.IsNaN(v) {
					t.Fatalf("values of %g: total %+v of %s", x, f.Stats, f.Key)
				}
			}
		}
	}
}

// TestLedgerNegativeShard: "s-1" (Sscanf reads the sign) is not a shard:
// an empty value under it was held as a live node's.
func TestLedgerNegativeShard(t *testing.T) {
	if err := checkShard("s-1", nil); !errors.Is(err, ErrMalformed) {
		t.Fatalf("shard s-1: %v", err)
	}
}

// sameShardKeys returns n keys of one shard.
func sameShardKeys(n int) []learned.Key {
	var ks []learned.Key
	want := -1
	for i := 0; len(ks) < n; i++ {
		k := learned.Key{Backend: "cpu", Bucket: fmt.Sprintf("MatMul/f32/s%d", i)}
		if s := shardOf(k.Bucket); want < 0 || s == want {
			want = s
			ks = append(ks, k)
		}
	}
	return ks
}

// TestLedgerLaterValueDropsKeys: a node's value of a shard is its whole
// evidence there, so a later value without a key withdraws the node's
// contribution to it, and its records count against MaxPeerKeys no more.
func TestLedgerLaterValueDropsKeys(t *testing.T) {
	ks := sameShardKeys(3)
	a := claimStats(4, 20)
	l := newLedger(ledgerFP, "me", 1, 2)
	if err := l.put(ledgerKey("n1", ks[0]), ledgerValue(ledgerFP, "n1", 9, record{ks[0], a}, record{ks[1], a}), time.Time{}); err != nil {
		t.Fatal(err)
	}
	totalsOf(l)
	if err := l.put(ledgerKey("n1", ks[0]), ledgerValue(ledgerFP, "n1", 9, record{ks[0], a}), time.Time{}); err != nil {
		t.Fatal(err)
	}
	got := totalsOf(l)
	if st, ok := got[ks[1]]; !ok || st != (bandit.Stats{}) || l.held != 1 {
		t.Fatalf("after a value without %s: its total %+v (reported %v), held %d; want nothing, reported, held 1", ks[1].Bucket, st, ok, l.held)
	}
	// The node holds 1 record now: a value of 2 others is within its 2.
	if err := l.put(ledgerKey("n1", ks[0]), ledgerValue(ledgerFP, "n1", 9, record{ks[1], a}, record{ks[2], a}), time.Time{}); err != nil {
		t.Fatal(err)
	}
	got = totalsOf(l)
	if got[ks[0]] != (bandit.Stats{}) || got[ks[1]] != a || got[ks[2]] != a || l.held != 2 {
		t.Fatalf("after a value of the 2 others: totals %+v, held %d", got, l.held)
	}
	if err := l.remove(ledgerKey("n1", ks[0])); err != nil {
		t.Fatal(err)
	}
	if got = totalsOf(l); len(got) != 2 || got[ks[1]] != (bandit.Stats{}) || got[ks[2]] != (bandit.Stats{}) || l.held != 0 {
		t.Fatalf("after the value left: totals %+v, held %d; want both emptied, held 0", got, l.held)
	}
}

// TestLedgerPeerSlotFreed: a node whose values have all left gives up its
// place among the maxPeers, so departed nodes do not shut out new ones; a
// peer set aside stays set aside after its values left.
func TestLedgerPeerSlotFreed(t *testing.T) {
	k := learned.Key{Backend: "cpu", Bucket: "MatMul/f32/s3"}
	l := newLedger(ledgerFP, "me", 1, DefaultMaxPeerKeys)
	t0 := time.Unix(1000, 0)
	for i := range maxPeers {
		node := fmt.Sprintf("n%d", i)
		if err := l.put(ledgerKey(node, k), ledgerValue(ledgerFP, node, 9, record{k, claimStats(1, 20)}), t0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.remove(ledgerKey("n0", k)); err != nil {
		t.Fatal(err)
	}
	l.setAside("n1", l.nodes["n1"])
	if err := l.put(ledgerKey("new1", k), ledgerValue(ledgerFP, "new1", 9, record{k, claimStats(2, 20)}), t0.Add(time.Hour)); err != nil {
		t.Fatalf("a new node after one left: %v", err)
	}
	if err := l.put(ledgerKey("new2", k), ledgerValue(ledgerFP, "new2", 9, record{k, claimStats(2, 20)}), t0.Add(time.Hour)); err != nil {
		t.Fatalf("a new node after one was set aside: %v", err)
	}
	if err := l.put(ledgerKey("n1", k), ledgerValue(ledgerFP, "n1", 9, record{k, claimStats(1, 20)}), t0.Add(time.Hour)); err == nil {
		t.Fatal("the peer set aside came back")
	}
	l.totals(nil)
	l.expire(t0.Add(90*time.Minute), time.Hour) // the 62 others age out
	if err := l.put(ledgerKey("new3", k), ledgerValue(ledgerFP, "new3", 9, record{k, claimStats(3, 20)}), t0.Add(time.Hour)); err != nil {
		t.Fatalf("a new node after the others aged out: %v", err)
	}
	want := claimStats(2, 20).Add(claimStats(2, 20)).Add(claimStats(3, 20))
	if got := totalsOf(l)[k]; got != want || l.nodesLive() != 3 {
		t.Fatalf("total %+v over %d nodes; want %+v over 3", got, l.nodesLive(), want)
	}
}

// TestLedgerAsideBounded: the names of peers set aside are bounded; past
// maxAside no new node is admitted, while known ones still are.
func TestLedgerAsideBounded(t *testing.T) {
	k := learned.Key{Backend: "cpu", Bucket: "MatMul/f32/s3"}
	l := newLedger(ledgerFP, "me", 1, DefaultMaxPeerKeys)
	if err := l.put(ledgerKey("old", k), ledgerValue(ledgerFP, "old", 9, record{k, claimStats(1, 20)}), time.Time{}); err != nil {
		t.Fatal(err)
	}
	for i := range maxAside {
		node := fmt.Sprintf("liar%d", i)
		if err := l.put(ledgerKey(node, k), ledgerValue(ledgerFP, node, 9, record{k, claimStats(1, 20)}), time.Time{}); err != nil {
			t.Fatalf("liar %d: %v", i, err)
		}
		l.setAside(node, l.nodes[node])
	}
	if err := l.put(ledgerKey("new", k), ledgerValue(ledgerFP, "new", 9, record{k, claimStats(1, 20)}), time.Time{}); !errors.Is(err, ErrLimit) {
		t.Errorf("a new node past %d set aside: %v, want ErrLimit", maxAside, err)
	}
	if err := l.put(ledgerKey("old", k), ledgerValue(ledgerFP, "old", 9, record{k, claimStats(2, 20)}), time.Time{}); err != nil {
		t.Errorf("a known node past %d set aside: %v", maxAside, err)
	}
}

// TestLedgerWeightless: a peer's record of no weight (N 0) or of a mean
// no duration has (Σy/N beyond bandit.MaxMeanLn) would move a key's total, and so
// the prior's mean, by any amount without the weight that the Fold caps,
// and unvetted: the first is left out, the second makes the value
// malformed.
func TestLedgerWeightless(t *testing.T) {
	k := learned.Key{Backend: "gpu", Bucket: "MatMul/f32/s3"}
	honest := claimStats(50, 21)
	for _, lie := range []bandit.Stats{
		{N: 0, Sum: 2000, SumSq: 8e4},
		{N: 1e-300, Sum: 20, SumSq: 400},
		{N: 1, Sum: 1e300, SumSq: 1e300},
	} {
		l := newLedger(ledgerFP, "me", 1, DefaultMaxPeerKeys)
		if err := l.put(ledgerKey("honest", k), ledgerValue(ledgerFP, "honest", 2, record{k, honest}), time.Time{}); err != nil {
			t.Fatal(err)
		}
		err := l.put(ledgerKey("liar", k), ledgerValue(ledgerFP, "liar", 3, record{k, lie}), time.Time{})
		if lie.N > 0 && !errors.Is(err, ErrMalformed) {
			t.Errorf("%+v: %v, want ErrMalformed", lie, err)
		}
		if got := totalsOf(l)[k]; got != honest {
			t.Errorf("%+v: total %+v, want the honest peer's %+v", lie, got, honest)
		}
	}
}

// TestLedgerKeysBounded: a peer that names new keys in every value, each
// replacing its last, holds few keys at a time, and what the ledger keeps
// of keys it no longer holds (their numbers, the decoder's interned
// names, of values taken and refused) stays bounded: it grew with every
// key ever named.
func TestLedgerKeysBounded(t *testing.T) {
	l := newLedger(ledgerFP, "me", 1, DefaultMaxPeerKeys)
	const rounds = 5000
	for i := range rounds {
		k := learned.Key{Backend: "cpu", Bucket: fmt.Sprintf("MatMul/f32/s%d", i)}
		if err := l.put(ledgerKey("churn", k), ledgerValue(ledgerFP, "churn", 9, record{k, claimStats(1, 20)}), time.Time{}); err != nil {
			t.Fatal(err)
		}
		other := learned.Key{Backend: "cpu", Bucket: fmt.Sprintf("Other/f32/s%d", i)}
		_ = l.put(ledgerKey("churn", other), ledgerValue("fp1", "churn", 9, record{other, claimStats(1, 20)}), time.Time{})
		l.totals(nil)
	}
	if len(l.keys) > 2*Shards || len(l.ids) > Shards || len(l.contrib) > 2*Shards {
		t.Errorf("%d key numbers (%d live, %d contribution lists) after %d keys named, at most %d held", len(l.keys), len(l.ids), len(l.contrib), rounds, Shards)
	}
	if n := len(l.dec.names); n > 2*Shards+maxSpareNames+2 {
		t.Errorf("%d names interned after %d keys named, at most %d held", n, 2*rounds, Shards)
	}
}

// TestLedgerWideRecord: a peer's record claiming a spread over ln 10
// (adaptive.Fold.Foreign's bound on a key's total) is left out on its
// own, so the key's folded prior is the honest peers' evidence alone:
// summed in, it widened the key's total past the bound, and the Fold
// dropped every peer's evidence for the key.
func TestLedgerWideRecord(t *testing.T) {
	m := math.Log(1.5)
	if got, want := foldedBeside(t, bandit.Stats{N: 1, Sum: m, SumSq: m*m + 1e6}); got != want { // σ 1,000 of ln
		t.Errorf("folded %+v, want the honest peers' %+v", got, want)
	}
}

// foldedBeside returns what a Scheduler's Fold holds of key 0 once two
// honest peers' records and a third peer's bad one have passed a ledger,
// and the honest peers' evidence.
func foldedBeside(t *testing.T, bad bandit.Stats) (got, honest bandit.Stats) {
	t.Helper()
	s := newScheduler(t, 1)
	f := s.Fold()
	if _, err := s.Select(spec(0), adaptive.Residency{}); err != nil {
		t.Fatal(err)
	}
	k := keyOf(0)
	a, b := claimStats(40, 1.5), claimStats(60, 1.6)
	l := newLedger(ledgerFP, "me", 1, DefaultMaxPeerKeys)
	for _, p := range []struct {
		node string
		st   bandit.Stats
	}{{"honest1", a}, {"honest2", b}, {"bad", bad}} {
		if err := l.put(ledgerKey(p.node, k), ledgerValue(ledgerFP, p.node, 9, record{k, p.st}), time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	f.Foreign(l.totals(nil))
	_, got, _ = f.Evidence(k)
	return got, a.Add(b)
}

// nameBytes returns the bytes of the names of node's records held.
func nameBytes(l *ledger, node string) int {
	idx, ok := l.nodes[node]
	if !ok {
		return 0
	}
	n := 0
	for ns, ids := range l.shardIDs {
		if ns.node == idx {
			for _, id := range ids {
				n += len(l.keys[id].Backend) + len(l.keys[id].Bucket)
			}
		}
	}
	return n
}

// TestLedgerNamesBounded: a peer within the limits on bytes a value and
// on records that names keys no one else names, each of 1,000 bytes,
// holds at most keyNameBytes of names a record it may hold: a value past
// that is refused, with an error naming the peer. Without it, a record's
// names could cost 2 KB beside the record's own 70–90 bytes.
func TestLedgerNamesBounded(t *testing.T) {
	const maxKeys = 64
	l := newLedger(ledgerFP, "me", 1, maxKeys)
	long := strings.Repeat("x", 990)
	refused := 0
	for i := range maxKeys {
		k := learned.Key{Backend: "cpu", Bucket: fmt.Sprintf("Opaque:%s%03d/f32/s20", long, i)}
		err := l.put(ledgerKey("long", k), ledgerValue(ledgerFP, "long", 9, record{k, claimStats(1, 20)}), time.Time{})
		switch {
		case errors.Is(err, ErrLimit) && strings.Contains(err.Error(), "long "):
			refused++
		case err != nil:
			t.Fatalf("key %d: %v", i, err)
		}
	}
	if got, most := nameBytes(l, "long"), maxKeys*keyNameBytes; got > most || refused == 0 {
		t.Errorf("a peer holds %d bytes of names (%d values refused), at most %d", got, refused, most)
	}
	if l.counts.Limited != uint64(refused) {
		t.Errorf("limited %d, want %d", l.counts.Limited, refused)
	}
}

// TestLedgerNegativeSpread: a peer's record whose spread Σy²/N − (Σy/N)²
// is negative, which no durations have, is left out on its own, so the
// key's folded prior is the honest peers' evidence alone: summed in, it
// made the key's total narrower than theirs, overconfident. A record
// negative only by rounding is kept.
func TestLedgerNegativeSpread(t *testing.T) {
	m := math.Log(1.5)
	if got, want := foldedBeside(t, bandit.Stats{N: 50, Sum: 50 * m, SumSq: 50 * (m*m - 0.1)}); got != want { // σ² −0.1
		t.Errorf("folded %+v, want the honest peers' %+v", got, want)
	}
	rounded := bandit.Stats{N: 10, Sum: 10 * m, SumSq: 10 * m * m * (1 - 1e-12)}
	if !rounded.SpreadWithin() {
		t.Errorf("%+v, negative by rounding only, left out", rounded)
	}
}
