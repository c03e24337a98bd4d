/* attn_prefill.cu: causal attention for prefill chunks over the cached prefix and the chunk
 * itself, tiled with an online softmax so no score matrix exists in memory (FlashAttention's
 * idea). Grid (query tile, head, sequence); each thread owns one query row; K and V tiles are
 * staged in shared memory once per block. Reference: be_cpu_attention_paged. */
#include "attn_mask.cuh"
#include "cuda_common.cuh"

#include <math.h>

#define TILE 32            /* query rows per block, and keys per shared-memory tile */
#define PMAX_D 256

__global__ void prefill_kernel(float *out, const float *q, be_cuda_pool p, int layer, const int32_t *tables, int max_blocks,
                               const int32_t *start, const int32_t *len, const int32_t *row0, int H, be_cuda_mask mask)
{
    extern __shared__ float kvs[];   /* K tile then V tile: [2][TILE][d] */
    int s = blockIdx.z, h = blockIdx.y, d = p.head_dim, bs = p.block_size;
    int kh = h / (H / p.kv_heads);
    int j = blockIdx.x * TILE + threadIdx.x;          /* query index within the chunk */
    if (blockIdx.x * TILE >= len[s]) return;          /* the whole block is past this chunk */
    bool active = j < len[s];
    long pos = (long)start[s] + (active ? j : len[s] - 1);
    long last = (long)start[s] + min(len[s], (int)(blockIdx.x + 1) * TILE) - 1;   /* the block's furthest query */
    const int32_t *table = tables + (size_t)s * max_blocks;
    float qv[PMAX_D], acc[PMAX_D];
    float scale = rsqrtf((float)d), m = -INFINITY, l = 0;
    const float *qrow = q + ((size_t)(row0[s] + (active ? j : 0)) * H + h) * d;
    for (int i = 0; i < d; i++) { qv[i] = qrow[i] * scale; acc[i] = 0; }
    float *ks = kvs, *vs = kvs + TILE * d;
    for (long t0 = 0; t0 <= last; t0 += TILE) {
        /* Stage keys [t0, t0 + TILE): each thread loads one key's K and V. */
        long k = t0 + threadIdx.x;
        if (k <= last) {
            size_t vk = be_cuda_vec(p, table[k / bs], (int)(k % bs), layer, 0, kh);
            size_t vv = be_cuda_vec(p, table[k / bs], (int)(k % bs), layer, 1, kh);
            for (int i = 0; i < d; i++) { ks[threadIdx.x * d + i] = be_cuda_load(p, vk, i); vs[threadIdx.x * d + i] = be_cuda_load(p, vv, i); }
        }
        __syncthreads();
        if (active) {
            for (int u = 0; u < TILE && t0 + u <= pos; u++) {
                if (!be_cuda_visible(mask, pos, t0 + u)) continue;
                float sc = 0;
                for (int i = 0; i < d; i++) sc += qv[i] * ks[u * d + i];
                float mn = fmaxf(m, sc), corr = __expf(m - mn), w = __expf(sc - mn);
                l = l * corr + w;
                for (int i = 0; i < d; i++) acc[i] = acc[i] * corr + w * vs[u * d + i];
                m = mn;
            }
        }
        __syncthreads();
    }
    if (active) {
        float *o = out + ((size_t)(row0[s] + j) * H + h) * d;
        for (int i = 0; i < d; i++) o[i] = acc[i] / l;
    }
}

extern "C" int be_cuda_attn_prefill(float *out, const float *q, const be_cuda_pool *pool, int layer, const int32_t *tables,
                                int max_blocks, const int32_t *start, const int32_t *len, const int32_t *row0, int n,
                                int max_len, int H, be_cuda_mask mask)
{
    if (n <= 0 || max_len <= 0) return 0;
    if (pool->head_dim > PMAX_D) {
        snprintf(be_cuda_last_error, sizeof be_cuda_last_error, "prefill attention supports head_dim up to %d", PMAX_D);
        return -1;
    }
    dim3 grid((max_len + TILE - 1) / TILE, H, n);
    size_t smem = 2 * (size_t)TILE * pool->head_dim * sizeof(float);
    /* head_dim 256 stages 64 KB of K and V: past 48 KB the kernel's dynamic limit must be raised. */
    if (smem > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(prefill_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    prefill_kernel<<<grid, TILE, smem>>>(out, q, *pool, layer, tables, max_blocks, start, len, row0, H, mask);
    LAUNCH_CHECK();
    return 0;
}
