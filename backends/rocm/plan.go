package rocm

import (
	"errors"
	"fmt"
	"math"

	"github.com/adaptsched/adaptsched/backends"
	"github.com/adaptsched/adaptsched/kernels"
)

// Argument slots that name a buffer rather than carry a value.
const (
	argValue = -1 // the slot's val is the argument
	argOut   = -2 // the output buffer's device address
)

// arg is one kernel argument: a buffer (input index or argOut) or an
// 8-byte value slot (4-byte values in the low half).
type arg struct {
	buf int
	val uint64
}

func in(i int) arg               { return arg{buf: i} }
func out() arg                   { return arg{buf: argOut} }
func i32(v int) arg              { return arg{buf: argValue, val: uint64(uint32(int32(v)))} }
func i64(v int64) arg            { return arg{buf: argValue, val: uint64(v)} }
func f32(v float32) arg          { return arg{buf: argValue, val: uint64(math.Float32bits(v))} }
func dim3(x, y, z int) [3]uint32 { return [3]uint32{uint32(x), uint32(y), uint32(z)} }

// maxArgs is the most arguments a kernel of kernels/hip takes
// (attention_f32's 12).
const maxArgs = 12

// launch is one kernel launch of an op. Its arguments are held in place,
// not in a slice of their own: planning an op allocates nothing
// (TestPlanAllocatesNothing).
type launch struct {
	kernel      string
	grid, block [3]uint32
	nargs       int
	argv        [maxArgs]arg
}

// kernel returns the launch of name with grid, block and args; more than
// maxArgs arguments is a programmer error and panics.
func kernel(name string, grid, block [3]uint32, args ...arg) launch {
	if len(args) > maxArgs {
		panic(fmt.Sprintf("rocm: %s takes %d arguments, more than %d", name, len(args), maxArgs))
	}
	l := launch{kernel: name, grid: grid, block: block, nargs: len(args)}
	copy(l.argv[:], args)
	return l
}

// args returns l's arguments.
func (l *launch) args() []arg { return l.argv[:l.nargs] }

// gemm is a row-major C[M,N] = A[M,K]·B[K,N] per batch, run by the vendor
// BLAS; strides in elements, 0 for a B shared by every batch.
type gemm struct {
	m, n, k, batch            int
	strideA, strideB, strideC int64
}

// opPlan is how a Device runs one Spec: one kernel launch, or one BLAS
// GEMM when blas is set.
type opPlan struct {
	launch launch
	gemm   gemm
	blas   bool
}

const (
	blockSize = 256     // threads per block of every 1-D kernel (BLOCK in common.hip)
	maxGrid   = 1 << 16 // blocks of a grid-stride launch; the loop covers the rest
	maxGridYZ = 65535   // the y and z grid limits of both platforms
	maxHeadD  = 4 * blockSize
)

func gridFor(n int64) int {
	b := (n + blockSize - 1) / blockSize
	return int(max(1, min(b, maxGrid)))
}

func unsupported(format string, a ...any) error {
	return fmt.Errorf("%w: rocm: %s", backends.ErrUnsupported, fmt.Sprintf(format, a...))
}

// planOp maps a valid Spec onto the kernels of kernels/hip (and the BLAS
// GEMM when blas is set). It fails, wrapping backends.ErrUnsupported, for
// an Opaque op or sizes beyond the kernels' index types and grid limits.
func planOp(s kernels.Spec, blas bool) (opPlan, error) {
	if err := s.Validate(); err != nil {
		return opPlan{}, fmt.Errorf("%w: %w", backends.ErrUnsupported, err)
	}
	if p, ok := planElementwise(s); ok {
		return p, nil
	}
	switch s.Op {
	case kernels.Transpose:
		return planTranspose(s)
	case kernels.Softmax, kernels.RMSNorm, kernels.LayerNorm, kernels.Argmax:
		return planRows(s)
	case kernels.RoPE:
		return planRoPE(s)
	case kernels.Attention:
		return planAttention(s)
	case kernels.KVAppend:
		return planKVAppend(s)
	case kernels.GetRows:
		return planGetRows(s)
	case kernels.QuantizedMatMul:
		return planQMatMul(s)
	case kernels.MatMul:
		return planMatMul(s, blas)
	}
	return opPlan{}, unsupported("%v: %v", s.Op, kernels.ErrNotExecutable)
}

