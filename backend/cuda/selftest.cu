/* selftest.cu: every CUDA kernel against its plain-C reference (backend/cpu/cpu_ops.c) on fresh
 * random inputs at many shapes. Outputs are poisoned (NaN) before each launch so unwritten
 * elements fail; every call's return code and each launch's error are checked. A CUDA error
 * inside one check fails that check (its row names the error) and the others still run, unless
 * the error is sticky (the context is lost), which stops the selftest with its name.
 *
 * Shapes: KV dtypes fp32, fp16, bf16, fp8, int8; block sizes 8, 16, 32; 2 layers (layer 1 is
 * the one read and written, so the layer term of the pool index counts); query heads per KV head
 * 1, 4, 8, 16 and the padded groups 2 and 7; head_dim 64, 128, 256; masks: none, StreamingLLM
 * sink + window, a sliding layer; decode splits as the backend sizes them, short ones (many
 * splits to merge) and 768 keys at 16 heads (48 KiB of scores); fp8 with a scale of 0.37; K and
 * V vectors each with its own amplitude (int8 scales per vector); adversarial
 * inputs: scores with a standard deviation of about 30 (exp overflows in fp32 unless the max is
 * subtracted), a 16k-token context, contexts that end exactly on a block boundary and one token
 * into a block. Every decode version (v2 with cp.async, v2 direct, v1); the tensor-core prefill
 * over every KV dtype (its cp.async and load-convert paths) with multi-tile chunks, partial and
 * dead warps, zero-filled key tiles and each mask, and on whole prompts (chunks from position
 * 0, query and key tiles aligned); decode v2's ring in each layout.
 *
 * Writes outside the target: every output sits between two poisoned guard bands that must stay
 * poisoned, and after each attention case the pool must equal what was uploaded. The plain-C
 * references run row-parallel on up to 16 host threads (they are most of the selftest's time).
 *
 * Tolerances (relative L2 error): fp32 arithmetic in another order with fast exponentials, 1e-4
 * for attention and 1e-5 elementwise; bf16 operands with fp32 accumulation, 2e-3; a whole step
 * (bf16 weights, many layers of rounding in both) 2e-2; tensor-core prefill against the reference
 * on the same bf16-rounded Q, K and V, 5e-3 (derived at the check). */
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "cuda_common.cuh"
#include "cuda_kernels.h"

extern "C" {
#include "../cpu/cpu_ops.h"
#include "../cpu/kv_format.h"
int be_cuda_probe_devices(char *msg, size_t n);
}

typedef void (*report_fn)(void *ud, const char *kernel, const char *shape, double err, double tol, int ok);

/* cuda_backend.cu: a whole CUDA step against the plain-C step on the same weights, batch and pool. */
extern "C" int be_cuda_step_check(report_fn report, void *ud, int *failures);

/* Guard band on each side of every poisoned output, in floats (4 KiB). */
#define SELFTEST_GUARD 1024

struct tester {
    report_fn report;
    void *ud;
    int failures;
    unsigned long long rng;
    be_cuda_ws ws;
};

static const char *dtname(int dt)
{
    static const char *const names[] = {"fp32", "fp16", "bf16", "fp8", "int8"};
    return dt >= 0 && dt < 5 ? names[dt] : "?";
}

