/* attn_prefill_tc.cu: prefill attention on tensor cores, FlashAttention-2 style. Reference:
 * be_cpu_attention_paged; attn_prefill.cu computes the same function in fp32 on CUDA cores and stays
 * the backend's default until this kernel has passed the selftest on a device
 * (KVPLAN_CUDA_PREFILL=tc selects it).
 *
 * Grid (64-row query tile, query head, sequence); 4 warps, each owning 16 query rows, their Q in
 * registers as mma A fragments (pre-scaled by log2(e)/sqrt(d), so the softmax uses exp2).
 * Per 64-key tile:
 *   - K and V land in shared memory as bf16, both row-major [key][d], in two stages (double
 *     buffering): while the warps compute on tile i, the copies of tile i+1 are in flight. A bf16
 *     pool is copied with cp.async (16 bytes a lane, coalesced, no registers, zero-filled past
 *     the last key); other dtypes are loaded with one vector load per 8 elements, dequantised,
 *     rounded to bf16 and stored as 16 bytes (the copy is not asynchronous there, but it is
 *     issued for tile i+1 before tile i is computed).
 *   - S = Q K^T with mma.sync m16n8k16 (bf16 operands, fp32 accumulators), the K fragments read
 *     with ldmatrix.x4 (two k-steps of one 8-key n-tile per instruction);
 *   - masking (only on tiles that need it) and the online softmax on the accumulators in registers;
 *   - P repacked as bf16 A fragments in place (the accumulator layout of S is the A layout of P)
 *     and O += P V, the V fragments read with ldmatrix.x4.trans from the row-major V tile (the
 *     transpose the B operand needs happens in the load; nothing is stored transposed).
 * Tiles past the block's last query position are never loaded (causal) and a warp skips tiles
 * past its own last row; tiles wholly before a sliding layer's window are never loaded.
 *
 * Shared-memory swizzle (why and how). A tile row is D bf16 = D/8 chunks of 16 bytes; D is 64 or
 * 128, so a row is 128 or 256 bytes, a multiple of the 128 bytes that the 32 four-byte banks
 * span. Unswizzled, chunk c of every row would sit in the same four banks, and one ldmatrix
 * phase (8 lanes giving the 16-byte rows of one 8x8 matrix: 8 consecutive keys, the same chunk)
 * would hit those four banks 8 times: an 8-way conflict. The chunk is therefore stored at
 * physical position c ^ (r & 7) within its row r. For 8 consecutive keys r = r0..r0+7 (r0 a
 * multiple of 8, as in every ldmatrix here), r & 7 takes each value 0..7 once, so c ^ (r & 7)
 * takes 8 distinct values that agree with c above bit 2: 8 distinct chunks of one aligned group
 * of 8, i.e. 8 distinct 16-byte bank groups (physical chunk mod 8 decides the banks, since rows
 * are multiples of 128 bytes): conflict-free. The stores are conflict-free too: 8 consecutive
 * lanes write chunks c0..c0+7 (c0 a multiple of 8) of one row, which the XOR permutes within
 * the group. The XOR touches only the low 3 bits of c, so a chunk never leaves its row
 * (D/8 >= 8 chunks per row).
 *
 * Fragments (PTX ISA, mma.m16n8k16 with .bf16; g = lane/4, t = lane%4):
 *   A (16x16, row):  a0 = (row g, k 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..), a3 = (g+8, 2t+8..)
 *   B (16x8, col):   b0 = (k 2t..2t+1, col g), b1 = (k 2t+8..2t+9, col g)
 *   C (16x8):        c0, c1 = (row g, cols 2t, 2t+1); c2, c3 = (row g+8, cols 2t, 2t+1)
 * For S = Q K^T, B[k = dim][n = key] = K[key][dim]: b0 is 2 consecutive dims of key g, which
 * ldmatrix (no .trans) gives from the 8x8 block (8 keys, 8 dims). For O = P V, B[k = key][n =
 * dim] = V[key][dim]: b0 is dim g of keys 2t, 2t+1, which ldmatrix.trans gives from the same
 * kind of block of the row-major V tile.
 *
 * Numerics: Q, K, V and P are rounded to bf16, accumulation is fp32 (the selftest's reference and
 * tolerance are derived in selftest.cu). Head dims 64 and 128 (the O accumulators take D/2
 * registers per thread); others use the fp32 kernel. */
