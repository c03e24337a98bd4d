/* attn_prefill_tc.cu: prefill attention on tensor cores, FlashAttention-2 style. Reference:
 * be_cpu_attention_paged; attn_prefill.cu computes the same function in fp32 on CUDA cores and stays
 * the backend's default until this kernel has passed the selftest on a device
 * (KVPLAN_CUDA_PREFILL=tc selects it).
 *
 * Grid (64-row query tile, query head, sequence); 4 warps, each owning 16 query rows. Per 64-key
 * tile: K and V are converted from the pool's dtype to bf16 into shared memory (K row-major,
 * V transposed, each row padded by 8 elements so the fragment loads below hit 32 distinct
 * banks); S = Q K^T with mma.sync m16n8k16 (bf16 operands, fp32 accumulators); the online softmax
 * runs on the accumulators in registers (base-2 exponentials, the log2(e) / sqrt(d) factor folded
 * into Q); the probabilities are repacked as bf16 A fragments in place (the accumulator layout of
 * S is the operand layout of P) and O += P V with the same instruction. Tiles past the block's
 * last query position are never loaded (causal), nor tiles wholly before a sliding window.
 *
 * Numerics: Q, K, V and P are rounded to bf16, accumulation is fp32: expect a relative error of a
 * few 1e-3 against the fp32 reference (the selftest's tolerance is 1e-2).
 * Head dims 64 and 128 (the O accumulators take D/2 registers per thread); others use the fp32 kernel. */
#include "attn_mask.cuh"
#include "cuda_common.cuh"
#include "cuda_kernels.h"

#include <math.h>
#include <stdint.h>

#define TC_ROWS 64      /* query rows per block: 4 warps x 16 */
#define TC_KEYS 64      /* keys per tile */
#define TC_PAD 8        /* bf16 elements of padding per shared-memory row */

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);   /* .x (the lower address) = lo */
    return *(uint32_t *)&v;
}

