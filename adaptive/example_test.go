package adaptive_test

import (
	"fmt"
	"time"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// ExampleScheduler_Select places a matmul, reports measured durations, and watches the
// bucket move to the backend that is really faster: the GPU's datasheet
// promises 13 µs, but on this machine it takes 400 µs against the CPU's
// 300.
func ExampleScheduler_Select() {
	cpu := backends.Described(backends.Info{Name: "cpu", Kind: backends.CPU, SharedMemory: true,
		Nominal: backends.Nominal{GFLOPS: 100, MemGBps: 50, DispatchUs: 1}})
	gpu := backends.Described(backends.Info{Name: "gpu", Kind: backends.GPU,
		Nominal: backends.Nominal{GFLOPS: 10000, MemGBps: 1000, DispatchUs: 10, LinkGBps: 25, LinkLatencyUs: 20}})
	s, err := adaptive.New(adaptive.Config{Backends: []backends.Backend{cpu, gpu}, Seed: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()

	spec := kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{64, 512}, {512, 512}}}
	measured := map[string]time.Duration{"cpu": 300 * time.Microsecond, "gpu": 400 * time.Microsecond}
	var res adaptive.Residency
	res.Add(adaptive.Host, spec.InBytes(0))
	res.Add(adaptive.Backend(1), spec.InBytes(1)) // the weights live on the GPU
	for i := range 200 {
		d, err := s.Select(spec, res)
		if err != nil {
			fmt.Println(err)
			return
		}
		if i == 0 || i == 199 {
			fmt.Println(s.BucketName(d.Bucket), d.Name, d.Reason)
		}
		s.Observe(d, backends.Timing{Duration: measured[d.Name], Clock: backends.WallClock})
	}
	// Output:
	// MatMul/f32/s50 gpu Prior
	// MatMul/f32/s50 cpu Exploit
}
