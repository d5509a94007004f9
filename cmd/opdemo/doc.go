// Command opdemo opens every registered backend that needs no parameter
// (a driver that does, such as sim, runs when named: -backends
// sim:h100), runs every op of the catalogue at each size asked for on
// each, checks each result against kernels.Reference, and prints a
// table: op, size, shapes, backend, median µs, ok. A backend that cannot
// be opened prints one line saying why and is skipped; an op a backend
// does not support is listed as such.
//
// # Usage
//
//	go run ./cmd/opdemo                    # every backend of backends/all
//	go run ./cmd/opdemo -backends cpu,cpu1 -reps 9
//	go run ./cmd/opdemo -sizes small       # small, medium and large by default
//
// Inputs are random (fixed seed); QuantizedMatMul uses Q8_0 weights. The
// exit status is 1 when any result differs from the reference, a run
// fails or no backend could be opened, 2 on bad flags.
package main
