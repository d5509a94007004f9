package rocm

import (
	"errors"
	"math/bits"
	"sync"

	"github.com/adaptsched/adaptsched/backends"
)

// pool caches device allocations by size class, as the framework
// allocators do: a freed buffer's memory goes back on its class's free
// list and the next allocation of that class reuses it without a driver
// call. When the driver reports out of memory, the pool releases every
// cached block and tries once more. pool is safe for concurrent use; the
// alloc and release functions run the driver calls (through Device.do).
type pool struct {
	alloc   func(n int64) (uintptr, error) // n is a class size
	release func(p uintptr)

	mu     sync.Mutex
	free   map[int64][]uintptr
	cached int64 // bytes on free lists
	live   map[uintptr]int64
}

func newPool(alloc func(int64) (uintptr, error), release func(uintptr)) *pool {
	return &pool{alloc: alloc, release: release, free: map[int64][]uintptr{}, live: map[uintptr]int64{}}
}

// classSize rounds n up to its class: a power of two up to 1 MiB, a
// multiple of a sixteenth of the next power of two above (at most 12.5%
// waste), at least 256 bytes.
func classSize(n int64) int64 {
	if n <= 256 {
		return 256
	}
	if n <= 1<<20 {
		return 1 << bits.Len64(uint64(n-1))
	}
	step := int64(1) << (bits.Len64(uint64(n-1)) - 4)
	return (n + step - 1) / step * step
}

// get returns device memory of at least n bytes and its class size.
func (p *pool) get(n int64) (uintptr, int64, error) {
	c := classSize(n)
	p.mu.Lock()
	if l := p.free[c]; len(l) > 0 {
		ptr := l[len(l)-1]
		p.free[c] = l[:len(l)-1]
		p.cached -= c
		p.live[ptr] = c
		p.mu.Unlock()
		return ptr, c, nil
	}
	p.mu.Unlock()
	ptr, err := p.alloc(c)
	if errors.Is(err, backends.ErrOutOfMemory) && p.trim() > 0 {
		ptr, err = p.alloc(c)
	}
	if err != nil {
		return 0, 0, err
	}
	p.mu.Lock()
	p.live[ptr] = c
	p.mu.Unlock()
	return ptr, c, nil
}

// put returns memory from get to its free list.
func (p *pool) put(ptr uintptr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.live[ptr]
	if !ok {
		return
	}
	delete(p.live, ptr)
	p.free[c] = append(p.free[c], ptr)
	p.cached += c
}

// trim releases every cached block and returns the bytes released.
func (p *pool) trim() int64 {
	p.mu.Lock()
	var ptrs []uintptr
	for c, l := range p.free {
		ptrs = append(ptrs, l...)
		delete(p.free, c)
	}
	n := p.cached
	p.cached = 0
	p.mu.Unlock()
	for _, ptr := range ptrs {
		p.release(ptr)
	}
	return n
}

// drain releases everything, live blocks included (Close).
func (p *pool) drain() {
	p.trim()
	p.mu.Lock()
	live := p.live
	p.live = map[uintptr]int64{}
	p.mu.Unlock()
	for ptr := range live {
		p.release(ptr)
	}
}

// stats returns the bytes in use and the bytes cached.
func (p *pool) stats() (live, cached int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.live {
		live += c
	}
	return live, p.cached
}
