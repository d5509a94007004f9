// Package all registers every real backend of this module (cpu, cpu1,
// rocm) with the backends registry: import it for its side effects, as a
// program that wants every device it can find does. The simulator is no
// device: a program that offers it calls sim.Register.
//
// # Usage
//
// Example (example_test.go) opens every registered backend and leaves out
// those that cannot run here.
package all
