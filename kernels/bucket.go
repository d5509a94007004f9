package kernels

import (
	"math"
	"strconv"
	"strings"
)

// SizeClass returns the half-octave size class of w:
// floor(2·log2(max(FLOPs, bytes read + written))), 0 for an op without
// work. Two ops in the same class differ in size by less than √2×.
func SizeClass(w Work) int {
	return SizeClassOf(float64(max(w.FLOPs, w.Bytes())))
}

// SizeClassOf is SizeClass of an amount of work x (FLOPs or bytes).
func SizeClassOf(x float64) int {
	if !(x > 1) {
		return 0
	}
	return int(math.Floor(2 * math.Log2(x)))
}

// BucketKey identifies an op bucket, the unit a scheduler learns in: op ×
// dtype × size class, and the source name of an opaque op.
type BucketKey struct {
	Op    Op
	DType DType
	Class int16
	Name  string // Opaque ops only
}

// BucketKeyOf returns the bucket key of a valid spec (it allocates: Work
// builds the output shape).
func BucketKeyOf(spec Spec) BucketKey {
	k := BucketKey{Op: spec.Op, DType: spec.DType, Class: int16(SizeClass(spec.Work()))}
	if spec.Op == Opaque {
		k.Name = spec.Params.Name
	}
	return k
}

// BucketName returns the stable name of spec's bucket, the key under which
// its posteriors persist: "Op/dtype/sN" (N the SizeClass of its Work),
// "Opaque:name/dtype/sN" for an op outside the catalogue. It returns "" for
// a spec that Validate rejects.
func BucketName(spec Spec) string {
	if spec.Validate() != nil {
		return ""
	}
	return BucketKeyOf(spec).String()
}

// String formats the bucket's stable name.
func (k BucketKey) String() string {
	op := k.Op.String()
	if k.Op == Opaque {
		op += ":" + k.Name
	}
	return op + "/" + k.DType.String() + "/s" + strconv.Itoa(int(k.Class))
}

// Family is the name of the bucket's op family: the buckets of one op and
// dtype at every size, whose learned corrections inform each other.
func (k BucketKey) Family() string {
	op := k.Op.String()
	if k.Op == Opaque {
		name := k.Name
		if i := strings.IndexByte(name, '['); i > 0 && strings.HasSuffix(name, "]") {
			name = name[:i]
		}
		op += ":" + name
	}
	return op + "/" + k.DType.String()
}
