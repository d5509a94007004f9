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

// sameShard returns a bucket name other than bucket in bucket's shard.
func sameShard(bucket string) string {
	for i := 0; ; i++ {
		b := fmt.Sprintf("Conv/f32/s%d", i)
		if shardOf(b) == shardOf(bucket) {
			return b
		}
	}
}

// TestLedgerSmallerValueReplaces: a peer's value is its whole evidence of
// the shard, so a later value without a key takes that key's contribution
// away, and the records it no longer holds no longer count against its
// limit.
func TestLedgerSmallerValueReplaces(t *testing.T) {
	k1 := learned.Key{Backend: "cpu", Bucket: "MatMul/f32/s3"}
	k2 := learned.Key{Backend: "cpu", Bucket: sameShard(k1.Bucket)}
	a := claimStats(4, 20)
	l := newLedger(ledgerFP, "me", 1, 2)
	if err := l.put(ledgerKey("n1", k1), ledgerValue(ledgerFP, "n1", 9, record{k1, a}, record{k2, a}), time.Time{}); err != nil {
		t.Fatal(err)
	}
	l.totals(nil)
	if err := l.put(ledgerKey("n1", k1), ledgerValue(ledgerFP, "n1", 9, record{k1, a}), time.Time{}); err != nil {
		t.Fatal(err)
	}
	got := totalsOf(l)
	if st, ok := got[k2]; !ok || st != (bandit.Stats{}) {
		t.Fatalf("k2 after a value without it: %+v (reported %v), want zero", st, ok)
	}
	if l.held != 1 || l.peerKeys[l.nodes["n1"]] != 1 {
		t.Fatalf("held %d, n1's keys %d; want 1, 1", l.held, l.peerKeys[l.nodes["n1"]])
	}
}

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
