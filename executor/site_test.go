package executor

import (
	"testing"

	"github.com/adaptsched/adaptsched/backends"
	_ "github.com/adaptsched/adaptsched/backends/cpu"
	"github.com/adaptsched/adaptsched/kernels"
)

// TestOpSite: an output tensor written twice in a row by one spec gets a
// handle on it (site.go), which a different spec drops; a spec that
// changes at every op (RoPE's position) never gets one; an invalid spec
// is never taken for the site's; and a synchronous op by handle
// allocates nothing.
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
	run(add, x, y)
	if o.site.h != nil || !o.site.ok {
		t.Fatalf("after one op: handle %v, spec kept %v; want none, kept", o.site.h, o.site.ok)
	}
	run(add, x, y)
	h := o.site.h
	if h == nil {
		t.Fatal("after the same spec twice: no handle")
	}
	if n := testing.AllocsPerRun(100, func() { run(add, x, y) }); n != 0 {
		t.Errorf("an op by its site's handle: %v allocations, want 0", n)
	}
	if o.site.h != h {
		t.Error("the handle changed while the spec stayed")
	}
	mul := kernels.Spec{Op: kernels.Mul, In: []kernels.Shape{{16}, {16}}}
	run(mul, x, y)
	if o.site.h != nil {
		t.Error("a different spec kept the old spec's handle")
	}
	rope := kernels.Spec{Op: kernels.RoPE, In: []kernels.Shape{{1, 2, 8}}}
	for pos := range 4 {
		rope.Params.Pos = pos
		run(rope, x)
		if o.site.h != nil {
			t.Fatalf("position %d: a handle for a spec that changes at every op", pos)
		}
	}
	bad := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{16}, {8}}}
	for range 2 {
		if _, err := e.Run(bad, []backends.Buffer{x, y}, out); err == nil {
			t.Fatal("an invalid spec ran")
		}
	}
	if o.site.h != nil {
		t.Error("an invalid spec got a handle")
	}
}
