package weightcache

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestBudgetNeverExceeded(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	c, err := New(1000, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sizes := make([]int64, 40)
	for i := range sizes {
		sizes[i] = 1 + r.Int64N(400)
	}
	resident := map[int]bool{}
	for step := range 5000 {
		id := int(r.ExpFloat64()*6) % len(sizes)
		p, err := c.Use(Weight{ID: id, Bytes: sizes[id], CopyUs: float64(sizes[id]) / 10}, float64(step), r.IntN(2) == 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range p.Evict {
			if !resident[v] {
				t.Fatalf("step %d: evicted %d, not resident", step, v)
			}
			delete(resident, v)
		}
		if p.Hit != resident[id] {
			t.Fatalf("step %d: hit %v, resident %v", step, p.Hit, resident[id])
		}
		if p.Admit {
			resident[id] = true
		}
		var sum int64
		for v := range resident {
			sum += sizes[v]
			if !c.Resident(v) {
				t.Fatalf("step %d: %d should be resident", step, v)
			}
		}
		if sum != c.Used() || sum > c.Budget() {
			t.Fatalf("step %d: resident %d bytes, Used %d, budget %d", step, sum, c.Used(), c.Budget())
		}
		if step%97 == 0 {
			c.Invalidate(id)
			delete(resident, id)
		}
	}
}

func TestNoThrashing(t *testing.T) {
	// Two weights used in turn, room for one: the first keeps its place.
	c, _ := New(100, Options{})
	a, b := Weight{ID: 0, Bytes: 100, CopyUs: 50}, Weight{ID: 1, Bytes: 100, CopyUs: 50}
	evictions := 0
	for step := range 1000 {
		w := a
		if step%2 == 1 {
			w = b
		}
		p, _ := c.Use(w, float64(step), true)
		evictions += len(p.Evict)
	}
	if evictions != 0 {
		t.Errorf("%d evictions between two weights of equal worth", evictions)
	}
}

func TestHotWeightDisplacesCold(t *testing.T) {
	c, _ := New(100, Options{})
	cold, hot := Weight{ID: 0, Bytes: 100, CopyUs: 50}, Weight{ID: 1, Bytes: 100, CopyUs: 50}
	if p, _ := c.Use(cold, 0, true); !p.Admit {
		t.Fatalf("empty cache refused a copied weight: %+v", p)
	}
	if p, _ := c.Use(hot, 1, false); p.Admit {
		t.Fatalf("a weight used once, not copied, was admitted: %+v", p)
	}
	var got Plan
	for step := 2; step < 20 && !got.Admit; step++ {
		got, _ = c.Use(hot, float64(step), false)
	}
	if !got.Admit || len(got.Evict) != 1 || got.Evict[0] != 0 || c.Resident(0) || !c.Resident(1) {
		t.Errorf("hot weight never displaced the cold one: %+v", got)
	}
	// Too big for the budget: never admitted.
	if p, _ := c.Use(Weight{ID: 2, Bytes: 101, CopyUs: 1}, 30, true); p.Admit {
		t.Errorf("admitted a weight over the budget")
	}
}

func TestInvalid(t *testing.T) {
	if _, err := New(-1, Options{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative budget: %v", err)
	}
	c, _ := New(10, Options{})
	for _, w := range []Weight{{ID: -1, Bytes: 1, CopyUs: 1}, {ID: 0, Bytes: 0, CopyUs: 1}, {ID: 0, Bytes: 1}} {
		if _, err := c.Use(w, 0, true); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v", w, err)
		}
	}
}

func TestCopyMustPayBack(t *testing.T) {
	// A use saves a tenth of a copy. Where it evicts (a cold weight fills
	// the budget), a weight used every step is admitted only once its
	// decayed uses pay the copy by the margin: 12.5, its 15th use.
	c, _ := New(100, Options{})
	if p, _ := c.Use(Weight{ID: 1, Bytes: 100, CopyUs: 100}, 0, true); !p.Admit {
		t.Fatal("empty cache refused a copied weight")
	}
	w := Weight{ID: 0, Bytes: 100, CopyUs: 100, SavedUs: 10}
	for step := 1; step < 40; step++ {
		p, _ := c.Use(w, float64(step), false)
		if p.Admit {
			if step < 15 {
				t.Fatalf("admitted at use %d, before its uses paid the copy back", step)
			}
			return
		}
	}
	t.Fatal("never admitted a weight used 40 times")
}

func TestFreeRoomFillsByRate(t *testing.T) {
	// Into free room, a weight used every fourth step is expected to be
	// used about 0.25 × 32/ln 2 ≈ 12 times over the rule's memory (12.05
	// by its decayed uses): at a third of a copy saved per use that pays,
	// and it is admitted at its second use (one use gives no rate); at
	// 7% it does not, and its first uses over 40 steps do not admit it.
	for _, c := range []struct {
		saved float64
		want  int // step of admission; -1: not before step 40
	}{{33, 4}, {7, -1}} {
		cache, _ := New(1000, Options{})
		w := Weight{ID: 0, Bytes: 100, CopyUs: 100, SavedUs: c.saved}
		got := -1
		for step := 0; step < 40 && got < 0; step += 4 {
			if want := cache.Wants(0, float64(step)); step > 0 && want != (step == c.want) {
				t.Errorf("saved %v: Wants at step %d = %v", c.saved, step, want)
			}
			if p, _ := cache.Use(w, float64(step), false); p.Admit {
				got = step
			}
		}
		if got != c.want {
			t.Errorf("saved %v: admitted at step %d, want %d", c.saved, got, c.want)
		}
	}
}

func TestFreeRoomFillsWithAge(t *testing.T) {
	// Used every fourth step, a use saving a tenth of a copy: its decayed
	// uses level off near 0.25 × 32/ln 2 ≈ 11.5, enough for free room
	// once its age counts, never enough to evict.
	c, _ := New(100, Options{})
	w := Weight{ID: 0, Bytes: 100, CopyUs: 100, SavedUs: 7}
	admitted := -1
	for step := 0; step < 400 && admitted < 0; step += 4 {
		if p, _ := c.Use(w, float64(step), false); p.Admit {
			admitted = step
		}
	}
	if admitted < 46 || admitted > 200 {
		t.Errorf("admitted at step %d, want after a half-life's worth of age and within 200", admitted)
	}
	// Full now: a weight of the same rate does not evict it.
	v := Weight{ID: 1, Bytes: 100, CopyUs: 100, SavedUs: 7}
	for step := 400; step < 800; step += 4 {
		if p, _ := c.Use(v, float64(step), false); p.Admit {
			t.Fatalf("step %d: evicted a weight of the same worth", step)
		}
	}
}

func TestSavedAveraged(t *testing.T) {
	// What a use saves comes from one decision's estimates, each noisy:
	// the rule weighs their average over the uses, not the last. Saving
	// 2 and 18 of a copy of 100 in turn (10 on average), a weight used
	// every step evicts a cold one only once its decayed uses reach 12.5,
	// its 15th use; by the last figure alone, 18, it would at its 7th.
	c, _ := New(100, Options{})
	if p, _ := c.Use(Weight{ID: 1, Bytes: 100, CopyUs: 100}, 0, true); !p.Admit {
		t.Fatal("empty cache refused a copied weight")
	}
	for step := 1; step < 40; step++ {
		saved := 2.0
		if step%2 == 0 {
			saved = 18
		}
		p, _ := c.Use(Weight{ID: 0, Bytes: 100, CopyUs: 100, SavedUs: saved}, float64(step), false)
		if p.Admit {
			if step < 14 {
				t.Fatalf("admitted at use %d, on its last figures rather than their average", step)
			}
			return
		}
	}
	t.Fatal("never admitted a weight used 40 times")
}

func TestWorthBySavings(t *testing.T) {
	// Two weights used in turn, room for one, the same copy: a use of b
	// saves four times what a use of a does (more tokens per use, say),
	// so b is worth more per byte and takes a's place, for good.
	c, _ := New(100, Options{})
	a := Weight{ID: 0, Bytes: 100, CopyUs: 100, SavedUs: 10}
	b := Weight{ID: 1, Bytes: 100, CopyUs: 100, SavedUs: 40}
	if p, _ := c.Use(a, 0, true); !p.Admit {
		t.Fatal("empty cache refused a copied weight")
	}
	took := -1
	for step := 1; step < 400; step++ {
		w := a
		if step%2 == 1 {
			w = b
		}
		p, _ := c.Use(w, float64(step), false)
		switch {
		case p.Admit && w.ID == 1 && took < 0:
			took = step
		case p.Admit:
			t.Fatalf("step %d: weight %d admitted again", step, w.ID)
		}
	}
	if took < 0 || !c.Resident(1) || c.Resident(0) {
		t.Errorf("b never took a's place (at %d; resident a %v, b %v)", took, c.Resident(0), c.Resident(1))
	}
}

// TestUses: Uses counts each Use, halved after HalfLife steps; a weight
// never used has none.
func TestUses(t *testing.T) {
	c, _ := New(100, Options{HalfLife: 10})
	w := Weight{ID: 1, Bytes: 10, CopyUs: 5}
	for range 2 {
		if _, err := c.Use(w, 0, true); err != nil {
			t.Fatal(err)
		}
	}
	if u := c.Uses(1, 0); u != 2 {
		t.Errorf("two uses at step 0 count %v", u)
	}
	if u := c.Uses(1, 10); math.Abs(u-1) > 1e-9 {
		t.Errorf("two uses a half-life ago count %v, want 1", u)
	}
	if u, v := c.Uses(0, 0), c.Uses(7, 0); u != 0 || v != 0 {
		t.Errorf("weights never used count %v and %v", u, v)
	}
}

// TestWantsPromise: a weight Wants admits, copied by its caller before
// the op, is admitted by the Use that follows (copied true) with the
// evictions Wants implied, whatever that use saves; the use's figure
// counts from then on.
func TestWantsPromise(t *testing.T) {
	// b, used twice at step 0, is resident; a use of a saves 100 until
	// step 3, when Wants admits it over b (2.94 uses × 100 against
	// 1.87 × 100 × 1.25). The use it was copied for saves 1: by the
	// average with it, 66.3, a is worth less than b by the margin.
	c, _ := New(100, Options{})
	b := Weight{ID: 1, Bytes: 100, CopyUs: 100}
	for range 2 {
		c.Use(b, 0, true)
	}
	a := Weight{ID: 0, Bytes: 100, CopyUs: 100, SavedUs: 100}
	for step := 1; step < 3; step++ {
		if c.Wants(0, float64(step)) {
			t.Fatalf("Wants a at step %d, before its uses outweigh b's", step)
		}
		c.Use(a, float64(step), false)
	}
	if !c.Wants(0, 3) {
		t.Fatal("Wants a at step 3 = false")
	}
	a.SavedUs = 1
	d := clone(c)
	if p, _ := d.Use(a, 3, false); p.Admit {
		t.Errorf("a use not copied, saving 1, admitted a: %+v", p)
	}
	p, _ := c.Use(a, 3, true)
	if !p.Admit || len(p.Evict) != 1 || p.Evict[0] != 1 {
		t.Fatalf("copied after Wants, Use gave %+v, want a admitted over b", p)
	}
	if s := c.entries[0].saved; math.Abs(s-66.3) > 0.1 {
		t.Errorf("a's average saving %.1f, want 66.3 with the last use's", s)
	}

	// At random: whenever Wants says yes, the copied Use admits with the
	// evictions of a use that leaves the average as it was.
	r := rand.New(rand.NewPCG(5, 6))
	c, _ = New(1000, Options{})
	sizes := make([]int64, 40)
	for i := range sizes {
		sizes[i] = 1 + r.Int64N(400)
	}
	promised := 0
	for step := range 20000 {
		id := int(r.ExpFloat64()*6) % len(sizes)
		w := Weight{ID: id, Bytes: sizes[id], CopyUs: float64(sizes[id]) / 10}
		w.SavedUs = r.Float64() * w.CopyUs
		if !c.Wants(id, float64(step)) {
			if _, err := c.Use(w, float64(step), r.IntN(2) == 0); err != nil {
				t.Fatal(err)
			}
			continue
		}
		promised++
		d := clone(c)
		same := w
		same.SavedUs = c.entries[id].saved
		want, _ := d.Use(same, float64(step), false)
		got, _ := c.Use(w, float64(step), true)
		if !want.Admit || !got.Admit || !slices.Equal(got.Evict, want.Evict) {
			t.Fatalf("step %d: weight %d wanted (%+v), copied Use gave %+v", step, id, want, got)
		}
	}
	if promised < 50 {
		t.Errorf("Wants said yes %d times, too few to test", promised)
	}
}

// clone returns a copy of c that shares no state with it.
func clone(c *Cache) *Cache {
	d := *c
	d.entries = slices.Clone(c.entries)
	d.victims = nil
	return &d
}

// TestSavedPerRegime: a cache full of six small weights used once a step
// (70 bytes, copies of 15 µs), and one of 280 bytes used twice a step
// (copies of 48: less per byte, more per step), as a decoder's output
// projection, whose uses saved nothing for 100 steps of regime 0 (its op
// ran on another device). In regime 1 its op runs here and copies it,
// and it takes the small weights' place within 2 steps (here at its
// first); back in regime 0 they take theirs back within 2 (at the first).
// Weighed by all its uses (no regime named) it must take 20 or more: it
// took 65.
func TestSavedPerRegime(t *testing.T) {
	big := Weight{ID: 0, Bytes: 280, CopyUs: 48}
	small := func(i int) Weight { return Weight{ID: 1 + i, Bytes: 70, CopyUs: 15} }
	step := 0
	run := func(c *Cache, steps int, bigCopied bool, until func() bool) int {
		for n := 1; n <= steps; n++ {
			for i := range 6 {
				if _, err := c.Use(small(i), float64(step), true); err != nil {
					t.Fatal(err)
				}
			}
			b := big
			if !bigCopied {
				b.SavedUs = 1e-9 // nothing saved: the op ran elsewhere
			}
			for range 2 {
				if _, err := c.Use(b, float64(step)+0.5, bigCopied); err != nil {
					t.Fatal(err)
				}
			}
			step++
			if until() {
				return n
			}
		}
		return -1
	}
	for _, regimes := range []bool{true, false} {
		c, _ := New(420, Options{})
		step = 0
		if n := run(c, 100, false, func() bool { return c.Resident(0) }); n >= 0 {
			t.Fatalf("regimes %t: the weight saving nothing was taken in at step %d", regimes, n)
		}
		if regimes {
			if err := c.SetRegime(1); err != nil {
				t.Fatal(err)
			}
		}
		n := run(c, 100, true, func() bool { return c.Resident(0) })
		switch {
		case regimes && (n < 0 || n > 2):
			t.Fatalf("regime 1: the weight its op copies taken in at step %d, want ≤ 2", n)
		case !regimes && (n >= 0 && n < 20):
			t.Errorf("one regime: taken in at step %d, want ≥ 20 (the mechanism's reason)", n)
		}
		if !regimes {
			continue
		}
		if err := c.SetRegime(0); err != nil {
			t.Fatal(err)
		}
		if n := run(c, 100, false, func() bool { return !c.Resident(0) }); n < 0 || n > 2 {
			t.Errorf("back in regime 0: the small weights took their place back at step %d, want ≤ 2", n)
		}
	}
	c, _ := New(420, Options{})
	for _, r := range []int{-1, MaxRegimes} {
		if err := c.SetRegime(r); !errors.Is(err, ErrInvalid) {
			t.Errorf("SetRegime(%d) = %v, want ErrInvalid", r, err)
		}
	}
}
