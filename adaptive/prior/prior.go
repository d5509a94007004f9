// Package prior is the hierarchy of learned corrections behind the
// scheduler's self-correcting priors (DESIGN.md § Priors). Buckets
// publish, per arm, ρ = ln(measured / model); the hierarchy keeps the
// published sums at four levels (an op family near a bucket's size, the
// family at every size, the op class, every bucket) and estimates from
// them the ratio an arm should have in a bucket, each level shrunk toward
// the one above it, and how far the ratio varies between buckets.
//
// It takes what buckets published, never a bucket: the scheduler calls
// it under a lock of its own (adaptive's engine), with each bucket's
// publications as a slice.
//
// # Usage
//
//	var h prior.Hierarchy
//	fam := &prior.Family{Class: kernels.Matrix}
//	h.Publish(fam, sizeClass, pubs, arm, old, now) // a bucket's milestone
//	v := fam.View(sizeClass, pubs)                 // what the family says, the bucket left out
//	rho := h.ArmRho(arm, h.Class(fam.Class), &v)
package prior

import (
	"math"

	"github.com/adaptsched/adaptsched/kernels"
)

// MaxArms bounds the arms of a bucket (adaptive.MaxBackends).
const MaxArms = 8

const (
	// CorrectionMax caps a learned |ln(actual/predicted)|: a factor of
	// about 1100.
	CorrectionMax = 7.0
	// shrinkWeight is the pseudo-weight, in buckets, of a level's parent
	// in the hierarchy.
	shrinkWeight = 1.0
	// rhoVar is the variance across buckets, in ln², believed of a
	// learned ratio until buckets measure it: a model can be off by 50×
	// (e^3.9) for hardware it does not know, two standard deviations.
	rhoVar = 4.0
)

// Published is what a bucket has told the hierarchy of one arm: ρ =
// ln(mean measured / model), whether it has said anything, and At, how
// many publications its family had before it (Publish stamps it), which
// tells whether a snapshot of the family holds it (Family.ViewInto). At
// is taken modulo 2^32, in the padding beside OK: a bucket then holds no
// more bytes.
type Published struct {
	Rho float64
	At  uint32
	OK  bool
}

// Sums are the corrections of one level: per arm Σρ, Σρ² and count, per
// ordered pair Σ(ρ_a − ρ_r), its squares and count. Rule: an arm's or a
// pair's three sums sit together, in one cache line (Sum), so that a
// publication writes three lines of a level rather than nine. Reason:
// every bucket's publications write its op class's and every bucket's
// sums, which goroutines publishing on two cores pull from each other's
// caches (adaptive's BenchmarkSelectObserve, handle/2backends/parallel).
type Sums struct {
	Arm  [MaxArms]Sum
	Pair [MaxArms][MaxArms]Sum
}

// Sum is one arm's or pair's sums at a level: Σx, Σx² and the count,
// padded to 32 bytes, so that it lies in one cache line wherever the
// Sums start on a 32-byte boundary (adaptive's TestEngineLayout).
type Sum struct {
	X, Sq, N float64
	_        float64
}

// add folds a change of a bucket's arm a from old to now into l: the
// arm's own sums, and each pair with another arm the bucket has
// published (pubs).
func (l *Sums) add(pubs []Published, a int, old, now Published) {
	s := &l.Arm[a]
	if old.OK {
		s.X -= old.Rho
		s.Sq -= old.Rho * old.Rho
		s.N--
	}
	s.X += now.Rho
	s.Sq += now.Rho * now.Rho
	s.N++
	for r, pr := range pubs {
		if r == a || !pr.OK {
			continue
		}
		ar, ra := &l.Pair[a][r], &l.Pair[r][a]
		if old.OK {
			d := old.Rho - pr.Rho
			ar.X -= d
			ra.X += d
			ar.Sq -= d * d
			ra.Sq -= d * d
			ar.N--
			ra.N--
		}
		d := now.Rho - pr.Rho
		ar.X += d
		ra.X -= d
		ar.Sq += d * d
		ra.Sq += d * d
		ar.N++
		ra.N++
	}
}

// Hierarchy holds the levels above the families: one per op class, and
// all. It is not safe for concurrent use: its user locks it.
type Hierarchy struct {
	class [3]Sums
	All   Sums
}

// Class returns the sums of op class c.
func (h *Hierarchy) Class(c kernels.Class) *Sums { return &h.class[c%3] }

