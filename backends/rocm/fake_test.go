//go:build cgo

package rocm

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

var (
	fakeOnce sync.Once
	fakeRoot string
	fakeErr  error
)

// fakeLibs builds testdata/fakehip.c and fakerocblas.c with gcc, once per
// test binary, into <root>/blas (with a rocBLAS kernel library for
// gfx90a) and <root>/nokernels (without one). It returns root.
func fakeLibs(t testing.TB) string {
	t.Helper()
	fakeOnce.Do(func() {
		fakeRoot, fakeErr = os.MkdirTemp("", "fakehip")
		if fakeErr != nil {
			return
		}
		for _, dir := range []string{"blas", "nokernels"} {
			d := filepath.Join(fakeRoot, dir)
			if fakeErr = os.MkdirAll(d, 0o755); fakeErr != nil {
				return
			}
			for _, b := range [][2]string{{"fakehip.c", "libamdhip64.so.6"}, {"fakerocblas.c", "librocblas.so.0"}} {
				out, err := exec.Command("gcc", "-shared", "-fPIC", "-O1", "-o", filepath.Join(d, b[1]), filepath.Join("testdata", b[0]), "-lm").CombinedOutput()
				if err != nil {
					fakeErr = fmt.Errorf("gcc %s: %v: %s", b[0], err, out)
					return
				}
			}
		}
		lib := filepath.Join(fakeRoot, "blas", "rocblas", "library")
		if fakeErr = os.MkdirAll(lib, 0o755); fakeErr == nil {
			fakeErr = os.WriteFile(filepath.Join(lib, "TensileLibrary_lazy_gfx90a.dat"), []byte("fake"), 0o644)
		}
	})
	if fakeErr != nil {
		t.Fatalf("building the fake HIP library: %v", fakeErr)
	}
	return fakeRoot
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fakeRoot != "" {
		os.RemoveAll(fakeRoot)
	}
	os.Exit(code)
}

func fakeOptions(t *testing.T, dir string) Options {
	return DefaultOptions().WithPlatform(AMD).WithLibDirs(filepath.Join(fakeLibs(t), dir)).WithCacheDir(t.TempDir())
}

