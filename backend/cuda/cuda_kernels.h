/* cuda_kernels.h: C-callable launchers of the CUDA kernels, one family per .cu file. Each
 * returns 0, or -1 with the reason in be_cuda_last_error. Pointers are device pointers; shapes are
 * row-major. Every kernel has a plain-C reference in backend/cpu/cpu_ops.c, and
 * `kvplan selftest --backend cuda` checks one against the other. */
#ifndef KVPLAN_CUDA_KERNELS_H
#define KVPLAN_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#else
typedef struct be_cuda_pool be_cuda_pool;
#endif

extern char be_cuda_last_error[512];

/* elementwise.cu */
int be_cuda_rmsnorm(float *out, const float *x, const float *w, int T, int h, float eps);
int be_cuda_rope(float *x, int T, int heads, int d, int row_stride, const int32_t *pos, float theta);
int be_cuda_swiglu(float *out, const float *gu, int T, int inter);
int be_cuda_gather_rows(float *out, const float *table, const int32_t *ids, int T, int h);
int be_cuda_argmax(int32_t *out, const float *logits, int rows, int n);

/* gemm.cu: out[M x N] (fp32) = x[M x K] (fp32 rounded to bf16) * w[K x N] (bf16), fp32
 * accumulation through cuBLAS; scratch_bf16 holds M x K bf16 values. */
int be_cuda_gemm(float *out, const float *x, const void *w_bf16, int M, int N, int K, int accumulate, void *scratch_bf16);

/* kv_write.cu: writes K and V rows ([T x Hkv x d] each, row stride `stride`) at the given
 * (block, slot) of layer into the pool. */
int be_cuda_kv_write(const struct be_cuda_pool *pool, int layer, const float *k, const float *v, int stride, const int32_t *blocks,
                 const int32_t *slots, int T);

/* The attention masks of be_cpu_attn_visible: StreamingLLM sink + window, and a sliding layer. */
typedef struct { int sink, window, sliding; } be_cuda_mask;

/* attn_decode.cu: one query token per sequence (position start[s]), GQA over the pool through
 * each sequence's block table (tables[s * max_blocks + j]); flash-decoding splits of
 * `split_tokens` keys, combined in a second pass. q, out: [n x H x d]. */
int be_cuda_attn_decode(float *out, const float *q, const struct be_cuda_pool *pool, int layer, const int32_t *tables,
                    int max_blocks, const int32_t *start, int n, int H, be_cuda_mask mask, int split_tokens);

/* attn_prefill.cu: causal attention for chunks: sequence s has its new tokens at rows
 * [row0[s], row0[s] + len[s]) of q/out and positions [start[s], start[s] + len[s]); keys come
 * from the pool (cached prefix and the chunk, written first). Tiled with an online softmax:
 * no score matrix in memory. */
int be_cuda_attn_prefill(float *out, const float *q, const struct be_cuda_pool *pool, int layer, const int32_t *tables,
                     int max_blocks, const int32_t *start, const int32_t *len, const int32_t *row0, int n, int max_len,
                     int H, be_cuda_mask mask);

/* attn_naive.cu: the same attention, materialising scores in `scratch` ([H x max_len x keys]
 * floats for the longest sequence): what FlashAttention avoids. */
int be_cuda_attn_naive(float *out, const float *q, const struct be_cuda_pool *pool, int layer, const int32_t *tables,
                   int max_blocks, const int32_t *start, const int32_t *len, const int32_t *row0, int n, int H,
                   be_cuda_mask mask, float *scratch, size_t scratch_floats);

#ifdef __cplusplus
}
#endif

#endif
