package sim

import (
	"encoding/csv"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// loadFile loads a perf table from testdata.
func loadFile(t *testing.T, path string) *Table {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := LoadTable(f, path)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// countRows counts the distinct (op, shape) pairs and the records of a CSV
// with encoding/csv alone, independently of LoadTable.
func countRows(t *testing.T, path string) (rows, records int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[[2]string]bool{}
	for _, r := range recs[1:] {
		seen[[2]string{r[0], r[1]}] = true
	}
	return len(seen), len(recs) - 1
}

// TestLoadTableReal loads the real tables of testdata/tables as they are
// (CRLF, blank std_us and n, free-text shapes, DeepBench's repeated
// shapes). The counts were taken independently as well, with Python's csv
// module: DeepBench 866 records, 421 distinct (op, shape); StarPU's mirage
// 98 records, 49 (op, shape).
func TestLoadTableReal(t *testing.T) {
	for _, c := range []struct {
		file             string
		rows, records    int
		distinctBuckets  int
		firstName, label string
	}{
		{"deepbench_knl_vs_titanx_pascal.csv", 421, 866, 421, "sgemm_fp32[M=1760,N=16,K=1760,AT=N,BT=N]", "cpu,gpu"},
		{"starpu_mirage.csv", 49, 98, 49, "chol_model_gemm[3 tiles 320x320 fp32 (derived) bytes=1228800]", "cpu,gpu"},
	} {
		path := "testdata/tables/" + c.file
		tab := loadFile(t, path)
		rows, records := countRows(t, path)
		if rows != c.rows || records != c.records {
			t.Fatalf("%s: independent count %d rows, %d records; want %d, %d", c.file, rows, records, c.rows, c.records)
		}
		if tab.Len() != c.rows || strings.Join(tab.Backends(), ",") != c.label {
			t.Errorf("%s: %d rows on %v, want %d on %s", c.file, tab.Len(), tab.Backends(), c.rows, c.label)
		}
		buckets := map[string]bool{}
		for _, r := range tab.rows {
			if r.spec.Op != kernels.Opaque || r.spec.In != nil || r.spec.Params.FLOPs != 0 || r.spec.Params.Bytes != 0 {
				t.Fatalf("%s: %s: want an opaque spec with a key and no work, got %v %+v", c.file, r.label, r.spec, r.spec.Params)
			}
			if err := r.spec.Validate(); err != nil {
				t.Fatal(err)
			}
			buckets[r.bucket] = true
		}
		// Distinct shapes are distinct buckets: none of them shares a
		// posterior with another (Table's doc).
		if len(buckets) != c.distinctBuckets {
			t.Errorf("%s: %d buckets, want %d", c.file, len(buckets), c.distinctBuckets)
		}
		if got := tab.rows[0].spec.Params.Name; got != c.firstName {
			t.Errorf("%s: first row named %q, want %q", c.file, got, c.firstName)
		}
		if _, err := tab.Workload(1000, 1, 1); err != nil {
			t.Errorf("%s: %v", c.file, err)
		}
	}
}

// TestLoadTablePools: DeepBench lists conv_fwd W=7,H=7,C=512,N=8 twice, on
// gpu at 381 and 359 µs with no deviation and no count. The pooled cell is
// the mixture of two lognormals of σ DefaultSpread: mean 370, E[x²] =
// (381² + 359²)·e^0.04 / 2, σ = √ln(E[x²]/370²) = 0.202197 (worked out
// separately with Python).
func TestLoadTablePools(t *testing.T) {
	tab := loadFile(t, "testdata/tables/deepbench_knl_vs_titanx_pascal.csv")
	spec := kernels.Spec{Op: kernels.Opaque, DType: kernels.F32, Params: kernels.Params{
		Name: "conv_fwd_fp32[W=7,H=7,C=512,N=8,K=512,filter_w(S)=3,filter_h(R)=3,pad_w=1,pad_h=1,stride_w=1,stride_h=1]"}}
	m, sg, ok := tab.truth(spec, 1)
	if !ok || math.Abs(m-370) > 1e-9 || math.Abs(sg-0.2021966034787918) > 1e-9 {
		t.Errorf("pooled gpu cell: mean %v σ %v (%v), want 370, 0.202197", m, sg, ok)
	}
	if m, sg, _ := tab.truth(spec, 0); m != 620 || math.Abs(sg-DefaultSpread) > 1e-9 {
		t.Errorf("pooled cpu cell of two equal means: %v σ %v, want 620, σ %v", m, sg, DefaultSpread)
	}
}

// TestLoadTableForms: a byte-order mark, CRLF, blank n, free-text shapes
// with and without work, and shapes in the dimension form.
func TestLoadTableForms(t *testing.T) {
	in := "\ufeffop,shape,backend,mean_us,std_us,n,flops,bytes\r\n" +
		"gemm,M=2 N=3,cpu,5,,,,\r\n" +
		"gemm,M=2 N=3,gpu,2,0,,,\r\n" +
		"gemm,M=4 N=3,cpu,9,1,3,48,96\r\n" +
		"gemm,M=4 N=3,gpu,4,1,3,48,96\r\n" +
		"gemm,2x3,cpu,5,,1,,\r\n" +
		"gemm,2x3,gpu,5,,1,,\r\n"
	tab, err := LoadTable(strings.NewReader(in), "t.csv")
	if err != nil {
		t.Fatal(err)
	}
	if tab.Len() != 3 {
		t.Fatalf("%d rows, want 3", tab.Len())
	}
	want := []kernels.Params{{Name: "gemm[M=2 N=3]"}, {Name: "gemm[M=4 N=3]", FLOPs: 48, Bytes: 96}, {Name: "gemm"}}
	for i, r := range tab.rows {
		if r.spec.Params != want[i] {
			t.Errorf("row %d: %+v, want %+v", i, r.spec.Params, want[i])
		}
	}
	if len(tab.rows[2].spec.In) != 1 || !tab.rows[2].spec.In[0].Equal(kernels.Shape{2, 3}) {
		t.Errorf("2x3 read as %v", tab.rows[2].spec.In)
	}
	if _, sg, _ := tab.truth(tab.rows[0].spec, 1); sg != 0 {
		t.Errorf("std 0 gave σ %v", sg)
	}
}

// TestLoadTableBounds: numbers out of range, denormals, NaN and Inf name
// the file and the line.
func TestLoadTableBounds(t *testing.T) {
	head := "op,shape,backend,mean_us,std_us,n\n#\n"
	cases := []struct{ row, want string }{
		{"x,a,g,1e300,,", `t.csv:3: mean_us "1e300"`},
		{"x,a,g,5e-324,,", `t.csv:3: mean_us "5e-324"`},
		{"x,a,g,1.1e12,,", `t.csv:3: mean_us "1.1e12"`},
		{"x,a,g,0.0009,,", `t.csv:3: mean_us "0.0009"`},
		{"x,a,g,NaN,,", `t.csv:3: mean_us "NaN"`},
		{"x,a,g,inf,,", `t.csv:3: mean_us "inf"`},
		{"x,a,g,1e11,2e12,", `t.csv:3: std_us "2e12"`},
		{"x,a,g,5,5e-324,", `t.csv:3: std_us "5e-324"`},
		{"x,a,g,5,501,", `t.csv:3: std_us "501"`},
		{"x,a,g,5,NaN,", `t.csv:3: std_us "NaN"`},
		{"x,a,g,5,,0", `t.csv:3: n "0"`},
		{"x,a,g,5,,1.5", `t.csv:3: n "1.5"`},
		{"x,\"a\x01\",g,5,,", `t.csv:3: "a\x01": want UTF-8 text without control characters`},
		{"x\xff,a,g,5,,", `t.csv:3: "x\xff": want UTF-8`},
	}
	for _, c := range cases {
		_, err := LoadTable(strings.NewReader(head+c.row+"\n"), "t.csv")
		if !errors.Is(err, ErrBadTable) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.row, err, c.want)
		}
	}
	tab, err := LoadTable(strings.NewReader(head+"x,a,g,1e12,1e12,\nx,a,c,1e-3,0.1,\n"), "t.csv")
	if err != nil {
		t.Fatalf("bounds themselves rejected: %v", err)
	}
	for r := range tab.rows {
		for _, c := range tab.cells[r] {
			if !(c.sigma >= 0) || math.IsInf(c.sigma, 0) {
				t.Errorf("σ %v at the bounds", c.sigma)
			}
		}
	}
}

