package adaptive

import (
	"math"
	"strconv"
	"testing"
	"unsafe"

	"github.com/adaptsched/adaptsched/kernels"
)

// TestBucketLayout checks what the slabs of buckets rely on: a bucket is a
// whole number of 64-byte cache lines and starts on one (bucketSlab), so
// that one goroutine's Select on a bucket never shares a line with
// another's on the next bucket of the slab, and the fields Select and
// Observe touch (up to held) fit in four.
func TestBucketLayout(t *testing.T) {
	var b bucket
	if size := unsafe.Sizeof(b); size%64 != 0 {
		t.Errorf("a bucket is %d bytes, not a multiple of 64", size)
	}
	if hot := unsafe.Offsetof(b.epoch) + unsafe.Sizeof(b.epoch); hot > 4*64 {
		t.Errorf("the hot fields end at byte %d, past four cache lines", hot)
	}
	s := newTestScheduler(t, Config{Seed: 1})
	for i := range 2*slabBuckets + 1 { // two slabs and a bit, a bucket each
		spec := kernels.Spec{Op: kernels.Opaque, DType: kernels.F32, In: []kernels.Shape{{1024}},
			Params: kernels.Params{Name: "k" + strconv.Itoa(i), FLOPs: 1 << 20, Bytes: 1 << 16}}
		d, err := s.Select(spec, Residency{})
		if err != nil {
			t.Fatal(err)
		}
		if at := uintptr(unsafe.Pointer(d.b)) % 64; at != 0 {
			t.Fatalf("bucket %d starts %d bytes into a cache line", d.Bucket, at)
		}
	}
}

// TestEngineLayout: the hierarchy's sums start on a 32-byte boundary of
// the engine (itself allocated on a 64-byte one), so that each of their
// Sums lies in one cache line (prior.Sums).
func TestEngineLayout(t *testing.T) {
	var e engine
	if off := unsafe.Offsetof(e.corr) + unsafe.Offsetof(e.corr.h); off%32 != 0 {
		t.Errorf("the hierarchy starts at byte %d of the engine, not on a 32-byte boundary", off)
	}
	if gap := unsafe.Offsetof(e.epoch.floor) - unsafe.Offsetof(e.epoch.n); gap < 64 {
		t.Errorf("the epoch's floor is %d bytes from its count, on a line it may share", gap)
	}
	if size := unsafe.Sizeof(e); size < 1024 {
		t.Errorf("an engine is %d bytes: below 1 KiB, its allocation need not start on 64 bytes", size)
	}
}

// TestPicksOverflow: a bucket's 32-bit decision counters hand over to the
// engine's totals when full (engine.record), and Telemetry's totals stay
// exact across the hand-over (DESIGN.md § Strategies and telemetry).
func TestPicksOverflow(t *testing.T) {
	s := newTestScheduler(t, Config{Seed: 1})
	spec := matmul(64, 64, 64)
	d, err := s.Select(spec, Residency{})
	if err != nil {
		t.Fatal(err)
	}
	s.Observe(d, us(10))
	before := s.Telemetry()
	b := d.b
	var added int64
	b.mu.Lock()
	for a := range b.per {
		for r := UserPreference; r < NumReasons; r++ {
			added += int64(math.MaxUint16-1) - int64(b.per[a].picks[r])
			b.per[a].picks[r] = math.MaxUint16 - 1
		}
	}
	b.mu.Unlock()
	const more = 5
	for range more {
		d, err := s.Select(spec, Residency{})
		if err != nil {
			t.Fatal(err)
		}
		s.Observe(d, us(10))
	}
	after := s.Telemetry()
	if got, want := after.Decisions, before.Decisions+added+more; got != want {
		t.Errorf("decisions %d after the counters filled, want %d", got, want)
	}
	var over int64
	for a := range s.n {
		for r := range NumReasons {
			over += s.e.picksOver[a][r].Load()
		}
	}
	if over == 0 {
		t.Error("no counter handed over to the engine")
	}
}