#include "attn_layout.h"
#include "attn_mask.cuh"
#include "cuda_async.cuh"
#include "cuda_common.cuh"
#include "cuda_kernels.h"
#include "kv_vec.cuh"

#include <math.h>
#include <stdint.h>
#include <type_traits>

#define TC_ROWS 64      /* query rows per block: 4 warps x 16 */
#define TC_KEYS ATTN_TC_KEYS          /* keys per tile (64) */
#define TC_THREADS ATTN_TC_THREADS    /* 128 */
#define TC_STAGES 2     /* shared-memory stages (double buffering) */

static_assert(TC_ROWS == 16 * (TC_THREADS / 32), "one warp per 16 query rows");
static_assert(TC_KEYS % 16 == 0, "P V takes 16 keys per mma k-step");

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

/* The 16-byte unit where chunk c of tile row r lives (see the swizzle above; attn_layout.h, whose
 * formulas tests/test_cuda_plugin.c checks on the CPU). */
template <int D> __device__ __forceinline__ int swz(int r, int c)
{
    return attn_swz(D, r, c);
}

/* Issues the copies of keys [kt, kt + TC_KEYS) into one stage: K and V rows as bf16, swizzled;
 * keys past `last` are zeros (their scores are masked; their zero V rows meet P = 0, where stale
 * shared memory could hold a NaN and 0 * NaN would poison O). Each thread takes D/16 chunks of K
 * and of V: 8 consecutive lanes cover 128 contiguous bytes of one bf16 row. */
template <typename T, int D>
__device__ __forceinline__ void stage_tile(__nv_bfloat16 *Kb, __nv_bfloat16 *Vb, const be_cuda_pool &p, int layer, int kh,
                                           const int32_t *table, long kt, long last)
{
    constexpr int CPR = D / 8;                          /* 16-byte chunks per bf16 row */
    constexpr int PER = TC_KEYS * CPR / TC_THREADS;     /* chunks per thread, K and V each */
    static_assert(TC_KEYS * CPR % TC_THREADS == 0, "whole chunks per thread");
    const T *data = (const T *)p.data;
    const int bs = p.block_size;
#pragma unroll
    for (int u = 0; u < PER; u++) {
        const int r = attn_stage_row(D, threadIdx.x, u), c = attn_stage_chunk(D, threadIdx.x, u);
        const long k = kt + r;
        uint4 *kd = (uint4 *)Kb + swz<D>(r, c), *vd = (uint4 *)Vb + swz<D>(r, c);
        if (std::is_same<T, __nv_bfloat16>::value) {
            if (k <= last) {
                long blk = __ldg(table + k / bs);
                size_t vk = be_cuda_vec(p, blk, (int)(k % bs), layer, 0, kh), vv = be_cuda_vec(p, blk, (int)(k % bs), layer, 1, kh);
                cp_async16(kd, data + vk * D + c * 8);
                cp_async16(vd, data + vv * D + c * 8);
            } else {
                cp_async16(kd, p.data, 0);              /* zero-fill: nothing is read */
                cp_async16(vd, p.data, 0);
            }
        } else {
            uint4 kw = make_uint4(0, 0, 0, 0), vw = kw;
            if (k <= last) {
                long blk = __ldg(table + k / bs);
                size_t vk = be_cuda_vec(p, blk, (int)(k % bs), layer, 0, kh), vv = be_cuda_vec(p, blk, (int)(k % bs), layer, 1, kh);
                float a[KV_EPT], b[KV_EPT];
                load8(data + vk * D + c * 8, a);
                load8(data + vv * D + c * 8, b);
                const float sk = vec_scale<T>(p, vk), sv = vec_scale<T>(p, vv);
                kw = make_uint4(pack_bf16(a[0] * sk, a[1] * sk), pack_bf16(a[2] * sk, a[3] * sk), pack_bf16(a[4] * sk, a[5] * sk),
                                pack_bf16(a[6] * sk, a[7] * sk));
                vw = make_uint4(pack_bf16(b[0] * sv, b[1] * sv), pack_bf16(b[2] * sv, b[3] * sv), pack_bf16(b[4] * sv, b[5] * sv),
                                pack_bf16(b[6] * sv, b[7] * sv));
            }
            *kd = kw;
            *vd = vw;
        }
    }
}

