package executor

import (
	"testing"
	"unsafe"
)

// TestRecSize holds a queued op's record to Go's 1,024-byte size class:
// at most 1,016 bytes, the allocator adding an 8-byte header to an
// object of over 512 bytes that holds pointers. The next class is
// 1,152, and every byte of a record is allocated, zeroed and scanned
// once per queued op (BenchmarkExecutorStep's exec-B/op).
func TestRecSize(t *testing.T) {
	if n := unsafe.Sizeof(rec{}); n > 1016 {
		t.Errorf("a rec is %d bytes, want at most 1,016", n)
	}
}
