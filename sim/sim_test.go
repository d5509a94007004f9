package sim

import (
	"bytes"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

func TestProfilesValid(t *testing.T) {
	want := []string{"mi300x", "mi250", "rx7900xtx", "h100", "igpu", "slowlink", "pcie3x8", "pcie4x16", "pcie5x16", "cpu2", "cpu64", "desktop16"}
	if got := Profiles(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("Profiles() = %v, want %v", got, want)
	}
	for _, n := range want {
		p := MustProfile(n)
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", n, err)
		}
		if in := p.Info(); in.Kind != p.Kind || in.Name != "sim:"+n {
			t.Errorf("%s: info %+v", n, in)
		}
	}
	if _, err := LookupProfile("nope"); !errors.Is(err, ErrUnknownProfile) {
		t.Errorf("LookupProfile(nope) = %v", err)
	}
	// Open says so too: unavailable, and unknown (cmd/infer's usage error).
	if _, err := Open("nope", DefaultOptions()); !errors.Is(err, ErrUnknownProfile) || !errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("Open(nope) = %v, want ErrUnknownProfile and backends.ErrUnavailable", err)
	}
	bad := MustProfile("h100")
	bad.LinkGBps = 0
	if err := bad.Validate(); !errors.Is(err, ErrInvalidProfile) {
		t.Errorf("a GPU without a link validated: %v", err)
	}
}

func TestBaseUsByHand(t *testing.T) {
	// cpu2, Add of two 1024×1024 f32: 1 MFLOP at 120 GFLOP/s × 0.1 =
	// 87.38 µs; 12 MiB + 16 KiB half-bandwidth at 20 GB/s × 0.8 = 787.46 µs;
	// plus 2 µs launch.
	s := kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{1024, 1024}, {1024, 1024}}}
	want := 2 + (3*4*1024*1024+16*1024)/(20e3*0.8)
	if got := MustProfile("cpu2").BaseUs(s); math.Abs(got-want) > 1e-9 {
		t.Errorf("cpu2 Add BaseUs = %v, want %v", got, want)
	}
	// Argmax is a memory-bound row reduction: h100, [16, 32000] (greedy
	// decoding of 16 sequences), 2,048,064 bytes + 2 MiB half-bandwidth
	// at 3,350 GB/s × 0.85 against 512,000 comparisons at 67 TFLOP/s ×
	// 0.3, plus 8 µs launch. On every GPU with a link it runs in less than
	// the read-back of the logits it spares.
	am := kernels.Spec{Op: kernels.Argmax, DType: kernels.F32, In: []kernels.Shape{{16, 32000}}}
	want = 8 + (16*32000*4+16*4+2<<20)/(3350e3*0.85)
	if got := MustProfile("h100").BaseUs(am); math.Abs(got-want) > 1e-9 {
		t.Errorf("h100 Argmax BaseUs = %v, want %v", got, want)
	}
	for _, name := range GPUProfiles() {
		p := MustProfile(name)
		if link := p.LinkUs(16 * 32000 * 4); !p.Shared && p.DeviceUs(am) >= link {
			t.Errorf("%s: Argmax %.1f µs on the device, the logits' read-back %.1f", name, p.DeviceUs(am), link)
		}
	}
	// Small matmuls run far below peak: a 1-row h100 matmul reaches under
	// 15% of the throughput of a 4096-row one.
	h := MustProfile("h100")
	eff := func(m int) float64 {
		s := kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{m, 4096}, {4096, 4096}}}
		return float64(s.Work().FLOPs) / (h.BaseUs(s) - h.LaunchUs)
	}
	if r := eff(1) / eff(4096); r > 0.15 {
		t.Errorf("h100 1-row matmul at %.2f of the 4096-row throughput", r)
	}
	// A wrong datasheet changes what policies see, never the truth.
	scaled := h.WithNominalScale(0.1)
	s4 := kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{64, 64}, {64, 64}}}
	if scaled.Info().Nominal.GFLOPS != h.Nominal.GFLOPS/10 || scaled.BaseUs(s4) != h.BaseUs(s4) {
		t.Errorf("scaled nominal %+v, base %v against %v", scaled.Info().Nominal, scaled.BaseUs(s4), h.BaseUs(s4))
	}
	if MustProfile("h100").WithNominalScale(0.1).LinkUs(1000) != h.LinkUs(1000) {
		t.Errorf("WithNominalScale changed the true link")
	}
	if MustProfile("igpu").LinkUs(1<<20) != 0 {
		t.Errorf("igpu shares host memory: no link time")
	}
}

