// fakehip.c is a fake HIP runtime on host memory, built by the tests with
// gcc into libamdhip64.so.6 so that the Go side of backends/rocm can be
// tested end to end on machines without a GPU. It exports the functions
// the backend's table resolves, hiprtc included (inside the runtime, as
// ROCm 5 ships it). Kernels run synchronously in C on the calling thread.
//
// Hooks, read from the environment at each call:
//   FAKEHIP_NO_DEVICE=1       hipGetDeviceCount returns hipErrorNoDevice (100)
//   FAKEHIP_MEM_LIMIT=bytes   hipMalloc returns hipErrorOutOfMemory (2) beyond it
//   FAKEHIP_LAUNCH_ERROR=code hipModuleLaunchKernel returns code (719: device lost)
//   FAKEHIP_KERNEL_US=n       each launch takes at least n µs
//   FAKEHIP_COMPILE_FAIL=1    hiprtcCompileProgram fails with a log
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long envl(const char* name) {
	const char* v = getenv(name);
	return v ? atol(v) : 0;
}

static double now_ms(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static long live_bytes;

int hipGetDeviceCount(int* n) {
	if (envl("FAKEHIP_NO_DEVICE")) { *n = 0; return 100; }
	*n = 1;
	return 0;
}
int hipSetDevice(int d) { return d == 0 ? 0 : 101; }

int hipMalloc(void** p, size_t n) {
	long limit = envl("FAKEHIP_MEM_LIMIT");
	if (limit && live_bytes + (long)n > limit) return 2;
	size_t* q = malloc(n + 16);
	if (!q) return 2;
	q[0] = n;
	live_bytes += n;
	*p = (char*)q + 16;
	return 0;
}
int hipFree(void* p) {
	if (!p) return 0;
	size_t* q = (size_t*)((char*)p - 16);
	live_bytes -= q[0];
	free(q);
	return 0;
}
int hipHostMalloc(void** p, size_t n, unsigned flags) { (void)flags; *p = malloc(n); return *p ? 0 : 2; }
int hipHostFree(void* p) { free(p); return 0; }
int hipMemcpyAsync(void* dst, const void* src, size_t n, int kind, void* stream) {
	(void)stream;
	if (kind < 0 || kind > 4) return 21;
	memmove(dst, src, n);
	return 0;
}
int hipStreamCreate(void** s) { *s = malloc(8); return 0; }
int hipStreamDestroy(void* s) { free(s); return 0; }
int hipStreamSynchronize(void* s) { (void)s; return 0; }
int hipEventCreate(void** e) { *e = calloc(1, sizeof(double)); return 0; }
int hipEventDestroy(void* e) { free(e); return 0; }
int hipEventRecord(void* e, void* s) { (void)s; *(double*)e = now_ms(); return 0; }
int hipEventSynchronize(void* e) { (void)e; return 0; }
int hipEventElapsedTime(float* ms, void* a, void* b) { *ms = (float)(*(double*)b - *(double*)a); return 0; }
int hipMemGetInfo(size_t* f, size_t* t) { *t = 1UL << 34; *f = *t - live_bytes; return 0; }
int hipRuntimeGetVersion(int* v) { *v = 50221153; return 0; }
const char* hipGetErrorString(int code) {
	switch (code) {
	case 2: return "hipErrorOutOfMemory";
	case 100: return "hipErrorNoDevice";
	case 719: return "hipErrorLaunchFailure";
	}
	return "hipErrorUnknown";
}

// The R0000 layout starts with name[256]; gcnArchName lies further on.
int hipGetDeviceProperties(void* props, int dev) {
	if (dev != 0) return 101;
	memset(props, 0, 1024);
	strcpy((char*)props, "Fake Instinct");
	((int*)((char*)props + 256))[0] = 0x4000;
	strcpy((char*)props + 396, "gfx90a:sramecc+:xnack-");
	return 0;
}
int hipDeviceGetName(char* name, int len, int dev) {
	(void)dev;
	strncpy(name, "Fake Instinct MI-0", len);
	return 0;
}

// hiprtc: the "code object" is the source behind a magic prefix.
typedef struct { char* src; char* code; size_t n; const char* log; } prog_t;
#define MAGIC "FAKEHSACO\n"

int hiprtcCreateProgram(void** p, const char* src, const char* name, int nh, const char** h, const char** hn) {
	(void)name; (void)nh; (void)h; (void)hn;
	prog_t* q = calloc(1, sizeof(prog_t));
	q->src = strdup(src);
	*p = q;
	return 0;
}
int hiprtcCompileProgram(void* p, int n, const char** opts) {
	prog_t* q = p;
	int arch = 0;
	for (int i = 0; i < n; i++) arch |= strncmp(opts[i], "--gpu-architecture=gfx", 22) == 0;
	if (envl("FAKEHIP_COMPILE_FAIL") || !arch) { q->log = "fake: error: compile refused"; return 6; }
	q->n = strlen(MAGIC) + strlen(q->src) + 1;
	q->code = malloc(q->n);
	strcpy(q->code, MAGIC);
	strcat(q->code, q->src);
	return 0;
}
int hiprtcGetProgramLogSize(void* p, size_t* n) { prog_t* q = p; *n = q->log ? strlen(q->log) + 1 : 0; return 0; }
int hiprtcGetProgramLog(void* p, char* log) { prog_t* q = p; if (q->log) strcpy(log, q->log); return 0; }
int hiprtcGetCodeSize(void* p, size_t* n) { *n = ((prog_t*)p)->n; return 0; }
int hiprtcGetCode(void* p, char* code) { prog_t* q = p; memcpy(code, q->code, q->n); return 0; }
int hiprtcDestroyProgram(void** p) {
	prog_t* q = *p;
	free(q->src); free(q->code); free(q);
	*p = 0;
	return 0;
}

// Modules: a loaded module keeps its source; a function is a kernel the
// fake implements and the module declares.
typedef struct { char* src; } module_t;
typedef void (*kernel_fn)(void** args);

static void k_add(void** a) {
	float* o = *(float**)a[0]; const float* x = *(float**)a[1]; const float* y = *(float**)a[2];
	long long n = *(long long*)a[3], nb = *(long long*)a[4];
	for (long long i = 0; i < n; i++) o[i] = x[i] + y[i % nb];
}
static void k_mul(void** a) {
	float* o = *(float**)a[0]; const float* x = *(float**)a[1]; const float* y = *(float**)a[2];
	long long n = *(long long*)a[3], nb = *(long long*)a[4];
	for (long long i = 0; i < n; i++) o[i] = x[i] * y[i % nb];
}
static void k_scale(void** a) {
	float* o = *(float**)a[0]; const float* x = *(float**)a[1]; float s = *(float*)a[2];
	long long n = *(long long*)a[3];
	for (long long i = 0; i < n; i++) o[i] = x[i] * s;
}
static void k_silu(void** a) {
	float* o = *(float**)a[0]; const float* x = *(float**)a[1]; long long n = *(long long*)a[2];
	for (long long i = 0; i < n; i++) o[i] = x[i] / (1.0f + expf(-x[i]));
}
static void k_copy(void** a) {
	memmove(*(void**)a[0], *(void**)a[1], *(long long*)a[2]);
}
static unsigned grid_z; // the launch's gridDim.z: sgemm_tiled's batch

static void k_sgemm(void** a) {
	int m = *(int*)a[3], n = *(int*)a[4], k = *(int*)a[5];
	long long sa = *(long long*)a[6], sb = *(long long*)a[7], sc = *(long long*)a[8];
	for (unsigned z = 0; z < grid_z; z++) {
	float* c = *(float**)a[0] + z * sc; const float* A = *(float**)a[1] + z * sa; const float* B = *(float**)a[2] + z * sb;
	for (int i = 0; i < m; i++)
		for (int j = 0; j < n; j++) {
			float s = 0;
			for (int p = 0; p < k; p++) s += A[(long)i * k + p] * B[(long)p * n + j];
			c[(long)i * n + j] = s;
		}
	}
}

static struct { const char* name; kernel_fn fn; int nargs; } kernels[] = {
	{"add_f32", k_add, 5}, {"mul_f32", k_mul, 5}, {"scale_f32", k_scale, 4},
	{"silu_f32", k_silu, 3}, {"copy_u8", k_copy, 3}, {"sgemm_tiled", k_sgemm, 9},
};

int hipModuleLoadData(void** m, const void* image) {
	if (strncmp(image, MAGIC, strlen(MAGIC)) != 0) return 200; // hipErrorInvalidImage
	module_t* q = malloc(sizeof(module_t));
	q->src = strdup((const char*)image + strlen(MAGIC));
	*m = q;
	return 0;
}
int hipModuleUnload(void* m) { module_t* q = m; free(q->src); free(q); return 0; }
int hipModuleGetFunction(void** f, void* m, const char* name) {
	module_t* q = m;
	char decl[128];
	snprintf(decl, sizeof decl, "void %s(", name);
	if (!strstr(q->src, decl)) return 500; // hipErrorNotFound
	for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
		if (strcmp(kernels[i].name, name) == 0) { *f = &kernels[i]; return 0; }
	return 500;
}
int hipModuleLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                          unsigned shmem, void* stream, void** params, void** extra) {
	(void)shmem; (void)stream;
	long err = envl("FAKEHIP_LAUNCH_ERROR");
	if (err) return (int)err;
	if (!gx || !gy || !gz || !bx || !by || !bz || bx * by * bz > 1024 || extra) return 1; // hipErrorInvalidValue
	double until = now_ms() + envl("FAKEHIP_KERNEL_US") / 1e3;
	grid_z = gz;
	((kernel_fn)((void**)f)[1])(params);
	while (now_ms() < until) {
	}
	return 0;
}
