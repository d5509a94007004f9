// fakecblas.c is a CBLAS for the loader's tests (cblas_test.go builds it
// with gcc): a row-major cblas_sgemm and cblas_sgemv whose integers are
// BLASINT (int, or long long as in an ILP64 build), and the call by which
// the library kind it poses as reports that width:
//
//	-DOPENBLAS_CONFIG='"..."'  openblas_get_config, "USE64BITINT" in it when ILP64
//	-DBLIS_BLAS_INT=32|64      bli_info_get_blas_int_type_size
//	-DMKL_LAYER=0|1            MKL_Set_Interface_Layer's answer (0 LP64, 1 ILP64)
//	-DWRONG                    sgemm adds 1 to C[0]: a library that computes wrong
//
// A call it cannot read (an enum or size out of range, as a size read at
// the wrong width is) writes NaN to C[0] or y[0] and touches nothing else.
#include <math.h>

#ifndef BLASINT
#define BLASINT int
#endif

static int sane(BLASINT v) { return v >= 0 && v <= (1 << 20); }

void cblas_sgemm(int order, int transa, int transb, BLASINT m, BLASINT n, BLASINT k,
	float alpha, const float *a, BLASINT lda, const float *b, BLASINT ldb,
	float beta, float *c, BLASINT ldc) {
	if (order != 101 || transa != 111 || transb != 111 || !sane(m) || !sane(n) || !sane(k) ||
	    !sane(lda) || !sane(ldb) || !sane(ldc)) {
		c[0] = NAN;
		return;
	}
	for (BLASINT i = 0; i < m; i++)
		for (BLASINT j = 0; j < n; j++) {
			float s = 0;
			for (BLASINT l = 0; l < k; l++) s += a[i * lda + l] * b[l * ldb + j];
			c[i * ldc + j] = alpha * s + (beta == 0 ? 0 : beta * c[i * ldc + j]);
		}
#ifdef WRONG
	c[0] += 1;
#endif
}

// cblas_sgemv computes the row-major y = alpha·Aᵀx + beta·y, the one
// form the loader calls.
void cblas_sgemv(int order, int trans, BLASINT m, BLASINT n, float alpha,
	const float *a, BLASINT lda, const float *x, BLASINT incx,
	float beta, float *y, BLASINT incy) {
	if (order != 101 || trans != 112 || !sane(m) || !sane(n) || !sane(lda) ||
	    incx < 1 || !sane(incx) || incy < 1 || !sane(incy)) {
		y[0] = NAN;
		return;
	}
	for (BLASINT j = 0; j < n; j++) {
		float s = 0;
		for (BLASINT i = 0; i < m; i++) s += a[i * lda + j] * x[i * incx];
		y[j * incy] = alpha * s + (beta == 0 ? 0 : beta * y[j * incy]);
	}
}

#ifdef OPENBLAS_CONFIG
char *openblas_get_config(void) { return OPENBLAS_CONFIG; }
#endif
void openblas_set_num_threads(int n) { (void)n; }

#ifdef BLIS_BLAS_INT
long long bli_info_get_blas_int_type_size(void) { return BLIS_BLAS_INT; }
#endif

#ifdef MKL_LAYER
// MKL_Set_Interface_Layer answers with the layer in force: the one asked
// for, unless MKL_INTERFACE_LAYER or an earlier call fixed another. The
// fake's is fixed when it is built.
int MKL_Set_Interface_Layer(int layer) { (void)layer; return MKL_LAYER; }
#endif