func TestDeviceMatchesReference(t *testing.T) {
	b, err := backends.Open("sim:h100")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if in := b.Info(); in.Name != "sim:h100" || in.Kind != backends.GPU || in.Platform != "sim" {
		t.Errorf("Info = %+v", in)
	}
	s := kernels.Spec{Op: kernels.MatMul, DType: kernels.F32, In: []kernels.Shape{{3, 5}, {5, 4}}}
	av, bv := make([]float32, 15), make([]float32, 20)
	for i := range av {
		av[i] = float32(i) - 7
	}
	for i := range bv {
		bv[i] = 0.5 * float32(i%7)
	}
	ab, _ := b.Alloc(60)
	bb, _ := b.Alloc(80)
	ob, _ := b.Alloc(48)
	if _, err := b.Write(ab, kernels.AsBytes(av)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Write(bb, kernels.AsBytes(bv)); err != nil {
		t.Fatal(err)
	}
	tm, err := b.Run(s, []backends.Buffer{ab, bb}, ob)
	if err != nil {
		t.Fatal(err)
	}
	if tm.Clock != backends.Simulated || tm.Duration <= 0 {
		t.Errorf("timing %+v", tm)
	}
	got := make([]byte, 48)
	rt, err := b.Read(got, ob)
	if err != nil {
		t.Fatal(err)
	}
	if want := MustProfile("h100").LinkUs(48); math.Abs(rt.Micros()-want) > 1e-3 {
		t.Errorf("read of 48 B took %v µs, want the link's %v", rt.Micros(), want)
	}
	want := make([]byte, 48)
	if err := kernels.Reference(s, [][]byte{kernels.AsBytes(av), kernels.AsBytes(bv)}, want); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Run result %v, reference %v", kernels.AsF32(got), kernels.AsF32(want))
	}
	// wrong buffer size, foreign buffer, opaque op
	if _, err := b.Run(s, []backends.Buffer{ab, ab}, ob); !errors.Is(err, kernels.ErrBufferSize) {
		t.Errorf("wrong size: %v", err)
	}
	other, _ := Open("h100", DefaultOptions())
	ox, _ := other.Alloc(60)
	if _, err := b.Run(s, []backends.Buffer{ox, bb}, ob); !errors.Is(err, backends.ErrForeignBuffer) {
		t.Errorf("foreign buffer: %v", err)
	}
	if err := b.Supports(kernels.Spec{Op: kernels.Opaque, Params: kernels.Params{Name: "x"}}); !errors.Is(err, backends.ErrUnsupported) {
		t.Errorf("opaque supported: %v", err)
	}
	if _, err := backends.Open("sim:nope"); !errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("sim:nope: %v", err)
	}
}

// durations runs s n times on a fresh device and returns the µs.
func durations(t *testing.T, prof string, opt Options, s kernels.Spec, n int) ([]float64, []error) {
	t.Helper()
	d, err := Open(prof, opt.WithSkipCompute(true))
	if err != nil {
		t.Fatal(err)
	}
	var in []backends.Buffer
	for i := range s.In {
		b, err := d.Alloc(s.InBytes(i))
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, b)
	}
	out, _ := d.Alloc(s.OutBytes())
	us := make([]float64, n)
	errs := make([]error, n)
	for i := range n {
		tm, err := d.Run(s, in, out)
		us[i], errs[i] = tm.Micros(), err
	}
	return us, errs
}

var rms = kernels.Spec{Op: kernels.RMSNorm, DType: kernels.F32, In: []kernels.Shape{{64, 4096}, {4096}}}

