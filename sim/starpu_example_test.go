package sim_test

import (
	"fmt"
	"strings"

	"github.com/adaptsched/adaptsched/sim"
)

// StarPU's own models of a machine as a perf table: one arm per device and
// implementation, one row per footprint measured on every arm.
func ExampleLoadStarPUDir() {
	t, err := sim.LoadStarPUDir("testdata/starpu/45")
	if err != nil {
		panic(err)
	}
	fmt.Println(t.Len(), "rows on", strings.Join(t.Backends(), ", "))
	fmt.Println(len(t.Dropped()), "left out")
	// Output:
	// 20 rows on cpu0_impl0, cuda0_impl0, cuda1_impl0, cuda2_impl0
	// 1 left out
}

// A perf table as users have it: a byte-order mark, free-text shapes (keys,
// with no work invented), blank std and n, and hardware figures for a
// backend in a comment line.
func ExampleLoadTable() {
	csv := "\ufeff# backend gpu: kind=gpu gflops=10974 membw_gbps=480\n" +
		"op,shape,backend,mean_us,std_us,n\n" +
		"sgemm,\"M=1760,N=16,K=1760\",cpu,77.4,,\n" +
		"sgemm,\"M=1760,N=16,K=1760\",gpu,50,,\n"
	t, err := sim.LoadTable(strings.NewReader(csv), "perf.csv")
	if err != nil {
		panic(err)
	}
	arms := t.Arms()
	fmt.Println(t.Len(), "row;", arms[1].Profile.Name, arms[1].Profile.Nominal.GFLOPS, "GFLOP/s")
	// Output: 1 row; gpu 10974 GFLOP/s
}
