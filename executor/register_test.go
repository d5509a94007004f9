package executor_test

import "github.com/adaptsched/adaptsched/sim"

// The tests open simulated GPUs by name (backends.Open("sim:h100")).
func init() { sim.Register() }