static float frand(tester *t)
{
    t->rng = t->rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((t->rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static std::vector<float> rvec(tester *t, size_t n, float amp = 1.0f)
{
    std::vector<float> v(n);
    for (auto &x : v) x = frand(t) * amp;
    return v;
}

/* Relative L2 error; a NaN anywhere (an unwritten, poisoned element) is an infinite error. */
static double rel_l2(const float *got, const float *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (std::isnan(got[i]) || std::isinf(got[i])) return INFINITY;
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

static long guard_changes(const float *d, size_t n);
static std::vector<float> down(const float *d, size_t n);

/* A device output of n floats against its reference: the relative L2 error, infinite (and the
 * row says so) when anything was written into the guard bands around it. */
static void judge(tester *t, const char *kernel, const char *shape, const float *dev, const float *ref, size_t n, double tol)
{
    double err = rel_l2(down(dev, n).data(), ref, n);
    long out = guard_changes(dev, n);
    if (!out) { verdict(t, kernel, shape, err, tol); return; }
    char what[400];
    snprintf(what, sizeof what, "%s [%ld floats written outside the output]", shape, out);
    verdict(t, kernel, what, INFINITY, tol);
}

/* Device buffers of one check, freed when it ends however it ends. */
struct scope {
    std::vector<void *> p;
    ~scope() { for (void *x : p) cudaFree(x); }
    template <typename T> T *up(const std::vector<T> &h)
    {
        T *d = NULL;
        if (cudaMalloc(&d, h.size() * sizeof(T) + 16) != cudaSuccess) return NULL;
        p.push_back(d);
        if (cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice) != cudaSuccess) return NULL;
        return d;
    }
    /* n floats of output between two guard bands of SELFTEST_GUARD floats, all poisoned; the
     * guards must still hold the poison after the kernel (guard_changes). */
    float *poisoned(size_t n)
    {
        float *d = NULL;
        if (cudaMalloc(&d, (n + 2 * SELFTEST_GUARD) * sizeof(float)) != cudaSuccess) return NULL;
        p.push_back(d);
        cudaMemset(d, 0xff, (n + 2 * SELFTEST_GUARD) * sizeof(float));   /* all-ones bits: NaN */
        return d + SELFTEST_GUARD;
    }
    void *raw(size_t bytes)
    {
        void *d = NULL;
        if (cudaMalloc(&d, bytes) != cudaSuccess) return NULL;
        p.push_back(d);
        return d;
    }
};

static std::vector<float> down(const float *d, size_t n)
{
    std::vector<float> h(n, NAN);
    cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost);
    return h;
}

/* Floats of the guard bands around a poisoned output of n floats that no longer hold the poison:
 * a kernel that writes before or past its output (a wrong row, an off-by-one on a last partial
 * tile) fails even where the output itself is right. */
static long guard_changes(const float *d, size_t n)
{
    std::vector<uint32_t> g(2 * SELFTEST_GUARD, 0);
    if (cudaMemcpy(g.data(), d - SELFTEST_GUARD, SELFTEST_GUARD * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(g.data() + SELFTEST_GUARD, d + n, SELFTEST_GUARD * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
        return (long)g.size();
    long bad = 0;
    for (uint32_t x : g) bad += x != 0xffffffffu;
    return bad;
}

/* A failed launcher or a failing synchronisation fails the check with the error's name; a
 * sticky error (the context is lost) is returned as -1 and stops the selftest. */
static int check_failed(tester *t, const char *kernel, const char *shape, int launch_rc)
{
    cudaError_t e = launch_rc ? cudaSuccess : cudaDeviceSynchronize();
    if (!launch_rc && e == cudaSuccess) return 0;
    char what[640];
    if (e != cudaSuccess)
        snprintf(what, sizeof what, "%s [CUDA error %s: %s]", shape, cudaGetErrorName(e), cudaGetErrorString(e));
    else
        snprintf(what, sizeof what, "%s [%s]", shape, be_cuda_last_error);
    t->failures++;
    t->report(t->ud, kernel, what, INFINITY, 0, 0);
    cudaGetLastError();                                 /* clears an error that is not sticky */
    if (cudaDeviceSynchronize() != cudaSuccess) {
        snprintf(be_cuda_last_error, sizeof be_cuda_last_error, "%s in %s (%s): the CUDA context is lost",
                 e != cudaSuccess ? cudaGetErrorName(e) : "error", kernel, shape);
        return -1;
    }
    be_cuda_last_error[0] = 0;
    return 1;
}

/* Runs a launcher; on failure reports the row and goes on to the next check (or stops). */
#define RUN(kernel, shape, call)                                                                   \
    do {                                                                                           \
        int r_ = check_failed(t, kernel, shape, (call) != 0);                                      \
        if (r_ < 0) return -1;                                                                     \
        if (r_ > 0) return 0;                                                                      \
    } while (0)

#define NEED(ptr)                                                                                  \
    do {                                                                                           \
        if (!(ptr)) {                                                                              \
            snprintf(be_cuda_last_error, sizeof be_cuda_last_error, "out of device memory in the selftest"); \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

static int check_rmsnorm_swiglu(tester *t, int T, int h)
{
    scope sc;
    char shape[64];
    snprintf(shape, sizeof shape, "T=%d h=%d", T, h);
    auto x = rvec(t, (size_t)T * h, 3.0f), w = rvec(t, h), ref = std::vector<float>((size_t)T * h);
    be_cpu_rmsnorm(ref.data(), x.data(), w.data(), T, h, 1e-5f);
    float *dx = sc.up(x), *dw = sc.up(w), *dout = sc.poisoned((size_t)T * h);
    NEED(dx && dw && dout);
    RUN("rmsnorm", shape, be_cuda_rmsnorm(dout, dx, dw, T, h, 1e-5f));
    judge(t, "rmsnorm", shape, dout, ref.data(), (size_t)T * h, 1e-5);
    auto gu = rvec(t, (size_t)T * 2 * h, 4.0f);
    std::vector<float> sref((size_t)T * h);
    be_cpu_swiglu(sref.data(), gu.data(), T, h);
    float *dgu = sc.up(gu), *dsw = sc.poisoned((size_t)T * h);
    NEED(dgu && dsw);
    RUN("swiglu", shape, be_cuda_swiglu(dsw, dgu, T, h));
    judge(t, "swiglu", shape, dsw, sref.data(), (size_t)T * h, 1e-5);
    return 0;
}

/* RoPE in place on rows with a stride (the Q or K part of a fused QKV row). */
static int check_rope(tester *t, int heads, int d)
{
    scope sc;
    int T = 9, stride = heads * d + 2 * 2 * d;
    char shape[64];
    snprintf(shape, sizeof shape, "T=9 heads=%d d=%d strided", heads, d);
    auto x = rvec(t, (size_t)T * stride), ref = x;
    std::vector<int32_t> pos(T);
    for (int i = 0; i < T; i++) pos[i] = (int32_t)(frand(t) * 60000 + 60000);
    pos[0] = 0;
    for (int i = 0; i < T; i++) be_cpu_rope(ref.data() + (size_t)i * stride, 1, heads, d, &pos[i], 10000.0f);
    float *dx = sc.up(x);
    int32_t *dp = sc.up(pos);
    NEED(dx && dp);
    RUN("rope", shape, be_cuda_rope(dx, T, heads, d, stride, dp, 10000.0f));
    verdict(t, "rope", shape, rel_l2(down(dx, (size_t)T * stride).data(), ref.data(), (size_t)T * stride), 1e-5);   /* in place: no guards */
    return 0;
}

/* Embedding rows by token id (repeats and the table's last row included). */
static int check_gather(tester *t, int T, int h, int V)
{
    scope sc;
    char shape[64];
    snprintf(shape, sizeof shape, "T=%d h=%d vocab=%d", T, h, V);
    auto table = rvec(t, (size_t)V * h);
    std::vector<int32_t> ids(T);
    for (int i = 0; i < T; i++) ids[i] = (int32_t)((frand(t) + 1.0f) * 0.5f * (V - 1));
    ids[0] = V - 1;
    if (T > 2) ids[2] = ids[1];
    std::vector<float> ref((size_t)T * h);
    for (int i = 0; i < T; i++) memcpy(&ref[(size_t)i * h], &table[(size_t)ids[i] * h], h * sizeof(float));
    float *dt = sc.up(table), *dout = sc.poisoned((size_t)T * h);
    int32_t *di = sc.up(ids);
    NEED(dt && dout && di);
    RUN("gather_rows", shape, be_cuda_gather_rows(dout, dt, di, T, h));
    judge(t, "gather_rows", shape, dout, ref.data(), (size_t)T * h, 0);
    return 0;
}

/* Argmax per row, with planted ties (the lowest index wins, as be_cpu_argmax) and a max at the
 * row's last element; the error is the share of rows that disagree. */
static int check_argmax(tester *t, int rows, int n)
{
    scope sc;
    char shape[64];
    snprintf(shape, sizeof shape, "rows=%d n=%d with ties", rows, n);
    auto x = rvec(t, (size_t)rows * n);
    for (int r = 0; r < rows; r++) {
        float *row = &x[(size_t)r * n];
        if (r % 3 == 0) { int a = (int)((frand(t) + 1) * 0.25f * n), b = a + n / 3; row[a] = row[b] = 5.0f; }
        if (r % 3 == 1) row[n - 1] = 5.0f;
    }
    float *dx = sc.up(x);
    int32_t *dout = (int32_t *)sc.raw(rows * sizeof(int32_t));
    NEED(dx && dout);
    cudaMemset(dout, 0xff, rows * sizeof(int32_t));
    RUN("argmax", shape, be_cuda_argmax(dout, dx, rows, n));
    std::vector<int32_t> got(rows);
    cudaMemcpy(got.data(), dout, rows * sizeof(int32_t), cudaMemcpyDeviceToHost);
    int wrong = 0;
    for (int r = 0; r < rows; r++) wrong += got[r] != be_cpu_argmax(&x[(size_t)r * n], n);
    verdict(t, "argmax", shape, (double)wrong / rows, 0);
    return 0;
}

static int check_gemm(tester *t, int M, int N, int K)
{
    scope sc;
    auto x = rvec(t, (size_t)M * K), w = rvec(t, (size_t)K * N);
    /* The reference multiplies the bf16-rounded operands in fp32. */
    std::vector<__nv_bfloat16> wb(w.size());
    for (size_t i = 0; i < w.size(); i++) { wb[i] = __float2bfloat16_rn(w[i]); w[i] = __bfloat162float(wb[i]); }
    auto xr = x;
    for (auto &v : xr) v = be_cpu_bf16_to_f32(be_cpu_f32_to_bf16(v));
    std::vector<float> ref((size_t)M * N);
    be_cpu_matmul(ref.data(), xr.data(), w.data(), M, N, K, 0);
    float *dx = sc.up(x), *dout = sc.poisoned((size_t)M * N);
    __nv_bfloat16 *dw = sc.up(wb);
    void *scratch = sc.raw((size_t)M * K * 2);
    NEED(dx && dout && dw && scratch);
    char shape[64];
    snprintf(shape, sizeof shape, "M=%d N=%d K=%d", M, N, K);
    RUN("gemm bf16", shape, be_cuda_gemm(&t->ws, dout, dx, dw, M, N, K, 0, scratch));
    judge(t, "gemm bf16", shape, dout, ref.data(), (size_t)M * N, 2e-3);
    return 0;
}

/* A pool filled on the host by the reference writer, uploaded byte for byte (same layout). */
struct pool_pair {
    be_cpu_kv_pool cpu;
    be_cuda_pool dev;
    pool_pair() { memset(&cpu, 0, sizeof cpu); memset(&dev, 0, sizeof dev); }
    ~pool_pair() { be_cpu_kv_pool_free(&cpu); cudaFree(dev.data); cudaFree(dev.scales); }
    size_t scale_bytes() const { return cpu.scales ? (size_t)cpu.blocks * cpu.layers * 2 * cpu.block_size * cpu.kv_heads * sizeof(float) : 0; }
};

/* f(0) .. f(count - 1) on up to 16 host threads. The plain-C reference is single-threaded and
 * costs rows x keys x heads x head_dim; it is most of the selftest's time, so its rows run in
 * parallel (each job writes only its own rows; the jobs share nothing mutable). */
template <typename F> static void par_for(int count, F f)
{
    unsigned hw = std::thread::hardware_concurrency();
    int nt = std::min(count, (int)std::max(1u, std::min(hw, 16u)));
    std::atomic<int> next(0);
    auto work = [&] {
        for (int i; (i = next++) < count;) f(i);
    };
    std::vector<std::thread> th;
    for (int i = 1; i < nt; i++) th.emplace_back(work);
    work();
    for (auto &x : th) x.join();
}

/* be_cpu_attention_paged over rows [0, n) of one sequence, a row per job: row j is the query at
 * position start + j against keys 0 .. start + j, exactly as the n-row call computes it. */
static void ref_attention(float *out, const float *q, const be_cpu_kv_pool *pool, int layer, const int32_t *table, long start,
                          int n, int H, const be_cpu_attn_mask *mask)
{
    const size_t row = (size_t)H * pool->head_dim;
    par_for(n, [&](int j) { be_cpu_attention_paged(out + j * row, q + j * row, pool, layer, table, start + j, 1, H, mask); });
}

/* fp8 pools use this per-tensor scale: 0.37 is far from 1 and not a power of two, so a scale
 * that is missing or applied twice changes every value by a factor 2.7 (or 0.37). */
#define SELFTEST_FP8_SCALE 0.37f

/* A head vector's amplitude: between a quarter and all of amp, drawn per vector, so int8's
 * per-vector scales differ and one read from the wrong vector (or a shared scale) fails. */
static float vec_amp(tester *t, float amp)
{
    return amp * (0.625f + 0.375f * frand(t));
}

static int make_pool(tester *t, pool_pair *pp, scn_dtype dt, long blocks, int bs, int layers, int Hkv, int d, float amp)
{
    if (be_cpu_kv_pool_init(&pp->cpu, dt, blocks, bs, layers, Hkv, d)) {
        snprintf(be_cuda_last_error, sizeof be_cuda_last_error, "host pool of %ld blocks", blocks);
        return -1;
    }
    /* An fp8 scale that is not 1, so a kernel that drops it or applies it twice fails. */
    if (dt == SCN_DTYPE_FP8) pp->cpu.fp8_scale = SELFTEST_FP8_SCALE;
    std::vector<float> v(d);
    for (long b = 0; b < blocks; b++)
        for (int l = 0; l < layers; l++)
            for (int s = 0; s < bs; s++)
                for (int kv = 0; kv < 2; kv++)
                    for (int h = 0; h < Hkv; h++) {
                        float a = vec_amp(t, amp);
                        for (auto &x : v) x = frand(t) * a;
                        be_cpu_kv_write(&pp->cpu, b, s, l, kv, h, v.data());
                    }
    pp->dev = be_cuda_pool{(int)dt, bs, layers, Hkv, d, NULL, NULL, pp->cpu.fp8_scale};
    size_t bytes = be_cpu_kv_pool_bytes(&pp->cpu), sbytes = pp->scale_bytes();
    CUDA_CHECK(cudaMalloc(&pp->dev.data, bytes - sbytes));
    CUDA_CHECK(cudaMemcpy(pp->dev.data, pp->cpu.data, bytes - sbytes, cudaMemcpyHostToDevice));
    if (sbytes) {
        CUDA_CHECK(cudaMalloc(&pp->dev.scales, sbytes));
        CUDA_CHECK(cudaMemcpy(pp->dev.scales, pp->cpu.scales, sbytes, cudaMemcpyHostToDevice));
    }
    return 0;
}

/* KV write into layer 1 of 2. Target slots are compared after dequantisation; every other byte
 * of the pool (other slots, other layer, other blocks, int8 scales) must be unchanged, so a
 * write outside its slot fails. */
static int check_kv_write(tester *t, scn_dtype dt, int Hkv, int d)
{
    scope sc;
    int T = 37, bs = 16, H = 4 * Hkv, stride = (H + 2 * Hkv) * d, blocks = 8, layer = 1;
    char shape[80];
    snprintf(shape, sizeof shape, "%s T=%d Hkv=%d d=%d layer 1 of 2", dtname(dt), T, Hkv, d);
    pool_pair pp;
    if (make_pool(t, &pp, dt, blocks, bs, 2, Hkv, d, 2.0f)) return -1;
    auto rows = rvec(t, (size_t)T * stride, 3.0f);
    /* Each head vector its own amplitude (int8 scales per vector). */
    for (size_t i = 0; i < rows.size(); i += d) {
        float a = vec_amp(t, 1.0f);
        for (int e = 0; e < d; e++) rows[i + e] *= a;
    }
    std::vector<int32_t> blk(T), slot(T);
    /* Distinct (block, slot) per token, scattered over the blocks, some slots left alone. */
    for (int i = 0; i < T; i++) { blk[i] = (i * 3) % blocks; slot[i] = (i * 5 + i / blocks) % bs; }
    std::vector<char> hit((size_t)blocks * bs, 0);
    int used = 0;
    for (int i = 0; i < T; i++) {
        if (hit[(size_t)blk[i] * bs + slot[i]]) { slot[i] = -1; continue; }
        hit[(size_t)blk[i] * bs + slot[i]] = 1;
        used++;
    }
    /* Drop duplicates: compact to the distinct targets. */
    std::vector<int32_t> b2, s2;
    std::vector<float> r2;
    for (int i = 0; i < T; i++)
        if (slot[i] >= 0) { b2.push_back(blk[i]); s2.push_back(slot[i]); r2.insert(r2.end(), rows.begin() + (size_t)i * stride, rows.begin() + (size_t)(i + 1) * stride); }
    T = used;
    for (int i = 0; i < T; i++)
        for (int h = 0; h < Hkv; h++) {
            be_cpu_kv_write(&pp.cpu, b2[i], s2[i], layer, 0, h, r2.data() + (size_t)i * stride + (H + h) * d);
            be_cpu_kv_write(&pp.cpu, b2[i], s2[i], layer, 1, h, r2.data() + (size_t)i * stride + (H + Hkv + h) * d);
        }
    float *drows = sc.up(r2);
    int32_t *db = sc.up(b2), *ds = sc.up(s2);
    NEED(drows && db && ds);
    RUN("kv_write", shape, be_cuda_kv_write(&pp.dev, layer, drows + (size_t)H * d, drows + (size_t)(H + Hkv) * d, stride, db, ds, T));
    size_t bytes = be_cpu_kv_pool_bytes(&pp.cpu), sbytes = pp.scale_bytes();
    std::vector<uint8_t> data(bytes - sbytes);
    std::vector<float> scales(sbytes / sizeof(float));
    cudaMemcpy(data.data(), pp.dev.data, data.size(), cudaMemcpyDeviceToHost);
    if (sbytes) cudaMemcpy(scales.data(), pp.dev.scales, sbytes, cudaMemcpyDeviceToHost);
    be_cpu_kv_pool back = pp.cpu;
    back.data = data.data();
    back.scales = sbytes ? scales.data() : NULL;
    std::vector<float> a(d), b(d);
    double worst = 0;
    long outside = 0;
    size_t elem = dt == SCN_DTYPE_FP32 ? 4 : dt == SCN_DTYPE_FP16 || dt == SCN_DTYPE_BF16 ? 2 : 1;
    for (long bl = 0; bl < blocks; bl++)
        for (int l = 0; l < 2; l++)
            for (int kv = 0; kv < 2; kv++)
                for (int s = 0; s < bs; s++)
                    for (int h = 0; h < Hkv; h++) {
                        bool target = l == layer && hit[(size_t)bl * bs + s];
                        if (target) {
                            be_cpu_kv_read(&pp.cpu, bl, s, l, kv, h, a.data());
                            be_cpu_kv_read(&back, bl, s, l, kv, h, b.data());
                            worst = std::max(worst, rel_l2(b.data(), a.data(), d));
                        } else {
                            size_t vec = ((((size_t)bl * 2 + l) * 2 + kv) * bs + s) * Hkv + h;
                            if (memcmp(data.data() + vec * d * elem, pp.cpu.data + vec * d * elem, d * elem) ||
                                (sbytes && scales[vec] != pp.cpu.scales[vec]))
                                outside++;
                        }
                    }
    verdict(t, "kv_write", shape, worst, 1e-6);
    char shape2[96];
    snprintf(shape2, sizeof shape2, "%s: vectors changed outside the %d target slots", dtname(dt), T);
    verdict(t, "kv_write bounds", shape2, (double)outside, 0);
    return 0;
}

/* Attention only reads the pool: after every kernel of a case has run, its bytes (and int8
 * scales) must equal what was uploaded. */
static int pool_unchanged(tester *t, const pool_pair &pp, const char *base)
{
    size_t bytes = be_cpu_kv_pool_bytes(&pp.cpu), sbytes = pp.scale_bytes();
    std::vector<uint8_t> data(bytes - sbytes), scales(sbytes);
    if (cudaMemcpy(data.data(), pp.dev.data, data.size(), cudaMemcpyDeviceToHost) != cudaSuccess ||
        (sbytes && cudaMemcpy(scales.data(), pp.dev.scales, sbytes, cudaMemcpyDeviceToHost) != cudaSuccess)) {
        snprintf(be_cuda_last_error, sizeof be_cuda_last_error, "reading the pool back: %s", cudaGetErrorName(cudaGetLastError()));
        return -1;
    }
    long changed = 0;
    for (size_t i = 0; i < data.size(); i++) changed += data[i] != ((const uint8_t *)pp.cpu.data)[i];
    for (size_t i = 0; i < sbytes; i++) changed += scales[i] != ((const uint8_t *)pp.cpu.scales)[i];
    char shape[240];
    snprintf(shape, sizeof shape, "%s: pool bytes changed by the attention kernels", base);
    verdict(t, "attention bounds", shape, (double)changed, 0);
    return 0;
}

typedef int (*decode_fn)(be_cuda_ws *, float *, const float *, const be_cuda_pool *, int, const int32_t *, int, const int32_t *,
                         int, int, be_cuda_mask, int);

struct attn_case {
    scn_dtype dt;
    int bs, H, Hkv, d;
    be_cpu_attn_mask mask;
    float qamp, kvamp;      /* input spreads: large ones make large scores */
    const char *note;
    int max_chunk;          /* longest prefill chunk (the plain-C reference's cost grows with it) */
    bool whole = false;     /* prefill chunks are whole prompts (position 0 on) where they fit max_chunk */
};

/* Decode (v1 and v2, at the backend's split and at short splits) and prefill (flash and naive)
 * over one random two-layer pool, layer 1, scattered block tables. */
static int check_attention(tester *t, const attn_case &c, const std::vector<int> &ctx, bool prefill)
{
    int n = (int)ctx.size(), max_blocks = 0, layer = 1, H = c.H, d = c.d, bs = c.bs;
    for (int i = 0; i < n; i++) max_blocks = std::max(max_blocks, (ctx[i] + 1 + bs - 1) / bs);
    long blocks = (long)n * max_blocks;
    pool_pair pp;
    if (make_pool(t, &pp, c.dt, blocks, bs, 2, c.Hkv, d, c.kvamp)) return -1;
    scope sc;
    /* Sequence i uses every n-th block. */
    std::vector<int32_t> tab((size_t)n * max_blocks), start(n);
    for (int i = 0; i < n; i++) { start[i] = ctx[i]; for (int j = 0; j < max_blocks; j++) tab[(size_t)i * max_blocks + j] = j * n + i; }
    int longest = *std::max_element(ctx.begin(), ctx.end());
    char base[160];
    snprintf(base, sizeof base, "%s bs=%d H=%d/%d d=%d ctx<=%d%s%s%s", dtname(c.dt), bs, H, c.Hkv, d, longest,
             c.mask.window ? " sink+window" : "", c.mask.sliding ? " sliding" : "", c.note);
    auto q = rvec(t, (size_t)n * H * d, c.qamp);
    std::vector<float> ref((size_t)n * H * d);
    par_for(n, [&](int i) {
        be_cpu_attention_paged(ref.data() + (size_t)i * H * d, q.data() + (size_t)i * H * d, &pp.cpu, layer,
                               tab.data() + (size_t)i * max_blocks, ctx[i], 1, H, &c.mask);
    });
    float *dq = sc.up(q), *dout = sc.poisoned((size_t)n * H * d);
    int32_t *dtab = sc.up(tab), *dst = sc.up(start);
    NEED(dq && dout && dtab && dst);
    be_cuda_mask km = {c.mask.sink, c.mask.window, c.mask.sliding};
    /* v2 pipelined (cp.async ring) and direct, and v1. */
    struct { const char *name; decode_fn fn; bool v2; } kernels[] = {{"attn_decode v2", be_cuda_attn_decode_v2, true},
                                                                     {"attn_decode v2 direct", be_cuda_attn_decode_v2_direct, true},
                                                                     {"attn_decode v1", be_cuda_attn_decode_v1, false}};
    /* 768 keys x 16 heads is exactly 48 KiB of dynamic scores, so only the static arrays (and,
     * pipelined, the ring) push decode v2 past the limit that needs the opt-in
     * (attn_decode_v2.cu): run it where g > 8. 64-key splits make many partials to merge, and
     * splits past a short sequence's end (empty, max -inf) that the merge must skip. */
    int splits[] = {0, 64, 768};
    for (auto &k : kernels)
        for (int split : splits) {
            if (split == 768 && (!k.v2 || H / c.Hkv <= 8)) continue;
            char shape[200];
            int real = split ? split : k.v2 ? be_cuda_decode_split(&t->ws, n, c.Hkv, max_blocks * bs) : 512;
            snprintf(shape, sizeof shape, "%s split %d%s", base, real, split ? "" : " (the backend's)");
            cudaMemset(dout, 0xff, (size_t)n * H * d * sizeof(float));
            RUN(k.name, shape, k.fn(&t->ws, dout, dq, &pp.dev, layer, dtab, max_blocks, dst, n, H, km, split));
            judge(t, k.name, shape, dout, ref.data(), (size_t)n * H * d, 1e-4);
        }
    if (!prefill) return pool_unchanged(t, pp, base);
    /* Prefill: chunks of 1..96 new tokens on cached prefixes (their keys already in the pool). */
    std::vector<int32_t> pst(n), plen(n), prow(n);
    int rows = 0, max_len = 0;
    for (int i = 0; i < n; i++) {
        int len = c.whole && ctx[i] + 1 <= c.max_chunk ? ctx[i] + 1 : std::min(c.max_chunk, std::max(1, ctx[i] / 3 + (i % 2) * 7));
        pst[i] = ctx[i] + 1 - len;     /* the chunk ends at the sequence's last key */
        plen[i] = len; prow[i] = rows; rows += len; max_len = std::max(max_len, len);
    }
    auto pq = rvec(t, (size_t)rows * H * d, c.qamp);
    std::vector<float> pref((size_t)rows * H * d);
    for (int i = 0; i < n; i++)
        ref_attention(pref.data() + (size_t)prow[i] * H * d, pq.data() + (size_t)prow[i] * H * d, &pp.cpu, layer,
                      tab.data() + (size_t)i * max_blocks, pst[i], plen[i], H, &c.mask);
    float *dpq = sc.up(pq), *dpo = sc.poisoned((size_t)rows * H * d);
    int32_t *dps = sc.up(pst), *dpl = sc.up(plen), *dpr = sc.up(prow);
    NEED(dpq && dpo && dps && dpl && dpr);
    char shape[200];
    snprintf(shape, sizeof shape, "%s chunks<=%d", base, max_len);
    RUN("attn_prefill", shape, be_cuda_attn_prefill(dpo, dpq, &pp.dev, layer, dtab, max_blocks, dps, dpl, dpr, n, max_len, H, km));
    judge(t, "attn_prefill", shape, dpo, pref.data(), (size_t)rows * H * d, 1e-4);
    if (d == 64 || d == 128) {
        /* Tensor cores round Q * log2(e)/sqrt(d), K and V to bf16 before any arithmetic: each
         * score moves by about 2^-8 of the sizes of its terms, which at a score spread of ~30
         * is ~0.1 in the exponent and a relative error near 1e-2 against the fp32 reference (a
         * coin flip at a 1e-2 tolerance). The reference here is the plain-C kernel on those same
         * bf16 values: K and V of layer 1 copied into a bf16 pool (round to nearest even, as the
         * kernel's staging), and each query q replaced by bf16(q * c) * sqrt(d) / log2(e) with
         * c = log2(e) / sqrt(d), so the reference's score q' . k / sqrt(d) is the kernel's
         * base-2 score bf16(q * c) . k over log2(e), and exp of the one is exp2 of the other.
         * What is left is the kernel's rounding of P to bf16 before P V (its row sums stay
         * fp32): bf16 keeps 8 significant bits, so each weight p_j becomes p_j (1 + e_j) with
         * |e_j| <= 2^-8 (the row's largest, exp2(0) = 1, exactly). The output's error
         * sum_j p_j e_j v_j / l has, for independent e_j and zero-mean v_j, a relative L2 size of
         * rms(e) <= 2^-8 / sqrt(3) = 2.3e-3 (uniform over +-2^-8; less, as the half-ulp is
         * between 2^-9 and 2^-8 of a value). 5e-3 is twice that, summed over thousands of
         * outputs; a dropped or misplaced tile or mask is off by far more. */
        pool_pair pb;
        if (be_cpu_kv_pool_init(&pb.cpu, SCN_DTYPE_BF16, blocks, bs, 2, c.Hkv, d)) {
            snprintf(be_cuda_last_error, sizeof be_cuda_last_error, "host bf16 pool of %ld blocks", blocks);
            return -1;
        }
        std::vector<float> v(d);
        for (long b = 0; b < blocks; b++)
            for (int s = 0; s < bs; s++)
                for (int kv = 0; kv < 2; kv++)
                    for (int h = 0; h < c.Hkv; h++) {
                        be_cpu_kv_read(&pp.cpu, b, s, layer, kv, h, v.data());
                        be_cpu_kv_write(&pb.cpu, b, s, layer, kv, h, v.data());
                    }
        const float cq = 1.4426950408889634f * (1.0f / sqrtf((float)d)), back = sqrtf((float)d) / 1.4426950408889634f;
        auto bq = pq;
        for (auto &x : bq) x = be_cpu_bf16_to_f32(be_cpu_f32_to_bf16(x * cq)) * back;
        std::vector<float> bref((size_t)rows * H * d);
        for (int i = 0; i < n; i++)
            ref_attention(bref.data() + (size_t)prow[i] * H * d, bq.data() + (size_t)prow[i] * H * d, &pb.cpu, layer,
                          tab.data() + (size_t)i * max_blocks, pst[i], plen[i], H, &c.mask);
        cudaMemset(dpo, 0xff, (size_t)rows * H * d * sizeof(float));
        RUN("attn_prefill tc", shape, be_cuda_attn_prefill_tc(dpo, dpq, &pp.dev, layer, dtab, max_blocks, dps, dpl, dpr, n, max_len, H, km));
        judge(t, "attn_prefill tc", shape, dpo, bref.data(), (size_t)rows * H * d, 5e-3);
    }
    size_t scratch_floats = (size_t)H * max_len * (longest + 1);
    float *scratch = (float *)sc.raw(scratch_floats * sizeof(float));
    NEED(scratch);
    cudaMemset(dpo, 0xff, (size_t)rows * H * d * sizeof(float));
    RUN("attn_naive", shape, be_cuda_attn_naive(dpo, dpq, &pp.dev, layer, dtab, max_blocks, dps, dpl, dpr, n, H, km, scratch, scratch_floats));
    judge(t, "attn_naive", shape, dpo, pref.data(), (size_t)rows * H * d, 1e-4);
    return pool_unchanged(t, pp, base);
}

static int run_all(tester *t)
{
    int shapes[][2] = {{1, 64}, {7, 4096}, {33, 3584}};
    for (auto &s : shapes) if (check_rmsnorm_swiglu(t, s[0], s[1])) return -1;
    if (check_rope(t, 8, 128) || check_rope(t, 4, 64) || check_rope(t, 2, 256)) return -1;
    if (check_gather(t, 17, 4096, 1000) || check_argmax(t, 9, 32000) || check_argmax(t, 3, 128256)) return -1;
    int gemms[][3] = {{1, 6144, 4096}, {64, 4096, 4096}, {257, 28672, 4096}, {5, 1000, 512}};
    for (auto &g : gemms) if (check_gemm(t, g[0], g[1], g[2])) return -1;
    scn_dtype dts[] = {SCN_DTYPE_FP32, SCN_DTYPE_FP16, SCN_DTYPE_BF16, SCN_DTYPE_FP8, SCN_DTYPE_INT8};
    for (scn_dtype dt : dts) if (check_kv_write(t, dt, 8, 128) || check_kv_write(t, dt, 2, 64)) return -1;
    /* The plain-C reference is single-threaded and costs rows x keys x H x d: the sweeps use 8
     * query heads on 2 KV heads and chunks of at most 32 tokens, so the whole selftest stays
     * within about a minute; single cases take the large shapes. */
    /* Every dtype x block size x mask (GQA 8/2, head_dim 128). */
    be_cpu_attn_mask masks[] = {{0, 0, 0}, {4, 500, 0}, {0, 0, 300}};
    std::vector<int> ctx = {0, 37, 300, 1025};
    for (scn_dtype dt : dts)
        for (int bs : {8, 16, 32})
            for (auto &m : masks)
                if (check_attention(t, attn_case{dt, bs, 8, 2, 128, m, 1.0f, 2.0f, "", 32}, ctx, true)) return -1;
    /* Query heads per KV head 1, 4, 8, 16 at head_dim 64, 128, 256 (bf16, blocks of 16). */
    std::vector<int> ctx2 = {0, 37, 300, 1025, 2000};
    for (int d : {64, 128, 256})
        for (int g : {1, 4, 8, 16})
            if (check_attention(t, attn_case{SCN_DTYPE_BF16, 16, 2 * g, 2, d, masks[0], 1.0f, 2.0f, "", 32}, ctx2, true)) return -1;
    /* Head groups that decode v2 pads (its template takes g rounded up to 1, 4, 8, 16): g = 7
     * (14/2, run as 8, one idle lane group) and g = 2 (4/2, run as 4), so a padded head that
     * reads or writes past the group fails; fp8 with a window at d = 64 as well. */
    for (int H : {14, 4})
        if (check_attention(t, attn_case{SCN_DTYPE_BF16, 16, H, 2, 128, masks[0], 1.0f, 2.0f, " padded group", 32}, ctx2, true))
            return -1;
    if (check_attention(t, attn_case{SCN_DTYPE_FP8, 16, 14, 2, 64, masks[1], 1.0f, 2.0f, " padded group", 32}, ctx2, true))
        return -1;
    /* Llama-3-8B's heads (32/8) with chunks over several 64-row query tiles, with and without a
     * sliding window. */
    for (auto &m : {masks[0], masks[2]})
        if (check_attention(t, attn_case{SCN_DTYPE_BF16, 16, 32, 8, 128, m, 1.0f, 2.0f, " long chunks", 160}, {200, 700, 1}, true))
            return -1;
    /* Adversarial: large scores (standard deviation about 30, so the largest near 100: exp
     * overflows in fp32 unless the max is subtracted). q uniform in +-24 (variance 192), k in
     * +-a with a uniform in [0.25, 1] x 5.5 per vector (E[a^2] = 13.2 by vec_amp): a score's
     * variance is 128 x 192 x 13.2/3 / 128 = 845, a standard deviation of 29. */
    for (scn_dtype dt : {SCN_DTYPE_FP32, SCN_DTYPE_BF16, SCN_DTYPE_INT8})
        if (check_attention(t, attn_case{dt, 16, 32, 8, 128, masks[0], 24.0f, 5.5f, " large scores", 64}, ctx, true)) return -1;
    /* The same spread at head_dim 64 (a score's variance, d x 192 x 13.2/3 / d, does not depend
     * on d), fp8 (decode v2's 8-byte copies; 5.5 / 0.37 = 15 is far inside E4M3's range) with a
     * window: the tensor-core prefill's load-convert path and masked tiles at large scores. */
    if (check_attention(t, attn_case{SCN_DTYPE_FP8, 16, 8, 2, 64, masks[1], 24.0f, 5.5f, " large scores", 64}, ctx, true))
        return -1;
    /* Contexts ending exactly on a block boundary (full last block) and one key into a block. */
    if (check_attention(t, attn_case{SCN_DTYPE_FP16, 16, 32, 8, 128, masks[0], 1.0f, 2.0f, " block edges", 64}, {15, 16, 31, 32, 63},
                        true))
        return -1;
    /* Tensor-core prefill over every KV dtype (bf16 takes the cp.async path, the others the
     * load-convert-store path) with chunks of up to 130 rows: three 64-row query tiles, the last
     * with 2 rows (partial warps, dead warps), key tiles that end part-way (zero-filled keys),
     * tiles fully visible (no mask) before the diagonal, and each mask: sink + window, a sliding
     * layer (tiles before the window skipped). Head_dim 64 as well. */
    struct { scn_dtype dt; int m, d; } tcs[] = {{SCN_DTYPE_FP32, 0, 128}, {SCN_DTYPE_FP16, 1, 128}, {SCN_DTYPE_BF16, 2, 128},
                                                {SCN_DTYPE_FP8, 0, 128}, {SCN_DTYPE_INT8, 2, 128}, {SCN_DTYPE_BF16, 1, 64},
                                                {SCN_DTYPE_INT8, 0, 64}, {SCN_DTYPE_FP16, 2, 64}};
    for (auto &k : tcs)
        if (check_attention(t, attn_case{k.dt, 16, 8, 2, k.d, masks[k.m], 1.0f, 2.0f, " tc tiles", 130}, {700, 150, 90}, true))
            return -1;
    /* Whole prompts: chunks that start at position 0, the first chunk of every prompt (the cases
     * above all start on a cached prefix). Query and key tiles then line up: the diagonal tile is
     * the block's own first tile, a warp's last visible key is its last row, and 64- and 65-row
     * chunks end on and one past a tile edge. Both tensor-core staging paths, each head_dim, no
     * mask and a sliding layer shorter than a tile (a window start inside the first tile). */
    be_cpu_attn_mask slide40 = {0, 0, 40};
    struct { scn_dtype dt; int d; } wholes[] = {{SCN_DTYPE_BF16, 128}, {SCN_DTYPE_FP16, 64}};
    for (auto &k : wholes)
        for (auto &m : {masks[0], slide40}) {
            attn_case wc{k.dt, 16, 8, 2, k.d, m, 1.0f, 2.0f, " whole prompts", 130};
            wc.whole = true;
            if (check_attention(t, wc, {129, 63, 64, 0}, true)) return -1;
        }
    /* Decode v2's ring in its other layouts: fp32 (two 16-byte parts a lane) at head_dim 256 and
     * 16 heads a group (the largest shared memory: 64 KiB of scores at 1024-key splits plus a
     * 16 KiB ring), int8 (the ring of scales) at head_dim 64 and one head, fp8 (8-byte copies) at
     * head_dim 256; contexts from empty to several splits. */
    if (check_attention(t, attn_case{SCN_DTYPE_FP32, 16, 32, 2, 256, masks[0], 1.0f, 2.0f, " ring", 32}, {0, 37, 3000}, false) ||
        check_attention(t, attn_case{SCN_DTYPE_INT8, 8, 2, 2, 64, masks[1], 1.0f, 2.0f, " ring", 32}, {0, 37, 1025, 3000}, false) ||
        check_attention(t, attn_case{SCN_DTYPE_FP8, 32, 8, 2, 256, masks[2], 1.0f, 2.0f, " ring", 32}, {5, 1025, 3000}, false))
        return -1;
    /* A long prefill: a 96-row chunk ending at 4k keys (64 key tiles, most without a mask). */
    if (check_attention(t, attn_case{SCN_DTYPE_BF16, 16, 8, 2, 128, masks[0], 1.0f, 2.0f, " long prefill", 96}, {4095, 40}, true))
        return -1;
    /* A long context: 16k keys, many splits, with a window mask. */
    if (check_attention(t, attn_case{SCN_DTYPE_BF16, 16, 32, 8, 128, masks[1], 1.0f, 2.0f, " long", 32}, {16383, 5000}, false))
        return -1;
    return 0;
}

/* Returns the number of failing checks, -1 when a CUDA error lost the context (message in
 * msg), or -2 when there is no usable device (message in msg). */
extern "C" int be_cuda_selftest(report_fn report, void *ud, char *msg, size_t n)
{
    if (be_cuda_probe_devices(msg, n) <= 0) return -2;
    tester t = {report, ud, 0, 0x2545F4914F6CDD1DULL, {}};
    be_cuda_last_error[0] = 0;
    if (be_cuda_ws_init(&t.ws)) { snprintf(msg, n, "%s", be_cuda_last_error); return -1; }
    int rc = run_all(&t);
    if (rc == 0) {
        int f = 0;
        rc = be_cuda_step_check(report, ud, &f);
        t.failures += f;
    }
    be_cuda_ws_free(&t.ws);
    if (rc) { snprintf(msg, n, "%s", be_cuda_last_error); return -1; }
    return t.failures;
}
