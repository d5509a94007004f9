//go:build cgo

package rocm

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

// The shim holds the function pointers resolved with dlsym and calls
// through them: cgo cannot call a C function pointer itself. No vendor
// header is included; every handle (stream, event, module, function, BLAS
// handle) and device pointer travels as an unsigned long long.

typedef unsigned long long u64;

enum {
	F_GET_DEVICE_COUNT, F_SET_DEVICE, F_MALLOC, F_FREE, F_HOST_MALLOC, F_HOST_FREE,
	F_MEMCPY_ASYNC, F_STREAM_CREATE, F_STREAM_DESTROY, F_STREAM_SYNC,
	F_EVENT_CREATE, F_EVENT_DESTROY, F_EVENT_RECORD, F_EVENT_SYNC, F_EVENT_ELAPSED,
	F_EVENT_QUERY, F_STREAM_WAIT_EVENT,
	F_MEM_GET_INFO, F_RUNTIME_VERSION, F_ERROR_STRING, F_DEVICE_PROPS, F_DEVICE_NAME,
	F_DEVICE_ATTR, F_INIT, F_DEVICE_GET, F_CTX_RETAIN, F_CTX_SET_CURRENT,
	F_MODULE_LOAD, F_MODULE_UNLOAD, F_MODULE_FUNCTION, F_LAUNCH,
	F_RTC_CREATE, F_RTC_COMPILE, F_RTC_LOG_SIZE, F_RTC_LOG, F_RTC_CODE_SIZE, F_RTC_CODE, F_RTC_DESTROY,
	F_BLAS_CREATE, F_BLAS_DESTROY, F_BLAS_SET_STREAM, F_BLAS_SGEMM,
	F_GRAPH_CREATE, F_GRAPH_DESTROY, F_GRAPH_ADD_KERNEL, F_GRAPH_INSTANTIATE,
	F_GRAPH_EXEC_DESTROY, F_GRAPH_LAUNCH, F_GRAPH_EXEC_SET_KERNEL,
	F_COUNT
};

typedef struct { void* fn[F_COUNT]; } shim_t;

static shim_t* shim_new(void) { return (shim_t*)calloc(1, sizeof(shim_t)); }

// shim_open dlopens path; on failure it copies dlerror's text into err.
static void* shim_open(const char* path, char* err, int errlen) {
	void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char* e = dlerror();
		strncpy(err, e ? e : "unknown dlopen error", errlen - 1);
		err[errlen - 1] = 0;
	}
	return h;
}

static int shim_sym(shim_t* s, int idx, void* lib, const char* name) {
	dlerror();
	s->fn[idx] = dlsym(lib, name);
	return s->fn[idx] != 0;
}

static int shim_has(shim_t* s, int idx) { return s->fn[idx] != 0; }

// shim_lib_path reports the file lib was loaded from (dladdr on one of
// its symbols), for rocBLAS's kernel library check.
static int shim_sym_path(shim_t* s, int idx, char* out, int outlen) {
	Dl_info info;
	if (!s->fn[idx] || !dladdr(s->fn[idx], &info) || !info.dli_fname) return 0;
	strncpy(out, info.dli_fname, outlen - 1);
	out[outlen - 1] = 0;
	return 1;
}

typedef int (*fn_i)(int);
typedef int (*fn_pi)(int*);
typedef int (*fn_pp)(void**);
typedef int (*fn_p)(void*);
typedef int (*fn_pp_sz)(void**, size_t);
typedef int (*fn_pp_sz_u)(void**, size_t, unsigned);

