package backends_test

import (
	"errors"
	"fmt"

	"github.com/adaptsched/adaptsched/backends"
	_ "github.com/adaptsched/adaptsched/backends/cpu"
	"github.com/adaptsched/adaptsched/kernels"
)

// A backend by name: inputs are allocated on it and written, the op runs,
// the result is read back. A GPU backend that cannot run here answers
// ErrUnavailable with the reason.
func ExampleOpen() {
	b, err := backends.Open("cpu1") // or "cpu", "sim:h100", "rocm"
	if errors.Is(err, backends.ErrUnavailable) {
		fmt.Println(err) // the libraries tried, the devices found
		return
	}
	if err != nil {
		panic(err)
	}
	defer b.Close()
	s := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{4}, {4}}}
	x, _ := b.Alloc(s.InBytes(0))
	y, _ := b.Alloc(s.InBytes(1))
	out, _ := b.Alloc(s.OutBytes())
	b.Write(x, kernels.AsBytes([]float32{1, 2, 3, 4}))
	b.Write(y, kernels.AsBytes([]float32{10, 20, 30, 40}))
	t, err := b.Run(s, []backends.Buffer{x, y}, out)
	if err != nil {
		panic(err)
	}
	res := make([]byte, s.OutBytes())
	b.Read(res, out)
	fmt.Println(kernels.AsF32(res), t.Clock, t.Duration > 0)
	// Output: [11 22 33 44] wall true
}
