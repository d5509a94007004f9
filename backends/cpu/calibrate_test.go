package cpu

import (
	"math"
	"os"
	"path/filepath"
	"slices"
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
	n, err := calibrate(f, file, testStamp)
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
	if m, err := calibrate(g, file, testStamp); err != nil || m != n || g.runs.Load() != 0 {
		t.Errorf("from file: %+v %v after %d runs, want %+v without running", m, err, g.runs.Load(), n)
	}
	if err := os.WriteFile(file, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := calibrate(g, file, testStamp); err != nil || g.runs.Load() == 0 {
		t.Errorf("corrupt file: %v, %d runs, want a new measurement", err, g.runs.Load())
	}
	if m, err := calibrate(&modelled{}, file, testStamp); err != nil || m.GFLOPS != n.GFLOPS {
		t.Errorf("the corrupt file was not rewritten: %+v %v", m, err)
	}
}

var testStamp = calibStamp{Method: calibMethod, Library: "/lib/libx.so 10 20", Build: "go1 m@v"}

// TestCalibrationStale: a stored figure of another library file, build or
// measuring method is measured again and replaced, as is one of the old
// file format (a bare Nominal, no stamp); the same stamp reads it.
func TestCalibrationStale(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cal.json")
	old := `{"model|arch||2": {"GFLOPS": 690, "MemGBps": 10, "DispatchUs": 1}}`
	if err := os.WriteFile(file, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	other := func(f func(*calibStamp)) calibStamp { s := testStamp; f(&s); return s }
	for _, c := range []struct {
		name    string
		stamp   calibStamp
		measure bool
	}{
		{"old format", testStamp, true},
		{"same stamp", testStamp, false},
		{"other library", other(func(s *calibStamp) { s.Library = "/lib/libx.so 10 21" }), true},
		{"other build", other(func(s *calibStamp) { s.Build = "go1 m@v2" }), true},
		{"other method", other(func(s *calibStamp) { s.Method = 1 }), true},
		{"back to the first", testStamp, true},
	} {
		m := &modelled{}
		n, err := calibrate(m, file, c.stamp)
		if err != nil {
			t.Fatal(err)
		}
		if ran := m.runs.Load() > 0; ran != c.measure {
			t.Errorf("%s: measured %v, want %v", c.name, ran, c.measure)
		}
		if math.Abs(n.GFLOPS/50-1) > 1e-4 {
			t.Errorf("%s: %v GFLOP/s, want the measured 50, not the stored 690", c.name, n.GFLOPS)
		}
	}
	if s := readCalibration(file); len(s) != 1 || s["model|arch||2"].calibStamp != testStamp {
		t.Errorf("file holds %+v, want the one entry of the last stamp", s)
	}
}

// zeroSkipper is a backend whose matmul takes 1 µs when either input is
// all zeros and FLOPs at 20 GFLOP/s otherwise, as gonum's sgemm skips
// zero entries: calibrating it must see the 20.
type zeroSkipper struct {
	modelled
	data map[backends.Buffer][]byte
}

func (z *zeroSkipper) Write(b backends.Buffer, src []byte) (backends.Timing, error) {
	z.data[b] = append([]byte(nil), src...)
	return backends.Timing{}, nil
}

func (z *zeroSkipper) Run(s kernels.Spec, in []backends.Buffer, _ backends.Buffer) (backends.Timing, error) {
	us := 1.0
	zero := false
	for _, b := range in {
		zero = zero || !slices.ContainsFunc(z.data[b], func(c byte) bool { return c != 0 })
	}
	if s.Op == kernels.MatMul && !zero {
		us += float64(s.Work().FLOPs) / 20e3
	}
	return backends.Timing{Duration: time.Duration(us * float64(time.Microsecond)), Clock: backends.Simulated}, nil
}

// TestCalibrationRandomInputs: the calibration's matmul runs on nonzero
// data, so a kernel that skips zeros is timed at its real speed.
func TestCalibrationRandomInputs(t *testing.T) {
	z := &zeroSkipper{data: map[backends.Buffer][]byte{}}
	n, err := measure(z)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(n.GFLOPS/20-1) > 1e-3 {
		t.Errorf("calibrated %.4g GFLOP/s, want 20 (inputs all zero?)", n.GFLOPS)
	}
}

// TestCalibrateGonumOneCore: gonum's pure-Go sgemm on one thread cannot
// pass one core's f32 peak (8-wide FMA, two ports, at 6 GHz: 192
// GFLOP/s); timed on zero-filled inputs it reported 660-690.
func TestCalibrateGonumOneCore(t *testing.T) {
	b, err := New("cpu1", DefaultOptions().WithGonum(true).WithThreads(1).WithCalibrationFile("-"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	n, err := b.Calibrate()
	if err != nil {
		t.Fatal(err)
	}
	if !(n.GFLOPS > 0 && n.GFLOPS < 192) {
		t.Errorf("gonum on one thread calibrated at %.4g GFLOP/s, want (0, 192)", n.GFLOPS)
	}
	t.Logf("%.3g GFLOP/s", n.GFLOPS)
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
