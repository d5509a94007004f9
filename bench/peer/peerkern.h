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
 * c(m×n) = a(m×k)·b(k×n), and returns the ns it took. The drift: when
 * factor > 1 it then busy-waits until factor × the kernel's own time has
 * passed, so the call takes factor times as long as the kernel did (a
 * throttled or contended core), whatever the size. */
int64_t peer_exec(int impl, double factor, int m, int n, int k,
                  const float *a, const float *b, float *c);

#endif
