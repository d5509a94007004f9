// fakehip.c is a fake HIP runtime on host memory, built by the tests with
// gcc into libamdhip64.so.6 so that the Go side of backends/rocm can be
// tested end to end on machines without a GPU. It exports the functions
// the backend's table resolves, hiprtc included (inside the runtime, as
// ROCm 5 ships it). Each stream is a thread that runs its commands
// (kernels, copies, event records, waits on events) in order, so work
// really is asynchronous: hipEventQuery answers hipErrorNotReady (600)
// until the stream reaches the event, hipEventElapsedTime fails the same
// way on an incomplete event, and hipStreamWaitEvent orders two streams.
// A stream's first field is its enqueue function, which the fake rocBLAS
// calls to run sgemm on the stream.
//
// Hooks, read from the environment at each call:
//   FAKEHIP_NO_DEVICE=1       hipGetDeviceCount returns hipErrorNoDevice (100)
//   FAKEHIP_MEM_LIMIT=bytes   hipMalloc returns hipErrorOutOfMemory (2) beyond it
//   FAKEHIP_LAUNCH_ERROR=code hipModuleLaunchKernel returns code (719: device lost)
//   FAKEHIP_KERNEL_US=n       each launch takes at least n µs
//   FAKEHIP_COMPILE_FAIL=1    hiprtcCompileProgram fails with a log
//   FAKEHIP_SET_DEVICE_ERROR=code hipSetDevice returns code
//   FAKEHIP_ASYNC_ERROR=code  a kernel launched now fails when it runs: it
//                             writes nothing, and every event recorded
//                             after it on its stream completes with code
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
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
int hipSetDevice(int d) {
	long err = envl("FAKEHIP_SET_DEVICE_ERROR");
	if (err) return (int)err;
	return d == 0 ? 0 : 101;
}

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

// Streams and events. One lock and condition guard every stream queue
// and event state.
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

typedef struct event {
	long recorded, completed; // generations: records issued and reached
	double t;                 // when the last record was reached, ms
	int err;                  // the stream's error when it was reached
} event_t;

enum { C_FN, C_RECORD, C_WAIT, C_STOP };
typedef struct cmd {
	int kind;
	void (*fn)(void*);
	void* arg;
	event_t* ev;
	long gen;
	struct cmd* next;
} cmd_t;

typedef struct stream stream_t;
struct stream {
	void (*enqueue)(stream_t*, void (*fn)(void*), void* arg); // first: fakerocblas calls it
	cmd_t *head, *tail;
	long queued, done;
	int err; // set by a kernel that failed as it ran
	pthread_t th;
};

static void push(stream_t* s, cmd_t* c) {
	c->next = 0;
	if (s->tail) s->tail->next = c; else s->head = c;
	s->tail = c;
	s->queued++;
	pthread_cond_broadcast(&cv);
}

static void enqueue_fn(stream_t* s, void (*fn)(void*), void* arg) {
	cmd_t* c = calloc(1, sizeof(cmd_t));
	c->kind = C_FN; c->fn = fn; c->arg = arg;
	pthread_mutex_lock(&mu);
	push(s, c);
	pthread_mutex_unlock(&mu);
}

static void* stream_main(void* p) {
	stream_t* s = p;
	pthread_mutex_lock(&mu);
	for (;;) {
		while (!s->head) pthread_cond_wait(&cv, &mu);
		cmd_t* c = s->head;
		s->head = c->next;
		if (!s->head) s->tail = 0;
		int stop = c->kind == C_STOP;
		switch (c->kind) {
		case C_FN:
			pthread_mutex_unlock(&mu);
			c->fn(c->arg);
			pthread_mutex_lock(&mu);
			break;
		case C_RECORD:
			c->ev->t = now_ms();
			c->ev->err = s->err;
			if (c->gen > c->ev->completed) c->ev->completed = c->gen;
			break;
		case C_WAIT:
			while (c->ev->completed < c->gen) pthread_cond_wait(&cv, &mu);
			break;
		}
		s->done++;
		free(c);
		pthread_cond_broadcast(&cv);
		if (stop) break;
	}
	pthread_mutex_unlock(&mu);
	return 0;
}

