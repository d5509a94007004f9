package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/hardware"
	"github.com/adaptsched/adaptsched/history"
	"github.com/rs/zerolog"
)

// One event naming a third backend left 96 of 121 ops of
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

// A trace is parsed once, so a pipe replays as its file does (replay
// <(gzip -c t.jsonl) said "empty trace: no header" when the replay read
// it twice), a FIFO too once its writer comes; a device that never ends
// (/dev/zero hung) and a directory are refused at once.
func TestNotRegularInput(t *testing.T) {
	body := readFile(t, "testdata/small.jsonl")
	_, want, _ := replayRun(t, "", "-json", "-max-excluded", "25", "testdata/small.jsonl")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go func() { w.Write([]byte(body)); w.Close() }()
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.Write([]byte(body))
			f.Close()
		}
	}()
	for _, path := range []string{fmt.Sprintf("/dev/fd/%d", r.Fd()), fifo} {
		code, out, errs := replayRun(t, "", "-json", "-max-excluded", "25", path)
		if code != 0 || strings.Replace(out, `"input": "`+path+`"`, `"input": "testdata/small.jsonl"`, 1) != want {
			t.Errorf("%s: exit %d (%s); the report differs from the file's", path, code, errs)
		}
	}
	for _, c := range []struct{ path, want string }{
		{"/dev/zero", "a character device"},
		{t.TempDir(), "a directory"},
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
		if code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want 1 and %q", c.path, code, errs, c.want)
		}
	}
}

// TestChromeOnPipe: a Chrome trace on a pipe or a FIFO, plain or
// gzipped, is told from JSONL by its content, as a file is, and replays
// as its file does (it was read as JSONL: "header: json: cannot
// unmarshal"); a JSONL trace on a pipe still streams (TestNotRegularInput).
func TestChromeOnPipe(t *testing.T) {
	body := readFile(t, "testdata/chrome.json")
	var gz bytes.Buffer
	z := gzip.NewWriter(&gz)
	z.Write([]byte(body))
	z.Close()
	_, want, _ := replayRun(t, "", "-json", "-sim-gpu", "h100", "testdata/chrome.json")
	for _, c := range []struct {
		name string
		data []byte
	}{{"plain", []byte(body)}, {"gzip", gz.Bytes()}} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		go func() { w.Write(c.data); w.Close() }()
		fifo := filepath.Join(t.TempDir(), "fifo")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		go func() {
			if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				f.Write(c.data)
				f.Close()
			}
		}()
		for _, path := range []string{fmt.Sprintf("/dev/fd/%d", r.Fd()), fifo} {
			code, out, errs := replayRun(t, "", "-json", "-sim-gpu", "h100", path)
			if code != 0 || strings.Replace(out, `"input": "`+path+`"`, `"input": "testdata/chrome.json"`, 1) != want {
				t.Errorf("%s %s: exit %d (%s); the report differs from the file's", c.name, path, code, errs)
			}
		}
		r.Close()
	}
}

// Ctrl-C exited 130 with no report and without the last flush.
// Now the first SIGINT stops the replay at the next op: the report of the
// ops so far is printed (with a note), the store is closed and flushed,
// and the exit status is 130.
func TestInterruptReports(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	defer sigintAt(40)()
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
	storeHolds(t, dir)
}

