/* kernel_bench.cu: the device measurements issue #5 asks for: the copy-bandwidth and GEMM
 * ceilings, paged decode attention over batch x context as achieved GB/s against the measured
 * copy bandwidth, and prefill attention at 4096 tokens in TFLOP/s against the GEMM ceiling
 * (flash and naive). Events around each region, median of repeats after warm-up, random data. */
#include <algorithm>
#include <cstdio>
#include <vector>

#include "cuda_common.cuh"
#include "cuda_kernels.h"

extern "C" int be_cuda_probe_devices(char *msg, size_t n);

typedef void (*bench_fn)(void *ud, const char *what, const char *shape, double seconds, double rate, const char *unit,
                         double share_of_ceiling);

__global__ void fill_random(unsigned char *p, size_t n, unsigned long long seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned long long x = seed ^ (i * 0x9e3779b97f4a7c15ULL);
        x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ULL;
        /* bytes that decode to finite, moderate values in every KV format: clear the top exponent bits */
        p[i] = (unsigned char)((x >> 24) & 0x3f);
    }
}

__global__ void fill_float(float *p, size_t n, unsigned long long seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned long long x = seed ^ (i * 0x9e3779b97f4a7c15ULL);
        x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ULL;
        p[i] = (float)((x >> 40) * (1.0 / 16777216.0)) - 0.5f;
    }
}

struct timer {
    cudaEvent_t a, b;
    timer() { cudaEventCreate(&a); cudaEventCreate(&b); }
    ~timer() { cudaEventDestroy(a); cudaEventDestroy(b); }
};

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

#define TIMED(reps, out, call)                                                                     \
    do {                                                                                           \
        std::vector<double> ts_;                                                                   \
        for (int r_ = -2; r_ < (reps); r_++) {                                                     \
            cudaEventRecord(tm.a);                                                                 \
            if ((call) != 0) return -1;                                                            \
            cudaEventRecord(tm.b);                                                                 \
            CUDA_CHECK(cudaEventSynchronize(tm.b));                                                \
            float ms_;                                                                             \
            cudaEventElapsedTime(&ms_, tm.a, tm.b);                                                \
            if (r_ >= 0) ts_.push_back(ms_ / 1e3);                                                 \
        }                                                                                          \
        (out) = median(ts_);                                                                       \
    } while (0)

static int memcpy_d2d(void *dst, const void *src, size_t n)
{
    CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToDevice));
    return 0;
}

