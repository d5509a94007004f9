package adaptive

import (
	"math"
	"strconv"

	"github.com/adaptsched/adaptsched/kernels"
)

// BucketID is the dense index of a bucket within one Scheduler, assigned in
// order of first sight; Scheduler.BucketName turns it back into the
// bucket's stable name.
type BucketID uint32

// SizeClass returns the half-octave size class of w:
// floor(2·log2(max(FLOPs, bytes read + written))), 0 for an op without
// work. Two ops in the same class differ in size by less than √2×.
func SizeClass(w kernels.Work) int {
	return sizeClass(float64(max(w.FLOPs, w.Bytes())))
}

func sizeClass(x float64) int {
	if !(x > 1) {
		return 0
	}
	return int(math.Floor(2 * math.Log2(x)))
}

// BucketName returns the stable name of spec's bucket, the key under which
// its posteriors persist: "Op/dtype/sN" (N the SizeClass of its Work),
// "Opaque:name/dtype/sN" for an op outside the catalogue. It returns "" for
// a spec that Validate rejects.
func BucketName(spec kernels.Spec) string {
	if spec.Validate() != nil {
		return ""
	}
	return bucketKeyOf(spec).String()
}

// bucketKey identifies a bucket: op × dtype × size class, and the source
// name of an opaque op.
type bucketKey struct {
	op    kernels.Op
	dtype kernels.DType
	class int16
	name  string // Opaque ops only
}

// bucketKeyOf computes the key of a valid spec (this allocates: Work
// builds the output shape; the hot path reaches it through the shape
// cache instead).
func bucketKeyOf(spec kernels.Spec) bucketKey {
	k := bucketKey{op: spec.Op, dtype: spec.DType, class: int16(SizeClass(spec.Work()))}
	if spec.Op == kernels.Opaque {
		k.name = spec.Params.Name
	}
	return k
}

// String formats the bucket's stable name.
func (k bucketKey) String() string {
	op := k.op.String()
	if k.op == kernels.Opaque {
		op += ":" + k.name
	}
	return op + "/" + k.dtype.String() + "/s" + strconv.Itoa(int(k.class))
}

// family is the key of a bucket's op family: the buckets of one op and
// dtype at every size, whose learned corrections inform each other.
func (k bucketKey) family() string {
	op := k.op.String()
	if k.op == kernels.Opaque {
		op += ":" + k.name
	}
	return op + "/" + k.dtype.String()
}

// maxKeyInputs is the most inputs a catalogue op takes (Attention,
// LayerNorm); shapeKey holds that many shapes inline.
const maxKeyInputs = 3

// shapeKey is what the hot path hashes to find a bucket without computing
// Work (which allocates): the op, dtype and every dimension of a catalogue
// op, or an opaque op's name and size class. It is comparable, so it keys
// a map without allocating.
type shapeKey struct {
	op     kernels.Op
	dtype  kernels.DType
	ranks  [maxKeyInputs]uint8
	nIn    uint8
	class  int16 // Opaque ops: the size class (dims unused)
	causal bool  // Params.Causal: it decides whether an Attention shape is valid
	dims   [maxKeyInputs * kernels.MaxRank]uint32
	opaque string
}

// shapeKeyOf builds the lookup key of spec; ok is false for a spec that
// no valid spec resembles (too many inputs, too high a rank, parameters
// Validate rejects whatever the shapes), which the slow path then rejects
// with Validate's error, and for a dimension of 2^32 or more (dimensions
// are kept in 32 bits to keep the key small), which the slow path serves
// without the cache. The other parameters (a RoPE position, a scale)
// do not change the bucket, so they stay out of the key.
func shapeKeyOf(spec *kernels.Spec) (k shapeKey, ok bool) {
	k.op, k.dtype, k.causal = spec.Op, spec.DType, spec.Params.Causal
	if p := &spec.Params; !finite32(p.Scale) || !(p.Eps >= 0) || !(p.RopeBase >= 0) ||
		math.IsInf(float64(p.Eps), 0) || math.IsInf(float64(p.RopeBase), 0) || p.Pos < 0 {
		return k, false
	}
	if spec.Op == kernels.Opaque {
		// Work of an opaque op is a sum over its shapes: no allocation.
		for _, sh := range spec.In {
			for _, d := range sh {
				if d <= 0 {
					return k, false
				}
			}
		}
		if spec.Params.FLOPs < 0 || spec.Params.Bytes < 0 {
			return k, false
		}
		k.class = int16(SizeClass(spec.Work()))
		k.opaque = spec.Params.Name
		return k, true
	}
	if len(spec.In) > maxKeyInputs {
		return k, false
	}
	k.nIn = uint8(len(spec.In))
	for i, sh := range spec.In {
		if len(sh) > kernels.MaxRank {
			return k, false
		}
		k.ranks[i] = uint8(len(sh))
		for j, d := range sh {
			if uint64(d) > math.MaxUint32 {
				return k, false
			}
			k.dims[i*kernels.MaxRank+j] = uint32(d)
		}
	}
	return k, true
}

func finite32(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }

// hash mixes the key for shard selection (the map hashes it again: this
// only spreads keys over shards).
func (k *shapeKey) hash() uint64 {
	const m = 0x9E3779B97F4A7C15
	h := uint64(k.op)<<8 | uint64(k.dtype) | uint64(uint16(k.class))<<16 | uint64(k.nIn)<<32 | uint64(b2u(k.causal))<<40
	h *= m
	for _, d := range k.dims {
		h = (h ^ uint64(d)) * m
	}
	for i := 0; i < len(k.opaque); i++ {
		h = (h ^ uint64(k.opaque[i])) * m
	}
	return h ^ h>>31
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
