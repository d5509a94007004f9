package history

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/adaptsched/adaptsched/bandit"
	"github.com/adaptsched/adaptsched/learned"
)

// Record is one stored posterior with what merging needs: the prior it
// grew from (zero when unknown), the number of updates recorded, and when
// it was last written.
type Record struct {
	Key       learned.Key
	Prior     bandit.NormalGamma // zero value: unknown
	Posterior bandit.NormalGamma
	N         uint64    // updates (Put calls) behind Posterior, over the record's life
	Updated   time.Time // time of the flush that last wrote it
}

// recordVersion is the first byte of every encoded value. A value with
// another first byte is skipped and counted, never guessed at.
const recordVersion = 1

// recordSize is the encoded length of a version-1 value: the version
// byte, prior and posterior (8 float64), n (uint64) and the update time
// (int64 Unix nanoseconds), little-endian. A fixed binary layout is used
// rather than JSON because it is 81 bytes, encodes without allocating,
// and any truncation shows up as a wrong length.
const recordSize = 1 + 8*8 + 8 + 8

// Key layout: "r" / schema version / fingerprint hash / backend / bucket.
// The backend is length-prefixed (uvarint) and the bucket is the rest of
// the key, because both may contain '/'.
const (
	keySchema = "r/1/"
)

// maxKeySize is the most bytes of a key that Badger takes: it refuses a
// longer one at Set, failing the whole batch and so every flush after
// (TestLongKey).
const maxKeySize = 65000

func appendKey(b []byte, fp string, k learned.Key) []byte {
	b = append(b, keySchema...)
	b = append(b, fp...)
	b = append(b, '/')
	b = binary.AppendUvarint(b, uint64(len(k.Backend)))
	b = append(b, k.Backend...)
	return append(b, k.Bucket...)
}

// keySize returns len(appendKey(nil, fp, k)) without building the key.
func keySize(fp string, k learned.Key) int {
	n := len(keySchema) + len(fp) + 1 + len(k.Backend) + len(k.Bucket)
	for v := uint64(len(k.Backend)); ; v >>= 7 {
		n++ // the backend's uvarint length, 7 bits a byte
		if v < 0x80 {
			return n
		}
	}
}

// parseKey splits a record key into fingerprint and key.
func parseKey(b []byte) (fp string, k learned.Key, err error) {
	if len(b) < len(keySchema) || string(b[:len(keySchema)]) != keySchema {
		return "", k, fmt.Errorf("key %q: unknown schema", b)
	}
	rest := b[len(keySchema):]
	i := 0
	for i < len(rest) && rest[i] != '/' {
		i++
	}
	if i == len(rest) {
		return "", k, fmt.Errorf("key %q: no fingerprint", b)
	}
	fp, rest = string(rest[:i]), rest[i+1:]
	n, w := binary.Uvarint(rest)
	if w <= 0 || n > uint64(len(rest)-w) {
		return "", k, fmt.Errorf("key %q: bad backend length", b)
	}
	rest = rest[w:]
	return fp, learned.Key{Backend: string(rest[:n]), Bucket: string(rest[n:])}, nil
}

func appendNG(b []byte, p bandit.NormalGamma) []byte {
	for _, f := range [4]float64{p.Mu, p.Kappa, p.Alpha, p.Beta} {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
	}
	return b
}

func appendValue(b []byte, r *Record) []byte {
	b = append(b, recordVersion)
	b = appendNG(b, r.Prior)
	b = appendNG(b, r.Posterior)
	b = binary.LittleEndian.AppendUint64(b, r.N)
	return binary.LittleEndian.AppendUint64(b, uint64(r.Updated.UnixNano()))
}

func readNG(b []byte) bandit.NormalGamma {
	f := func(i int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])) }
	return bandit.NormalGamma{Mu: f(0), Kappa: f(1), Alpha: f(2), Beta: f(3)}
}

// decodeValue fills r from an encoded value, or says what is wrong with it.
func decodeValue(b []byte, r *Record) error {
	if len(b) == 0 {
		return fmt.Errorf("empty value")
	}
	if b[0] != recordVersion {
		return fmt.Errorf("unknown record version %d", b[0])
	}
	if len(b) != recordSize {
		return fmt.Errorf("value is %d bytes, want %d", len(b), recordSize)
	}
	r.Prior = readNG(b[1:])
	r.Posterior = readNG(b[33:])
	r.N = binary.LittleEndian.Uint64(b[65:])
	r.Updated = time.Unix(0, int64(binary.LittleEndian.Uint64(b[73:])))
	if !validNG(r.Posterior) {
		return fmt.Errorf("invalid posterior %+v", r.Posterior)
	}
	if r.Prior != (bandit.NormalGamma{}) && !validNG(r.Prior) {
		return fmt.Errorf("invalid prior %+v", r.Prior)
	}
	return nil
}

// validNG reports whether p is a usable posterior: finite, with positive
// κ, α and β. NaN fails every comparison, so each test below also rejects
// it, and the upper bounds reject +Inf: half the time of IsNaN and IsInf
// on every field, and Put validates twice.
func validNG(p bandit.NormalGamma) bool {
	return math.Abs(p.Mu) <= math.MaxFloat64 &&
		p.Kappa > 0 && p.Kappa <= math.MaxFloat64 &&
		p.Alpha > 0 && p.Alpha <= math.MaxFloat64 &&
		p.Beta > 0 && p.Beta <= math.MaxFloat64
}
