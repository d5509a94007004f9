package docs

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCoreDepsStandalone: the packages a program embeds to schedule ops
// (kernels, backends, bandit, sim) pull in no storage, metrics or logging
// library: those belong to history, fleet and the commands (DESIGN.md,
// "Pure core"). The CPU backend logs through log/slog for this reason.
func TestCoreDepsStandalone(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH:", err)
	}
	cmd := exec.Command(goBin, "list", "-deps", "./kernels/...", "./backends/...", "./bandit/...", "./sim/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/dgraph-io/badger", "github.com/prometheus/", "github.com/rs/zerolog"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("the core packages depend on %s", dep)
			}
		}
	}
}