template <typename T, int D>
__global__ void __launch_bounds__(TC_THREADS)
prefill_tc_kernel(float *out, const float *q, be_cuda_pool p, int layer, const int32_t *tables, int max_blocks,
                  const int32_t *start, const int32_t *len, const int32_t *row0, int H, be_cuda_mask mask)
{
    static_assert(D == 64 || D == 128, "head_dim 64 or 128: swizzle needs >= 8 chunks a row, O takes D/2 registers");
    static_assert((D / 16) % 2 == 0 && (D / 8) % 2 == 0, "ldmatrix.x4 takes two k-steps / two n-tiles");
    constexpr int TILE = TC_KEYS * D;                   /* bf16 elements of one K (or V) tile */
    extern __shared__ __align__(128) unsigned char smraw[];
    __nv_bfloat16 *const buf = (__nv_bfloat16 *)smraw;  /* [stage][K, V][TC_KEYS][D], swizzled */
    const int s = blockIdx.z, h = blockIdx.y, i0 = blockIdx.x * TC_ROWS;
    const int n = len[s];
    if (i0 >= n) return;                           /* the whole block is past this chunk (before any copy) */
    const int kh = h / (H / p.kv_heads);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const long st = start[s];
    const long last = st + min(n, i0 + TC_ROWS) - 1;            /* the block's furthest query position */
    const int32_t *table = tables + (size_t)s * max_blocks;
    /* This thread's two rows: r and r + 8 of the warp's 16. */
    const int ja = i0 + warp * 16 + g, jb = ja + 8;
    const bool va = ja < n, vb = jb < n;
    const long pa = st + ja, pb = st + jb;
    /* The warp's rows: live if any is in the chunk; positions wfirst..wlast; full if all 16 are. */
    const int wr0 = i0 + warp * 16;
    const bool wlive = wr0 < n, wfull = wr0 + 16 <= n;
    const long wfirst = st + wr0, wlast = st + min(n, wr0 + 16) - 1;
    const bool plain = mask.sliding == 0 && mask.window == 0;

    /* Q fragments (A operand, k = head dims), pre-scaled by log2(e) / sqrt(d). */
    const float qscale = 1.4426950408889634f * rsqrtf((float)D);
    uint32_t qf[D / 16][4];
    {
        const float *qa = q + ((size_t)(row0[s] + (va ? ja : 0)) * H + h) * D;
        const float *qb = q + ((size_t)(row0[s] + (vb ? jb : 0)) * H + h) * D;
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            const int c0 = kk * 16 + 2 * t, c1 = c0 + 8;
            const float2 a0 = *(const float2 *)(qa + c0), a1 = *(const float2 *)(qa + c1);
            const float2 b0 = *(const float2 *)(qb + c0), b1 = *(const float2 *)(qb + c1);
            qf[kk][0] = va ? pack_bf16(a0.x * qscale, a0.y * qscale) : 0u;
            qf[kk][1] = vb ? pack_bf16(b0.x * qscale, b0.y * qscale) : 0u;
            qf[kk][2] = va ? pack_bf16(a1.x * qscale, a1.y * qscale) : 0u;
            qf[kk][3] = vb ? pack_bf16(b1.x * qscale, b1.y * qscale) : 0u;
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
    int stage = 0;
    stage_tile<T, D>(buf, buf + TILE, p, layer, kh, table, first, last);
    cp_async_commit();
    for (long kt = first; kt <= last; kt += TC_KEYS, stage ^= 1) {
        /* Tile i+1 into the other stage (its readers finished at the barrier ending tile i-1). */
        if (kt + TC_KEYS <= last)
            stage_tile<T, D>(buf + (stage ^ 1) * 2 * TILE, buf + (stage ^ 1) * 2 * TILE + TILE, p, layer, kh, table, kt + TC_KEYS, last);
        cp_async_commit();                         /* always one group per tile, maybe empty */
        cp_async_wait<1>();                        /* this thread's copies of tile i have landed */
        __syncthreads();                           /* ... and every thread's, and the plain stores */
        const __nv_bfloat16 *Ks = buf + stage * 2 * TILE, *Vs = Ks + TILE;
        if (wlive && kt <= wlast) {                /* warp-uniform: a tile past the warp's rows adds nothing */
            /* S = Q K^T: 8 n-tiles of 8 keys; one ldmatrix.x4 gives two k-steps of B. Lane l
             * addresses row nt*8 + l%8 (a key), chunk 2kk + l/8 (dims 16kk + 8(l/8) ..). */
            float sc[TC_KEYS / 8][4];
#pragma unroll
            for (int nt = 0; nt < TC_KEYS / 8; nt++) {
                sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.0f;
#pragma unroll
                for (int kk = 0; kk < D / 16; kk += 2) {
                    const int r = attn_k_row(lane, nt), c = attn_k_chunk(lane, kk);
                    uint32_t b[4];
                    ldmatrix_x4(b, (const uint4 *)Ks + swz<D>(r, c));
                    mma_bf16(sc[nt], qf[kk], b[0], b[1]);
                    mma_bf16(sc[nt], qf[kk + 1], b[2], b[3]);
                }
            }
            /* Mask, unless every key of the tile is visible to every row of the warp (no
             * window, all 16 rows in the chunk, the tile's last key at or before the first row). */
            const bool need_mask = !(plain && wfull && kt + TC_KEYS - 1 <= wfirst);
            float mxa = -INFINITY, mxb = -INFINITY;
#pragma unroll
            for (int nt = 0; nt < TC_KEYS / 8; nt++)
#pragma unroll
                for (int c = 0; c < 2; c++) {
                    if (need_mask) {
                        const long k = kt + nt * 8 + 2 * t + c;
                        if (!va || !be_cuda_visible(mask, pa, k)) sc[nt][c] = -INFINITY;
                        if (!vb || !be_cuda_visible(mask, pb, k)) sc[nt][2 + c] = -INFINITY;
                    }
                    mxa = fmaxf(mxa, sc[nt][c]);
                    mxb = fmaxf(mxb, sc[nt][2 + c]);
                }
#pragma unroll
            for (int off = 1; off < 4; off <<= 1) {      /* the 4 lanes of a quad hold one row */
                mxa = fmaxf(mxa, __shfl_xor_sync(0xffffffffu, mxa, off));
                mxb = fmaxf(mxb, __shfl_xor_sync(0xffffffffu, mxb, off));
            }
            /* A row with nothing visible yet keeps max -inf: its factors are 1 and its weights 0
             * (never exp2(-inf - -inf) = NaN). */
            const float na = fmaxf(ma, mxa), nb = fmaxf(mb, mxb);
            const float ca = na == -INFINITY ? 1.0f : exp2f(ma - na), cb = nb == -INFINITY ? 1.0f : exp2f(mb - nb);
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
                    const float ea = sc[nt][c] == -INFINITY ? 0.0f : exp2f(sc[nt][c] - na);
                    const float eb = sc[nt][2 + c] == -INFINITY ? 0.0f : exp2f(sc[nt][2 + c] - nb);
                    sc[nt][c] = ea;
                    sc[nt][2 + c] = eb;
                    la += ea;
                    lb += eb;
                }
            /* O += P V: P's accumulator layout is the A operand's, two n-tiles per 16-key step.
             * One ldmatrix.x4.trans gives B for two dim n-tiles: lane l addresses key row
             * 16j + 8((l/8)%2) + l%8, chunk nd + l/16. */
#pragma unroll
            for (int j = 0; j < TC_KEYS / 16; j++) {
                const uint32_t pf[4] = {pack_bf16(sc[2 * j][0], sc[2 * j][1]), pack_bf16(sc[2 * j][2], sc[2 * j][3]),
                                        pack_bf16(sc[2 * j + 1][0], sc[2 * j + 1][1]),
                                        pack_bf16(sc[2 * j + 1][2], sc[2 * j + 1][3])};
#pragma unroll
                for (int nd = 0; nd < D / 8; nd += 2) {
                    const int r = attn_v_row(lane, j), c = attn_v_chunk(lane, nd);
                    uint32_t b[4];
                    ldmatrix_x4_trans(b, (const uint4 *)Vs + swz<D>(r, c));
                    mma_bf16(o[nd], pf, b[0], b[1]);
                    mma_bf16(o[nd + 1], pf, b[2], b[3]);
                }
            }
        }
        __syncthreads();                          /* every warp is done with this stage before it is refilled */
    }
#pragma unroll
    for (int off = 1; off < 4; off <<= 1) {
        la += __shfl_xor_sync(0xffffffffu, la, off);
        lb += __shfl_xor_sync(0xffffffffu, lb, off);
    }
    /* Every written row sees at least its own position, so its sum is > 0. */
    float *oa = out + ((size_t)(row0[s] + ja) * H + h) * D, *ob = out + ((size_t)(row0[s] + jb) * H + h) * D;
#pragma unroll
    for (int nd = 0; nd < D / 8; nd++) {
        const int c = nd * 8 + 2 * t;
        if (va) *(float2 *)(oa + c) = make_float2(o[nd][0] / la, o[nd][1] / la);
        if (vb) *(float2 *)(ob + c) = make_float2(o[nd][2] / lb, o[nd][3] / lb);
    }
}

