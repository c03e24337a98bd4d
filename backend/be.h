/* be.h: the execution-backend interface: a table of function pointers plus a context (ggml's
 * backend interface, SQLite's io_methods). A backend really runs the engine's batches: a
 * transformer step over a paged KV pool. Entries marked optional may be NULL; callers check.
 *
 * Backends: "cpu" (backend/cpu: plain C reference with OpenBLAS GEMMs; always built) and
 * "cuda" (backend/cuda: built when nvcc is found; needs a device at run time). */
#ifndef KVPLAN_BE_H
#define KVPLAN_BE_H

#ifdef __cplusplus
extern "C" {
#endif

#include "../loader/scn.h"
#include "../sim/sim.h"

#include <stddef.h>

/* What a backend is created for. */
typedef struct {
    scn_model model;          /* the shape; weights are deterministic random in `seed` */
    scn_dtype kv_dtype;       /* fp32, fp16, bf16, fp8 or int8 */
    int block_size;           /* tokens per KV block */
    int sink, window;         /* StreamingLLM bound; window 0 = off */
    unsigned long long seed;
    int threads;              /* 0 = the library's default */
} be_config;

/* What a step produced, beside its time. */
typedef struct {
    double seconds;           /* wall time of the step, synchronised */
    int32_t *next_tokens;     /* per sequence: the greedy token after its last new token (may be NULL) */
} be_step_out;

/* BE_E_UNSUPPORTED: the backend cannot run what was asked (a deployment shape it has no
 * devices for); the caller's request, not the data, is at fault. */
typedef enum { BE_OK = 0, BE_E_UNAVAILABLE, BE_E_CONFIG, BE_E_NOMEM, BE_E_RUNTIME, BE_E_UNSUPPORTED } be_status;

typedef struct be_ops {
    const char *name;
    /* Creates a context for the config; BE_E_UNAVAILABLE when the backend has no device. */
    be_status (*create)(void **ctx, const be_config *cfg, char *err, size_t n);
    /* Allocates the paged KV pool of `blocks` blocks. */
    be_status (*alloc_kv)(void *ctx, long blocks, char *err, size_t n);
    /* Runs one engine step; the batch's block tables index the pool. */
    be_status (*run)(void *ctx, const sim_batch *b, be_step_out *out, char *err, size_t n);
    void (*destroy)(void *ctx);
    /* optional */
    void (*sync)(void *ctx);
    size_t (*memory_used)(void *ctx);          /* bytes held: weights, KV pool, scratch */
    long (*kv_blocks)(void *ctx);              /* blocks really allocated */
    /* Micro-benchmarks for calibration (optional): seconds for one operation. */
    be_status (*bench_copy)(void *ctx, size_t bytes, double *seconds);
    be_status (*bench_gemm)(void *ctx, int m, int n, int k, double *seconds);
} be_ops;

/* The backend called `name`; NULL with the reason (unknown, or not built) in why. */
const be_ops *be_find(const char *name, char *why, size_t n);

extern const be_ops BE_CPU;

/* An engine executor whose clock is a backend: each step's time is what `run` measured.
 * The context must outlive the executor; its free() does not destroy the backend. */
int be_executor(const be_ops *ops, void *ctx, sim_executor *out);

/* Wall-clock seconds (monotonic). */
double be_now(void);

#ifdef __cplusplus
}
#endif

#endif
