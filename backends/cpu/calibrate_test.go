package cpu

import (
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// modelled is a backend whose kernels take 4 µs + FLOPs at 50 GFLOP/s,
// reported as simulated timings without computing.
type modelled struct{ runs atomic.Int64 }

var _ backends.Backend = (*modelled)(nil)

func (m *modelled) Info() backends.Info {
	return backends.Info{Name: "cpu", Kind: backends.CPU, Model: "model", Arch: "arch", Threads: 2}
}
func (m *modelled) Supports(kernels.Spec) error { return nil }
func (m *modelled) Alloc(n int64) (backends.Buffer, error) {
	return backends.NewHostBuffer(m, n), nil
}
func (m *modelled) Write(backends.Buffer, []byte) (backends.Timing, error) {
	return backends.Timing{}, nil
}
func (m *modelled) Read([]byte, backends.Buffer) (backends.Timing, error) {
	return backends.Timing{}, nil
}
func (m *modelled) Run(s kernels.Spec, _ []backends.Buffer, _ backends.Buffer) (backends.Timing, error) {
	m.runs.Add(1)
	us := 4 + float64(s.Work().FLOPs)/50e3
	return backends.Timing{Duration: time.Duration(us * float64(time.Microsecond)), Clock: backends.Simulated}, nil
}
func (m *modelled) Close() error { return nil }

// TestCalibration checks the measurement against a backend whose kernels
// take 4 µs + FLOPs at 50 GFLOP/s, and the calibration file: read instead
// of measuring, measured again and overwritten when corrupt.
func TestCalibration(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cal.json")
	f := &modelled{}
	n, err := calibrate(f, file)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(n.GFLOPS/50-1) > 1e-4 || math.Abs(n.DispatchUs-4) > 1e-3 || !(n.MemGBps > 0) {
		t.Errorf("calibrated %+v, want 50 GFLOP/s, 4 µs", n)
	}
	if f.runs.Load() == 0 {
		t.Fatal("calibration ran nothing")
	}
	g := &modelled{}
	if m, err := calibrate(g, file); err != nil || m != n || g.runs.Load() != 0 {
		t.Errorf("from file: %+v %v after %d runs, want %+v without running", m, err, g.runs.Load(), n)
	}
	if err := os.WriteFile(file, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := calibrate(g, file); err != nil || g.runs.Load() == 0 {
		t.Errorf("corrupt file: %v, %d runs, want a new measurement", err, g.runs.Load())
	}
	if m, err := calibrate(&modelled{}, file); err != nil || m.GFLOPS != n.GFLOPS {
		t.Errorf("the corrupt file was not rewritten: %+v %v", m, err)
	}
}

// TestCalibrate checks the backend's Calibrate: plausible figures, kept
// for its later calls (a second measurement would time differently), and
// no file with CalibrationFile "-".
func TestCalibrate(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", dir)
	t.Setenv("HOME", dir)
	b, err := New("cpu", Options{Threads: 1, CalibrationFile: "-"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	n, err := b.Calibrate()
	if err != nil {
		t.Fatal(err)
	}
	if !(n.GFLOPS > 0 && n.MemGBps > 0 && n.DispatchUs > 0) {
		t.Errorf("calibrated %+v, want positive figures", n)
	}
	if m, err := b.Calibrate(); err != nil || m != n {
		t.Errorf("second call: %+v %v, want %+v", m, err, n)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*")); len(files) != 0 {
		t.Errorf("CalibrationFile \"-\" wrote %v", files)
	}
}