static int sh_device_count(shim_t* s, int* n) { return ((fn_pi)s->fn[F_GET_DEVICE_COUNT])(n); }
static int sh_set_device(shim_t* s, int d) { return ((fn_i)s->fn[F_SET_DEVICE])(d); }
static int sh_malloc(shim_t* s, u64* p, size_t n) {
	void* q = 0;
	int r = ((fn_pp_sz)s->fn[F_MALLOC])(&q, n);
	*p = (u64)q;
	return r;
}
static int sh_free(shim_t* s, u64 p) { return ((fn_p)s->fn[F_FREE])((void*)p); }
static int sh_host_malloc(shim_t* s, u64* p, size_t n) {
	void* q = 0;
	int r = ((fn_pp_sz_u)s->fn[F_HOST_MALLOC])(&q, n, 0);
	*p = (u64)q;
	return r;
}
static int sh_host_free(shim_t* s, u64 p) { return ((fn_p)s->fn[F_HOST_FREE])((void*)p); }
static int sh_memcpy_async(shim_t* s, u64 dst, u64 src, size_t n, int kind, u64 stream) {
	return ((int (*)(void*, const void*, size_t, int, void*))s->fn[F_MEMCPY_ASYNC])((void*)dst, (const void*)src, n, kind, (void*)stream);
}
static int sh_handle_create(shim_t* s, int idx, u64* h) {
	void* q = 0;
	int r = ((fn_pp)s->fn[idx])(&q);
	*h = (u64)q;
	return r;
}
static int sh_handle_call(shim_t* s, int idx, u64 h) { return ((fn_p)s->fn[idx])((void*)h); }
static int sh_event_record(shim_t* s, u64 ev, u64 stream) {
	return ((int (*)(void*, void*))s->fn[F_EVENT_RECORD])((void*)ev, (void*)stream);
}
static int sh_stream_wait_event(shim_t* s, u64 stream, u64 ev) {
	return ((int (*)(void*, void*, unsigned))s->fn[F_STREAM_WAIT_EVENT])((void*)stream, (void*)ev, 0);
}
static int sh_event_elapsed(shim_t* s, float* ms, u64 start, u64 end) {
	return ((int (*)(float*, void*, void*))s->fn[F_EVENT_ELAPSED])(ms, (void*)start, (void*)end);
}
static int sh_mem_get_info(shim_t* s, size_t* freeb, size_t* total) {
	return ((int (*)(size_t*, size_t*))s->fn[F_MEM_GET_INFO])(freeb, total);
}
static int sh_runtime_version(shim_t* s, int* v) { return ((fn_pi)s->fn[F_RUNTIME_VERSION])(v); }
static const char* sh_error_string(shim_t* s, int code) {
	if (!s->fn[F_ERROR_STRING]) return "";
	const char* m = ((const char* (*)(int))s->fn[F_ERROR_STRING])(code);
	return m ? m : "";
}
static int sh_device_props(shim_t* s, void* buf, int dev) {
	return ((int (*)(void*, int))s->fn[F_DEVICE_PROPS])(buf, dev);
}
static int sh_device_name(shim_t* s, char* buf, int len, int dev) {
	return ((int (*)(char*, int, int))s->fn[F_DEVICE_NAME])(buf, len, dev);
}
static int sh_device_attr(shim_t* s, int* v, int attr, int dev) {
	return ((int (*)(int*, int, int))s->fn[F_DEVICE_ATTR])(v, attr, dev);
}
static int sh_init(shim_t* s) { return ((int (*)(unsigned))s->fn[F_INIT])(0); }
static int sh_device_get(shim_t* s, int* d, int ordinal) {
	return ((int (*)(int*, int))s->fn[F_DEVICE_GET])(d, ordinal);
}
static int sh_ctx_retain(shim_t* s, u64* ctx, int dev) {
	void* q = 0;
	int r = ((int (*)(void**, int))s->fn[F_CTX_RETAIN])(&q, dev);
	*ctx = (u64)q;
	return r;
}
static int sh_module_load(shim_t* s, u64* mod, const void* image) {
	void* q = 0;
	int r = ((int (*)(void**, const void*))s->fn[F_MODULE_LOAD])(&q, image);
	*mod = (u64)q;
	return r;
}
static int sh_module_function(shim_t* s, u64* fn, u64 mod, const char* name) {
	void* q = 0;
	int r = ((int (*)(void**, void*, const char*))s->fn[F_MODULE_FUNCTION])(&q, (void*)mod, name);
	*fn = (u64)q;
	return r;
}

// sh_launch passes each argument by the address of its 8-byte slot in
// args (little-endian: a 4-byte argument sits at the slot's start), the
// kernelParams form, with no `extra` array.
static int sh_launch(shim_t* s, u64 fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                     unsigned shmem, u64 stream, u64* args, int nargs) {
	void* params[32];
	if (nargs > 32) return -1;
	for (int i = 0; i < nargs; i++) params[i] = &args[i];
	return ((int (*)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**, void**))
		s->fn[F_LAUNCH])((void*)fn, gx, gy, gz, bx, by, bz, shmem, (void*)stream, params, 0);
}

