//go:build cgo

package cpu

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

// The CBLAS prototype, declared here so that no BLAS header is needed at
// build time. The enums are passed as int: CblasRowMajor=101,
// CblasNoTrans=111, CblasTrans=112.
typedef void (*adapt_sgemm_fn)(int order, int transa, int transb,
	int m, int n, int k, float alpha, const float *a, int lda,
	const float *b, int ldb, float beta, float *c, int ldc);
typedef void (*adapt_sgemv_fn)(int order, int trans, int m, int n,
	float alpha, const float *a, int lda, const float *x, int incx,
	float beta, float *y, int incy);
typedef void (*adapt_set_threads_fn)(int n);
typedef void (*adapt_set_threads_wide_fn)(long long n);

static void *adapt_dlopen(const char *path) {
	dlerror();
	return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

static void *adapt_dlsym(void *h, const char *name) {
	dlerror();
	return dlsym(h, name);
}

// adapt_dlerror returns the last dlerror text, or "" (never NULL).
static const char *adapt_dlerror(void) {
	const char *e = dlerror();
	return e ? e : "";
}

static void adapt_dlclose(void *h) { dlclose(h); }

// adapt_dlfile returns the file of the loaded library that holds sym, or
// "" (never NULL).
static const char *adapt_dlfile(void *sym) {
	Dl_info info;
	if (dladdr(sym, &info) && info.dli_fname) return info.dli_fname;
	return "";
}

static void adapt_set_threads(void *fn, int n) { ((adapt_set_threads_fn)fn)(n); }

// adapt_set_threads_wide is for BLIS, whose dim_t is 64 bits.
static void adapt_set_threads_wide(void *fn, long long n) { ((adapt_set_threads_wide_fn)fn)(n); }

// adapt_sgemm computes the row-major C = A·B (alpha 1, beta 0).
static void adapt_sgemm(void *fn, int m, int n, int k,
	const float *a, int lda, const float *b, int ldb, float *c, int ldc) {
	((adapt_sgemm_fn)fn)(101, 111, 111, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}
// adapt_sgemv computes the row vector c = a·B, as y = Bᵀx on the
// row-major k×n matrix B.
static void adapt_sgemv(void *fn, int n, int k, const float *a,
	const float *b, int ldb, float *c) {
	((adapt_sgemv_fn)fn)(101, 112, k, n, 1.0f, b, ldb, a, 1, 0.0f, c, 1);
}
*/
import "C"

import (
	"fmt"
	"math"
	"strings"
	"unsafe"
)

// cgoEnabled reports whether this build can load a CBLAS at run time.
const cgoEnabled = true

// cblasLib is one candidate CBLAS: the file names dlopen tries, in order,
// and the symbols that make its threading single-threaded (optional).
type cblasLib struct {
	runtime string   // Info.Runtime: "openblas", "blis", "mkl"
	label   string   // for the log line: "OpenBLAS"
	paths   []string // file names handed to dlopen
	threads string   // setter of the library's own thread count, called with 1
	wide    bool     // the setter takes a 64-bit count (BLIS's dim_t)
}

// cblasLibs are the libraries tried, best first.
var cblasLibs = []cblasLib{
	{"openblas", "OpenBLAS", []string{"libopenblas.so.0"}, "openblas_set_num_threads", false},
	{"blis", "BLIS", []string{"libblis.so.4", "libblis.so.3", "libblis.so"}, "bli_thread_set_num_threads", true},
	{"mkl", "MKL", []string{"libmkl_rt.so.2", "libmkl_rt.so"}, "MKL_Set_Num_Threads", false},
}

// loadCBLAS dlopens the first CBLAS that has cblas_sgemm and sets its own
// thread count to 1: that count is process-wide, while this process runs
// backends with different thread counts, so the backend splits the work
// itself. It returns the path taken or, when none loads, every path tried
// with its dlerror text.
func loadCBLAS() (blasPath, []string) {
	var tried []string
	sym := C.CString("cblas_sgemm")
	defer C.free(unsafe.Pointer(sym))
	for _, lib := range cblasLibs {
		for _, p := range lib.paths {
			cp := C.CString(p)
			h := C.adapt_dlopen(cp)
			C.free(unsafe.Pointer(cp))
			if h == nil {
				msg := C.GoString(C.adapt_dlerror())
				if !strings.HasPrefix(msg, p) { // glibc names the file itself
					msg = p + ": " + msg
				}
				tried = append(tried, msg)
				continue
			}
			fn := C.adapt_dlsym(h, sym)
			if fn == nil {
				tried = append(tried, fmt.Sprintf("%s: cblas_sgemm: %s", p, C.GoString(C.adapt_dlerror())))
				C.adapt_dlclose(h)
				continue
			}
			cn := C.CString(lib.threads)
			setThreads := threadSetter(C.adapt_dlsym(h, cn), lib.wide)
			C.free(unsafe.Pointer(cn))
			if setThreads != nil {
				setThreads(1)
			}
			// The handle stays open for the life of the process: the
			// function pointer lives in it.
			gemvSym := C.CString("cblas_sgemv")
			gemv := C.adapt_dlsym(h, gemvSym)
			C.free(unsafe.Pointer(gemvSym))
			return blasPath{
				runtime: lib.runtime,
				desc:    fmt.Sprintf("%s (%s)", lib.label, p),
				serial:  cblasGemm(fn, gemv),
				lib:     fileStamp(C.GoString(C.adapt_dlfile(fn))),
				threads: setThreads,
			}, tried
		}
	}
	return blasPath{}, tried
}

// threadSetter returns a call of the library's thread-count setter at
// set (64-bit count when wide), or nil when set is nil.
func threadSetter(set unsafe.Pointer, wide bool) func(n int) {
	switch {
	case set == nil:
		return nil
	case wide:
		return func(n int) { C.adapt_set_threads_wide(set, C.longlong(n)) }
	}
	return func(n int) { C.adapt_set_threads(set, C.int(n)) }
}

// cblasGemm returns a single-threaded Gemm calling the cblas_sgemm at fn,
// or for a single row of C (decode) the cblas_sgemv at gemv when the
// library has one: OpenBLAS's sgemm is several times slower than its
// sgemv there (BenchmarkDecode measures the sgemv path). It is safe for
// concurrent calls: the libraries are thread-safe once their own
// threading is off.
func cblasGemm(fn, gemv unsafe.Pointer) gemmFunc {
	return func(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
		if m == 0 || n == 0 {
			return
		}
		if k == 0 {
			clear32(c, m, n, ldc)
			return
		}
		if max(m, n, k, lda, ldb, ldc) > math.MaxInt32 {
			// CBLAS takes C ints: truncated, a size wrapped negative and
			// the call left C unwritten (TestCBLASHugeDims).
			gonumGemm(m, n, k, a, lda, b, ldb, c, ldc)
			return
		}
		if m == 1 && gemv != nil {
			C.adapt_sgemv(gemv, C.int(n), C.int(k), (*C.float)(unsafe.Pointer(&a[0])),
				(*C.float)(unsafe.Pointer(&b[0])), C.int(ldb), (*C.float)(unsafe.Pointer(&c[0])))
			return
		}
		C.adapt_sgemm(fn, C.int(m), C.int(n), C.int(k),
			(*C.float)(unsafe.Pointer(&a[0])), C.int(lda),
			(*C.float)(unsafe.Pointer(&b[0])), C.int(ldb),
			(*C.float)(unsafe.Pointer(&c[0])), C.int(ldc))
	}
}
