// fakerocblas.c is a fake rocBLAS on host memory (column-major sgemm),
// built by the tests into librocblas.so.0 beside the fake HIP runtime.
// FAKEROCBLAS_ABORT=1 makes rocblas_create_handle abort the process, as
// the real one does when its kernel library is missing.
#include <stdlib.h>

int rocblas_create_handle(void** h) {
	if (getenv("FAKEROCBLAS_ABORT")) abort();
	*h = malloc(8);
	return 0;
}
int rocblas_destroy_handle(void* h) { free(h); return 0; }
int rocblas_set_stream(void* h, void* s) { (void)h; (void)s; return 0; }

// rocblas_sgemm supports operation_none (111) only; C = alpha·A·B + beta·C.
int rocblas_sgemm(void* h, int ta, int tb, int m, int n, int k, const float* alpha, const float* A, int lda,
                  const float* B, int ldb, const float* beta, float* C, int ldc) {
	(void)h;
	if (ta != 111 || tb != 111) return 2; // rocblas_status_not_implemented
	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++) {
			float s = 0;
			for (int p = 0; p < k; p++) s += A[i + (long)p * lda] * B[p + (long)j * ldb];
			C[i + (long)j * ldc] = *alpha * s + (*beta != 0 ? *beta * C[i + (long)j * ldc] : 0);
		}
	return 0;
}