// TestTableFigures: "# backend LABEL:" lines give a label its hardware
// figures; what they leave out keeps the base profile's.
func TestTableFigures(t *testing.T) {
	in := "# backend gpu: kind=gpu gflops=10974 membw_gbps=480\n" +
		"# backend acc: kind=cpu dispatch_us=0\n" +
		"# backend is what runs it (a comment, not figures)\n" +
		"op,shape,backend,mean_us,std_us,n\nx,a,gpu,5,,\nx,a,acc,6,,\nx,a,cpu7,7,,\n"
	tab, err := LoadTable(strings.NewReader(in), "t.csv")
	if err != nil {
		t.Fatal(err)
	}
	arms := tab.Arms()
	cpu := MustProfile("cpu2").Nominal
	gpu := RLXROCm
	gpu.GFLOPS, gpu.MemGBps = 10974, 480
	acc := cpu
	acc.DispatchUs = 0
	for i, want := range []struct {
		nom  backends.Nominal
		kind backends.Kind
	}{{gpu, backends.GPU}, {acc, backends.CPU}, {cpu, backends.CPU}} {
		if arms[i].Profile.Nominal != want.nom || arms[i].Profile.Kind != want.kind {
			t.Errorf("arm %s: %+v %v, want %+v %s", arms[i].Profile.Name, arms[i].Profile.Nominal, arms[i].Profile.Kind, want.nom, want.kind)
		}
	}
	head := "op,shape,backend,mean_us,std_us,n\nx,a,gpu,5,,\n"
	for _, c := range []struct{ in, want string }{
		{"# backend gpu: gflops=0\n" + head, `t.csv:1: backend "gpu": gflops "0"`},
		{"# backend gpu: gflops=1e300\n" + head, `t.csv:1: backend "gpu": gflops "1e300"`},
		{"# backend gpu: dispatch_us=-1\n" + head, `t.csv:1: backend "gpu": dispatch_us "-1"`},
		{"# backend gpu: tflops=3\n" + head, `t.csv:1: backend "gpu": unknown figure "tflops"`},
		{"# backend gpu: kind=tpu\n" + head, `t.csv:1: backend "gpu": kind "tpu"`},
		{"# backend gpu: kind=gpu kind=cpu\n" + head, `t.csv:1: backend "gpu": kind given twice`},
		{"# backend gpu: gflops=1 gflops=2\n" + head, `t.csv:1: backend "gpu": gflops given twice`},
		{"# backend gpu:\n" + head, `t.csv:1: backend figures: want`},
		{"# backend gpu: gflops=1\n#\n# backend gpu: gflops=2\n" + head, `t.csv:3: figures for backend "gpu" again (first on line 1)`},
		{head + "# backend gpx: gflops=1\n", `t.csv:3: figures for backend "gpx", which has no rows`},
	} {
		_, err := LoadTable(strings.NewReader(c.in), "t.csv")
		if !errors.Is(err, ErrBadTable) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.in, err, c.want)
		}
	}
}