int hipStreamCreate(void** out) {
	stream_t* s = calloc(1, sizeof(stream_t));
	s->enqueue = enqueue_fn;
	pthread_create(&s->th, 0, stream_main, s);
	*out = s;
	return 0;
}
int hipStreamDestroy(void* p) {
	stream_t* s = p;
	cmd_t* c = calloc(1, sizeof(cmd_t));
	c->kind = C_STOP;
	pthread_mutex_lock(&mu);
	push(s, c);
	pthread_mutex_unlock(&mu);
	pthread_join(s->th, 0);
	free(s);
	return 0;
}
int hipStreamSynchronize(void* p) {
	stream_t* s = p;
	if (!s) return 0; // the null stream: the fake runs stream-less work at once
	pthread_mutex_lock(&mu);
	long want = s->queued;
	while (s->done < want) pthread_cond_wait(&cv, &mu);
	int err = s->err;
	pthread_mutex_unlock(&mu);
	return err;
}
int hipStreamWaitEvent(void* p, void* e, unsigned flags) {
	if (flags) return 1;
	cmd_t* c = calloc(1, sizeof(cmd_t));
	c->kind = C_WAIT; c->ev = e;
	pthread_mutex_lock(&mu);
	c->gen = c->ev->recorded;
	push(p, c);
	pthread_mutex_unlock(&mu);
	return 0;
}

typedef struct { void* dst; const void* src; size_t n; } copy_t;
static void run_copy(void* p) {
	copy_t* c = p;
	memmove(c->dst, c->src, c->n);
	free(c);
}
int hipMemcpyAsync(void* dst, const void* src, size_t n, int kind, void* stream) {
	if (kind < 0 || kind > 4 || !stream) return 21;
	copy_t* c = malloc(sizeof(copy_t));
	c->dst = dst; c->src = src; c->n = n;
	enqueue_fn(stream, run_copy, c);
	return 0;
}

