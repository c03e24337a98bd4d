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

/* Which decode-attention kernel runs: the vectorised flash-decoding kernel with cp.async
 * pipelining (attn_decode_v2.cu, the default), the same without pipelining (direct loads), or the
 * first, scalar one (attn_decode.cu), kept selectable so a device run can compare them
 * (KVPLAN_CUDA_DECODE=v2|v2direct|v1). */
enum { BE_CUDA_DECODE_V2 = 0, BE_CUDA_DECODE_V1 = 1, BE_CUDA_DECODE_V2_DIRECT = 2 };
/* Which prefill-attention kernel the backend runs: fp32 on CUDA cores (attn_prefill.cu, the
 * default) or tensor cores (attn_prefill_tc.cu, KVPLAN_CUDA_PREFILL=tc; head_dim 64 and 128). */
enum { BE_CUDA_PREFILL_FP32 = 0, BE_CUDA_PREFILL_TC = 1 };

/* What a backend context owns for its launches instead of process-wide statics: cuBLAS (opened
 * with dlopen when the workspace is made, so loading the plugin costs nothing), its handle, and
 * the decode kernel's split partials, grown on demand. */
typedef struct be_cuda_ws {
    void *blas_lib;             /* dlopen handle of libcublas */
    void *blas;                 /* cublasHandle_t */
    void *gemm_ex;              /* cublasGemmEx */
    void *destroy;              /* cublasDestroy_v2 */
    void *status_name;          /* cublasGetStatusName (may be NULL) */
    char blas_path[256];        /* the libcublas that was opened */
    float *scratch;             /* decode partials */
    size_t scratch_floats;
    int decode_kernel;          /* BE_CUDA_DECODE_* */
    int prefill_kernel;         /* BE_CUDA_PREFILL_* */
    int num_sms;                /* multiprocessors of the device, to size decode splits */
} be_cuda_ws;

/* gemm.cu: opens cuBLAS and creates the handle; reads KVPLAN_CUDA_DECODE and KVPLAN_CUDA_PREFILL. */
int be_cuda_ws_init(be_cuda_ws *ws);
void be_cuda_ws_free(be_cuda_ws *ws);

/* elementwise.cu */
int be_cuda_rmsnorm(float *out, const float *x, const float *w, int T, int h, float eps);
int be_cuda_rope(float *x, int T, int heads, int d, int row_stride, const int32_t *pos, float theta);
int be_cuda_swiglu(float *out, const float *gu, int T, int inter);
int be_cuda_gather_rows(float *out, const float *table, const int32_t *ids, int T, int h);
int be_cuda_argmax(int32_t *out, const float *logits, int rows, int n);

/* gemm.cu: out[M x N] (fp32) = x[M x K] (fp32 rounded to bf16) * w[K x N] (bf16), fp32
 * accumulation through cuBLAS; scratch_bf16 holds M x K bf16 values. */
int be_cuda_gemm(be_cuda_ws *ws, float *out, const float *x, const void *w_bf16, int M, int N, int K, int accumulate,
                 void *scratch_bf16);
/* The GEMM alone on bf16 operands (no cast): the ceiling that kernel-bench reports against. */
int be_cuda_gemm_bf16(be_cuda_ws *ws, float *out, const void *a_bf16, const void *b_bf16, int M, int N, int K);

/* kv_write.cu: writes K and V rows ([T x Hkv x d] each, row stride `stride`) at the given
 * (block, slot) of layer into the pool. */
int be_cuda_kv_write(const struct be_cuda_pool *pool, int layer, const float *k, const float *v, int stride, const int32_t *blocks,
                 const int32_t *slots, int T);

/* The attention masks of be_cpu_attn_visible: StreamingLLM sink + window, and a sliding layer. */
typedef struct { int sink, window, sliding; } be_cuda_mask;

/* Decode attention: one query token per sequence (position start[s]), GQA over the pool through
 * each sequence's block table (tables[s * max_blocks + j]); flash-decoding splits of
 * `split_tokens` keys (0: the kernel sizes them to fill the device), combined by log-sum-exp in a
 * second pass. q, out: [n x H x d]. Dispatches on ws->decode_kernel. */
int be_cuda_attn_decode(be_cuda_ws *ws, float *out, const float *q, const struct be_cuda_pool *pool, int layer,
                        const int32_t *tables, int max_blocks, const int32_t *start, int n, int H, be_cuda_mask mask,
                        int split_tokens);
/* attn_decode.cu (v1) and attn_decode_v2.cu (v2), callable directly by the selftest and bench. */
int be_cuda_attn_decode_v1(be_cuda_ws *ws, float *out, const float *q, const struct be_cuda_pool *pool, int layer,
                           const int32_t *tables, int max_blocks, const int32_t *start, int n, int H, be_cuda_mask mask,
                           int split_tokens);
int be_cuda_attn_decode_v2(be_cuda_ws *ws, float *out, const float *q, const struct be_cuda_pool *pool, int layer,
                           const int32_t *tables, int max_blocks, const int32_t *start, int n, int H, be_cuda_mask mask,
                           int split_tokens);
/* v2 without the cp.async pipeline (each lane loads its row share straight into registers). */
int be_cuda_attn_decode_v2_direct(be_cuda_ws *ws, float *out, const float *q, const struct be_cuda_pool *pool, int layer,
                                  const int32_t *tables, int max_blocks, const int32_t *start, int n, int H, be_cuda_mask mask,
                                  int split_tokens);
/* The split size the backend uses when asked for 0: enough (sequence, KV head, split) blocks to
 * fill the multiprocessors about twice, 128 to 1024 keys per split, the splits of the longest
 * sequence evened out (attn_layout.h). */
int be_cuda_decode_split(const be_cuda_ws *ws, int n, int kv_heads, int longest);
/* attn_decode.cu: grows the workspace's partials to `need` floats; merges [rows x nsp] partials
 * (d accumulators each, then (max, sum) pairs) into out[rows x d] by log-sum-exp. */
int be_cuda_decode_scratch(be_cuda_ws *ws, size_t need);
int be_cuda_decode_combine(float *out, const float *acc, const float *ml, int rows, int nsp, int d);

/* attn_prefill.cu: causal attention for chunks: sequence s has its new tokens at rows
 * [row0[s], row0[s] + len[s]) of q/out and positions [start[s], start[s] + len[s]); keys come
 * from the pool (cached prefix and the chunk, written first). Tiled with an online softmax:
 * no score matrix in memory. */
int be_cuda_attn_prefill(float *out, const float *q, const struct be_cuda_pool *pool, int layer, const int32_t *tables,
                     int max_blocks, const int32_t *start, const int32_t *len, const int32_t *row0, int n, int max_len,
                     int H, be_cuda_mask mask);

/* attn_prefill_tc.cu: the same on tensor cores (bf16 operands, fp32 accumulation), head_dim 64
 * or 128. */
int be_cuda_attn_prefill_tc(float *out, const float *q, const struct be_cuda_pool *pool, int layer, const int32_t *tables,
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
