/* cpu_ops.h: the reference kernels of a Llama-architecture decoder step, in plain C over fp32
 * (GEMMs through OpenBLAS). They define what every CUDA kernel must compute, and the tests
 * check them against each other and against direct definitions. */
#ifndef KVPLAN_CPU_OPS_H
#define KVPLAN_CPU_OPS_H

#include "../../loader/scn.h"

#include <stddef.h>
#include <stdint.h>

/* out[T x h] = x / rms(x) * w, per row. */
void be_cpu_rmsnorm(float *out, const float *x, const float *w, int T, int h, float eps);
/* Rotary embedding in place on x[T x heads x d] (rotate-half pairing: i with i + d/2). */
void be_cpu_rope(float *x, int T, int heads, int d, const int32_t *pos, float theta);
/* out[M x N] = x[M x K] * w[K x N] (+= when accumulate), row-major. */
void be_cpu_matmul(float *out, const float *x, const float *w, int M, int N, int K, int accumulate);
/* out[T x inter] = silu(gu[:, :inter]) * gu[:, inter:], gu is [T x 2 inter]. */
void be_cpu_swiglu(float *out, const float *gu, int T, int inter);
int be_cpu_argmax(const float *v, int n);

/* The paged KV pool: [block][layer][k or v][slot][kv_head][d] elements of `dtype`, plus for
 * int8 one fp32 scale per (block, layer, k/v, slot, kv_head) vector. */
typedef struct {
    scn_dtype dtype;            /* fp32, fp16, bf16, fp8, int8 */
    long blocks;
    int block_size, layers, kv_heads, head_dim;
    uint8_t *data;
    float *scales;              /* int8 only */
    float fp8_scale;            /* per-tensor scale for fp8 (value = stored * scale) */
} be_cpu_kv_pool;

int be_cpu_kv_pool_init(be_cpu_kv_pool *p, scn_dtype dtype, long blocks, int block_size, int layers, int kv_heads, int d);
void be_cpu_kv_pool_free(be_cpu_kv_pool *p);
size_t be_cpu_kv_pool_bytes(const be_cpu_kv_pool *p);
/* Bytes a pool of this shape takes, computed before allocating it. */
double be_cpu_kv_pool_size(scn_dtype dtype, long blocks, int block_size, int layers, int kv_heads, int d);
/* Stores one head vector of d values at (block, slot) for layer, kv (0 = K, 1 = V), head. */
void be_cpu_kv_write(be_cpu_kv_pool *p, long block, int slot, int layer, int kv, int head, const float *vec);
/* Loads it back as fp32 (dequantised). */
void be_cpu_kv_read(const be_cpu_kv_pool *p, long block, int slot, int layer, int kv, int head, float *vec);

/* Which keys a query at position p sees: k <= p, and within any window: k < sink or
 * k > p - window (StreamingLLM), and k > p - sliding for a sliding-window layer. 0 = off. */
typedef struct {
    int sink, window;       /* StreamingLLM */
    int sliding;            /* the layer's own window (Mistral, Gemma 2 local layers) */
} be_cpu_attn_mask;

int be_cpu_attn_visible(const be_cpu_attn_mask *m, long p, long k);

/* Attention for n query tokens of one sequence at positions start..start+n-1 against the keys
 * in the pool through its block table (GQA: query head h reads KV head h / (H / Hkv)).
 * q and out are [n x H x d]; scores scaled by 1/sqrt(d); softmax in fp32. */
void be_cpu_attention_paged(float *out, const float *q, const be_cpu_kv_pool *pool, int layer, const int32_t *blocks,
                         long start, int n, int H, const be_cpu_attn_mask *mask);

#endif