int hipEventCreate(void** e) { *e = calloc(1, sizeof(event_t)); return 0; }
int hipEventDestroy(void* e) { free(e); return 0; }
int hipEventRecord(void* e, void* s) {
	if (!s) return 1;
	cmd_t* c = calloc(1, sizeof(cmd_t));
	c->kind = C_RECORD; c->ev = e;
	pthread_mutex_lock(&mu);
	c->gen = ++c->ev->recorded;
	push(s, c);
	pthread_mutex_unlock(&mu);
	return 0;
}
int hipEventQuery(void* p) {
	event_t* e = p;
	pthread_mutex_lock(&mu);
	int r = e->completed < e->recorded ? 600 : e->err;
	pthread_mutex_unlock(&mu);
	return r;
}
int hipEventSynchronize(void* p) {
	event_t* e = p;
	pthread_mutex_lock(&mu);
	while (e->completed < e->recorded) pthread_cond_wait(&cv, &mu);
	int r = e->err;
	pthread_mutex_unlock(&mu);
	return r;
}
int hipEventElapsedTime(float* ms, void* a, void* b) {
	event_t *x = a, *y = b;
	pthread_mutex_lock(&mu);
	int ready = x->completed == x->recorded && y->completed == y->recorded && x->recorded && y->recorded;
	if (ready) *ms = (float)(y->t - x->t);
	pthread_mutex_unlock(&mu);
	return ready ? 0 : 600;
}
int hipMemGetInfo(size_t* f, size_t* t) { *t = 1UL << 34; *f = *t - live_bytes; return 0; }
int hipRuntimeGetVersion(int* v) { *v = 50221153; return 0; }
const char* hipGetErrorString(int code) {
	switch (code) {
	case 2: return "hipErrorOutOfMemory";
	case 100: return "hipErrorNoDevice";
	case 600: return "hipErrorNotReady";
	case 700: return "hipErrorIllegalAddress";
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
// k_kv_append is kv_append_f32: rows [B,S,H,D] into the cache [B,H,C,D]
// at positions pos to pos+S-1, the cache copied first unless in place.
static void k_kv_append(void** a) {
	float* o = *(float**)a[0]; const float* c = *(float**)a[1]; const float* r = *(float**)a[2];
	int S = *(int*)a[3], H = *(int*)a[4], C = *(int*)a[5], D = *(int*)a[6], pos = *(int*)a[7];
	long long nc = *(long long*)a[8], nr = *(long long*)a[9];
	if (o != c) memcpy(o, c, nc * sizeof(float));
	for (long long i = 0; i < nr; i++) {
		long long row = i / D, b = row / H / S;
		int h = (int)(row % H), s = (int)((row / H) % S);
		o[((b * H + h) * C + pos + s) * D + i % D] = r[i];
	}
}
// k_argmax is argmax_f32: each row's index of its largest value as a
// float, the lowest among equal ones, NaN skipped (a row of NaN: 0).
static void k_argmax(void** a) {
	float* o = *(float**)a[0]; const float* x = *(float**)a[1];
	int rows = *(int*)a[2], cols = *(int*)a[3];
	for (int r = 0; r < rows; r++) {
		const float* v = x + (long long)r * cols;
		int best = -1;
		for (int j = 0; j < cols; j++)
			if (!isnan(v[j]) && (best < 0 || v[j] > v[best])) best = j;
		o[r] = (float)(best < 0 ? 0 : best);
	}
}
static __thread unsigned grid_z; // the running launch's gridDim.z: sgemm_tiled's batch, attention's B

static void k_swiglu(void** a) {
	float* o = *(float**)a[0]; const float* g = *(float**)a[1]; const float* u = *(float**)a[2];
	long long n = *(long long*)a[3];
	for (long long i = 0; i < n; i++) o[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}
// k_rmsnorm is rmsnorm_f32: each row scaled by 1/sqrt(mean(x²)+eps), times w.
static void k_rmsnorm(void** a) {
	float* o = *(float**)a[0]; const float* x = *(float**)a[1]; const float* w = *(float**)a[2];
	int rows = *(int*)a[3], cols = *(int*)a[4];
	float eps = *(float*)a[5];
	for (int r = 0; r < rows; r++) {
		const float* xr = x + (long)r * cols;
		float ss = 0;
		for (int i = 0; i < cols; i++) ss += xr[i] * xr[i];
		float k = 1.0f / sqrtf(ss / cols + eps);
		for (int i = 0; i < cols; i++) o[(long)r * cols + i] = xr[i] * k * w[i];
	}
}
// k_rope is rope_f32: element j and j+D/2 of each head vector at time t
// turn by (pos+t)·base^(-2j/D); n is the number of pairs.
static void k_rope(void** a) {
	float* o = *(float**)a[0]; const float* x = *(float**)a[1];
	int T = *(int*)a[2], H = *(int*)a[3], D = *(int*)a[4], pos = *(int*)a[5];
	float base = *(float*)a[6];
	long long n = *(long long*)a[7];
	int half = D / 2;
	for (long long i = 0; i < n; i++) {
		int j = (int)(i % half);
		long long head = i / half;
		int t = (int)((head / H) % T);
		float angle = (float)(pos + t) * powf(base, -2.0f * (float)j / (float)D);
		float c = cosf(angle), sn = sinf(angle);
		long long off = head * D;
		float x1 = x[off + j], x2 = x[off + j + half];
		o[off + j] = x1 * c - x2 * sn;
		o[off + j + half] = x2 * c + x1 * sn;
	}
}
// f16 converts an IEEE half (little-endian bytes) to float.
static float f16(const unsigned char* p) {
	unsigned h = p[0] | (unsigned)p[1] << 8;
	int e = (h >> 10) & 31, m = h & 1023;
	float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), e - 25);
	return h & 0x8000 ? -v : v;
}
// f32_at, f16_at, q8_0_at and q4_0_at decode element e of a table as the
// kernels do: Q8_0 and Q4_0 rows are whole blocks of 32 (a half scale,
// then 32 signed bytes, or 16 bytes of nibbles: the low nibble of byte j
// is value j, the high one value j+16, each (q-8)·d).
static float f32_at(const unsigned char* p, long long e) { float v; memcpy(&v, p + 4 * e, 4); return v; }
static float f16_at(const unsigned char* p, long long e) { return f16(p + 2 * e); }
static float q8_0_at(const unsigned char* p, long long e) {
	const unsigned char* blk = p + e / 32 * 34;
	return f16(blk) * (float)(signed char)blk[2 + e % 32];
}
static float q4_0_at(const unsigned char* p, long long e) {
	const unsigned char* blk = p + e / 32 * 18;
	int j = (int)(e % 32);
	int q = j < 16 ? (blk[2 + j] & 15) : (blk[2 + j - 16] >> 4);
	return f16(blk) * (float)(q - 8);
}
// get_rows is get_rows_<dtype>: output row k is table row idx[k] of [V, D]
// decoded by at, n outputs; an index that is no row (not an integer in
// [0, V), NaN) writes a row of NaN.
static void get_rows(void** a, float (*at)(const unsigned char*, long long)) {
	float* o = *(float**)a[0]; const unsigned char* t = *(unsigned char**)a[1]; const float* idx = *(float**)a[2];
	int V = *(int*)a[3], D = *(int*)a[4];
	long long n = *(long long*)a[5];
	for (long long i = 0; i < n; i++) {
		float v = idx[i / D];
		int row = !isnan(v) && v >= 0 && v < (float)V && v == (float)(int)v;
		o[i] = row ? at(t, (long long)(int)v * D + i % D) : NAN;
	}
}
static void k_get_rows_f32(void** a) { get_rows(a, f32_at); }
static void k_get_rows_f16(void** a) { get_rows(a, f16_at); }
static void k_get_rows_q8_0(void** a) { get_rows(a, q8_0_at); }
static void k_get_rows_q4_0(void** a) { get_rows(a, q4_0_at); }
// k_qmatmul_q8_0 is qmatmul_q8_0: out[m,n] = Σ_k a[m,k]·W[n,k], W's rows
// in blocks of 32 (a half scale, then 32 signed bytes).
static void k_qmatmul_q8_0(void** a) {
	float* o = *(float**)a[0]; const float* x = *(float**)a[1]; const unsigned char* w = *(unsigned char**)a[2];
	int M = *(int*)a[3], N = *(int*)a[4], K = *(int*)a[5], nb = K / 32;
	for (int n = 0; n < N; n++)
		for (int m = 0; m < M; m++) {
			float s = 0;
			for (int b = 0; b < nb; b++) {
				const unsigned char* blk = w + ((long)n * nb + b) * 34;
				float d = f16(blk);
				for (int j = 0; j < 32; j++) s += d * (float)(signed char)blk[2 + j] * x[(long)m * K + b * 32 + j];
			}
			o[(long)m * N + n] = s;
		}
}
// k_attention is attention_f32 for Q [B,Hq,S,D] and K, V [B,Hkv,T,D]
// (B the grid's z): query head h reads KV head h/(Hq/Hkv), the first N
// positions; causal, query i sees keys j <= N-S+i.
static void k_attention(void** a) {
	float* o = *(float**)a[0]; const float* q = *(float**)a[1]; const float* k = *(float**)a[2]; const float* v = *(float**)a[3];
	int Hq = *(int*)a[4], Hkv = *(int*)a[5], S = *(int*)a[6], T = *(int*)a[7], N = *(int*)a[8], D = *(int*)a[9];
	float scale = *(float*)a[10];
	int causal = *(int*)a[11];
	float* p = malloc(sizeof(float) * (N > 0 ? N : 1));
	for (unsigned b = 0; b < grid_z; b++)
		for (int h = 0; h < Hq; h++) {
			int hk = h / (Hq / Hkv);
			const float* kb = k + ((long)b * Hkv + hk) * (long)T * D;
			const float* vb = v + ((long)b * Hkv + hk) * (long)T * D;
			for (int i = 0; i < S; i++) {
				const float* qr = q + (((long)b * Hq + h) * S + i) * D;
				float* orow = o + (((long)b * Hq + h) * S + i) * D;
				int keys = causal ? N - S + i + 1 : N;
				float mx = -INFINITY, l = 0;
				for (int j = 0; j < keys; j++) {
					float dot = 0;
					for (int d = 0; d < D; d++) dot += qr[d] * kb[(long)j * D + d];
					p[j] = dot * scale;
					if (p[j] > mx) mx = p[j];
				}
				for (int j = 0; j < keys; j++) l += p[j] = expf(p[j] - mx);
				for (int d = 0; d < D; d++) {
					float acc = 0;
					for (int j = 0; j < keys; j++) acc += p[j] * vb[(long)j * D + d];
					orow[d] = acc / l;
				}
			}
		}
	free(p);
}

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

typedef struct { const char* name; kernel_fn fn; int nargs; } kdef_t;

static kdef_t kernels[] = {
	{"add_f32", k_add, 5}, {"mul_f32", k_mul, 5}, {"scale_f32", k_scale, 4},
	{"silu_f32", k_silu, 3}, {"copy_u8", k_copy, 3}, {"sgemm_tiled", k_sgemm, 9},
	{"kv_append_f32", k_kv_append, 10}, {"swiglu_f32", k_swiglu, 4}, {"rmsnorm_f32", k_rmsnorm, 6},
	{"rope_f32", k_rope, 8}, {"qmatmul_q8_0", k_qmatmul_q8_0, 6}, {"attention_f32", k_attention, 12},
	{"argmax_f32", k_argmax, 4}, {"get_rows_f32", k_get_rows_f32, 6}, {"get_rows_f16", k_get_rows_f16, 6},
	{"get_rows_q8_0", k_get_rows_q8_0, 6}, {"get_rows_q4_0", k_get_rows_q4_0, 6},
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
// launch_t is a launch as its stream runs it: the arguments' 8-byte
// slots copied (the caller's are gone by then) and pointers to them.
typedef struct {
	kernel_fn fn;
	unsigned gz;
	long us;
	int fail;
	stream_t* s;
	unsigned long long vals[32];
	void* params[32];
} launch_t;

static void run_launch(void* p) {
	launch_t* l = p;
	double until = now_ms() + l->us / 1e3;
	if (l->fail) {
		pthread_mutex_lock(&mu);
		l->s->err = l->fail;
		pthread_mutex_unlock(&mu);
	} else {
		grid_z = l->gz;
		l->fn(l->params);
	}
	while (now_ms() < until) {
	}
	free(l);
}

int hipModuleLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                          unsigned shmem, void* stream, void** params, void** extra) {
	(void)shmem;
	long err = envl("FAKEHIP_LAUNCH_ERROR");
	if (err) return (int)err;
	if (!gx || !gy || !gz || !bx || !by || !bz || bx * by * bz > 1024 || extra || !stream) return 1; // hipErrorInvalidValue
	kdef_t* k = f;
	int nargs = k->nargs;
	launch_t* l = calloc(1, sizeof(launch_t));
	l->fn = k->fn;
	l->gz = gz;
	l->us = envl("FAKEHIP_KERNEL_US");
	l->fail = (int)envl("FAKEHIP_ASYNC_ERROR");
	l->s = stream;
	for (int i = 0; i < nargs && i < 32; i++) {
		memcpy(&l->vals[i], params[i], 8);
		l->params[i] = &l->vals[i];
	}
	enqueue_fn(stream, run_launch, l);
	return 0;
}

// Graphs: a graph is its kernel nodes in the order added (every graph the
// backend builds is a chain); an executable graph copies them, and its
// launch enqueues each node as hipModuleLaunchKernel would, taking no
// launch of its own (FAKEHIP_LAUNCH_ERROR does not apply: a replayed step
// launches no kernel one by one). Hooks:
//   FAKEHIP_NO_GRAPH=1        hipGraphAddKernelNode fails (hipErrorInvalidDeviceFunction)
typedef struct {
	int block[3];
	void** extra;
	void* func;
	int grid[3];
	void** params;
	unsigned shmem;
} knp_t;
typedef struct gnode {
	kdef_t* k;
	unsigned grid[3], block[3];
	unsigned long long vals[32];
	int index;
} gnode_t;
typedef struct {
	gnode_t** nodes;
	int n, cap;
} graph_t;
typedef struct {
	gnode_t* nodes; // copies, by index
	int n;
} gexec_t;

static long graph_launches, graph_builds;

int hipGraphCreate(void** g, unsigned flags) {
	(void)flags;
	*g = calloc(1, sizeof(graph_t));
	return 0;
}
int hipGraphDestroy(void* p) {
	graph_t* g = p;
	for (int i = 0; i < g->n; i++) free(g->nodes[i]);
	free(g->nodes);
	free(g);
	return 0;
}
static int node_fill(gnode_t* n, const knp_t* p) {
	if (p->extra || !p->func) return 1;
	n->k = p->func;
	for (int i = 0; i < 3; i++) {
		n->grid[i] = (unsigned)p->grid[i];
		n->block[i] = (unsigned)p->block[i];
		if (!n->grid[i] || !n->block[i]) return 1;
	}
	for (int i = 0; i < n->k->nargs && i < 32; i++) memcpy(&n->vals[i], p->params[i], 8);
	return 0;
}
int hipGraphAddKernelNode(void** out, void* graph, void* const* deps, size_t ndeps, const knp_t* p) {
	graph_t* g = graph;
	if (envl("FAKEHIP_NO_GRAPH")) return 98; // hipErrorInvalidDeviceFunction
	if (ndeps > 1 || (ndeps == 1 && (g->n == 0 || deps[0] != g->nodes[g->n - 1]))) return 1; // not a chain
	gnode_t* n = calloc(1, sizeof(gnode_t));
	if (node_fill(n, p)) { free(n); return 1; }
	if (g->n == g->cap) {
		g->cap = g->cap ? 2 * g->cap : 16;
		g->nodes = realloc(g->nodes, g->cap * sizeof(gnode_t*));
	}
	n->index = g->n;
	g->nodes[g->n++] = n;
	*out = n;
	return 0;
}
int hipGraphInstantiateWithFlags(void** out, void* graph, unsigned long long flags) {
	(void)flags;
	graph_t* g = graph;
	gexec_t* e = calloc(1, sizeof(gexec_t));
	e->n = g->n;
	e->nodes = calloc(g->n ? g->n : 1, sizeof(gnode_t));
	for (int i = 0; i < g->n; i++) e->nodes[i] = *g->nodes[i];
	pthread_mutex_lock(&mu);
	graph_builds++;
	pthread_mutex_unlock(&mu);
	*out = e;
	return 0;
}
int hipGraphExecDestroy(void* p) {
	gexec_t* e = p;
	free(e->nodes);
	free(e);
	return 0;
}
int hipGraphExecKernelNodeSetParams(void* exec, void* node, const knp_t* p) {
	gexec_t* e = exec;
	gnode_t* n = node;
	if (n->index >= e->n) return 1;
	gnode_t m = e->nodes[n->index];
	if (node_fill(&m, p) || m.k != e->nodes[n->index].k) return 1;
	e->nodes[n->index] = m;
	return 0;
}
int hipGraphLaunch(void* exec, void* stream) {
	gexec_t* e = exec;
	if (!stream) return 1;
	for (int i = 0; i < e->n; i++) {
		gnode_t* n = &e->nodes[i];
		launch_t* l = calloc(1, sizeof(launch_t));
		l->fn = n->k->fn;
		l->gz = n->grid[2];
		l->us = envl("FAKEHIP_KERNEL_US");
		l->fail = (int)envl("FAKEHIP_ASYNC_ERROR");
		l->s = stream;
		for (int j = 0; j < n->k->nargs && j < 32; j++) {
			l->vals[j] = n->vals[j];
			l->params[j] = &l->vals[j];
		}
		enqueue_fn(stream, run_launch, l);
	}
	pthread_mutex_lock(&mu);
	graph_launches++;
	pthread_mutex_unlock(&mu);
	return 0;
}