/* D = A (16x16, row) * B (16x8, col) + C, bf16 in, fp32 accumulate. */
__device__ __forceinline__ void mma_bf16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <int D>
__global__ void __launch_bounds__(128)
prefill_tc_kernel(float *out, const float *q, be_cuda_pool p, int layer, const int32_t *tables, int max_blocks,
                  const int32_t *start, const int32_t *len, const int32_t *row0, int H, be_cuda_mask mask)
{
    constexpr int KS = D + TC_PAD;                 /* K row stride (elements) */
    constexpr int VS = TC_KEYS + TC_PAD;           /* V^T row stride */
    extern __shared__ __align__(16) unsigned char smraw[];
    __nv_bfloat16 *Ks = (__nv_bfloat16 *)smraw;                 /* [TC_KEYS][KS] */
    __nv_bfloat16 *Vt = Ks + TC_KEYS * KS;                      /* [D][VS] */
    const int s = blockIdx.z, h = blockIdx.y, i0 = blockIdx.x * TC_ROWS;
    const int n = len[s];
    if (i0 >= n) return;                           /* the whole block is past this chunk */
    const int kh = h / (H / p.kv_heads), bs = p.block_size;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const long st = start[s];
    const long last = st + min(n, i0 + TC_ROWS) - 1;            /* the block's furthest query position */
    const int32_t *table = tables + (size_t)s * max_blocks;
    /* This thread's two rows: r and r + 8 of the warp's 16. */
    const int ja = i0 + warp * 16 + g, jb = ja + 8;
    const bool va = ja < n, vb = jb < n;
    const long pa = st + ja, pb = st + jb;

    /* Q fragments (A operand, k = head dims), pre-scaled by log2(e) / sqrt(d). */
    const float qscale = 1.4426950408889634f * rsqrtf((float)D);
    uint32_t qf[D / 16][4];
    {
        const float *qa = q + ((size_t)(row0[s] + (va ? ja : 0)) * H + h) * D;
        const float *qb = q + ((size_t)(row0[s] + (vb ? jb : 0)) * H + h) * D;
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            int c0 = kk * 16 + 2 * t, c1 = c0 + 8;
            qf[kk][0] = va ? pack_bf16(qa[c0] * qscale, qa[c0 + 1] * qscale) : 0u;
            qf[kk][1] = vb ? pack_bf16(qb[c0] * qscale, qb[c0 + 1] * qscale) : 0u;
            qf[kk][2] = va ? pack_bf16(qa[c1] * qscale, qa[c1 + 1] * qscale) : 0u;
            qf[kk][3] = vb ? pack_bf16(qb[c1] * qscale, qb[c1 + 1] * qscale) : 0u;
        }
    }
    float o[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float ma = -INFINITY, mb = -INFINITY, la = 0.0f, lb = 0.0f;   /* per-thread partial sums */

    /* A sliding layer (without StreamingLLM sinks) sees nothing before its window. */
    long first = 0;
    if (mask.sliding > 0 && mask.window == 0) {
        first = st + i0 - mask.sliding + 1;
        first = first < 0 ? 0 : first / TC_KEYS * TC_KEYS;
    }
    for (long kt = first; kt <= last; kt += TC_KEYS) {
        /* Stage K (row-major) and V (transposed) as bf16; keys past `last` are zeros. */
        for (int i = threadIdx.x; i < TC_KEYS * D; i += blockDim.x) {
            int kr = i / D, e = i % D;
            long k = kt + kr;
            float kv = 0.0f, vv = 0.0f;
            if (k <= last) {
                long blk = table[k / bs];
                kv = be_cuda_load(p, be_cuda_vec(p, blk, (int)(k % bs), layer, 0, kh), e);
                vv = be_cuda_load(p, be_cuda_vec(p, blk, (int)(k % bs), layer, 1, kh), e);
            }
            Ks[kr * KS + e] = __float2bfloat16_rn(kv);
            Vt[e * VS + kr] = __float2bfloat16_rn(vv);
        }
        __syncthreads();
        /* S = Q K^T: 8 n-tiles of 8 keys. */
        float sc[TC_KEYS / 8][4];
#pragma unroll
        for (int nt = 0; nt < TC_KEYS / 8; nt++) {
            sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.0f;
            const __nv_bfloat16 *krow = Ks + (nt * 8 + g) * KS + 2 * t;
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) {
                uint32_t b0 = *(const uint32_t *)(krow + kk * 16), b1 = *(const uint32_t *)(krow + kk * 16 + 8);
                mma_bf16(sc[nt], qf[kk], b0, b1);
            }
        }
        /* Mask, then the online softmax on rows a (c0, c1) and b (c2, c3). */
        float mxa = -INFINITY, mxb = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < TC_KEYS / 8; nt++)
#pragma unroll
            for (int c = 0; c < 2; c++) {
                long k = kt + nt * 8 + 2 * t + c;
                if (!va || !be_cuda_visible(mask, pa, k)) sc[nt][c] = -INFINITY;
                if (!vb || !be_cuda_visible(mask, pb, k)) sc[nt][2 + c] = -INFINITY;
                mxa = fmaxf(mxa, sc[nt][c]);
                mxb = fmaxf(mxb, sc[nt][2 + c]);
            }
#pragma unroll
        for (int off = 1; off < 4; off <<= 1) {      /* the 4 lanes of a quad hold one row */
            mxa = fmaxf(mxa, __shfl_xor_sync(0xffffffffu, mxa, off));
            mxb = fmaxf(mxb, __shfl_xor_sync(0xffffffffu, mxb, off));
        }
        float na = fmaxf(ma, mxa), nb = fmaxf(mb, mxb);
        float ca = na == -INFINITY ? 1.0f : exp2f(ma - na), cb = nb == -INFINITY ? 1.0f : exp2f(mb - nb);
        ma = na;
        mb = nb;
        la *= ca;
        lb *= cb;
#pragma unroll
        for (int i = 0; i < D / 8; i++) { o[i][0] *= ca; o[i][1] *= ca; o[i][2] *= cb; o[i][3] *= cb; }