// sigintAt makes the replay send itself SIGINT before op (of pass 2, or
// of a workload's run) and wait until the handler has seen it; the
// returned func undoes it.
func sigintAt(op int64) (undo func()) {
	onOp = func(o int64) {
		if o != op || interrupted.Load() {
			return
		}
		syscall.Kill(syscall.Getpid(), syscall.SIGINT)
		for deadline := time.Now().Add(10 * time.Second); !interrupted.Load() && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	return func() { onOp = nil; interrupted.Store(false) }
}

// storeHolds checks that the store in dir, written by an interrupted
// run, holds posteriors.
func storeHolds(t *testing.T, dir string) {
	t.Helper()
	db, err := history.Open(history.DefaultOptions(dir).WithLogger(zerolog.Nop()).
		WithFingerprint(hardware.Fingerprint{Hash: "x", Desc: "x"}))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if s := db.Stats(); s.Old == 0 {
		t.Errorf("the store holds no posterior after the interrupted run: %+v", s)
	}
}

// TestInterruptWorkload: Ctrl-C during a simulator workload's replay ends
// the policy being run at the next checkpoint, reports the ops run so far
// (the policies after it are not run), flushes the store and exits 130.
func TestInterruptWorkload(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	defer sigintAt(2000)()
	code, out, errs := replayRun(t, "", "-json", "-db", dir, "-workload", "mixed-serving", "-ops", "5000", "-policies", "thompson,oracle")
	if code != 130 {
		t.Fatalf("exit %d, want 130: %s", code, errs)
	}
	var rep Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("no report: %v: %q", err, out)
	}
	if len(rep.Policies) != 1 || rep.Ops <= 2000 || rep.Ops >= 5000 {
		t.Errorf("%d policies over %d ops, want thompson alone over 2,000 to 5,000", len(rep.Policies), rep.Ops)
	}
	if !strings.Contains(strings.Join(rep.Notes, ";"), "interrupted: thompson covers the first") {
		t.Errorf("notes %q", rep.Notes)
	}
	storeHolds(t, dir)
}

// TestInterruptBeforeReplay: Ctrl-C while the workload is prepared (it
// exited 130 silently: the signal was not caught yet) ends in the report
// of the first checkpoint, with a note.
func TestInterruptBeforeReplay(t *testing.T) {
	defer sigintAt(-1)()
	code, out, errs := replayRun(t, "", "-json", "-workload", "decode", "-ops", "5000", "-policies", "thompson,oracle")
	if code != 130 {
		t.Fatalf("exit %d, want 130: %s", code, errs)
	}
	var rep Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("no report: %v: %q", err, out)
	}
	if !strings.Contains(strings.Join(rep.Notes, ";"), "interrupted") || !strings.Contains(errs, "replay: interrupted") {
		t.Errorf("notes %q, stderr %q", rep.Notes, errs)
	}
}