extern "C" int be_cuda_kernel_bench(bench_fn report, void *ud, char *msg, size_t n)
{
    if (be_cuda_probe_devices(msg, n) <= 0) return -2;
    be_cuda_last_error[0] = 0;
    msg[0] = 0;
    timer tm;
    /* 1. Copy bandwidth: 2 GiB device to device, bytes read plus written. */
    size_t cb = (size_t)2 << 30;
    void *a = NULL, *b = NULL;
    CUDA_CHECK(cudaMalloc(&a, cb));
    CUDA_CHECK(cudaMalloc(&b, cb));
    fill_random<<<4096, 256>>>((unsigned char *)a, cb, 1);
    double t;
    TIMED(10, t, memcpy_d2d(b, a, cb));
    double copy_bw = 2.0 * cb / t;
    report(ud, "copy", "2 GiB device to device", t, copy_bw / 1e9, "GB/s", 1.0);
    cudaFree(a);
    cudaFree(b);
    /* 2. GEMM ceiling: 8192^3 in bf16 with fp32 accumulation, on random operands. */
    int M = 8192, N = 8192, K = 8192;
    float *x = NULL, *out = NULL;
    void *w = NULL, *scratch = NULL;
    CUDA_CHECK(cudaMalloc(&x, (size_t)M * K * 4));
    CUDA_CHECK(cudaMalloc(&out, (size_t)M * N * 4));
    CUDA_CHECK(cudaMalloc(&w, (size_t)K * N * 2));
    CUDA_CHECK(cudaMalloc(&scratch, (size_t)M * K * 2));
    fill_float<<<4096, 256>>>(x, (size_t)M * K, 2);
    fill_random<<<4096, 256>>>((unsigned char *)w, (size_t)K * N * 2, 3);
    TIMED(5, t, be_cuda_gemm(out, x, w, M, N, K, 0, scratch));
    double gemm = 2.0 * M * N * K / t;
    report(ud, "gemm bf16", "8192 x 8192 x 8192 (with the fp32->bf16 input cast)", t, gemm / 1e12, "TFLOP/s", 1.0);
    cudaFree(x); cudaFree(out); cudaFree(w); cudaFree(scratch);
    /* 3. Decode attention: Llama-3-8B's shape (32 query heads on 8 KV heads, d 128), bf16 KV, blocks of 16. */
    int H = 32, Hkv = 8, d = 128, bs = 16;
    int batches[] = {1, 16, 64, 128}, ctxs[] = {1024, 4096, 16384};
    for (int bi = 0; bi < 4; bi++)
        for (int ci = 0; ci < 3; ci++) {
            int B = batches[bi], C = ctxs[ci], per = (C + 1 + bs - 1) / bs;
            size_t blocks = (size_t)B * per, elems = blocks * 2 * bs * Hkv * d;
            be_cuda_pool pool = {BE_CUDA_BF16, bs, 1, Hkv, d, NULL, NULL, 1.0f};
            CUDA_CHECK(cudaMalloc(&pool.data, elems * 2));
            fill_random<<<4096, 256>>>((unsigned char *)pool.data, elems * 2, 4 + bi * 3 + ci);
            std::vector<int32_t> tab((size_t)B * per), start(B, C);
            for (int s = 0; s < B; s++) for (int j = 0; j < per; j++) tab[(size_t)s * per + j] = j * B + s;   /* scattered */
            int32_t *dtab, *dstart;
            float *q, *o;
            CUDA_CHECK(cudaMalloc(&dtab, tab.size() * 4));
            CUDA_CHECK(cudaMalloc(&dstart, B * 4));
            CUDA_CHECK(cudaMalloc(&q, (size_t)B * H * d * 4));
            CUDA_CHECK(cudaMalloc(&o, (size_t)B * H * d * 4));
            cudaMemcpy(dtab, tab.data(), tab.size() * 4, cudaMemcpyHostToDevice);
            cudaMemcpy(dstart, start.data(), B * 4, cudaMemcpyHostToDevice);
            fill_float<<<1024, 256>>>(q, (size_t)B * H * d, 5);
            be_cuda_mask none = {0, 0, 0};
            TIMED(10, t, be_cuda_attn_decode(o, q, &pool, 0, dtab, per, dstart, B, H, none, 512));
            double bytes = (double)B * (C + 1) * 2 * Hkv * d * 2 + 2.0 * B * H * d * 4;
            char shape[64];
            snprintf(shape, sizeof shape, "batch %d x context %d", B, C);
            report(ud, "attn_decode bf16", shape, t, bytes / t / 1e9, "GB/s", bytes / t / copy_bw);
            cudaFree(pool.data); cudaFree(dtab); cudaFree(dstart); cudaFree(q); cudaFree(o);
        }
    /* 4. Prefill attention: one 4096-token chunk, causal; flash-style and naive. */
    {
        int T = 4096, per = T / bs;
        size_t elems = (size_t)per * 2 * bs * Hkv * d;
        be_cuda_pool pool = {BE_CUDA_BF16, bs, 1, Hkv, d, NULL, NULL, 1.0f};
        CUDA_CHECK(cudaMalloc(&pool.data, elems * 2));
        fill_random<<<4096, 256>>>((unsigned char *)pool.data, elems * 2, 9);
        std::vector<int32_t> tab(per);
        for (int j = 0; j < per; j++) tab[j] = j;
        int32_t z = 0, len = T, *dtab, *dst, *dl, *dr;
        CUDA_CHECK(cudaMalloc(&dtab, per * 4));
        CUDA_CHECK(cudaMalloc(&dst, 4)); CUDA_CHECK(cudaMalloc(&dl, 4)); CUDA_CHECK(cudaMalloc(&dr, 4));
        cudaMemcpy(dtab, tab.data(), per * 4, cudaMemcpyHostToDevice);
        cudaMemcpy(dst, &z, 4, cudaMemcpyHostToDevice);
        cudaMemcpy(dl, &len, 4, cudaMemcpyHostToDevice);
        cudaMemcpy(dr, &z, 4, cudaMemcpyHostToDevice);
        float *q, *o, *sc;
        CUDA_CHECK(cudaMalloc(&q, (size_t)T * H * d * 4));
        CUDA_CHECK(cudaMalloc(&o, (size_t)T * H * d * 4));
        fill_float<<<4096, 256>>>(q, (size_t)T * H * d, 10);
        be_cuda_mask none = {0, 0, 0};
        double flops = 4.0 * H * d * ((double)T * (T + 1) / 2);
        TIMED(5, t, be_cuda_attn_prefill(o, q, &pool, 0, dtab, per, dst, dl, dr, 1, T, H, none));
        report(ud, "attn_prefill bf16 (flash)", "4096 tokens, causal", t, flops / t / 1e12, "TFLOP/s", flops / t / gemm);
        size_t sfl = (size_t)H * T * T;
        CUDA_CHECK(cudaMalloc(&sc, sfl * 4));
        TIMED(3, t, be_cuda_attn_naive(o, q, &pool, 0, dtab, per, dst, dl, dr, 1, H, none, sc, sfl));
        report(ud, "attn_prefill bf16 (naive)", "4096 tokens, scores in memory", t, flops / t / 1e12, "TFLOP/s", flops / t / gemm);
        cudaFree(pool.data); cudaFree(dtab); cudaFree(dst); cudaFree(dl); cudaFree(dr); cudaFree(q); cudaFree(o); cudaFree(sc);
    }
    return 0;
}
