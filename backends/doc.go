// Package backends defines what adaptsched schedules onto: the Backend
// interface (a device that allocates buffers, copies to and from host
// memory and runs kernels.Spec ops), the Timing of every kernel and
// transfer, the registry of backend drivers, and the sentinel errors that
// let the scheduler tell a capability gap (ErrUnsupported) from a failure
// (ErrOutOfMemory, ErrDeviceLost, ErrTransient).
//
// Backends register themselves in init, as database/sql drivers do; the
// package backends/all imports every backend of this module.
//
// # Usage
//
// ExampleOpen (example_open_test.go) opens a backend by name, runs an op
// on it and reads the result; ExampleRegister shows a driver and the
// errors Open gives.
//
// Optional capabilities are separate interfaces found by type assertion;
// each documents what happens when a backend lacks it.
package backends
