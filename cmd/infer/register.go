package main

import "github.com/adaptsched/adaptsched/sim"

// The command offers simulated devices (-backends sim:<profile>) beside
// the real ones that backends/all registers.
func init() { sim.Register() }
