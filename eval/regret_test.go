package eval

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/adaptsched/adaptsched/sim"
)

// loadTestTable reads a perf table of ../sim/testdata: a CSV, or a
// directory of StarPU performance models.
func loadTestTable(t *testing.T, path string) *sim.Table {
	t.Helper()
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		tab, err := sim.LoadStarPUDir(path)
		if err != nil {
			t.Fatal(err)
		}
		return tab
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := sim.LoadTable(f, path)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// TestFixedNeverBeatsOracle: every policy is charged the same draws and
// the oracle is the best per-bucket assignment in hindsight on them, so on
// every real table and seed, everything on one arm costs at least the
// oracle (regret ≥ 0, exactly, not within noise), and the oracle policy
// costs exactly the oracle.
func TestFixedNeverBeatsOracle(t *testing.T) {
	tables, _ := filepath.Glob("../sim/testdata/tables/*.csv")
	tables = append(tables, "../sim/testdata/starpu/45")
	if len(tables) < 3 {
		t.Fatalf("tables %v: want the two CSVs and the StarPU directory", tables)
	}
	for _, path := range tables {
		tab := loadTestTable(t, path)
		for seed := uint64(1); seed <= 3; seed++ {
			w, err := tab.Workload(50_000, 1, seed)
			if err != nil {
				t.Fatal(err)
			}
			env, err := NewEnv(w, tab.Arms(), EnvOptions{Seed: seed})
			if err != nil {
				t.Fatal(err)
			}
			arms := env.Arms()
			for a := range arms {
				r, err := env.Run(NewFixed(arms, a), seed)
				if err != nil {
					t.Fatal(err)
				}
				if r.RegretPct < 0 || r.TotalUs < r.OracleUs {
					t.Errorf("%s seed %d: everything on %s costs %.3f ms, below the oracle's %.3f ms (regret %.4f%%)",
						filepath.Base(path), seed, arms[a].Name, r.TotalUs/1e3, r.OracleUs/1e3, r.RegretPct)
				}
			}
			r, err := env.Run(NewOracle(arms, env.Truth), seed)
			if err != nil {
				t.Fatal(err)
			}
			if r.TotalUs != r.OracleUs || r.OffOraclePct != 0 {
				t.Errorf("%s seed %d: the oracle policy costs %v µs, %.3f%% off the oracle's arm; the oracle %v µs",
					filepath.Base(path), seed, r.TotalUs, r.OffOraclePct, r.OracleUs)
			}
		}
	}
}

// TestCommonDraws: two policies that make the same choice are charged the
// same duration for it, whatever they chose before; a fixed arm's total
// does not depend on which other policies ran first.
func TestCommonDraws(t *testing.T) {
	tab := loadTestTable(t, "../sim/testdata/tables/starpu_mirage.csv")
	w, err := tab.Workload(5_000, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	env, err := NewEnv(w, tab.Arms(), EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	arms := env.Arms()
	var first []float64
	if _, err := env.RunEach(NewFixed(arms, 0), 7, func(_ *Task, _ int, us float64) { first = append(first, us) }); err != nil {
		t.Fatal(err)
	}
	// ucb1 chooses arm 0 some of the time, after other arms.
	var mixed []float64
	var chose []int
	if _, err := env.RunEach(NewUCB1(arms), 7, func(_ *Task, a int, us float64) { mixed = append(mixed, us); chose = append(chose, a) }); err != nil {
		t.Fatal(err)
	}
	same := 0
	for i, a := range chose {
		if a == 0 {
			same++
			if mixed[i] != first[i] {
				t.Fatalf("op %d on arm 0: %v µs under ucb1, %v under the fixed policy", i, mixed[i], first[i])
			}
		}
	}
	if same == 0 {
		t.Fatal("ucb1 never chose arm 0: the test compares nothing")
	}
}