static int sh_rtc_compile(shim_t* s, const char* src, const char* name, const char** opts, int nopts,
                          char** log, size_t* loglen, char** code, size_t* codelen) {
	void* prog = 0;
	*log = 0; *code = 0; *loglen = 0; *codelen = 0;
	int r = ((int (*)(void**, const char*, const char*, int, const char**, const char**))s->fn[F_RTC_CREATE])(&prog, src, name, 0, 0, 0);
	if (r) return r;
	int rc = ((int (*)(void*, int, const char**))s->fn[F_RTC_COMPILE])(prog, nopts, opts);
	size_t n = 0;
	if (((int (*)(void*, size_t*))s->fn[F_RTC_LOG_SIZE])(prog, &n) == 0 && n > 0) {
		*log = (char*)calloc(1, n + 1);
		((int (*)(void*, char*))s->fn[F_RTC_LOG])(prog, *log);
		*loglen = strlen(*log);
	}
	if (rc == 0) {
		n = 0;
		rc = ((int (*)(void*, size_t*))s->fn[F_RTC_CODE_SIZE])(prog, &n);
		if (rc == 0) {
			*code = (char*)malloc(n ? n : 1);
			rc = ((int (*)(void*, char*))s->fn[F_RTC_CODE])(prog, *code);
			*codelen = n;
		}
	}
	((int (*)(void**))s->fn[F_RTC_DESTROY])(&prog);
	return rc;
}

// Kernel node parameters: CUDA_KERNEL_NODE_PARAMS_v2 of the driver API
// (kern and ctx zero: the function given, the current context) and
// hipKernelNodeParams, whose fields HIP orders differently.
typedef struct {
	void* func;
	unsigned gx, gy, gz, bx, by, bz, shmem;
	void** params;
	void** extra;
	void* kern;
	void* ctx;
} cu_knp;
typedef struct { unsigned x, y, z; } hip_dim3;
typedef struct {
	hip_dim3 block;
	void** extra;
	void* func;
	hip_dim3 grid;
	void** params;
	unsigned shmem;
} hip_knp;
typedef union { cu_knp cu; hip_knp hip; } knp_t;

// knp_fill fills one kernel node's parameters: dims holds grid x, y, z
// then block x, y, z; params points at each argument's 8-byte slot.
static void knp_fill(knp_t* p, int hip, u64 fn, const unsigned* dims, void** params) {
	memset(p, 0, sizeof *p);
	if (hip) {
		p->hip.func = (void*)fn;
		p->hip.grid.x = dims[0]; p->hip.grid.y = dims[1]; p->hip.grid.z = dims[2];
		p->hip.block.x = dims[3]; p->hip.block.y = dims[4]; p->hip.block.z = dims[5];
		p->hip.params = params;
	} else {
		p->cu.func = (void*)fn;
		p->cu.gx = dims[0]; p->cu.gy = dims[1]; p->cu.gz = dims[2];
		p->cu.bx = dims[3]; p->cu.by = dims[4]; p->cu.bz = dims[5];
		p->cu.params = params;
	}
}

typedef int (*fn_add_kernel)(void**, void*, void* const*, size_t, const void*);

// sh_graph_build builds a chain of n kernel nodes, node i running fns[i]
// with dims[6i..6i+5] and the arguments args[off[i]..off[i+1]), each
// after the one before, and instantiates it. nodes receives the nodes;
// on failure nothing is left allocated. The runtime copies the
// arguments, so args may change after the call.
static int sh_graph_build(shim_t* s, int hip, int n, const u64* fns, const unsigned* dims, u64* args, const int* off,
                          u64* graph, u64* exec, u64* nodes) {
	void* g = 0;
	int r = ((int (*)(void**, unsigned))s->fn[F_GRAPH_CREATE])(&g, 0);
	if (r) return r;
	void* prev = 0;
	for (int i = 0; i < n; i++) {
		void* params[32];
		int na = off[i + 1] - off[i];
		if (na > 32) { r = -1; break; }
		for (int j = 0; j < na; j++) params[j] = &args[off[i] + j];
		knp_t p;
		knp_fill(&p, hip, fns[i], dims + 6 * i, params);
		void* node = 0;
		r = ((fn_add_kernel)s->fn[F_GRAPH_ADD_KERNEL])(&node, g, prev ? (void* const*)&prev : 0, prev ? 1 : 0, &p);
		if (r) break;
		nodes[i] = (u64)node;
		prev = node;
	}
	void* e = 0;
	if (!r) r = ((int (*)(void**, void*, unsigned long long))s->fn[F_GRAPH_INSTANTIATE])(&e, g, 0ULL);
	if (r) {
		((int (*)(void*))s->fn[F_GRAPH_DESTROY])(g);
		return r;
	}
	*graph = (u64)g;
	*exec = (u64)e;
	return 0;
}