// Family is one op family (an op and dtype at every size): what its
// buckets published, per size class, and its op class.
type Family struct {
	Class kernels.Class
	sums  []classSums
	// slot[c] is 1 + the index in sums of size class c's, 0 for none:
	// sumsOf reads one byte, not each class's 2.3 KB entry in turn (6%
	// of Select+Observe in the profile of adaptive's
	// BenchmarkSelectObserve, handle/2backends/serial, where a family has
	// tens of classes).
	slot [slotClasses]uint8
	// pubs counts the publications into the family (Publish); snaps are
	// its snapshots, one per size class that asked (ViewInto).
	pubs  uint64
	snaps []snapshot
}

// snapshot is a family's view from one size class with nothing left out,
// as of the family's at-th publication.
type snapshot struct {
	class int
	at    uint64
	v     View
}

// classSums are a family's sums of one size class.
type classSums struct {
	Sums
	class int
	_     [24]byte // to a whole number of Sum (TestSumLayout)
}

// slotClasses bounds the size classes a Family finds by slot: those of
// an int64 amount of work (kernels.SizeClassOf: at most 126). Others are
// found by a scan.
const slotClasses = 128

// sumsOf returns the family's sums of size class c, made on first use.
func (f *Family) sumsOf(c int) *Sums {
	slotted := c >= 0 && c < slotClasses
	if slotted && f.slot[c] != 0 {
		return &f.sums[f.slot[c]-1].Sums
	}
	for i := range f.sums { // a class new, or without a slot
		if f.sums[i].class == c {
			return &f.sums[i].Sums
		}
	}
	f.sums = append(f.sums, classSums{class: c})
	if slotted && len(f.sums) <= math.MaxUint8 {
		f.slot[c] = uint8(len(f.sums))
	}
	return &f.sums[len(f.sums)-1].Sums
}

// Publish folds a change of arm a, of a bucket of family f and size
// class, from old to now into every level; pubs are the bucket's other
// publications (pubs[a] is not read). It returns now stamped with the
// family's count of publications before it (Published.At), which the
// bucket keeps.
func (h *Hierarchy) Publish(f *Family, class int, pubs []Published, a int, old, now Published) Published {
	h.class[f.Class%3].add(pubs, a, old, now)
	h.All.add(pubs, a, old, now)
	f.sumsOf(class).add(pubs, a, old, now)
	now.At = uint32(f.pubs)
	f.pubs++
	return now
}

// View is what a bucket's family has published, at two levels: Near,
// weighted by size distance to the bucket (2^(−Δclass/2)), and Op, every
// size of the op at weight 1. Each holds per arm Σwρ, Σwρ² and Σw, per
// pair Σw(ρ_a − ρ_r), its square and Σw, the bucket's own publications
// left out.
type View struct{ Near, Op ViewLevel }

// ViewLevel is one level of a View.
type ViewLevel struct {
	Arm, ArmSq, ArmW    [MaxArms]float64
	Pair, PairSq, PairW [MaxArms][MaxArms]float64
}

// add adds w times l's sums to v.
func (v *ViewLevel) add(n int, w float64, l *Sums) {
	for a := range n {
		v.Arm[a] += w * l.Arm[a].X
		v.ArmSq[a] += w * l.Arm[a].Sq
		v.ArmW[a] += w * l.Arm[a].N
		for r := range n {
			p := &l.Pair[a][r]
			v.Pair[a][r] += w * p.X
			v.PairSq[a][r] += w * p.Sq
			v.PairW[a][r] += w * p.N
		}
	}
}

// drop takes a bucket's own publications out of v, at weight 1 (its own
// size class).
func (v *ViewLevel) drop(pubs []Published) {
	for a, pa := range pubs {
		if !pa.OK {
			continue
		}
		v.Arm[a] -= pa.Rho
		v.ArmSq[a] -= pa.Rho * pa.Rho
		v.ArmW[a]--
		for r, pr := range pubs {
			if r != a && pr.OK {
				d := pa.Rho - pr.Rho
				v.Pair[a][r] -= d
				v.PairSq[a][r] -= d * d
				v.PairW[a][r]--
			}
		}
	}
}

// View returns the family's view from a bucket of size class whose own
// publications are pubs (n arms), from its sums as they are.
func (f *Family) View(class int, pubs []Published) View {
	var v View
	f.sumView(class, len(pubs), &v)
	v.Near.drop(pubs)
	v.Op.drop(pubs)
	return v
}

