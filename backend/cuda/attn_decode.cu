/* attn_decode.cu: paged decode attention, the first (v1, scalar) kernel, kept selectable
 * (KVPLAN_CUDA_DECODE=v1) so a device run can compare it with attn_decode_v2.cu. Flash-decoding style. Grid (sequence, KV head, split):
 * each block takes one split of `split` keys for the g query heads sharing its KV head, reads
 * each K and V vector once (dequantising on load), and writes its partial max, sum and weighted
 * V; a second kernel combines the splits. Reference: be_cpu_attention_paged with n = 1. */
#include "attn_mask.cuh"
#include "cuda_common.cuh"
#include "cuda_kernels.h"

#include <math.h>

#define MAX_G 16          /* query heads per KV head handled by one block */
#define MAX_D 256         /* head dimension */

__global__ void decode_split_kernel(float *part_acc, float *part_ml, const float *q, be_cuda_pool p, int layer,
                                    const int32_t *tables, int max_blocks, const int32_t *start, int H, be_cuda_mask mask,
                                    int split)
{
    extern __shared__ float sm[];     /* scores [split x g] */
    __shared__ float qs[MAX_G * MAX_D];
    __shared__ float red[MAX_G];
    int s = blockIdx.x, kh = blockIdx.y, sp = blockIdx.z, nsp = gridDim.z;
    int d = p.head_dim, g = H / p.kv_heads, bs = p.block_size;
    long pos = start[s], k0 = (long)sp * split, k1 = min((long)(sp + 1) * split, pos + 1);
    const int32_t *table = tables + (size_t)s * max_blocks;
    float scale = rsqrtf((float)d);
    for (int i = threadIdx.x; i < g * d; i += blockDim.x) qs[i] = q[((size_t)s * H + (size_t)kh * g) * d + i];
    __syncthreads();
    /* Scores: one key per thread, its K vector read once for all g heads. */
    for (long k = k0 + threadIdx.x; k < k1; k += blockDim.x) {
        float *sc = sm + (k - k0) * g;
        if (!be_cuda_visible(mask, pos, k)) { for (int a = 0; a < g; a++) sc[a] = -INFINITY; continue; }
        size_t vec = be_cuda_vec(p, table[k / bs], (int)(k % bs), layer, 0, kh);
        float acc[MAX_G];
        for (int a = 0; a < g; a++) acc[a] = 0;
        for (int i = 0; i < d; i++) {
            float kv = be_cuda_load(p, vec, i);
            for (int a = 0; a < g; a++) acc[a] += qs[a * d + i] * kv;
        }
        for (int a = 0; a < g; a++) sc[a] = acc[a] * scale;
    }
    __syncthreads();
    /* Per head: the split's max and sum of exponentials (serial over the split per head thread). */
    if (threadIdx.x < g) {
        int a = threadIdx.x;
        float m = -INFINITY;
        for (long k = k0; k < k1; k++) m = fmaxf(m, sm[(k - k0) * g + a]);
        red[a] = m;
    }
    __syncthreads();
    for (long k = k0 + threadIdx.x; k < k1; k += blockDim.x)
        for (int a = 0; a < g; a++) {
            float *x = sm + (k - k0) * g + a;
            *x = red[a] == -INFINITY || *x == -INFINITY ? 0.0f : __expf(*x - red[a]);
        }
    __syncthreads();
    size_t base = (((size_t)s * H + (size_t)kh * g) * nsp + sp);
    if (threadIdx.x < g) {
        int a = threadIdx.x;
        float l = 0;
        for (long k = k0; k < k1; k++) l += sm[(k - k0) * g + a];
        part_ml[(base + (size_t)a * nsp) * 2] = red[a];
        part_ml[(base + (size_t)a * nsp) * 2 + 1] = l;
    }
    /* Weighted V: one (head, element) per thread; each V vector element is read by g threads. */
    for (int j = threadIdx.x; j < g * d; j += blockDim.x) {
        int a = j / d, i = j % d;
        float acc = 0;
        for (long k = k0; k < k1; k++) {
            float w = sm[(k - k0) * g + a];
            if (w != 0) acc += w * be_cuda_load(p, be_cuda_vec(p, table[k / bs], (int)(k % bs), layer, 1, kh), i);
        }
        part_acc[(base + (size_t)a * nsp) * d + i] = acc;
    }
}

