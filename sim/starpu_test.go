package sim

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// miniModel returns testdata/starpu/mini.hand with line n (1-based)
// replaced by each of edits' values.
func miniModel(t *testing.T, edits map[int]string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/starpu/mini.hand")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for n, v := range edits {
		lines[n-1] = v
	}
	return strings.Join(lines, "\n")
}

// TestLoadStarPUMini checks the hand-written model against values worked
// out by hand: σ = √ln(1 + (dev/mean)²), so 10 ± 1 → 0.0997513, 2 ± 0.5 →
// 0.2462207, 20 ± 0 → 0. Footprint 1234fedc gives flops nan on the CPU and
// 4000 on the GPU, and takes the 4000.
func TestLoadStarPUMini(t *testing.T) {
	tab, err := LoadStarPU(strings.NewReader(miniModel(t, nil)), "testdata/starpu/mini.hand")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tab.Backends(), ","); got != "cpu0_impl0,cuda0_impl0" || tab.Len() != 2 || len(tab.Dropped()) != 0 {
		t.Fatalf("arms %s, %d rows, dropped %v", got, tab.Len(), tab.Dropped())
	}
	want := []struct {
		name         string
		flops, bytes int64
		mean, sigma  [2]float64
	}{
		{"mini[0000abcd]", 1_000_000, 4096, [2]float64{10, 2}, [2]float64{0.0997513, 0.2462207}},
		{"mini[1234fedc]", 4000, 8192, [2]float64{20, 5}, [2]float64{0, 0.1980422}},
	}
	for i, w := range want {
		p := tab.rows[i].spec.Params
		if p.Name != w.name || p.FLOPs != w.flops || p.Bytes != w.bytes {
			t.Errorf("row %d: %+v, want %s flops %d bytes %d", i, p, w.name, w.flops, w.bytes)
		}
		for a := range 2 {
			c := tab.cells[i][a]
			if math.Abs(c.mean-w.mean[a]) > 1e-12 || math.Abs(c.sigma-w.sigma[a]) > 1e-6 {
				t.Errorf("row %d arm %d: %v σ %v, want %v σ %v", i, a, c.mean, c.sigma, w.mean[a], w.sigma[a])
			}
		}
	}
}

