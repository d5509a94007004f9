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
// The same with the 64-bit integers of an ILP64 build (OpenBLAS's
// INTERFACE64, BLIS's --blas-int-size=64, MKL's ILP64 layer); the enums
// stay int.
typedef void (*adapt_sgemm64_fn)(int order, int transa, int transb,
	long long m, long long n, long long k, float alpha, const float *a, long long lda,
	const float *b, long long ldb, float beta, float *c, long long ldc);
typedef void (*adapt_sgemv64_fn)(int order, int trans, long long m, long long n,
	float alpha, const float *a, long long lda, const float *x, long long incx,
	float beta, float *y, long long incy);
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

// adapt_call_str calls a const char *(void) (openblas_get_config); NULL
// comes back as "".
static const char *adapt_call_str(void *fn) {
	const char *s = ((const char *(*)(void))fn)();
	return s ? s : "";
}

// adapt_call_int calls an int(void). BLIS's bli_info_get_blas_int_type_size
// returns a gint_t, 32 or 64 bits wide: its low 32 bits, read here, hold
// the answer either way.
static int adapt_call_int(void *fn) { return ((int (*)(void))fn)(); }

// adapt_call_int_int calls an int(int) (MKL_Set_Interface_Layer).
static int adapt_call_int_int(void *fn, int x) { return ((int (*)(int))fn)(x); }

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

