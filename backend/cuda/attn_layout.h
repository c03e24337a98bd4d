/* attn_layout.h: the index arithmetic of the attention kernels that can be checked without a
 * GPU, as plain functions compiled both into the kernels (__host__ __device__ under nvcc) and
 * into the CPU tests (tests/test_cuda_plugin.c, "layout"), so the test exercises the very
 * formulas the kernels use:
 *   - the tensor-core prefill's shared-memory tile (attn_prefill_tc.cu): which 16-byte unit holds
 *     chunk c of key row r (the XOR swizzle), which (row, chunk) a thread stages, and which
 *     (row, chunk) each lane hands to ldmatrix for the K and V operands;
 *   - decode v2's split size (attn_decode_v2.cu).
 * C and C++ alike; no CUDA types. */
#ifndef KVPLAN_ATTN_LAYOUT_H
#define KVPLAN_ATTN_LAYOUT_H

#ifdef __CUDACC__
#define ATTN_FN __host__ __device__ static inline
#else
#define ATTN_FN static inline
#endif

/* Tensor-core prefill tiles: TC_KEYS key rows of D bf16, D/8 chunks of 16 bytes a row. */
#define ATTN_TC_KEYS 64
#define ATTN_TC_THREADS 128

/* The unit (16 bytes) where chunk c of row r lives: the chunk index XOR the row's low 3 bits
 * (attn_prefill_tc.cu derives why this is conflict-free). D >= 64, so a row has >= 8 chunks. */
ATTN_FN int attn_swz(int D, int r, int c)
{
    return r * (D / 8) + (c ^ (r & 7));
}

/* Staging: thread tid's u-th chunk (u < TC_KEYS * D/8 / TC_THREADS) is row idx / (D/8), chunk
 * idx % (D/8), idx = tid + u * TC_THREADS: 8 consecutive threads take 8 consecutive chunks. */
ATTN_FN int attn_stage_row(int D, int tid, int u) { return (tid + u * ATTN_TC_THREADS) / (D / 8); }
ATTN_FN int attn_stage_chunk(int D, int tid, int u) { return (tid + u * ATTN_TC_THREADS) % (D / 8); }

/* ldmatrix.x4 row addresses for the K operand of S = Q K^T: lane l gives key row nt*8 + l%8 and
 * chunk 2kk + l/8 (matrices: dims 16kk..+7, 16kk+8..+15, 16(kk+1).., 16(kk+1)+8..). */
ATTN_FN int attn_k_row(int lane, int nt) { return nt * 8 + (lane & 7); }
ATTN_FN int attn_k_chunk(int lane, int kk) { return 2 * kk + (lane >> 3); }

/* ldmatrix.x4.trans row addresses for the V operand of O = P V: lane l gives key row
 * 16j + 8((l/8) % 2) + l%8 and chunk nd + l/16 (matrices: keys 16j..+7 and 16j+8..+15 of dims
 * 8nd..+7, then the same of dims 8(nd+1)..+7). */
ATTN_FN int attn_v_row(int lane, int j) { return 16 * j + ((lane >> 3) & 1) * 8 + (lane & 7); }
ATTN_FN int attn_v_chunk(int lane, int nd) { return nd + (lane >> 4); }

/* Decode v2's split (keys per block) for n sequences, kv_heads KV heads, the longest sequence's
 * table covering `longest` keys, on a device of `sms` multiprocessors: enough (sequence, KV head,
 * split) blocks for about two per multiprocessor, 128 to 1024 keys a split (first a multiple of
 * 64), then evened out over the same number of splits: 4112 keys as five splits of 823, not four
 * of 1024 and one of 16 (a nearly idle block per sequence and KV head). The evened size is not
 * rounded: rounding it up to 16 or 64 brings small last splits back (1436 keys in 8 splits of 192
 * leave 92). The kernel takes any split size. */
ATTN_FN int attn_decode_split(long sms, int n, int kv_heads, int longest)
{
    long blocks = (long)(n > 0 ? n : 1) * (kv_heads > 0 ? kv_heads : 1);
    long want = (2 * (sms > 0 ? sms : 132) + blocks - 1) / blocks;   /* splits per sequence */
    long L = longest > 0 ? longest : 1;
    if (want < 1) want = 1;
    long split = (L + want - 1) / want;
    split = (split + 63) / 64 * 64;
    if (split < 128) split = 128;       /* shorter splits only add merge work */
    if (split > 1024) split = 1024;     /* 1024 keys x 16 heads of scores: 64 KB of shared memory */
    long nsp = (L + split - 1) / split;
    long even = (L + nsp - 1) / nsp;
    if (even >= 128 && even < split) split = even;
    return (int)split;
}

#endif
