package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/executor"
	"github.com/adaptsched/adaptsched/hardware"
	"github.com/adaptsched/adaptsched/history"
)

// TestRunFleet runs the command twice on a tiny model through an embedded
// JetStream server (-fleet-serve on loopback, one data directory), with
// metrics served (-metrics): the second run holds the first's evidence.
func TestRunFleet(t *testing.T) {
	dir := t.TempDir()
	var sums [2]Summary
	for i, node := range []string{"a", "b"} {
		var out, errb bytes.Buffer
		args := []string{"-backends", "sim:cpu2,sim:h100", "-tokens", "4", "-batch", "2", "-prompt", "2", "-ubatch", "1",
			"-dim", "64", "-layers", "1", "-heads", "4", "-kv-heads", "2", "-ffn", "64", "-vocab", "50", "-ctx", "8", "-json",
			"-fleet-serve", "127.0.0.1:0", "-fleet-dir", dir, "-fleet-node", node, "-metrics", "127.0.0.1:0"}
		if err := run(context.Background(), args, &out, &errb); err != nil {
			t.Fatalf("run %s: %v\n%s", node, err, errb.String())
		}
		if err := json.Unmarshal(out.Bytes(), &sums[i]); err != nil {
			t.Fatalf("%v: %q", err, out.String())
		}
	}
	a, b := sums[0].Fleet, sums[1].Fleet
	if a == nil || b == nil || !a.Synced || a.Published == 0 || !b.Synced || b.Nodes != 1 || b.Keys == 0 {
		t.Errorf("fleet stats: a %+v, b %+v: want a published, b holding a's keys", a, b)
	}
}

// TestFleetFlagErrors checks that fleet flags that do not go together
// are errors.
func TestFleetFlagErrors(t *testing.T) {
	for _, args := range [][]string{{"-fleet-key", "k.pem"}, {"-fleet-ca", "ca.pem"}, {"-fleet-interval", "-1s", "-fleet-serve", "0"}, {"-fleet-max-peer-keys", "0", "-fleet-serve", "0"}} {
		var out, errb bytes.Buffer
		if err := run(context.Background(), args, &out, &errb); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestServeMetrics serves the metrics over HTTP on loopback (-metrics
// with no host) and reads them back: the Scheduler's, the Executor's,
// the store's, the Go runtime's and the process's families, each under
// its conventional name.
func TestServeMetrics(t *testing.T) {
	b, err := backends.Open("sim:h100")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	e, err := executor.New(executor.Config{Backends: []backends.Backend{b}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	db, err := history.Open(history.DefaultOptions(t.TempDir()).WithLogger(zerolog.Nop()).
		WithFingerprint(hardware.Fingerprint{Hash: "x", Desc: "x"}))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	at, stop, err := serveMetrics(":0", metricSources{sched: e.Scheduler(), exec: e, store: db}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if host, _, _ := net.SplitHostPort(at); host != "127.0.0.1" {
		t.Errorf("listening on %s, want loopback", at)
	}
	resp, err := http.Get("http://" + at + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s\n%s", resp.Status, body)
	}
	for _, name := range []string{"adaptsched_decisions_total{backend=\"sim:h100\",reason=\"", "adaptsched_op_seconds_total", "adaptsched_explorations_total", "adaptsched_decision_latency_seconds_bucket{le=\"1e-07\"}",
		"adaptsched_fallbacks_total", "adaptsched_transfer_bytes_total", "adaptsched_transfer_seconds_total", "adaptsched_backend_healthy",
		"adaptsched_store_flushes_total", "adaptsched_store_flush_errors_total", "go_goroutines", "process_cpu_seconds_total"} {
		if !strings.Contains(string(body), name) {
			t.Errorf("GET /metrics lacks %s", name)
		}
	}
}
