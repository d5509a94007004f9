package all

// One import per backend package; each registers itself in init.
import (
	_ "github.com/adaptsched/adaptsched/backends/cpu"
	_ "github.com/adaptsched/adaptsched/backends/rocm"
	_ "github.com/adaptsched/adaptsched/sim"
)