// sh_graph_set gives an instantiated graph's node new arguments (same
// function and dimensions).
static int sh_graph_set(shim_t* s, int hip, u64 exec, u64 node, u64 fn, const unsigned* dims, u64* args, int nargs) {
	void* params[32];
	if (nargs > 32) return -1;
	for (int j = 0; j < nargs; j++) params[j] = &args[j];
	knp_t p;
	knp_fill(&p, hip, fn, dims, params);
	return ((int (*)(void*, void*, const void*))s->fn[F_GRAPH_EXEC_SET_KERNEL])((void*)exec, (void*)node, &p);
}

static int sh_graph_launch(shim_t* s, u64 exec, u64 stream) {
	return ((int (*)(void*, void*))s->fn[F_GRAPH_LAUNCH])((void*)exec, (void*)stream);
}

// sh_launch_many launches n kernels on stream in order, as sh_launch
// does each; *done is how many were launched before an error.
static int sh_launch_many(shim_t* s, int n, const u64* fns, const unsigned* dims, u64* args, const int* off, u64 stream, int* done) {
	for (int i = 0; i < n; i++) {
		const unsigned* d = dims + 6 * i;
		int r = sh_launch(s, fns[i], d[0], d[1], d[2], d[3], d[4], d[5], 0, stream, args + off[i], off[i + 1] - off[i]);
		if (r) { *done = i; return r; }
	}
	*done = n;
	return 0;
}

static int sh_blas_set_stream(shim_t* s, u64 h, u64 stream) {
	return ((int (*)(void*, void*))s->fn[F_BLAS_SET_STREAM])((void*)h, (void*)stream);
}
static int sh_blas_sgemm(shim_t* s, u64 h, int ta, int tb, int m, int n, int k, float alpha,
                         u64 a, int lda, u64 b, int ldb, float beta, u64 c, int ldc) {
	return ((int (*)(void*, int, int, int, int, int, const float*, const void*, int, const void*, int, const float*, void*, int))
		s->fn[F_BLAS_SGEMM])((void*)h, ta, tb, m, n, k, &alpha, (const void*)a, lda, (const void*)b, ldb, &beta, (void*)c, ldc);
}
*/
import "C"

import (
	"unsafe"
)

// fn indexes the shim's function table.
type fn int

// The table's entries, in the shim's order.
const (
	fDeviceCount    fn = C.F_GET_DEVICE_COUNT
	fSetDevice      fn = C.F_SET_DEVICE
	fMalloc         fn = C.F_MALLOC
	fFree           fn = C.F_FREE
	fHostMalloc     fn = C.F_HOST_MALLOC
	fHostFree       fn = C.F_HOST_FREE
	fMemcpyAsync    fn = C.F_MEMCPY_ASYNC
	fStreamCreate   fn = C.F_STREAM_CREATE
	fStreamDestroy  fn = C.F_STREAM_DESTROY
	fStreamSync     fn = C.F_STREAM_SYNC
	fEventCreate    fn = C.F_EVENT_CREATE
	fEventDestroy   fn = C.F_EVENT_DESTROY
	fEventRecord    fn = C.F_EVENT_RECORD
	fEventSync      fn = C.F_EVENT_SYNC
	fEventElapsed   fn = C.F_EVENT_ELAPSED
	fEventQuery     fn = C.F_EVENT_QUERY
	fStreamWait     fn = C.F_STREAM_WAIT_EVENT
	fMemGetInfo     fn = C.F_MEM_GET_INFO
	fRuntimeVersion fn = C.F_RUNTIME_VERSION
	fErrorString    fn = C.F_ERROR_STRING
	fDeviceProps    fn = C.F_DEVICE_PROPS
	fDeviceName     fn = C.F_DEVICE_NAME
	fDeviceAttr     fn = C.F_DEVICE_ATTR
	fInit           fn = C.F_INIT
	fDeviceGet      fn = C.F_DEVICE_GET
	fCtxRetain      fn = C.F_CTX_RETAIN
	fCtxSetCurrent  fn = C.F_CTX_SET_CURRENT
	fModuleLoad     fn = C.F_MODULE_LOAD
	fModuleUnload   fn = C.F_MODULE_UNLOAD
	fModuleFunction fn = C.F_MODULE_FUNCTION
	fLaunch         fn = C.F_LAUNCH
	fRTCCreate      fn = C.F_RTC_CREATE
	fRTCCompile     fn = C.F_RTC_COMPILE
	fRTCLogSize     fn = C.F_RTC_LOG_SIZE
	fRTCLog         fn = C.F_RTC_LOG
	fRTCCodeSize    fn = C.F_RTC_CODE_SIZE
	fRTCCode        fn = C.F_RTC_CODE
	fRTCDestroy     fn = C.F_RTC_DESTROY
	fBLASCreate     fn = C.F_BLAS_CREATE
	fBLASDestroy    fn = C.F_BLAS_DESTROY
	fBLASSetStream  fn = C.F_BLAS_SET_STREAM
	fBLASSgemm      fn = C.F_BLAS_SGEMM
	fGraphCreate    fn = C.F_GRAPH_CREATE
	fGraphDestroy   fn = C.F_GRAPH_DESTROY
	fGraphAddKernel fn = C.F_GRAPH_ADD_KERNEL
	fGraphInstance  fn = C.F_GRAPH_INSTANTIATE
	fGraphExecFree  fn = C.F_GRAPH_EXEC_DESTROY
	fGraphLaunch    fn = C.F_GRAPH_LAUNCH
	fGraphSetKernel fn = C.F_GRAPH_EXEC_SET_KERNEL
	fCount          fn = C.F_COUNT
)

