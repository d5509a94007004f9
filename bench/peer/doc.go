// Package peer sets adaptsched beside StarPU, the measuring scheduler it
// claims to beat, on a machine without a GPU: both choose, task by task,
// between the same two CPU implementations of f32 matmul on the same task
// stream (make peer; BENCHMARKS.md § Targets).
//
// The implementations live in one C source, peerkern.c, compiled by cgo
// into this package and by make peer into the StarPU program
// (starpu/peer_starpu.c), with the same flags: OpenBLAS's cblas_sgemm
// (dlopen'ed at run time, one thread) and a k-blocked C loop that wins
// where OpenBLAS's call overhead or its slow M = 1 path dominates. The
// drift is peerkern.c's too: from the stream's drift task on, one
// implementation busy-waits after each kernel for (Factor − 1) × its
// calibrated median time on that shape (Calibrate), so that it takes
// Factor times its normal time (a throttled or contended core), in both
// programs, with the same delays.
//
// StarPU registers both as cpu_funcs of one codelet with a history-based
// model and runs under dmda with a fresh STARPU_HOME, STARPU_CALIBRATE=1
// and one CPU worker (StarPUEnv): it calibrates each (size,
// implementation) before picking the one that seems fastest. Here each
// implementation is a backends.Backend (Device) and an adaptive.Scheduler
// chooses, driven as the Executor drives it: Select, Run, Observe.
//
// # Usage
//
// Example (example_test.go) goes through the steps of one round: the
// stream, the calibrated delays, the oracle, adaptsched's run and
// StarPU's.
//
// cmd/peer runs them all in alternation and prints the comparison. Only
// the StarPU program needs StarPU's headers (libstarpu-dev); this package
// needs OpenBLAS's runtime library (libopenblas0) to run, and no header
// beyond libc's to build.
package peer
