package kernels

import (
	"encoding/binary"
	"sync"
)

// CPU runs every executable op with fast kernels on the host: parallel
// over rows, heads or blocks on a Pool, matrix products through a Gemm.
// It allocates nothing per call on its hot path once its scratch pools are
// warm. CPU is safe for concurrent use when its Gemm is.
type CPU struct {
	pool *Pool
	gemm Gemm
}

// Gemm computes the row-major product C = A·B, overwriting C: A is m×k
// with row stride lda, B is k×n with row stride ldb, C is m×n with row
// stride ldc (strides in elements). A Gemm must be safe for concurrent
// calls; it may parallelise internally. With k = 0 it sets C to zero.
type Gemm func(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int)

// NewCPU returns a CPU running on p (a one-thread pool when p is nil) and
// multiplying with gemm: the package has no matrix product of its own
// (the CPU backend passes OpenBLAS's or gonum's). gemm must be safe for
// concurrent calls; it may call p.Parallel. A nil gemm is a programmer
// error: NewCPU panics. The caller keeps ownership of p and closes it
// after the CPU's last use.
func NewCPU(p *Pool, gemm Gemm) *CPU {
	if gemm == nil {
		panic("kernels: NewCPU with a nil Gemm")
	}
	if p == nil {
		p = NewPool(1)
	}
	return &CPU{pool: p, gemm: gemm}
}

// minParallelWork is the work (about one multiply-add or element each)
// below which a loop runs on the calling goroutine: waking workers costs
// a few µs, the time of some 10^4 simple operations.
const minParallelWork = 1 << 14

// par runs t over [0, n) on the pool, or inline when n items of
// costPerItem are too little work to share.
func (c *CPU) par(n, costPerItem int, t ranger) {
	if n <= 0 {
		return
	}
	if c.pool.threads == 1 || n == 1 || n*max(costPerItem, 1) < minParallelWork {
		t.run(0, n)
		return
	}
	c.pool.run(n, t)
}

// opTask carries one op's operands to the pool's workers. One struct
// serves every op (fields unused by an op stay zero) so that a single
// sync.Pool recycles them and no call allocates.
type opTask struct {
	c       *CPU
	op      Op
	dt      DType
	p       Params
	x, w, v []float32 // inputs 0, 1, 2 as f32 (when they are f32)
	y       []float32 // output
	raw     []byte    // a non-f32 input (quantized weights, f16 data)
	out     []byte    // Copy's output
	n, k    int       // row length, inner dimension; other ops' sizes below
	m       int       // QuantizedMatMul rows of A; Transpose and MatMul batch size
	rows    int       // rows of the matrix being transposed
	// Attention: heads, query and key lengths, head dimension, and the
	// keys in use (KVAppend: heads, rows, cache positions, head dimension).
	hq, hkv, sq, t, d, keys int
	scale                   float32
	heads                   int       // RoPE heads per row
	theta                   []float64 // RoPE frequencies
}

var opTasks = sync.Pool{New: func() any { return new(opTask) }}

// scratch is a reusable f32 buffer; get grows it as needed.
var scratchPool = sync.Pool{New: func() any { return new([]float32) }}

func getScratch(n int) *[]float32 {
	s := scratchPool.Get().(*[]float32)
	if cap(*s) < n {
		*s = make([]float32, n)
	}
	*s = (*s)[:n]
	return s
}

var thetaPool = sync.Pool{New: func() any { return new([]float64) }}

