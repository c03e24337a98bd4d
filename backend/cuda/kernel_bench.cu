/* kernel_bench.cu: the device measurements issues #5 and #15 ask for: the copy-bandwidth and GEMM
 * ceilings (the GEMM on bf16 operands, without the activation cast), paged decode attention (v2
 * with and without cp.async, and v1) over batch x context as achieved GB/s against the measured
 * copy bandwidth, and prefill attention at 4096 tokens in TFLOP/s against the GEMM ceiling
 * (fp32 flash, tensor cores, naive). KVPLAN_KERNEL_BENCH=decode|prefill measures one half.
 * Events around each region, median of repeats after warm-up, random data. */
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
    cudaEvent_t a = NULL, b = NULL;
    timer() { cudaEventCreate(&a); cudaEventCreate(&b); }
    ~timer() { cudaEventDestroy(a); cudaEventDestroy(b); }
};

/* Device buffers freed however the measurement ends. */
struct bufs {
    std::vector<void *> p;
    ~bufs() { for (void *x : p) cudaFree(x); }
    template <typename T> int get(T **out, size_t bytes)
    {
        *out = NULL;
        CUDA_CHECK(cudaMalloc((void **)out, bytes));
        p.push_back(*out);
        return 0;
    }
};

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

/* Median seconds of `reps` runs after two warm-ups, events around each; -1 on an error. */
template <typename F> static int timed(timer &tm, int reps, double *out, F call)
{
    std::vector<double> ts;
    for (int r = -2; r < reps; r++) {
        CUDA_CHECK(cudaEventRecord(tm.a));
        if (call() != 0) return -1;
        CUDA_CHECK(cudaEventRecord(tm.b));
        CUDA_CHECK(cudaEventSynchronize(tm.b));
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, tm.a, tm.b));
        if (r >= 0) ts.push_back(ms / 1e3);
    }
    *out = median(ts);
    return 0;
}

static int memcpy_d2d(void *dst, const void *src, size_t n)
{
    CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToDevice));
    return 0;
}

/* What to measure (KVPLAN_KERNEL_BENCH): "decode" (the copy ceiling and decode attention),
 * "prefill" (the GEMM ceiling and prefill attention) or "all" (the default). The device check
 * runs the two halves as separate stages, each under its own time limit. */
enum { BENCH_DECODE = 1, BENCH_PREFILL = 2 };

static int bench_mode(int *mode)
{
    const char *m = getenv("KVPLAN_KERNEL_BENCH");
    if (!m || !*m || !strcmp(m, "all")) *mode = BENCH_DECODE | BENCH_PREFILL;
    else if (!strcmp(m, "decode")) *mode = BENCH_DECODE;
    else if (!strcmp(m, "prefill")) *mode = BENCH_PREFILL;
    else {
        snprintf(be_cuda_last_error, sizeof be_cuda_last_error, "KVPLAN_KERNEL_BENCH must be all, decode or prefill (got '%.60s')", m);
        return -1;
    }
    return 0;
}

