// Command replay replays operations through placement policies and
// compares each with the oracle, the best fixed backend per bucket in
// hindsight (DESIGN.md § Evaluation): the engineer's check, before
// deploying, of what adaptsched's thompson would have done on a recorded
// workload against the static cost models it replaces.
//
// Inputs:
//
//   - an adaptsched JSONL trace (trace.Recorder's format, gzip
//     accepted; "-" reads stdin);
//   - a Chrome trace (PyTorch profiler / Kineto) through
//     trace.ImportChrome: its ops carry GPU durations only, so the CPU's
//     come from -sim-cpu (by default sim:cpu2, said in the report) or
//     -table; ops outside the op catalogue, which no backend here can
//     run, are left out and summed by reason;
//   - a perf table alone (-table FILE.csv: sim's table workload), or
//     StarPU's own history-based models (-table a .../codelets/45
//     directory or one file in it: sim.LoadStarPU, one arm per device and
//     implementation, one row per footprint; footprints not on every arm
//     are listed on stderr and left out); -figures "LABEL: gflops=..."
//     gives a table's backend the hardware figures its prior uses, as a
//     CSV's "# backend LABEL:" line does;
//   - a simulator workload (-workload mixed-serving|decode|prefill with
//     -sim-gpu GPU and -sim-cpu CPU);
//   - an offload workload (-workload offload-dense|offload-moe): weights
//     in host memory beside a GPU budget, run through eval.OffloadEnv
//     with llama.cpp's offload rules, expert caches and thompson;
//   - nothing: an embedded mixed-serving trace, recorded by this
//     project's recorder from a simulator run (sim:h100 + sim:cpu2, placed
//     by thompson, with 5% shadow runs).
//
// A trace is parsed once. Pass 1 keeps, per bucket and backend, the
// count, mean µs and spread of ln µs of every measurement (the backend an
// op ran on, and shadow runs), and spools each event as its distinct op
// and measurements (a few bytes; in memory up to 4 MiB, in a temporary
// file beyond, so memory does not grow with the trace). Each op's
// duration on each backend is then fixed: its own measurement there when
// it has one, else a counterfactual drawn lognormal around the bucket's
// measured mean on that backend elsewhere in the trace, else around a
// -table or -sim-gpu / -sim-cpu model's mean, drawn once for all policies
// from a stream seeded by -seed and the op's place (common random
// numbers). The oracle of a bucket is the backend of the least total over
// its ops on those durations, in hindsight: no fixed backend beats it.
// Pass 2 drives every policy op by op over the spool, each charged those
// durations. A trace that measures one kind of backend (a Kineto trace:
// the GPU) gets the other from the simulated profiles sim:h100 / sim:cpu2
// unless -sim-gpu, -sim-cpu or -table says otherwise. A bucket with
// neither a measurement nor a model on some backend is left out of the
// comparison and summed by reason; only those that more data would
// include count against -max-excluded (ops outside the op catalogue are
// no choice: no backend here runs them). The report counts the
// decisions by the source of their duration. Transfers are not
// replayed: a trace records only the transfer of the backend chosen.
// Simulator workloads and perf tables run through eval.Env instead, which
// moves each op's activation from where the op it reads ran and charges
// the copies, on common draws. -exec picks their execution model (sim.ExecModel): async,
// the default for -workload, queues work on the simulated devices and
// reports each policy's makespan (the critical path) and its bound beside
// the summed total; thompson is told each device's queue wait. serial,
// the default for -table, is the model before queues (durations summed);
// sync waits after every op.
//
// thompson is adaptive.Scheduler itself (eval.Thompson), called as the
// Executor calls it: Select with the Residency of the op's inputs, Observe
// with the duration. -db gives that Scheduler a posterior store, as in
// production: it warm-starts from it and saves to it, keyed as a deployed
// scheduler keys its posteriors; the figures are otherwise those of a
// plain replay.
//
// The report is a table, one row per policy (total time, ratio to the
// oracle, regret %, switches, the share of decisions made to learn, the
// share off the oracle's backend, the share that used counterfactuals,
// the share of ops per backend; `replay -h` explains each), thompson's
// decisions by reason, then the buckets where the policies disagree most;
// -json prints the same as one JSON object. The oracle's row is the
// reference, 0 by definition. -plot draws cumulative regret per policy
// and thompson's decision map, and says where it wrote the picture.
//
// thompson's bandit takes -hysteresis, -discount and -prior-strength (0:
// the defaults); -model picks a simulator workload's model, and the
// offload workloads take -batch, -ubatch, -decode, -zipf and
// -routing-drift besides -moe, -gpu-mem, -routing, -prompt and -rounds.
// A flag the chosen input does not read is a usage error: these outside
// the offload workloads, and inside them any but -policies, -sim-gpu,
// -sim-cpu, -exec, -seed, -json and -zipf (offload-moe's alone, as -moe).
// -format names a TRACE's format (auto, jsonl, chrome); -top sets how
// many buckets of disagreement are listed; a terminal shows a progress
// bar from -progress-min bytes of input. -log-json logs JSON lines, and
// -reset-damaged-store moves a damaged -db aside, as infer's do. The
// fleet flags share thompson's posteriors through NATS JetStream, as
// infer's do: -fleet URL or -fleet-serve ADDR (with -fleet-dir and
// -fleet-serve-users, -fleet-serve-cert, -fleet-serve-key,
// -fleet-serve-ca), -fleet-node, the credentials and TLS of -fleet-creds,
// -fleet-password-file, -fleet-nkey, -fleet-ca, -fleet-cert and
// -fleet-key, -fleet-optional, -fleet-interval and -fleet-max-peer-keys.
// -profile and -cpu-profile, the old names of -sim-gpu and -sim-cpu,
// still work with a warning. `replay -h` lists every flag.
//
// A bad flag prints one line and a hint (-h prints the usage) and exits 2;
// bad input (TRACE, -table, a -routing or -routing-drift file) prints
// "file:line: message" and exits 1, or with -skip-bad the bad lines of
// TRACE are counted in the report. Ctrl-C (or SIGTERM) stops
// the replay, reports what ran before it (nothing, during a trace's
// first pass) and exits 130.
//
// # Usage
//
//	replay                                   # the embedded default trace
//	replay -plot replay.png                  # and its plot
//	replay trace.jsonl.gz                    # a recorded trace
//	replay -sim-gpu mi300x trace.jsonl       # counterfactuals from a profile
//	replay -table perf.csv trace.jsonl       # ... or from a perf table
//	replay kineto.json.gz                    # a PyTorch profiler trace
//	replay -workload mixed-serving -sim-gpu mi250 -ops 200000
//	replay -table perf.csv -ops 100000       # a perf table's workload
//	replay -workload offload-moe -sim-gpu pcie3x8 -moe 8,2 -gpu-mem 10% \
//	    -routing sim/testdata/moe/expert_popularity_machine_learning.json -prompt 34 -rounds 64
//	replay -table ~/.starpu/sampling/codelets/45 -ops 100000  # StarPU's models
//	replay -json -policies thompson,roofline,oracle trace.jsonl
//	replay -db ~/.cache/adaptsched/db trace.jsonl
//
// The default trace is regenerated with
// go run ./cmd/replay -record-default cmd/replay/testdata/default.jsonl.gz
// (or go test ./cmd/replay -rewrite, which rewrites the golden files too).
package main
