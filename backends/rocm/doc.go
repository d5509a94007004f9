// Package rocm is adaptsched's GPU backend: HIP on AMD GPUs and, through
// the same function table, HIP's other platform, CUDA on NVIDIA GPUs. It
// registers itself as "rocm" ("rocm:1" picks device 1, "rocm:nvidia" a
// platform).
//
// Nothing is linked at build time but libdl: a small cgo shim dlopens the
// runtime (libamdhip64.so.6/.5 or libcudart.so.13/.12 with libcuda.so.1),
// the runtime compiler (libhiprtc, or the hiprtc symbols inside the ROCm 5
// runtime; libnvrtc.so.13/.12) and the BLAS (librocblas.so.5/.4/.3/.0 or
// libcublas.so.13/.12), and resolves a table of function pointers. Every
// failure is recorded, path and dlerror text, and Open returns it as a
// *backends.UnavailableError. Devices are counted before anything else:
// with none, the compiler, BLAS and modules are never touched. Built
// without cgo, Open always answers unavailable.
//
// A Device makes its vendor calls on the caller's OS thread, one caller at
// a time, after binding that thread to the device (the primary context on
// NVIDIA, hipSetDevice on AMD): no hand-off to another thread on the path
// of an op. Device memory comes from a caching pool.
//
// # Queued work and timing
//
// A Device is a backends.Queuer. RunAsync enqueues an op on the compute
// stream between a start and an end event taken from the device's event
// pool, and returns at once; WriteAsync and ReadAsync do the same for
// copies, through pinned staging blocks (pooled by size), on a copy
// stream of their own where the device has copy engines (NVIDIA: the
// driver's async engine count; AMD: always, its SDMA engines). A copy and
// a kernel that use the same buffer are ordered on the device
// (hipStreamWaitEvent, cudaStreamWaitEvent); events of other backends
// (a CPU op) are waited for on the host thread that enqueues, and a CPU
// op waits for a GPU event through its Wait (hipEventSynchronize). The
// Timing (Clock backends.DeviceEvents, the device-measured
// actual_duration_us of DESIGN.md) is read only once the end event has
// completed: when a query (hipEventQuery, cudaEventQuery) finds it so, or
// at the next synchronisation point (Wait, Sync, Close); the events then
// go back to the pool. Run, Write and Read are the queued call and its
// Wait. A buffer freed while queued work uses it goes back to the memory
// pool once that work has completed.
//
// MatMul runs on rocblas_sgemm / cublasSgemm_v2 (row-major by the operand
// swap), or on a tiled kernel without a BLAS. Every other op runs a kernel
// of kernels/hip, compiled at first use for the device's own architecture
// (gcnArchName, or sm_XY from the compute capability) and cached on disk
// under Options.CacheDir as <arch>-<sha256>.bin. rocBLAS aborts its
// process when it has no kernels for the device's architecture: Open
// first checks for its kernel files and then initialises it once in a
// child process (this executable re-run; package init answers it), and
// falls back to the tiled kernel when either fails (see Device.BLAS).
//
// Errors of ops and transfers are *backends.DeviceError values, naming
// the op, wrapping backends.ErrOutOfMemory (hipErrorOutOfMemory,
// cudaErrorMemoryAllocation), backends.ErrDeviceLost (the sticky errors:
// illegal address, launch failure, ECC; the Device then refuses every
// new call) or a *CallError. An error of queued work (a kernel that fails
// as it runs) comes back from its event's Wait, or else from the next
// Sync, or else from Close.
//
// # Usage
//
// A Device is a backends.Backend: ExampleOpen (example_test.go) opens
// one and falls back when no GPU is there; backends.ExampleOpen shows the
// Alloc, Write, Run and Read that follow.
//
// Tests run everywhere: a fake HIP runtime (testdata/fakehip.c, built with
// gcc by the tests; one thread per stream, so work really is queued)
// drives the Go side end to end, and Debian's libamdhip64-5 provides the
// real runtime (no device) and hiprtc where it is installed (make ci
// installs it; elsewhere those tests skip, naming it). Without cgo the
// package builds and Open reports the backend unavailable
// (TestOpenWithoutCgo, make portable). The GPU
// tests and benchmarks skip without a device; build them with
// `go test -c` and run the binary on a GPU machine.
package rocm
