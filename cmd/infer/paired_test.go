package main

import (
	"testing"
	"time"
)

// pairedRounds and pairedSteps shape BenchmarkDecodePaired: rounds of
// pairedSteps decode steps per strategy. Enough rounds that the first
// steps, where auto learns, weigh in the total about as they would in a
// server that runs on (about a second of decoding per strategy at batch
// 1); fewer rounds made auto/best swing more between runs. Figures:
// BENCHMARKS.md (DecodePaired rows).
const (
	pairedRounds = 96
	pairedSteps  = 4
)

// BenchmarkDecodePaired compares the strategies of BenchmarkDecode side by
// side, as one would compare three servers on one shared machine: each
// strategy has its own Executor and model, built once, and in each round
// every one decodes pairedSteps steps in turn (the first to go rotates),
// so that a slow spell of the machine, which lasts from milliseconds to
// minutes here, falls on the three alike. Each strategy's tokens/s is
// over its own decode time; auto/best and auto/worse are the targets
// (≥ 1 and ≥ 1.15; BENCHMARKS.md). One iteration is the whole comparison
// (pairedRounds rounds), and auto learns across it, as a server does.
func BenchmarkDecodePaired(b *testing.B) {
	for _, batch := range []int{1, 16} {
		b.Run("batch"+itoa(batch), func(b *testing.B) {
			servers := make([]*decodeServer, len(decodeStrategies))
			for i, st := range decodeStrategies {
				servers[i] = newDecodeServer(b, st.s, batch)
			}
			busy := make([]time.Duration, len(servers))
			for b.Loop() {
				for r := range pairedRounds {
					for k := range servers {
						i := (r + k) % len(servers)
						t0 := time.Now()
						for range pairedSteps {
							servers[i].step(b)
						}
						busy[i] += time.Since(t0)
					}
				}
			}
			tps := make([]float64, len(servers))
			for i, d := range servers {
				tps[i] = float64(d.steps*batch) / busy[i].Seconds()
				b.ReportMetric(tps[i], decodeStrategies[i].name+"-tokens/s")
			}
			// decodeStrategies: auto first, then each backend alone.
			best, worse := max(tps[1], tps[2]), min(tps[1], tps[2])
			b.ReportMetric(tps[0]/best, "auto/best")
			b.ReportMetric(tps[0]/worse, "auto/worse")
			logPlacement(b, servers[0].e.Scheduler().Telemetry())
		})
	}
}
