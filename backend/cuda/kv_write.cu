/* kv_write.cu: writes new K and V vectors into the paged pool, converting to the pool's dtype
 * (int8 computes a scale per head vector). Reference: be_cpu_kv_write in backend/cpu/cpu_ops.c. */
#include "cuda_common.cuh"
#include "cuda_kernels.h"

/* One block per (token, kv head, K or V); threads over the head's elements. */
__global__ void kv_write_kernel(be_cuda_pool p, int layer, const float *k, const float *v, int stride,
                                const int32_t *blocks, const int32_t *slots)
{
    int t = blockIdx.x, head = blockIdx.y, kv = blockIdx.z, d = p.head_dim;
    const float *src = (kv ? v : k) + (size_t)t * stride + (size_t)head * d;
    size_t vec = be_cuda_vec(p, blocks[t], slots[t], layer, kv, head);
    float scale = 1.0f;
    if (p.dtype == BE_CUDA_I8) {
        __shared__ float amax;
        if (threadIdx.x == 0) amax = 0;
        __syncthreads();
        float m = 0;
        for (int i = threadIdx.x; i < d; i += blockDim.x) m = fmaxf(m, fabsf(src[i]));
        atomicMax((int *)&amax, __float_as_int(m));   /* non-negative floats order as ints */
        __syncthreads();
        scale = amax > 0 ? amax / 127.0f : 1.0f;
        if (threadIdx.x == 0) p.scales[vec] = scale;
    }
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        size_t e = vec * d + i;
        float x = src[i];
        switch (p.dtype) {
        case BE_CUDA_F16: ((__half *)p.data)[e] = __float2half_rn(x); break;
        case BE_CUDA_BF16: ((__nv_bfloat16 *)p.data)[e] = __float2bfloat16_rn(x); break;
        case BE_CUDA_FP8: ((__nv_fp8_e4m3 *)p.data)[e] = __nv_fp8_e4m3(x / p.fp8_scale); break;
        case BE_CUDA_I8: ((signed char *)p.data)[e] = (signed char)__float2int_rn(x / scale); break;
        default: ((float *)p.data)[e] = x; break;
        }
    }
}

extern "C" int be_cuda_kv_write(const be_cuda_pool *pool, int layer, const float *k, const float *v, int stride,
                            const int32_t *blocks, const int32_t *slots, int T)
{
    if (T <= 0) return 0;
    dim3 grid(T, pool->kv_heads, 2);
    kv_write_kernel<<<grid, 128>>>(*pool, layer, k, v, stride, blocks, slots);
    LAUNCH_CHECK();
    return 0;
}