// shim is one loaded vendor: its function table. Libraries are never
// closed: unloading a GPU runtime is a known source of crashes at exit.
type shim struct {
	t *C.shim_t
}

func newShim() *shim { return &shim{t: C.shim_new()} }

// dlopen opens path, returning the handle or dlerror's text.
func dlopen(path string) (unsafe.Pointer, string) {
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	var buf [512]C.char
	h := C.shim_open(cp, &buf[0], C.int(len(buf)))
	if h == nil {
		return nil, C.GoString(&buf[0])
	}
	return h, ""
}

func (s *shim) sym(f fn, lib unsafe.Pointer, name string) bool {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	return C.shim_sym(s.t, C.int(f), lib, cn) != 0
}

func (s *shim) has(f fn) bool { return C.shim_has(s.t, C.int(f)) != 0 }

// symPath returns the file that f's library was loaded from.
func (s *shim) symPath(f fn) string {
	var buf [4096]C.char
	if C.shim_sym_path(s.t, C.int(f), &buf[0], C.int(len(buf))) == 0 {
		return ""
	}
	return C.GoString(&buf[0])
}

func (s *shim) deviceCount() (int, int) {
	var n C.int
	r := C.sh_device_count(s.t, &n)
	return int(n), int(r)
}

func (s *shim) setDevice(d int) int { return int(C.sh_set_device(s.t, C.int(d))) }

func (s *shim) malloc(n int64) (uintptr, int) {
	var p C.u64
	r := C.sh_malloc(s.t, &p, C.size_t(n))
	return uintptr(p), int(r)
}

func (s *shim) free(p uintptr) int { return int(C.sh_free(s.t, C.u64(p))) }

func (s *shim) hostMalloc(n int64) (unsafe.Pointer, int) {
	var p C.u64
	r := C.sh_host_malloc(s.t, &p, C.size_t(n))
	return *(*unsafe.Pointer)(unsafe.Pointer(&p)), int(r)
}

func (s *shim) hostFree(p unsafe.Pointer) int {
	return int(C.sh_host_free(s.t, C.u64(uintptr(p))))
}

// Copy directions, equal in HIP and CUDA.
const (
	hostToDevice   = 1
	deviceToHost   = 2
	deviceToDevice = 3
)

func (s *shim) memcpyAsync(dst, src uintptr, n int64, kind int, stream uintptr) int {
	return int(C.sh_memcpy_async(s.t, C.u64(dst), C.u64(src), C.size_t(n), C.int(kind), C.u64(stream)))
}

// create calls a constructor of the form f(handle*): stream, event, BLAS.
func (s *shim) create(f fn) (uintptr, int) {
	var h C.u64
	r := C.sh_handle_create(s.t, C.int(f), &h)
	return uintptr(h), int(r)
}

