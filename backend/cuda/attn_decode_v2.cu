/* attn_decode_v2.cu: paged decode attention designed for the memory roofline (flash-decoding,
 * FlashInfer's paged layout). Reference: be_cpu_attention_paged with n = 1; v1 (attn_decode.cu)
 * computes the same function and stays selectable.
 *
 * Grid (sequence, KV head, split); 128 threads. A key's K (or V) row of D elements is read by a
 * group of D/8 consecutive lanes, 8 elements each: one 16-byte load for fp16/bf16, two for fp32,
 * one 8-byte load for fp8/int8, so a warp reads whole rows with coalesced vector loads. The g
 * query heads that share the KV head are held in registers together, so each K and V row is read
 * from memory once per step, not once per query head. Scores of the split go to shared memory;
 * each head's max and sum of exponentials are warp reductions; the weighted V sum is reduced over
 * the groups by shuffles and then over the 4 warps in shared memory, in a fixed order (the result
 * does not depend on timing). The splits (sized to fill the device, be_cuda_decode_split) are
 * merged by log-sum-exp in decode_combine_kernel (attn_decode.cu).
 *
 * Templates: the KV element type (so the inner loop has no dtype switch), the head dimension D
 * (64, 128, 256) and G, the query heads per KV head rounded up to 1, 4, 8 or 16 (register arrays
 * indexed only by unrolled constants). Other head dimensions run v1.
 *
 * Bytes per step (the floor): K and V of every visible key once, plus q and the partials. */
#include "attn_mask.cuh"
#include "cuda_common.cuh"
#include "cuda_kernels.h"

#include <math.h>

#define EPT 8          /* elements per lane */
#define NWARPS 4

__device__ __forceinline__ void load8(const float *p, float v[EPT])
{
    float4 a = __ldg((const float4 *)p), b = __ldg((const float4 *)p + 1);
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
}

__device__ __forceinline__ void load8(const __half *p, float v[EPT])
{
    uint4 u = __ldg((const uint4 *)p);
    const __half2 *h = (const __half2 *)&u;
#pragma unroll
    for (int i = 0; i < 4; i++) { float2 f = __half22float2(h[i]); v[2 * i] = f.x; v[2 * i + 1] = f.y; }
}

__device__ __forceinline__ void load8(const __nv_bfloat16 *p, float v[EPT])
{
    uint4 u = __ldg((const uint4 *)p);
    const __nv_bfloat162 *h = (const __nv_bfloat162 *)&u;
#pragma unroll
    for (int i = 0; i < 4; i++) { float2 f = __bfloat1622float2(h[i]); v[2 * i] = f.x; v[2 * i + 1] = f.y; }
}

__device__ __forceinline__ void load8(const __nv_fp8_e4m3 *p, float v[EPT])
{
    uint2 u = __ldg((const uint2 *)p);
    const __nv_fp8_e4m3 *b = (const __nv_fp8_e4m3 *)&u;
#pragma unroll
    for (int i = 0; i < EPT; i++) v[i] = float(b[i]);
}

__device__ __forceinline__ void load8(const signed char *p, float v[EPT])
{
    uint2 u = __ldg((const uint2 *)p);
    const signed char *b = (const signed char *)&u;
#pragma unroll
    for (int i = 0; i < EPT; i++) v[i] = (float)b[i];
}

/* The factor that turns stored values into real ones: 1, fp8's tensor scale, int8's per-vector scale. */
template <typename T> __device__ __forceinline__ float vec_scale(const be_cuda_pool &, size_t) { return 1.0f; }
template <> __device__ __forceinline__ float vec_scale<__nv_fp8_e4m3>(const be_cuda_pool &p, size_t) { return p.fp8_scale; }
template <> __device__ __forceinline__ float vec_scale<signed char>(const be_cuda_pool &p, size_t vec) { return __ldg(p.scales + vec); }

