package adaptive

import (
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/learned"
)

// DefaultShapeHits is Config.ShapeHits's default: inference repeats its
// shapes, and one seen this often will be seen again (TestShapesLearnApart
// holds the per-shape target with it).
const DefaultShapeHits = 8

// shapeBucket returns the bucket a shape of bucket b (whose cache node is
// n) is decided in: its own once it has been selected Config.ShapeHits times
// (engine.newShape: its prior is b's, and b goes on learning from it),
// b until then. Learning per shape matters where the backend that wins
// differs between the shapes of one size class (TestShapesLearnApart).
func (s *Scheduler) shapeBucket(n *shapeNode, b *bucket, spec *kernels.Spec) *bucket {
	if c := n.child.Load(); c != nil {
		return c
	}
	var name string
	if hits := n.hits.Add(1); hits < int32(s.cfg.ShapeHits) {
		// Not yet, unless a store holds this shape's own posteriors: then
		// it learns on at once (asked at its first selection only).
		if hits > 1 || len(s.loaded) == 0 {
			return b
		}
		name = shapeName(b, spec)
		if !s.holds(name) {
			return b
		}
	}
	if name == "" {
		name = shapeName(b, spec)
	}
	c := s.e.newShape(b, name, spec.Work())
	for a := range s.n {
		if p, ok := s.loaded[learned.Key{Backend: s.names[a], Bucket: name}]; ok && validPosterior(p) {
			c.warm(a, p)
		}
	}
	if !n.child.CompareAndSwap(nil, c) {
		return n.child.Load()
	}
	s.regMu.Lock()
	s.shapes = append(s.shapes, c)
	if f := s.fold.Load(); f != nil { // under regMu: Fold attaches under it too
		f.addShape(c)
	}
	s.regMu.Unlock()
	return c
}

// holds reports whether the store loaded a posterior of bucket name.
func (s *Scheduler) holds(name string) bool {
	for a := range s.n {
		if _, ok := s.loaded[learned.Key{Backend: s.names[a], Bucket: name}]; ok {
			return true
		}
	}
	return false
}

// shapeName is the stable name of spec's own bucket in bucket b, the key
// its posteriors persist under: b's name, a space, and the spec.
func shapeName(b *bucket, spec *kernels.Spec) string { return b.name + " " + spec.String() }
