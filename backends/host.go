package backends

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/adaptsched/adaptsched/kernels"
)

// HostBuffer is a buffer in host memory, 4-byte aligned so that its bytes
// can be viewed as float32. CPU and simulated backends use it.
type HostBuffer struct {
	owner any // the backend that allocated it
	data  []byte
	freed atomic.Bool
}

// NewHostBuffer allocates n bytes of host memory on behalf of owner.
func NewHostBuffer(owner any, n int64) *HostBuffer {
	words := make([]float32, (n+3)/4)
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), len(words)*4)
	return &HostBuffer{owner: owner, data: b[:n:n]}
}

// WrapHost returns a HostBuffer of owner over b itself, without copying:
// how a HostMapper maps host memory. b must be 4-byte aligned, so that it
// can be viewed as float32; otherwise it returns ErrForeignBuffer.
func WrapHost(owner any, b []byte) (*HostBuffer, error) {
	if len(b) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%4 != 0 {
		return nil, fmt.Errorf("%w: host memory at %p is not 4-byte aligned", ErrForeignBuffer, unsafe.SliceData(b))
	}
	return &HostBuffer{owner: owner, data: b[:len(b):len(b)]}, nil
}

// Size implements Buffer.
func (h *HostBuffer) Size() int64 { return int64(len(h.data)) }

// Free implements Buffer. The memory is left to the garbage collector.
func (h *HostBuffer) Free() { h.freed.Store(true) }

// Bytes returns the buffer's memory. The buffer keeps ownership.
func (h *HostBuffer) Bytes() []byte { return h.data }

// F32 returns the buffer's memory viewed as float32.
func (h *HostBuffer) F32() []float32 { return kernels.AsF32(h.data) }

// errFreed is the error of using a freed HostBuffer.
var errFreed = fmt.Errorf("%w: it was freed", ErrForeignBuffer)

// HostBytes returns the memory of b if it is a live HostBuffer allocated by
// owner, and ErrForeignBuffer otherwise (saying so when b was freed).
func HostBytes(owner any, b Buffer) ([]byte, error) {
	h, ok := b.(*HostBuffer)
	if !ok || h.owner != owner {
		return nil, ErrForeignBuffer
	}
	if h.freed.Load() {
		return nil, errFreed
	}
	return h.data, nil
}
