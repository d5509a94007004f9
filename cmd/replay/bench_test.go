package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writeBigTrace writes a trace of at least size bytes to path: the
// default trace's header, then its events over and over (a long-running
// server's trace repeats its buckets the same way). It returns the
// number of events.
func writeBigTrace(tb testing.TB, path string, size int64) int64 {
	tb.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(defaultTrace))
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		tb.Fatal(err)
	}
	head, body, _ := bytes.Cut(raw, []byte("\n"))
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.Write(head)
	w.WriteByte('\n')
	written, events := int64(len(head)+1), int64(0)
	per := int64(bytes.Count(body, []byte("\n")))
	for written < size {
		w.Write(body)
		written += int64(len(body))
		events += per
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return events
}

// BenchmarkReplay replays a 300,000-event trace file (the parse, the
// replay and the report) under one policy, a static one, and all eleven.
// events/s is trace events replayed per second of wall time,
// events/cpu-s per second of the process's CPU time; policy-events/s
// multiplies events/s by the policies replayed in the same pass.
func BenchmarkReplay(b *testing.B) {
	path := filepath.Join(b.TempDir(), "trace.jsonl")
	events := writeBigTrace(b, path, 44<<20)
	for _, c := range []struct{ name, policies string }{
		{"thompson", "thompson"},
		{"static2x", "static2x"},
		{"all", strings.Join([]string{"thompson", "static2x", "pcie5x", "thresholds", "roofline", "calibrate", "egreedy", "ucb1", "oracle", "cpu", "gpu"}, ",")},
	} {
		b.Run(c.name, func(b *testing.B) {
			np := float64(strings.Count(c.policies, ",") + 1)
			b.ReportAllocs()
			n := 0
			cpu0 := cpuSeconds(b)
			for b.Loop() {
				if code := run([]string{"-json", "-policies", c.policies, path}, nil, io.Discard, io.Discard); code != 0 {
					b.Fatalf("exit %d", code)
				}
				n++
			}
			s := b.Elapsed().Seconds()
			b.ReportMetric(float64(events)*float64(n)/s, "events/s")
			// Per second of the process's CPU time (all threads, the GC's
			// included): what a busy shared machine's wall clock hides.
			b.ReportMetric(float64(events)*float64(n)/(cpuSeconds(b)-cpu0), "events/cpu-s")
			b.ReportMetric(float64(events)*float64(n)*np/s, "policy-events/s")
			b.ReportMetric(float64(events), "events")
		})
	}
}

// cpuSeconds is the process's user and system CPU time so far.
func cpuSeconds(tb testing.TB) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// BenchmarkReplayMemory measures the peak resident memory (VmHWM) of a
// child process replaying a large trace under thompson and static2x:
// REPLAY_BENCH_MB megabytes (default 100; the target is 1 GB with
// peak ≤ 200 MB, and memory does not grow with the trace: compare two
// sizes). The trace is generated in b.TempDir().
func BenchmarkReplayMemory(b *testing.B) {
	mb := int64(100)
	if s := os.Getenv("REPLAY_BENCH_MB"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v <= 0 {
			b.Fatalf("REPLAY_BENCH_MB=%q", s)
		}
		mb = v
	}
	path := filepath.Join(b.TempDir(), "big.jsonl")
	events := writeBigTrace(b, path, mb<<20)
	var peak float64
	for b.Loop() {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMemoryChild$")
		cmd.Env = append(os.Environ(), "REPLAY_MEMORY_CHILD="+path)
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("child: %v\n%s", err, out)
		}
		_, after, ok := strings.Cut(string(out), "VmHWM:")
		if !ok {
			b.Fatalf("child reported no VmHWM:\n%s", out)
		}
		kb, err := strconv.ParseFloat(strings.Fields(after)[0], 64)
		if err != nil {
			b.Fatal(err)
		}
		peak = max(peak, kb/1024)
	}
	b.ReportMetric(float64(mb), "trace_MB")
	b.ReportMetric(float64(events), "events")
	b.ReportMetric(peak, "peak_RSS_MB")
}

// TestMemoryChild is BenchmarkReplayMemory's child: it replays the trace
// named by REPLAY_MEMORY_CHILD and prints its VmHWM.
func TestMemoryChild(t *testing.T) {
	path := os.Getenv("REPLAY_MEMORY_CHILD")
	if path == "" {
		return // only as BenchmarkReplayMemory's child
	}
	if code := run([]string{"-json", "-policies", "thompson,static2x", path}, nil, io.Discard, os.Stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(st), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			os.Stdout.WriteString(l + "\n")
		}
	}
}
