package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/adaptsched/adaptsched/bench/peer"
)

// TestRunWithoutStarPU runs one round of a small generated stream without
// the StarPU program: the oracle, the three adaptsched runs and the
// summary line.
func TestRunWithoutStarPU(t *testing.T) {
	if err := peer.Load(); err != nil {
		t.Skipf("skipped: %v", err)
	}
	path := filepath.Join(t.TempDir(), "stream.txt")
	if err := writeStream(path, peer.GenOptions{Seed: 1, Tasks: 300}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(&out, path, "", 1, 100); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"300 tasks over 15 shapes", "adapt cold", "adapt warm", "oracle at the means", "peer: no StarPU run; adaptsched per-task overhead"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestMedian(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median = %g, want 2", m)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median = %g, want 2.5", m)
	}
}

func TestMissingStream(t *testing.T) {
	if err := run(&bytes.Buffer{}, filepath.Join(t.TempDir(), "none"), "", 1, 10); !os.IsNotExist(err) {
		t.Errorf("run(missing) = %v, want not-exist", err)
	}
}
