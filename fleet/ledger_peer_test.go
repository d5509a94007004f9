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
