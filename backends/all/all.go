package all

// One import per real backend package; each registers itself in init.
// The simulator registers where it is asked for (sim.Register).
import (
	_ "github.com/adaptsched/adaptsched/backends/cpu"
	_ "github.com/adaptsched/adaptsched/backends/rocm"
)
