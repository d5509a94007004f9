package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/history"
	"github.com/rs/zerolog"
)

// Issue 21: one event naming a third backend left 96 of 121 ops of
// small.jsonl out of the comparison, silently, exit 0. Now the run fails
// above -max-excluded (10% by default), naming the backend and how few
// events name it; allowed, it warns on stderr.
func TestThirdBackendExcludes(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "third.jsonl")
	body := readFile(t, "testdata/small.jsonl") +
		`{"seq":999,"op":"Add","dtype":"f32","shape":[[1,4096],[1,4096]],"backend":"npu","actual_duration_us":2.0}` + "\n"
	if err := os.WriteFile(trace, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := replayRun(t, "", trace)
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout %q; want 1 and no report", code, out)
	}
	for _, s := range []string{"96 of 121 ops (79.3%) are left out", "npu (named by 1 of 121 events", "-max-excluded 10"} {
		if !strings.Contains(errs, s) {
			t.Errorf("stderr %q does not say %q", errs, s)
		}
	}
	code, out, errs = replayRun(t, "", "-json", "-max-excluded", "100", trace)
	if code != 0 {
		t.Fatalf("-max-excluded 100: exit %d: %s", code, errs)
	}
	var rep Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.ExcludedOps != 96 || !strings.HasPrefix(errs, "replay: warning: ") || !strings.Contains(errs, "96 of 121 ops") {
		t.Errorf("excluded %d, stderr %q", rep.ExcludedOps, errs)
	}
	if code, _, _ := replayRun(t, "", "-max-excluded", "101", trace); code != 2 {
		t.Errorf("-max-excluded 101: exit %d, want 2", code)
	}
}

// Issue 21: a trace that cannot be read twice is refused at once with the
// way out: replay <(gzip -c t.jsonl) said "empty trace: no header" (the
// first pass had drained the pipe), a FIFO without a writer and /dev/zero
// hung.
func TestNotRegularInput(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	go func() { w.Write([]byte(readFile(t, "testdata/small.jsonl"))); w.Close() }()
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{fmt.Sprintf("/dev/fd/%d", r.Fd()), "replay [flags] - < /dev/fd/"},
		{fifo, "replay [flags] - < " + fifo},
		{"/dev/zero", "a character device"},
	} {
		done := make(chan struct{})
		var code int
		var errs string
		go func() {
			code, _, errs = replayRun(t, "", c.path)
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: still running after 20 s", c.path)
		}
		if code != 1 || !strings.Contains(errs, "is not a regular file") || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want 1 and %q", c.path, code, errs, c.want)
		}
	}
}

// Issue 21: Ctrl-C exited 130 with no report and without the last flush.
// Now the first SIGINT stops the replay at the next op: the report of the
// ops so far is printed (with a note), the store is closed and flushed,
// and the exit status is 130.
func TestInterruptReports(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	onOp = func(op int64) {
		if op != 40 {
			return
		}
		syscall.Kill(syscall.Getpid(), syscall.SIGINT)
		for deadline := time.Now().Add(10 * time.Second); !interrupted.Load() && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	defer func() { onOp = nil }()
	code, out, errs := replayRun(t, "", "-json", "-db", dir, "-policies", "thompson,oracle", "testdata/exact.jsonl")
	if code != 130 {
		t.Fatalf("exit %d, want 130: %s", code, errs)
	}
	var rep Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("no report: %v: %q", err, out)
	}
	if !strings.Contains(strings.Join(rep.Notes, ";"), "interrupted: the figures cover the first 40 of") || rep.Ops != 40 {
		t.Errorf("notes %q, ops %d", rep.Notes, rep.Ops)
	}
	if !strings.Contains(errs, "replay: interrupted") {
		t.Errorf("stderr %q", errs)
	}
	db, err := history.Open(history.DefaultOptions(dir).WithLogger(zerolog.Nop()).
		WithFingerprint(history.Fingerprint{Hash: "x", Desc: "x"}))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if s := db.Stats(); s.Old == 0 {
		t.Errorf("the store holds no posterior after the interrupted run: %+v", s)
	}
}
