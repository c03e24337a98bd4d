/* gemm.cu: GEMMs through cuBLAS in bf16 with fp32 accumulation: out[M x N] (fp32) =
 * x[M x K] (fp32, rounded to bf16) * w[K x N] (bf16). Row-major through column-major cuBLAS:
 * C^T = W^T X^T. Reference: be_cpu_matmul on bf16-rounded operands. */
#include <cublas_v2.h>

#include "cuda_common.cuh"
#include "cuda_kernels.h"

static cublasHandle_t handle;

__global__ void to_bf16_kernel(__nv_bfloat16 *out, const float *x, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16_rn(x[i]);
}

extern "C" int be_cuda_gemm(float *out, const float *x, const void *w_bf16, int M, int N, int K, int accumulate,
                        void *scratch_bf16)
{
    if (!handle && cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
        snprintf(be_cuda_last_error, sizeof be_cuda_last_error, "cublasCreate failed");
        return -1;
    }
    size_t n = (size_t)M * K;
    unsigned blocks = (unsigned)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
    to_bf16_kernel<<<blocks ? blocks : 1, 256>>>((__nv_bfloat16 *)scratch_bf16, x, n);
    LAUNCH_CHECK();
    float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    cublasStatus_t st = cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, w_bf16, CUDA_R_16BF, N, scratch_bf16,
                                     CUDA_R_16BF, K, &beta, out, CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
        snprintf(be_cuda_last_error, sizeof be_cuda_last_error, "cublasGemmEx failed with status %d (M %d, N %d, K %d)", (int)st, M, N, K);
        return -1;
    }
    return 0;
}
