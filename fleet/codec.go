package fleet

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/learned"
)

// The value a node puts under each of its keys: one shard of its own
// evidence, as a compact binary record set rather than JSON (the most a
// node holds of its peers, 64 × 8,192 keys, is half a million records for
// a new node to read: BenchmarkConverge; float64 bits also round-trip
// exactly):
//
//	"ASFL" 0x01                   magic, version
//	uvarint len, fingerprint hash
//	uvarint len, node ID
//	8 bytes                       the publishing process's nonce (little endian)
//	uvarint                       records
//	per record: uvarint len, backend; uvarint len, bucket;
//	            N, Σy, Σy² as float64 bits (little endian)
const (
	magic      = "ASFL\x01"
	maxName    = 1 << 10 // longest backend, bucket, node or fingerprint
	minRecord  = 2 + 3*8 // the smallest record's bytes
	recordSize = 3 * 8
)

// record is one key's evidence in a value.
type record struct {
	key learned.Key
	st  bandit.Stats
}

// value is a decoded value.
type value struct {
	fingerprint, node string
	nonce             uint64
	recs              []record
}

// appendValue encodes v after dst.
func appendValue(dst []byte, v *value) []byte {
	dst = append(dst, magic...)
	dst = appendString(dst, v.fingerprint)
	dst = appendString(dst, v.node)
	dst = binary.LittleEndian.AppendUint64(dst, v.nonce)
	dst = binary.AppendUvarint(dst, uint64(len(v.recs)))
	for _, r := range v.recs {
		dst = appendString(dst, r.key.Backend)
		dst = appendString(dst, r.key.Bucket)
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(r.st.N))
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(r.st.Sum))
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(r.st.SumSq))
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// decoder decodes values, interning the names it reads: the backends and
// buckets of a fleet repeat across every node's values.
type decoder struct {
	names map[string]string
}

// decode parses b into v (its records reusing v.recs). Every record's
// statistics must be finite with N ≥ 0; anything else, trailing bytes
// included, is ErrMalformed.
func (d *decoder) decode(b []byte, v *value) error {
	if len(b) < len(magic) || string(b[:len(magic)]) != magic {
		return fmt.Errorf("%w: no %q header", ErrMalformed, magic[:4])
	}
	b = b[len(magic):]
	var err error
	if v.fingerprint, b, err = d.str(b, false); err != nil {
		return err
	}
	if v.node, b, err = d.str(b, false); err != nil {
		return err
	}
	if len(b) < 8 {
		return fmt.Errorf("%w: truncated", ErrMalformed)
	}
	v.nonce = binary.LittleEndian.Uint64(b)
	b = b[8:]
	n, k := uvarint(b)
	if k <= 0 || n > uint64(len(b)/minRecord) {
		return fmt.Errorf("%w: record count", ErrMalformed)
	}
	b = b[k:]
	v.recs = v.recs[:0]
	for i := range n {
		var r record
		if r.key.Backend, b, err = d.str(b, true); err != nil {
			return err
		}
		if r.key.Bucket, b, err = d.str(b, true); err != nil {
			return err
		}
		if len(b) < recordSize {
			return fmt.Errorf("%w: record %d truncated", ErrMalformed, i)
		}
		r.st = bandit.Stats{
			N:     math.Float64frombits(binary.LittleEndian.Uint64(b)),
			Sum:   math.Float64frombits(binary.LittleEndian.Uint64(b[8:])),
			SumSq: math.Float64frombits(binary.LittleEndian.Uint64(b[16:])),
		}
		b = b[recordSize:]
		if !validStats(r.st) || r.key.Backend == "" || r.key.Bucket == "" {
			return fmt.Errorf("%w: record %d (%s %s): %+v", ErrMalformed, i, r.key.Backend, r.key.Bucket, r.st)
		}
		v.recs = append(v.recs, r)
	}
	if len(b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(b))
	}
	return nil
}

// str reads one length-prefixed string, interned when intern is set.
func (d *decoder) str(b []byte, intern bool) (string, []byte, error) {
	n, k := uvarint(b)
	if k > 0 && n > maxName {
		return "", nil, fmt.Errorf("%w: a name of %d bytes, more than %d", ErrMalformed, n, maxName)
	}
	if k <= 0 || n > uint64(len(b)-k) {
		return "", nil, fmt.Errorf("%w: string length", ErrMalformed)
	}
	raw := b[k : k+int(n)]
	b = b[k+int(n):]
	if !intern {
		return string(raw), b, nil
	}
	if s, ok := d.names[string(raw)]; ok {
		return s, b, nil
	}
	if d.names == nil {
		d.names = map[string]string{}
	}
	s := string(raw)
	d.names[s] = s
	return s, b, nil
}

// uvarint is binary.Uvarint rejecting (k = 0) a number not in its
// shortest form, which would not encode back to the same bytes.
func uvarint(b []byte) (uint64, int) {
	n, k := binary.Uvarint(b)
	if k > 1 && b[k-1] == 0 {
		return 0, 0
	}
	return n, k
}

// validStats reports whether st can be another node's evidence: finite,
// with a count that is not negative (Σy² may be: a widened posterior's,
// bandit.Stats).
func validStats(st bandit.Stats) bool {
	fin := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	return fin(st.N) && fin(st.Sum) && fin(st.SumSq) && st.N >= 0
}
