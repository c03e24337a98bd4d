/* cuda_common.cuh: what every CUDA file shares: checked calls that record the statement,
 * function, file and line (llm.c's cudaCheck, ggml's CUDA_CHECK), and the KV pool's element
 * loads and stores per dtype (the same layout as backend/cpu/cpu_ops.h). */
#ifndef KVPLAN_CUDA_COMMON_CUH
#define KVPLAN_CUDA_COMMON_CUH

#include <cstdio>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

/* Records the first failure's text; launchers return -1 and the caller reports it. */
extern "C" char be_cuda_last_error[512];

#define CUDA_CHECK(call)                                                                           \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            snprintf(be_cuda_last_error, sizeof be_cuda_last_error, "%s: %s (%s in %s at %s:%d)",        \
                     cudaGetErrorName(e_), cudaGetErrorString(e_), #call, __func__, __FILE__, __LINE__); \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

/* After every launch: the launch's own error, so a bad configuration is caught where it is made. */
#define LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

/* KV element formats: 0 fp32, 1 fp16, 2 bf16, 3 fp8 (E4M3, one tensor scale), 4 int8 (a scale per
 * head vector). The codes follow scn_dtype's order less int4. */
enum { BE_CUDA_F32 = 0, BE_CUDA_F16 = 1, BE_CUDA_BF16 = 2, BE_CUDA_FP8 = 3, BE_CUDA_I8 = 4 };

struct be_cuda_pool {
    int dtype;
    int block_size, layers, kv_heads, head_dim;
    void *data;
    float *scales;        /* int8 only */
    float fp8_scale;
};

__device__ __forceinline__ size_t be_cuda_vec(const be_cuda_pool &p, long block, int slot, int layer, int kv, int head)
{
    return ((((size_t)block * p.layers + layer) * 2 + kv) * p.block_size + slot) * p.kv_heads + head;
}

__device__ __forceinline__ float be_cuda_load(const be_cuda_pool &p, size_t vec, int i)
{
    size_t e = vec * p.head_dim + i;
    switch (p.dtype) {
    case BE_CUDA_F16: return __half2float(((const __half *)p.data)[e]);
    case BE_CUDA_BF16: return __bfloat162float(((const __nv_bfloat16 *)p.data)[e]);
    case BE_CUDA_FP8: return float(((const __nv_fp8_e4m3 *)p.data)[e]) * p.fp8_scale;
    case BE_CUDA_I8: return float(((const signed char *)p.data)[e]) * p.scales[vec];
    default: return ((const float *)p.data)[e];
    }
}

#endif
