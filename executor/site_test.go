package executor

import (
	"testing"

	"github.com/adaptsched/adaptsched/backends"
	_ "github.com/adaptsched/adaptsched/backends/cpu"
	"github.com/adaptsched/adaptsched/kernels"
)

// TestOpSite: an output tensor written twice in a row by one spec
// publishes it as its site's known spec, with a handle on it (site.go);
// a different spec written once leaves it known, and written twice in a
// row takes its place; two specs written in turn do not swap, nor
// allocate; a spec that changes at every op (RoPE's position)
// never becomes known; an invalid spec never does; and a synchronous op
// of the known spec allocates nothing.
func TestOpSite(t *testing.T) {
	be, err := backends.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	e, err := New(Config{Backends: []backends.Backend{be}, NoCalibration: true, Synchronous: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	buf := func() backends.Buffer {
		b, _ := e.Alloc(64)
		e.Write(b, make([]byte, 64))
		return b
	}
	x, y, out := buf(), buf(), buf()
	o := out.(*Tensor)
	add := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{16}, {16}}}
	run := func(s kernels.Spec, in ...backends.Buffer) {
		t.Helper()
		if _, err := e.Run(s, in, out); err != nil {
			t.Fatal(err)
		}
	}
	knows := func(s kernels.Spec) bool {
		k := o.site.known.Load()
		return k != nil && k.h != nil && k.key.holds(&s)
	}
	run(add, x, y)
	if o.site.known.Load() != nil || !o.site.ok {
		t.Fatalf("after one op: known %v, spec kept %v; want none, kept", o.site.known.Load(), o.site.ok)
	}
	run(add, x, y)
	k := o.site.known.Load()
	if !knows(add) {
		t.Fatal("after the same spec twice: not known, or no handle")
	}
	if n := testing.AllocsPerRun(100, func() { run(add, x, y) }); n != 0 {
		t.Errorf("an op of its site's known spec: %v allocations, want 0", n)
	}
	if o.site.known.Load() != k {
		t.Error("the known spec changed while the spec stayed")
	}
	mul := kernels.Spec{Op: kernels.Mul, In: []kernels.Shape{{16}, {16}}}
	run(mul, x, y)
	if o.site.known.Load() != k {
		t.Error("a different spec written once replaced the known one")
	}
	run(mul, x, y)
	if !knows(mul) {
		t.Error("a different spec written twice in a row did not become known")
	}
	k = o.site.known.Load()
	if n := testing.AllocsPerRun(100, func() { run(add, x, y); run(mul, x, y) }); n != 0 {
		t.Errorf("two specs in turn: %v allocations per pair, want 0", n)
	}
	if o.site.known.Load() != k {
		t.Error("two specs in turn swapped the known one")
	}
	rope := kernels.Spec{Op: kernels.RoPE, In: []kernels.Shape{{1, 2, 8}}}
	for pos := range 4 {
		rope.Params.Pos = pos
		run(rope, x)
		if o.site.known.Load() != k {
			t.Fatalf("position %d: a spec that changes at every op became known", pos)
		}
	}
	bad := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{16}, {8}}}
	for range 2 {
		if _, err := e.Run(bad, []backends.Buffer{x, y}, out); err == nil {
			t.Fatal("an invalid spec ran")
		}
	}
	if o.site.known.Load() != k {
		t.Error("an invalid spec became known")
	}
}
