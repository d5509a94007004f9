package docs

import (
	"os/exec"
	"strings"
	"testing"
)

// banned returns the dependencies of pkgs (go list -deps patterns) that
// start with one of the prefixes.
func banned(t *testing.T, pkgs []string, prefixes []string) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH:", err)
	}
	cmd := exec.Command(goBin, append([]string{"list", "-deps"}, pkgs...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	var found []string
	for _, dep := range strings.Fields(string(out)) {
		for _, p := range prefixes {
			if strings.HasPrefix(dep, p) {
				found = append(found, dep)
			}
		}
	}
	return found
}

// TestCoreDepsStandalone: the packages a program embeds to schedule ops
// (kernels, backends, bandit, sim) pull in no storage, metrics or logging
// library: those belong to history, fleet and the commands (DESIGN.md §
// Layout). The CPU backend logs through log/slog for this reason.
func TestCoreDepsStandalone(t *testing.T) {
	for _, dep := range banned(t, []string{"./kernels/...", "./backends/...", "./bandit/...", "./sim/..."},
		[]string{"github.com/dgraph-io/badger", "github.com/prometheus/", "github.com/rs/zerolog"}) {
		t.Errorf("the core packages depend on %s", dep)
	}
}

// TestSchedulerDeps: the scheduler and the Executor (adaptive, executor)
// and the shared value types (learned, trace, hardware) link no store,
// fleet, metrics or logging library (DESIGN.md § Layout): their state
// leaves them as data, which relay carries to history (Badger) and fleet
// (NATS), metrics serves to Prometheus, and they log through log/slog.
func TestSchedulerDeps(t *testing.T) {
	for _, dep := range banned(t, []string{"./adaptive", "./executor", "./learned", "./trace", "./hardware"},
		[]string{"github.com/dgraph-io/badger", "github.com/nats-io/", "github.com/prometheus/", "github.com/rs/zerolog"}) {
		t.Errorf("adaptive or executor depends on %s", dep)
	}
}

// TestLayers: the store and the fleet never import the scheduler, nor
// it them, nor one the other; only relay (and the commands) join them.
func TestLayers(t *testing.T) {
	mod := "github.com/adaptsched/adaptsched/"
	for _, c := range []struct {
		pkg    string
		banned []string
	}{
		{"./history", []string{mod + "adaptive", mod + "fleet", mod + "relay", mod + "trace"}},
		{"./fleet", []string{mod + "adaptive", mod + "history", mod + "relay"}},
		{"./adaptive", []string{mod + "history", mod + "fleet", mod + "relay", mod + "trace", mod + "executor", mod + "eval"}},
		{"./relay", []string{mod + "history", mod + "fleet"}},
		{"./learned", []string{mod + "adaptive"}},
	} {
		for _, dep := range banned(t, []string{c.pkg}, c.banned) {
			t.Errorf("%s depends on %s", c.pkg, dep)
		}
	}
}
