package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
)

// asyncArgs decode a small model on sim:cpu2 and sim:<gpu> with only the
// GPU (the only:<gpu>).
func asyncArgs(gpu string, batch int, extra ...string) []string {
	args := []string{"-backends", "sim:cpu2,sim:" + gpu, "-strategy", "only:sim:" + gpu, "-batch", strconv.Itoa(batch),
		"-prompt", "4", "-ubatch", "1", "-tokens", "16", "-warmup", "4", "-json",
		"-dim", "256", "-layers", "2", "-heads", "4", "-kv-heads", "2", "-ffn", "704", "-vocab", "4000", "-ctx", "32"}
	return append(args, extra...)
}

// TestModelledFigures: on simulated devices the modelled throughput is
// the makespan's, never above the placement's bound; -sync is the
// synchronous model, never faster; -exec serial is the model before
// queues; a bad -exec is refused by name.
func TestModelledFigures(t *testing.T) {
	skipCompute(t)
	as := runSummary(t, asyncArgs("h100", 1))
	sy := runSummary(t, asyncArgs("h100", 1, "-sync"))
	se := runSummary(t, asyncArgs("h100", 1, "-exec", "serial"))
	if as.ExecModel != "async" || sy.ExecModel != "sync" || se.ExecModel != "serial" {
		t.Errorf("exec models %q %q %q, want async sync serial", as.ExecModel, sy.ExecModel, se.ExecModel)
	}
	for _, s := range []Summary{as, sy} {
		if !(s.ModelledTokensPerS > 0) || s.ModelledTokensPerS > s.BoundTokensPerS*(1+1e-9) {
			t.Errorf("%s: modelled %.1f tokens/s above its bound %.1f", s.ExecModel, s.ModelledTokensPerS, s.BoundTokensPerS)
		}
	}
	if sy.ModelledTokensPerS > as.ModelledTokensPerS*(1+1e-9) {
		t.Errorf("sync %.1f modelled tokens/s above async's %.1f", sy.ModelledTokensPerS, as.ModelledTokensPerS)
	}
	var out, errb bytes.Buffer
	err := run(context.Background(), asyncArgs("h100", 1, "-exec", "eager"), &out, &errb)
	if err == nil || !strings.Contains(err.Error(), `-exec: sim: invalid setup: execution model "eager"`) {
		t.Errorf("-exec eager: %v", err)
	}
	err = run(context.Background(), asyncArgs("h100", 1, "-sync", "-exec", "serial"), &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "-sync is -exec sync: not with -exec serial") {
		t.Errorf("-sync -exec serial: %v", err)
	}
	// With a real backend there is no Timeline: no bound, no model.
	mixed := runSummary(t, []string{"-backends", "cpu1,sim:h100", "-strategy", "only:sim:h100", "-tokens", "2", "-prompt", "2", "-ubatch", "1",
		"-dim", "64", "-layers", "1", "-heads", "4", "-kv-heads", "2", "-ffn", "64", "-vocab", "50", "-ctx", "8", "-json"})
	if mixed.BoundTokensPerS != 0 || mixed.ExecModel != "" || !(mixed.ModelledTokensPerS > 0) {
		t.Errorf("real and simulated backends: bound %v, model %q, modelled %v", mixed.BoundTokensPerS, mixed.ExecModel, mixed.ModelledTokensPerS)
	}
}

// BenchmarkSimAsync is the decode target through the Executor:
// only:sim:<gpu> beside sim:cpu2 (simModel, batch 1 and 16), its
// modelled tokens per second on the async model (each step gathered on
// a GPU that gathers: the NVIDIA profiles), its bound, the synchronous
// model's (-sync), the same queued op by op (-graphs=false) and its
// bound, and the ratios modelled_over_bound, opbyop_over_bound and
// async_over_sync; then auto against every fixed policy (only:sim:cpu2,
// only:sim:<gpu>, static2x, pcie5x) on the async model,
// auto_over_best_fixed.
func BenchmarkSimAsync(b *testing.B) {
	skipCompute(b)
	for _, gpu := range []string{"h100", "mi300x", "rx7900xtx", "igpu"} {
		for _, batch := range []int{1, 16} {
			b.Run(gpu+"/b"+strconv.Itoa(batch), func(b *testing.B) {
				args := func(strategy string, extra ...string) []string {
					a := append([]string{"-backends", "sim:cpu2,sim:" + gpu, "-strategy", strategy, "-batch", strconv.Itoa(batch),
						"-prompt", strconv.Itoa(simPrompt), "-tokens", strconv.Itoa(simTokens), "-warmup", strconv.Itoa(simWarmup), "-json"}, simModel...)
					return append(a, extra...)
				}
				only := "only:sim:" + gpu
				var as, sy, ob Summary
				fixed := map[string]float64{}
				var auto float64
				for b.Loop() {
					as = runSummary(b, args(only))
					sy = runSummary(b, args(only, "-sync"))
					ob = runSummary(b, args(only, "-graphs=false"))
					auto = runSummary(b, args("auto")).ModelledTokensPerS
					fixed[only] = as.ModelledTokensPerS
					for _, st := range []string{"only:sim:cpu2", "static2x", "pcie5x"} {
						fixed[st] = runSummary(b, args(st)).ModelledTokensPerS
					}
				}
				best := 0.0
				for _, v := range fixed {
					best = max(best, v)
				}
				b.ReportMetric(as.ModelledTokensPerS, "modelled-tokens/s")
				b.ReportMetric(as.BoundTokensPerS, "bound-tokens/s")
				b.ReportMetric(sy.ModelledTokensPerS, "sync-tokens/s")
				b.ReportMetric(auto, "auto-tokens/s")
				b.ReportMetric(as.ModelledTokensPerS/as.BoundTokensPerS, "modelled_over_bound")
				b.ReportMetric(ob.ModelledTokensPerS, "opbyop-tokens/s")
				b.ReportMetric(ob.ModelledTokensPerS/ob.BoundTokensPerS, "opbyop_over_bound")
				b.ReportMetric(as.ModelledTokensPerS/sy.ModelledTokensPerS, "async_over_sync")
				b.ReportMetric(auto/best, "auto_over_best_fixed")
			})
		}
	}
}

// TestWarmupPastRun: a run that ends inside its -warmup measured nothing,
// its prompt tokens included (prompt_tokens counted every prompt token
// of the warm-up, beside tokens 0, when the run ended before the warm-up
// did), and one that ends exactly at it counts the same.
func TestWarmupPastRun(t *testing.T) {
	skipCompute(t)
	args := func(warmup string) []string {
		return []string{"-backends", "sim:cpu2,sim:h100", "-strategy", "only:sim:h100", "-prompt", "4", "-tokens", "3",
			"-warmup", warmup, "-json", "-dim", "64", "-layers", "1", "-heads", "4", "-kv-heads", "2", "-ffn", "64", "-vocab", "50", "-ctx", "16"}
	}
	for _, warmup := range []string{"100", "3"} { // 3 steps: the prompt and 2 decode steps
		s := runSummary(t, args(warmup))
		if s.WarmupSteps != 3 || s.Tokens != 0 || s.PromptTokens != 0 || s.ModelledServedTokensPerS != 0 {
			t.Errorf("-warmup %s: warm-up %d steps, tokens %d, prompt tokens %d, served %v tokens/s; want 3 steps and nothing measured",
				warmup, s.WarmupSteps, s.Tokens, s.PromptTokens, s.ModelledServedTokensPerS)
		}
	}
}
