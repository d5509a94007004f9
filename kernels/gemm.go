package kernels

import "sync"

// Gemm computes the row-major product C = A·B, overwriting C: A is m×k
// with row stride lda, B is k×n with row stride ldb, C is m×n with row
// stride ldc (strides in elements). A Gemm must be safe for concurrent
// calls; it may parallelise internally. With k = 0 it sets C to zero.
type Gemm func(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int)

// Blocking of the built-in gemm. A task computes a gemmMC×gemmNC tile of C
// and walks K in gemmKC slices, packing each slice of B (256 KiB, in L2)
// into 4-column micro-panels that the 2×4 micro-kernel streams. The 2×4
// kernel was the fastest of 4×4, 4×4 with packed A and 2×4 in pure Go
// (5.3 against 4.4 GFLOP/s on one core): larger tiles spill the 15
// floating-point registers the compiler has.
const (
	gemmMC = 64
	gemmNC = 256
	gemmKC = 256
	gemmNR = 4
	// gemmSmallM is the row count below which a product is a few matrix-
	// vector products, streamed without packing (decode).
	gemmSmallM = 4
)

var packPool = sync.Pool{New: func() any {
	s := make([]float32, gemmKC*gemmNC)
	return &s
}}

// gemmTask is one call of the built-in gemm, shared by the pool's workers.
type gemmTask struct {
	m, n, k       int
	a, b, c       []float32
	lda, ldb, ldc int
	colBlocks     int
}

var gemmTasks = sync.Pool{New: func() any { return new(gemmTask) }}

// goGemm is the built-in Gemm: blocked, packed and parallel over tiles of
// C on c's pool. Pure Go, so it runs where no BLAS does.
func (cpu *CPU) goGemm(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if m <= 0 || n <= 0 {
		return
	}
	t := gemmTasks.Get().(*gemmTask)
	*t = gemmTask{m: m, n: n, k: k, a: a, b: b, c: c, lda: lda, ldb: ldb, ldc: ldc}
	if m < gemmSmallM {
		// Column chunks of at least 64 keep each worker's stores in whole
		// cache lines.
		cols := (n + 63) / 64
		cpu.par(cols, 2*m*k*64, gemvRanger{t})
	} else {
		t.colBlocks = (n + gemmNC - 1) / gemmNC
		tiles := (m + gemmMC - 1) / gemmMC * t.colBlocks
		cpu.par(tiles, 2*gemmMC*gemmNC*k, t)
	}
	*t = gemmTask{}
	gemmTasks.Put(t)
}

// gemvRanger runs the small-M path over column chunks of 64.
type gemvRanger struct{ t *gemmTask }

func (g gemvRanger) run(lo, hi int) {
	t := g.t
	j0, j1 := lo*64, min(hi*64, t.n)
	for i := range t.m {
		ci := t.c[i*t.ldc+j0 : i*t.ldc+j1]
		clear(ci)
		ai := t.a[i*t.lda : i*t.lda+t.k]
		p := 0
		for ; p+4 <= t.k; p += 4 {
			x0, x1, x2, x3 := ai[p], ai[p+1], ai[p+2], ai[p+3]
			b0 := t.b[p*t.ldb+j0 : p*t.ldb+j1]
			b1 := t.b[(p+1)*t.ldb+j0 : (p+1)*t.ldb+j1]
			b2 := t.b[(p+2)*t.ldb+j0 : (p+2)*t.ldb+j1]
			b3 := t.b[(p+3)*t.ldb+j0 : (p+3)*t.ldb+j1]
			b1, b2, b3 = b1[:len(ci)], b2[:len(ci)], b3[:len(ci)]
			b0 = b0[:len(ci)]
			for j := range ci {
				ci[j] += x0*b0[j] + x1*b1[j] + x2*b2[j] + x3*b3[j]
			}
		}
		for ; p < t.k; p++ {
			x := ai[p]
			bp := t.b[p*t.ldb+j0 : p*t.ldb+j1]
			bp = bp[:len(ci)]
			for j := range ci {
				ci[j] += x * bp[j]
			}
		}
	}
}

