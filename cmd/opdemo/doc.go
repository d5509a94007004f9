// Command opdemo opens every registered backend, runs every op of the
// catalogue at three sizes on each, checks each result against
// kernels.Reference, and prints a table: op, size, backend, median µs, ok.
// A backend that cannot be opened prints one line saying why and is
// skipped; an op a backend does not support is listed as such.
//
// # Usage
//
//	go run ./cmd/opdemo                    # every backend of backends/all
//	go run ./cmd/opdemo -backends cpu,cpu1 -reps 9
//
// Inputs are random (fixed seed); QuantizedMatMul uses Q8_0 weights. The
// exit status is 1 when any result differs from the reference or a run
// fails, 2 on bad flags.
package main
