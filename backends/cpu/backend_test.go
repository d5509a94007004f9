package cpu

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/internal/host"
	"github.com/adaptsched/adaptsched/kernels"
)

// sh is shorthand for a list of shapes.
func sh(s ...kernels.Shape) []kernels.Shape { return s }

// testSpecs covers every executable op, with shapes chosen to reach each
// code path: matmuls large enough to be split into row panels, a decode
// matmul (M = 1) split into column panels, batched and broadcast inputs,
// both quantized formats, GQA attention with and without the causal mask.
func testSpecs() []kernels.Spec {
	f32 := kernels.F32
	return []kernels.Spec{
		{Op: kernels.MatMul, DType: f32, In: sh(kernels.Shape{3, 5}, kernels.Shape{5, 7})},
		{Op: kernels.MatMul, DType: f32, In: sh(kernels.Shape{70, 130}, kernels.Shape{130, 90})},
		{Op: kernels.MatMul, DType: f32, In: sh(kernels.Shape{1, 512}, kernels.Shape{512, 1024})},
		{Op: kernels.MatMul, DType: f32, In: sh(kernels.Shape{2, 33, 40}, kernels.Shape{40, 20})},
		{Op: kernels.MatMul, DType: f32, In: sh(kernels.Shape{2, 40, 64}, kernels.Shape{2, 64, 50})},
		{Op: kernels.QuantizedMatMul, DType: kernels.Q8_0, In: sh(kernels.Shape{1, 64}, kernels.Shape{96, 64})},
		{Op: kernels.QuantizedMatMul, DType: kernels.Q4_0, In: sh(kernels.Shape{40, 128}, kernels.Shape{80, 128})},
		{Op: kernels.QuantizedMatMul, DType: kernels.Q8_0, In: sh(kernels.Shape{2, 17, 64}, kernels.Shape{33, 64})},
		{Op: kernels.Softmax, DType: f32, In: sh(kernels.Shape{7, 33})},
		{Op: kernels.Softmax, DType: f32, In: sh(kernels.Shape{4, 3, 100})},
		{Op: kernels.Attention, DType: f32, In: sh(kernels.Shape{1, 4, 5, 16}, kernels.Shape{1, 2, 9, 16}, kernels.Shape{1, 2, 9, 16})},
		{Op: kernels.Attention, DType: f32, In: sh(kernels.Shape{1, 4, 5, 16}, kernels.Shape{1, 2, 9, 16}, kernels.Shape{1, 2, 9, 16}), Params: kernels.Params{Causal: true}},
		{Op: kernels.Attention, DType: f32, In: sh(kernels.Shape{2, 2, 3, 8}, kernels.Shape{2, 2, 3, 8}, kernels.Shape{2, 2, 3, 8}), Params: kernels.Params{Scale: 0.3}},
		{Op: kernels.Add, DType: f32, In: sh(kernels.Shape{4, 10}, kernels.Shape{4, 10})},
		{Op: kernels.Add, DType: f32, In: sh(kernels.Shape{3, 4, 10}, kernels.Shape{10})},
		{Op: kernels.Mul, DType: f32, In: sh(kernels.Shape{3, 4, 10}, kernels.Shape{4, 10})},
		{Op: kernels.Scale, DType: f32, In: sh(kernels.Shape{5, 7}), Params: kernels.Params{Scale: 0.5}},
		{Op: kernels.RMSNorm, DType: f32, In: sh(kernels.Shape{6, 32}, kernels.Shape{32})},
		{Op: kernels.LayerNorm, DType: f32, In: sh(kernels.Shape{6, 32}, kernels.Shape{32}, kernels.Shape{32}), Params: kernels.Params{Eps: 1e-3}},
		{Op: kernels.RoPE, DType: f32, In: sh(kernels.Shape{5, 4, 16}), Params: kernels.Params{Pos: 3}},
		{Op: kernels.RoPE, DType: f32, In: sh(kernels.Shape{2, 3, 2, 8}), Params: kernels.Params{RopeBase: 500000}},
		{Op: kernels.SiLU, DType: f32, In: sh(kernels.Shape{9, 13})},
		{Op: kernels.GELU, DType: f32, In: sh(kernels.Shape{9, 13})},
		{Op: kernels.SwiGLU, DType: f32, In: sh(kernels.Shape{9, 13}, kernels.Shape{9, 13})},
		{Op: kernels.Dequantize, DType: kernels.Q8_0, In: sh(kernels.Shape{4, 64})},
		{Op: kernels.Dequantize, DType: kernels.Q4_0, In: sh(kernels.Shape{4, 64})},
		{Op: kernels.Dequantize, DType: kernels.F16, In: sh(kernels.Shape{3, 10})},
		{Op: kernels.Copy, DType: f32, In: sh(kernels.Shape{3, 10})},
		{Op: kernels.Copy, DType: kernels.F16, In: sh(kernels.Shape{3, 10})},
		{Op: kernels.Transpose, DType: f32, In: sh(kernels.Shape{5, 7})},
		{Op: kernels.Transpose, DType: f32, In: sh(kernels.Shape{2, 3, 5, 7})},
		{Op: kernels.KVAppend, DType: f32, In: sh(kernels.Shape{2, 2, 9, 16}, kernels.Shape{2, 3, 2, 16}), Params: kernels.Params{Pos: 4}},
		{Op: kernels.Argmax, DType: f32, In: sh(kernels.Shape{3, 1000})},
		{Op: kernels.GetRows, DType: kernels.Q8_0, In: sh(kernels.Shape{1000, 64}, kernels.Shape{3})},
		{Op: kernels.Attention, DType: f32, In: sh(kernels.Shape{1, 4, 1, 16}, kernels.Shape{1, 2, 9, 16}, kernels.Shape{1, 2, 9, 16}), Params: kernels.Params{Causal: true, Keys: 6}},
	}
}

