/* cpu_blas.h: OpenBLAS, opened at run time by the CPU reference backend only. Linking it into
 * the binary cost every kvplan process about 6 ms of dynamic relocation (14,000 relocations of
 * libopenblas at start-up, `LD_DEBUG=statistics`), paid by `simulate` and `plan`, which never
 * multiply a matrix; so, like the CUDA plugin, it is looked up with dlopen on first use. */
#ifndef KVPLAN_CPU_BLAS_H
#define KVPLAN_CPU_BLAS_H

#include <stddef.h>

/* Opens OpenBLAS once per process (thread-safe) and resolves the two entry points used.
 * Search: $KVPLAN_OPENBLAS alone when set; else libopenblas.so.0 through the loader's path,
 * then in the folder the build linked against (KVPLAN_OPENBLAS_DIR). Returns 0, or -1 with
 * what was tried and why it failed in err. */
int be_cpu_blas_open(char *err, size_t n);
/* Whether be_cpu_blas_open has succeeded in this process. */
int be_cpu_blas_loaded(void);
/* OpenBLAS's thread count (openblas_set_num_threads). Requires a successful open. */
void be_cpu_blas_threads(int n);
/* Row-major, untransposed out[M x N] = x[M x K] * w[K x N] + beta * out (cblas_sgemm).
 * Requires a successful open. */
void be_cpu_blas_sgemm(int M, int N, int K, const float *x, const float *w, float beta, float *out);

#endif