// fitsInt32 reports whether every v fits the kernels' int32 indices.
func fitsInt32(vs ...int64) bool {
	for _, v := range vs {
		if v > math.MaxInt32 {
			return false
		}
	}
	return true
}

// planElementwise plans the ops of one thread per output element (and
// Copy, one per byte); ok is false for every other op.
func planElementwise(s kernels.Spec) (p opPlan, ok bool) {
	n := s.In[0].Elements() // the output's: these ops keep their first input's shape
	ew := func(name string, args ...arg) (opPlan, bool) {
		return opPlan{launch: kernel(name, dim3(gridFor(n), 1, 1), dim3(blockSize, 1, 1), args...)}, true
	}
	switch s.Op {
	case kernels.Add:
		return ew("add_f32", out(), in(0), in(1), i64(n), i64(s.In[1].Elements()))
	case kernels.Mul:
		return ew("mul_f32", out(), in(0), in(1), i64(n), i64(s.In[1].Elements()))
	case kernels.Scale:
		return ew("scale_f32", out(), in(0), f32(s.Params.Scale), i64(n))
	case kernels.SiLU:
		return ew("silu_f32", out(), in(0), i64(n))
	case kernels.GELU:
		return ew("gelu_f32", out(), in(0), i64(n))
	case kernels.SwiGLU:
		return ew("swiglu_f32", out(), in(0), in(1), i64(n))
	case kernels.Dequantize:
		return ew(dequantKernel(s.DType), out(), in(0), i64(n))
	case kernels.Copy:
		b := s.InBytes(0)
		return opPlan{launch: kernel("copy_u8", dim3(gridFor(b), 1, 1), dim3(blockSize, 1, 1), out(), in(0), i64(b))}, true
	}
	return opPlan{}, false
}

// dequantKernel is the kernel that dequantizes d, "" for a type without
// one (Validate has refused it).
func dequantKernel(d kernels.DType) string {
	switch d {
	case kernels.Q8_0:
		return "dequant_q8_0"
	case kernels.Q4_0:
		return "dequant_q4_0"
	case kernels.F16:
		return "dequant_f16"
	}
	return ""
}

// planTranspose launches 32×32 tiles over the last two dimensions, one
// grid layer per batch.
func planTranspose(s kernels.Spec) (opPlan, error) {
	sh := s.In[0]
	r, c := sh[len(sh)-2], sh[len(sh)-1]
	batch := sh.Elements() / int64(r*c)
	gy := (r + 31) / 32
	if batch > maxGridYZ || gy > maxGridYZ || !fitsInt32(int64(r), int64(c)) {
		return opPlan{}, unsupported("transpose of %v exceeds the grid limits", sh)
	}
	return opPlan{launch: kernel("transpose_f32", dim3((c+31)/32, gy, int(batch)), dim3(32, 8, 1),
		out(), in(0), i32(r), i32(c))}, nil
}

// planRows launches one block per row of the row-wise ops (Softmax,
// RMSNorm, LayerNorm, Argmax; eps 1e-5 unless given).
func planRows(s kernels.Spec) (opPlan, error) {
	sh := s.In[0]
	cols := int64(sh[len(sh)-1])
	rows := sh.Elements() / cols
	if !fitsInt32(rows, cols) {
		return opPlan{}, unsupported("%v rows %d x %d exceed int32", s.Op, rows, cols)
	}
	eps := s.Params.Eps
	if eps == 0 {
		eps = 1e-5
	}
	g, b := dim3(int(min(rows, maxGrid)), 1, 1), dim3(blockSize, 1, 1)
	var l launch
	switch s.Op {
	case kernels.Softmax:
		l = kernel("softmax_f32", g, b, out(), in(0), i32(int(rows)), i32(int(cols)))
	case kernels.RMSNorm:
		l = kernel("rmsnorm_f32", g, b, out(), in(0), in(1), i32(int(rows)), i32(int(cols)), f32(eps))
	case kernels.Argmax:
		l = kernel("argmax_f32", g, b, out(), in(0), i32(int(rows)), i32(int(cols)))
	default:
		l = kernel("layernorm_f32", g, b, out(), in(0), in(1), in(2), i32(int(rows)), i32(int(cols)), f32(eps))
	}
	return opPlan{launch: l}, nil
}