// randInputs returns random inputs for s in their storage formats.
func randInputs(t testing.TB, r *rand.Rand, s kernels.Spec) [][]byte {
	t.Helper()
	in := make([][]byte, len(s.In))
	for i, shape := range s.In {
		v := randSlice(r, int(shape.Elements()))
		if n := s.IndexRows(i); n > 0 {
			for j := range v {
				v[j] = float32(r.IntN(n))
			}
		}
		if dt := s.InDType(i); dt != kernels.F32 {
			q, err := kernels.Quantize(dt, v)
			if err != nil {
				t.Fatalf("%v: quantize input %d: %v", s, i, err)
			}
			in[i] = q
			continue
		}
		in[i] = kernels.AsBytes(v)
	}
	return in
}

// runOn runs s on b through Alloc, Write, Run and Read, and checks the
// output against kernels.Reference.
func runOn(t testing.TB, b backends.Backend, s kernels.Spec, in [][]byte) {
	t.Helper()
	if err := runAndCheck(b, s, in); err != nil {
		t.Fatal(err)
	}
}

// runAndCheck is runOn returning its failure, for goroutines other than
// the test's.
func runAndCheck(b backends.Backend, s kernels.Spec, in [][]byte) error {
	bufs := make([]backends.Buffer, len(in))
	for i, d := range in {
		buf, err := b.Alloc(int64(len(d)))
		if err != nil {
			return fmt.Errorf("%v: alloc input %d: %w", s, i, err)
		}
		defer buf.Free()
		if _, err := b.Write(buf, d); err != nil {
			return fmt.Errorf("%v: write input %d: %w", s, i, err)
		}
		bufs[i] = buf
	}
	out, err := b.Alloc(s.OutBytes())
	if err != nil {
		return fmt.Errorf("%v: alloc output: %w", s, err)
	}
	defer out.Free()
	tm, err := b.Run(s, bufs, out)
	if err != nil {
		return fmt.Errorf("%v: run: %w", s, err)
	}
	if tm.Clock != backends.WallClock || tm.Duration <= 0 {
		return fmt.Errorf("%v: timing %+v, want a positive wall-clock duration", s, tm)
	}
	got := make([]byte, s.OutBytes())
	if _, err := b.Read(got, out); err != nil {
		return fmt.Errorf("%v: read: %w", s, err)
	}
	return compareReference(s, in, got)
}