// A perf table at the bounds it accepts (1 ns and 11.6 days,
// std 100× the mean) gives finite totals and valid JSON, where means of
// 1e300 and 5e-324 gave NaN totals and a -json error naming no file.
func TestTableBoundsFinite(t *testing.T) {
	p := filepath.Join(t.TempDir(), "edge.csv")
	csv := "op,shape,backend,mean_us,std_us,n\n" +
		"Add,4;4,gpu,1e-3,0.1,2\nAdd,4;4,cpu,1e12,1e12,2\n" +
		"Add,8;8,gpu,1e12,1e12,2\nAdd,8;8,cpu,1e-3,0,2\n"
	if err := os.WriteFile(p, []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := replayRun(t, "", "-json", "-table", p, "-ops", "2000")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.csv")
	if err := os.WriteFile(bad, []byte("op,shape,backend,mean_us,std_us,n\nAdd,4;4,gpu,1e300,1,2\nAdd,4;4,cpu,3,1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := replayRun(t, "", "-json", "-table", bad); code != 1 || !strings.Contains(errs, bad+":2: mean_us") {
		t.Errorf("1e300: exit %d, %q", code, errs)
	}
}

// A Chrome trace's negative kernel duration was reported as
// "file:1: actual_duration_us", a field the file does not have; the
// error now names the event's index in traceEvents, and its line and
// column (the trace is one line).
func TestChromeLocation(t *testing.T) {
	p := filepath.Join(t.TempDir(), "neg.json")
	trace := `{"traceEvents":[` +
		`{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":0,"dur":10,"args":{"Input Dims":[[4],[4]],"Input type":["float","float"]}},` +
		`{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":1,"dur":2,"args":{"correlation":7}},` +
		`{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":3,"dur":-5,"args":{"correlation":7}}]}`
	if err := os.WriteFile(p, []byte(trace), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := replayRun(t, "", "-sim-gpu", "h100", p)
	if code != 1 || !strings.Contains(errs, "neg.json:1:271: traceEvents[2] (\"kernel\" \"k\"): dur -5") || strings.Contains(errs, "actual_duration_us") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}

// A Chrome trace whose "traceEvents" key follows more than a
// MiB of other keys was sniffed as JSONL ("no header").
func TestSniffLateTraceEvents(t *testing.T) {
	p := filepath.Join(t.TempDir(), "late.json")
	trace := `{"meta":"` + strings.Repeat("x", 2<<20) + `","deviceProperties":[{"a":[1,2,{"b":"}"}]}],"traceEvents":[` +
		`{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":0,"dur":10,"args":{"Input Dims":[[4],[4]],"Input type":["float","float"]}}]}`
	if err := os.WriteFile(p, []byte(trace), 0o644); err != nil {
		t.Fatal(err)
	}
	if f, err := sniff(p); err != nil || f != "chrome" {
		t.Errorf("sniff: %q, %v; want chrome", f, err)
	}
	for _, q := range []string{"testdata/small.jsonl", "testdata/chrome.json", "testdata/default.jsonl.gz"} {
		want := "jsonl"
		if strings.HasSuffix(q, ".json") {
			want = "chrome"
		}
		if f, _ := sniff(q); f != want {
			t.Errorf("sniff %s: %q, want %q", q, f, want)
		}
	}
}

// A store whose MANIFEST is gone opened empty ("0 posteriors
// loaded"), its tables deleted, exit 0. Now the error naming the store is
// the first thing on stderr; -reset-damaged-store moves it aside with a
// plain warning line and replays.
func TestDamagedDB(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	args := []string{"-db", dir, "-policies", "thompson,oracle", "-max-excluded", "25", "testdata/small.jsonl"}
	if code, _, errs := replayRun(t, "", args...); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, errs)
	}
	if err := os.Remove(filepath.Join(dir, "MANIFEST")); err != nil {
		t.Fatal(err)
	}
	code, out, errs := replayRun(t, "", args...)
	if code != 1 || out != "" || !strings.HasPrefix(errs, "replay: -db: history: store "+dir+" is damaged: its MANIFEST is missing") {
		t.Fatalf("damaged: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	code, _, errs = replayRun(t, "", append([]string{"-reset-damaged-store"}, args...)...)
	if code != 0 || !strings.Contains(errs, "WRN history: the store was damaged; moved it aside") || strings.Contains(errs, `{"level"`) {
		t.Errorf("-reset-damaged-store: exit %d, stderr %q", code, errs)
	}
	if moved, _ := filepath.Glob(dir + ".damaged-*"); len(moved) != 1 {
		t.Errorf("moved aside: %v", moved)
	}
}

// TestTableRefusals: -table refuses a FIFO with the way out, reads "-"
// from stdin, and names the file of a table with more backends than the
// scheduler takes.
func TestTableRefusals(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "t.csv")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	code, _, errs := replayRun(t, "", "-table", fifo)
	if code != 1 || !strings.Contains(errs, fifo+" is a pipe, not a regular file: pass it on stdin instead") {
		t.Errorf("fifo: exit %d, stderr %q", code, errs)
	}
	code, out, errs := replayRun(t, readFile(t, "testdata/table.csv"), "-ops", "200", "-json", "-table", "-")
	if code != 0 || !strings.Contains(out, `"oracle"`) {
		t.Errorf("stdin: exit %d, stderr %q", code, errs)
	}
	wide := filepath.Join(dir, "wide.csv")
	var b strings.Builder
	b.WriteString("op,shape,backend,mean_us,std_us,n\n")
	for i := range 300 {
		fmt.Fprintf(&b, "MatMul,4x4;4x4,b%d,10,,\n", i)
	}
	if err := os.WriteFile(wide, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs = replayRun(t, "", "-table", wide)
	if code != 1 || !strings.Contains(errs, wide+": 300 backends, the scheduler takes at most 8") {
		t.Errorf("wide: exit %d, stderr %q", code, errs)
	}
	code, _, errs = replayRun(t, "", "-table", "-", "-")
	if code != 2 || !strings.Contains(errs, "both read stdin") {
		t.Errorf("two stdins: exit %d, stderr %q", code, errs)
	}
}

// TestBundledTracesReplay: every bundled Kineto trace replays with no
// flag (exit 0): a trace that measures the GPU only gets the simulated
// CPU model by default, and ops outside the op catalogue, which no
// backend here can run, are left out without failing the replay. What is
// left out is summed by reason in a few lines, not listed bucket by
// bucket.
func TestBundledTracesReplay(t *testing.T) {
	traces, _ := filepath.Glob("../../trace/testdata/traces/*.json.gz")
	if len(traces) < 2 {
		t.Fatalf("bundled traces %v: want 2", traces)
	}
	for _, tr := range traces {
		code, out, errs := replayRun(t, "", tr)
		if code != 0 {
			t.Errorf("%s: exit %d: %s", tr, code, errs)
			continue
		}
		lines := strings.Split(out, "\n")
		for _, l := range lines {
			if len(l) > 400 {
				t.Errorf("%s: a report line of %d characters: %.120s…", tr, len(l), l)
			}
		}
		if !strings.Contains(out, "outside the op catalogue") || !strings.Contains(out, "modelled by the simulated profiles") {
			t.Errorf("%s: the report does not say what it left out and what it modelled:\n%s", tr, out)
		}
		rep := replayJSON(t, tr)
		var sum int64
		for _, g := range rep.Excluded {
			sum += g.Ops
			if g.Missing {
				t.Errorf("%s: %d ops counted as missing data: %s", tr, g.Ops, g.Reason)
			}
		}
		if sum != rep.ExcludedOps || rep.Ops == 0 {
			t.Errorf("%s: excluded groups sum to %d of %d ops; %d ops compared", tr, sum, rep.ExcludedOps, rep.Ops)
		}
	}
}

// TestTraceCommonDraws: on a trace, the policies are charged the same
// counterfactual draws and the oracle is the best per-bucket backend in
// hindsight on them: the fixed policies never beat it, and two policies
// that place every op alike cost the same.
func TestTraceCommonDraws(t *testing.T) {
	for _, args := range [][]string{
		{"-max-excluded", "100", "testdata/small.jsonl"},
		{"-sim-gpu", "h100", "-max-excluded", "100", "testdata/small.jsonl"},
		{"../../trace/testdata/traces/sampled_rank-0.json.gz"},
	} {
		for _, seed := range []string{"1", "2", "3"} {
			rep := replayJSON(t, append([]string{"-seed", seed}, args...)...)
			by := map[string]PolicyResult{}
			for _, p := range rep.Policies {
				by[p.Name] = p
			}
			for _, f := range []string{"cpu", "gpu"} {
				if p, ok := by[f]; ok && p.RegretPct < 0 {
					t.Errorf("%v seed %s: %s regret %.4f%%, below the oracle", args, seed, f, p.RegretPct)
				}
			}
			if by["pcie5x"].Share["cpu"] == 1 && by["pcie5x"].TotalUs != by["cpu"].TotalUs {
				t.Errorf("%v seed %s: pcie5x and cpu place every op on the CPU and cost %v and %v µs", args, seed, by["pcie5x"].TotalUs, by["cpu"].TotalUs)
			}
		}
	}
}

// TestChromeBOM: a Chrome trace that starts with a byte-order mark (as
// some editors save JSON) replays as the same trace without it, plain
// and gzipped, told by its content or named with -format chrome.
func TestChromeBOM(t *testing.T) {
	body := readFile(t, "testdata/chrome.json")
	_, want, _ := replayRun(t, "", "-json", "-sim-gpu", "h100", "testdata/chrome.json")
	dir := t.TempDir()
	var gz bytes.Buffer
	z := gzip.NewWriter(&gz)
	z.Write([]byte("\ufeff" + body))
	z.Close()
	for name, data := range map[string][]byte{"bom.json": []byte("\ufeff" + body), "bom.json.gz": gz.Bytes()} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, format := range []string{"auto", "chrome"} {
			code, out, errs := replayRun(t, "", "-json", "-sim-gpu", "h100", "-format", format, path)
			if code != 0 || strings.Replace(out, `"input": "`+path+`"`, `"input": "testdata/chrome.json"`, 1) != want {
				t.Errorf("%s, -format %s: exit %d (%s); the report differs from the file's", name, format, code, errs)
			}
		}
	}
}
