package kernels_test

import (
	"testing"

	"github.com/adaptsched/adaptsched/kernels"
)

// TestBucketName checks names and half-octave classes worked out by hand.
func TestBucketName(t *testing.T) {
	cases := []struct {
		spec kernels.Spec
		want string
	}{
		// 2·64·4096·4096 = 2^31 FLOPs: class 62.
		{kernels.Spec{Op: kernels.MatMul, In: []kernels.Shape{{64, 4096}, {4096, 4096}}}, "MatMul/f32/s62"},
		// 1000 FLOPs, 12,000 bytes: 2·log2(12000) = 27.1.
		{kernels.Spec{Op: kernels.Add, DType: kernels.F32, In: []kernels.Shape{{1000}, {1000}}}, "Add/f32/s27"},
		// An opaque op with 1 MiB of traffic: class 40.
		{kernels.Spec{Op: kernels.Opaque, DType: kernels.F16, In: []kernels.Shape{{8}}, Params: kernels.Params{Name: "aten::cat", Bytes: 1 << 20}}, "Opaque:aten::cat/f16/s40"},
		{kernels.Spec{Op: kernels.MatMul, In: []kernels.Shape{{2, 3}}}, ""},
	}
	for _, c := range cases {
		if got := kernels.BucketName(c.spec); got != c.want {
			t.Errorf("%v: %q, want %q", c.spec, got, c.want)
		}
	}
	// The class boundary 2^10.5 = 1448.15.
	for flops, want := range map[int64]int{1 << 10: 20, 1448: 20, 1449: 21, 0: 0, 1: 0} {
		if got := kernels.SizeClass(kernels.Work{FLOPs: flops}); got != want {
			t.Errorf("SizeClass(%d FLOPs) = %d, want %d", flops, got, want)
		}
	}
}