// TestLoadStarPUReal reads the four real models of mirage, one by one and
// as a directory. The expectations come from the files, independently of
// the reader: the arm labels are StarPU's own, from its "# Model for"
// comments; the rows per arm are the history lines (eight hex digits,
// then a tab or spaces) divided by the arms (awk: 16/4, 16/4, 16/4, 36/4).
// Footprint 2eaa41c6 of starpu_sgemm_gemm is 58982400 bytes on the CPU
// (line 48) and 29491200 on the GPUs, a hand-made row: left out.
func TestLoadStarPUReal(t *testing.T) {
	modelFor := regexp.MustCompile(`(?m)^# Model for (\S+)`)
	entry := regexp.MustCompile(`(?m)^[0-9a-f]{8}[ \t]`)
	files, _ := filepath.Glob("testdata/starpu/45/*.mirage")
	if len(files) != 4 {
		t.Fatalf("%d model files", len(files))
	}
	rows := 0
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var labels []string
		for _, m := range modelFor.FindAllStringSubmatch(string(b), -1) {
			labels = append(labels, m[1])
		}
		perArm := len(entry.FindAllString(string(b), -1)) / len(labels)
		rows += perArm
		tab, err := LoadStarPU(strings.NewReader(string(b)), path)
		if err != nil {
			t.Fatal(err)
		}
		got := tab.Backends()
		slices.Sort(got)
		slices.Sort(labels)
		if !slices.Equal(got, labels) {
			t.Errorf("%s: arms %v, the file's %v", path, got, labels)
		}
		if tab.Len()+len(tab.Dropped()) != perArm {
			t.Errorf("%s: %d rows + %d dropped, want %d footprints", path, tab.Len(), len(tab.Dropped()), perArm)
		}
	}
	tab, err := LoadStarPUDir("testdata/starpu/45")
	if err != nil {
		t.Fatal(err)
	}
	if tab.Len() != rows-1 || rows != 21 || len(tab.Dropped()) != 1 ||
		!strings.Contains(tab.Dropped()[0], "starpu_sgemm_gemm.mirage:48: footprint 2eaa41c6 of starpu_sgemm_gemm: size 58982400") {
		t.Fatalf("%d rows of %d, dropped %q", tab.Len(), rows, tab.Dropped())
	}
	if got := strings.Join(tab.Backends(), ","); got != "cpu0_impl0,cuda0_impl0,cuda1_impl0,cuda2_impl0" {
		t.Errorf("arms %s", got)
	}
	// chol_model_potrf.mirage line 39: cea37d6d 409600 1.097392e+07
	// 9.221097e+02 4.521529e+01 ... 86, on cpu0_impl0.
	p, c := tab.rows[4].spec.Params, tab.cells[4][0] // rows: gemm's 4, then potrf's

	if p.Name != "chol_model_potrf[cea37d6d]" || p.Bytes != 409600 || p.FLOPs != 10973920 ||
		c.mean != 922.1097 || math.Abs(c.sigma-math.Sqrt(math.Log1p(math.Pow(45.21529/922.1097, 2)))) > 1e-15 {
		t.Errorf("potrf cea37d6d: %+v, cpu %v σ %v", p, c.mean, c.sigma)
	}
	if _, err := tab.Workload(1000, 1, 1); err != nil {
		t.Error(err)
	}
	arms := tab.Arms()
	if arms[0].Profile.Nominal != MustProfile("cpu2").Nominal || arms[1].Profile.Nominal != RLXROCm {
		t.Errorf("arm figures %+v, %+v", arms[0].Profile.Nominal, arms[1].Profile.Nominal)
	}
}

