package cpu

import (
	"log/slog"
	"strings"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// gemmFunc has kernels.Gemm's signature: row-major C = A·B, C overwritten.
type gemmFunc = func(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int)

// blasPath is how matmul runs: a single-threaded gemm and what it is.
type blasPath struct {
	runtime string   // Info.Runtime: "openblas", "blis", "mkl" or "gonum"
	desc    string   // "OpenBLAS (libopenblas.so.0)" or "gonum (pure Go)"
	serial  gemmFunc // single-threaded; the backend splits work across its pool
	reason  string   // why gonum runs: every CBLAS path tried; empty otherwise
	lib     string   // the loaded library file's fileStamp; "" for gonum
}

// String returns the path as the log line names it.
func (p blasPath) String() string {
	if p.reason != "" {
		return p.desc + ": " + p.reason
	}
	return p.desc
}

var (
	cblasOnce  sync.Once
	cblasFound blasPath // zero runtime when no CBLAS loaded
	cblasTried []string

	loggedMu sync.Mutex
	logged   = map[string]bool{} // paths already logged by this process
)

// selectPath returns the matmul path for a backend: the process-wide
// CBLAS, loaded at the first call, unless forceGonum is set or none loads.
func selectPath(forceGonum bool) blasPath {
	if forceGonum {
		return blasPath{runtime: "gonum", desc: "gonum (pure Go)", serial: gonumGemm, reason: "forced by option"}
	}
	cblasOnce.Do(func() { cblasFound, cblasTried = loadCBLAS() })
	if cblasFound.runtime != "" {
		return cblasFound
	}
	return blasPath{runtime: "gonum", desc: "gonum (pure Go)", serial: gonumGemm, reason: strings.Join(cblasTried, "; ")}
}

// logPath writes the one line that says which path matmul takes, once per
// process per path: opening many backends must not repeat it.
func logPath(l *slog.Logger, p blasPath) {
	loggedMu.Lock()
	seen := logged[p.desc]
	logged[p.desc] = true
	loggedMu.Unlock()
	if !seen && l != nil {
		l.Info("cpu: matmul through "+p.String(), "runtime", p.runtime)
	}
}

// Tile sizes of the gonum path. gonum's Sgemm starts its own goroutines
// (up to GOMAXPROCS) once C holds 4 or more 64×64 blocks, which would let
// the one-thread backend use every core; tiles of 64×192 (3 blocks) keep
// each call serial, and splitting K keeps the B tile (256×192 floats,
// 192 KiB) in L2.
const (
	gonumTileM = 64
	gonumTileN = 192
	gonumTileK = 256
)

// gonumGemm is a single-threaded row-major C = A·B through gonum's pure-Go
// Sgemm, tiled so that gonum never goes parallel on its own.
func gonumGemm(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		clear32(c, m, n, ldc)
		return
	}
	impl := blas32.Implementation()
	for i := 0; i < m; i += gonumTileM {
		mi := min(gonumTileM, m-i)
		for j := 0; j < n; j += gonumTileN {
			nj := min(gonumTileN, n-j)
			for l := 0; l < k; l += gonumTileK {
				kl := min(gonumTileK, k-l)
				beta := float32(1)
				if l == 0 {
					beta = 0
				}
				impl.Sgemm(blas.NoTrans, blas.NoTrans, mi, nj, kl, 1,
					a[i*lda+l:], lda, b[l*ldb+j:], ldb, beta, c[i*ldc+j:], ldc)
			}
		}
	}
}

// clear32 zeroes the m×n matrix c (a product with K = 0).
func clear32(c []float32, m, n, ldc int) {
	for i := range m {
		clear(c[i*ldc : i*ldc+n])
	}
}

// parallel is what the panel split needs of kernels.Pool.
type parallel interface {
	Threads() int
	Parallel(n int, fn func(lo, hi int))
}

// minParallelMACs is the multiply-adds below which a product runs on one
// thread: waking a worker costs tens of µs, more than splitting saves
// below about 256³ (BenchmarkCrossover; BENCHMARKS.md). 2^23 is about
// 203³.
const minParallelMACs = 1 << 23

// splitMACs is the threshold New hands to panelGemm: minParallelMACs,
// lowered by tests so that small products exercise the split.
var splitMACs = minParallelMACs

// minPanel is the narrowest panel worth its own call: narrower ones leave
// the BLAS micro-kernels (8–16 wide) mostly idle.
const minPanel = 16

// panelGemm returns a Gemm that splits C into one panel per thread of p
// and runs serial on each panel. Rows are split when C has enough of them
// (each panel then streams its own rows of A against all of B); a short,
// wide C (decode: M of 1 to a few) is split by columns instead. For square
// C both shapes measure the same within noise (BenchmarkPanelShape).
// The result is safe for concurrent calls when serial is. Products of
// fewer than minMACs multiply-adds run on the calling goroutine.
func panelGemm(p parallel, serial gemmFunc, minMACs int) gemmFunc {
	return func(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
		t := p.Threads()
		if t <= 1 || m*n*k < minMACs {
			serial(m, n, k, a, lda, b, ldb, c, ldc)
			return
		}
		byRows := m >= t*minPanel || m >= n
		dim := n
		if byRows {
			dim = m
		}
		panels := min(t, max(1, dim/minPanel))
		if panels == 1 {
			serial(m, n, k, a, lda, b, ldb, c, ldc)
			return
		}
		task := panelTasks.Get().(*panelTask)
		task.serial, task.byRows, task.dim, task.panels = serial, byRows, dim, panels
		task.m, task.n, task.k, task.lda, task.ldb, task.ldc = m, n, k, lda, ldb, ldc
		task.a, task.b, task.c = a, b, c
		p.Parallel(panels, task.fn)
		task.serial, task.a, task.b, task.c = nil, nil, nil, nil
		panelTasks.Put(task)
	}
}

// panelTask is one split product. Tasks are pooled with their fn bound
// once, so that a split allocates nothing (a closure per call would).
type panelTask struct {
	serial        gemmFunc
	byRows        bool
	dim, panels   int
	m, n, k       int
	a, b, c       []float32
	lda, ldb, ldc int
	fn            func(lo, hi int)
}

var panelTasks = sync.Pool{New: func() any {
	t := new(panelTask)
	t.fn = t.run
	return t
}}

// run computes panels [lo, hi).
func (t *panelTask) run(lo, hi int) {
	for q := lo; q < hi; q++ {
		s, e := q*t.dim/t.panels, (q+1)*t.dim/t.panels
		if t.byRows {
			t.serial(e-s, t.n, t.k, t.a[s*t.lda:], t.lda, t.b, t.ldb, t.c[s*t.ldc:], t.ldc)
		} else {
			t.serial(t.m, e-s, t.k, t.a, t.lda, t.b[s:], t.ldb, t.c[s:], t.ldc)
		}
	}
}
