package main

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/adaptsched/adaptsched/sim"
)

// loadTable reads what -table names: a perf-table CSV (sim.LoadTable), a
// StarPU performance-model file (sim.LoadStarPU, told apart by its
// "# Performance Model Version" header) or a directory of them, such as
// $STARPU_HOME/.starpu/sampling/codelets/45 (sim.LoadStarPUDir); figures
// (-figures) then go to their backends (sim.Table.SetFigures). The rows a
// StarPU reader leaves out are listed on stderr.
func loadTable(path string, figures []string, stderr io.Writer) (*sim.Table, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("replay: -table: %w", err)
	}
	var t *sim.Table
	if st.IsDir() {
		t, err = sim.LoadStarPUDir(path)
	} else {
		var f *os.File
		if f, err = os.Open(path); err != nil {
			return nil, fmt.Errorf("replay: -table: %w", err)
		}
		br := bufio.NewReader(f)
		if head, _ := br.Peek(4096); sim.IsStarPU(head) {
			t, err = sim.LoadStarPU(br, path)
		} else {
			t, err = sim.LoadTable(br, path)
		}
		f.Close()
	}
	if err != nil {
		return nil, err
	}
	for _, f := range figures {
		if err := t.SetFigures(f); err != nil {
			return nil, fmt.Errorf("replay: -figures: %w", err)
		}
	}
	if d := t.Dropped(); len(d) > 0 {
		fmt.Fprintf(stderr, "replay: %s: left out %d footprint(s) (a table workload needs every row on every arm):\n", path, len(d))
		for _, m := range d {
			fmt.Fprintln(stderr, "  "+m)
		}
	}
	return t, nil
}
