// Package cpu is the host-CPU backend of adaptsched: the kernels package's
// parallel kernels on a worker pool of the backend's own, with matmul
// through a CBLAS loaded at run time, or through gonum.
//
// It registers two backends: "cpu" (one worker per core) and "cpu1" (one
// worker), so that the scheduler learns for each op and size whether
// spreading it over the cores pays (BenchmarkCrossover measures where it
// starts to). Either takes the argument "gonum" ("cpu:gonum") to force
// the pure-Go matmul.
//
// # Matmul
//
// At the first New, the package dlopens, by name (LD_LIBRARY_PATH and the
// ld.so cache pick the file), libopenblas.so.0, then libblis.so.4,
// libblis.so.3, libblis.so, then libmkl_rt.so.2, libmkl_rt.so, and takes
// the first that exports cblas_sgemm, reports the width of its integers
// (openblas_get_config, BLIS's bli_info_get_blas_int_type_size,
// MKL_Set_Interface_Layer) and computes a small probe product right. A
// library built with 64-bit integers (ILP64), which keeps these file
// names, is called with 64-bit integers, and Backend.BLAS says so; one
// that cannot report its width is passed over, with the reason. It links
// only libdl and includes no BLAS header, so it builds on machines without
// any BLAS; a CGO_ENABLED=0 build always runs on gonum. The library's own
// threading is set to one thread (openblas_set_num_threads and its BLIS
// and MKL equivalents): that setting is process-wide, while "cpu" and
// "cpu1" live in one process with different thread counts. The backend
// instead splits C into a grid of tiles, a few per worker, that the
// workers claim as they come free (so a preempted worker delays one tile,
// not half the product), the grid that packs the least of A and B again
// (columns only when C has few rows), and calls the single-threaded sgemm
// on each (sgemv for a single row of C, where OpenBLAS's sgemm is several
// times slower).
// Products under 2^23 multiply-adds (about 203³) are not split: on the
// 2-core machine this was tuned on, waking a worker cost more than it
// saved below that.
//
// Without a CBLAS, or with Options.Gonum, matmul runs through gonum's
// Sgemm, tiled so that gonum never starts goroutines of its own (it would
// otherwise use every core even in "cpu1"), and split over the pool the
// same way. Backend.BLAS says which path runs and, for gonum, every
// library tried with its dlerror text; with Options.Logger, one log line
// per process and path says the same. Without one the backend logs
// nothing: it never writes to slog's default logger.
//
// # Queue and timing
//
// Each backend runs its work in order on a queue of its own
// (backends.Queuer): RunAsync, WriteAsync and ReadAsync return at once,
// and the work runs on a goroutine that drains the queue and exits when
// it is empty, after waiting for the events of other backends it depends
// on (a failed dependency fails the op). The synchronous methods queue
// and wait; on an idle queue they run on the caller's goroutine. The
// pool's workers park when idle: a backend without work burns no CPU.
// "cpu" and "cpu1" report the same backends.HardwareGroup, "host".
//
// The worker times the kernel alone with the monotonic clock (time.Now,
// Since): Timing{Clock: backends.WallClock}. Copies are timed the same
// way; the backend shares host memory (Info.SharedMemory).
//
// # Usage
//
// ExampleNew (example_test.go) runs a matmul on a two-thread backend;
// with this package imported, backends.Open("cpu") and
// backends.Open("cpu1") give one with every core and one with one.
package cpu
