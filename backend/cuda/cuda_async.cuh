/* cuda_async.cuh: the sm_80+ instructions the attention kernels pipeline with: cp.async
 * (global -> shared copies that complete in the background, in commit groups) and ldmatrix
 * (8x8 b16 matrices from shared memory into mma.sync fragments). Thin wrappers over inline PTX
 * (PTX ISA: "cp.async", "cp.async.commit_group", "cp.async.wait_group", "ldmatrix"); this tree
 * builds for sm_90 only, where all of them exist.
 *
 * Visibility rule the kernels rely on: cp.async.wait_group makes the waited copies of the
 * executing thread complete and visible to that thread; other threads see them only after a
 * barrier (__syncthreads) that follows the wait. */
#ifndef KVPLAN_CUDA_ASYNC_CUH
#define KVPLAN_CUDA_ASYNC_CUH

#include <stdint.h>

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16 bytes, L2 only (.cg: streamed K/V is not reused through L1). src_bytes 0 writes 16 zero
 * bytes and reads nothing (the zero-fill form): how tiles past the last key are cleared. Both
 * addresses must be 16-byte aligned. */
__device__ __forceinline__ void cp_async16(void *dst, const void *src, int src_bytes = 16)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes) : "memory");
}

/* 8 and 4 bytes (fp8/int8 rows, int8 scales): .ca is the only cache mode for sizes under 16. */
__device__ __forceinline__ void cp_async8(void *dst, const void *src)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async4(void *dst, const void *src)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

/* Waits until at most N of this thread's committed groups are still in flight. */
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

/* Four 8x8 b16 matrices; lanes 8m..8m+7 give the row addresses of matrix m (16 bytes each,
 * 16-byte aligned). Lane l receives, of each matrix, row l/4, elements 2(l%4) and 2(l%4)+1
 * (the first in the low half); with .trans, of the transposed matrix: rows 2(l%4) and 2(l%4)+1
 * of column l/4. */
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(row))
                 : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(row))
                 : "memory");
}

#endif
