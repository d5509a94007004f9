package sim_test

import (
	"fmt"

	"github.com/adaptsched/adaptsched/sim"
)

// A simulated GPU as a backend, slowed down three times from its 1000th op.
func ExampleOpen() {
	dev, err := sim.Open("h100", sim.DefaultOptions().WithSeed(7).
		WithEvents(sim.Event{At: 1000, Kind: sim.Throttle, Factor: 3}))
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	fmt.Println(dev.Info().Name, dev.Info().Kind, dev.Info().Nominal.GFLOPS)
	// Output: sim:h100 gpu 67000
}
