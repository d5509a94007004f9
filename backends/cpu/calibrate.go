package cpu

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// Calibration sizes: an n×n sgemm through the backend (a 256³ sgemm is
// 34 MFLOP: under a millisecond with a BLAS, a few with the gonum
// fallback), a tiny Add for the dispatch overhead, and a host memory copy
// for the bandwidth. Each is repeated and the fastest run kept, within a
// time budget per measurement.
const (
	calibGEMM      = 256
	calibCopyBytes = 16 << 20
	calibBudget    = 20 * time.Millisecond
	calibMaxRuns   = 7
)

var _ backends.Calibrator = (*Backend)(nil)

// Calibrate implements backends.Calibrator: GFLOPS, MemGBps and
// DispatchUs measured on this backend (an sgemm, a one-element Add and a
// host memory copy, within about 100 ms), timed by the real monotonic
// clock. The result is kept for the backend's later calls and in the
// calibration file (Options.CalibrationFile), keyed by CPU model, arch,
// library and threads, so that the next process on the same machine
// reads it instead of measuring. A stored figure is used only when the
// library file, the program's build and the measuring method are the
// ones that measured it; otherwise it is measured again and replaced. A
// file that cannot be read or written costs a measurement, not an error.
func (b *Backend) Calibrate() (backends.Nominal, error) {
	b.calMu.Lock()
	defer b.calMu.Unlock()
	if b.cal == (backends.Nominal{}) {
		n, err := calibrate(b, b.calFile, calibStamp{Method: calibMethod, Library: b.path.lib, Build: buildID()})
		if err != nil {
			return backends.Nominal{}, err
		}
		b.cal = n
	}
	return b.cal, nil
}

// defaultCalibrationFile returns the calibration file under
// os.UserCacheDir, or "" when there is none.
func defaultCalibrationFile() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "adaptsched", "cpu-calibration.json")
}

// calibKey keys a calibration in the file: the figures depend on the CPU
// model, the worker threads and the library behind the kernels.
func calibKey(info backends.Info) string {
	return info.Model + "|" + info.Arch + "|" + info.Runtime + "|" + strconv.Itoa(info.Threads)
}

// calibMethod numbers the way measure works; a stored figure measured
// another way is measured again. 2: random inputs (gonum's sgemm skips
// zero entries, so zero-filled inputs timed nothing).
const calibMethod = 2

// calibStamp says what measured a stored figure besides its key: a
// figure is used only when its stamp equals the running one.
type calibStamp struct {
	Method  int    // calibMethod
	Library string // the loaded library file (blasPath.lib)
	Build   string // buildID
}

// calibRecord is one entry of the calibration file.
type calibRecord struct {
	backends.Nominal
	calibStamp
}

// buildID names this program's build: the Go version, the main module's
// version and revision, and the executable's size and modification
// time, which change whenever it is rebuilt (new kernels, new flags).
func buildID() string {
	id := "unknown build"
	if bi, ok := debug.ReadBuildInfo(); ok {
		id = bi.GoVersion + " " + bi.Main.Path + "@" + bi.Main.Version
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" || s.Key == "vcs.modified" {
				id += " " + s.Key + "=" + s.Value
			}
		}
	}
	if exe, err := os.Executable(); err == nil {
		id += " " + fileStamp(exe)
	}
	return id
}

// fileStamp names a file's version as its resolved path, size and
// modification time (an upgrade of a library changes at least one).
func fileStamp(path string) string {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		path = p
	}
	fi, err := os.Stat(path)
	if err != nil {
		return path
	}
	return fmt.Sprintf("%s %d %d", path, fi.Size(), fi.ModTime().UnixNano())
}

// calibrate returns measured figures of b: from file (when not "") if it
// holds b's with the same stamp, else measured (and then written to file,
// replacing the entry of another stamp).
func calibrate(b backends.Backend, file string, stamp calibStamp) (backends.Nominal, error) {
	key := calibKey(b.Info())
	stored := readCalibration(file)
	if r, ok := stored[key]; ok && r.calibStamp == stamp && r.GFLOPS > 0 && r.MemGBps > 0 && r.DispatchUs > 0 {
		return r.Nominal, nil
	}
	n, err := measure(b)
	if err != nil {
		return backends.Nominal{}, err
	}
	if file != "" {
		if stored == nil {
			stored = map[string]calibRecord{}
		}
		stored[key] = calibRecord{n, stamp}
		// A file that cannot be written costs a few ms at the next start.
		_ = writeCalibration(file, stored)
	}
	return n, nil
}