// Run checks the buffers against s and runs it with the fast kernels. The
// inputs are only read; out is overwritten and must not overlap them,
// except that KVAppend's out may be its cache (input 0) itself, updated in
// place. An Opaque op fails with ErrNotExecutable.
func (c *CPU) Run(s Spec, in [][]byte, out []byte) error {
	if err := CheckBuffers(s, in, out); err != nil {
		return err
	}
	t := opTasks.Get().(*opTask)
	defer func() {
		*t = opTask{}
		opTasks.Put(t)
	}()
	t.c, t.op, t.dt, t.p = c, s.Op, s.DType, s.Params
	if s.OutDType() == F32 {
		t.y = AsF32(out)
	}
	for i := range in {
		if s.InDType(i) != F32 {
			t.raw = in[i]
			continue
		}
		switch i {
		case 0:
			t.x = AsF32(in[0])
		case 1:
			t.w = AsF32(in[1])
		case 2:
			t.v = AsF32(in[2])
		}
	}
	x0 := s.In[0]
	switch s.Op {
	case Opaque:
		return notExecutable(s)
	case MatMul:
		c.matMul(t, x0, s.In[1])
	case QuantizedMatMul:
		t.k, t.n, t.m = lastDim(x0), s.In[1][0], rows(x0)
		c.qMatMul(t)
	case Attention:
		k := s.In[1]
		t.hq, t.sq, t.d, t.hkv, t.t, t.keys = x0[1], x0[2], x0[3], k[1], k[2], s.AttentionKeys()
		t.scale = float32(s.Params.attnScale(t.d))
		c.par(x0[0]*t.hq*t.sq, 4*t.keys*t.d, t)
	case KVAppend:
		if !sameMemory(in[0], out) {
			copy(out, in[0])
		}
		r := s.In[1]
		t.sq, t.hkv, t.d, t.t = r[1], r[2], r[3], x0[2]
		c.par(r[0]*t.sq*t.hkv, t.d, t)
	case Softmax, RMSNorm, LayerNorm:
		t.n = lastDim(x0)
		c.par(rows(x0), 8*t.n, t)
	case Argmax:
		t.n = lastDim(x0)
		c.par(len(t.y), t.n, t)
	case GetRows:
		if err := checkIndices(s, t.w); err != nil {
			return err
		}
		t.raw, t.n = in[0], x0[1]
		c.par(len(t.w), t.n, t)
	case RoPE:
		c.rope(t, x0)
	case Transpose:
		t.rows, t.n = x0[len(x0)-2], lastDim(x0)
		t.m = len(t.x) / (t.rows * t.n)
		c.par(t.m*((t.rows+transposeTile-1)/transposeTile), transposeTile*t.n, t)
	case Dequantize:
		t.n = len(t.y)
		if s.DType.Quantized() {
			t.n /= QK
		}
		c.par(t.n, 64, t)
	case Copy:
		t.raw, t.out = in[0], out
		c.par(len(out), 1, t)
	default: // element-wise: Add, Mul, Scale, SiLU, GELU, SwiGLU
		if t.w != nil {
			t.n = len(t.w)
		}
		c.par(len(t.y), 4, t)
	}
	return nil
}

func (t *opTask) run(lo, hi int) {
	switch t.op {
	case QuantizedMatMul:
		switch {
		case !t.qmmFusedPath():
			t.qmmPanels(lo, hi)
		case !t.qmmQ8SIMD(lo, hi):
			t.qmmFused(lo, hi)
		}
	case MatMul:
		t.matMulBatches(lo, hi)
	case Attention:
		t.attention(lo, hi)
	case KVAppend:
		t.kvAppend(lo, hi)
	case Softmax:
		t.softmax(lo, hi)
	case RMSNorm:
		t.rmsNorm(lo, hi)
	case LayerNorm:
		t.layerNorm(lo, hi)
	case Argmax:
		t.argmax(lo, hi)
	case GetRows:
		t.getRows(lo, hi)
	case RoPE:
		t.rope(lo, hi)
	case Transpose:
		t.transpose(lo, hi)
	case Dequantize:
		t.dequantize(lo, hi)
	case Copy:
		copy(t.out[lo:hi], t.raw[lo:hi])
	default:
		t.elementwise(lo, hi)
	}
}

// matMul runs one gemm for a shared B (A's batch folds into its rows) and
// one per batch for a batched B, the batches spread over the pool.
func (c *CPU) matMul(t *opTask, as, bs Shape) {
	m, k, n := as[len(as)-2], lastDim(as), lastDim(bs)
	if len(bs) == 2 {
		c.gemm(rows(as), n, k, t.x, k, t.w, n, t.y, n)
		return
	}
	t.m, t.k, t.n, t.rows = as[0], k, n, m
	c.par(t.m, 2*m*n*k, t)
}