__global__ void decode_combine_kernel(float *out, const float *part_acc, const float *part_ml, int nsp, int d)
{
    size_t row = blockIdx.x;   /* (sequence, head) */
    float M = -INFINITY;
    for (int sp = 0; sp < nsp; sp++) M = fmaxf(M, part_ml[(row * nsp + sp) * 2]);
    float L = 0;
    for (int sp = 0; sp < nsp; sp++) {
        float m = part_ml[(row * nsp + sp) * 2];
        if (m != -INFINITY) L += part_ml[(row * nsp + sp) * 2 + 1] * __expf(m - M);
    }
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        float acc = 0;
        for (int sp = 0; sp < nsp; sp++) {
            float m = part_ml[(row * nsp + sp) * 2];
            if (m != -INFINITY) acc += part_acc[(row * nsp + sp) * d + i] * __expf(m - M);
        }
        out[row * d + i] = acc / L;
    }
}

/* Merges the splits' partials by log-sum-exp; shared with attn_decode_v2.cu. */
extern "C" int be_cuda_decode_combine(float *out, const float *acc, const float *ml, int rows, int nsp, int d)
{
    decode_combine_kernel<<<rows, 128>>>(out, acc, ml, nsp, d);
    LAUNCH_CHECK();
    return 0;
}

/* The split partials live in the context's workspace: [n x H x nsp] of (d accumulators) then
 * (max, sum) pairs. */
extern "C" int be_cuda_decode_scratch(be_cuda_ws *ws, size_t need)
{
    if (need <= ws->scratch_floats) return 0;
    if (ws->scratch) cudaFree(ws->scratch);
    ws->scratch = NULL;
    ws->scratch_floats = 0;
    CUDA_CHECK(cudaMalloc(&ws->scratch, need * sizeof(float)));
    ws->scratch_floats = need;
    return 0;
}

extern "C" int be_cuda_attn_decode_v1(be_cuda_ws *ws, float *out, const float *q, const be_cuda_pool *pool, int layer,
                                      const int32_t *tables, int max_blocks, const int32_t *start, int n, int H,
                                      be_cuda_mask mask, int split)
{
    if (n <= 0) return 0;
    if (split <= 0) split = 512;   /* v1's own choice, as it always ran */
    int d = pool->head_dim, g = H / pool->kv_heads;
    if (g > MAX_G || d > MAX_D) {
        snprintf(be_cuda_last_error, sizeof be_cuda_last_error, "decode attention supports up to %d query heads per KV head and "
                 "head_dim %d (got %d, %d)", MAX_G, MAX_D, g, d);
        return -1;
    }
    /* Splits cover the longest sequence; blocks past a sequence's end write empty partials. */
    int longest = max_blocks * pool->block_size;
    int nsp = (longest + split - 1) / split;
    size_t need = (size_t)n * H * nsp * (d + 2);
    if (be_cuda_decode_scratch(ws, need)) return -1;
    float *acc = ws->scratch, *ml = ws->scratch + (size_t)n * H * nsp * d;
    dim3 grid(n, pool->kv_heads, nsp);
    size_t smem = (size_t)split * g * sizeof(float);
    /* Static shared memory is 16.1 KB (queries and maxima); past 48 KB in all, a launch fails
     * unless the kernel's dynamic limit is raised first (512 keys x 16 heads is 32 KB + 16 KB). */
    if (smem + sizeof(float) * (MAX_G * MAX_D + MAX_G) > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(decode_split_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    decode_split_kernel<<<grid, 128, smem>>>(acc, ml, q, *pool, layer, tables, max_blocks, start, H, mask, split);
    LAUNCH_CHECK();
    return be_cuda_decode_combine(out, acc, ml, n * H, nsp, d);
}
