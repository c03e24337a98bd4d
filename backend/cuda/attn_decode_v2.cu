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
 * Pipelining (PIPE = true, the default): the K and V rows go through a ring of DV2_STAGES
 * shared-memory slots per lane, filled with cp.async, DV2_STAGES - 1 key groups ahead of the one
 * being computed, so each lane has several row loads in flight while it computes (the direct
 * version, PIPE = false, has one: its loop is not unrolled across key groups). Each lane reads
 * back only the bytes its own cp.async wrote, so cp.async.wait_group alone makes them visible
 * (no block barrier in the loop). Before a slot is refilled, the values last read from it have
 * been consumed (the score shuffles in pass 1, the V accumulation in pass 3) and a __syncwarp
 * orders the read before the new copy. The first V groups are issued at the end of pass 1, so
 * they are in flight during the softmax pass. The direct version stays selectable
 * (KVPLAN_CUDA_DECODE=v2direct) so kernel-bench compares them.
 *
 * Templates: the KV element type (so the inner loop has no dtype switch), the head dimension D
 * (64, 128, 256), G, the query heads per KV head rounded up to 1, 4, 8 or 16 (register arrays
 * indexed only by unrolled constants), and PIPE. Other head dimensions run v1.
 *
 * Bytes per step (the floor): K and V of every visible key once, plus q and the partials
 * (docs/cuda.md). */
#include "attn_layout.h"
#include "attn_mask.cuh"
#include "cuda_async.cuh"
#include "cuda_common.cuh"
#include "cuda_kernels.h"
#include "kv_vec.cuh"

#include <math.h>
#include <type_traits>

#define EPT KV_EPT     /* elements per lane */
#define NWARPS 4
#define NT (NWARPS * 32)
#define DV2_STAGES 4   /* ring slots per lane: 3 key groups in flight ahead of the computed one */

/* Bytes of one lane's share of a row (8 elements), and how the ring stores it: parts of at most
 * 16 bytes, part-major ([stage][part][lane]), so 8 lanes' 16-byte accesses cover 128 contiguous
 * bytes (conflict-free); fp32's 32 bytes are two parts. */
template <typename T> struct dv2_ring {
    static constexpr int LB = EPT * (int)sizeof(T);
    static constexpr int PB = LB < 16 ? LB : 16;
    static constexpr int PARTS = LB / PB;
    static constexpr bool I8 = std::is_same<T, signed char>::value;
    /* The row ring, then (int8) a ring of per-vector scales; a multiple of 16 bytes. */
    static constexpr size_t bytes = (size_t)DV2_STAGES * NT * LB + (I8 ? (size_t)DV2_STAGES * NT * sizeof(float) : 0);
    static_assert(LB == 8 || LB == 16 || LB == 32, "8 elements of 1, 2 or 4 bytes");
    static_assert(bytes % 16 == 0, "the score area after the ring stays 16-byte aligned");
};

