/* selftest.cu: every CUDA kernel against its plain-C reference (backend/cpu/cpu_ops.c) on fresh
 * random inputs at several shapes. Outputs are poisoned (NaN) before each launch so unwritten
 * elements fail; every call's return code and each launch's error are checked. Tolerances:
 * fp32 arithmetic in a different order and with fast exponentials, 1e-4 relative L2 error
 * (attention) or 1e-5 (elementwise); bf16 operands with fp32 accumulation, 2e-3. */
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda_common.cuh"
#include "cuda_kernels.h"

extern "C" {
#include "../cpu/cpu_ops.h"
#include "../cpu/kv_format.h"
int be_cuda_probe_devices(char *msg, size_t n);
}

typedef void (*report_fn)(void *ud, const char *kernel, const char *shape, double err, double tol, int ok);

struct tester {
    report_fn report;
    void *ud;
    int failures;
    unsigned long long rng;
};

static float frand(tester *t)
{
    t->rng = t->rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((t->rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static std::vector<float> rvec(tester *t, size_t n)
{
    std::vector<float> v(n);
    for (auto &x : v) x = frand(t);
    return v;
}

/* Relative L2 error; a NaN anywhere (an unwritten, poisoned element) is an infinite error. */
static double rel_l2(const float *got, const float *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (std::isnan(got[i])) return INFINITY;
        num += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void verdict(tester *t, const char *kernel, const char *shape, double err, double tol)
{
    int ok = err <= tol;
    if (!ok) t->failures++;
    t->report(t->ud, kernel, shape, err, tol, ok);
}

template <typename T> static T *up(const std::vector<T> &h)
{
    T *d = NULL;
    if (cudaMalloc(&d, h.size() * sizeof(T) + 1) != cudaSuccess) return NULL;
    cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
    return d;
}

static float *poisoned(size_t n)
{
    float *d = NULL;
    if (cudaMalloc(&d, n * sizeof(float)) != cudaSuccess) return NULL;
    cudaMemset(d, 0xff, n * sizeof(float));   /* all-ones bits: NaN */
    return d;
}

static std::vector<float> down(const float *d, size_t n)
{
    std::vector<float> h(n);
    cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost);
    return h;
}

#define RUN(call)                                                                                  \
    do {                                                                                           \
        if ((call) != 0 || cudaDeviceSynchronize() != cudaSuccess) {                               \
            size_t used_ = strlen(be_cuda_last_error);                                                \
            snprintf(be_cuda_last_error + used_, sizeof be_cuda_last_error - used_, " [%.40s]", #call);    \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

static int test_elementwise(tester *t)
{
    int shapes[][2] = {{1, 64}, {7, 4096}, {33, 3584}};
    for (auto &sh : shapes) {
        int T = sh[0], h = sh[1];
        char shape[64];
        snprintf(shape, sizeof shape, "T=%d h=%d", T, h);
        auto x = rvec(t, (size_t)T * h), w = rvec(t, h), ref = std::vector<float>((size_t)T * h);
        be_cpu_rmsnorm(ref.data(), x.data(), w.data(), T, h, 1e-5f);
        float *dx = up(x), *dw = up(w), *dout = poisoned((size_t)T * h);
        RUN(be_cuda_rmsnorm(dout, dx, dw, T, h, 1e-5f));
        verdict(t, "rmsnorm", shape, rel_l2(down(dout, (size_t)T * h).data(), ref.data(), (size_t)T * h), 1e-5);
        cudaFree(dx); cudaFree(dw); cudaFree(dout);
        /* SwiGLU over a [T x 2h] input. */
        auto gu = rvec(t, (size_t)T * 2 * h);
        std::vector<float> sref((size_t)T * h);
        be_cpu_swiglu(sref.data(), gu.data(), T, h);
        float *dgu = up(gu), *dsw = poisoned((size_t)T * h);
        RUN(be_cuda_swiglu(dsw, dgu, T, h));
        verdict(t, "swiglu", shape, rel_l2(down(dsw, (size_t)T * h).data(), sref.data(), (size_t)T * h), 1e-5);
        cudaFree(dgu); cudaFree(dsw);
    }
    /* RoPE in place on rows with a stride (the Q part of a fused QKV row). */
    int T = 9, heads = 8, d = 128, stride = 8 * 128 + 2 * 2 * 128;
    auto x = rvec(t, (size_t)T * stride), ref = x;
    std::vector<int32_t> pos(T);
    for (int i = 0; i < T; i++) pos[i] = (int32_t)(frand(t) * 4000 + 4000);
    for (int i = 0; i < T; i++) be_cpu_rope(ref.data() + (size_t)i * stride, 1, heads, d, &pos[i], 10000.0f);
    float *dx = up(x);
    int32_t *dp = up(pos);
    RUN(be_cuda_rope(dx, T, heads, d, stride, dp, 10000.0f));
    verdict(t, "rope", "T=9 heads=8 d=128 strided", rel_l2(down(dx, (size_t)T * stride).data(), ref.data(), (size_t)T * stride), 1e-5);
    cudaFree(dx); cudaFree(dp);
    return 0;
}

static int test_gemm(tester *t)
{
    int shapes[][3] = {{1, 6144, 4096}, {64, 4096, 4096}, {257, 28672, 4096}};
    for (auto &sh : shapes) {
        int M = sh[0], N = sh[1], K = sh[2];
        auto x = rvec(t, (size_t)M * K), w = rvec(t, (size_t)K * N);
        /* The reference multiplies the bf16-rounded operands in fp32. */
        std::vector<__nv_bfloat16> wb(w.size());
        for (size_t i = 0; i < w.size(); i++) { wb[i] = __float2bfloat16_rn(w[i]); w[i] = __bfloat162float(wb[i]); }
        auto xr = x;
        for (auto &v : xr) v = be_cpu_bf16_to_f32(be_cpu_f32_to_bf16(v));
        std::vector<float> ref((size_t)M * N);
        be_cpu_matmul(ref.data(), xr.data(), w.data(), M, N, K, 0);
        float *dx = up(x), *dout = poisoned((size_t)M * N);
        __nv_bfloat16 *dw = up(wb);
        void *scratch = NULL;
        CUDA_CHECK(cudaMalloc(&scratch, (size_t)M * K * 2));
        RUN(be_cuda_gemm(dout, dx, dw, M, N, K, 0, scratch));
        char shape[64];
        snprintf(shape, sizeof shape, "M=%d N=%d K=%d", M, N, K);
        verdict(t, "gemm bf16", shape, rel_l2(down(dout, (size_t)M * N).data(), ref.data(), (size_t)M * N), 2e-3);
        cudaFree(dx); cudaFree(dout); cudaFree(dw); cudaFree(scratch);
    }
    return 0;
}

/* A pool filled on the host by the reference writer, uploaded byte for byte (same layout). */
struct pool_pair { be_cpu_kv_pool cpu; be_cuda_pool dev; };

static int make_pool(tester *t, pool_pair *pp, scn_dtype dt, long blocks, int bs, int Hkv, int d)
{
    if (be_cpu_kv_pool_init(&pp->cpu, dt, blocks, bs, 1, Hkv, d)) { snprintf(be_cuda_last_error, sizeof be_cuda_last_error, "host pool"); return -1; }
    std::vector<float> v(d);
    for (long b = 0; b < blocks; b++)
        for (int s = 0; s < bs; s++)
            for (int kv = 0; kv < 2; kv++)
                for (int h = 0; h < Hkv; h++) {
                    for (auto &x : v) x = frand(t) * 2;
                    be_cpu_kv_write(&pp->cpu, b, s, 0, kv, h, v.data());
                }
    pp->dev = be_cuda_pool{(int)dt, bs, 1, Hkv, d, NULL, NULL, pp->cpu.fp8_scale};
    size_t bytes = be_cpu_kv_pool_bytes(&pp->cpu), sbytes = pp->cpu.scales ? (size_t)blocks * 2 * bs * Hkv * sizeof(float) : 0;
    CUDA_CHECK(cudaMalloc(&pp->dev.data, bytes));
    CUDA_CHECK(cudaMemcpy(pp->dev.data, pp->cpu.data, bytes - sbytes, cudaMemcpyHostToDevice));
    if (sbytes) {
        CUDA_CHECK(cudaMalloc(&pp->dev.scales, sbytes));
        CUDA_CHECK(cudaMemcpy(pp->dev.scales, pp->cpu.scales, sbytes, cudaMemcpyHostToDevice));
    }
    return 0;
}

static void free_pool(pool_pair *pp)
{
    be_cpu_kv_pool_free(&pp->cpu);
    cudaFree(pp->dev.data);
    cudaFree(pp->dev.scales);
}

static int test_kv_write(tester *t)
{
    scn_dtype dts[] = {SCN_DTYPE_FP32, SCN_DTYPE_FP16, SCN_DTYPE_BF16, SCN_DTYPE_FP8, SCN_DTYPE_INT8};
    for (scn_dtype dt : dts) {
        int T = 37, Hkv = 8, d = 128, bs = 16, stride = (32 + 2 * 8) * 128;
        pool_pair pp;
        if (make_pool(t, &pp, dt, 8, bs, Hkv, d)) return -1;
        auto rows = rvec(t, (size_t)T * stride);
        std::vector<int32_t> blk(T), slot(T);
        /* Distinct (block, slot) per token: token i goes to block i / bs, slot i % bs. */
        for (int i = 0; i < T; i++) { blk[i] = i / bs; slot[i] = i % bs; }
        for (int i = 0; i < T; i++)
            for (int h = 0; h < Hkv; h++) {
                be_cpu_kv_write(&pp.cpu, blk[i], slot[i], 0, 0, h, rows.data() + (size_t)i * stride + (32 + h) * d);
                be_cpu_kv_write(&pp.cpu, blk[i], slot[i], 0, 1, h, rows.data() + (size_t)i * stride + (32 + 8 + h) * d);
            }
        float *drows = up(rows);
        int32_t *db = up(blk), *ds = up(slot);
        RUN(be_cuda_kv_write(&pp.dev, 0, drows + 32 * 128, drows + 40 * 128, stride, db, ds, T));
        /* Read the device pool back and compare what each element dequantises to. */
        be_cpu_kv_pool back = pp.cpu;
        size_t bytes = be_cpu_kv_pool_bytes(&pp.cpu), sbytes = pp.cpu.scales ? (size_t)8 * 2 * bs * Hkv * sizeof(float) : 0;
        std::vector<uint8_t> data(bytes - sbytes);
        std::vector<float> scales(sbytes / sizeof(float));
        cudaMemcpy(data.data(), pp.dev.data, data.size(), cudaMemcpyDeviceToHost);
        if (sbytes) cudaMemcpy(scales.data(), pp.dev.scales, sbytes, cudaMemcpyDeviceToHost);
        back.data = data.data();
        back.scales = sbytes ? scales.data() : NULL;
        std::vector<float> a(d), b(d);
        double worst = 0;
        for (int i = 0; i < T; i++)
            for (int kv = 0; kv < 2; kv++)
                for (int h = 0; h < Hkv; h++) {
                    be_cpu_kv_read(&pp.cpu, blk[i], slot[i], 0, kv, h, a.data());
                    be_cpu_kv_read(&back, blk[i], slot[i], 0, kv, h, b.data());
                    double e = rel_l2(b.data(), a.data(), d);
                    if (e > worst) worst = e;
                }
        char shape[64];
        snprintf(shape, sizeof shape, "%s T=%d Hkv=8 d=128", scn_dtype_name(dt), T);
        verdict(t, "kv_write", shape, worst, 1e-6);
        cudaFree(drows); cudaFree(db); cudaFree(ds);
        free_pool(&pp);
    }
    return 0;
}

/* Decode, prefill and naive attention against be_cpu_attention_paged on one random pool. */
static int test_attention(tester *t)
{
    scn_dtype dts[] = {SCN_DTYPE_BF16, SCN_DTYPE_FP16, SCN_DTYPE_FP8, SCN_DTYPE_INT8};
    int block_sizes[] = {8, 16, 32};
    for (scn_dtype dt : dts)
        for (int bs : block_sizes) {
            int H = 32, Hkv = 8, d = 128, n = 5, max_blocks = 0;
            int ctx[] = {1, 37, 300, 1025, 2000};
            be_cpu_attn_mask masks[] = {{0, 0, 0}, {4, 500, 0}};
            for (int i = 0; i < n; i++) max_blocks = std::max(max_blocks, (ctx[i] + 1 + bs - 1) / bs);
            long blocks = (long)n * max_blocks;
            pool_pair pp;
            if (make_pool(t, &pp, dt, blocks, bs, Hkv, d)) return -1;
            /* Scattered block tables: sequence i uses every n-th block. */
            std::vector<int32_t> tab((size_t)n * max_blocks), start(n);
            for (int i = 0; i < n; i++) { start[i] = ctx[i]; for (int j = 0; j < max_blocks; j++) tab[(size_t)i * max_blocks + j] = j * n + i; }
            for (auto &m : masks) {
                auto q = rvec(t, (size_t)n * H * d);
                std::vector<float> ref((size_t)n * H * d);
                for (int i = 0; i < n; i++)
                    be_cpu_attention_paged(ref.data() + (size_t)i * H * d, q.data() + (size_t)i * H * d, &pp.cpu, 0,
                                        tab.data() + (size_t)i * max_blocks, ctx[i], 1, H, &m);
                float *dq = up(q), *dout = poisoned((size_t)n * H * d);
                int32_t *dt_ = up(tab), *dst = up(start);
                be_cuda_mask km = {m.sink, m.window, m.sliding};
                RUN(be_cuda_attn_decode(dout, dq, &pp.dev, 0, dt_, max_blocks, dst, n, H, km, 256));
                char shape[96];
                snprintf(shape, sizeof shape, "%s bs=%d H=32/8 ctx<=2000%s", scn_dtype_name(dt), bs, m.window ? " sink4+500" : "");
                verdict(t, "attn_decode", shape, rel_l2(down(dout, (size_t)n * H * d).data(), ref.data(), (size_t)n * H * d), 1e-4);
                cudaFree(dq); cudaFree(dout); cudaFree(dt_); cudaFree(dst);
            }
            /* Prefill: chunks of 1..96 new tokens on cached prefixes of 0..1000 (keys already in the pool). */
            int lens[] = {96, 1, 33, 64, 7}, pre[] = {0, 500, 1000, 64, 1900};
            std::vector<int32_t> pst(n), plen(n), prow(n);
            int rows = 0, max_len = 0;
            for (int i = 0; i < n; i++) {
                pst[i] = pre[i]; plen[i] = lens[i]; prow[i] = rows; rows += lens[i]; max_len = std::max(max_len, lens[i]);
                if (pre[i] + lens[i] > max_blocks * bs) plen[i] = max_blocks * bs - pre[i];
            }
            auto q = rvec(t, (size_t)rows * H * d);
            std::vector<float> ref((size_t)rows * H * d);
            be_cpu_attn_mask none = {0, 0, 0};
            for (int i = 0; i < n; i++)
                be_cpu_attention_paged(ref.data() + (size_t)prow[i] * H * d, q.data() + (size_t)prow[i] * H * d, &pp.cpu, 0,
                                    tab.data() + (size_t)i * max_blocks, pst[i], plen[i], H, &none);
            float *dq = up(q), *dout = poisoned((size_t)rows * H * d);
            int32_t *dt_ = up(tab), *dst = up(pst), *dl = up(plen), *dr = up(prow);
            RUN(be_cuda_attn_prefill(dout, dq, &pp.dev, 0, dt_, max_blocks, dst, dl, dr, n, max_len, H, be_cuda_mask{0, 0, 0}));
            char shape[96];
            snprintf(shape, sizeof shape, "%s bs=%d H=32/8 chunks<=96 on prefixes<=1900", scn_dtype_name(dt), bs);
            verdict(t, "attn_prefill", shape, rel_l2(down(dout, (size_t)rows * H * d).data(), ref.data(), (size_t)rows * H * d), 1e-4);
            cudaMemset(dout, 0xff, (size_t)rows * H * d * sizeof(float));
            size_t scratch_floats = (size_t)H * 96 * 2000;
            float *scratch = NULL;
            CUDA_CHECK(cudaMalloc(&scratch, scratch_floats * sizeof(float)));
            RUN(be_cuda_attn_naive(dout, dq, &pp.dev, 0, dt_, max_blocks, dst, dl, dr, n, H, be_cuda_mask{0, 0, 0}, scratch, scratch_floats));
            verdict(t, "attn_naive", shape, rel_l2(down(dout, (size_t)rows * H * d).data(), ref.data(), (size_t)rows * H * d), 1e-4);
            cudaFree(scratch); cudaFree(dq); cudaFree(dout); cudaFree(dt_); cudaFree(dst); cudaFree(dl); cudaFree(dr);
            free_pool(&pp);
        }
    return 0;
}

/* Returns the number of failing checks, -1 on a CUDA error (message in msg), or -2 when there
 * is no usable device (message in msg). */
extern "C" int be_cuda_selftest(report_fn report, void *ud, char *msg, size_t n)
{
    if (be_cuda_probe_devices(msg, n) <= 0) return -2;
    tester t = {report, ud, 0, 0x2545F4914F6CDD1DULL};
    be_cuda_last_error[0] = 0;
    if (test_elementwise(&t) || test_gemm(&t) || test_kv_write(&t) || test_attention(&t)) {
        snprintf(msg, n, "%s", be_cuda_last_error);
        return -1;
    }
    return t.failures;
}
