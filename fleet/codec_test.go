package fleet

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/learned"
)

// TestCodecRoundTrip checks that a value decodes to what was encoded,
// float bits included.
func TestCodecRoundTrip(t *testing.T) {
	in := value{fingerprint: testFP.Hash, node: "n-1", nonce: 0xdeadbeef, recs: []record{
		{learned.Key{Backend: "cpu", Bucket: "MatMul/f32/s42"}, bandit.Stats{N: 3.25, Sum: 1.0 / 3, SumSq: math.Copysign(0, -1)}},
		{learned.Key{Backend: "sim:mi300x", Bucket: "Opaque:x/f32/s2"}, bandit.Stats{N: 0, Sum: 5e-324, SumSq: math.MaxFloat64}},
	}}
	b := appendValue(nil, &in)
	var d decoder
	var out value
	if err := d.decode(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.fingerprint != in.fingerprint || out.node != in.node || out.nonce != in.nonce || len(out.recs) != len(in.recs) {
		t.Fatalf("decoded %+v, want %+v", out, in)
	}
	for i := range in.recs {
		a, b := in.recs[i], out.recs[i]
		if a.key != b.key || math.Float64bits(a.st.N) != math.Float64bits(b.st.N) ||
			math.Float64bits(a.st.Sum) != math.Float64bits(b.st.Sum) || math.Float64bits(a.st.SumSq) != math.Float64bits(b.st.SumSq) {
			t.Errorf("record %d: %+v, want %+v", i, b, a)
		}
	}
	for _, bad := range [][]byte{nil, []byte("ASFL"), b[:len(b)-1], append(b[:len(b):len(b)], 0)} {
		if err := d.decode(bad, &out); !errors.Is(err, ErrMalformed) {
			t.Errorf("decode(%q): %v, want ErrMalformed", bad, err)
		}
	}
}

// FuzzDecode checks that decode never panics, accepts only valid
// statistics, and that what it accepts encodes back to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add(appendValue(nil, &value{fingerprint: "fp", node: "n", recs: []record{{learned.Key{Backend: "cpu", Bucket: "b"}, bandit.Stats{N: 1, Sum: 2, SumSq: 4}}}}))
	f.Add([]byte("ASFL\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var d decoder
		var v value
		if err := d.decode(b, &v); err != nil {
			return
		}
		for _, r := range v.recs {
			if !validStats(r.st) {
				t.Fatalf("accepted %+v", r.st)
			}
		}
		if got := appendValue(nil, &v); !bytes.Equal(got, b) {
			t.Fatalf("re-encoded %q, want %q", got, b)
		}
	})
}
