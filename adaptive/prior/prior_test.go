package prior

import (
	"math"
	"testing"
	"unsafe"

	"github.com/adaptsched/adaptsched/kernels"
)

// TestPublishReplaces: a bucket's arm that publishes again replaces its
// earlier ratio in every level (sums, squares, counts, and the pairs
// with the bucket's other arms), as if only the last had been published.
func TestPublishReplaces(t *testing.T) {
	var h, want Hierarchy
	f, g := &Family{Class: kernels.Matrix}, &Family{Class: kernels.Matrix}
	pubs := make([]Published, 2)
	pubs[1] = Published{Rho: -0.5, OK: true}
	h.Publish(f, 40, pubs, 1, Published{}, pubs[1])
	want.Publish(g, 40, []Published{{}, pubs[1]}, 1, Published{}, pubs[1])
	first := Published{Rho: 1.25, OK: true}
	pubs[0] = first
	h.Publish(f, 40, pubs, 0, Published{}, first)
	last := Published{Rho: 0.75, OK: true}
	pubs[0] = last
	h.Publish(f, 40, pubs, 0, first, last)
	want.Publish(g, 40, []Published{last, pubs[1]}, 0, Published{}, last)
	if h.All != want.All || *h.Class(kernels.Matrix) != *want.Class(kernels.Matrix) || *f.sumsOf(40) != *g.sumsOf(40) {
		t.Fatalf("after a second publication: %+v, want %+v", h.All, want.All)
	}
	if d := h.All.Pair[0][1].X; math.Abs(d-1.25) > 1e-12 || h.All.Pair[0][1].N != 1 || h.All.Pair[1][0].X != -d {
		t.Errorf("pair sums %v (n %v), want ρ0 − ρ1 = 1.25 once, antisymmetric", d, h.All.Pair[0][1].N)
	}
}

// TestView: a family's view weights other size classes by half per
// octave (2^(−Δclass/2), classes half an octave apart) and leaves the bucket's own publications out; the
// estimates shrink each level toward the next by one pseudo-bucket.
func TestView(t *testing.T) {
	var h Hierarchy
	f := &Family{Class: kernels.Matrix}
	other := []Published{{Rho: 2, OK: true}}
	h.Publish(f, 42, other, 0, Published{}, other[0]) // two half-octave classes away: weight 1/2
	mine := []Published{{Rho: 1, OK: true}}
	h.Publish(f, 40, mine, 0, Published{}, mine[0])
	v := f.View(40, mine)
	if v.Near.ArmW[0] != 0.5 || v.Near.Arm[0] != 1 || v.Op.ArmW[0] != 1 || v.Op.Arm[0] != 2 {
		t.Fatalf("view %+v: want the other bucket alone, near at weight 1/2", v)
	}
	// all: (1+2 + 0)/(2+1) = 1; class: (3 + 1)/(2+1) = 4/3; op: (2 + 4/3)/2 = 5/3;
	// near: (1 + 5/3)/(1.5) = 16/9.
	if got := h.ArmRho(0, h.Class(kernels.Matrix), &v); math.Abs(got-16.0/9) > 1e-12 {
		t.Errorf("ArmRho = %v, want 16/9", got)
	}
	if Clamp(100) != CorrectionMax || Clamp(-100) != -CorrectionMax || Clamp(0.5) != 0.5 {
		t.Error("Clamp does not bound to ±CorrectionMax")
	}
	var empty View
	if got := h.PairSpread(0, 1, h.Class(kernels.Matrix), &empty); got != rhoVar {
		t.Errorf("spread with no pair measured: %v, want rhoVar", got)
	}
}

// TestNeighbourWeight: the table gives math.Exp2(−|dc|/2) exactly, in
// and beyond its range (DESIGN.md § Priors: half per octave).
func TestNeighbourWeight(t *testing.T) {
	for dc := -300; dc <= 300; dc++ {
		a := dc
		if a < 0 {
			a = -a
		}
		if got, want := NeighbourWeight(dc), math.Exp2(-float64(a)/2); got != want {
			t.Errorf("NeighbourWeight(%d) = %v, want %v", dc, got, want)
		}
	}
}

