// Package all registers every backend of this module with the backends
// registry: import it for its side effects, as a program that wants every
// device it can find does.
//
// # Usage
//
// Example (example_test.go) opens every registered backend and leaves out
// those that cannot run here.
package all
