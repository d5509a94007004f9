package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFleetServe is the fleet's two-process target in one test process:
// replay runs the simulator's mixed-serving workload on mi300x with
// thompson through an embedded JetStream server (-fleet-serve on
// loopback, data in a directory), as node a; a second run, node b, on the
// same data starts from a's evidence and must explore at most a tenth as
// much. Two processes through a nats-server: BENCHMARKS.md's fleet rows.
func TestFleetServe(t *testing.T) {
	dir := t.TempDir()
	var reps [2]Report
	for i, node := range []string{"a", "b"} {
		code, out, errs := replayRun(t, "", "-json", "-workload", "mixed-serving", "-sim-gpu", "mi300x", "-ops", "5000",
			"-policies", "thompson", "-fleet-serve", "127.0.0.1:0", "-fleet-dir", dir, "-fleet-node", node)
		if code != 0 {
			t.Fatalf("run %s: exit %d: %s", node, code, errs)
		}
		if err := json.Unmarshal([]byte(out), &reps[i]); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(strings.Join(reps[1].Notes, ";"), "synced true: 1 other nodes") {
		t.Errorf("second run's notes %q: want a's evidence", reps[1].Notes)
	}
	a, b := reps[0].Policies[0].LearnPct, reps[1].Policies[0].LearnPct
	t.Logf("learn_pct: a %.3f%%, b %.3f%%", a, b)
	if !(b <= a/10) || a == 0 {
		t.Errorf("b explored %.3f%%, a %.3f%%: want b at most a tenth of a", b, a)
	}
}

// TestFleetFlags checks that fleet flags that do not go together, or a
// fleet or a store without thompson, are usage errors; the store's
// directory is not made.
func TestFleetFlags(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	for _, args := range [][]string{
		{"-db", dir, "-policies", "oracle,static2x"},
		{"-fleet-cert", "c.pem"},
		{"-fleet-creds", "x.creds"},
		{"-fleet", "nats://127.0.0.1:1", "-policies", "oracle"},
		{"-fleet-serve", "127.0.0.1:0", "-fleet-interval", "0s"},
		{"-fleet-serve", "127.0.0.1:0", "-fleet-max-peer-keys", "0"},
	} {
		if code, _, _ := replayRun(t, "", args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("-db without thompson made %s (%v)", dir, err)
	}
}