// planRoPE launches one thread per rotated pair (base 10000 unless given).
func planRoPE(s kernels.Spec) (opPlan, error) {
	sh := s.In[0]
	r := len(sh)
	t, h, d := sh[r-3], sh[r-2], sh[r-1]
	base := s.Params.RopeBase
	if base == 0 {
		base = 10000
	}
	pairs := sh.Elements() / 2 // of the output, which has the input's shape
	if !fitsInt32(int64(s.Params.Pos) + int64(t)) {
		return opPlan{}, unsupported("rope position %d exceeds int32", s.Params.Pos)
	}
	return opPlan{launch: kernel("rope_f32", dim3(gridFor(pairs), 1, 1), dim3(blockSize, 1, 1),
		out(), in(0), i32(t), i32(h), i32(d), i32(s.Params.Pos), f32(base), i64(pairs))}, nil
}

// planQMatMul launches the quantized matmul: QROWS = 2 weight rows and
// QM = 8 activation rows per block (quant.hip); the kernel's loops cover
// a grid cut at the limits.
func planQMatMul(s kernels.Spec) (opPlan, error) {
	a, w := s.In[0], s.In[1]
	kd := a[len(a)-1]
	m := a.Elements() / int64(kd)
	nn := w[0]
	if !fitsInt32(m) {
		return opPlan{}, unsupported("quantized matmul with %d rows exceeds int32", m)
	}
	k := "qmatmul_q8_0"
	if s.DType == kernels.Q4_0 {
		k = "qmatmul_q4_0"
	}
	return opPlan{launch: kernel(k, dim3(min((nn+1)/2, maxGrid), int(min((m+7)/8, maxGridYZ)), 1), dim3(blockSize, 1, 1),
		out(), in(0), in(1), i32(int(m)), i32(nn), i32(kd))}, nil
}

// planAttention launches one block per (query, head, batch), reading the
// first Params.Keys positions of K and V (all when 0).
func planAttention(s kernels.Spec) (opPlan, error) {
	q, k := s.In[0], s.In[1]
	if q[3] > maxHeadD || q[1] > maxGridYZ || q[0] > maxGridYZ {
		return opPlan{}, unsupported("attention %v: head dim above %d or heads/batch above %d", q, maxHeadD, maxGridYZ)
	}
	scale := s.Params.Scale
	if scale == 0 {
		scale = float32(1 / math.Sqrt(float64(q[3])))
	}
	causal := 0
	if s.Params.Causal {
		causal = 1
	}
	keys := s.Params.Keys
	if keys == 0 {
		keys = k[2]
	}
	return opPlan{launch: kernel("attention_f32", dim3(q[2], q[1], q[0]), dim3(blockSize, 1, 1),
		out(), in(0), in(1), in(2), i32(q[1]), i32(k[1]), i32(q[2]), i32(k[2]), i32(keys), i32(q[3]), f32(scale), i32(causal))}, nil
}

// planKVAppend launches a grid over the new rows; the kernel copies the
// rest of the cache first when its output is not the cache itself.
func planKVAppend(s kernels.Spec) (opPlan, error) {
	c, r := s.In[0], s.In[1]
	rows := s.InBytes(1) / 4
	if c[2] > math.MaxInt32 || c[3] > math.MaxInt32 || r[2] > math.MaxInt32 {
		return opPlan{}, unsupported("kv append %v into %v exceeds int32", r, c)
	}
	return opPlan{launch: kernel("kv_append_f32", dim3(gridFor(rows), 1, 1), dim3(blockSize, 1, 1),
		out(), in(0), in(1), i32(r[1]), i32(r[2]), i32(c[2]), i32(c[3]), i32(s.Params.Pos), i64(c.Elements()), i64(rows))}, nil
}

