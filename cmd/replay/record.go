package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"time"

	"github.com/adaptsched/adaptsched/adaptive"
	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/eval"
	"github.com/adaptsched/adaptsched/hardware"
	"github.com/adaptsched/adaptsched/sim"
	"github.com/adaptsched/adaptsched/trace"
)

// The embedded default trace: a mixed-serving run of Llama-3.2-1B on the
// simulated h100 with the cpu2 CPU, placed by thompson, with a shadow run
// on the other backend for defaultShadow of the ops.
const (
	defaultOps    = 20_000
	defaultShadow = 0.05
	defaultSeed   = 7
	// defaultGPUProfile models the default trace's GPU where it has no
	// measurement: the profile it was recorded on.
	defaultGPUProfile = "h100"
)

// recordDefault writes the default trace to file (gzip JSONL).
func recordDefault(file string) error {
	b, err := defaultTraceBytes()
	if err != nil {
		return err
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		return fmt.Errorf("replay: -record-default: %w", err)
	}
	return nil
}

// recorder keeps the arm and duration of every op of a run, in op order.
type recorder struct {
	eval.Policy
	arm []int8
	us  []float64
}

func (r *recorder) add(_ *eval.Task, arm int, us float64) {
	r.arm = append(r.arm, int8(arm))
	r.us = append(r.us, us)
}

// defaultTraceBytes runs the simulator three times over the same
// workload (everything on the GPU, everything on the CPU, and thompson)
// and records thompson's run with trace.Recorder: each op's backend and
// measured duration, plus, for a random defaultShadow of them, the
// duration that the other run drew on the other backend as a shadow
// measurement. Durations are kept to 0.01 µs, a timer's resolution. The
// output is deterministic.
func defaultTraceBytes() ([]byte, error) {
	mk := func() (sim.Workload, error) {
		return sim.MixedServing(sim.Llama32_1B, defaultOps, defaultSeed, sim.ServingOptions{})
	}
	arms := []sim.Arm{{Profile: sim.MustProfile(defaultGPUProfile)}, {Profile: sim.MustProfile("cpu2")}}
	w, err := mk()
	if err != nil {
		return nil, err
	}
	env, err := eval.NewEnv(w, arms, eval.EnvOptions{})
	if err != nil {
		return nil, err
	}
	th, err := eval.NewThompson(adaptive.Config{Seed: defaultSeed}, env.Arms())
	if err != nil {
		return nil, err
	}
	defer th.Close()
	runs := []*recorder{
		{Policy: eval.NewFixed(env.Arms(), 0)},
		{Policy: eval.NewFixed(env.Arms(), 1)},
		{Policy: th},
	}
	for i, r := range runs {
		if _, err := env.RunEach(r.Policy, defaultSeed+uint64(i), r.add); err != nil {
			return nil, err
		}
	}
	infos := []backends.Info{arms[0].Profile.Info(), arms[1].Profile.Info()}
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	rec, err := trace.NewRecorder(gz, trace.Header{
		Created:     time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		Fingerprint: hardware.FingerprintOf(infos).Hash,
		Backends:    infos,
	}, trace.RecorderOptions{Queue: defaultOps + 1})
	if err != nil {
		return nil, err
	}
	ops, err := mk()
	if err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(defaultSeed, 0x5ad0))
	round := func(us float64) float64 { return math.Round(us*100) / 100 }
	th0 := runs[2]
	for t := range th0.us {
		op, ok := ops.Next()
		if !ok {
			return nil, fmt.Errorf("replay: default trace: the workload ended at op %d", t)
		}
		a := int(th0.arm[t])
		ev := trace.EventOf(op.Spec)
		ev.Seq, ev.Bucket, ev.Backend = int64(t), op.BucketName, infos[a].Name
		ev.ActualUs = round(th0.us[t])
		if r.Float64() < defaultShadow {
			o := 1 - a
			ev.Shadow = map[string]float64{infos[o].Name: round(runs[o].us[t])}
		}
		rec.Record(ev)
	}
	if err := rec.Close(); err != nil {
		return nil, err
	}
	if n := rec.Dropped(); n > 0 {
		return nil, fmt.Errorf("replay: default trace: the recorder dropped %d events", n)
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
