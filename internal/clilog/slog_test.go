package clilog_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/adaptsched/adaptsched/internal/clilog"
	"github.com/rs/zerolog"
)

// A slog line reaches the zerolog logger with its level, message and
// attributes; a level below the logger's is dropped.
func TestSlogBridge(t *testing.T) {
	var buf bytes.Buffer
	l := clilog.Slog(clilog.New(&buf, true, zerolog.InfoLevel))
	l.Debug("hidden")
	l.With("backend", "cpu").Info("cpu: matmul through gonum", "runtime", "gonum")
	got := strings.TrimSpace(buf.String())
	for _, want := range []string{`"level":"info"`, `"message":"cpu: matmul through gonum"`, `"runtime":"gonum"`, `"backend":"cpu"`} {
		if !strings.Contains(got, want) {
			t.Errorf("line %s lacks %s", got, want)
		}
	}
	if strings.Contains(got, "hidden") {
		t.Errorf("a debug line passed an info logger: %s", got)
	}
}

// Groups qualify the attributes added after them only (slog.Handler's
// WithGroup), and an empty group is none.
func TestSlogGroups(t *testing.T) {
	var buf bytes.Buffer
	l := clilog.Slog(clilog.New(&buf, true, zerolog.InfoLevel))
	l.With("a", 1).WithGroup("g").With("b", 2).WithGroup("").Info("m", "c", 3)
	got := strings.TrimSpace(buf.String())
	for _, want := range []string{`"a":1`, `"g.b":2`, `"g.c":3`} {
		if !strings.Contains(got, want) {
			t.Errorf("line %s lacks %s", got, want)
		}
	}
}
