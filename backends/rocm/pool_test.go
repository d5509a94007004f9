package rocm

import (
	"errors"
	"fmt"
	"testing"

	"github.com/adaptsched/adaptsched/backends"
)

func TestClassSize(t *testing.T) {
	for _, c := range []struct{ n, want int64 }{
		{1, 256}, {256, 256}, {257, 512}, {1000, 1024}, {1 << 20, 1 << 20},
		{1<<20 + 1, 1<<20 + 1<<17}, {3 << 20, 3 << 20}, {5<<20 + 1, 11 << 19}, {1 << 30, 1 << 30},
	} {
		if got := classSize(c.n); got != c.want {
			t.Errorf("classSize(%d) = %d, want %d", c.n, got, c.want)
		}
		if got := classSize(c.n); got < c.n || (c.n > 1<<20 && float64(got-c.n) > 0.125*float64(c.n)) {
			t.Errorf("classSize(%d) = %d: too small or wastes over 12.5%%", c.n, got)
		}
	}
}

// fakeDriver hands out increasing addresses up to a byte limit.
type fakeDriver struct {
	next, used, limit int64
	allocs, frees     int
}

func (f *fakeDriver) alloc(n int64) (uintptr, error) {
	if f.used+n > f.limit {
		return 0, fmt.Errorf("%w: fake", backends.ErrOutOfMemory)
	}
	f.used += n
	f.next += n
	f.allocs++
	return uintptr(f.next), nil
}

func TestPoolReuseAndTrim(t *testing.T) {
	drv := &fakeDriver{limit: 4096}
	sizes := map[uintptr]int64{}
	p := newPool(func(n int64) (uintptr, error) {
		ptr, err := drv.alloc(n)
		sizes[ptr] = n
		return ptr, err
	}, func(ptr uintptr) { drv.used -= sizes[ptr]; drv.frees++ })
	a, c, err := p.get(1000)
	if err != nil || c != 1024 {
		t.Fatalf("get(1000) = %d, %v", c, err)
	}
	p.put(a)
	b, _, _ := p.get(900) // same class: reused, no driver call
	if b != a || drv.allocs != 1 {
		t.Errorf("reuse: got %#x (allocs %d), want %#x from the cache", b, drv.allocs, a)
	}
	p.put(b)
	// 3 KiB + the cached 1 KiB exceeds 4 KiB: the cache is trimmed.
	if _, _, err := p.get(3000); err != nil || drv.frees != 1 {
		t.Errorf("get after trim: %v, frees %d", err, drv.frees)
	}
	if _, _, err := p.get(2000); !errors.Is(err, backends.ErrOutOfMemory) {
		t.Errorf("get beyond the limit: %v, want ErrOutOfMemory", err)
	}
	live, cached := p.stats()
	if live != 4096 || cached != 0 {
		t.Errorf("stats = %d, %d", live, cached)
	}
	p.drain()
	if drv.used != 0 {
		t.Errorf("after drain %d bytes still allocated", drv.used)
	}
}