// TestSetFigures gives figures to an arm from outside the file, as replay's
// -figures does for a StarPU model.
func TestSetFigures(t *testing.T) {
	tab, err := LoadStarPU(strings.NewReader(miniModel(t, nil)), "m.x")
	if err != nil {
		t.Fatal(err)
	}
	if err := tab.SetFigures("cuda0_impl0: gflops=515 membw_gbps=150 dispatch_us=7"); err != nil {
		t.Fatal(err)
	}
	want := RLXROCm
	want.GFLOPS, want.MemGBps, want.DispatchUs = 515, 150, 7
	if got := tab.Arms()[1].Profile.Nominal; got != want {
		t.Errorf("figures %+v, want %+v", got, want)
	}
	for _, c := range []struct{ in, want string }{
		{"cuda9_impl0: gflops=1", `m.x: figures for backend "cuda9_impl0", which has no rows (backends: cpu0_impl0, cuda0_impl0)`},
		{"cuda0_impl0 gflops=1", `m.x: backend figures: want "LABEL: key=value ..."`},
		{"cuda0_impl0: gflops=x", `m.x: backend "cuda0_impl0": gflops "x"`},
	} {
		if err := tab.SetFigures(c.in); !errors.Is(err, ErrBadTable) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.in, err, c.want)
		}
	}
}
