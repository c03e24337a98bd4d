/* cpu_blas.c: finds and opens OpenBLAS (see cpu_blas.h). cblas.h is included for its types
 * (blasint is 64-bit in ILP64 builds of OpenBLAS) and enum values only: nothing here calls a
 * BLAS symbol directly, so the binary does not link the library. */
#include "cpu_blas.h"

#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef KVPLAN_OPENBLAS_DIR
#define KVPLAN_OPENBLAS_DIR ""
#endif

/* The soname of OpenBLAS's C interface since 0.2 (the only one looked for: a pattern could
 * pick up an unrelated BLAS without openblas_set_num_threads). */
#define BLAS_SONAME "libopenblas.so.0"

typedef void (*sgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint,
                         float, const float *, blasint, const float *, blasint, float, float *, blasint);
typedef void (*threads_fn)(int);

/* Process-wide by nature (one dlopen'd library), written once under pthread_once. */
static struct {
    pthread_once_t once;
    sgemm_fn sgemm;
    threads_fn threads;
    char why[1536];
} blas = {PTHREAD_ONCE_INIT, NULL, NULL, ""};

/* Resolves both symbols from h; 0 on success. dlsym returns an object pointer: the copy
 * through memcpy is how POSIX says to turn it into a function pointer. */
static int resolve(void *h, const char *path)
{
    void *s = dlsym(h, "cblas_sgemm"), *t = dlsym(h, "openblas_set_num_threads");
    if (!s || !t) {
        snprintf(blas.why, sizeof blas.why, "%.300s has no %s: not OpenBLAS", path, s ? "openblas_set_num_threads" : "cblas_sgemm");
        return -1;
    }
    memcpy(&blas.sgemm, &s, sizeof s);
    memcpy(&blas.threads, &t, sizeof t);
    return 0;
}

static void open_once(void)
{
    char tried[3][1100];
    int k = 0;
    const char *env = getenv("KVPLAN_OPENBLAS");
    if (env && *env) {
        snprintf(tried[k++], sizeof tried[0], "%.1000s", env);   /* an explicit choice is the only one tried */
    } else {
        snprintf(tried[k++], sizeof tried[0], "%s", BLAS_SONAME);
        if (KVPLAN_OPENBLAS_DIR[0]) snprintf(tried[k++], sizeof tried[0], "%.1000s/%s", KVPLAN_OPENBLAS_DIR, BLAS_SONAME);
    }
    char last[700] = "";
    for (int i = 0; i < k; i++) {
        /* RTLD_LOCAL: its symbols stay its own (nothing else in the process binds to them). */
        void *h = dlopen(tried[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            snprintf(last, sizeof last, "%.600s", e ? e : "unknown error");
            continue;
        }
        if (resolve(h, tried[i]) == 0) return;   /* never closed: its threads may outlive a call */
        dlclose(h);
        return;
    }
    size_t used = (size_t)snprintf(blas.why, sizeof blas.why, "the CPU backend needs OpenBLAS (%s), which does not load; tried", BLAS_SONAME);
    for (int i = 0; i < k && used < sizeof blas.why; i++)
        used += (size_t)snprintf(blas.why + used, sizeof blas.why - used, "%s %.300s", i ? "," : "", tried[i]);
    if (used < sizeof blas.why)
        snprintf(blas.why + used, sizeof blas.why - used, " (%s; install OpenBLAS or set KVPLAN_OPENBLAS to its path)", last);
}

int be_cpu_blas_open(char *err, size_t n)
{
    pthread_once(&blas.once, open_once);
    if (blas.sgemm) return 0;
    if (err && n) snprintf(err, n, "%s", blas.why);
    return -1;
}

int be_cpu_blas_loaded(void)
{
    return blas.sgemm != NULL;
}

void be_cpu_blas_threads(int n)
{
    blas.threads(n);
}

void be_cpu_blas_sgemm(int M, int N, int K, const float *x, const float *w, float beta, float *out)
{
    blas.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, x, K, w, N, beta, out, N);
}