func (t *opTask) matMulBatches(lo, hi int) {
	m, k, n := t.rows, t.k, t.n
	for b := lo; b < hi; b++ {
		t.c.gemm(m, n, k, t.x[b*m*k:(b+1)*m*k], k, t.w[b*k*n:(b+1)*k*n], n, t.y[b*m*n:(b+1)*m*n], n)
	}
}

// qmmFusedRows is the largest M that QuantizedMatMul serves with the fused
// dequantize-dot (decode); larger M dequantize panels of W for the gemm.
// The AVX2 Q8_0 kernels serve every M: from M = 1 to 512 they beat
// dequantized panels and the gemm by about 10× (BenchmarkKernel).
const qmmFusedRows = 8

// qmmFusedPath reports whether t's QuantizedMatMul takes the fused
// dequantize-dot rather than dequantized panels and the gemm.
func (t *opTask) qmmFusedPath() bool {
	return t.m <= qmmFusedRows || (q8SIMD && t.dt == Q8_0)
}

// qmmPanel is the number of weight rows dequantized per gemm call.
const qmmPanel = 64

func (c *CPU) qMatMul(t *opTask) {
	if t.qmmFusedPath() {
		c.par(t.n, 2*t.m*t.k, t)
		return
	}
	c.par((t.n+qmmPanel-1)/qmmPanel, 2*t.m*t.k*qmmPanel, t)
}

// qmmFused computes output columns [lo, hi): each weight block is decoded
// once and dotted with every row of A.
func (t *opTask) qmmFused(lo, hi int) {
	k, n, m := t.k, t.n, t.m
	rb := int(t.dt.RowBytes(int64(k)))
	var q [QK]float32
	for j := lo; j < hi; j++ {
		row := t.raw[j*rb : (j+1)*rb]
		var acc [qmmFusedRows]float32
		for b := range k / QK {
			var d float32
			if t.dt == Q8_0 {
				blk := row[b*q8Block : (b+1)*q8Block]
				d = F16ToFloat32(binary.LittleEndian.Uint16(blk))
				qs := blk[2 : 2+QK]
				for e := range q {
					q[e] = float32(int8(qs[e]))
				}
			} else {
				blk := row[b*q4Block : (b+1)*q4Block]
				d = F16ToFloat32(binary.LittleEndian.Uint16(blk))
				qs := blk[2 : 2+QK/2]
				for e := range QK / 2 {
					q[e] = float32(int(qs[e]&0xf) - 8)
					q[e+QK/2] = float32(int(qs[e]>>4) - 8)
				}
			}
			for r := range m {
				acc[r] += d * dot(q[:], t.x[r*k+b*QK:r*k+b*QK+QK])
			}
		}
		for r := range m {
			t.y[r*n+j] = acc[r]
		}
	}
}

// qmmPanels computes panels [lo, hi) of qmmPanel output columns: the
// panel's weight rows are dequantized transposed (K×width, so that the
// gemm's B is W panelᵀ) and multiplied by A.
func (t *opTask) qmmPanels(lo, hi int) {
	k, n, m := t.k, t.n, t.m
	rb := int(t.dt.RowBytes(int64(k)))
	sp := getScratch(k * qmmPanel)
	panel := *sp
	var blk [QK]float32
	for p := lo; p < hi; p++ {
		j0 := p * qmmPanel
		w := min(qmmPanel, n-j0)
		for j := range w {
			row := t.raw[(j0+j)*rb : (j0+j+1)*rb]
			for b := range k / QK {
				if t.dt == Q8_0 {
					dequantQ8Block(blk[:], row[b*q8Block:(b+1)*q8Block])
				} else {
					dequantQ4Block(blk[:], row[b*q4Block:(b+1)*q4Block])
				}
				for e, v := range blk {
					panel[(b*QK+e)*w+j] = v
				}
			}
		}
		t.c.gemm(m, w, k, t.x, k, panel, w, t.y[j0:], n)
	}
	scratchPool.Put(sp)
}
