//go:build cgo

package cpu

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Without a usable library, loadCBLAS reports every path with dlerror's
// text: a missing file, and a library without cblas_sgemm.
func TestLoadCBLASReportsTries(t *testing.T) {
	saved := cblasLibs
	defer func() { cblasLibs = saved }()
	cblasLibs = []cblasLib{
		{"none", "None", []string{"libadaptsched-none.so.9"}, "", false},
		{"libm", "libm", []string{"libm.so.6"}, "", false},
	}
	p, tried := loadCBLAS()
	if p.runtime != "" || p.serial != nil {
		t.Fatalf("loaded %+v from libraries without cblas_sgemm", p)
	}
	if len(tried) != 2 {
		t.Fatalf("tried = %q, want two entries", tried)
	}
	if !strings.HasPrefix(tried[0], "libadaptsched-none.so.9: ") || !strings.Contains(tried[0], "cannot open shared object file") ||
		strings.Count(tried[0], "libadaptsched-none.so.9") != 1 {
		t.Errorf("missing library: %q", tried[0])
	}
	if !strings.HasPrefix(tried[1], "libm.so.6: cblas_sgemm: ") || !strings.Contains(tried[1], "undefined symbol") {
		t.Errorf("library without the symbol: %q", tried[1])
	}
}

// TestCBLASHugeDims: a dimension or stride beyond int32, which CBLAS
// takes, is computed (by gonum) rather than passed truncated: OpenBLAS
// rejected the negative value it wrapped to and left C as it was. A
// one-row product reaches it with a row stride of B of 2^31 that reads
// one element.
func TestCBLASHugeDims(t *testing.T) {
	p := selectPath(false)
	if p.runtime == "gonum" {
		t.Skipf("no CBLAS: %s", p.reason)
	}
	a, b, c := []float32{2}, []float32{3}, []float32{0}
	p.serial(1, 1, 1, a, 1, b, 1<<31, c, 1)
	if c[0] != 6 {
		t.Errorf("2·3 with a row stride of 2^31 = %v, want 6", c[0])
	}
}

// fakeCBLAS builds testdata/fakecblas.c with gcc and the given flags into
// a directory of t's and returns the library's path.
func fakeCBLAS(t *testing.T, flags ...string) string {
	t.Helper()
	lib := filepath.Join(t.TempDir(), "libfakecblas.so")
	args := append([]string{"-shared", "-fPIC", "-O1", "-o", lib}, flags...)
	out, err := exec.Command("gcc", append(args, filepath.Join("testdata", "fakecblas.c"))...).CombinedOutput()
	if err != nil {
		t.Fatalf("building the fake CBLAS: gcc %q: %v: %s", flags, err, out)
	}
	return lib
}

// loadOnly runs loadCBLAS on libs alone.
func loadOnly(t *testing.T, libs ...cblasLib) (blasPath, []string) {
	t.Helper()
	saved := cblasLibs
	defer func() { cblasLibs = saved }()
	cblasLibs = libs
	return loadCBLAS()
}

// TestLoadCBLASIntWidth: the loader asks each kind of library the width
// of its CBLAS integers (OpenBLAS's config string, BLIS's
// bli_info_get_blas_int_type_size, MKL's interface layer), calls an
// ILP64 one with 64-bit integers and says so. The fake writes NaN for a
// size it cannot read, which testGemm fails on.
func TestLoadCBLASIntWidth(t *testing.T) {
	const ilp64 = "-DBLASINT=long long"
	for _, c := range []struct {
		name, runtime string
		flags         []string
		wide          bool
	}{
		{"openblas-lp64", "openblas", []string{`-DOPENBLAS_CONFIG="OpenBLAS fake DYNAMIC_ARCH"`}, false},
		{"openblas-ilp64", "openblas", []string{ilp64, `-DOPENBLAS_CONFIG="OpenBLAS fake USE64BITINT DYNAMIC_ARCH"`}, true},
		{"blis-lp64", "blis", []string{"-DBLIS_BLAS_INT=32"}, false},
		{"blis-ilp64", "blis", []string{ilp64, "-DBLIS_BLAS_INT=64"}, true},
		{"mkl-lp64", "mkl", []string{"-DMKL_LAYER=0"}, false},
		{"mkl-ilp64", "mkl", []string{ilp64, "-DMKL_LAYER=1"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			lib := fakeCBLAS(t, c.flags...)
			p, tried := loadOnly(t, cblasLib{c.runtime, "Fake", []string{lib}, "", false})
			if p.serial == nil {
				t.Fatalf("not loaded: %q", tried)
			}
			want := "Fake (" + lib + ")"
			if c.wide {
				want = "Fake (" + lib + ", 64-bit integers)"
			}
			if p.desc != want {
				t.Errorf("desc = %q, want %q", p.desc, want)
			}
			testGemm(t, p.serial)
		})
	}
}

