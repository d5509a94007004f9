package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/adaptsched/adaptsched/sim"
)

// TestGPULostMidRequest loses the GPU in the middle of a request's decode,
// with the KV cache on it: the request goes on, on the CPU, after
// prefilling again what the lost cache held, and every request gets the
// tokens a run without the loss gives (greedy decoding, computed).
func TestGPULostMidRequest(t *testing.T) {
	args := append([]string{"-backends", "sim:cpu2,sim:mi300x", "-strategy", "gpu", "-prompt", "4", "-tokens", "12",
		"-requests", "2", "-stream"}, simModel...)
	want, _ := lostRunTokens(t, args, 0)
	if n := len(strings.Fields(want)); n != 24 {
		t.Fatalf("%d tokens streamed without the loss, want 24", n)
	}
	// The prefill of 4 tokens and 12 decode steps take about 1,900 ops:
	// op 600 is in the first request's decode.
	got, logs := lostRunTokens(t, args, 600)
	if got != want {
		t.Errorf("tokens with the GPU lost mid-request: %q, without: %q", got, want)
	}
	if !strings.Contains(logs, "prefilling its tokens again") {
		t.Errorf("no restart logged:\n%s", logs)
	}
}

// TestGPULostInPrompt loses the GPU while the first request's prompt
// runs (op 50 of a prompt of 32 tokens in micro-batches of 8), under
// strategies that put its tensors there: the prompt is prefilled again
// elsewhere, as after a loss in decode, and every request gets the
// tokens a run without the loss gives.
func TestGPULostInPrompt(t *testing.T) {
	for _, st := range []string{"gpu", "static2x", "perop"} {
		args := append([]string{"-backends", "sim:cpu2,sim:mi300x", "-strategy", st, "-prompt", "32", "-ubatch", "8",
			"-tokens", "4", "-requests", "2", "-stream"}, simModel...)
		want, _ := lostRunTokens(t, args, 0)
		if n := len(strings.Fields(want)); n != 8 {
			t.Fatalf("%s: %d tokens streamed without the loss, want 8", st, n)
		}
		got, logs := lostRunTokens(t, args, 50)
		if got != want {
			t.Errorf("%s: tokens with the GPU lost in the prompt: %q, without: %q", st, got, want)
		}
		if !strings.Contains(logs, "prefilling its tokens again") {
			t.Errorf("%s: no restart logged:\n%s", st, logs)
		}
	}
}

// lostRunTokens runs infer with args (-stream, 2 requests of 12 tokens
// or of 4), the mi300x lost at op lostAt (0: never), and returns the
// tokens streamed, request:token, and what it logged.
func lostRunTokens(t *testing.T, args []string, lostAt int64) (string, string) {
	t.Helper()
	old := simEvents
	if lostAt > 0 {
		simEvents = map[string][]sim.Event{"mi300x": {{At: lostAt, Kind: sim.DeviceLost}}}
	}
	defer func() { simEvents = old }()
	var out, errb bytes.Buffer
	if err := run(context.Background(), args, &out, &errb); err != nil {
		t.Fatalf("GPU lost at op %d: %v\n%s", lostAt, err, errb.String())
	}
	var toks []string // the -stream lines, request:token; the table after them varies
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) == 1 && strings.Count(f[0], ":") == 1 {
			toks = append(toks, f[0])
		}
	}
	if len(toks) == 0 {
		t.Fatalf("GPU lost at op %d: no tokens streamed:\n%s", lostAt, out.String())
	}
	return strings.Join(toks, " "), errb.String()
}

// TestGPULostRestartsCounted: -json counts the restarted request, and
// every token is served.
func TestGPULostRestartsCounted(t *testing.T) {
	skipCompute(t)
	old := simEvents
	simEvents = map[string][]sim.Event{"mi300x": {{At: 600, Kind: sim.DeviceLost}}}
	t.Cleanup(func() { simEvents = old })
	s := runSummary(t, append([]string{"-backends", "sim:cpu2,sim:mi300x", "-strategy", "gpu", "-prompt", "4", "-tokens", "40",
		"-requests", "2", "-json"}, simModel...))
	if s.Restarts != 1 || s.Tokens != 80 || s.Share["sim:cpu2"] < 0.5 {
		t.Errorf("restarts %d, tokens %d, CPU share %.2f: want 1 restart, 80 tokens, most ops on the CPU", s.Restarts, s.Tokens, s.Share["sim:cpu2"])
	}
}
