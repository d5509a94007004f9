package main

import (
	"fmt"
	"io"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/sim"
)

// loadTable reads what -table names: a perf-table CSV (sim.LoadTable), a
// StarPU performance-model file (sim.LoadStarPU, told apart by its
// "# Performance Model Version" header) or a directory of them, such as
// $STARPU_HOME/.starpu/sampling/codelets/45 (sim.LoadStarPUDir), or "-"
// for stdin; a FIFO or a device is refused (sim.LoadTableFile). Figures
// (-figures) then go to their backends (sim.Table.SetFigures). The rows a
// StarPU reader leaves out are listed on stderr.
func loadTable(path string, figures []string, stdin io.Reader, stderr io.Writer) (*sim.Table, error) {
	var t *sim.Table
	var err error
	if path == "-" {
		t, err = sim.ReadTable(stdin, "stdin")
	} else {
		t, err = sim.LoadTableFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("replay: -table: %w", err)
	}
	if n := len(t.Backends()); n > adaptive.MaxBackends {
		return nil, fmt.Errorf("%w: %s: %d backends, the scheduler takes at most %d", errInput, t.Name(), n, adaptive.MaxBackends)
	}
	for _, f := range figures {
		if err := t.SetFigures(f); err != nil {
			return nil, fmt.Errorf("replay: -figures: %w", err)
		}
	}
	if d := t.Dropped(); len(d) > 0 {
		fmt.Fprintf(stderr, "replay: %s: left out %d footprint(s) (a table workload needs every row on every arm):\n", t.Name(), len(d))
		for _, m := range d {
			fmt.Fprintln(stderr, "  "+m)
		}
	}
	return t, nil
}