// call calls a function of the form f(handle).
func (s *shim) call(f fn, h uintptr) int { return int(C.sh_handle_call(s.t, C.int(f), C.u64(h))) }

func (s *shim) eventRecord(ev, stream uintptr) int {
	return int(C.sh_event_record(s.t, C.u64(ev), C.u64(stream)))
}

// streamWaitEvent makes later work on stream wait for ev's completion,
// on the device: the host does not block.
func (s *shim) streamWaitEvent(stream, ev uintptr) int {
	return int(C.sh_stream_wait_event(s.t, C.u64(stream), C.u64(ev)))
}

func (s *shim) eventElapsed(start, end uintptr) (float32, int) {
	var ms C.float
	r := C.sh_event_elapsed(s.t, &ms, C.u64(start), C.u64(end))
	return float32(ms), int(r)
}

func (s *shim) memGetInfo() (free, total int64, code int) {
	var f, t C.size_t
	r := C.sh_mem_get_info(s.t, &f, &t)
	return int64(f), int64(t), int(r)
}

func (s *shim) runtimeVersion() (int, int) {
	var v C.int
	r := C.sh_runtime_version(s.t, &v)
	return int(v), int(r)
}

func (s *shim) errorString(code int) string { return C.GoString(C.sh_error_string(s.t, C.int(code))) }

// deviceProps fills a buffer far larger than any hipDeviceProp_t layout
// (R0000 or R0600) and returns it, for the gcnArchName scan.
func (s *shim) deviceProps(dev int) ([]byte, int) {
	buf := C.calloc(1, 16384)
	defer C.free(buf)
	r := C.sh_device_props(s.t, buf, C.int(dev))
	return C.GoBytes(buf, 16384), int(r)
}

func (s *shim) deviceName(dev int) (string, int) {
	var buf [256]C.char
	r := C.sh_device_name(s.t, &buf[0], C.int(len(buf)), C.int(dev))
	buf[len(buf)-1] = 0
	return C.GoString(&buf[0]), int(r)
}

func (s *shim) deviceAttr(attr, dev int) (int, int) {
	var v C.int
	r := C.sh_device_attr(s.t, &v, C.int(attr), C.int(dev))
	return int(v), int(r)
}

func (s *shim) driverInit() int { return int(C.sh_init(s.t)) }

func (s *shim) deviceGet(ordinal int) (int, int) {
	var d C.int
	r := C.sh_device_get(s.t, &d, C.int(ordinal))
	return int(d), int(r)
}

func (s *shim) ctxRetain(dev int) (uintptr, int) {
	var c C.u64
	r := C.sh_ctx_retain(s.t, &c, C.int(dev))
	return uintptr(c), int(r)
}

func (s *shim) moduleLoad(image []byte) (uintptr, int) {
	cimg := C.CBytes(image)
	defer C.free(cimg)
	var m C.u64
	r := C.sh_module_load(s.t, &m, cimg)
	return uintptr(m), int(r)
}

func (s *shim) moduleFunction(mod uintptr, name string) (uintptr, int) {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	var f C.u64
	r := C.sh_module_function(s.t, &f, C.u64(mod), cn)
	return uintptr(f), int(r)
}

// launch runs kernel f; args are 8-byte slots (see arg).
func (s *shim) launch(f uintptr, grid, block [3]uint32, shmem uint32, stream uintptr, args []uint64) int {
	var p *C.u64
	if len(args) > 0 {
		p = (*C.u64)(unsafe.Pointer(&args[0]))
	}
	return int(C.sh_launch(s.t, C.u64(f), C.uint(grid[0]), C.uint(grid[1]), C.uint(grid[2]),
		C.uint(block[0]), C.uint(block[1]), C.uint(block[2]), C.uint(shmem), C.u64(stream), p, C.int(len(args))))
}

