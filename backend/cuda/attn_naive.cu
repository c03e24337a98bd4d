/* attn_naive.cu: attention that materialises the score matrix (scores, then softmax, then the
 * weighted sum of V, each a pass through global memory), so the FlashAttention trade-off is
 * measured rather than assumed. Reference: be_cpu_attention_paged. */
#include "attn_mask.cuh"
#include "cuda_common.cuh"

#include <math.h>

/* S[h][j][k] = q_j . k_k / sqrt(d), -inf where masked. One thread per (h, j, k). */
__global__ void naive_scores(float *S, const float *q, be_cuda_pool p, int layer, const int32_t *table, long start, int len,
                             int row0, int H, be_cuda_mask mask)
{
    long keys = start + len, id = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (long)H * len * keys) return;
    long k = id % keys;
    int j = (int)((id / keys) % len), h = (int)(id / keys / len);
    int d = p.head_dim, kh = h / (H / p.kv_heads), bs = p.block_size;
    long pos = start + j;
    float sc = -INFINITY;
    if (be_cuda_visible(mask, pos, k)) {
        size_t vec = be_cuda_vec(p, table[k / bs], (int)(k % bs), layer, 0, kh);
        const float *qv = q + ((size_t)(row0 + j) * H + h) * d;
        float acc = 0;
        for (int i = 0; i < d; i++) acc += qv[i] * be_cuda_load(p, vec, i);
        sc = acc * rsqrtf((float)d);
    }
    S[id] = sc;
}

/* Row softmax in place; one block per (h, j) row. */
__global__ void naive_softmax(float *S, long keys)
{
    float *row = S + (size_t)blockIdx.x * keys;
    __shared__ float red[256];
    float m = -INFINITY;
    for (long k = threadIdx.x; k < keys; k += blockDim.x) m = fmaxf(m, row[k]);
    red[threadIdx.x] = m;
    __syncthreads();
    for (int o = blockDim.x / 2; o; o >>= 1) { if (threadIdx.x < o) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + o]); __syncthreads(); }
    m = red[0];
    __syncthreads();
    float sum = 0;
    for (long k = threadIdx.x; k < keys; k += blockDim.x) { float e = row[k] == -INFINITY ? 0 : __expf(row[k] - m); row[k] = e; sum += e; }
    red[threadIdx.x] = sum;
    __syncthreads();
    for (int o = blockDim.x / 2; o; o >>= 1) { if (threadIdx.x < o) red[threadIdx.x] += red[threadIdx.x + o]; __syncthreads(); }
    float inv = 1.0f / red[0];
    for (long k = threadIdx.x; k < keys; k += blockDim.x) row[k] *= inv;
}

/* out[j][h][i] = sum_k P[h][j][k] v_k[i]. One thread per (h, j, i). */
__global__ void naive_pv(float *out, const float *P, be_cuda_pool p, int layer, const int32_t *table, long start, int len,
                         int row0, int H)
{
    int d = p.head_dim, bs = p.block_size;
    long keys = start + len, id = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (long)H * len * d) return;
    int i = (int)(id % d), j = (int)((id / d) % len), h = (int)(id / d / len), kh = h / (H / p.kv_heads);
    const float *row = P + ((size_t)h * len + j) * keys;
    float acc = 0;
    for (long k = 0; k < keys; k++)
        if (row[k] != 0) acc += row[k] * be_cuda_load(p, be_cuda_vec(p, table[k / bs], (int)(k % bs), layer, 1, kh), i);
    out[((size_t)(row0 + j) * H + h) * d + i] = acc;
}

extern "C" int be_cuda_attn_naive(float *out, const float *q, const be_cuda_pool *pool, int layer, const int32_t *tables,
                              int max_blocks, const int32_t *start, const int32_t *len, const int32_t *row0, int n, int H,
                              be_cuda_mask mask, float *scratch, size_t scratch_floats)
{
    /* Sequence by sequence: the host reads each one's shape to size its launches. */
    for (int s = 0; s < n; s++) {
        int st, ln, r0;
        CUDA_CHECK(cudaMemcpy(&st, start + s, sizeof st, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(&ln, len + s, sizeof ln, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(&r0, row0 + s, sizeof r0, cudaMemcpyDeviceToHost));
        long keys = (long)st + ln, cells = (long)H * ln * keys;
        if ((size_t)cells > scratch_floats) {
            snprintf(be_cuda_last_error, sizeof be_cuda_last_error, "naive attention needs %ld floats of scratch, has %zu", cells, scratch_floats);
            return -1;
        }
        const int32_t *table = tables + (size_t)s * max_blocks;
        naive_scores<<<(unsigned)((cells + 255) / 256), 256>>>(scratch, q, *pool, layer, table, st, ln, r0, H, mask);
        LAUNCH_CHECK();
        naive_softmax<<<H * ln, 256>>>(scratch, keys);
        LAUNCH_CHECK();
        long outs = (long)H * ln * pool->head_dim;
        naive_pv<<<(unsigned)((outs + 255) / 256), 256>>>(out, scratch, *pool, layer, table, st, ln, r0, H);
        LAUNCH_CHECK();
    }
    return 0;
}