static int bench(be_cuda_ws *ws, bench_fn report, void *ud, int mode)
{
    timer tm;
    double t;
    /* 1. Copy bandwidth: 2 GiB device to device, bytes read plus written. */
    double copy_bw = 0;
    if (mode & BENCH_DECODE) {
        bufs B;
        size_t cb = (size_t)2 << 30;
        unsigned char *a, *b;
        if (B.get(&a, cb) || B.get(&b, cb)) return -1;
        fill_random<<<4096, 256>>>(a, cb, 1);
        LAUNCH_CHECK();
        if (timed(tm, 10, &t, [&] { return memcpy_d2d(b, a, cb); })) return -1;
        copy_bw = 2.0 * cb / t;
        report(ud, "copy", "2 GiB device to device", t, copy_bw / 1e9, "GB/s", 1.0);
    }
    /* 2. GEMM ceiling: 8192^3 on bf16 operands with fp32 accumulation, random data; then the
     * backend's GEMM with its fp32->bf16 input cast, against that ceiling. */
    double gemm = 0;
    if (mode & BENCH_PREFILL) {
        bufs B;
        int M = 8192, N = 8192, K = 8192;
        float *x, *out;
        unsigned char *a, *w, *scratch;
        if (B.get(&x, (size_t)M * K * 4) || B.get(&out, (size_t)M * N * 4) || B.get(&a, (size_t)M * K * 2) ||
            B.get(&w, (size_t)K * N * 2) || B.get(&scratch, (size_t)M * K * 2))
            return -1;
        fill_float<<<4096, 256>>>(x, (size_t)M * K, 2);
        fill_random<<<4096, 256>>>(a, (size_t)M * K * 2, 13);
        fill_random<<<4096, 256>>>(w, (size_t)K * N * 2, 3);
        LAUNCH_CHECK();
        if (timed(tm, 5, &t, [&] { return be_cuda_gemm_bf16(ws, out, a, w, M, N, K); })) return -1;
        gemm = 2.0 * M * N * K / t;
        report(ud, "gemm bf16 (ceiling)", "8192 x 8192 x 8192, bf16 operands", t, gemm / 1e12, "TFLOP/s", 1.0);
        if (timed(tm, 5, &t, [&] { return be_cuda_gemm(ws, out, x, w, M, N, K, 0, scratch); })) return -1;
        report(ud, "gemm bf16 + input cast", "8192 x 8192 x 8192, fp32 activations", t, 2.0 * M * N * K / t / 1e12, "TFLOP/s",
               2.0 * M * N * K / t / gemm);
    }
    /* 3. Decode attention, every version: Llama-3-8B's shape (32 query heads on 8 KV heads, d
     * 128), bf16 KV, blocks of 16, scattered tables, splits as the backend sizes them. */
    int H = 32, Hkv = 8, d = 128, bs = 16;
    int batches[] = {1, 16, 64, 128}, ctxs[] = {1024, 4096, 16384};
    for (int bi = 0; bi < 4 && (mode & BENCH_DECODE); bi++)
        for (int ci = 0; ci < 3; ci++) {
            bufs B;
            int Bn = batches[bi], C = ctxs[ci], per = (C + 1 + bs - 1) / bs;
            size_t blocks = (size_t)Bn * per, elems = blocks * 2 * bs * Hkv * d;
            be_cuda_pool pool = {BE_CUDA_BF16, bs, 1, Hkv, d, NULL, NULL, 1.0f};
            unsigned char *data;
            if (B.get(&data, elems * 2)) return -1;
            pool.data = data;
            fill_random<<<4096, 256>>>(data, elems * 2, 4 + bi * 3 + ci);
            std::vector<int32_t> tab((size_t)Bn * per), start(Bn, C);
            for (int s = 0; s < Bn; s++) for (int j = 0; j < per; j++) tab[(size_t)s * per + j] = j * Bn + s;   /* scattered */
            int32_t *dtab, *dstart;
            float *q, *o;
            if (B.get(&dtab, tab.size() * 4) || B.get(&dstart, Bn * 4) || B.get(&q, (size_t)Bn * H * d * 4) || B.get(&o, (size_t)Bn * H * d * 4))
                return -1;
            CUDA_CHECK(cudaMemcpy(dtab, tab.data(), tab.size() * 4, cudaMemcpyHostToDevice));
            CUDA_CHECK(cudaMemcpy(dstart, start.data(), Bn * 4, cudaMemcpyHostToDevice));
            fill_float<<<1024, 256>>>(q, (size_t)Bn * H * d, 5);
            LAUNCH_CHECK();
            be_cuda_mask none = {0, 0, 0};
            double bytes = (double)Bn * (C + 1) * 2 * Hkv * d * 2 + 2.0 * Bn * H * d * 4;
            char shape[96];
            int split = be_cuda_decode_split(ws, Bn, Hkv, per * bs);
            snprintf(shape, sizeof shape, "batch %d x context %d (v2 split %d)", Bn, C, split);
            if (timed(tm, 10, &t, [&] { return be_cuda_attn_decode_v2(ws, o, q, &pool, 0, dtab, per, dstart, Bn, H, none, 0); })) return -1;
            report(ud, "attn_decode v2 bf16 (cp.async)", shape, t, bytes / t / 1e9, "GB/s", bytes / t / copy_bw);
            if (timed(tm, 10, &t, [&] { return be_cuda_attn_decode_v2_direct(ws, o, q, &pool, 0, dtab, per, dstart, Bn, H, none, 0); }))
                return -1;
            report(ud, "attn_decode v2 bf16 (direct)", shape, t, bytes / t / 1e9, "GB/s", bytes / t / copy_bw);
            snprintf(shape, sizeof shape, "batch %d x context %d (v1 split 512)", Bn, C);
            if (timed(tm, 10, &t, [&] { return be_cuda_attn_decode_v1(ws, o, q, &pool, 0, dtab, per, dstart, Bn, H, none, 0); })) return -1;
            report(ud, "attn_decode v1 bf16", shape, t, bytes / t / 1e9, "GB/s", bytes / t / copy_bw);
        }
    /* 4. Prefill attention: one 4096-token chunk, causal; fp32 flash, tensor cores and naive. */
    if (mode & BENCH_PREFILL) {
        bufs B;
        int T = 4096, per = T / bs;
        size_t elems = (size_t)per * 2 * bs * Hkv * d;
        be_cuda_pool pool = {BE_CUDA_BF16, bs, 1, Hkv, d, NULL, NULL, 1.0f};
        unsigned char *data;
        if (B.get(&data, elems * 2)) return -1;
        pool.data = data;
        fill_random<<<4096, 256>>>(data, elems * 2, 9);
        std::vector<int32_t> tab(per);
        for (int j = 0; j < per; j++) tab[j] = j;
        int32_t z = 0, len = T, *dtab, *dst, *dl, *dr;
        float *q, *o, *sc;
        size_t sfl = (size_t)H * T * T;
        if (B.get(&dtab, per * 4) || B.get(&dst, 4) || B.get(&dl, 4) || B.get(&dr, 4) || B.get(&q, (size_t)T * H * d * 4) ||
            B.get(&o, (size_t)T * H * d * 4) || B.get(&sc, sfl * 4))
            return -1;
        CUDA_CHECK(cudaMemcpy(dtab, tab.data(), per * 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(dst, &z, 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(dl, &len, 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(dr, &z, 4, cudaMemcpyHostToDevice));
        fill_float<<<4096, 256>>>(q, (size_t)T * H * d, 10);
        LAUNCH_CHECK();
        be_cuda_mask none = {0, 0, 0};
        double flops = 4.0 * H * d * ((double)T * (T + 1) / 2);
        if (timed(tm, 5, &t, [&] { return be_cuda_attn_prefill(o, q, &pool, 0, dtab, per, dst, dl, dr, 1, T, H, none); })) return -1;
        report(ud, "attn_prefill bf16 (flash)", "4096 tokens, causal", t, flops / t / 1e12, "TFLOP/s", flops / t / gemm);
        if (timed(tm, 5, &t, [&] { return be_cuda_attn_prefill_tc(o, q, &pool, 0, dtab, per, dst, dl, dr, 1, T, H, none); })) return -1;
        report(ud, "attn_prefill bf16 (tensor cores; cp.async + ldmatrix)", "4096 tokens, causal", t, flops / t / 1e12, "TFLOP/s",
               flops / t / gemm);
        if (timed(tm, 3, &t, [&] { return be_cuda_attn_naive(o, q, &pool, 0, dtab, per, dst, dl, dr, 1, H, none, sc, sfl); })) return -1;
        report(ud, "attn_prefill bf16 (naive)", "4096 tokens, scores in memory", t, flops / t / 1e12, "TFLOP/s", flops / t / gemm);
    }
    return 0;
}

/* Each row is reported as it is measured, so an error keeps the rows before it. */
extern "C" int be_cuda_kernel_bench(bench_fn report, void *ud, char *msg, size_t n)
{
    /* The mode first, so a wrong one is reported even where there is no device. */
    int mode;
    if (bench_mode(&mode)) { snprintf(msg, n, "%s", be_cuda_last_error); return -1; }
    if (be_cuda_probe_devices(msg, n) <= 0) return -2;
    be_cuda_last_error[0] = 0;
    msg[0] = 0;
    be_cuda_ws ws;
    if (be_cuda_ws_init(&ws)) { snprintf(msg, n, "%s", be_cuda_last_error); return -1; }
    int rc = bench(&ws, report, ud, mode);
    be_cuda_ws_free(&ws);
    if (rc) {
        cudaError_t e = cudaGetLastError();
        snprintf(msg, n, "%s%s%s", be_cuda_last_error[0] ? be_cuda_last_error : "failed",
                 e != cudaSuccess ? "; last error: " : "", e != cudaSuccess ? cudaGetErrorName(e) : "");
        return -1;
    }
    return 0;
}