// TestLoadStarPUErrors: each malformed model names the file, the line and
// what is wrong.
func TestLoadStarPUErrors(t *testing.T) {
	const entry = "0000abcd\t4096\t1.000000e+06\t%s\t%s\t1.000000e+02\t1.010000e+03\t10"
	row := func(mean, dev string) string {
		return strings.Replace(strings.Replace(entry, "%s", mean, 1), "%s", dev, 1)
	}
	for _, c := range []struct {
		edits map[int]string
		want  string
	}{
		{map[int]string{3: "44"}, `m.x:3: format version "44", want 45`},
		{map[int]string{8: "x"}, `m.x:8: the number of combinations: got "x"`},
		{map[int]string{12: "0"}, `m.x:12: the number of devices: got "0"`},
		{map[int]string{14: "-1"}, `m.x:14: a device type: got "-1"`},
		{map[int]string{24: "2 3"}, `m.x:24: the number of entries of cpu0_impl0: got "2 3"`},
		{map[int]string{26: "0 0 0 0 nan nan 0 0"}, `m.x:26: the linear regression of cpu0_impl0: 8 fields, want 9`},
		{map[int]string{28: "nan nan x"}, `m.x:28: the non-linear regression (a b c) of cpu0_impl0: "x" is not a number`},
		{map[int]string{56: "2\tnan"}, `m.x:56: multiple regression of cuda0_impl0`},
		{map[int]string{32: "0000abcd\t4096\t1e6\t10\t1\t100"}, `m.x:32: history entry of cpu0_impl0: 6 fields`},
		{map[int]string{32: "zzzzabcd\t4096\t1e6\t10\t1\t100\t1010\t10"}, `m.x:32: hash "zzzzabcd"`},
		{map[int]string{32: "0000abcd\t-4\t1e6\t10\t1\t100\t1010\t10"}, `m.x:32: size "-4"`},
		{map[int]string{32: "0000abcd\t4096\t-1e6\t10\t1\t100\t1010\t10"}, `m.x:32: flops "-1e6"`},
		{map[int]string{32: "0000abcd\t4096\t1e6\t10\t1\t100\t1010\t-1"}, `m.x:32: n "-1"`},
		{map[int]string{32: "0000abcd\t4096\t1e6\t10\t1\t-100\t1010\t10"}, `m.x:32: sum/sum2 "-100"`},
		{map[int]string{32: row("1e300", "1")}, `m.x:32: mean (us) "1e300"`},
		{map[int]string{32: row("5e-324", "0")}, `m.x:32: mean (us) "5e-324"`},
		{map[int]string{32: row("nan", "0")}, `m.x:32: mean (us) "nan"`},
		{map[int]string{32: row("1e11", "2e12")}, `m.x:32: dev (us) "2e12"`},
		{map[int]string{32: row("10", "5e-324")}, `m.x:32: dev (us) "5e-324"`},
		{map[int]string{33: "0000abcd\t8192\tnan\t20\t0\t20\t400\t1"}, `m.x:33: footprint 0000abcd of cpu0_impl0 again (first on line 32)`},
		{map[int]string{40: "0"}, `m.x:50: arm cpu0_impl0 twice (first on line 24)`},
		{map[int]string{50: "3"}, `m.x:59: file ends where a history entry of cuda0_impl0 was due`},
		{map[int]string{60: "7"}, `m.x:60: "7" after the last combination`},
		{map[int]string{32: strings.Repeat("1", starpuMaxLine+1)}, `m.x:32: bufio.Scanner: token too long`},
		{map[int]string{58: "99999999\t8192\t4e3\t5\t1\t50\t260\t10", 59: "88888888\t4096\t1e6\t2\t0.5\t20\t42.5\t10"},
			`m.x: no footprint measured on every arm (cpu0_impl0, cuda0_impl0; 4 of 4 left out)`},
	} {
		_, err := LoadStarPU(strings.NewReader(miniModel(t, c.edits)), "m.x")
		if !errors.Is(err, ErrBadTable) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one containing %q", c.edits, err, c.want)
		}
	}
	if _, err := LoadStarPU(strings.NewReader(""), "m.x"); err == nil || !strings.Contains(err.Error(), "m.x:0: file ends where the format version was due") {
		t.Errorf("empty file: %v", err)
	}
}

// TestLoadStarPUDrops: footprints that cannot make a row are left out,
// each with its file:line and why; the forms StarPU also accepts load.
func TestLoadStarPUDrops(t *testing.T) {
	for _, c := range []struct {
		edits   map[int]string
		rows    int
		dropped string
		arms    string
	}{
		{map[int]string{58: "99999999\t8192\t4e3\t5\t1\t50\t260\t10"}, 1,
			"m.x:33: footprint 1234fedc of m: not measured on cuda0_impl0|m.x:58: footprint 99999999 of m: not measured on cpu0_impl0", ""},
		{map[int]string{32: "0000abcd\t4096\t1e6\t10\t1\t100\t1010\t0"}, 1, "m.x:32: footprint 0000abcd of m: no samples (n = 0) on cpu0_impl0", ""},
		{map[int]string{59: "0000abcd\t4097\t1e6\t2\t0.5\t20\t42.5\t10"}, 1,
			"m.x:32: footprint 0000abcd of m: size 4096, flops 1000000 on cpu0_impl0 but size 4097, flops 1000000 on cuda0_impl0 (line 59)", ""},
		{map[int]string{33: "1234fedc\t8192\t20\t0\t20\t400\t1"}, 2, "", ""},                     // no flops column
		{map[int]string{18: "4", 42: "3"}, 2, "", "cpu0x4_impl0,cuda3_impl0"},                    // cores, device ids
		{map[int]string{39: "# device type (CPU - 0, HIP - 1)"}, 2, "", "cpu0_impl0,hip0_impl0"}, // the file names its types
	} {
		tab, err := LoadStarPU(strings.NewReader(miniModel(t, c.edits)), "m.x")
		if err != nil {
			t.Errorf("%v: %v", c.edits, err)
			continue
		}
		if tab.Len() != c.rows || strings.Join(tab.Dropped(), "|") != c.dropped {
			t.Errorf("%v: %d rows, dropped %q; want %d, %q", c.edits, tab.Len(), tab.Dropped(), c.rows, c.dropped)
		}
		if c.arms != "" && strings.Join(tab.Backends(), ",") != c.arms {
			t.Errorf("%v: arms %v, want %s", c.edits, tab.Backends(), c.arms)
		}
	}
}

