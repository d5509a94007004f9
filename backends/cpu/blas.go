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
	desc    string   // "OpenBLAS (libopenblas.so.0)", "..., 64-bit integers)" or "gonum (pure Go)"
	serial  gemmFunc // single-threaded; the backend splits work across its pool
	reason  string   // why gonum runs: every CBLAS path tried; empty otherwise
	lib     string   // the loaded library file's fileStamp; "" for gonum
	// threads sets the library's own process-wide thread count (nil when
	// it has no setter). The backend keeps it at 1; BenchmarkMatMulDirect
	// raises it to time the library threading a product by itself.
	threads func(n int)
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

// logPath writes the one line that says which path matmul takes to l,
// once per process per path: opening many backends must not repeat it. A
// nil l writes nothing and leaves the line to the next Logger.
func logPath(l *slog.Logger, p blasPath) {
	if l == nil {
		return
	}
	loggedMu.Lock()
	seen := logged[p.desc]
	logged[p.desc] = true
	loggedMu.Unlock()
	if !seen {
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

// tilesPerThread is how many tiles of C each thread gets on average: the
// pool hands tiles out as threads come free, so a thread that is
// preempted or slower holds up the product by one tile, not by its whole
// share; but each further tile packs rows of A or columns of B again.
// BenchmarkMatMulDirect holds the figure (BENCHMARKS.md).
const tilesPerThread = 2

// panelGemm returns a Gemm that splits C into tiles, about tilesPerThread
// per thread of p, and runs serial on each, the pool's threads claiming
// tiles as they come free. Each tile's call packs its rows of A and its
// columns of B, so the grid (rows × columns of tiles) is the one that
// packs the least, with tiles at least minPanel on a side: a short, wide
// C (decode: M of 1 to a few) is cut by columns only. The result is safe
// for concurrent calls when serial is. Products of fewer than minMACs
// multiply-adds run on the calling goroutine.
func panelGemm(p parallel, serial gemmFunc, minMACs int) gemmFunc {
	return func(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
		t := p.Threads()
		if t <= 1 || m*n*k < minMACs {
			serial(m, n, k, a, lda, b, ldb, c, ldc)
			return
		}
		rows, cols := tileGrid(m, n, t*tilesPerThread)
		if rows*cols == 1 {
			serial(m, n, k, a, lda, b, ldb, c, ldc)
			return
		}
		task := panelTasks.Get().(*panelTask)
		task.serial, task.rows, task.cols = serial, rows, cols
		task.m, task.n, task.k, task.lda, task.ldb, task.ldc = m, n, k, lda, ldb, ldc
		task.a, task.b, task.c = a, b, c
		p.Parallel(rows*cols, task.fn)
		task.serial, task.a, task.b, task.c = nil, nil, nil, nil
		panelTasks.Put(task)
	}
}

// tileGrid returns the grid of at most want tiles over an m×n C, each at
// least minPanel on a side where C allows, that packs the least: a tile
// packs its rows of A (m/rows × k) and its columns of B (k × n/cols), so
// the grid costs cols·m + rows·n. The grid with the most tiles wins, then
// the one that costs least.
func tileGrid(m, n, want int) (rows, cols int) {
	maxRows, maxCols := max(1, min(want, m/minPanel)), max(1, min(want, n/minPanel))
	rows, cols = 1, 1
	best := -1
	for r := 1; r <= maxRows; r++ {
		c := min(maxCols, want/r)
		cost := c*m + r*n
		if r*c > rows*cols || r*c == rows*cols && (best < 0 || cost < best) {
			rows, cols, best = r, c, cost
		}
	}
	return rows, cols
}

// panelTask is one split product. Tasks are pooled with their fn bound
// once, so that a split allocates nothing (a closure per call would).
type panelTask struct {
	serial        gemmFunc
	rows, cols    int
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

// run computes tiles [lo, hi), numbered row by row of the grid.
func (t *panelTask) run(lo, hi int) {
	for q := lo; q < hi; q++ {
		r, c := q/t.cols, q%t.cols
		i0, i1 := r*t.m/t.rows, (r+1)*t.m/t.rows
		j0, j1 := c*t.n/t.cols, (c+1)*t.n/t.cols
		t.serial(i1-i0, j1-j0, t.k, t.a[i0*t.lda:], t.lda, t.b[j0:], t.ldb, t.c[i0*t.ldc+j0:], t.ldc)
	}
}