// compareReference compares got with kernels.Reference's output: bytes
// exactly for a non-f32 output (Copy of f16), floats within 1e-3 of the
// output's largest magnitude otherwise (f32 sums in another order,
// OpenBLAS's FMA kernels).
func compareReference(s kernels.Spec, in [][]byte, got []byte) error {
	want := make([]byte, s.OutBytes())
	if err := kernels.Reference(s, in, want); err != nil {
		return fmt.Errorf("%v: reference: %w", s, err)
	}
	if s.OutDType() != kernels.F32 {
		if !bytes.Equal(got, want) {
			return fmt.Errorf("%v: output bytes differ from the reference", s)
		}
		return nil
	}
	g, w := kernels.AsF32(got), kernels.AsF32(want)
	scale := 1.0
	for _, x := range w {
		scale = max(scale, math.Abs(float64(x)))
	}
	for i := range w {
		if d := math.Abs(float64(g[i] - w[i])); !(d <= 1e-3*scale) {
			return fmt.Errorf("%v: out[%d] = %v, reference %v (scale %.3g)", s, i, g[i], w[i], scale)
		}
	}
	return nil
}

func openTest(t testing.TB, opts Options) *Backend {
	t.Helper()
	b, err := New("cpu-test", opts.WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestSpecsCoverCatalogue(t *testing.T) {
	seen := map[kernels.Op]bool{}
	for _, s := range testSpecs() {
		if err := s.Validate(); err != nil {
			t.Errorf("test spec %v: %v", s, err)
		}
		seen[s.Op] = true
	}
	for _, op := range kernels.Ops() {
		if !seen[op] {
			t.Errorf("no test spec for %v", op)
		}
	}
}

// Every op through the backend against kernels.Reference, on both matmul
// paths and with one and three threads (three does not divide the panels
// evenly).
func testOps(t *testing.T, opts Options, wantRuntime string) {
	forceSplit(t)
	for _, threads := range []int{1, 3} {
		b := openTest(t, opts.WithThreads(threads))
		if b.Info().Runtime != wantRuntime {
			t.Fatalf("runtime %q, want %q (%s)", b.Info().Runtime, wantRuntime, b.BLAS())
		}
		r := rand.New(rand.NewPCG(7, uint64(threads)))
		for _, s := range testSpecs() {
			if err := b.Supports(s); err != nil {
				t.Fatalf("Supports(%v) = %v", s, err)
			}
			in := randInputs(t, r, s)
			runOn(t, b, s, in)
		}
	}
}

func TestOpsCBLAS(t *testing.T) { testOps(t, DefaultOptions(), cblasOrSkip(t).runtime) }

func TestOpsGonum(t *testing.T) { testOps(t, DefaultOptions().WithGonum(true), "gonum") }

func TestCBLASIsOpenBLAS(t *testing.T) {
	p := cblasOrSkip(t)
	b := openTest(t, DefaultOptions())
	// make test installs libopenblas0 where it can (Makefile TEST_PKGS): the first
	// candidate must be the one that loaded.
	if p.runtime != "openblas" || b.BLAS() != "OpenBLAS (libopenblas.so.0)" {
		t.Fatalf("BLAS() = %q (runtime %q), want OpenBLAS (libopenblas.so.0)", b.BLAS(), p.runtime)
	}
}

func TestGonumReason(t *testing.T) {
	b := openTest(t, DefaultOptions().WithGonum(true))
	if got := b.BLAS(); got != "gonum (pure Go): forced by option" {
		t.Fatalf("BLAS() = %q", got)
	}
}

// TestLogOncePerPath: the line that names the matmul path reaches the
// first Logger given, once per process, however many backends open; one
// opened before without a Logger does not use it up.
func TestLogOncePerPath(t *testing.T) {
	loggedMu.Lock()
	clear(logged)
	loggedMu.Unlock()
	quiet, err := New("cpu-quiet", DefaultOptions().WithGonum(true).WithThreads(1))
	if err != nil {
		t.Fatal(err)
	}
	quiet.Close()
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, nil))
	for range 3 {
		b, err := New("cpu-log", DefaultOptions().WithGonum(true).WithLogger(l).WithThreads(1))
		if err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `"msg":"cpu: matmul through gonum (pure Go): forced by option"`) ||
		!strings.Contains(lines[0], `"runtime":"gonum"`) {
		t.Fatalf("log after three opens:\n%s\nwant one gonum line", buf.String())
	}
}