// run computes the tiles [lo, hi) of C.
func (t *gemmTask) run(lo, hi int) {
	sp := packPool.Get().(*[]float32)
	pack := *sp
	for tile := lo; tile < hi; tile++ {
		i0 := tile / t.colBlocks * gemmMC
		j0 := tile % t.colBlocks * gemmNC
		i1, j1 := min(i0+gemmMC, t.m), min(j0+gemmNC, t.n)
		for i := i0; i < i1; i++ {
			clear(t.c[i*t.ldc+j0 : i*t.ldc+j1])
		}
		for p0 := 0; p0 < t.k; p0 += gemmKC {
			kc := min(gemmKC, t.k-p0)
			t.pack(pack, p0, kc, j0, j1)
			t.tile(pack, p0, kc, i0, i1, j0, j1)
		}
	}
	packPool.Put(sp)
}

// pack copies B[p0:p0+kc, j0:j1] into 4-column panels, panel q holding
// columns j0+4q.. as kc rows of 4, zero-padded past j1.
func (t *gemmTask) pack(dst []float32, p0, kc, j0, j1 int) {
	for q := 0; j0+q*gemmNR < j1; q++ {
		panel := dst[q*kc*gemmNR : (q+1)*kc*gemmNR]
		jq := j0 + q*gemmNR
		w := min(gemmNR, j1-jq)
		for p := range kc {
			src := t.b[(p0+p)*t.ldb+jq:]
			d := panel[p*gemmNR : p*gemmNR+gemmNR : p*gemmNR+gemmNR]
			if w == gemmNR {
				d[0], d[1], d[2], d[3] = src[0], src[1], src[2], src[3]
				continue
			}
			for r := range gemmNR {
				d[r] = 0
				if r < w {
					d[r] = src[r]
				}
			}
		}
	}
}

// tile adds A[i0:i1, p0:p0+kc] · packed B to C[i0:i1, j0:j1].
func (t *gemmTask) tile(pack []float32, p0, kc, i0, i1, j0, j1 int) {
	for i := i0; i < i1; i += 2 {
		a0 := t.a[i*t.lda+p0 : i*t.lda+p0+kc]
		a1 := a0
		two := i+1 < i1
		if two {
			a1 = t.a[(i+1)*t.lda+p0 : (i+1)*t.lda+p0+kc]
		}
		for q := 0; j0+q*gemmNR < j1; q++ {
			jq := j0 + q*gemmNR
			r0, r1 := kernel2x4(a0, a1, pack[q*kc*gemmNR:(q+1)*kc*gemmNR])
			w := min(gemmNR, j1-jq)
			c0 := t.c[i*t.ldc+jq : i*t.ldc+jq+w]
			for j := range c0 {
				c0[j] += r0[j]
			}
			if two {
				c1 := t.c[(i+1)*t.ldc+jq : (i+1)*t.ldc+jq+w]
				for j := range c1 {
					c1[j] += r1[j]
				}
			}
		}
	}
}

// kernel2x4 returns rows a0 and a1 (length kc) times a kc×4 packed panel.
func kernel2x4(a0, a1, bp []float32) (r0, r1 [4]float32) {
	var c00, c01, c02, c03, c10, c11, c12, c13 float32
	a1 = a1[:len(a0)]
	bp = bp[:len(a0)*4]
	for p := range a0 {
		b := bp[p*4 : p*4+4 : p*4+4]
		b0, b1, b2, b3 := b[0], b[1], b[2], b[3]
		x := a0[p]
		c00 += x * b0
		c01 += x * b1
		c02 += x * b2
		c03 += x * b3
		x = a1[p]
		c10 += x * b0
		c11 += x * b1
		c12 += x * b2
		c13 += x * b3
	}
	return [4]float32{c00, c01, c02, c03}, [4]float32{c10, c11, c12, c13}
}