// compile runs the runtime compiler on src with opts, returning the code
// object (or PTX/cubin), the compiler's log and its status.
func (s *shim) compile(src, name string, opts []string) (code []byte, log string, status int) {
	csrc := C.CString(src)
	defer C.free(unsafe.Pointer(csrc))
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	copts := make([]*C.char, len(opts)+1)
	for i, o := range opts {
		copts[i] = C.CString(o)
		defer C.free(unsafe.Pointer(copts[i]))
	}
	// The options array is C memory: cgo forbids passing Go memory that
	// holds pointers.
	carr := (**C.char)(C.malloc(C.size_t(len(copts)) * C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer C.free(unsafe.Pointer(carr))
	copy(unsafe.Slice(carr, len(copts)), copts)
	var clog, ccode *C.char
	var loglen, codelen C.size_t
	r := C.sh_rtc_compile(s.t, csrc, cname, carr, C.int(len(opts)), &clog, &loglen, &ccode, &codelen)
	if clog != nil {
		log = C.GoStringN(clog, C.int(loglen))
		C.free(unsafe.Pointer(clog))
	}
	if ccode != nil {
		if r == 0 {
			code = C.GoBytes(unsafe.Pointer(ccode), C.int(codelen))
		}
		C.free(unsafe.Pointer(ccode))
	}
	return code, log, int(r)
}

func (s *shim) blasSetStream(h, stream uintptr) int {
	return int(C.sh_blas_set_stream(s.t, C.u64(h), C.u64(stream)))
}

func (s *shim) blasSgemm(h uintptr, ta, tb, m, n, k int, alpha float32, a uintptr, lda int, b uintptr, ldb int, beta float32, c uintptr, ldc int) int {
	return int(C.sh_blas_sgemm(s.t, C.u64(h), C.int(ta), C.int(tb), C.int(m), C.int(n), C.int(k), C.float(alpha),
		C.u64(a), C.int(lda), C.u64(b), C.int(ldb), C.float(beta), C.u64(c), C.int(ldc)))
}

// kernelList is kernels to launch in order, in the form the shim reads:
// function handles, six dimensions each (grid then block), and the
// arguments' 8-byte slots, kernel i's being args[off[i]:off[i+1]].
type kernelList struct {
	fns  []uint64
	dims []uint32
	args []uint64
	off  []int32
}

func (k *kernelList) len() int { return len(k.fns) }

// reset returns an empty list with k's storage: k's contents are
// overwritten as it fills.
func (k *kernelList) reset() kernelList {
	return kernelList{fns: k.fns[:0], dims: k.dims[:0], args: k.args[:0], off: k.off[:0]}
}

// argp returns the address of k's first argument slot, of a spare slot
// when no kernel takes arguments (the shim reads none then).
func (k *kernelList) argp() *C.u64 {
	if len(k.args) == 0 {
		k.args = append(k.args, 0)
		defer func() { k.args = k.args[:0] }()
	}
	return (*C.u64)(unsafe.Pointer(&k.args[0]))
}

// graphBuild builds and instantiates k as a chain of kernel nodes, and
// returns the graph, its executable form and the nodes.
func (s *shim) graphBuild(hip bool, k *kernelList) (graph, exec uintptr, nodes []uint64, code int) {
	n := k.len()
	nodes = make([]uint64, n)
	var g, e C.u64
	r := C.sh_graph_build(s.t, cBool(hip), C.int(n), (*C.u64)(unsafe.Pointer(&k.fns[0])), (*C.uint)(unsafe.Pointer(&k.dims[0])),
		k.argp(), (*C.int)(unsafe.Pointer(&k.off[0])), &g, &e, (*C.u64)(unsafe.Pointer(&nodes[0])))
	return uintptr(g), uintptr(e), nodes, int(r)
}

// graphSet gives node, kernel i of k, the arguments k holds now.
func (s *shim) graphSet(hip bool, exec uintptr, node uint64, k *kernelList, i int) int {
	a := k.args[k.off[i]:k.off[i+1]]
	var p *C.u64
	if len(a) > 0 {
		p = (*C.u64)(unsafe.Pointer(&a[0]))
	}
	return int(C.sh_graph_set(s.t, cBool(hip), C.u64(exec), C.u64(node), C.u64(k.fns[i]),
		(*C.uint)(unsafe.Pointer(&k.dims[6*i])), p, C.int(len(a))))
}

func (s *shim) graphLaunch(exec, stream uintptr) int {
	return int(C.sh_graph_launch(s.t, C.u64(exec), C.u64(stream)))
}

// launchAll launches k's kernels on stream in order; done is how many
// were launched before an error.
func (s *shim) launchAll(k *kernelList, stream uintptr) (done, code int) {
	var d C.int
	r := C.sh_launch_many(s.t, C.int(k.len()), (*C.u64)(unsafe.Pointer(&k.fns[0])), (*C.uint)(unsafe.Pointer(&k.dims[0])),
		k.argp(), (*C.int)(unsafe.Pointer(&k.off[0])), C.u64(stream), &d)
	return int(d), int(r)
}

func cBool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