func openFake(t *testing.T, o Options) *Device {
	t.Helper()
	d, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// runSpec uploads fixed-seed inputs, runs s and returns the output and
// the reference output.
func runSpec(t *testing.T, d backends.Backend, s kernels.Spec) (got, want []byte, tm backends.Timing) {
	t.Helper()
	got, want, tm, err := runRef(d, s, 1)
	if err != nil {
		t.Fatalf("%v: %v", s, err)
	}
	return got, want, tm
}

func TestOpenNoLibrary(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(DefaultOptions().WithLibDirs(dir))
	var ue *backends.UnavailableError
	if !errors.As(err, &ue) || !errors.Is(err, backends.ErrUnavailable) {
		t.Fatalf("Open with no library: %v, want *UnavailableError", err)
	}
	for _, want := range []string{dir + "/libamdhip64.so.6", dir + "/libamdhip64.so.5", dir + "/libcudart.so.12", "cannot open shared object file"} {
		if !strings.Contains(ue.Reason, want) {
			t.Errorf("reason %q does not name %q", ue.Reason, want)
		}
	}
}

func TestFakeInfo(t *testing.T) {
	d := openFake(t, fakeOptions(t, "blas"))
	info := d.Info()
	want := backends.Info{Name: "rocm", Kind: backends.GPU, Platform: "amd", Model: "Fake Instinct MI-0", Arch: "gfx90a", Runtime: "hip 5.2.21153", Memory: 1 << 34}
	if info != want {
		t.Errorf("Info = %+v, want %+v", info, want)
	}
	if path, reason := d.BLAS(); !strings.HasSuffix(path, "librocblas.so.0") {
		t.Errorf("BLAS = %q, %q; want the fake rocBLAS", path, reason)
	}
	if libs := d.Libraries(); libs["compiler"] != libs["runtime"] {
		t.Errorf("Libraries = %v: want hiprtc resolved inside the runtime", libs)
	}
}

// TestFakeOps runs ops through the whole Go side (pool, staging, compile,
// module load, argument packing, launch, events) and checks the fake's
// C kernels' results against kernels.Reference.
func TestFakeOps(t *testing.T) {
	for _, noBLAS := range []bool{false, true} {
		d := openFake(t, fakeOptions(t, "blas").WithNoBLAS(noBLAS))
		specs := []kernels.Spec{
			{Op: kernels.Add, In: []kernels.Shape{{3, 5, 8}, {8}}},
			{Op: kernels.Mul, In: []kernels.Shape{{4, 6}, {4, 6}}},
			{Op: kernels.Scale, In: []kernels.Shape{{7, 9}}, Params: kernels.Params{Scale: -0.75}},
			{Op: kernels.SiLU, In: []kernels.Shape{{1000}}},
			{Op: kernels.Copy, DType: kernels.Q4_0, In: []kernels.Shape{{3, 64}}},
			{Op: kernels.Copy, DType: kernels.F16, In: []kernels.Shape{{5, 3}}},
			{Op: kernels.MatMul, In: []kernels.Shape{{2, 5, 7}, {7, 3}}},
			{Op: kernels.MatMul, In: []kernels.Shape{{2, 4, 6}, {2, 6, 5}}},
			{Op: kernels.KVAppend, In: []kernels.Shape{{2, 3, 7, 4}, {2, 2, 3, 4}}, Params: kernels.Params{Pos: 5}},
			{Op: kernels.Argmax, In: []kernels.Shape{{3, 2, 300}}},
			{Op: kernels.GetRows, DType: kernels.Q8_0, In: []kernels.Shape{{50, 64}, {2, 3}}},
			{Op: kernels.GetRows, In: []kernels.Shape{{9, 5}, {4}}},
			// A decoder's other ops, so that a decode step runs on the fake.
			{Op: kernels.SwiGLU, In: []kernels.Shape{{3, 50}, {3, 50}}},
			{Op: kernels.RMSNorm, In: []kernels.Shape{{3, 40}, {40}}, Params: kernels.Params{Eps: 1e-3}},
			{Op: kernels.RoPE, In: []kernels.Shape{{2, 3, 4, 8}}, Params: kernels.Params{Pos: 7}},
			{Op: kernels.QuantizedMatMul, DType: kernels.Q8_0, In: []kernels.Shape{{3, 64}, {5, 64}}},
			{Op: kernels.Attention, In: []kernels.Shape{{2, 4, 3, 8}, {2, 2, 9, 8}, {2, 2, 9, 8}}, Params: kernels.Params{Causal: true, Keys: 6}},
			{Op: kernels.Attention, In: []kernels.Shape{{1, 2, 1, 8}, {1, 2, 5, 8}, {1, 2, 5, 8}}, Params: kernels.Params{Scale: 0.3}},
		}
		for _, s := range specs {
			got, want, tm := runSpec(t, d, s)
			if err := compareF32(got, want, 1e-5); err != nil || !bytes.Equal(got[:len(got)%4], want[:len(want)%4]) {
				t.Errorf("noBLAS=%v %v: %v", noBLAS, s, err)
			}
			if tm.Clock != backends.DeviceEvents || tm.Duration < 0 {
				t.Errorf("%v: timing %+v, want device events", s, tm)
			}
		}
		live, cached := d.Pool()
		if live != 0 || cached == 0 {
			t.Errorf("pool after freeing every buffer: live %d cached %d, want 0 and > 0", live, cached)
		}
	}
}

// TestFakeKVAppendInPlace: KVAppend with the cache as its output (the
// decoder's KV cache kept on the device) writes the new rows at Pos and
// leaves the other positions as they were, through the argument packing
// and launch of the real Go side.
func TestFakeKVAppendInPlace(t *testing.T) {
	checkKVAppendInPlace(t, openFake(t, fakeOptions(t, "blas")))
}

// checkKVAppendInPlace runs a KVAppend whose output is its cache on d.
func checkKVAppendInPlace(t *testing.T, d backends.Backend) {
	t.Helper()
	s := kernels.Spec{Op: kernels.KVAppend, In: []kernels.Shape{{1, 2, 4, 2}, {1, 1, 2, 2}}, Params: kernels.Params{Pos: 2}}
	cache, rows := make([]float32, 16), []float32{-1, -2, -3, -4}
	for i := range cache {
		cache[i] = float32(i)
	}
	cb, _ := d.Alloc(64)
	rb, _ := d.Alloc(16)
	defer cb.Free()
	defer rb.Free()
	if _, err := d.Write(cb, kernels.AsBytes(cache)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Write(rb, kernels.AsBytes(rows)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Run(s, []backends.Buffer{cb, rb}, cb); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 16)
	if _, err := d.Read(kernels.AsBytes(got), cb); err != nil {
		t.Fatal(err)
	}
	want := []float32{0, 1, 2, 3, -1, -2, 6, 7, 8, 9, 10, 11, -3, -4, 14, 15}
	if !slices.Equal(got, want) {
		t.Errorf("cache after KVAppend in place %v, want %v", got, want)
	}
}

// TestFakeArgmax: Argmax through the Go side's plan, argument packing
// and launch gives the reference's indices, on rows with ties, negative
// values only, NaN and -0 (the decoder's greedy token, read back as B
// indices instead of B rows of logits).
func TestFakeArgmax(t *testing.T) { checkArgmax(t, openFake(t, fakeOptions(t, "blas"))) }

// checkArgmax runs an Argmax over rows of ties, negatives and NaN on d
// and compares its indices with kernels.Reference's and hand values.
func checkArgmax(t *testing.T, d backends.Backend) {
	t.Helper()
	const n = 700 // more than one block of threads per row
	nan := float32(math.NaN())
	x := make([]float32, 5*n)
	for i := range n {
		x[i] = float32(i%7 - 3)     // row 0: ties at 3 from index 6 on
		x[n+i] = -float32(i%5 + 1)  // row 1: all negative, -1 first at 0
		x[2*n+i] = nan              // row 2: all NaN
		x[3*n+i] = float32(-i) - 10 // row 3: NaN first, then the largest at 1
		x[4*n+i] = float32(math.Copysign(0, -1))
	}
	x[3*n] = nan
	x[4*n+n-1] = 0.5 // row 4: the largest last, after -0s
	s := kernels.Spec{Op: kernels.Argmax, In: []kernels.Shape{{5, n}}}
	want := make([]float32, 5)
	if err := kernels.Reference(s, [][]byte{kernels.AsBytes(x)}, kernels.AsBytes(want)); err != nil {
		t.Fatal(err)
	}
	if hand := []float32{6, 0, 0, 1, n - 1}; !slices.Equal(want, hand) {
		t.Fatalf("reference %v, want %v", want, hand)
	}
	xb, err := d.Alloc(s.InBytes(0))
	if err != nil {
		t.Fatal(err)
	}
	defer xb.Free()
	ob, err := d.Alloc(s.OutBytes())
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Free()
	if _, err := d.Write(xb, kernels.AsBytes(x)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Run(s, []backends.Buffer{xb}, ob); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 5)
	if _, err := d.Read(kernels.AsBytes(got), ob); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("Argmax on %s: %v, want %v", d.Info().Name, got, want)
	}
}

// TestFakeGetRows: GetRows through the Go side's plan, argument packing
// and launch gives the reference's rows, for tables of every dtype.
func TestFakeGetRows(t *testing.T) { checkGetRows(t, openFake(t, fakeOptions(t, "blas"))) }

// checkGetRows runs GetRows on d over a [37, 64] table in each dtype,
// with indices of rank 1 and 2 that repeat rows and take the first, the
// last and -0 (row 0), and compares the rows with kernels.Reference's:
// exactly, both decoding the same values.
func checkGetRows(t *testing.T, d backends.Backend) {
	t.Helper()
	const v, dim = 37, 64
	negZero := float32(math.Copysign(0, -1))
	for _, dt := range []kernels.DType{kernels.F32, kernels.F16, kernels.Q8_0, kernels.Q4_0} {
		for _, c := range []struct {
			idx   []float32
			shape kernels.Shape
		}{
			{[]float32{5, 0, v - 1, 5}, kernels.Shape{4}},
			{[]float32{3, 3, 3, negZero, v - 1, 1}, kernels.Shape{2, 3}},
		} {
			s := kernels.Spec{Op: kernels.GetRows, DType: dt, In: []kernels.Shape{{v, dim}, c.shape}}
			in, err := specInputs(s, 3)
			if err != nil {
				t.Fatal(err)
			}
			in[1] = kernels.AsBytes(c.idx)
			got, _, err := runWith(d, s, in)
			if err != nil {
				t.Fatalf("%v: %v", s, err)
			}
			want := make([]byte, s.OutBytes())
			if err := kernels.Reference(s, in, want); err != nil {
				t.Fatal(err)
			}
			if err := compareF32(got, want, 0); err != nil {
				t.Errorf("%v, indices %v on %s: %v", s, c.idx, d.Info().Name, err)
			}
		}
	}
}

// TestFakeGetRowsBadIndex: an index that is not a row gives a row of NaN.
func TestFakeGetRowsBadIndex(t *testing.T) {
	checkGetRowsBadIndex(t, openFake(t, fakeOptions(t, "blas")))
}

// checkGetRowsBadIndex runs GetRows on d with indices that are no row of
// the table (fractional, negative, past the end, NaN, infinite) among
// good ones: where the reference fails with kernels.ErrIndex, a kernel,
// which cannot, writes each bad index's row as NaN and the good ones'
// rows as the table's.
func checkGetRowsBadIndex(t *testing.T, d backends.Backend) {
	t.Helper()
	const v, dim = 4, 32
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	idx := []float32{1, 3.5, -1, v, nan, inf, -inf, 1e10, 2}
	row := []float32{1, -1, -1, -1, -1, -1, -1, -1, 2} // -1: not a row
	s := kernels.Spec{Op: kernels.GetRows, DType: kernels.Q8_0, In: []kernels.Shape{{v, dim}, {len(idx)}}}
	in, err := specInputs(s, 4)
	if err != nil {
		t.Fatal(err)
	}
	in[1] = kernels.AsBytes(idx)
	if err := kernels.Reference(s, in, make([]byte, s.OutBytes())); !errors.Is(err, kernels.ErrIndex) {
		t.Fatalf("reference: %v, want ErrIndex", err)
	}
	got, _, err := runWith(d, s, in)
	if err != nil {
		t.Fatalf("%v: %v", s, err)
	}
	good := make([]float32, len(row))
	for k, r := range row {
		good[k] = max(r, 0)
	}
	want := make([]byte, s.OutBytes())
	if err := kernels.Reference(s, [][]byte{in[0], kernels.AsBytes(good)}, want); err != nil {
		t.Fatal(err)
	}
	g, w := kernels.AsF32(got), kernels.AsF32(want)
	for k, r := range row {
		for j := k * dim; j < (k+1)*dim; j++ {
			switch {
			case r < 0 && !math.IsNaN(float64(g[j])):
				t.Fatalf("index %v on %s: element %d of its row is %v, want NaN (no row)", idx[k], d.Info().Name, j-k*dim, g[j])
			case r >= 0 && g[j] != w[j]:
				t.Fatalf("index %v on %s: element %d of its row is %v, want %v", idx[k], d.Info().Name, j-k*dim, g[j], w[j])
			}
		}
	}
}

// TestFakeArgmaxFeedsGetRows: a GetRows queued after an Argmax reads the
// indices that Argmax writes, as a decoder takes the next token's
// embedding on the device, and is issued before they are there.
func TestFakeArgmaxFeedsGetRows(t *testing.T) {
	t.Setenv("FAKEHIP_KERNEL_US", "0")
	checkArgmaxFeedsGetRows(t, openFake(t, fakeOptions(t, "blas")), func(on bool) {
		if on {
			os.Setenv("FAKEHIP_KERNEL_US", "20000")
		} else {
			os.Setenv("FAKEHIP_KERNEL_US", "0")
		}
	})
}

// checkArgmaxFeedsGetRows queues on d the Argmax of logits [3, 50] into
// an index buffer that holds -1 (no row: a GetRows run before it would
// write NaN rows), then a GetRows of a Q8_0 table [50, 64] by those
// indices, after the Argmax's event, and compares the rows read back with
// the reference's for the reference's indices. slow(true), where the
// runtime allows it (nil elsewhere), makes the Argmax slow, and the
// GetRows must then not be done once queued.
func checkArgmaxFeedsGetRows(t *testing.T, d *Device, slow func(bool)) {
	t.Helper()
	const b, v, dim = 3, 50, 64
	argmax := kernels.Spec{Op: kernels.Argmax, In: []kernels.Shape{{b, v}}}
	rows := kernels.Spec{Op: kernels.GetRows, DType: kernels.Q8_0, In: []kernels.Shape{{v, dim}, {b}}}
	logits, err := specInputs(argmax, 5)
	if err != nil {
		t.Fatal(err)
	}
	table, err := specInputs(rows, 6)
	if err != nil {
		t.Fatal(err)
	}
	bufs := make([]backends.Buffer, 4) // logits, table, indices, rows
	for i, data := range [][]byte{logits[0], table[0], f32Bytes(-1, -1, -1), nil} {
		n := int64(len(data))
		if data == nil {
			n = rows.OutBytes()
		}
		if bufs[i], err = d.Alloc(n); err != nil {
			t.Fatal(err)
		}
		defer bufs[i].Free()
		if data != nil {
			if _, err := d.Write(bufs[i], data); err != nil {
				t.Fatal(err)
			}
		}
	}
	runSpec(t, d, rows) // compile first, so that the queued GetRows is issued at once
	if slow != nil {
		slow(true)
	}
	aev, err := d.RunAsync(argmax, bufs[:1], bufs[2], nil)
	if slow != nil {
		slow(false)
	}
	if err != nil {
		t.Fatal(err)
	}
	gev, err := d.RunAsync(rows, bufs[1:3], bufs[3], []backends.Event{aev})
	if err != nil {
		t.Fatal(err)
	}
	if slow != nil && gev.Done() {
		t.Fatal("GetRows is done as soon as it is queued after a slow Argmax: the launch waited for its indices")
	}
	got := make([]byte, rows.OutBytes())
	if _, err := d.Read(got, bufs[3]); err != nil {
		t.Fatal(err)
	}
	if _, err := gev.Wait(); err != nil {
		t.Fatal(err)
	}
	idx, want := make([]byte, argmax.OutBytes()), make([]byte, rows.OutBytes())
	if err := kernels.Reference(argmax, logits, idx); err != nil {
		t.Fatal(err)
	}
	if err := kernels.Reference(rows, [][]byte{table[0], idx}, want); err != nil {
		t.Fatal(err)
	}
	if err := compareF32(got, want, 0); err != nil {
		t.Errorf("GetRows of the Argmax's indices %v on %s: %v", kernels.AsF32(idx), d.Info().Name, err)
	}
}

// TestFakeConcurrent runs ops from 8 goroutines at once through the fake
// runtime (under -race in CI): every result matches the reference.
func TestFakeConcurrent(t *testing.T) {
	d := openFake(t, fakeOptions(t, "blas"))
	specs := []kernels.Spec{
		{Op: kernels.Add, In: []kernels.Shape{{3, 5, 8}, {8}}},
		{Op: kernels.SiLU, In: []kernels.Shape{{1000}}},
		{Op: kernels.MatMul, In: []kernels.Shape{{2, 5, 7}, {7, 3}}},
	}
	if err := runConcurrently(d, specs, 8, 20, 1e-5); err != nil {
		t.Fatal(err)
	}
}

// TestFakeEventTiming checks that a Run's Timing is what the events
// measured around the launch: at least the fake kernel's 3 ms, at most the
// wall clock around Run.
func TestFakeEventTiming(t *testing.T) {
	t.Setenv("FAKEHIP_KERNEL_US", "3000")
	d := openFake(t, fakeOptions(t, "blas"))
	s := kernels.Spec{Op: kernels.Scale, In: []kernels.Shape{{64}}, Params: kernels.Params{Scale: 2}}
	runSpec(t, d, s) // compile first
	in, _ := d.Alloc(256)
	out, _ := d.Alloc(256)
	start := time.Now()
	tm, err := d.Run(s, []backends.Buffer{in}, out)
	wall := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if tm.Duration < 3*time.Millisecond || tm.Duration > wall {
		t.Errorf("event timing %v, want between 3ms and the wall clock %v", tm.Duration, wall)
	}
	wt, err := d.Write(in, make([]byte, 256))
	if err != nil || wt.Clock != backends.DeviceEvents || wt.Duration >= 3*time.Millisecond {
		t.Errorf("Write timing %+v, %v: want a short device-event timing (no kernel in it)", wt, err)
	}
}

func TestFakeNoDevice(t *testing.T) {
	t.Setenv("FAKEHIP_NO_DEVICE", "1")
	_, err := Open(fakeOptions(t, "blas"))
	var ue *backends.UnavailableError
	if !errors.As(err, &ue) || !strings.Contains(ue.Reason, "no device") || !strings.Contains(ue.Reason, "100") {
		t.Fatalf("Open with no device: %v, want unavailable naming hipErrorNoDevice (100)", err)
	}
}

func TestFakeOutOfMemory(t *testing.T) {
	t.Setenv("FAKEHIP_MEM_LIMIT", fmt.Sprint(3<<20))
	d := openFake(t, fakeOptions(t, "blas"))
	_, err := d.Alloc(4 << 20)
	var de *backends.DeviceError
	if !errors.Is(err, backends.ErrOutOfMemory) || !errors.As(err, &de) || !strings.Contains(err.Error(), "hipMalloc") {
		t.Fatalf("Alloc beyond the limit: %v, want a DeviceError wrapping ErrOutOfMemory", err)
	}
	// A cached 2 MiB block is released when a 2.5 MiB allocation would
	// not fit beside it.
	b, err := d.Alloc(2 << 20)
	if err != nil {
		t.Fatal(err)
	}
	b.Free()
	b.Free() // idempotent
	if _, cached := d.Pool(); cached != 2<<20 {
		t.Fatalf("cached %d, want 2 MiB", cached)
	}
	c, err := d.Alloc(5 << 19)
	if err != nil {
		t.Fatalf("Alloc after trimming the cache: %v", err)
	}
	c.Free()
}

func TestFakeDeviceLost(t *testing.T) {
	d := openFake(t, fakeOptions(t, "blas"))
	s := kernels.Spec{Op: kernels.SiLU, In: []kernels.Shape{{16}}}
	in, _ := d.Alloc(64)
	out, _ := d.Alloc(64)
	t.Setenv("FAKEHIP_LAUNCH_ERROR", "719")
	_, err := d.Run(s, []backends.Buffer{in}, out)
	var de *backends.DeviceError
	if !errors.Is(err, backends.ErrDeviceLost) || !errors.As(err, &de) || de.Op != "SiLU" {
		t.Fatalf("Run with a launch failure: %v, want DeviceError{Op: SiLU} wrapping ErrDeviceLost", err)
	}
	if _, err := d.Alloc(64); !errors.Is(err, backends.ErrDeviceLost) {
		t.Errorf("Alloc after the loss: %v, want ErrDeviceLost", err)
	}
	t.Setenv("FAKEHIP_LAUNCH_ERROR", "1")
	d2 := openFake(t, fakeOptions(t, "blas"))
	in2, _ := d2.Alloc(64)
	out2, _ := d2.Alloc(64)
	_, err = d2.Run(s, []backends.Buffer{in2}, out2)
	var ce *CallError
	if !errors.As(err, &ce) || ce.Code != 1 || ce.Call != "hipModuleLaunchKernel" || errors.Is(err, backends.ErrDeviceLost) {
		t.Errorf("Run with an invalid-value launch: %v, want a CallError, not device lost", err)
	}
}

// TestFakeCompileCache checks that binaries land in the cache under
// <arch>-<sha256>.bin and that a later device loads them without
// compiling (the compiler is then made to fail).
func TestFakeCompileCache(t *testing.T) {
	o := fakeOptions(t, "blas")
	s := kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{32}, {32}}}
	d := openFake(t, o)
	runSpec(t, d, s)
	d.Close()
	files, _ := filepath.Glob(filepath.Join(o.CacheDir, "gfx90a_sramecc+_xnack--*.bin"))
	if len(files) != 1 {
		t.Fatalf("cache holds %v, want one elementwise binary", files)
	}
	t.Setenv("FAKEHIP_COMPILE_FAIL", "1")
	got, want, _ := runSpec(t, openFake(t, o), s)
	if err := compareF32(got, want, 1e-6); err != nil {
		t.Errorf("from the cache: %v", err)
	}
	d3 := openFake(t, o.WithCacheDir(t.TempDir()))
	b, _ := d3.Alloc(128)
	_, err := d3.Run(s, []backends.Buffer{b, b}, b)
	if !errors.Is(err, ErrCompile) || !strings.Contains(err.Error(), "compile refused") {
		t.Errorf("Run with a failing compiler: %v, want ErrCompile with the log", err)
	}
}