// sumView adds to v (zero) the family's view from size class, nothing
// left out, over n arms: one pass over its size classes.
func (f *Family) sumView(class, n int, v *View) {
	for i := range f.sums {
		cs := &f.sums[i]
		v.Near.add(n, NeighbourWeight(class-cs.class), &cs.Sums)
		v.Op.add(n, 1, &cs.Sums)
	}
}

// staleShare bounds a snapshot's age: it is taken anew once the family
// has had more than 1/staleShare of its publications since (ViewInto).
// 16 moved thompson's regret on the DeepBench table (replay -ops 100000,
// seed 2) from 0.994% to 1.026%, past the README's 1% target; at 256 the
// tables' regret is the exact view's to 0.002 point, and the 1M case of
// BenchmarkSelectObserve costs the same.
const staleShare = 256

// ViewInto writes into v (arms below n; the rest is not written) the
// family's view from a bucket of size class whose own publications are
// pubs, read from the family's snapshot of that class rather than summed
// over its size classes. Rule: the snapshot is taken anew once the family
// has had more than 1/staleShare of its publications since, so it is
// exact until the family has had staleShare of them, and the bucket's
// publications that it holds (Published.At before it) are left out,
// those after it are not in it. Reason: summing the view at every young
// bucket's prior refresh was most of a decision over a million young
// buckets (adaptive's BenchmarkSelectObserve, 1M case); a snapshot
// taken once per 1/staleShare growth of the family costs next to
// nothing per decision.
// What a bucket published before the snapshot and replaced after it
// stays in the view: one bucket's ratio among at least staleShare.
func (f *Family) ViewInto(class int, pubs []Published, v *View) {
	sn := f.snapshotOf(class, len(pubs))
	n := len(pubs)
	v.Near.copyArms(&sn.v.Near, n)
	v.Op.copyArms(&sn.v.Op, n)
	var held [MaxArms]Published // pubs the snapshot holds
	for a, p := range pubs {
		if p.OK && holds(sn.at, p.At) {
			held[a] = p
		}
	}
	v.Near.drop(held[:n])
	v.Op.drop(held[:n])
}

// copyArms copies src's sums of arms below n into v, element by
// element: copy's call per row was a sixth of ViewInto with 2 arms.
func (v *ViewLevel) copyArms(src *ViewLevel, n int) {
	for a := range n {
		v.Arm[a], v.ArmSq[a], v.ArmW[a] = src.Arm[a], src.ArmSq[a], src.ArmW[a]
		for r := range n {
			v.Pair[a][r], v.PairSq[a][r], v.PairW[a][r] = src.Pair[a][r], src.PairSq[a][r], src.PairW[a][r]
		}
	}
}

// holds reports whether a snapshot as of the family's at-th publication
// holds a publication stamped stamp: one made before it, within 2^31
// publications (stamps are taken modulo 2^32).
func holds(at uint64, stamp uint32) bool {
	d := uint32(at) - stamp
	return d >= 1 && d < 1<<31
}

// snapshotOf returns the family's snapshot of size class, over n arms,
// taken anew when there is none or it is stale (ViewInto).
func (f *Family) snapshotOf(class, n int) *snapshot {
	var sn *snapshot
	for i := range f.snaps {
		if f.snaps[i].class == class {
			sn = &f.snaps[i]
			break
		}
	}
	if sn == nil {
		f.snaps = append(f.snaps, snapshot{class: class, at: math.MaxUint64})
		sn = &f.snaps[len(f.snaps)-1]
	}
	if sn.at == math.MaxUint64 || f.pubs-sn.at > sn.at/staleShare {
		sn.v = View{}
		f.sumView(class, n, &sn.v)
		sn.at = f.pubs
	}
	return sn
}

// NeighbourWeight is the weight, in a bucket's View, of a bucket dc size
// classes away: half per octave. The common distances come from a table
// of the same values: a young bucket's prior refresh takes one per size
// class of its family, and math.Exp2 was a third of a refresh
// (BenchmarkSelectObserve's 1M case, whose buckets are all young).
func NeighbourWeight(dc int) float64 {
	if dc < 0 {
		dc = -dc
	}
	if dc < len(neighbourWeights) {
		return neighbourWeights[dc]
	}
	return math.Exp2(-float64(dc) / 2)
}

// neighbourWeights[dc] is math.Exp2(−dc/2).
var neighbourWeights = func() (w [128]float64) {
	for dc := range w {
		w[dc] = math.Exp2(-float64(dc) / 2)
	}
	return w
}()

