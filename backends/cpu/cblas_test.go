//go:build cgo

package cpu

import (
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
