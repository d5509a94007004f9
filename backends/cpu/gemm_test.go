package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
)

// goParallel is a minimal stand-in for kernels.Pool: one goroutine per
// chunk. It lets the panel split be tested on its own.
type goParallel int

func (g goParallel) Threads() int { return int(g) }

func (g goParallel) Parallel(n int, fn func(lo, hi int)) {
	var wg sync.WaitGroup
	t := int(g)
	for i := range t {
		lo, hi := i*n/t, (i+1)*n/t
		if lo == hi {
			continue
		}
		wg.Go(func() { fn(lo, hi) })
	}
	wg.Wait()
}

// naiveGemm is the independent reference: triple loop, float64 sums.
func naiveGemm(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	for i := range m {
		for j := range n {
			var s float64
			for l := range k {
				s += float64(a[i*lda+l]) * float64(b[l*ldb+j])
			}
			c[i*ldc+j] = float32(s)
		}
	}
}

func randSlice(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

// requireLibs says that the runtime libraries the tests load must be
// present (make ci sets it): a missing one fails the test instead of
// skipping it, so that CI cannot pass with the CBLAS path untested.
const requireLibs = "ADAPTSCHED_REQUIRE_LIBS"

// cblasOrSkip returns the loaded CBLAS path; without one the test skips
// with the reason, or fails when requireLibs is set.
func cblasOrSkip(t testing.TB) blasPath {
	t.Helper()
	p := selectPath(false)
	if p.runtime == "gonum" {
		if os.Getenv(requireLibs) == "1" {
			t.Fatalf("%s=1 but no CBLAS loaded, so the OpenBLAS path is untested: %s", requireLibs, p.reason)
		}
		t.Skipf("no CBLAS on this machine (install libopenblas0): %s", p.reason)
	}
	return p
}

func gemmShapes() [][3]int {
	return [][3]int{
		{1, 1, 1}, {1, 4096, 64}, {3, 5, 7}, {17, 33, 65}, {64, 64, 64},
		{100, 1, 300}, {1, 700, 257}, {129, 97, 513}, {2, 300, 40}, {257, 190, 31},
	}
}

func testGemm(t *testing.T, serial gemmFunc) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, threads := range []int{1, 2, 3} {
		g := panelGemm(goParallel(threads), serial, 0)
		for _, sh := range gemmShapes() {
			m, n, k := sh[0], sh[1], sh[2]
			// Leading dimensions wider than the matrices: panels must honour them.
			lda, ldb, ldc := k+3, n+1, n+2
			a, b := randSlice(r, m*lda), randSlice(r, k*ldb)
			got, want := randSlice(r, m*ldc), make([]float32, m*ldc)
			copy(want, got)
			g(m, n, k, a, lda, b, ldb, got, ldc)
			naiveGemm(m, n, k, a, lda, b, ldb, want, ldc)
			for i := range m {
				for j := range ldc {
					x, y := got[i*ldc+j], want[i*ldc+j]
					// f32 accumulation error grows with sqrt(k) on N(0,1) data;
					// written so that a NaN fails too.
					if tol := 1e-5 * float64(k) * 4; !(math.Abs(float64(x-y)) <= tol) {
						t.Fatalf("threads %d, %dx%dx%d: c[%d,%d] = %v, want %v", threads, m, n, k, i, j, x, y)
					}
				}
			}
		}
	}
}

// forceSplit makes backends opened during the test split every product,
// however small, so that the panels are exercised on test-sized inputs.
func forceSplit(t *testing.T) {
	saved := splitMACs
	splitMACs = 0
	t.Cleanup(func() { splitMACs = saved })
}

func TestGemmCBLAS(t *testing.T) { testGemm(t, cblasOrSkip(t).serial) }

func TestGemmGonum(t *testing.T) { testGemm(t, gonumGemm) }

func TestGemmZeroK(t *testing.T) {
	for name, g := range map[string]gemmFunc{"gonum": gonumGemm, "cblas": selectPath(false).serial} {
		c := []float32{1, 2, 3, 4}
		g(2, 2, 0, nil, 1, nil, 2, c, 2)
		if fmt.Sprint(c) != "[0 0 0 0]" {
			t.Errorf("%s: K=0 product %v, want zeros", name, c)
		}
	}
}

// TestTileGrid: the grid has the most tiles up to want, each at least
// minPanel on a side where C allows, and among those packs the least
// (cols·m + rows·n); decode shapes are cut by columns only.
func TestTileGrid(t *testing.T) {
	for _, c := range []struct{ m, n, want, rows, cols int }{
		{1024, 1024, 4, 2, 2}, // 2×2 packs 4096, 1×4 or 4×1 5120
		{1024, 1024, 8, 2, 4}, // 2×4 and 4×2 both 6144: the first found
		{1024, 1024, 2, 1, 2}, // 1×2 and 2×1 both 3072
		{1, 4096, 4, 1, 4},    // decode: one row
		{20, 4096, 4, 1, 4},   // too few rows for two of minPanel
		{4096, 64, 8, 8, 1},   // tall: rows 8×64+... cheaper than columns
		{40, 40, 8, 2, 2},     // minPanel bounds both sides
		{15, 15, 8, 1, 1},     // too small to split
		{1000, 3000, 6, 1, 6}, // 1×6 and 2×3 both 9000: the first found
		{3000, 1000, 6, 3, 2}, // 3×2 and 6×1 both 9000
	} {
		r, k := tileGrid(c.m, c.n, c.want)
		if r != c.rows || k != c.cols {
			t.Errorf("tileGrid(%d, %d, %d) = %d×%d, want %d×%d", c.m, c.n, c.want, r, k, c.rows, c.cols)
		}
	}
}