template <typename T, int D, int G, bool PIPE>
__global__ void __launch_bounds__(NT)
decode_v2_kernel(float *part_acc, float *part_ml, const float *q, be_cuda_pool p, int layer, const int32_t *tables,
                 int max_blocks, const int32_t *start, int H, be_cuda_mask mask, int split)
{
    constexpr int TPK = D / EPT;            /* lanes per key row: 8, 16 or 32 */
    constexpr int KPW = 32 / TPK;           /* keys per warp at a time */
    constexpr int NG = NWARPS * KPW;        /* key groups per block */
    static_assert(D % EPT == 0 && 32 % TPK == 0 && TPK >= 8, "D in 64, 128, 256");
    static_assert(G >= 1 && G <= 16, "query heads per KV head");
    using R = dv2_ring<T>;
    extern __shared__ __align__(16) unsigned char smraw[];
    unsigned char *const ring = smraw;                                   /* [stage][part][lane][PB] (PIPE only) */
    float *const sring = (float *)(smraw + (size_t)DV2_STAGES * NT * R::LB); /* [stage][lane] int8 scales */
    float *const sm = (float *)(smraw + (PIPE ? R::bytes : 0));          /* scores [split][G]; then the V reduction [G][D] */
    __shared__ float mx[G], sum[G];
    const int s = blockIdx.x, kh = blockIdx.y, sp = blockIdx.z, nsp = gridDim.z;
    const int g = H / p.kv_heads, bs = p.block_size;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int grp = warp * KPW + lane / TPK, sub = lane % TPK, e0 = sub * EPT;
    const long pos = start[s], k0 = (long)sp * split, k1 = min(k0 + split, pos + 1);
    const int nk = k1 > k0 ? (int)(k1 - k0) : 0;
    const int iters = (nk + NG - 1) / NG;   /* key groups of the split; the same for every thread */
    const int32_t *table = tables + (size_t)s * max_blocks;
    const T *data = (const T *)p.data;
    const float scale = rsqrtf((float)D);

    /* Key group `it` of this lane: key kl = it * NG + grp of the split, if it is in the split and
     * visible (an invisible key is never read: its weight is 0 for every head). */
    auto key_of = [&](int it, long *k) {
        const int kl = it * NG + grp;
        *k = k0 + kl;
        return kl < nk && be_cuda_visible(mask, pos, *k);
    };
    /* PIPE: the copies of group `it` (K or V) into ring slot it % DV2_STAGES; one commit group per
     * call, empty past the split, so the wait counts below hold. */
    auto issue = [&](int it, int kv) {
        long k;
        if (it < iters && key_of(it, &k)) {
            const size_t vec = be_cuda_vec(p, __ldg(table + k / bs), (int)(k % bs), layer, kv, kh);
            const unsigned char *src = (const unsigned char *)(data + vec * D + e0);
            const int stg = it % DV2_STAGES;
#pragma unroll
            for (int part = 0; part < R::PARTS; part++) {
                unsigned char *dst = ring + ((size_t)(stg * R::PARTS + part) * NT + threadIdx.x) * R::PB;
                if (R::PB == 16) cp_async16(dst, src + part * 16);
                else cp_async8(dst, src);
            }
            if (R::I8) cp_async4(sring + stg * NT + threadIdx.x, p.scales + vec);
        }
        cp_async_commit();
    };
    /* The 8 values (and their scale) of group `it`, key k: from the ring, or straight from memory. */
    auto fetch = [&](int it, long k, int kv, float v[EPT], float *vs) {
        if (PIPE) {
            const int stg = it % DV2_STAGES;
            const unsigned char *slot = ring + ((size_t)stg * R::PARTS * NT + threadIdx.x) * R::PB;
            if constexpr (sizeof(T) == 4) {
                const float4 a = *(const float4 *)slot, b = *(const float4 *)(slot + (size_t)NT * 16);
                v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
            } else if constexpr (sizeof(T) == 2) {
                unpack8(*(const uint4 *)slot, T(), v);
            } else {
                unpack8(*(const uint2 *)slot, T(), v);
            }
            *vs = R::I8 ? sring[stg * NT + threadIdx.x] : vec_scale<T>(p, 0);
        } else {
            const size_t vec = be_cuda_vec(p, __ldg(table + k / bs), (int)(k % bs), layer, kv, kh);
            load8(data + vec * D + e0, v);
            *vs = vec_scale<T>(p, vec);
        }
    };

    /* 1. Scores: the group's lanes each dot 8 elements for all G heads, then sum by shuffles. */
    float qr[G][EPT];
#pragma unroll
    for (int a = 0; a < G; a++) {
        const float *qa = q + ((size_t)s * H + (size_t)kh * g + (a < g ? a : 0)) * D + e0;
#pragma unroll
        for (int e = 0; e < EPT; e++) qr[a][e] = a < g ? qa[e] * scale : 0.0f;
    }
    if (PIPE)
        for (int i = 0; i < DV2_STAGES - 1; i++) issue(i, 0);
    for (int it = 0; it < iters; it++) {      /* uniform over the block: every lane shuffles */
        if (PIPE) {
            __syncwarp();                     /* slot (it - 1) % STAGES was read and consumed: refill it */
            issue(it + DV2_STAGES - 1, 0);
            cp_async_wait<DV2_STAGES - 1>(); /* group `it` has landed (this lane's own copies) */
        }
        const int kl = it * NG + grp;
        long k;
        const bool vis = key_of(it, &k);
        float dot[G];
#pragma unroll
        for (int a = 0; a < G; a++) dot[a] = 0.0f;
        if (vis) {
            float kv[EPT], ks;
            fetch(it, k, 0, kv, &ks);
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
    if (PIPE) {                               /* the first V groups fly during the softmax pass */
        __syncwarp();
        for (int i = 0; i < DV2_STAGES - 1; i++) issue(i, 1);
    }
    __syncthreads();

    /* 2. Per head: the split's max, then exponentials in place and their sum (warp a % 4). A head
     * with no visible key in the split keeps max -inf and sum 0, which the merge skips. */
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
    for (int it = 0; it < iters; it++) {
        if (PIPE) {
            __syncwarp();
            issue(it + DV2_STAGES - 1, 1);
            cp_async_wait<DV2_STAGES - 1>();
        }
        const int kl = it * NG + grp;
        long k;
        if (!key_of(it, &k)) continue;        /* no barrier or shuffle below: a lane may skip */
        float v[EPT], vs;
        fetch(it, k, 1, v, &vs);
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
    for (int i = threadIdx.x; i < g * D; i += NT) {
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

/* One launch's arguments, passed down the dtype / head_dim / group dispatch. */
struct dv2_args {
    float *acc, *ml;
    const float *q;
    const be_cuda_pool *p;
    int layer;
    const int32_t *tables;
    int max_blocks;
    const int32_t *start;
    int n, H;
    be_cuda_mask mask;
    int split, nsp;
};

/* Dynamic shared memory of one block: the ring (PIPE) and max(split, D) x G floats (the scores,
 * then the V reduction). */
template <typename T, int D, int G, bool PIPE> static size_t dv2_smem(int split)
{
    return (PIPE ? dv2_ring<T>::bytes : 0) + (size_t)(split > D ? split : D) * G * sizeof(float);
}

template <typename T, int D, int G, bool PIPE> static int launch(const dv2_args &a)
{
    const size_t smem = dv2_smem<T, D, G, PIPE>(a.split);
    /* The 48 KB a launch may use without opting in counts the kernel's static arrays (mx[G] and
     * sum[G]) as well as the dynamic bytes: past it the dynamic limit must be raised first
     * (1024 keys x 16 heads = 64 KB of scores, plus the ring). */
    const size_t static_bytes = 2 * (size_t)G * sizeof(float);
    if (smem + static_bytes > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(decode_v2_kernel<T, D, G, PIPE>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    dim3 grid(a.n, a.p->kv_heads, a.nsp);
    decode_v2_kernel<T, D, G, PIPE><<<grid, NT, smem>>>(a.acc, a.ml, a.q, *a.p, a.layer, a.tables, a.max_blocks, a.start, a.H,
                                                        a.mask, a.split);
    LAUNCH_CHECK();
    return 0;
}

template <typename T, int D, bool PIPE> static int by_g(int g, const dv2_args &a)
{
    if (g <= 1) return launch<T, D, 1, PIPE>(a);
    if (g <= 4) return launch<T, D, 4, PIPE>(a);
    if (g <= 8) return launch<T, D, 8, PIPE>(a);
    return launch<T, D, 16, PIPE>(a);
}

template <typename T, bool PIPE> static int by_d(int g, const dv2_args &a)
{
    switch (a.p->head_dim) {
    case 64: return by_g<T, 64, PIPE>(g, a);
    case 128: return by_g<T, 128, PIPE>(g, a);
    default: return by_g<T, 256, PIPE>(g, a);
    }
}

template <bool PIPE> static int by_dtype(int g, const dv2_args &a)
{
    switch (a.p->dtype) {
    case BE_CUDA_F16: return by_d<__half, PIPE>(g, a);
    case BE_CUDA_BF16: return by_d<__nv_bfloat16, PIPE>(g, a);
    case BE_CUDA_FP8: return by_d<__nv_fp8_e4m3, PIPE>(g, a);
    case BE_CUDA_I8: return by_d<signed char, PIPE>(g, a);
    default: return by_d<float, PIPE>(g, a);
    }
}

extern "C" int be_cuda_decode_split(const be_cuda_ws *ws, int n, int kv_heads, int longest)
{
    return attn_decode_split(ws && ws->num_sms > 0 ? ws->num_sms : 132, n, kv_heads, longest);
}

static int decode_v2(be_cuda_ws *ws, float *out, const float *q, const be_cuda_pool *pool, int layer, const int32_t *tables,
                     int max_blocks, const int32_t *start, int n, int H, be_cuda_mask mask, int split, bool pipe)
{
    if (n <= 0) return 0;
    const int d = pool->head_dim, g = pool->kv_heads > 0 ? H / pool->kv_heads : 0;
    /* The kernel's preconditions, checked here so a violation is an error, not a fault: the
     * 16-byte (8-byte for fp8/int8) row loads and cp.async need the pool's base aligned to 16
     * bytes (every row then is: D x element size is a multiple of 16 at D 64, 128, 256). */
    const char *why = NULL;
    if (g < 1 || g > 16 || g * pool->kv_heads != H) why = "1 to 16 query heads per KV head, H a multiple of the KV heads";
    else if (d != 64 && d != 128 && d != 256) why = "head_dim 64, 128 or 256";
    else if ((uintptr_t)pool->data % 16) why = "the KV pool's base 16-byte aligned";
    else if (pool->dtype == BE_CUDA_I8 && !pool->scales) why = "an int8 pool with its scales";
    else if (max_blocks <= 0 || pool->block_size <= 0) why = "a block table";
    if (why) {
        snprintf(be_cuda_last_error, sizeof be_cuda_last_error, "decode attention v2 takes %s (got head_dim %d, H %d, KV heads %d)",
                 why, d, H, pool->kv_heads);
        return -1;
    }
    int longest = max_blocks * pool->block_size;
    if (split <= 0) split = be_cuda_decode_split(ws, n, pool->kv_heads, longest);
    if (split > 1024) split = 1024;
    int nsp = (longest + split - 1) / split;
    size_t need = (size_t)n * H * nsp * (d + 2);
    if (be_cuda_decode_scratch(ws, need)) return -1;
    dv2_args a = {ws->scratch, ws->scratch + (size_t)n * H * nsp * d, q, pool, layer, tables, max_blocks, start, n, H, mask, split, nsp};
    int rc = pipe ? by_dtype<true>(g, a) : by_dtype<false>(g, a);
    if (rc) return rc;
    return be_cuda_decode_combine(out, a.acc, a.ml, n * H, nsp, d);
}

/* v2 with cp.async pipelining (the default), and without (direct loads), for comparison. */
extern "C" int be_cuda_attn_decode_v2(be_cuda_ws *ws, float *out, const float *q, const be_cuda_pool *pool, int layer,
                                      const int32_t *tables, int max_blocks, const int32_t *start, int n, int H,
                                      be_cuda_mask mask, int split)
{
    return decode_v2(ws, out, q, pool, layer, tables, max_blocks, start, n, H, mask, split, true);
}

extern "C" int be_cuda_attn_decode_v2_direct(be_cuda_ws *ws, float *out, const float *q, const be_cuda_pool *pool, int layer,
                                             const int32_t *tables, int max_blocks, const int32_t *start, int n, int H,
                                             be_cuda_mask mask, int split)
{
    return decode_v2(ws, out, q, pool, layer, tables, max_blocks, start, n, H, mask, split, false);
}

/* The backend's entry: v2 where it applies (pipelined unless asked for the direct version), v1
 * where asked for or where v2 does not apply. */
extern "C" int be_cuda_attn_decode(be_cuda_ws *ws, float *out, const float *q, const be_cuda_pool *pool, int layer,
                                   const int32_t *tables, int max_blocks, const int32_t *start, int n, int H,
                                   be_cuda_mask mask, int split)
{
    int d = pool->head_dim, g = pool->kv_heads > 0 ? H / pool->kv_heads : 0;
    bool v2_fits = g >= 1 && g <= 16 && g * pool->kv_heads == H && (d == 64 || d == 128 || d == 256);
    if (ws->decode_kernel == BE_CUDA_DECODE_V1 || !v2_fits)
        return be_cuda_attn_decode_v1(ws, out, q, pool, layer, tables, max_blocks, start, n, H, mask, split);
    if (ws->decode_kernel == BE_CUDA_DECODE_V2_DIRECT)
        return be_cuda_attn_decode_v2_direct(ws, out, q, pool, layer, tables, max_blocks, start, n, H, mask, split);
    return be_cuda_attn_decode_v2(ws, out, q, pool, layer, tables, max_blocks, start, n, H, mask, split);
}