func TestDeviceDeterministicAndCalibrated(t *testing.T) {
	for _, p := range Profiles() {
		a, _ := durations(t, p, DefaultOptions().WithSeed(3), rms, 4000)
		b, _ := durations(t, p, DefaultOptions().WithSeed(3), rms, 4000)
		c, _ := durations(t, p, DefaultOptions().WithSeed(4), rms, 4000)
		if !equalF(a, b) || equalF(a, c) {
			t.Errorf("%s: same seed must repeat, another must differ", p)
		}
		prof := MustProfile(p)
		if w := a[0] / prof.BaseUs(rms); w < prof.WarmupFactor*0.5 {
			t.Errorf("%s: first run %.1f× the base, warm-up %v", p, w, prof.WarmupFactor)
		}
		// Mean of the rest against MeanUs: tolerance 4 standard errors of
		// the noise and spikes.
		var sum float64
		for _, v := range a[1:] {
			sum += v
		}
		mean := sum / float64(len(a)-1)
		sd := prof.MeanUs(rms) * math.Sqrt(math.Expm1(prof.Sigma*prof.Sigma)+prof.SpikeProb*prof.SpikeFactor*prof.SpikeFactor)
		if tol := 4 * sd / math.Sqrt(float64(len(a)-1)); math.Abs(mean-prof.MeanUs(rms)) > tol+0.002 {
			t.Errorf("%s: mean %.3f µs, model %.3f ± %.3f", p, mean, prof.MeanUs(rms), tol)
		}
	}
}

