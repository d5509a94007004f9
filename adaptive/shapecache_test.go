package adaptive

import (
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/adaptsched/adaptsched/kernels"
)

// TestShapeCache checks the shape→bucket cache of the data path (DESIGN.md
// § The data path): from four goroutines at once, shapes first seen and
// then found again land in their BucketName's bucket while the shards'
// tables grow (run it with -race), and a table keeps its entries in
// first-sight order as it grows; opaque ops of one name and size class
// share a bucket whatever their exact work; a shard keeps every shape
// past 2^15 (where its index words once ran out of position bits, and
// the cache started over): the first is found again, with no allocation.
func TestShapeCache(t *testing.T) {
	s := newTestScheduler(t, Config{Seed: 3, Shards: 2})
	specs := make([]kernels.Spec, 0, 3000)
	for i := range 1500 {
		specs = append(specs, matmul(1+i, 64, 32+i%7),
			kernels.Spec{Op: kernels.Opaque, DType: kernels.F32, In: []kernels.Shape{{1 + i%50, 3}},
				Params: kernels.Params{Name: fmt.Sprintf("op%d", i%40), Bytes: int64(1000 + i)}})
	}
	check := func(spec kernels.Spec) error {
		d, err := s.Select(spec, Residency{})
		if err != nil {
			return err
		}
		if got, want := s.BucketName(d.Bucket), kernels.BucketName(spec); got != want {
			return fmt.Errorf("%v: bucket %q, want %q", spec, got, want)
		}
		return s.Observe(d, us(10))
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for pass := range 2 {
				for i := range specs {
					if err := check(specs[(i+w*len(specs)/4+pass)%len(specs)]); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()

	opaque := func(name string, bytes int64) BucketID {
		spec := kernels.Spec{Op: kernels.Opaque, DType: kernels.F32, In: []kernels.Shape{{4}}, Params: kernels.Params{Name: name, Bytes: bytes}}
		d, err := s.Select(spec, Residency{})
		if err != nil {
			t.Fatal(err)
		}
		return d.Bucket
	}
	if a, b, c := opaque("x", 1100), opaque("x", 1400), opaque("y", 1100); a != b || a == c { // 1100 and 1400 bytes: class 20
		t.Errorf("opaque x at 1100 and 1400 bytes, y at 1100: buckets %d, %d, %d", a, b, c)
	}

	one := newTestScheduler(t, Config{Seed: 3, Shards: 1})
	grow := func(i int) kernels.Spec {
		return kernels.Spec{Op: kernels.Opaque, DType: kernels.F32, In: []kernels.Shape{{1 + i}}, Params: kernels.Params{Name: "grow"}}
	}
	const many = 1<<15 + 10
	for i := range many {
		spec := grow(i)
		d, err := one.Select(spec, Residency{})
		if err != nil {
			t.Fatal(err)
		}
		if i == 1000 { // the table has grown 6 times: its entries are still in first-sight order
			n := int(one.entries.n)
			for j := range i + 1 {
				k, _ := keyOf(t, kernels.Spec{Op: kernels.Opaque, DType: kernels.F32, In: []kernels.Shape{{1 + j}}, Params: kernels.Params{Name: "grow"}})
				if j >= n || !one.entries.at(uint32(j)).key.equal(k) {
					t.Fatalf("entry %d of %d is not the %dth shape seen", j, n, j)
				}
			}
		}
		if i == many-1 {
			if e, ok := one.shards[0].tab.Load().find(keyOf(t, spec)); !ok || e.id != d.Bucket || one.shards[0].tab.Load().n != many {
				t.Errorf("after %d shapes: entry %+v (found %v), %d shapes cached", many, e, ok, one.shards[0].tab.Load().n)
			}
		}
	}
	first := grow(0)
	if _, ok := one.shards[0].tab.Load().find(keyOf(t, first)); !ok {
		t.Errorf("after %d shapes the first is no longer cached", many)
	}
	if a := testing.AllocsPerRun(100, func() { one.Select(first, Residency{}) }); a != 0 && !raceEnabled {
		t.Errorf("Select of the first of %d shapes: %v allocations", many, a)
	}
}

// keyOf returns spec's shape key and its hash.
func keyOf(t *testing.T, spec kernels.Spec) (*shapeKey, uint64) {
	var k shapeKey
	if !k.set(&spec) {
		t.Fatalf("%v has no shape key", spec)
	}
	return &k, k.hash()
}

// TestShapeCacheAttentionKeys: an Attention over a KV cache of the whole
// context reads Params.Keys positions of it, so the key tells specs of
// one shape and different Keys apart (their work, and so their size
// class, differ), finds each again, and leaves an invalid spec (values
// shaped unlike the keys) to Validate.
func TestShapeCacheAttentionKeys(t *testing.T) {
	s := newTestScheduler(t, Config{Seed: 3, Shards: 1})
	attn := func(keys, vLen int) kernels.Spec {
		return kernels.Spec{Op: kernels.Attention, In: []kernels.Shape{{16, 8, 1, 64}, {16, 4, 4096, 64}, {16, 4, vLen, 64}},
			Params: kernels.Params{Causal: true, Keys: keys}}
	}
	bucket := func(spec kernels.Spec) BucketID {
		t.Helper()
		d, err := s.Select(spec, Residency{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := s.BucketName(d.Bucket), kernels.BucketName(spec); got != want {
			t.Errorf("%v keys %d: bucket %q, want %q", spec, spec.Params.Keys, got, want)
		}
		return d.Bucket
	}
	few, many := bucket(attn(2, 4096)), bucket(attn(4000, 4096))
	bucket(attn(0, 4096))
	if few == many {
		t.Errorf("keys 2 and 4000 of 4096 share bucket %d", few)
	}
	if again := bucket(attn(2, 4096)); again != few {
		t.Errorf("keys 2 again: bucket %d, want %d", again, few)
	}
	if _, err := s.Select(attn(2, 2), Residency{}); err == nil {
		t.Error("values shorter than the keys: no error")
	}
}

// TestShapeEntriesFirstSight: the cache keeps its entries in one
// first-sight order across its shards (shapeEntries), the order an
// inference loop replays them in, and each shard's index finds its
// shapes again as its words widen and its table grows.
func TestShapeEntriesFirstSight(t *testing.T) {
	s := newTestScheduler(t, Config{Seed: 3, Shards: 8})
	spec := func(i int) kernels.Spec {
		return kernels.Spec{Op: kernels.Opaque, DType: kernels.F32, In: []kernels.Shape{{1 + i}}, Params: kernels.Params{Name: "first"}}
	}
	const n = 5000
	for i := range n {
		if _, err := s.Select(spec(i), Residency{}); err != nil {
			t.Fatal(err)
		}
	}
	words := 0
	for i := range s.shards {
		words += s.shards[i].tab.Load().n
	}
	if s.entries.n != n || words != n {
		t.Fatalf("%d entries and %d index words for %d shapes", s.entries.n, words, n)
	}
	for i := range n {
		k, h := keyOf(t, spec(i))
		if !s.entries.at(uint32(i)).key.equal(k) {
			t.Fatalf("entry %d is not the %dth shape seen", i, i)
		}
		if _, ok := s.shards[h>>32&s.shardMask].tab.Load().find(k, h); !ok {
			t.Fatalf("shape %d is not found", i)
		}
	}
}

// TestShapeCacheOpaqueInvalid checks that an Opaque spec Validate rejects
// (too many inputs, too high a rank, an input over MaxElements) is
// rejected even when a valid spec of the same FLOPs, bytes, name and
// total elements, the Opaque key, was selected first.
func TestShapeCacheOpaqueInvalid(t *testing.T) {
	s := newTestScheduler(t, Config{Seed: 1})
	op := func(in ...kernels.Shape) kernels.Spec {
		return kernels.Spec{Op: kernels.Opaque, DType: kernels.F32, In: in, Params: kernels.Params{Name: "x", FLOPs: 100}}
	}
	var ones []kernels.Shape
	for range 17 {
		ones = append(ones, kernels.Shape{1})
	}
	for _, c := range []struct{ valid, bad kernels.Spec }{
		{op(kernels.Shape{17}), op(ones...)},
		{op(kernels.Shape{2}), op(kernels.Shape{1, 1, 1, 1, 2})},
		{op(kernels.Shape{1 << 40}, kernels.Shape{1 << 40}), op(kernels.Shape{1 << 41})},
	} {
		if err := c.valid.Validate(); err != nil {
			t.Fatal(err)
		}
		if c.bad.Validate() == nil {
			t.Fatalf("%v: Validate accepts it", c.bad)
		}
		if _, err := s.Select(c.valid, Residency{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Select(c.bad, Residency{}); err == nil {
			t.Errorf("Select(%v) accepted an invalid spec", c.bad)
		}
		if _, err := s.Bucket(c.bad); err == nil {
			t.Errorf("Bucket(%v) accepted an invalid spec", c.bad)
		}
		if _, err := s.Handle(c.bad); err == nil {
			t.Errorf("Handle(%v) accepted an invalid spec", c.bad)
		}
	}
}

// TestShapeCachePosInvalid checks that a spec whose Params.Pos Validate
// rejects for its shapes (a KVAppend's rows past the cache's end, a
// RoPE's positions past math.MaxInt) is rejected even when a valid spec
// of the same shapes, and so of the same key (which leaves Pos out), was
// selected first: Select, Bucket and Handle return Validate's error.
func TestShapeCachePosInvalid(t *testing.T) {
	s := newTestScheduler(t, Config{Seed: 1})
	kv := func(pos int) kernels.Spec {
		return kernels.Spec{Op: kernels.KVAppend, DType: kernels.F32,
			In: []kernels.Shape{{1, 4, 16, 8}, {1, 2, 4, 8}}, Params: kernels.Params{Pos: pos}}
	}
	rope := func(pos int) kernels.Spec {
		return kernels.Spec{Op: kernels.RoPE, DType: kernels.F32,
			In: []kernels.Shape{{1, 4, 2, 8}}, Params: kernels.Params{Pos: pos}}
	}
	for _, c := range []struct{ valid, bad kernels.Spec }{
		{kv(14), kv(15)},
		{kv(0), kv(math.MaxInt)},
		{rope(7), rope(math.MaxInt - 2)},
	} {
		if err := c.valid.Validate(); err != nil {
			t.Fatal(err)
		}
		if c.bad.Validate() == nil {
			t.Fatalf("%v pos %d: Validate accepts it", c.bad, c.bad.Params.Pos)
		}
		if _, err := s.Select(c.valid, Residency{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Select(c.bad, Residency{}); err == nil {
			t.Errorf("Select(%v, pos %d) accepted an invalid spec", c.bad, c.bad.Params.Pos)
		}
		if _, err := s.Bucket(c.bad); err == nil {
			t.Errorf("Bucket(%v, pos %d) accepted an invalid spec", c.bad, c.bad.Params.Pos)
		}
		if _, err := s.Handle(c.bad); err == nil {
			t.Errorf("Handle(%v, pos %d) accepted an invalid spec", c.bad, c.bad.Params.Pos)
		}
		if _, err := s.Select(c.valid, Residency{}); err != nil {
			t.Errorf("Select(%v, pos %d) after the invalid one: %v", c.valid, c.valid.Params.Pos, err)
		}
	}
}
