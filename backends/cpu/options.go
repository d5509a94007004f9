package cpu

import (
	"fmt"
	"log/slog"
	"runtime"
)

// Options configure a CPU backend. They are passed by value; the zero
// value is usable (every core, CBLAS when one loads, no log line) and is
// what DefaultOptions returns. The backend logs only through the Logger
// it is given, never through slog's default.
type Options struct {
	// Threads is the number of worker threads the backend's kernels and
	// matmul panels run on; 0 means runtime.NumCPU().
	Threads int
	// Gonum forces the pure-Go matmul (gonum) even when a CBLAS loads.
	Gonum bool
	// Logger receives the one line per process that says which matmul path
	// runs: the first Logger given gets it. A nil Logger gets nothing (the
	// registered cpu and cpu1 have none: Backend.BLAS says the same). It is a log/slog logger so that
	// the backends stay free of a logging library.
	Logger *slog.Logger
	// CalibrationFile caches Calibrate's figures across runs, keyed by CPU
	// model, arch, library and threads, and measured again when the
	// library file or the program's build changes. "" means
	// os.UserCacheDir()/adaptsched/cpu-calibration.json; "-" means none.
	CalibrationFile string
}

// DefaultOptions returns every core, CBLAS when one loads, no logger,
// and the calibration file in the user's cache directory.
func DefaultOptions() Options {
	return Options{}
}

// WithThreads returns o with n worker threads. Default: 0, meaning
// runtime.NumCPU(); a negative n makes New fail.
func (o Options) WithThreads(n int) Options { o.Threads = n; return o }

// WithGonum returns o with the pure-Go matmul forced on (true) or off.
// Default: false, so a CBLAS is used when one loads.
func (o Options) WithGonum(force bool) Options { o.Gonum = force; return o }

// WithLogger returns o logging to l; nil discards. Default: nil.
func (o Options) WithLogger(l *slog.Logger) Options { o.Logger = l; return o }

// WithCalibrationFile returns o caching calibrations in file ("-": in
// none). Default: "", meaning
// os.UserCacheDir()/adaptsched/cpu-calibration.json.
func (o Options) WithCalibrationFile(file string) Options { o.CalibrationFile = file; return o }

// calibrationFile returns the calibration file o names, "" for none.
func (o Options) calibrationFile() string {
	switch o.CalibrationFile {
	case "":
		return defaultCalibrationFile()
	case "-":
		return ""
	}
	return o.CalibrationFile
}

// threads validates o and returns its thread count.
func (o Options) threads() (int, error) {
	switch {
	case o.Threads < 0:
		return 0, fmt.Errorf("%w: %d threads", ErrInvalidOptions, o.Threads)
	case o.Threads == 0:
		return runtime.NumCPU(), nil
	}
	return o.Threads, nil
}
