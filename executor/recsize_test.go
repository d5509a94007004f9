package executor

import (
	"testing"
	"unsafe"
)

// TestRecSize holds a queued op's record to Go's 512-byte size class:
// an object of over 512 bytes that holds pointers takes an 8-byte header
// and the 576-byte class. Every byte of a record is allocated, zeroed
// and scanned once per queued op (BenchmarkExecutorStep's exec-B/op).
func TestRecSize(t *testing.T) {
	if n := unsafe.Sizeof(rec{}); n > 512 {
		t.Errorf("a rec is %d bytes, want at most 512", n)
	}
}