// TestLoadStarPUDirErrors: a directory of two machines' models, or of
// none, is refused.
func TestLoadStarPUDirErrors(t *testing.T) {
	b, err := os.ReadFile("testdata/starpu/mini.hand")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := LoadStarPUDir(dir); !errors.Is(err, ErrBadTable) || !strings.Contains(err.Error(), "no performance-model files") {
		t.Errorf("empty directory: %v", err)
	}
	for _, name := range []string{"a.mirage", "b.attila"} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := LoadStarPUDir(dir); !errors.Is(err, ErrBadTable) || !strings.Contains(err.Error(), `more than one machine ("mirage" and "attila")`) {
		t.Errorf("two machines: %v", err)
	}
}

// TestIsStarPU tells models from perf tables by their header.
func TestIsStarPU(t *testing.T) {
	b, _ := os.ReadFile("testdata/starpu/45/chol_model_gemm.mirage")
	c, _ := os.ReadFile("testdata/small.csv")
	if !IsStarPU(b) || IsStarPU(c) || IsStarPU([]byte("# Performance Model Version")) || IsStarPU(nil) {
		t.Error("IsStarPU misreads a header")
	}
}

func FuzzLoadStarPU(f *testing.F) {
	for _, p := range []string{"testdata/starpu/mini.hand", "testdata/starpu/45/starpu_sgemm_gemm.mirage"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("45\n1\n1\n0\n0\n1\n1\n1\n0 0 0 0 nan nan 0 0 0\nnan nan nan\n0\nab 1 1 1 0 1 1 1\n")
	f.Fuzz(func(t *testing.T, s string) {
		tab, err := LoadStarPU(strings.NewReader(s), "fuzz.host")
		if !checkLoaded(t, tab, err, true) {
			return
		}
		if _, err := tab.Workload(10, 1, 1); err != nil {
			t.Fatal(err)
		}
	})
}

// TestStarPUBOM: a byte-order mark before a model's first line is
// skipped, as the perf tables' reader skips one: the model reads as
// without it, alone, through ReadTable and in a directory.
func TestStarPUBOM(t *testing.T) {
	m := "\ufeff" + miniModel(t, nil)
	tab, err := LoadStarPU(strings.NewReader(m), "mini.host")
	if err != nil || tab.Len() != 2 {
		t.Fatalf("LoadStarPU: %v", err)
	}
	if !IsStarPU([]byte(m)) {
		t.Error("IsStarPU: a model with a BOM is not a model")
	}
	if tab, err = ReadTable(strings.NewReader(m), "mini.host"); err != nil || strings.Join(tab.Backends(), ",") != "cpu0_impl0,cuda0_impl0" {
		t.Errorf("ReadTable: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mini.host"), []byte(m), 0o600); err != nil {
		t.Fatal(err)
	}
	if tab, err = LoadStarPUDir(dir); err != nil || tab.Len() != 2 {
		t.Errorf("LoadStarPUDir: %v", err)
	}
	// A model's first line is its version; a BOM there is skipped too.
	_, err = LoadStarPU(strings.NewReader("\ufeff44\n"), "mini.host")
	if err == nil || !strings.Contains(err.Error(), `mini.host:1: format version "44", want 45`) {
		t.Errorf("version after a BOM: %v", err)
	}
}
