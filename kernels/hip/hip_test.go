package hip

import (
	"slices"
	"strings"
	"testing"
)

func TestSources(t *testing.T) {
	progs := Programs()
	if slices.Contains(progs, Common) || len(progs) == 0 {
		t.Fatalf("Programs() = %v", progs)
	}
	seen := map[string]string{}
	for _, p := range progs {
		src, err := Source(p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(src, "block_sum") {
			t.Errorf("%s: common.hip not prepended", p)
		}
		ks := Kernels(src)
		if len(ks) == 0 {
			t.Errorf("%s declares no kernel", p)
		}
		for _, k := range ks {
			if q, dup := seen[k]; dup {
				t.Errorf("kernel %s in both %s and %s", k, q, p)
			}
			seen[k] = p
			if Program(k) != p {
				t.Errorf("Program(%s) = %q, want %s", k, Program(k), p)
			}
		}
		// No header includes: hiprtc and nvrtc provide the built-ins.
		if strings.Contains(src, "#include") {
			t.Errorf("%s includes a header", p)
		}
	}
	for _, k := range []string{"add_f32", "sgemm_tiled", "attention_f32", "qmatmul_q4_0", "rope_f32", "transpose_f32"} {
		if seen[k] == "" {
			t.Errorf("kernel %s missing", k)
		}
	}
	if _, err := Source(Common); err == nil {
		t.Error("Source(common.hip) should fail: it is not a program")
	}
	if _, err := Source("nope.hip"); err == nil {
		t.Error("Source(nope.hip) should fail")
	}
}
