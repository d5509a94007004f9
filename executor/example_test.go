package executor_test

import (
	"fmt"
	"go/parser"
	"go/token"
	"testing"

	"github.com/adaptsched/adaptsched/backends"
	_ "github.com/adaptsched/adaptsched/backends/all" // registers cpu, cpu1, rocm and sim
	"github.com/adaptsched/adaptsched/executor"
	"github.com/adaptsched/adaptsched/kernels"
)

// ExampleExecutor runs an op on an Executor over two CPU backends and a
// simulated GPU exactly as on one backend. The blank import of
// backends/all registers the backends that backends.Open names.
func ExampleExecutor() {
	var bes []backends.Backend
	for _, name := range []string{"cpu", "cpu1", "sim:h100"} {
		b, err := backends.Open(name)
		if err != nil {
			panic(err)
		}
		defer b.Close()
		bes = append(bes, b)
	}
	e, err := executor.New(executor.Config{Backends: bes, NoCalibration: true, Seed: 1})
	if err != nil {
		panic(err)
	}
	defer e.Close()

	var be backends.Backend = e // drop-in
	s := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{2, 2}, {2}}}
	x, _ := be.Alloc(s.InBytes(0))
	y, _ := be.Alloc(s.InBytes(1))
	out, _ := be.Alloc(s.OutBytes())
	be.Write(x, kernels.AsBytes([]float32{1, 2, 3, 4}))
	be.Write(y, kernels.AsBytes([]float32{10, 20}))
	if _, err := be.Run(s, []backends.Buffer{x, y}, out); err != nil {
		panic(err)
	}
	got := make([]float32, 4)
	be.Read(kernels.AsBytes(got), out)
	fmt.Println(got)
	// Output: [11 22 13 24]
}

// TestExampleSelfContained: the example registers the backends it opens
// itself, so that it runs when copied out of this package's tests.
func TestExampleSelfContained(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "example_test.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range f.Imports {
		if im.Path.Value == `"github.com/adaptsched/adaptsched/backends/all"` {
			return
		}
	}
	t.Error("example_test.go does not import backends/all: ExampleExecutor relies on another file's imports")
}
