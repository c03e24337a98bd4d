/* elementwise.cu: RMSNorm, RoPE, SwiGLU, embedding gather and argmax. References:
 * be_cpu_rmsnorm, be_cpu_rope, be_cpu_swiglu, be_cpu_argmax in backend/cpu/cpu_ops.c. */
#include "cuda_common.cuh"
#include "cuda_kernels.h"

#include <math.h>

extern "C" char be_cuda_last_error[512] = "";

/* One block per row: sum of squares by block reduction, then scale. */
__global__ void rmsnorm_kernel(float *out, const float *x, const float *w, int h, float eps)
{
    __shared__ float part[32];
    const float *r = x + (size_t)blockIdx.x * h;
    float ss = 0;
    for (int i = threadIdx.x; i < h; i += blockDim.x) ss += r[i] * r[i];
    for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(0xffffffff, ss, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = ss;
    __syncthreads();
    if (threadIdx.x < 32) {
        ss = threadIdx.x < (blockDim.x + 31) / 32 ? part[threadIdx.x] : 0;
        for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(0xffffffff, ss, o);
        if (threadIdx.x == 0) part[0] = ss;
    }
    __syncthreads();
    float inv = rsqrtf(part[0] / h + eps);
    for (int i = threadIdx.x; i < h; i += blockDim.x) out[(size_t)blockIdx.x * h + i] = r[i] * inv * w[i];
}

extern "C" int be_cuda_rmsnorm(float *out, const float *x, const float *w, int T, int h, float eps)
{
    if (T <= 0) return 0;
    rmsnorm_kernel<<<T, 256>>>(out, x, w, h, eps);
    LAUNCH_CHECK();
    return 0;
}

/* One thread per (row, head, pair i < d/2): rotate (x_i, x_{i+d/2}) by pos * theta^(-2i/d). */
__global__ void rope_kernel(float *x, int T, int heads, int d, int stride, const int32_t *pos, float theta)
{
    int half = d / 2;
    long id = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (long)T * heads * half) return;
    int i = (int)(id % half), hd = (int)((id / half) % heads), t = (int)(id / half / heads);
    double freq = pow((double)theta, -2.0 * i / d), ang = pos[t] * freq;
    float c = (float)cos(ang), s = (float)sin(ang);
    float *v = x + (size_t)t * stride + (size_t)hd * d;
    float a = v[i], b = v[i + half];
    v[i] = a * c - b * s;
    v[i + half] = b * c + a * s;
}

extern "C" int be_cuda_rope(float *x, int T, int heads, int d, int row_stride, const int32_t *pos, float theta)
{
    long n = (long)T * heads * (d / 2);
    if (n <= 0) return 0;
    rope_kernel<<<(unsigned)((n + 255) / 256), 256>>>(x, T, heads, d, row_stride, pos, theta);
    LAUNCH_CHECK();
    return 0;
}

__global__ void swiglu_kernel(float *out, const float *gu, int T, int inter)
{
    long id = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (long)T * inter) return;
    int t = (int)(id / inter), i = (int)(id % inter);
    float g = gu[(size_t)t * 2 * inter + i], u = gu[(size_t)t * 2 * inter + inter + i];
    out[id] = g / (1.0f + expf(-g)) * u;
}

extern "C" int be_cuda_swiglu(float *out, const float *gu, int T, int inter)
{
    long n = (long)T * inter;
    if (n <= 0) return 0;
    swiglu_kernel<<<(unsigned)((n + 255) / 256), 256>>>(out, gu, T, inter);
    LAUNCH_CHECK();
    return 0;
}

__global__ void gather_kernel(float *out, const float *table, const int32_t *ids, int h)
{
    const float *src = table + (size_t)ids[blockIdx.x] * h;
    for (int i = threadIdx.x; i < h; i += blockDim.x) out[(size_t)blockIdx.x * h + i] = src[i];
}

extern "C" int be_cuda_gather_rows(float *out, const float *table, const int32_t *ids, int T, int h)
{
    if (T <= 0) return 0;
    gather_kernel<<<T, 256>>>(out, table, ids, h);
    LAUNCH_CHECK();
    return 0;
}

/* One block per row; ties resolve to the lowest index, as be_cpu_argmax does. */
__global__ void argmax_kernel(int32_t *out, const float *logits, int n)
{
    __shared__ float bv[256];
    __shared__ int bi[256];
    const float *r = logits + (size_t)blockIdx.x * n;
    float v = -INFINITY;
    int idx = 0x7fffffff;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        if (r[i] > v || (r[i] == v && i < idx)) { v = r[i]; idx = i; }
    bv[threadIdx.x] = v;
    bi[threadIdx.x] = idx;
    __syncthreads();
    for (int o = blockDim.x / 2; o; o >>= 1) {
        if (threadIdx.x < o) {
            float w = bv[threadIdx.x + o];
            int j = bi[threadIdx.x + o];
            if (w > bv[threadIdx.x] || (w == bv[threadIdx.x] && j < bi[threadIdx.x])) { bv[threadIdx.x] = w; bi[threadIdx.x] = j; }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = bi[0];
}

extern "C" int be_cuda_argmax(int32_t *out, const float *logits, int rows, int n)
{
    if (rows <= 0) return 0;
    argmax_kernel<<<rows, 256>>>(out, logits, n);
    LAUNCH_CHECK();
    return 0;
}