// TestViewIntoSnapshot: a family's snapshot view equals the exact View
// while the family has had fewer than staleShare publications; past
// that it may lag by at most 1/staleShare of them, leaving out only
// what it holds of the bucket (a publication after it is not in it:
// its weight never goes below zero), and it is taken anew beyond that.
func TestViewIntoSnapshot(t *testing.T) {
	var h Hierarchy
	f := &Family{Class: kernels.Matrix}
	other := make([]Published, 2)
	for i := range staleShare - 1 { // other buckets, exact views meanwhile
		pubs := []Published{{Rho: 0.1 * float64(i), OK: true}, {}}
		pubs[0] = h.Publish(f, 40+i%3, pubs, 0, Published{}, pubs[0])
		var got View
		f.ViewInto(40, other, &got)
		if want := f.View(40, other); got.Near.Arm[0] != want.Near.Arm[0] || got.Op.ArmW[0] != want.Op.ArmW[0] {
			t.Fatalf("after %d publications: snapshot %+v, want the exact view %+v", i+1, got.Op, want.Op)
		}
	}
	mine := []Published{{Rho: 1, OK: true}, {}}
	mine[0] = h.Publish(f, 40, mine, 0, Published{}, mine[0]) // the staleShare-th
	var v View
	f.ViewInto(40, mine, &v) // snapshot anew: it holds mine, which is left out
	if want := f.View(40, mine); v.Op.Arm[0] != want.Op.Arm[0] || v.Op.ArmW[0] != staleShare-1 {
		t.Fatalf("snapshot with the bucket's own publication: Σρ %v, Σw %v; want %v, %d", v.Op.Arm[0], v.Op.ArmW[0], want.Op.Arm[0], staleShare-1)
	}
	// A second arm's first publication after the snapshot (within
	// 1/staleShare): not in the snapshot, so not taken out of it.
	old := mine[1]
	mine[1] = Published{Rho: -2, OK: true}
	mine[1] = h.Publish(f, 40, mine, 1, old, mine[1])
	f.ViewInto(40, mine, &v)
	if v.Op.ArmW[1] != 0 || v.Op.PairW[0][1] != 0 || v.Op.ArmW[0] != staleShare-1 {
		t.Fatalf("stale snapshot: arm 1 weight %v, pair weight %v, arm 0 weight %v; want 0, 0, %d", v.Op.ArmW[1], v.Op.PairW[0][1], v.Op.ArmW[0], staleShare-1)
	}
	// One more publication elsewhere makes it stale: taken anew, exact.
	pubs := []Published{{Rho: 0.5, OK: true}, {}}
	h.Publish(f, 41, pubs, 0, Published{}, pubs[0])
	f.ViewInto(40, mine, &v)
	if want := f.View(40, mine); v.Near != want.Near || v.Op != want.Op {
		t.Fatalf("after the family grew by more than 1/%d: snapshot not taken anew", staleShare)
	}
}

// TestSumLayout: a Sum is 32 bytes, and a family's sums of a size class
// start on a 32-byte boundary of their slice (at offset 0 of a whole
// number of Sums), so that each Sum lies in one cache line.
func TestSumLayout(t *testing.T) {
	var c classSums
	if size := unsafe.Sizeof(Sum{}); size != 32 {
		t.Errorf("a Sum is %d bytes, not 32", size)
	}
	if off, size := unsafe.Offsetof(c.Sums), unsafe.Sizeof(c); off != 0 || size%32 != 0 {
		t.Errorf("classSums: Sums at offset %d, %d bytes; want 0 and a multiple of 32", off, size)
	}
}

// TestSumsOfClasses: a family finds each size class's sums, made once,
// for classes in and out of the slots' range and past 255 of them.
func TestSumsOfClasses(t *testing.T) {
	var f Family
	classes := make([]int, 0, 400)
	for c := -100; c < 300; c++ {
		classes = append(classes, c)
	}
	for _, c := range classes {
		f.sumsOf(c).Arm[0].X = float64(c)
	}
	for _, c := range classes {
		if got := f.sumsOf(c).Arm[0].X; got != float64(c) {
			t.Fatalf("class %d: sums of class %v", c, got)
		}
	}
	if len(f.sums) != len(classes) {
		t.Errorf("%d sums for %d classes", len(f.sums), len(classes))
	}
}
