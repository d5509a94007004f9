package cpu_test

import (
	"fmt"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/backends/cpu"
	"github.com/adaptsched/adaptsched/kernels"
)

// A CPU backend of two threads runs a 2×2 matmul; the Timing is wall
// time. backends.Open("cpu") gives one with every core, once this package
// is imported.
func ExampleNew() {
	b, err := cpu.New("cpu", cpu.DefaultOptions().WithThreads(2).WithLogger(nil))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	// [[1 2] [3 4]] · [[5 6] [7 8]]
	s := kernels.Spec{Op: kernels.MatMul, In: []kernels.Shape{{2, 2}, {2, 2}}}
	a, _ := b.Alloc(s.InBytes(0))
	w, _ := b.Alloc(s.InBytes(1))
	out, _ := b.Alloc(s.OutBytes())
	b.Write(a, kernels.AsBytes([]float32{1, 2, 3, 4}))
	b.Write(w, kernels.AsBytes([]float32{5, 6, 7, 8}))
	t, err := b.Run(s, []backends.Buffer{a, w}, out)
	if err != nil {
		fmt.Println(err)
		return
	}
	res := make([]byte, s.OutBytes())
	b.Read(res, out)
	fmt.Println(kernels.AsF32(res), t.Clock, b.Info().Threads, b.Info().Platform)
	// Output: [19 22 43 50] wall 2 host
}
