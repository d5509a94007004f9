package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
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

// TestFlagErrors: a count below 1 or an argument is a bad flag, one line
// and the hint (exit 2): -rounds 0 and -empty 0 panicked once the stream
// was calibrated, -tasks 0 wrote 20,000 tasks, and "peer FILE" ran the
// default stream, not FILE.
func TestFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-rounds", "0"}, "-rounds 0: want at least 1"},
		{[]string{"-empty", "0"}, "-empty 0: want at least 1"},
		{[]string{"-empty", "-5"}, "-empty -5: want at least 1"},
		{[]string{"-gen", "x.txt", "-tasks", "0"}, "-tasks 0: want at least 1"},
		{[]string{"my-stream.txt"}, `unexpected argument "my-stream.txt"`},
		{[]string{"-nope"}, "flag provided but not defined: -nope"},
	} {
		var errb bytes.Buffer
		_, err := parseFlags(c.args, &errb)
		lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
		if err == nil || len(lines) != 2 || !strings.Contains(lines[0], c.want) || lines[1] != usageHint {
			t.Errorf("%q: %v, stderr %q; want %q and the hint", c.args, err, errb.String(), c.want)
		}
	}
	c, err := parseFlags([]string{"-stream", "s.txt", "-rounds", "1", "-empty", "10"}, io.Discard)
	if err != nil || c.stream != "s.txt" || c.rounds != 1 || c.empty != 10 || c.tasks != 20000 {
		t.Errorf("good flags: %+v, %v", c, err)
	}
}

// TestInapplicableFlags: a flag the chosen mode does not read is a bad
// flag, one line naming it and the mode, and the hint (exit 2): -gen
// writes a stream and reads only -seed and -tasks besides; a run (no
// -gen) reads only -stream, -starpu, -rounds and -empty. Each was
// silently dropped: "peer -gen s.txt -rounds 5" wrote the stream, "peer
// -seed 7" ran the default stream. The flags each mode reads still parse.
func TestInapplicableFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-gen", "s.txt", "-stream", "t.txt"}, "-stream does not apply to -gen (writing a stream)"},
		{[]string{"-gen", "s.txt", "-starpu", "bin/peer_starpu"}, "-starpu does not apply to -gen (writing a stream)"},
		{[]string{"-gen", "s.txt", "-rounds", "5"}, "-rounds does not apply to -gen (writing a stream)"},
		{[]string{"-gen", "s.txt", "-empty", "10"}, "-empty does not apply to -gen (writing a stream)"},
		{[]string{"-seed", "7"}, "-seed does not apply to a run (no -gen)"},
		{[]string{"-stream", "s.txt", "-tasks", "300"}, "-tasks does not apply to a run (no -gen)"},
		{[]string{"-tasks", "0"}, "-tasks does not apply to a run (no -gen)"},
		{[]string{"-gen", "", "-rounds", "1"}, `-gen "": want the file to write the stream to`},
	} {
		var errb bytes.Buffer
		_, err := parseFlags(c.args, &errb)
		lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
		if err == nil || errors.Is(err, flag.ErrHelp) || len(lines) != 2 || !strings.Contains(lines[0], c.want) || lines[1] != usageHint {
			t.Errorf("%q: %v, stderr %q; want %q and the hint", c.args, err, errb.String(), c.want)
		}
	}
	for _, args := range [][]string{
		{"-gen", "s.txt", "-seed", "7", "-tasks", "300"},
		{"-stream", "s.txt", "-starpu", "bin/peer_starpu", "-rounds", "1", "-empty", "10"},
	} {
		if _, err := parseFlags(args, io.Discard); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
}