// adapt_sgemm64 and adapt_sgemv64 are adapt_sgemm and adapt_sgemv for an
// ILP64 library.
static void adapt_sgemm64(void *fn, long long m, long long n, long long k,
	const float *a, long long lda, const float *b, long long ldb, float *c, long long ldc) {
	((adapt_sgemm64_fn)fn)(101, 111, 111, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}
static void adapt_sgemv64(void *fn, long long n, long long k, const float *a,
	const float *b, long long ldb, float *c) {
	((adapt_sgemv64_fn)fn)(101, 112, k, n, 1.0f, b, ldb, a, 1, 0.0f, c, 1);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unsafe"
)

// cgoEnabled reports whether this build can load a CBLAS at run time.
const cgoEnabled = true

// cblasLib is one candidate CBLAS: the file names dlopen tries, in order,
// and the symbols that make its threading single-threaded (optional).
type cblasLib struct {
	runtime string   // Info.Runtime, and how cblasIntBits asks: "openblas", "blis", "mkl"
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

// loadCBLAS dlopens the first CBLAS that has cblas_sgemm, says the width
// of its integers and computes the probe right, and sets its own thread
// count to 1: that count is process-wide, while this process runs
// backends with different thread counts, so the backend splits the work
// itself. It returns the path taken or, when none loads, every path tried
// with why it was not taken.
func loadCBLAS() (blasPath, []string) {
	var tried []string
	for _, lib := range cblasLibs {
		for _, p := range lib.paths {
			path, err := openCBLAS(lib, p)
			if err == nil {
				return path, tried
			}
			tried = append(tried, err.Error())
		}
	}
	return blasPath{}, tried
}

// openCBLAS opens lib's file p, or returns why not, starting with p. The
// handle of a library taken stays open for the life of the process: the
// function pointers live in it.
func openCBLAS(lib cblasLib, p string) (blasPath, error) {
	cp := C.CString(p)
	h := C.adapt_dlopen(cp)
	C.free(unsafe.Pointer(cp))
	if h == nil {
		msg := C.GoString(C.adapt_dlerror())
		if !strings.HasPrefix(msg, p) { // glibc names the file itself
			msg = p + ": " + msg
		}
		return blasPath{}, errors.New(msg)
	}
	refuse := func(why string) (blasPath, error) {
		C.adapt_dlclose(h)
		return blasPath{}, fmt.Errorf("%s: %s", p, why)
	}
	fn := dlsym(h, "cblas_sgemm")
	if fn == nil {
		return refuse("cblas_sgemm: " + C.GoString(C.adapt_dlerror()))
	}
	// Asked first: MKL takes its interface layer only before any other call.
	bits, err := cblasIntBits(lib.runtime, h)
	if err != nil {
		return refuse(err.Error())
	}
	setThreads := threadSetter(dlsym(h, lib.threads), lib.wide)
	if setThreads != nil {
		setThreads(1)
	}
	serial := cblasGemm(fn, dlsym(h, "cblas_sgemv"), bits == 64)
	if err := probeGemm(serial); err != nil {
		return refuse(err.Error())
	}
	desc := fmt.Sprintf("%s (%s)", lib.label, p)
	if bits == 64 {
		desc = fmt.Sprintf("%s (%s, 64-bit integers)", lib.label, p)
	}
	return blasPath{
		runtime: lib.runtime,
		desc:    desc,
		serial:  serial,
		lib:     fileStamp(C.GoString(C.adapt_dlfile(fn))),
		threads: setThreads,
	}, nil
}

// dlsym returns the address of name in the library h, or nil.
func dlsym(h unsafe.Pointer, name string) unsafe.Pointer {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	return C.adapt_dlsym(h, cn)
}

// MKL's interface layers (mkl_service.h): the ILP64 bit, set or not, in
// what MKL_Set_Interface_Layer returns.
const (
	mklInterfaceLP64  = 0
	mklInterfaceILP64 = 1
)

// cblasIntBits returns the width in bits of the integers that the CBLAS at
// h takes (32, or 64 in an ILP64 build), as the library of kind runtime
// reports it, or why it cannot tell. Called with the wrong width, an ILP64
// library reads the upper halves of its size arguments from whatever the
// registers and stack slots hold: zero often enough to pass tests, then
// wild sizes. The library is asked because nothing else tells: the file
// name does not (an INTERFACE64=1 OpenBLAS builds as libopenblas.so.0,
// a --blas-int-size=64 BLIS as libblis.so.4), nor does a trial product,
// since a size that reads differently at the two widths is out of range
// at one of them. TestLoadCBLASIntWidth and TestLoadCBLASUnknownWidth
// hold it.
func cblasIntBits(runtime string, h unsafe.Pointer) (int, error) {
	switch runtime {
	case "openblas":
		f := dlsym(h, "openblas_get_config")
		if f == nil {
			return 0, errors.New("no openblas_get_config to tell the width of its integers")
		}
		if slices.Contains(strings.Fields(C.GoString(C.adapt_call_str(f))), "USE64BITINT") {
			return 64, nil
		}
		return 32, nil
	case "blis":
		// Not bli_info_get_int_type_size: that is BLIS's own integer,
		// 64 bits in LP64 and ILP64 builds alike.
		f := dlsym(h, "bli_info_get_blas_int_type_size")
		if f == nil {
			return 0, errors.New("no bli_info_get_blas_int_type_size to tell the width of its integers")
		}
		switch n := int(C.adapt_call_int(f)); n {
		case 32, 64:
			return n, nil
		default:
			return 0, fmt.Errorf("bli_info_get_blas_int_type_size says %d bits", n)
		}
	case "mkl":
		// Asking for LP64 overrides MKL_INTERFACE_LAYER; the answer is the
		// layer in force, which an earlier call may have fixed otherwise.
		f := dlsym(h, "MKL_Set_Interface_Layer")
		if f == nil {
			return 0, errors.New("no MKL_Set_Interface_Layer to tell the width of its integers")
		}
		switch layer := int(C.adapt_call_int_int(f, mklInterfaceLP64)); {
		case layer < 0:
			return 0, fmt.Errorf("MKL_Set_Interface_Layer failed (%d)", layer)
		case layer&mklInterfaceILP64 != 0:
			return 64, nil
		}
		return 32, nil
	}
	return 0, fmt.Errorf("no way to ask a %q library the width of its integers", runtime)
}

// probeGemm computes a product small enough to check exactly through
// serial, with sgemm (3 rows) and sgemv (1 row) and leading dimensions
// wider than the matrices, and says what came out if it is wrong. It
// checks the call as configured, which catches a library that
// misreports its width only when the upper halves happen not to be
// zero (cblasIntBits), and one that computes wrong (TestLoadCBLASProbe).
func probeGemm(serial gemmFunc) error {
	const n, k, lda, ldb, ldc = 4, 5, 7, 6, 5
	a, b := make([]float32, 3*lda), make([]float32, k*ldb)
	for i := range a {
		a[i] = float32(i%7 - 3) // small integers: every sum is exact, in any order
	}
	for i := range b {
		b[i] = float32(i%5 - 2)
	}
	for _, m := range []int{3, 1} {
		got, want := make([]float32, m*ldc), make([]float32, m*ldc)
		serial(m, n, k, a, lda, b, ldb, got, ldc)
		gonumGemm(m, n, k, a, lda, b, ldb, want, ldc)
		if !slices.Equal(got, want) {
			return fmt.Errorf("probe: a %d×%d·%d×%d product came out %v, want %v", m, k, k, n, got, want)
		}
	}
	return nil
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
// sgemv there (BenchmarkDecode measures the sgemv path). wide passes the
// integers as 64 bits, for an ILP64 library (cblasIntBits). It is safe
// for concurrent calls: the libraries are thread-safe once their own
// threading is off.
func cblasGemm(fn, gemv unsafe.Pointer, wide bool) gemmFunc {
	return func(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
		if m == 0 || n == 0 {
			return
		}
		if k == 0 {
			clear32(c, m, n, ldc)
			return
		}
		pa, pb, pc := (*C.float)(unsafe.Pointer(&a[0])), (*C.float)(unsafe.Pointer(&b[0])), (*C.float)(unsafe.Pointer(&c[0]))
		switch {
		case wide && m == 1 && gemv != nil:
			C.adapt_sgemv64(gemv, C.longlong(n), C.longlong(k), pa, pb, C.longlong(ldb), pc)
		case wide:
			C.adapt_sgemm64(fn, C.longlong(m), C.longlong(n), C.longlong(k),
				pa, C.longlong(lda), pb, C.longlong(ldb), pc, C.longlong(ldc))
		case max(m, n, k, lda, ldb, ldc) > math.MaxInt32:
			// An LP64 CBLAS takes C ints: truncated, a size wrapped
			// negative and the call left C unwritten (TestCBLASHugeDims).
			gonumGemm(m, n, k, a, lda, b, ldb, c, ldc)
		case m == 1 && gemv != nil:
			C.adapt_sgemv(gemv, C.int(n), C.int(k), pa, pb, C.int(ldb), pc)
		default:
			C.adapt_sgemm(fn, C.int(m), C.int(n), C.int(k), pa, C.int(lda), pb, C.int(ldb), pc, C.int(ldc))
		}
	}
}
