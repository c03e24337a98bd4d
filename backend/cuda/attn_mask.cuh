/* attn_mask.cuh: which keys a query at position p sees; the device copy of be_cpu_attn_visible. */
#ifndef KVPLAN_ATTN_MASK_CUH
#define KVPLAN_ATTN_MASK_CUH

#include "cuda_kernels.h"

__device__ __forceinline__ bool be_cuda_visible(const be_cuda_mask &m, long p, long k)
{
    if (k > p) return false;
    if (m.sliding > 0 && k <= p - m.sliding) return false;
    if (m.window > 0 && k >= m.sink && k <= p - m.window) return false;
    return true;
}

#endif
