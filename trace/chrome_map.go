package trace

// Mapping a Chrome trace's ops onto the catalogue (ImportChrome's
// Mapping).

import (
	"encoding/json"
	"strings"

	"github.com/adaptsched/adaptsched/kernels"
)

// chromeShapes returns the tensors among an op's inputs (a tensor list
// contributes each of its tensors; scalars and zero-size tensors none),
// the dtype to record for it (f16 for half types, else f32), and whether
// its first tensor is f32 (only then can it map onto the catalogue).
func chromeShapes(dims, types []json.RawMessage) (out [][]int, dt kernels.DType, f32 bool) {
	dt, f32 = kernels.F32, true
	for i, d := range dims {
		var sh []int
		if json.Unmarshal(d, &sh) == nil {
			if len(sh) > 0 && positive(sh) {
				if len(out) == 0 && i < len(types) {
					var t string
					json.Unmarshal(types[i], &t)
					if strings.Contains(t, "Half") || strings.Contains(t, "BFloat16") {
						dt = kernels.F16
					}
					f32 = t == "" || t == "float"
				}
				out = append(out, sh)
			}
			continue
		}
		var list [][]int
		if json.Unmarshal(d, &list) == nil {
			for _, sh := range list {
				if len(sh) > 0 && positive(sh) {
					out = append(out, sh)
				}
			}
		}
	}
	return out, dt, f32
}

func positive(sh []int) bool {
	for _, d := range sh {
		if d <= 0 {
			return false
		}
	}
	return true
}

// fold merges leading dimensions until sh has at most rank r.
func fold(sh []int, r int) []int {
	if len(sh) <= r {
		return append([]int{}, sh...)
	}
	out := make([]int, r)
	lead := len(sh) - r + 1
	out[0] = 1
	for _, d := range sh[:lead] {
		out[0] *= d
	}
	copy(out[1:], sh[lead:])
	return out
}

// mapChrome returns the catalogue op that op is, or nil.
func mapChrome(op *chromeOp) *kernels.Spec {
	if !op.f32 || len(op.shapes) == 0 {
		return nil
	}
	in := op.shapes
	name := op.ev.Name
	var s kernels.Spec
	switch name {
	case "aten::mm", "aten::bmm", "aten::matmul":
		if len(in) < 2 {
			return nil
		}
		s = matmulSpec(in[0], in[1])
	case "aten::addmm", "aten::baddbmm":
		if len(in) < 3 {
			return nil
		}
		s = matmulSpec(in[1], in[2])
	case "aten::linear":
		if len(in) < 2 || len(in[1]) != 2 {
			return nil
		}
		s = matmulSpec(in[0], []int{in[1][1], in[1][0]})
	case "aten::softmax", "aten::_softmax":
		s = kernels.Spec{Op: kernels.Softmax, In: []kernels.Shape{fold(in[0], kernels.MaxRank)}}
	case "aten::add", "aten::add_", "aten::mul", "aten::mul_":
		if len(in) != 2 {
			return nil
		}
		s = kernels.Spec{Op: kernels.Add, In: []kernels.Shape{in[0], in[1]}}
		if strings.HasPrefix(name, "aten::mul") {
			s.Op = kernels.Mul
		}
	case "aten::layer_norm", "aten::native_layer_norm":
		x := fold(in[0], kernels.MaxRank)
		d := x[len(x)-1]
		s = kernels.Spec{Op: kernels.LayerNorm, In: []kernels.Shape{x, {d}, {d}}}
	case "aten::rms_norm":
		x := fold(in[0], kernels.MaxRank)
		s = kernels.Spec{Op: kernels.RMSNorm, In: []kernels.Shape{x, {x[len(x)-1]}}}
	case "aten::gelu", "aten::gelu_":
		s = kernels.Spec{Op: kernels.GELU, In: []kernels.Shape{fold(in[0], kernels.MaxRank)}}
	case "aten::silu", "aten::silu_":
		s = kernels.Spec{Op: kernels.SiLU, In: []kernels.Shape{fold(in[0], kernels.MaxRank)}}
	case "aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
		"aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention":
		if len(in) < 3 {
			return nil
		}
		s = kernels.Spec{Op: kernels.Attention, In: []kernels.Shape{in[0], in[1], in[2]}}
	default:
		return nil
	}
	if s.Validate() != nil {
		return nil
	}
	return &s
}

// matmulSpec folds a and b onto MatMul's ranks: a vector becomes a
// matrix, batch dimensions merge into one.
func matmulSpec(a, b []int) kernels.Spec {
	if len(a) == 1 {
		a = []int{1, a[0]}
	}
	if len(b) == 1 {
		b = []int{b[0], 1}
	}
	if len(b) == 2 {
		a = fold(a, 2)
	} else {
		a, b = fold(a, 3), fold(b, 3)
	}
	return kernels.Spec{Op: kernels.MatMul, In: []kernels.Shape{a, b}}
}