template <typename T, int D, int G>
__global__ void __launch_bounds__(NWARPS * 32)
decode_v2_kernel(float *part_acc, float *part_ml, const float *q, be_cuda_pool p, int layer, const int32_t *tables,
                 int max_blocks, const int32_t *start, int H, be_cuda_mask mask, int split)
{
    constexpr int TPK = D / EPT;            /* lanes per key row: 8, 16 or 32 */
    constexpr int KPW = 32 / TPK;           /* keys per warp at a time */
    constexpr int NG = NWARPS * KPW;        /* key groups per block */
    extern __shared__ float sm[];           /* scores [split][G]; then the V reduction [G][D] */
    __shared__ float mx[G], sum[G];
    const int s = blockIdx.x, kh = blockIdx.y, sp = blockIdx.z, nsp = gridDim.z;
    const int g = H / p.kv_heads, bs = p.block_size;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int grp = warp * KPW + lane / TPK, sub = lane % TPK, e0 = sub * EPT;
    const long pos = start[s], k0 = (long)sp * split, k1 = min(k0 + split, pos + 1);
    const int nk = k1 > k0 ? (int)(k1 - k0) : 0;
    const int32_t *table = tables + (size_t)s * max_blocks;
    const T *data = (const T *)p.data;
    const float scale = rsqrtf((float)D);

    /* 1. Scores: the group's lanes each dot 8 elements for all G heads, then sum by shuffles. */
    float qr[G][EPT];
#pragma unroll
    for (int a = 0; a < G; a++) {
        const float *qa = q + ((size_t)s * H + (size_t)kh * g + a) * D + e0;
#pragma unroll
        for (int e = 0; e < EPT; e++) qr[a][e] = a < g ? qa[e] * scale : 0.0f;
    }
    for (int base = 0; base < nk; base += NG) {   /* uniform over the block: every lane shuffles */
        const int kl = base + grp;
        const long k = k0 + kl;
        const bool vis = kl < nk && be_cuda_visible(mask, pos, k);
        float dot[G];
#pragma unroll
        for (int a = 0; a < G; a++) dot[a] = 0.0f;
        if (vis) {
            size_t vec = be_cuda_vec(p, __ldg(table + k / bs), (int)(k % bs), layer, 0, kh);
            float kv[EPT];
            load8(data + vec * D + e0, kv);
            float ks = vec_scale<T>(p, vec);
#pragma unroll
            for (int a = 0; a < G; a++) {
#pragma unroll
                for (int e = 0; e < EPT; e++) dot[a] += qr[a][e] * kv[e];
                dot[a] *= ks;
            }
        }
#pragma unroll
        for (int a = 0; a < G; a++)
#pragma unroll
            for (int off = TPK / 2; off; off >>= 1) dot[a] += __shfl_xor_sync(0xffffffffu, dot[a], off);
        if (kl < nk) {
#pragma unroll
            for (int a = 0; a < G; a++)
                if (a % TPK == sub && a < g) sm[kl * G + a] = vis ? dot[a] : -INFINITY;
        }
    }
    __syncthreads();

    /* 2. Per head: the split's max, then exponentials in place and their sum (warp a % 4). */
    for (int a = warp; a < g; a += NWARPS) {
        float m = -INFINITY;
        for (int i = lane; i < nk; i += 32) m = fmaxf(m, sm[i * G + a]);
#pragma unroll
        for (int off = 16; off; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
        float l = 0.0f;
        for (int i = lane; i < nk; i += 32) {
            float x = sm[i * G + a];
            float w = m == -INFINITY || x == -INFINITY ? 0.0f : __expf(x - m);
            sm[i * G + a] = w;
            l += w;
        }
#pragma unroll
        for (int off = 16; off; off >>= 1) l += __shfl_xor_sync(0xffffffffu, l, off);
        if (lane == 0) { mx[a] = m; sum[a] = l; }
    }
    __syncthreads();

    /* 3. Weighted V: each group takes keys grp, grp + NG, ...; one V row read serves all heads. */
    float acc[G][EPT];
#pragma unroll
    for (int a = 0; a < G; a++)
#pragma unroll
        for (int e = 0; e < EPT; e++) acc[a][e] = 0.0f;
    for (int kl = grp; kl < nk; kl += NG) {
        const long k = k0 + kl;
        if (!be_cuda_visible(mask, pos, k)) continue;   /* its weights are 0 for every head */
        size_t vec = be_cuda_vec(p, __ldg(table + k / bs), (int)(k % bs), layer, 1, kh);
        float v[EPT];
        load8(data + vec * D + e0, v);
        float vs = vec_scale<T>(p, vec);
#pragma unroll
        for (int a = 0; a < G; a++) {
            float w = a < g ? sm[kl * G + a] * vs : 0.0f;
#pragma unroll
            for (int e = 0; e < EPT; e++) acc[a][e] += w * v[e];
        }
    }
    /* 4. Reduce: over a warp's KPW groups by shuffles, then over the warps in order. */
#pragma unroll
    for (int a = 0; a < G; a++)
#pragma unroll
        for (int e = 0; e < EPT; e++)
#pragma unroll
            for (int off = TPK; off < 32; off <<= 1) acc[a][e] += __shfl_xor_sync(0xffffffffu, acc[a][e], off);
    __syncthreads();                        /* every score read: sm becomes [G][D] */
    for (int w = 0; w < NWARPS; w++) {
        if (warp == w && lane < TPK) {
#pragma unroll
            for (int a = 0; a < G; a++)
#pragma unroll
                for (int e = 0; e < EPT; e++) sm[a * D + e0 + e] = (w ? sm[a * D + e0 + e] : 0.0f) + acc[a][e];
        }
        __syncthreads();
    }
    /* 5. The split's partials, laid out as v1's: row (sequence, head), then split. */
    for (int i = threadIdx.x; i < g * D; i += NWARPS * 32) {
        int a = i / D, e = i % D;
        size_t row = ((size_t)s * H + (size_t)kh * g + a) * nsp + sp;
        part_acc[row * D + e] = sm[a * D + e];
    }
    if (threadIdx.x < g) {
        size_t row = ((size_t)s * H + (size_t)kh * g + threadIdx.x) * nsp + sp;
        part_ml[row * 2] = mx[threadIdx.x];
        part_ml[row * 2 + 1] = sum[threadIdx.x];
    }
}

template <typename T, int D, int G>
static int launch(float *acc, float *ml, const float *q, const be_cuda_pool *p, int layer, const int32_t *tables, int max_blocks,
                  const int32_t *start, int n, int H, be_cuda_mask mask, int split, int nsp)
{
    size_t smem = (size_t)(split > D ? split : D) * G * sizeof(float);
    /* The 48 KB a launch may use without opting in counts the kernel's static arrays (mx[G] and
     * sum[G]) as well as the dynamic bytes: past it the dynamic limit must be raised first
     * (1024 keys x 16 heads = 64 KB dynamic). */
    const size_t static_bytes = 2 * (size_t)G * sizeof(float);
    if (smem + static_bytes > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(decode_v2_kernel<T, D, G>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    dim3 grid(n, p->kv_heads, nsp);
    decode_v2_kernel<T, D, G><<<grid, NWARPS * 32, smem>>>(acc, ml, q, *p, layer, tables, max_blocks, start, H, mask, split);
    LAUNCH_CHECK();
    return 0;
}

template <typename T, int D>
static int by_g(int g, float *acc, float *ml, const float *q, const be_cuda_pool *p, int layer, const int32_t *tables,
                int max_blocks, const int32_t *start, int n, int H, be_cuda_mask mask, int split, int nsp)
{
    if (g <= 1) return launch<T, D, 1>(acc, ml, q, p, layer, tables, max_blocks, start, n, H, mask, split, nsp);
    if (g <= 4) return launch<T, D, 4>(acc, ml, q, p, layer, tables, max_blocks, start, n, H, mask, split, nsp);
    if (g <= 8) return launch<T, D, 8>(acc, ml, q, p, layer, tables, max_blocks, start, n, H, mask, split, nsp);
    return launch<T, D, 16>(acc, ml, q, p, layer, tables, max_blocks, start, n, H, mask, split, nsp);
}

template <typename T>
static int by_d(int g, float *acc, float *ml, const float *q, const be_cuda_pool *p, int layer, const int32_t *tables,
                int max_blocks, const int32_t *start, int n, int H, be_cuda_mask mask, int split, int nsp)
{
    switch (p->head_dim) {
    case 64: return by_g<T, 64>(g, acc, ml, q, p, layer, tables, max_blocks, start, n, H, mask, split, nsp);
    case 128: return by_g<T, 128>(g, acc, ml, q, p, layer, tables, max_blocks, start, n, H, mask, split, nsp);
    default: return by_g<T, 256>(g, acc, ml, q, p, layer, tables, max_blocks, start, n, H, mask, split, nsp);
    }
}

extern "C" int be_cuda_decode_split(const be_cuda_ws *ws, int n, int kv_heads, int longest)
{
    long sms = ws && ws->num_sms > 0 ? ws->num_sms : 132;
    long blocks = (long)(n > 0 ? n : 1) * (kv_heads > 0 ? kv_heads : 1);
    long want = (2 * sms + blocks - 1) / blocks;   /* splits per sequence for about two blocks per SM */
    if (want < 1) want = 1;
    long split = (longest + want - 1) / want;
    split = (split + 63) / 64 * 64;
    if (split < 128) split = 128;                  /* shorter splits only add combine work */
    if (split > 1024) split = 1024;                /* 1024 keys x 16 heads of scores: 64 KB of shared memory */
    return (int)split;
}

extern "C" int be_cuda_attn_decode_v2(be_cuda_ws *ws, float *out, const float *q, const be_cuda_pool *pool, int layer,
                                      const int32_t *tables, int max_blocks, const int32_t *start, int n, int H,
                                      be_cuda_mask mask, int split)
{
    if (n <= 0) return 0;
    int d = pool->head_dim, g = H / pool->kv_heads;
    if (g > 16 || (d != 64 && d != 128 && d != 256)) {
        snprintf(be_cuda_last_error, sizeof be_cuda_last_error,
                 "decode attention v2 takes head_dim 64, 128 or 256 and up to 16 query heads per KV head (got %d, %d)", d, g);
        return -1;
    }
    int longest = max_blocks * pool->block_size;
    if (split <= 0) split = be_cuda_decode_split(ws, n, pool->kv_heads, longest);
    if (split > 1024) split = 1024;
    int nsp = (longest + split - 1) / split;
    size_t need = (size_t)n * H * nsp * (d + 2);
    if (be_cuda_decode_scratch(ws, need)) return -1;
    float *acc = ws->scratch, *ml = ws->scratch + (size_t)n * H * nsp * d;
    int rc;
    switch (pool->dtype) {
    case BE_CUDA_F16: rc = by_d<__half>(g, acc, ml, q, pool, layer, tables, max_blocks, start, n, H, mask, split, nsp); break;
    case BE_CUDA_BF16: rc = by_d<__nv_bfloat16>(g, acc, ml, q, pool, layer, tables, max_blocks, start, n, H, mask, split, nsp); break;
    case BE_CUDA_FP8: rc = by_d<__nv_fp8_e4m3>(g, acc, ml, q, pool, layer, tables, max_blocks, start, n, H, mask, split, nsp); break;
    case BE_CUDA_I8: rc = by_d<signed char>(g, acc, ml, q, pool, layer, tables, max_blocks, start, n, H, mask, split, nsp); break;
    default: rc = by_d<float>(g, acc, ml, q, pool, layer, tables, max_blocks, start, n, H, mask, split, nsp); break;
    }
    if (rc) return rc;
    return be_cuda_decode_combine(out, acc, ml, n * H, nsp, d);
}

/* The backend's entry: v2 where it applies, v1 where asked for or where v2 does not apply. */
extern "C" int be_cuda_attn_decode(be_cuda_ws *ws, float *out, const float *q, const be_cuda_pool *pool, int layer,
                                   const int32_t *tables, int max_blocks, const int32_t *start, int n, int H,
                                   be_cuda_mask mask, int split)
{
    int d = pool->head_dim, g = H / pool->kv_heads;
    bool v2_fits = g <= 16 && (d == 64 || d == 128 || d == 256);
    if (ws->decode_kernel == BE_CUDA_DECODE_V1 || !v2_fits)
        return be_cuda_attn_decode_v1(ws, out, q, pool, layer, tables, max_blocks, start, n, H, mask, split);
    return be_cuda_attn_decode_v2(ws, out, q, pool, layer, tables, max_blocks, start, n, H, mask, split);
}
