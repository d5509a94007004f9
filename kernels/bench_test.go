package kernels

import (
	"testing"
)

// benchSpec is one benchmarked op at one size.
type benchSpec struct {
	name, size string
	spec       Spec
}

// benchSpecs returns each kernel at three sizes typical of LLM inference
// with a 4096-wide model (32 query heads, 8 KV heads of 128): small is a
// decode step, medium a short batch or context, large a 512-token prefill.
func benchSpecs() []benchSpec {
	var out []benchSpec
	add := func(name string, op Op, dt DType, p Params, sizes ...[]Shape) {
		for i, in := range sizes {
			out = append(out, benchSpec{name, [...]string{"small", "medium", "large"}[i], Spec{Op: op, DType: dt, In: in, Params: p}})
		}
	}
	var none Params
	causal := Params{Causal: true}
	add("MatMul", MatMul, F32, none,
		[]Shape{{1, 4096}, {4096, 1024}}, []Shape{{64, 4096}, {4096, 1024}}, []Shape{{512, 4096}, {4096, 1024}})
	for _, dt := range []DType{Q8_0, Q4_0} {
		add("QuantizedMatMul_"+dt.String(), QuantizedMatMul, dt, none,
			[]Shape{{1, 4096}, {4096, 4096}}, []Shape{{8, 4096}, {4096, 4096}}, []Shape{{512, 4096}, {1024, 4096}})
	}
	add("Attention", Attention, F32, causal,
		[]Shape{{1, 32, 1, 128}, {1, 8, 512, 128}, {1, 8, 512, 128}},
		[]Shape{{1, 32, 1, 128}, {1, 8, 4096, 128}, {1, 8, 4096, 128}},
		[]Shape{{1, 32, 512, 128}, {1, 8, 512, 128}, {1, 8, 512, 128}})
	rows := func(n ...int) [][]Shape {
		r := make([][]Shape, len(n))
		for i, m := range n {
			r[i] = []Shape{{m, 4096}}
		}
		return r
	}
	with := func(extra Shape, sizes [][]Shape) [][]Shape {
		for i := range sizes {
			e := extra
			if e == nil {
				e = sizes[i][0]
			}
			sizes[i] = append(sizes[i], e)
		}
		return sizes
	}
	add("Softmax", Softmax, F32, none, rows(1, 64, 512)...)
	add("Add", Add, F32, none, with(nil, rows(1, 64, 512))...)
	add("Mul", Mul, F32, none, with(Shape{4096}, rows(1, 64, 512))...)
	add("Scale", Scale, F32, Params{Scale: 0.5}, rows(1, 64, 512)...)
	add("RMSNorm", RMSNorm, F32, none, with(Shape{4096}, rows(1, 64, 512))...)
	add("LayerNorm", LayerNorm, F32, none, with(Shape{4096}, with(Shape{4096}, rows(1, 64, 512)))...)
	add("RoPE", RoPE, F32, Params{Pos: 100}, []Shape{{1, 32, 128}}, []Shape{{64, 32, 128}}, []Shape{{512, 32, 128}})
	add("SiLU", SiLU, F32, none, rows(1, 64, 512)...)
	add("GELU", GELU, F32, none, rows(1, 64, 512)...)
	add("SwiGLU", SwiGLU, F32, none, with(nil, rows(1, 64, 512))...)
	add("Dequantize_q4_0", Dequantize, Q4_0, none, rows(1, 64, 4096)...)
	add("Dequantize_f16", Dequantize, F16, none, rows(1, 64, 4096)...)
	add("Copy", Copy, F32, none, rows(1, 64, 512)...)
	add("Transpose", Transpose, F32, none, rows(1, 64, 4096)...)
	return out
}

// BenchmarkKernel runs every fast kernel at three sizes on a pool of
// runtime.NumCPU() threads, products through gonum's Sgemm (testGemm; the
// backend's matmul is backends/cpu's BenchmarkMatMul). Matrix ops report
// GFLOP/s (Spec.Work's FLOPs); every op reports GB/s of bytes read and
// written.
func BenchmarkKernel(b *testing.B) {
	pool := NewPool(0)
	defer pool.Close()
	cpu := NewCPU(pool, testGemm)
	for i, bs := range benchSpecs() {
		b.Run(bs.name+"/"+bs.size, func(b *testing.B) {
			s := bs.spec
			in := inputs(b, newRand(uint64(i)), s)
			out := make([]byte, s.OutBytes())
			w := s.Work()
			// One call first fills the scratch pools: the loop measures
			// the steady state.
			if err := cpu.Run(s, in, out); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := cpu.Run(s, in, out); err != nil {
					b.Fatal(err)
				}
			}
			sec := b.Elapsed().Seconds()
			if s.Op.Class() == Matrix {
				b.ReportMetric(float64(w.FLOPs)*float64(b.N)/sec/1e9, "GFLOP/s")
			}
			b.ReportMetric(float64(w.Bytes())*float64(b.N)/sec/1e9, "GB/s")
		})
	}
}