#pragma unroll
        for (int nt = 0; nt < TC_KEYS / 8; nt++)
#pragma unroll
            for (int c = 0; c < 2; c++) {
                float ea = sc[nt][c] == -INFINITY ? 0.0f : exp2f(sc[nt][c] - na);
                float eb = sc[nt][2 + c] == -INFINITY ? 0.0f : exp2f(sc[nt][2 + c] - nb);
                sc[nt][c] = ea;
                sc[nt][2 + c] = eb;
                la += ea;
                lb += eb;
            }
        /* O += P V: P's accumulator layout is the A operand's, two n-tiles per 16-key step. */
#pragma unroll
        for (int j = 0; j < TC_KEYS / 16; j++) {
            uint32_t pf[4] = {pack_bf16(sc[2 * j][0], sc[2 * j][1]), pack_bf16(sc[2 * j][2], sc[2 * j][3]),
                              pack_bf16(sc[2 * j + 1][0], sc[2 * j + 1][1]), pack_bf16(sc[2 * j + 1][2], sc[2 * j + 1][3])};
#pragma unroll
            for (int nd = 0; nd < D / 8; nd++) {
                const __nv_bfloat16 *vrow = Vt + (nd * 8 + g) * VS + j * 16 + 2 * t;
                mma_bf16(o[nd], pf, *(const uint32_t *)vrow, *(const uint32_t *)(vrow + 8));
            }
        }
        __syncthreads();                          /* before the next tile overwrites K and V */
    }
#pragma unroll
    for (int off = 1; off < 4; off <<= 1) {
        la += __shfl_xor_sync(0xffffffffu, la, off);
        lb += __shfl_xor_sync(0xffffffffu, lb, off);
    }
    float *oa = out + ((size_t)(row0[s] + ja) * H + h) * D, *ob = out + ((size_t)(row0[s] + jb) * H + h) * D;
#pragma unroll
    for (int nd = 0; nd < D / 8; nd++) {
        int c = nd * 8 + 2 * t;
        if (va) { oa[c] = o[nd][0] / la; oa[c + 1] = o[nd][1] / la; }
        if (vb) { ob[c] = o[nd][2] / lb; ob[c + 1] = o[nd][3] / lb; }
    }
}

template <int D>
static int launch_tc(float *out, const float *q, const be_cuda_pool *pool, int layer, const int32_t *tables, int max_blocks,
                     const int32_t *start, const int32_t *len, const int32_t *row0, int n, int max_len, int H, be_cuda_mask mask)
{
    size_t smem = ((size_t)TC_KEYS * (D + TC_PAD) + (size_t)D * (TC_KEYS + TC_PAD)) * sizeof(__nv_bfloat16);
    if (smem > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(prefill_tc_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    dim3 grid((max_len + TC_ROWS - 1) / TC_ROWS, H, n);
    prefill_tc_kernel<D><<<grid, 128, smem>>>(out, q, *pool, layer, tables, max_blocks, start, len, row0, H, mask);
    LAUNCH_CHECK();
    return 0;
}

extern "C" int be_cuda_attn_prefill_tc(float *out, const float *q, const be_cuda_pool *pool, int layer, const int32_t *tables,
                                       int max_blocks, const int32_t *start, const int32_t *len, const int32_t *row0, int n,
                                       int max_len, int H, be_cuda_mask mask)
{
    if (n <= 0 || max_len <= 0) return 0;
    switch (pool->head_dim) {
    case 64: return launch_tc<64>(out, q, pool, layer, tables, max_blocks, start, len, row0, n, max_len, H, mask);
    case 128: return launch_tc<128>(out, q, pool, layer, tables, max_blocks, start, len, row0, n, max_len, H, mask);
    default:
        snprintf(be_cuda_last_error, sizeof be_cuda_last_error, "tensor-core prefill takes head_dim 64 or 128 (got %d)", pool->head_dim);
        return -1;
    }
}
