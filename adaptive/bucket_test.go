package adaptive

import (
	"testing"
	"unsafe"
)

// TestBucketLayout checks what the slabs of buckets rely on: a bucket is a
// whole number of 64-byte cache lines, so that one goroutine's Select on
// a bucket never shares a line with another's on the next bucket of the
// slab, and the fields Select and Observe touch (up to held) fit in four.
func TestBucketLayout(t *testing.T) {
	var b bucket
	if size := unsafe.Sizeof(b); size%64 != 0 {
		t.Errorf("a bucket is %d bytes, not a multiple of 64", size)
	}
	if hot := unsafe.Offsetof(b.epoch) + unsafe.Sizeof(b.epoch); hot > 4*64 {
		t.Errorf("the hot fields end at byte %d, past four cache lines", hot)
	}
}
