package peer_test

import (
	"fmt"
	"os"

	"github.com/adaptsched/adaptsched/bench/peer"
)

// The steps cmd/peer runs in each round. It needs OpenBLAS's runtime
// library to run and, for StarPU's side, the program `make peer` builds;
// it has no Output, so tests compile it without running it.
func Example() {
	st := peer.Generate(peer.GenOptions{Seed: 24}) // or peer.Read(f, "stream.txt")
	delays, err := peer.Calibrate(st)              // the drift's busy-wait per shape
	if err != nil {
		fmt.Println(err)
		return
	}
	o, err := peer.MeasureOracle(st, delays) // both implementations on every task
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := peer.RunAdaptsched(st, peer.RunOptions{Delays: delays})
	if err != nil {
		fmt.Println(err)
		return
	}
	half1, half2 := o.Price(r) // r's choices at the oracle's medians
	fmt.Println(r.Total, half1+half2)

	f, err := os.Create("delays.txt")
	if err != nil {
		fmt.Println(err)
		return
	}
	peer.WriteDelays(f, delays) // for the StarPU program
	f.Close()
	s, emptyNs, err := peer.RunStarPU("bin/peer_starpu", "stream.txt", "delays.txt", os.TempDir(), 20000)
	fmt.Println(s.Total, emptyNs, err)
	ns, err := peer.Overhead(20000) // adaptsched's per-task overhead
	fmt.Println(ns, err)
}
