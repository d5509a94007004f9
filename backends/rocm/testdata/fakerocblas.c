// fakerocblas.c is a fake rocBLAS on host memory (column-major sgemm),
// built by the tests into librocblas.so.0 beside the fake HIP runtime.
// sgemm runs on the handle's stream: the fake HIP stream's first field is
// its enqueue function. FAKEROCBLAS_ABORT=1 makes rocblas_create_handle
// abort the process, as the real one does when its kernel library is
// missing.
#include <stdlib.h>

typedef struct stream {
	void (*enqueue)(struct stream*, void (*fn)(void*), void* arg);
} stream_t;

typedef struct { stream_t* stream; } handle_t;

int rocblas_create_handle(void** h) {
	if (getenv("FAKEROCBLAS_ABORT")) abort();
	*h = calloc(1, sizeof(handle_t));
	return 0;
}
int rocblas_destroy_handle(void* h) { free(h); return 0; }
int rocblas_set_stream(void* h, void* s) { ((handle_t*)h)->stream = s; return 0; }

typedef struct {
	int m, n, k, lda, ldb, ldc;
	float alpha, beta;
	const float *A, *B;
	float* C;
} gemm_t;

static void run_gemm(void* p) {
	gemm_t* g = p;
	for (int j = 0; j < g->n; j++)
		for (int i = 0; i < g->m; i++) {
			float s = 0;
			for (int q = 0; q < g->k; q++) s += g->A[i + (long)q * g->lda] * g->B[q + (long)j * g->ldb];
			float* c = &g->C[i + (long)j * g->ldc];
			*c = g->alpha * s + (g->beta != 0 ? g->beta * *c : 0);
		}
	free(g);
}

// rocblas_sgemm supports operation_none (111) only; C = alpha·A·B + beta·C.
int rocblas_sgemm(void* h, int ta, int tb, int m, int n, int k, const float* alpha, const float* A, int lda,
                  const float* B, int ldb, const float* beta, float* C, int ldc) {
	if (ta != 111 || tb != 111) return 2; // rocblas_status_not_implemented
	gemm_t* g = malloc(sizeof(gemm_t));
	*g = (gemm_t){m, n, k, lda, ldb, ldc, *alpha, *beta, A, B, C};
	stream_t* s = ((handle_t*)h)->stream;
	if (s) s->enqueue(s, run_gemm, g);
	else run_gemm(g);
	return 0;
}