// TestNoDefaultLogging: without a Logger, the backend (opened directly or
// through the registry) writes nothing, not even to slog's default.
func TestNoDefaultLogging(t *testing.T) {
	loggedMu.Lock()
	clear(logged)
	loggedMu.Unlock()
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(prev)
	b, err := New("cpu-quiet", DefaultOptions().WithGonum(true).WithThreads(1))
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	r, err := backends.Open("cpu1")
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if buf.Len() != 0 {
		t.Errorf("the backend logged through slog.Default:\n%s", buf.String())
	}
}

func TestInfo(t *testing.T) {
	b := openTest(t, DefaultOptions().WithThreads(3))
	i := b.Info()
	if i.Name != "cpu-test" || i.Kind != backends.CPU || i.Platform != "host" || i.Arch != runtime.GOARCH ||
		i.Threads != 3 || !i.SharedMemory || i.Model == "" || i.Memory != 0 {
		t.Fatalf("Info() = %+v", i)
	}
	if want := host.Field("/proc/cpuinfo", "model name"); want != "" && i.Model != want {
		t.Fatalf("Model %q, /proc/cpuinfo says %q", i.Model, want)
	}
}

func TestNewInvalid(t *testing.T) {
	if _, err := New("cpu", DefaultOptions().WithThreads(-1)); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "-1 threads") {
		t.Fatalf("threads -1: %v", err)
	}
	if _, err := New("", DefaultOptions()); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("empty name: %v", err)
	}
}

func TestSupports(t *testing.T) {
	b := openTest(t, DefaultOptions())
	opaque := kernels.Spec{Op: kernels.Opaque, In: sh(kernels.Shape{4})}
	err := b.Supports(opaque)
	if !errors.Is(err, backends.ErrUnsupported) {
		t.Fatalf("Supports(Opaque) = %v, want ErrUnsupported", err)
	}
	bad := kernels.Spec{Op: kernels.MatMul, In: sh(kernels.Shape{2, 3}, kernels.Shape{4, 5})}
	if err := b.Supports(bad); !errors.Is(err, backends.ErrUnsupported) || !errors.Is(err, kernels.ErrInvalidSpec) {
		t.Fatalf("Supports(mismatched matmul) = %v", err)
	}
	// Running an Opaque op anyway fails with the kernels' reason.
	in, _ := b.Alloc(16)
	out, _ := b.Alloc(16)
	_, err = b.Run(opaque, []backends.Buffer{in}, out)
	var de *backends.DeviceError
	if !errors.As(err, &de) || de.Backend != "cpu-test" || !errors.Is(err, kernels.ErrNotExecutable) {
		t.Fatalf("Run(Opaque) = %v, want a DeviceError wrapping ErrNotExecutable", err)
	}
}

func TestAlloc(t *testing.T) {
	b := openTest(t, DefaultOptions())
	for _, n := range []int64{-1, math.MaxInt64, 1 << 62, maxAlloc() + 1} {
		if _, err := b.Alloc(n); !errors.Is(err, backends.ErrOutOfMemory) {
			t.Errorf("Alloc(%d) = %v, want ErrOutOfMemory", n, err)
		}
	}
	for _, n := range []int64{0, 1, 5, 4096} {
		buf, err := b.Alloc(n)
		if err != nil || buf.Size() != n {
			t.Fatalf("Alloc(%d) = %v, %v", n, buf, err)
		}
	}
}

func TestBufferSizes(t *testing.T) {
	b := openTest(t, DefaultOptions())
	buf, _ := b.Alloc(8)
	if _, err := b.Write(buf, make([]byte, 7)); !errors.Is(err, kernels.ErrBufferSize) {
		t.Errorf("Write 7 bytes into 8: %v", err)
	}
	if _, err := b.Read(make([]byte, 9), buf); !errors.Is(err, kernels.ErrBufferSize) {
		t.Errorf("Read 8 bytes into 9: %v", err)
	}
	s := kernels.Spec{Op: kernels.Softmax, In: sh(kernels.Shape{2, 3})}
	in, _ := b.Alloc(24)
	small, _ := b.Alloc(20)
	if _, err := b.Run(s, []backends.Buffer{in}, small); !errors.Is(err, kernels.ErrBufferSize) {
		t.Errorf("Run with a 20-byte output for 24: %v", err)
	}
	if _, err := b.Run(s, []backends.Buffer{small}, in); !errors.Is(err, kernels.ErrBufferSize) {
		t.Errorf("Run with a 20-byte input for 24: %v", err)
	}
	if _, err := b.Run(s, []backends.Buffer{in, in}, in); err == nil {
		t.Error("Run with two inputs for Softmax succeeded")
	}
	if _, err := b.Run(kernels.Spec{Op: kernels.Softmax}, nil, in); !errors.Is(err, kernels.ErrInvalidSpec) {
		t.Errorf("Run with an invalid spec: %v", err)
	}
}