func readCalibration(file string) map[string]calibRecord {
	if file == "" {
		return nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	var m map[string]calibRecord
	if json.Unmarshal(data, &m) != nil {
		return nil // a corrupt file is measured again and overwritten
	}
	return m
}

// writeCalibration replaces file atomically (temporary file and rename).
func writeCalibration(file string, m map[string]calibRecord) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".calibration-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), file)
}

// measure runs the calibration: dispatch overhead from a one-element
// Add, sgemm throughput from an n×n×n MatMul (its dispatch subtracted),
// memory bandwidth from a host copy (bytes read + written).
func measure(b backends.Backend) (backends.Nominal, error) {
	tiny := kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{1}, {1}}}
	dispatch, err := timeOp(b, tiny)
	if err != nil {
		return backends.Nominal{}, err
	}
	n := calibGEMM
	gemm := kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{n, n}, {n, n}}}
	t, err := timeOp(b, gemm)
	if err != nil {
		return backends.Nominal{}, err
	}
	compute := t - dispatch
	if compute <= 0 {
		compute = t
	}
	gflops := float64(gemm.Work().FLOPs) / compute / 1e3

	src := make([]byte, calibCopyBytes)
	dst := make([]byte, calibCopyBytes)
	best := time.Duration(1<<63 - 1)
	start := time.Now()
	for i := 0; i < calibMaxRuns && (i < 2 || time.Since(start) < calibBudget); i++ {
		t0 := time.Now()
		copy(dst, src)
		best = min(best, time.Since(t0))
	}
	memGBps := 2 * calibCopyBytes / (float64(best) / float64(time.Second)) / 1e9
	if !(gflops > 0) || !(memGBps > 0) {
		return backends.Nominal{}, fmt.Errorf("cpu: calibrating %s: implausible figures (%.3g GFLOP/s, %.3g GB/s)", b.Info().Name, gflops, memGBps)
	}
	return backends.Nominal{GFLOPS: gflops, MemGBps: memGBps, DispatchUs: max(dispatch, 0.01)}, nil
}

// timeOp runs spec on b (random inputs: a kernel may skip zeros, as
// gonum's sgemm does) repeatedly within the time budget and returns the
// fastest kernel timing in µs.
func timeOp(b backends.Backend, spec kernels.Spec) (float64, error) {
	in := make([]backends.Buffer, len(spec.In))
	defer func() {
		for _, buf := range in {
			if buf != nil {
				buf.Free()
			}
		}
	}()
	r := rand.New(rand.NewPCG(1, 2))
	for i, sh := range spec.In {
		buf, err := b.Alloc(spec.InBytes(i))
		if err != nil {
			return 0, fmt.Errorf("cpu: calibrating %s: %w", b.Info().Name, err)
		}
		in[i] = buf
		vals := make([]float32, sh.Elements())
		for j := range vals {
			vals[j] = 2*r.Float32() - 1
		}
		data, err := kernels.Quantize(spec.InDType(i), vals)
		if err != nil {
			return 0, fmt.Errorf("cpu: calibrating %s: %w", b.Info().Name, err)
		}
		if _, err := b.Write(buf, data); err != nil {
			return 0, fmt.Errorf("cpu: calibrating %s: %w", b.Info().Name, err)
		}
	}
	out, err := b.Alloc(spec.OutBytes())
	if err != nil {
		return 0, fmt.Errorf("cpu: calibrating %s: %w", b.Info().Name, err)
	}
	defer out.Free()
	best := -1.0
	start := time.Now()
	// One warm-up run (page faults, thread pool start) is not counted.
	for i := 0; i <= calibMaxRuns && (i < 3 || time.Since(start) < calibBudget); i++ {
		t, err := b.Run(spec, in, out)
		if err != nil {
			return 0, fmt.Errorf("cpu: calibrating %s on %v: %w", b.Info().Name, spec, err)
		}
		if us := t.Micros(); i > 0 && (best < 0 || us < best) {
			best = us
		}
	}
	return best, nil
}