// planGetRows launches one thread per output element, each decoding its
// index's table row as Dequantize does. A kernel cannot return an error:
// where the CPU kernel and the reference fail with kernels.ErrIndex, an
// index that is not a row (not an integer in [0, V), NaN) writes a row of
// NaN; the host path that feeds GetRows checks the tokens it reads back.
func planGetRows(s kernels.Spec) (opPlan, error) {
	v, d := s.In[0][0], s.In[0][1]
	if !fitsInt32(int64(v), int64(d)) {
		return opPlan{}, unsupported("get rows of a table %v exceeds int32", s.In[0])
	}
	n := s.In[1].Elements() * int64(d)
	return opPlan{launch: kernel(getRowsKernel(s.DType), dim3(gridFor(n), 1, 1), dim3(blockSize, 1, 1),
		out(), in(0), in(1), i32(v), i32(d), i64(n))}, nil
}

// getRowsKernel is the GetRows kernel of a table of d, "" for a type
// without one (Validate has refused it).
func getRowsKernel(d kernels.DType) string {
	switch d {
	case kernels.F32:
		return "get_rows_f32"
	case kernels.F16:
		return "get_rows_f16"
	case kernels.Q8_0:
		return "get_rows_q8_0"
	case kernels.Q4_0:
		return "get_rows_q4_0"
	}
	return ""
}

func planMatMul(s kernels.Spec, blas bool) (opPlan, error) {
	a, b := s.In[0], s.In[1]
	k := a[len(a)-1]
	nn := b[len(b)-1]
	g := gemm{n: nn, k: k, batch: 1}
	if len(b) == 3 {
		g.batch, g.m = a[0], a[1]
		g.strideA, g.strideB, g.strideC = int64(g.m)*int64(k), int64(k)*int64(nn), int64(g.m)*int64(nn)
	} else {
		// A shared B: every row of every batch is one tall GEMM.
		m := a.Elements() / int64(k)
		if m > math.MaxInt32 {
			return opPlan{}, unsupported("matmul with %d rows exceeds int32", m)
		}
		g.m = int(m)
	}
	if blas {
		return opPlan{gemm: g, blas: true}, nil
	}
	gy := (g.m + 15) / 16
	if gy > maxGridYZ || g.batch > maxGridYZ {
		return opPlan{}, unsupported("matmul %v x %v exceeds the tiled kernel's grid", a, b)
	}
	return opPlan{launch: kernel("sgemm_tiled", dim3((nn+15)/16, gy, g.batch), dim3(16, 16, 1),
		out(), in(0), in(1), i32(g.m), i32(nn), i32(k), i64(g.strideA), i64(g.strideB), i64(g.strideC))}, nil
}

// checkBuffers reports the first input or output whose size differs from
// what s requires, wrapping kernels.ErrBufferSize.
func checkBuffers(s kernels.Spec, in []backends.Buffer, out backends.Buffer) error {
	if len(in) != len(s.In) {
		return fmt.Errorf("%w: %v takes %d inputs, got %d", kernels.ErrBufferSize, s.Op, len(s.In), len(in))
	}
	for i, b := range in {
		if b == nil {
			return fmt.Errorf("%w: %v input %d is nil", backends.ErrForeignBuffer, s.Op, i)
		}
		if want := s.InBytes(i); b.Size() != want {
			return fmt.Errorf("%w: %v input %d has %d bytes, want %d", kernels.ErrBufferSize, s.Op, i, b.Size(), want)
		}
	}
	if out == nil {
		return fmt.Errorf("%w: %v output is nil", backends.ErrForeignBuffer, s.Op)
	}
	if want := s.OutBytes(); out.Size() != want {
		return fmt.Errorf("%w: %v output has %d bytes, want %d", kernels.ErrBufferSize, s.Op, out.Size(), want)
	}
	return nil
}

var errNoKernel = errors.New("rocm: no kernel source declares this kernel")
