package rocm

import (
	"errors"
	"slices"
	"testing"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
	"github.com/adaptsched/adaptsched/kernels/hip"
)

// TestPlanEveryOp checks that every executable op has a plan whose
// kernels exist in kernels/hip with the argument count the source
// declares.
func TestPlanEveryOp(t *testing.T) {
	declared := map[string]bool{}
	for _, p := range hip.Programs() {
		src, err := hip.Source(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range hip.Kernels(src) {
			declared[k] = true
		}
	}
	specs := gpuSpecsPure()
	covered := map[kernels.Op]bool{}
	for _, s := range specs {
		for _, blas := range []bool{false, true} {
			p, err := planOp(s, blas)
			if err != nil {
				t.Fatalf("%v: %v", s, err)
			}
			if p.blas {
				if p.gemm.m <= 0 || p.gemm.n <= 0 || p.gemm.k <= 0 || p.gemm.batch <= 0 {
					t.Errorf("%v: empty GEMM %+v", s, p.gemm)
				}
				continue
			}
			if l := p.launch; l.kernel == "" {
				t.Errorf("%v: empty plan", s)
			} else {
				if !declared[l.kernel] {
					t.Errorf("%v: kernel %s is not in kernels/hip", s, l.kernel)
				}
				if l.block[0]*l.block[1]*l.block[2] > 1024 || slices.Contains(l.grid[:], 0) {
					t.Errorf("%v: launch %s grid %v block %v", s, l.kernel, l.grid, l.block)
				}
				if l.nargs == 0 {
					t.Errorf("%v: launch %s takes no arguments", s, l.kernel)
				}
			}
		}
		covered[s.Op] = true
	}
	for _, op := range kernels.Ops() {
		if !covered[op] {
			t.Errorf("op %v has no test spec", op)
		}
	}
}

func gpuSpecsPure() []kernels.Spec {
	sh := func(s ...kernels.Shape) []kernels.Shape { return s }
	return []kernels.Spec{
		{Op: kernels.MatMul, In: sh(kernels.Shape{3, 37, 70}, kernels.Shape{70, 45})},
		{Op: kernels.MatMul, In: sh(kernels.Shape{2, 33, 17}, kernels.Shape{2, 17, 29})},
		{Op: kernels.QuantizedMatMul, DType: kernels.Q8_0, In: sh(kernels.Shape{5, 96}, kernels.Shape{40, 96})},
		{Op: kernels.QuantizedMatMul, DType: kernels.Q4_0, In: sh(kernels.Shape{5, 96}, kernels.Shape{40, 96})},
		{Op: kernels.Softmax, In: sh(kernels.Shape{7, 1000})},
		{Op: kernels.Attention, In: sh(kernels.Shape{2, 4, 5, 64}, kernels.Shape{2, 2, 300, 64}, kernels.Shape{2, 2, 300, 64})},
		{Op: kernels.Add, In: sh(kernels.Shape{4, 33}, kernels.Shape{33})},
		{Op: kernels.Mul, In: sh(kernels.Shape{6, 10}, kernels.Shape{6, 10})},
		{Op: kernels.Scale, In: sh(kernels.Shape{1001})},
		{Op: kernels.RMSNorm, In: sh(kernels.Shape{5, 300}, kernels.Shape{300})},
		{Op: kernels.LayerNorm, In: sh(kernels.Shape{5, 300}, kernels.Shape{300}, kernels.Shape{300})},
		{Op: kernels.RoPE, In: sh(kernels.Shape{2, 7, 3, 16})},
		{Op: kernels.SiLU, In: sh(kernels.Shape{3, 777})},
		{Op: kernels.SwiGLU, In: sh(kernels.Shape{3, 50}, kernels.Shape{3, 50})},
		{Op: kernels.GELU, In: sh(kernels.Shape{999})},
		{Op: kernels.Dequantize, DType: kernels.Q8_0, In: sh(kernels.Shape{3, 64})},
		{Op: kernels.Dequantize, DType: kernels.F16, In: sh(kernels.Shape{4, 7})},
		{Op: kernels.Copy, DType: kernels.Q4_0, In: sh(kernels.Shape{3, 64})},
		{Op: kernels.Transpose, In: sh(kernels.Shape{3, 37, 70})},
		{Op: kernels.KVAppend, In: sh(kernels.Shape{2, 2, 30, 64}, kernels.Shape{2, 3, 2, 64}), Params: kernels.Params{Pos: 4}},
		{Op: kernels.Argmax, In: sh(kernels.Shape{3, 2, 1000})},
		{Op: kernels.GetRows, DType: kernels.Q8_0, In: sh(kernels.Shape{1000, 64}, kernels.Shape{3})},
		{Op: kernels.GetRows, DType: kernels.Q4_0, In: sh(kernels.Shape{100, 96}, kernels.Shape{2, 3})},
		{Op: kernels.GetRows, DType: kernels.F16, In: sh(kernels.Shape{10, 7}, kernels.Shape{4})},
		{Op: kernels.GetRows, In: sh(kernels.Shape{10, 7}, kernels.Shape{2, 2, 2})},
	}
}

func TestPlanUnsupported(t *testing.T) {
	for _, s := range []kernels.Spec{
		{Op: kernels.Opaque, In: []kernels.Shape{{4}}},
		{Op: kernels.Attention, In: []kernels.Shape{{1, 1, 1, 2048}, {1, 1, 4, 2048}, {1, 1, 4, 2048}}},
		{Op: kernels.Add, In: []kernels.Shape{{4}, {5}}},
		{Op: kernels.GetRows, DType: kernels.Q8_0, In: []kernels.Shape{{2, 1 << 31}, {1}}},
	} {
		if _, err := planOp(s, false); !errors.Is(err, backends.ErrUnsupported) {
			t.Errorf("planOp(%v): %v, want ErrUnsupported", s, err)
		}
	}
}

// TestPlanAllocatesNothing: planning an op, which a queued or gathered
// op pays every time, allocates nothing (its launch and arguments are
// held in the plan).
func TestPlanAllocatesNothing(t *testing.T) {
	for _, s := range gpuSpecsPure() {
		for _, blas := range []bool{false, true} {
			if n := testing.AllocsPerRun(10, func() { _, _ = planOp(s, blas) }); n != 0 {
				t.Errorf("planOp(%v, blas %v): %v allocations, want 0", s, blas, n)
			}
		}
	}
}
