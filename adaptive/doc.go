// Package adaptive is adaptsched's scheduler: it places every op on the
// backend that is fastest on this machine and learns as it runs
// (DESIGN.md § The data path, § Priors, § Strategies and telemetry).
//
// Every op falls into a bucket: op × dtype × half-octave size class of its
// work (kernels.BucketName, kernels.SizeClass). Each bucket runs a Thompson-sampling
// bandit (package bandit) over the backends that support it. A new
// bucket's prior comes from a static roofline cost model per backend
// (dispatch + max(FLOPs / FLOP rate, bytes / bandwidth), with figures from
// the backend's Info().Nominal, a start-up calibration for CPUs, or
// documented defaults for GPUs), corrected by what neighbouring buckets of
// the same op and backend have taught. Each backend's cost in a decision
// includes the predicted transfer of the inputs it does not hold, from an
// online latency + bandwidth model per link direction. Measured durations
// update the posteriors; discounting and a CUSUM change detector keep them
// current, and a hysteresis margin keeps a bucket on its incumbent unless
// a challenger is clearly faster.
//
// A Scheduler is safe for concurrent use from many goroutines. Select and
// Observe do not allocate once an op's shape has been seen: the shape is
// hashed into a sharded cache that leads straight to the bucket, which has
// its own mutex and random source. Telemetry, a Go snapshot, reports
// what it did (the commands serve it to Prometheus: cmd/infer -metrics); a log/slog logger in Config gets decisions at debug level
// and switches and change alarms at info.
//
// What it learns leaves it as data, in the manner of etcd raft's
// Ready/Advance: Config.Warm warm-starts the buckets; once Track is
// called, Observe only marks a changed bucket and counts its records,
// and Changes hands the changed posteriors out in one batch
// (learned.Change); Fold.Foreign takes the evidence of other machines
// in. It calls no store and no fleet: package relay carries the changes
// to them.
//
// The evaluation harness and replay (package eval) run this same
// Scheduler through Select and Observe, so the regret they report is the
// regret of the code a program runs.
//
// # Usage
//
// ExampleScheduler_Select (example_test.go) places a matmul whose inputs
// live in host memory and on the GPU, reports each measured duration with
// Observe, and watches the bucket move to the backend that is really
// faster. A run that fails on its backend is placed again with
// SelectExcept(spec, res, adaptive.Backend(d.Backend), adaptive.Fallback).
//
// Copies that the caller times go to ObserveTransfer, which refines the
// link model.
//
// A caller that runs one op site again and again holds a Handle:
//
//	h, err := s.Handle(spec) // once per op site
//	d, err := h.Select(res)  // Select's decision, without the lookup
//	s.Observe(d, timing)
//
// Package executor's Executor does all of that for a program: it is a
// backends.Backend itself, so code written against one backend runs
// adaptively unchanged.
package adaptive