func TestFakeBLASFallbacks(t *testing.T) {
	d := openFake(t, fakeOptions(t, "nokernels"))
	if path, reason := d.BLAS(); path != "" || !strings.Contains(reason, "no kernel library for gfx90a") {
		t.Errorf("BLAS without kernel files = %q, %q", path, reason)
	}
	t.Setenv("FAKEROCBLAS_ABORT", "1")
	d2 := openFake(t, fakeOptions(t, "blas"))
	path, reason := d2.BLAS()
	if path != "" || !strings.Contains(reason, "probe failed") {
		t.Fatalf("BLAS with an aborting rocBLAS = %q, %q; want the probe to fail", path, reason)
	}
	got, want, _ := runSpec(t, d2, kernels.Spec{Op: kernels.MatMul, In: []kernels.Shape{{3, 4}, {4, 5}}})
	if err := compareF32(got, want, 1e-5); err != nil {
		t.Errorf("tiled fallback: %v", err)
	}
}

func TestFakeBadCalls(t *testing.T) {
	d := openFake(t, fakeOptions(t, "blas"))
	other := openFake(t, fakeOptions(t, "blas"))
	s := kernels.Spec{Op: kernels.SiLU, In: []kernels.Shape{{16}}}
	a, _ := d.Alloc(64)
	small, _ := d.Alloc(32)
	foreign, _ := other.Alloc(64)
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"foreign input", second(d.Run(s, []backends.Buffer{foreign}, a)), backends.ErrForeignBuffer},
		{"host buffer", second(d.Run(s, []backends.Buffer{backends.NewHostBuffer(nil, 64)}, a)), backends.ErrForeignBuffer},
		{"short output", second(d.Run(s, []backends.Buffer{a}, small)), kernels.ErrBufferSize},
		{"input count", second(d.Run(s, nil, a)), kernels.ErrBufferSize},
		{"opaque", second(d.Run(kernels.Spec{Op: kernels.Opaque, In: []kernels.Shape{{4}}}, []backends.Buffer{a}, a)), backends.ErrUnsupported},
		{"invalid spec", d.Supports(kernels.Spec{Op: kernels.Add, In: []kernels.Shape{{4}, {3}}}), kernels.ErrInvalidSpec},
		{"write size", second(d.Write(a, make([]byte, 10))), kernels.ErrBufferSize},
		{"negative alloc", second(d.Alloc(-1)), kernels.ErrBufferSize},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	a.Free()
	if _, err := d.Write(a, make([]byte, 64)); !errors.Is(err, backends.ErrForeignBuffer) {
		t.Errorf("Write to a freed buffer: %v", err)
	}
	d.Close()
	if _, err := d.Alloc(4); !errors.Is(err, ErrClosed) {
		t.Errorf("Alloc after Close: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func second[T any](_ T, err error) error { return err }

func TestRegistry(t *testing.T) {
	if _, err := backends.Open("rocm:bogus"); !errors.Is(err, ErrOptions) {
		t.Errorf("Open(rocm:bogus): %v, want ErrOptions", err)
	}
	if _, err := backends.Open("rocm:nvidia:7"); !errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("Open(rocm:nvidia:7): %v, want unavailable", err)
	}
}

// TestFakeNilAfter: a nil Event in after is no dependency
// (backends.Queuer), for kernels and copies: it panicked in awaitForeign.
func TestFakeNilAfter(t *testing.T) {
	d := openFake(t, fakeOptions(t, "blas"))
	s := kernels.Spec{Op: kernels.Scale, In: []kernels.Shape{{64}}, Params: kernels.Params{Scale: 2}}
	in, _ := d.Alloc(256)
	out, _ := d.Alloc(256)
	nils := []backends.Event{nil}
	wev, err := d.WriteAsync(in, make([]byte, 256), nils)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := d.RunAsync(s, []backends.Buffer{in}, out, append(nils, wev))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ev.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ReadAsync(make([]byte, 256), out, nils); err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}