func TestForeignBuffer(t *testing.T) {
	b := openTest(t, DefaultOptions())
	other := openTest(t, DefaultOptions())
	mine, _ := b.Alloc(24)
	theirs, _ := other.Alloc(24)
	freed, _ := b.Alloc(24)
	freed.Free()
	s := kernels.Spec{Op: kernels.Softmax, In: sh(kernels.Shape{2, 3})}
	for name, foreign := range map[string]backends.Buffer{"other backend": theirs, "freed": freed, "nil": nil} {
		check := func(what string, err error) {
			var de *backends.DeviceError
			if !errors.Is(err, backends.ErrForeignBuffer) || !errors.As(err, &de) {
				t.Errorf("%s, %s buffer: %v, want a DeviceError wrapping ErrForeignBuffer", what, name, err)
			}
		}
		_, err := b.Write(foreign, make([]byte, 24))
		check("Write", err)
		_, err = b.Read(make([]byte, 24), foreign)
		check("Read", err)
		_, err = b.Run(s, []backends.Buffer{foreign}, mine)
		check("Run input", err)
		_, err = b.Run(s, []backends.Buffer{mine}, foreign)
		check("Run output", err)
	}
}

// Many goroutines share one backend (the executor's case): every result
// must still match the reference, and -race must stay quiet.
func TestConcurrentRun(t *testing.T) {
	for name, opts := range map[string]Options{"default": DefaultOptions(), "gonum": DefaultOptions().WithGonum(true)} {
		t.Run(name, func(t *testing.T) {
			forceSplit(t)
			b := openTest(t, opts.WithThreads(2))
			specs := testSpecs()
			r := rand.New(rand.NewPCG(5, 99))
			inputs := make([][][]byte, len(specs))
			for i, s := range specs {
				inputs[i] = randInputs(t, r, s)
			}
			errs := make([]error, 8)
			var wg sync.WaitGroup
			for g := range errs {
				wg.Go(func() {
					for i := range 6 {
						k := (g*7 + i*3) % len(specs)
						if err := runAndCheck(b, specs[k], inputs[k]); err != nil {
							errs[g] = err
							return
						}
					}
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestOpenRegistered(t *testing.T) {
	cases := []struct {
		name     string
		threads  int
		infoName string
		gonum    bool
	}{
		{"cpu", runtime.NumCPU(), "cpu", false},
		{"cpu1", 1, "cpu1", false},
		{"cpu:gonum", runtime.NumCPU(), "cpu:gonum", true},
		{"cpu1:gonum", 1, "cpu1:gonum", true},
	}
	r := rand.New(rand.NewPCG(3, 4))
	s := kernels.Spec{Op: kernels.MatMul, In: sh(kernels.Shape{64, 96}, kernels.Shape{96, 80})}
	for _, c := range cases {
		b, err := backends.Open(c.name)
		if err != nil {
			t.Fatalf("Open(%q): %v", c.name, err)
		}
		i := b.Info()
		if i.Name != c.infoName || i.Threads != c.threads || (i.Runtime == "gonum") != (c.gonum || !cblasLoaded()) {
			t.Errorf("Open(%q).Info() = %+v", c.name, i)
		}
		if _, ok := b.(interface{ BLAS() string }); !ok {
			t.Errorf("Open(%q) has no BLAS method", c.name)
		}
		in := randInputs(t, r, s)
		runOn(t, b, s, in)
		b.Close()
		b.Close() // idempotent
	}
	if _, err := backends.Open("cpu:xyz"); !errors.Is(err, ErrUnknownArg) || !strings.Contains(err.Error(), `"xyz"`) {
		t.Fatalf(`Open("cpu:xyz") = %v`, err)
	}
}

// cblasLoaded reports whether this process found a CBLAS.
func cblasLoaded() bool { return selectPath(false).runtime != "gonum" }