func equalF(a, b []float64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

func TestDeviceEvents(t *testing.T) {
	base, _ := durations(t, "mi250", DefaultOptions(), rms, 20)
	ev := []Event{
		{At: 5, Kind: Throttle, Factor: 3},
		{At: 8, Kind: TransientError, Span: 2},
		{At: 12, Kind: Contention, Factor: 2, Span: 2},
		{At: 16, Kind: DeviceLost},
	}
	got, errs := durations(t, "mi250", DefaultOptions().WithEvents(ev...), rms, 20)
	for i := range 20 {
		var want float64
		var wantErr error
		switch {
		case i < 5:
			want = base[i]
		case i == 8 || i == 9:
			wantErr = backends.ErrTransient
		case i == 12 || i == 13:
			want = base[i] * 6
		case i >= 16:
			wantErr = backends.ErrDeviceLost
		default:
			want = base[i] * 3
		}
		if wantErr != nil {
			if !errors.Is(errs[i], wantErr) {
				t.Errorf("op %d: error %v, want %v", i, errs[i], wantErr)
			}
			continue
		}
		// A failed op draws no noise, so later draws shift: compare the
		// unshifted ops only.
		if i < 8 && math.Abs(got[i]-want) > 1e-3*want {
			t.Errorf("op %d: %v µs, want %v", i, got[i], want)
		}
		if errs[i] != nil {
			t.Errorf("op %d: %v", i, errs[i])
		}
	}
	d, _ := Open("rx7900xtx", DefaultOptions().WithEvents(Event{At: 0, Kind: OutOfMemory}))
	if _, err := d.Alloc(16); !errors.Is(err, backends.ErrOutOfMemory) {
		t.Errorf("scheduled OOM: %v", err)
	}
	d2, _ := Open("rx7900xtx", DefaultOptions())
	if _, err := d2.Alloc(25 << 30); !errors.Is(err, backends.ErrOutOfMemory) {
		t.Errorf("25 GiB on a 24 GiB device: %v", err)
	}
	if _, err := New(MustProfile("h100"), DefaultOptions().WithEvents(Event{Kind: Throttle})); !errors.Is(err, ErrInvalidEvent) {
		t.Errorf("throttle without factor accepted: %v", err)
	}
}

// TestContentionSlowsCopies: a contention event slows a device's copies,
// over its link or, where it shares host memory, as a memcpy through the
// memory the second tenant shares too; a throttle slows neither.
func TestContentionSlowsCopies(t *testing.T) {
	for _, name := range []string{"h100", "igpu", "cpu2"} {
		copyUs := func(ev ...Event) float64 {
			d, err := Open(name, DefaultOptions().WithEvents(ev...))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := d.Alloc(1 << 20)
			tm, err := d.Write(b, make([]byte, 1<<20))
			if err != nil {
				t.Fatal(err)
			}
			return float64(tm.Duration)
		}
		base := copyUs()
		if got := copyUs(Event{Kind: Contention, Factor: 2}); math.Abs(got-2*base) > 1 {
			t.Errorf("%s: a 1 MiB copy under ×2 contention took %v ns, want %v", name, got, 2*base)
		}
		if got := copyUs(Event{Kind: Throttle, Factor: 2}); got != base {
			t.Errorf("%s: a 1 MiB copy under a ×2 throttle took %v ns, want %v", name, got, base)
		}
	}
}

// drain reads a workload to its end.
func drain(w Workload) []Op {
	var ops []Op
	for {
		op, ok := w.Next()
		if !ok {
			return ops
		}
		ops = append(ops, op)
	}
}

func TestWorkloadsDeterministic(t *testing.T) {
	build := map[string]func(seed uint64) (Workload, error){
		"decode":  func(uint64) (Workload, error) { return Decode(Llama3_8B, 16, 4000, 5000) },
		"prefill": func(s uint64) (Workload, error) { return Prefill(Qwen25_05B, 5000, s) },
		"mixed":   func(s uint64) (Workload, error) { return MixedServing(Llama32_1B, 20000, s, ServingOptions{}) },
	}
	for name, mk := range build {
		w1, err := mk(1)
		if err != nil {
			t.Fatal(err)
		}
		w2, _ := mk(1)
		w3, _ := mk(2)
		a, b, c := drain(w1), drain(w2), drain(w3)
		if len(a) != len(b) || len(a) == 0 {
			t.Fatalf("%s: %d and %d ops", name, len(a), len(b))
		}
		same := func(x, y []Op) bool {
			for i := range x {
				if specKey(x[i].Spec) != specKey(y[i].Spec) || x[i].Key != y[i].Key || x[i].Bucket != y[i].Bucket || x[i].ActBytes != y[i].ActBytes {
					return false
				}
			}
			return true
		}
		if !same(a, b) {
			t.Errorf("%s: same seed, different streams", name)
		}
		if name != "decode" && same(a, c) {
			t.Errorf("%s: seeds 1 and 2 give the same stream", name)
		}
		for i, op := range a {
			if err := op.Spec.Validate(); err != nil {
				t.Fatalf("%s op %d: %v", name, i, err)
			}
		}
	}
}

func TestForwardPassShapes(t *testing.T) {
	m := Llama3_8B
	ops := m.forward(step{batch: 1, seq: 1, kv: 256})
	if len(ops) != m.Layers*15+3 {
		t.Fatalf("%d ops in a forward pass, want %d", len(ops), m.Layers*15+3)
	}
	// Layer 0: RMSNorm, Q (4096→4096), K and V (4096→1024: 8 KV heads × 128).
	if s := ops[1].spec; s.Op != kernels.QuantizedMatMul || !s.In[1].Equal(kernels.Shape{4096, 4096}) || s.DType != kernels.Q4_0 {
		t.Errorf("q projection %v", s)
	}
	if s := ops[2].spec; !s.In[1].Equal(kernels.Shape{1024, 4096}) {
		t.Errorf("k projection %v", s)
	}
	if s := ops[6].spec; s.Op != kernels.Attention || !s.In[0].Equal(kernels.Shape{1, 32, 1, 128}) || !s.In[1].Equal(kernels.Shape{1, 8, 256, 128}) {
		t.Errorf("attention %v", s)
	}
	if s := ops[11].spec; !s.In[1].Equal(kernels.Shape{14336, 4096}) {
		t.Errorf("gate projection %v", s)
	}
	if s := ops[len(ops)-2].spec; !s.In[1].Equal(kernels.Shape{128256, 4096}) {
		t.Errorf("lm head %v", s)
	}
	// Mixed serving varies the batch over time, within the capture sizes.
	w, _ := MixedServing(Llama32_1B, 100000, 1, ServingOptions{})
	batches := map[int]bool{}
	for _, op := range drain(w) {
		if op.Spec.Op == kernels.Attention {
			q, kv := op.Spec.In[0], op.Spec.In[1]
			if q[2] == 1 {
				batches[q[0]] = true
			}
			if kv[2] < MinSeq || kv[2] > MaxSeq {
				t.Fatalf("kv length %d", kv[2])
			}
		}
	}
	if len(batches) < 3 {
		t.Errorf("decode batch sizes seen: %v, want a varying batch", batches)
	}
	for b := range batches {
		if padBatch(b) != b {
			t.Errorf("batch %d is not a capture size", b)
		}
	}
	for _, bad := range []func() (Workload, error){
		func() (Workload, error) { return Decode(Llama3_8B, 0, 128, 10) },
		func() (Workload, error) { return Decode(Llama3_8B, 1, 9000, 10) },
		func() (Workload, error) { return Prefill(Llama3_8B, 0, 1) },
		func() (Workload, error) { return MixedServing(Llama3_8B, 10, 1, ServingOptions{Arrivals: -1}) },
	} {
		if _, err := bad(); !errors.Is(err, ErrInvalidWorkload) {
			t.Errorf("bad workload accepted: %v", err)
		}
	}
}

func TestLoadTable(t *testing.T) {
	f, err := os.Open("testdata/small.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := LoadTable(f, "small.csv")
	if err != nil {
		t.Fatal(err)
	}
	if tab.Len() != 6 || strings.Join(tab.Backends(), ",") != "rocm,cpu" {
		t.Fatalf("%d rows, backends %v", tab.Len(), tab.Backends())
	}
	// Zipf with s = 1 over 6 rows: row r drawn ∝ 1/(r+1).
	w, err := tab.Workload(60000, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	ops := drain(w)
	for _, op := range ops {
		counts[specKey(op.Spec)]++
	}
	h := 1 + 1.0/2 + 1.0/3 + 1.0/4 + 1.0/5 + 1.0/6
	for r, row := range tab.rows {
		p := 1 / float64(r+1) / h
		got := float64(counts[specKey(row.spec)]) / 60000
		if math.Abs(got-p) > 4*math.Sqrt(p*(1-p)/60000) {
			t.Errorf("row %d (%s) drawn %.4f, want %.4f", r, row.label, got, p)
		}
	}
	if ops[0].Spec.Op == kernels.Opaque || tab.rows[5].spec.Op != kernels.Opaque || tab.rows[5].spec.Params.Bytes != 262144 {
		t.Errorf("aten::cat must be opaque with its bytes: %v", tab.rows[5].spec)
	}
}

func TestLoadTableErrors(t *testing.T) {
	head := "op,shape,backend,mean_us,std_us,n\n"
	cases := []struct{ csv, want string }{
		{"op,shape,backend,mean_us,std_us,nope\n", "t.csv:1: unknown column \"nope\""},
		{"op,shape,backend,mean_us,std_us\n", "t.csv:1: missing column \"n\""},
		{head + "MatMul,2x3;3x4,gpu,10,1\n", "t.csv:2: 5 fields, want 6"},
		{head + "Add,4;4,gpu,ten,1,3\n", "t.csv:2: mean_us \"ten\""},
		{head + "Add,4;4,gpu,-3,1,3\n", "t.csv:2: mean_us \"-3\""},
		{head + "Add,4;4,gpu,3,-1,3\n", "t.csv:2: std_us \"-1\""},
		{head + "Add,4;4,gpu,3,1,0\n", "t.csv:2: n \"0\""},
		{head + "MatMul,2x3;4x4,gpu,3,1,2\n", "t.csv:2: kernels: invalid spec"},
		{head + "Add,4;4x,gpu,3,1,2\n", "t.csv:2: shape \"4;4x\""},
		{head + "Add,4;4,,3,1,2\n", "t.csv:2: empty backend"},
		// These loaded and gave NaN or infinite totals.
		{head + "Add,4;4,gpu,1e300,1,2\n", "t.csv:2: mean_us \"1e300\""},
		{head + "Add,4;4,gpu,5e-324,1,2\n", "t.csv:2: mean_us \"5e-324\""},
		{head + "Add,4;4,gpu,3,1e300,2\n", "t.csv:2: std_us \"1e300\""},
		{head + "Add,4;4,gpu,3,NaN,2\n", "t.csv:2: std_us \"NaN\""},
		{head + "Add,4;4,gpu,1e-3,5e-324,2\nAdd,4;4,cpu,1e12,1e15,2\n", "t.csv:2: std_us \"5e-324\""},
		{head + "Add,4;4,gpu,1e-3,0,2\nAdd,4;4,cpu,1e12,1e15,2\n", "t.csv:3: std_us \"1e15\""},
		{"", "t.csv: no header"},
	}
	for _, c := range cases {
		_, err := LoadTable(strings.NewReader(c.csv), "t.csv")
		if !errors.Is(err, ErrBadTable) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.csv, err, c.want)
		}
	}
	tab, err := LoadTable(strings.NewReader(head+"Add,4;4,gpu,3,,2\nAdd,8;8,cpu,3,,2\n"), "t.csv")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tab.Workload(10, 1, 1); !errors.Is(err, ErrBadTable) {
		t.Errorf("incomplete table made a workload: %v", err)
	}
}

func FuzzLoadTable(f *testing.F) {
	b, _ := os.ReadFile("testdata/small.csv")
	f.Add(string(b))
	f.Add("op,shape,backend,mean_us,std_us,n\nAttention,1x2x3x4;1x1x3x4;1x1x3x4,g,1,,1\n")
	f.Add("\ufeff# backend g: kind=gpu gflops=3\r\nop,shape,backend,mean_us,std_us,n\r\nk,\"M=1,N=2\",g,1e12,1e12,\r\nk,\"M=1,N=2\",g,1e-3,,\r\n")
	f.Fuzz(func(t *testing.T, s string) {
		tab, err := LoadTable(strings.NewReader(s), "fuzz")
		if !checkLoaded(t, tab, err, false) {
			return
		}
		tab.Arms()
	})
}

// checkLoaded is what a fuzzed reader must give (and whether it gave a
// table): an error wrapping ErrBadTable, or a table whose every spec is
// valid and whose cells (every one when complete) hold a mean within
// [MinTableUs, MaxTableUs] and a finite spread.
func checkLoaded(t *testing.T, tab *Table, err error, complete bool) bool {
	t.Helper()
	if err != nil {
		if !errors.Is(err, ErrBadTable) {
			t.Fatalf("error %v does not wrap ErrBadTable", err)
		}
		return false
	}
	for i, r := range tab.rows {
		if err := r.spec.Validate(); err != nil {
			t.Fatalf("accepted invalid spec %v: %v", r.spec, err)
		}
		for _, c := range tab.cells[i] {
			if (complete || c.ok) && !(c.ok && c.mean >= MinTableUs && c.mean <= MaxTableUs && c.sigma >= 0 && c.sigma < 10) {
				t.Fatalf("%s: cell %+v", r.label, c)
			}
		}
	}
	return true
}

// TestOutOfMemoryOnAlloc: an OutOfMemory event fails Span allocations
// (each failed Alloc is one of the attempts), then the device allocates
// again: a device out of memory on Alloc must recover.
func TestOutOfMemoryOnAlloc(t *testing.T) {
	d, err := Open("h100", DefaultOptions().WithEvents(Event{At: 0, Kind: OutOfMemory, Span: 2}))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for i := range 2 {
		if _, err := d.Alloc(64); !errors.Is(err, backends.ErrOutOfMemory) {
			t.Fatalf("alloc %d: %v, want out of memory", i, err)
		}
	}
	b, err := d.Alloc(64)
	if err != nil {
		t.Fatalf("alloc after the event's span: %v", err)
	}
	b.Free()
}

// TestMoEBranchesByProjection: a MoE layer's branches (the shared expert
// and the active ones) come by projection after the router: every gate,
// every up, every SwiGLU reading its own gate and up, every down reading
// its own SwiGLU.
func TestMoEBranchesByProjection(t *testing.T) {
	m := Qwen15MoE
	w, err := Decode(m, 1, 1024, 400)
	if err != nil {
		t.Fatal(err)
	}
	var ops []Op
	for {
		op, ok := w.Next()
		if !ok {
			break
		}
		ops = append(ops, op)
	}
	router := -1
	for i, op := range ops {
		if s := op.Spec; len(s.In) == 2 && s.In[1][0] == m.Experts {
			router = i
			break
		}
	}
	n := 1 + min(m.Experts, m.TopK) // the shared expert and the active ones, at batch 1
	if router < 0 || router+1+4*n > len(ops) {
		t.Fatalf("router at %d of %d ops", router, len(ops))
	}
	block := ops[router+1 : router+1+4*n]
	for i, op := range block {
		kind, branch := i/n, i%n
		s := op.Spec
		switch kind {
		case 0, 1:
			if s.Op != kernels.QuantizedMatMul || s.In[1][1] != m.Hidden {
				t.Fatalf("op %d (branch %d): %v, want a gate or up projection", i, branch, s)
			}
		case 2: // its gate is 2n ops back, its up n
			if s.Op != kernels.SwiGLU || len(op.After) != 2 || op.After[0] != 2*n || op.After[1] != n {
				t.Fatalf("op %d (branch %d): %v after %v, want the SwiGLU of its gate and up (%d and %d back)", i, branch, s, op.After, 2*n, n)
			}
		case 3:
			if s.Op != kernels.QuantizedMatMul || s.In[1][0] != m.Hidden || len(op.After) != 1 || op.After[0] != n {
				t.Fatalf("op %d (branch %d): %v after %v, want the down projection of its SwiGLU (%d back)", i, branch, s, op.After, n)
			}
		}
	}
}
