/*
 * peerkern.h: the two matmul implementations that both schedulers of the
 * peer benchmark choose between, and the injected drift. One source
 * (peerkern.c) is compiled into the Go package by cgo and into the StarPU
 * program by make peer, with the same flags (-O3), so both schedulers run
 * literally the same code.
 *
 * No BLAS or StarPU header is needed: OpenBLAS is dlopen'ed at run time
 * and its cblas_sgemm declared here by hand.
 */
#ifndef PEERKERN_H
#define PEERKERN_H

#include <stdint.h>

/* The implementations. */
enum {
	PEER_BLAS = 0,    /* OpenBLAS cblas_sgemm, single-threaded */
	PEER_BLOCKED = 1, /* a simple k-blocked C loop, vectorised by the compiler */
	PEER_EMPTY = 2,   /* returns at once: the per-task overhead probe */
	PEER_IMPLS = 2    /* the implementations a scheduler chooses between */
};

/* peer_load_blas dlopens libopenblas.so.0 and sets its thread count to 1.
 * It returns 0, or -1 with the reason in err (errlen bytes). */
int peer_load_blas(char *err, int errlen);

/* peer_now_ns returns CLOCK_MONOTONIC in ns. */
int64_t peer_now_ns(void);

/* peer_exec runs implementation impl on the row-major product
 * c(m×n) = a(m×k)·b(k×n), and returns the ns it took. The drift: it then
 * busy-waits extra_ns more (0: none). The caller passes (factor − 1) ×
 * the kernel's calibrated median time on that shape, so that the call
 * takes factor times its normal time, as on a throttled or contended
 * core; a fixed delay rather than a multiple of this call's own time,
 * which would multiply a preemption during the kernel as well. */
int64_t peer_exec(int impl, int64_t extra_ns, int m, int n, int k,
                  const float *a, const float *b, float *c);

#endif