// shrink blends a level's sum s over weight w with its parent's estimate.
func shrink(s, w, parent float64) float64 { return (s + shrinkWeight*parent) / (w + shrinkWeight) }

// Clamp bounds a ratio to ±CorrectionMax. The builtins, as math.Max and
// math.Min (NaN passes through), are calls on amd64, a tenth of a young
// bucket's prior refresh (adaptive's BenchmarkSelectObserve, 1M case).
func Clamp(x float64) float64 { return max(-CorrectionMax, min(CorrectionMax, x)) }

// ArmRho is arm a's ratio from the family's buckets near the bucket's
// size, shrunk toward the family's at every size, its op class's (cl),
// every bucket's, and 0, the model's.
func (h *Hierarchy) ArmRho(a int, cl *Sums, v *View) float64 {
	all := &h.All
	g := shrink(all.Arm[a].X, all.Arm[a].N, 0)
	g = shrink(cl.Arm[a].X, cl.Arm[a].N, g)
	g = shrink(v.Op.Arm[a], v.Op.ArmW[a], g)
	return shrink(v.Near.Arm[a], v.Near.ArmW[a], g)
}

// OwnRho returns arm a's own ratio for a bucket: ArmRho, or what its
// parent published of a when the bucket is a shape's (up, the parent's
// publications; nil for a bucket).
func (h *Hierarchy) OwnRho(a int, up []Published, cl *Sums, v *View) float64 {
	own := h.ArmRho(a, cl, v)
	if up != nil && up[a].OK {
		own = up[a].Rho
	}
	return own
}

// PairRho returns the learned ratio ρ_a − ρ_r, clamped: every bucket's,
// shrunk toward the difference of the two arms' own ratios (own is a's),
// then the op class's, the family's at every size and near the bucket's,
// and the parent's (up, when the bucket is a shape's).
func (h *Hierarchy) PairRho(a, r int, own float64, up []Published, cl *Sums, v *View) float64 {
	all := &h.All
	d := shrink(all.Pair[a][r].X, all.Pair[a][r].N, own-h.ArmRho(r, cl, v))
	d = shrink(cl.Pair[a][r].X, cl.Pair[a][r].N, d)
	d = shrink(v.Op.Pair[a][r], v.Op.PairW[a][r], d)
	d = shrink(v.Near.Pair[a][r], v.Near.PairW[a][r], d)
	if up != nil && up[a].OK && up[r].OK {
		d = shrink(up[a].Rho-up[r].Rho, 1, d)
	}
	return Clamp(d)
}

// level is one level's sums of a ratio: Σx, Σx² and their weight.
type level struct{ sum, sq, w float64 }

// level returns s as a level.
func (s *Sum) level() level { return level{s.X, s.Sq, s.N} }

// spread returns the variance across buckets of a ratio, from the first
// of levels (innermost first) with at least two buckets' weight, shrunk
// toward rhoVar by one pseudo-bucket; rhoVar when none has. Estimates
// are weighted by 1/spread (Cross): a ratio that differs from bucket to
// bucket says little about one more bucket.
func spread(levels ...level) float64 {
	for _, l := range levels {
		if l.w >= 2 {
			ss := max(l.sq-l.sum*l.sum/l.w, 0)
			return (ss + rhoVar) / (l.w + 1)
		}
	}
	return rhoVar
}

// ArmSpread is spread of arm a's own ratio.
func (h *Hierarchy) ArmSpread(a int, cl *Sums, v *View) float64 {
	all := &h.All
	return spread(
		level{v.Near.Arm[a], v.Near.ArmSq[a], v.Near.ArmW[a]},
		level{v.Op.Arm[a], v.Op.ArmSq[a], v.Op.ArmW[a]},
		cl.Arm[a].level(), all.Arm[a].level())
}

// PairSpread is spread of the learned ratio between arms a and r: from
// the family's buckets near the bucket's size, the family's at every
// size, its op class's, all.
func (h *Hierarchy) PairSpread(a, r int, cl *Sums, v *View) float64 {
	all := &h.All
	return spread(
		level{v.Near.Pair[a][r], v.Near.PairSq[a][r], v.Near.PairW[a][r]},
		level{v.Op.Pair[a][r], v.Op.PairSq[a][r], v.Op.PairW[a][r]},
		cl.Pair[a][r].level(), all.Pair[a][r].level())
}