/* Shared memory of one block: two stages of a K and a V tile in bf16 (32 KiB at d 64, 64 KiB at
 * d 128, which needs the opt-in past 48 KiB). */
template <int D> static constexpr size_t tc_smem() { return (size_t)TC_STAGES * 2 * TC_KEYS * D * sizeof(__nv_bfloat16); }

template <typename T, int D>
static int launch_tc(float *out, const float *q, const be_cuda_pool *pool, int layer, const int32_t *tables, int max_blocks,
                     const int32_t *start, const int32_t *len, const int32_t *row0, int n, int max_len, int H, be_cuda_mask mask)
{
    const size_t smem = tc_smem<D>();
    if (smem > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(prefill_tc_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    dim3 grid((max_len + TC_ROWS - 1) / TC_ROWS, H, n);
    prefill_tc_kernel<T, D><<<grid, TC_THREADS, smem>>>(out, q, *pool, layer, tables, max_blocks, start, len, row0, H, mask);
    LAUNCH_CHECK();
    return 0;
}

template <int D>
static int by_dtype(float *out, const float *q, const be_cuda_pool *pool, int layer, const int32_t *tables, int max_blocks,
                    const int32_t *start, const int32_t *len, const int32_t *row0, int n, int max_len, int H, be_cuda_mask mask)
{
    switch (pool->dtype) {
    case BE_CUDA_F16: return launch_tc<__half, D>(out, q, pool, layer, tables, max_blocks, start, len, row0, n, max_len, H, mask);
    case BE_CUDA_BF16: return launch_tc<__nv_bfloat16, D>(out, q, pool, layer, tables, max_blocks, start, len, row0, n, max_len, H, mask);
    case BE_CUDA_FP8: return launch_tc<__nv_fp8_e4m3, D>(out, q, pool, layer, tables, max_blocks, start, len, row0, n, max_len, H, mask);
    case BE_CUDA_I8: return launch_tc<signed char, D>(out, q, pool, layer, tables, max_blocks, start, len, row0, n, max_len, H, mask);
    default: return launch_tc<float, D>(out, q, pool, layer, tables, max_blocks, start, len, row0, n, max_len, H, mask);
    }
}

extern "C" int be_cuda_attn_prefill_tc(float *out, const float *q, const be_cuda_pool *pool, int layer, const int32_t *tables,
                                       int max_blocks, const int32_t *start, const int32_t *len, const int32_t *row0, int n,
                                       int max_len, int H, be_cuda_mask mask)
{
    if (n <= 0 || max_len <= 0) return 0;
    /* The kernel's preconditions, checked here so a violation is an error, not a fault: 16-byte
     * vector loads and cp.async need the pool's base 16-byte aligned (its rows then are: D x
     * element size is a multiple of 16 for every dtype at D 64 and 128); Q and O are read and
     * written two floats at a time. */
    const char *why = NULL;
    if (pool->head_dim != 64 && pool->head_dim != 128) why = "head_dim must be 64 or 128";
    else if (pool->kv_heads <= 0 || H % pool->kv_heads) why = "query heads must be a multiple of the KV heads";
    else if ((uintptr_t)pool->data % 16) why = "the KV pool's base must be 16-byte aligned";
    else if ((uintptr_t)q % 8 || (uintptr_t)out % 8) why = "q and out must be 8-byte aligned";
    else if (pool->dtype == BE_CUDA_I8 && !pool->scales) why = "an int8 pool needs its scales";
    if (why) {
        snprintf(be_cuda_last_error, sizeof be_cuda_last_error, "tensor-core prefill: %s (head_dim %d, H %d, KV heads %d)", why,
                 pool->head_dim, H, pool->kv_heads);
        return -1;
    }
    if (pool->head_dim == 64) return by_dtype<64>(out, q, pool, layer, tables, max_blocks, start, len, row0, n, max_len, H, mask);
    return by_dtype<128>(out, q, pool, layer, tables, max_blocks, start, len, row0, n, max_len, H, mask);
}