// TestLoadCBLASUnknownWidth: a library that cannot say the width of its
// integers is refused, with the reason, and the next one loads.
func TestLoadCBLASUnknownWidth(t *testing.T) {
	for _, c := range []struct{ runtime, ask string }{
		{"openblas", "openblas_get_config"},
		{"blis", "bli_info_get_blas_int_type_size"},
		{"mkl", "MKL_Set_Interface_Layer"},
	} {
		t.Run(c.runtime, func(t *testing.T) {
			silent := fakeCBLAS(t, "-DBLASINT=long long")
			good := fakeCBLAS(t, `-DOPENBLAS_CONFIG="OpenBLAS fake"`)
			p, tried := loadOnly(t,
				cblasLib{c.runtime, "Silent", []string{silent}, "", false},
				cblasLib{"openblas", "Fake", []string{good}, "", false})
			if p.desc != "Fake ("+good+")" {
				t.Fatalf("loaded %q, want the second library; tried %q", p.desc, tried)
			}
			if len(tried) != 1 || !strings.HasPrefix(tried[0], silent+": ") || !strings.Contains(tried[0], c.ask) {
				t.Errorf("tried = %q, want the first library refused for want of %s", tried, c.ask)
			}
		})
	}
}

// TestLoadCBLASProbe: a library whose sgemm gets a small product wrong
// at load is refused, with the product it computed.
func TestLoadCBLASProbe(t *testing.T) {
	lib := fakeCBLAS(t, `-DOPENBLAS_CONFIG="OpenBLAS fake"`, "-DWRONG")
	p, tried := loadOnly(t, cblasLib{"openblas", "Fake", []string{lib}, "", false})
	if p.serial != nil {
		t.Fatalf("loaded %q, which computes wrong", p.desc)
	}
	if len(tried) != 1 || !strings.HasPrefix(tried[0], lib+": ") || !strings.Contains(tried[0], "probe") {
		t.Errorf("tried = %q, want the library refused by the probe", tried)
	}
}

// TestLoadCBLASDebianILP64 loads Debian's ILP64 OpenBLAS and BLIS, which
// export the unsuffixed cblas_sgemm with 64-bit integers: what the loader
// would find were libopenblas.so.0 or libblis.so.4 one of them. It skips,
// naming the package, where one is not installed (CI installs neither).
func TestLoadCBLASDebianILP64(t *testing.T) {
	for _, c := range []struct {
		lib cblasLib
		pkg string
	}{
		{cblasLib{"openblas", "OpenBLAS", []string{"libopenblas64.so.0"}, "openblas_set_num_threads", false}, "libopenblas64-0-pthread"},
		{cblasLib{"blis", "BLIS", []string{"libblis64.so.4"}, "bli_thread_set_num_threads", true}, "libblis64-4-pthread"},
	} {
		t.Run(c.lib.runtime, func(t *testing.T) {
			p, tried := loadOnly(t, c.lib)
			if p.serial == nil && len(tried) == 1 && strings.Contains(tried[0], "cannot open shared object file") {
				t.Skipf("%s not installed (apt-get install %s): %s", c.lib.paths[0], c.pkg, tried[0])
			}
			if want := fmt.Sprintf("%s (%s, 64-bit integers)", c.lib.label, c.lib.paths[0]); p.desc != want {
				t.Fatalf("desc = %q, want %q; tried %q", p.desc, want, tried)
			}
			testGemm(t, p.serial)
		})
	}
}
