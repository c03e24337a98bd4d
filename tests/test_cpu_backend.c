/* test_cpu_backend.c: the CPU reference backend against direct definitions: number formats by
 * their bit patterns, paged attention against attention over a plain array, prefix reuse
 * against recomputation, quantised KV against fp32 within stated bounds, windows against
 * explicit key sets, and batch independence. OpenBLAS is opened at run time (cpu_blas.h): a
 * GEMM against a product worked by hand, the binary's start-up without it, and exit 69 when
 * the CPU backend is asked for and it does not load. */
#include "tests.h"
#include "../backend/be.h"
#include "../backend/cpu/cpu_backend.h"
#include "../backend/cpu/cpu_blas.h"
#include "../backend/cpu/cpu_ops.h"
#include "../backend/cpu/kv_format.h"
#include "../sim/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

START_TEST(number_formats_by_bit_pattern)
{
    /* IEEE half: 1.0 = 0x3c00, -2.0 = 0xc000, 65504 = 0x7bff, 2^-24 = 0x0001 (subnormal). */
    ck_assert_uint_eq(be_cpu_f32_to_f16(1.0f), 0x3c00);
    ck_assert_uint_eq(be_cpu_f32_to_f16(-2.0f), 0xc000);
    ck_assert_uint_eq(be_cpu_f32_to_f16(65504.0f), 0x7bff);
    ck_assert_uint_eq(be_cpu_f32_to_f16(ldexpf(1, -24)), 0x0001);
    ck_assert(be_cpu_f16_to_f32(0x3555) == 0.333251953125f);
    /* bf16 is the top half of fp32: 1.0 = 0x3f80; rounding to nearest even. */
    ck_assert_uint_eq(be_cpu_f32_to_bf16(1.0f), 0x3f80);
    ck_assert(be_cpu_bf16_to_f32(0x4049) == 3.140625f);
    /* E4M3: 1.0 = 0x38, 448 = 0x7e (max; larger saturates), 2^-9 = 0x01, 1.125 = 0x39. */
    ck_assert_uint_eq(be_cpu_f32_to_e4m3(1.0f), 0x38);
    ck_assert_uint_eq(be_cpu_f32_to_e4m3(448.0f), 0x7e);
    ck_assert_uint_eq(be_cpu_f32_to_e4m3(1000.0f), 0x7e);
    ck_assert_uint_eq(be_cpu_f32_to_e4m3(ldexpf(1, -9)), 0x01);
    ck_assert_uint_eq(be_cpu_f32_to_e4m3(1.125f), 0x39);
    ck_assert(be_cpu_e4m3_to_f32(0xb9) == -1.125f);
    /* Round trips stay within each format's unit roundoff, for every value in a range. */
    sim_rng r;
    sim_rng_seed(&r, 3);
    for (int i = 0; i < 100000; i++) {
        float x = (float)((sim_rng_uniform(&r) * 2 - 1) * ldexp(1, (int)(sim_rng_uniform(&r) * 16) - 6));
        ck_assert(fabsf(be_cpu_f16_to_f32(be_cpu_f32_to_f16(x)) - x) <= BE_CPU_F16_EPS * fabsf(x) + ldexpf(1, -25));
        ck_assert(fabsf(be_cpu_bf16_to_f32(be_cpu_f32_to_bf16(x)) - x) <= BE_CPU_BF16_EPS * fabsf(x));
        if (fabsf(x) <= 448.0f)   /* beyond its largest value E4M3 saturates */
            ck_assert(fabsf(be_cpu_e4m3_to_f32(be_cpu_f32_to_e4m3(x)) - x) <= BE_CPU_E4M3_EPS * fabsf(x) + 0.5f * ldexpf(1, -9));
    }
}
END_TEST

enum { D = 16, HQ = 4, HKV = 2, BS = 4, P = 37 };

/* Attention over plain arrays, straight from the definition: softmax(q k^T / sqrt(d)) v. */
static void attention_direct(float *out, const float *q, const float *K, const float *V, long p, int h,
                             const be_cpu_attn_mask *m)
{
    int kh = h / (HQ / HKV);
    double w[P + 1], mx = -INFINITY, sum = 0;
    for (long k = 0; k <= p; k++) {
        if (!be_cpu_attn_visible(m, p, k)) { w[k] = -INFINITY; continue; }
        double s = 0;
        for (int i = 0; i < D; i++) s += q[i] * K[(k * HKV + kh) * D + i];
        w[k] = s / sqrt(D);
        if (w[k] > mx) mx = w[k];
    }
    for (int i = 0; i < D; i++) out[i] = 0;
    double acc[D] = {0};
    for (long k = 0; k <= p; k++) {
        if (w[k] == -INFINITY) continue;
        double e = exp(w[k] - mx);
        sum += e;
        for (int i = 0; i < D; i++) acc[i] += e * V[(k * HKV + kh) * D + i];
    }
    for (int i = 0; i < D; i++) out[i] = (float)(acc[i] / sum);
}

static float K[(P + 1) * HKV * D], V[(P + 1) * HKV * D], Q[HQ * D];

/* Fills a pool for one sequence of P + 1 positions through `table`. */
static void fill(be_cpu_kv_pool *pool, const int32_t *table)
{
    for (long k = 0; k <= P; k++)
        for (int kh = 0; kh < HKV; kh++) {
            be_cpu_kv_write(pool, table[k / BS], (int)(k % BS), 0, 0, kh, K + (k * HKV + kh) * D);
            be_cpu_kv_write(pool, table[k / BS], (int)(k % BS), 0, 1, kh, V + (k * HKV + kh) * D);
        }
}

static void random_qkv(uint64_t seed)
{
    sim_rng r;
    sim_rng_seed(&r, seed);
    for (size_t i = 0; i < sizeof K / sizeof K[0]; i++) { K[i] = (float)sim_rng_normal(&r); V[i] = (float)sim_rng_normal(&r); }
    for (size_t i = 0; i < sizeof Q / sizeof Q[0]; i++) Q[i] = (float)sim_rng_normal(&r);
}

static double rel_err(const float *a, const float *b, int n)
{
    double num = 0, den = 0;
    for (int i = 0; i < n; i++) { num += (a[i] - b[i]) * (double)(a[i] - b[i]); den += (double)b[i] * b[i]; }
    return sqrt(num / den);
}

START_TEST(paged_attention_equals_contiguous)
{
    random_qkv(11);
    int nb = (P + BS) / BS;
    int32_t scattered[16], in_order[16];
    for (int i = 0; i < nb; i++) { in_order[i] = i; scattered[i] = (i * 7 + 3) % 16; }
    be_cpu_kv_pool a, b;
    ck_assert_int_eq(be_cpu_kv_pool_init(&a, SCN_DTYPE_FP32, 16, BS, 1, HKV, D), 0);
    ck_assert_int_eq(be_cpu_kv_pool_init(&b, SCN_DTYPE_FP32, 16, BS, 1, HKV, D), 0);
    fill(&a, in_order);
    fill(&b, scattered);
    be_cpu_attn_mask m = {0};
    float oa[HQ * D], ob[HQ * D], ref[D];
    be_cpu_attention_paged(oa, Q, &a, 0, in_order, P, 1, HQ, &m);
    be_cpu_attention_paged(ob, Q, &b, 0, scattered, P, 1, HQ, &m);
    ck_assert(memcmp(oa, ob, sizeof oa) == 0);   /* same keys, same order: bit-identical */
    for (int h = 0; h < HQ; h++) {
        attention_direct(ref, Q + h * D, K, V, P, h, &m);
        ck_assert_msg(rel_err(oa + h * D, ref, D) < 1e-6, "head %d: %g", h, rel_err(oa + h * D, ref, D));
    }
    be_cpu_kv_pool_free(&a);
    be_cpu_kv_pool_free(&b);
}
END_TEST

START_TEST(quantised_kv_within_stated_bounds)
{
    /* Stated bounds on the attention output's relative L2 error against fp32 storage: four times
     * the format's unit roundoff (K errors move the scores, V errors the weighted sum; both are
     * relative to the values stored). int8 keeps one scale per head vector: its roundoff is half
     * a step of amax / 127, about 1 / 254 of the largest element. */
    static const struct { scn_dtype dt; double bound; } cases[] = {
        {SCN_DTYPE_FP16, 4 * BE_CPU_F16_EPS}, {SCN_DTYPE_BF16, 4 * BE_CPU_BF16_EPS},
        {SCN_DTYPE_INT8, 4.0 / 254}, {SCN_DTYPE_FP8, 4 * BE_CPU_E4M3_EPS},
    };
    int32_t table[16];
    for (int i = 0; i < 16; i++) table[i] = i;
    be_cpu_attn_mask m = {0};
    for (int trial = 0; trial < 5; trial++) {
        random_qkv(100 + trial);
        be_cpu_kv_pool ref;
        be_cpu_kv_pool_init(&ref, SCN_DTYPE_FP32, 16, BS, 1, HKV, D);
        fill(&ref, table);
        float oref[HQ * D], oq[HQ * D];
        be_cpu_attention_paged(oref, Q, &ref, 0, table, P, 1, HQ, &m);
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            be_cpu_kv_pool q;
            ck_assert_int_eq(be_cpu_kv_pool_init(&q, cases[c].dt, 16, BS, 1, HKV, D), 0);
            fill(&q, table);
            be_cpu_attention_paged(oq, Q, &q, 0, table, P, 1, HQ, &m);
            double e = rel_err(oq, oref, HQ * D);
            ck_assert_msg(e < cases[c].bound, "%s: error %.3g over bound %.3g", scn_dtype_name(cases[c].dt), e, cases[c].bound);
            ck_assert_msg(e > 0 || cases[c].dt == SCN_DTYPE_FP32, "%s stored exactly?", scn_dtype_name(cases[c].dt));
            be_cpu_kv_pool_free(&q);
        }
        be_cpu_kv_pool_free(&ref);
    }
}
END_TEST

START_TEST(sink_window_attends_exactly_its_keys)
{
    random_qkv(21);
    int32_t table[16];
    for (int i = 0; i < 16; i++) table[i] = i;
    be_cpu_kv_pool pool;
    be_cpu_kv_pool_init(&pool, SCN_DTYPE_FP32, 16, BS, 1, HKV, D);
    fill(&pool, table);
    be_cpu_attn_mask m = {.sink = 4, .window = 8};
    float out[HQ * D];
    be_cpu_attention_paged(out, Q, &pool, 0, table, P, 1, HQ, &m);
    /* The same attention over a copy holding only keys {0..3} and {30..37}: sink and window. */
    static float K2[(P + 1) * HKV * D], V2[(P + 1) * HKV * D];
    int n = 0;
    for (long k = 0; k <= P; k++) {
        if (!(k < 4 || k > P - 8)) continue;
        memcpy(K2 + (size_t)n * HKV * D, K + k * HKV * D, sizeof(float) * HKV * D);
        memcpy(V2 + (size_t)n * HKV * D, V + k * HKV * D, sizeof(float) * HKV * D);
        n++;
    }
    ck_assert_int_eq(n, 12);
    memcpy(K, K2, sizeof K2);
    memcpy(V, V2, sizeof V2);
    be_cpu_attn_mask none = {0};
    for (int h = 0; h < HQ; h++) {
        float ref[D];
        attention_direct(ref, Q + h * D, K, V, n - 1, h, &none);
        ck_assert_msg(rel_err(out + h * D, ref, D) < 1e-6, "head %d", h);
    }
    be_cpu_kv_pool_free(&pool);
}
END_TEST

/* A tiny model on the real backend, for the step-level tests. */
static void *ctx;
static scn_model tiny(void)
{
    scn_model m = {.layers = 2, .hidden = 64, .heads = 4, .kv_heads = 2, .head_dim = 16, .intermediate = 96,
                   .vocab = 300, .max_position = 512, .norms_per_layer = 2, .weight_dtype = SCN_DTYPE_FP32};
    snprintf(m.name, sizeof m.name, "test");
    return m;
}

static void open_tiny(scn_dtype dt)
{
    be_config cfg = {.model = tiny(), .kv_dtype = dt, .block_size = 8, .seed = 5};
    char err[256];
    ck_assert_int_eq(BE_CPU.create(&ctx, &cfg, err, sizeof err), BE_OK);
    ck_assert_int_eq(BE_CPU.alloc_kv(ctx, 64, err, sizeof err), BE_OK);
}

/* How far one token's hidden state may move when only the batch around it changes. Batching
 * changes the GEMMs' row counts, and with them the BLAS kernel and the order in which it sums
 * (OpenBLAS picks kernels per CPU and shape: GEMMs are not batch-invariant). Two orders of a
 * length-K fp32 dot product differ by at most 2 γ_K Σ|a_i b_i|, γ_K ≈ K u, u = 2^-24 (Higham,
 * Accuracy and Stability of Numerical Algorithms, 2002, §3.1); for terms of random sign
 * Σ|a_i b_i| is about √K |Σ a_i b_i|, so the relative change is about 2 K^1.5 u per product.
 * The tiny model chains 2 layers x 4 products (QKV, out, gate|up, down) plus the LM head, and
 * its longest sum is K = 96 (the MLP). KV stored in fp16 adds one rounding that a changed input
 * can push to the other side: half an fp16 ulp, 2^-11 relative. A sequence mixed up with
 * another moves by O(1), far outside this. */
#define TINY_CHAIN 9
#define TINY_K 96.0
static double batch_tol(bool fp16_kv)
{
    return TINY_CHAIN * 2.0 * pow(TINY_K, 1.5) * 0x1p-24 + (fp16_kv ? 0x1p-11 : 0.0);
}

static sim_batch_seq seqspec(long id, int start, int n, const int32_t *blocks, uint64_t body)
{
    sim_batch_seq q = {.req_id = id, .new_tokens = n, .start = start, .context = start, .blocks = blocks,
                       .n_blocks = 16, .prefix_seed = 77, .prefix_len = 32, .body_seed = body};
    return q;
}

START_TEST(prefix_hit_equals_recomputation)
{
    open_tiny(SCN_DTYPE_FP32);
    /* Cold: 48 tokens (a 32-token shared prefix, then 16 of its own) in blocks 0..5. */
    int32_t cold_blocks[16] = {0, 1, 2, 3, 4, 5};
    sim_batch_seq a = seqspec(1, 0, 48, cold_blocks, 1000);
    sim_batch ba = {1, &a, 48, 0};
    float ha[64], hb[64];
    int32_t ta, tb;
    ck_assert_int_eq(be_cpu_forward(ctx, &ba, &ta, ha), 0);
    /* Warm: the same request reuses the prefix's blocks 0..3 and computes only positions 32..47. */
    int32_t warm_blocks[16] = {0, 1, 2, 3, 10, 11};
    sim_batch_seq b = seqspec(2, 32, 16, warm_blocks, 1000);
    sim_batch bb = {1, &b, 16, 0};
    ck_assert_int_eq(be_cpu_forward(ctx, &bb, &tb, hb), 0);
    ck_assert_msg(rel_err(hb, ha, 64) < batch_tol(false), "hidden differs: %g (bound %g)", rel_err(hb, ha, 64),
                  batch_tol(false));
    ck_assert_int_eq(ta, tb);
    BE_CPU.destroy(ctx);
}
END_TEST

START_TEST(a_sequence_does_not_depend_on_its_batch)
{
    open_tiny(SCN_DTYPE_FP16);
    int32_t blk_a[16] = {0, 1, 2, 3}, blk_b[16] = {20, 21, 22, 23}, blk_c[16] = {40, 41, 42, 43};
    sim_batch_seq alone = seqspec(1, 0, 20, blk_a, 5);
    sim_batch b1 = {1, &alone, 20, 0};
    float h1[64], h3[3 * 64];
    int32_t t1, t3[3];
    ck_assert_int_eq(be_cpu_forward(ctx, &b1, &t1, h1), 0);
    sim_batch_seq three[3] = {seqspec(2, 0, 7, blk_b, 6), seqspec(1, 0, 20, blk_a, 5), seqspec(3, 0, 13, blk_c, 7)};
    sim_batch b3 = {3, three, 40, 0};
    ck_assert_int_eq(be_cpu_forward(ctx, &b3, t3, h3), 0);
    ck_assert_msg(rel_err(h3 + 64, h1, 64) < batch_tol(true), "%g (bound %g)", rel_err(h3 + 64, h1, 64), batch_tol(true));
    ck_assert_int_eq(t3[1], t1);
    /* Decode steps continue it the same way, alone or batched. */
    sim_batch_seq d1 = seqspec(1, 20, 1, blk_a, 5), d3[2] = {seqspec(3, 13, 1, blk_c, 7), seqspec(1, 20, 1, blk_a, 5)};
    sim_batch s1 = {1, &d1, 1, 0}, s3 = {2, d3, 2, 0};
    ck_assert_int_eq(be_cpu_forward(ctx, &s1, &t1, h1), 0);
    ck_assert_int_eq(be_cpu_forward(ctx, &s3, t3, h3), 0);
    ck_assert_msg(rel_err(h3 + 64, h1, 64) < batch_tol(true), "%g (bound %g)", rel_err(h3 + 64, h1, 64), batch_tol(true));
    BE_CPU.destroy(ctx);
}
END_TEST

START_TEST(refuses_what_it_cannot_run)
{
    char err[256];
    scn_model m = tiny();
    m.experts = 8;
    m.experts_per_token = 2;
    m.moe_intermediate = 32;
    be_config cfg = {.model = m, .kv_dtype = SCN_DTYPE_FP32, .block_size = 8};
    ck_assert_int_eq(BE_CPU.create(&ctx, &cfg, err, sizeof err), BE_E_CONFIG);
    ck_assert_msg(strstr(err, "mixture of experts"), "%s", err);
    cfg.model = tiny();
    cfg.kv_dtype = SCN_DTYPE_INT4;
    ck_assert_int_eq(BE_CPU.create(&ctx, &cfg, err, sizeof err), BE_E_CONFIG);
    ck_assert_ptr_null(be_find("tpu", err, sizeof err));
    ck_assert_msg(strstr(err, "unknown backend"), "%s", err);
}
END_TEST

START_TEST(matmul_through_opened_blas)
{
    /* [1 2 3; 4 5 6] x [7 8; 9 10; 11 12] = [58 64; 139 154] (by hand); accumulate adds it. */
    const float x[6] = {1, 2, 3, 4, 5, 6}, w[6] = {7, 8, 9, 10, 11, 12};
    float out[4] = {1, 1, 1, 1};
    char err[2048];
    ck_assert_msg(be_cpu_blas_open(err, sizeof err) == 0, "%s", err);
    ck_assert(be_cpu_blas_loaded());
    be_cpu_matmul(out, x, w, 2, 2, 3, 1);
    ck_assert(out[0] == 59 && out[1] == 65 && out[2] == 140 && out[3] == 155);
    be_cpu_matmul(out, x, w, 2, 2, 3, 0);
    ck_assert(out[0] == 58 && out[1] == 64 && out[2] == 139 && out[3] == 154);
}
END_TEST

/* Without OpenBLAS (a process where it does not load), be_cpu_matmul, which the CUDA plugin's
 * host references call, sums the same product in plain loops. Check forks each test, so this
 * process has not opened it yet unless CK_FORK=no ran the test above first. */
START_TEST(matmul_without_blas_sums_in_loops)
{
    const float x[6] = {1, 2, 3, 4, 5, 6}, w[6] = {7, 8, 9, 10, 11, 12};
    float out[4] = {1, 1, 1, 1};
    char err[2048];
    int fresh = !be_cpu_blas_loaded();
    setenv("KVPLAN_OPENBLAS", "/nonexistent/libopenblas.so.0", 1);
    if (fresh) {
        ck_assert_int_eq(be_cpu_blas_open(err, sizeof err), -1);
        ck_assert_msg(strstr(err, "tried /nonexistent/libopenblas.so.0"), "%s", err);
    }
    be_cpu_matmul(out, x, w, 2, 2, 3, 1);
    ck_assert(out[0] == 59 && out[1] == 65 && out[2] == 140 && out[3] == 155);
    be_cpu_matmul(out, x, w, 2, 2, 3, 0);
    ck_assert(out[0] == 58 && out[1] == 64 && out[2] == 139 && out[3] == 154);
    unsetenv("KVPLAN_OPENBLAS");
}
END_TEST

/* The dynamic loader's own account of what the binary opened (glibc's LD_DEBUG=files, on
 * stderr), set for the binary alone (not the shell that starts it). */
static int opened_files(const char *args, char *err, size_t n)
{
    char path[512], cmd[3000];
    snprintf(path, sizeof path, "%s", t_write("ld-files.txt", ""));
    snprintf(cmd, sizeof cmd, "env LD_DEBUG=files %s %s >/dev/null 2>%s", getenv("KVPLAN_BIN"), args, path);
    int rc = system(cmd);
    FILE *f = fopen(path, "r");
    size_t got = f ? fread(err, 1, n - 1, f) : 0;
    err[got] = 0;
    if (f) fclose(f);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

START_TEST(blas_opened_only_by_the_cpu_backend)
{
    static char err[1 << 18];
    char args[1200];
    /* The model executor never opens it: not at start-up, not while simulating. */
    snprintf(args, sizeof args, "simulate %s/chat.yaml --no-db --set workload.requests=20", getenv("KVPLAN_LIBRARY"));
    ck_assert_int_eq(opened_files(args, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "file=libc.so"), "LD_DEBUG=files printed nothing: %.2000s", err);
    ck_assert_msg(!strstr(err, "libopenblas"), "simulate loaded OpenBLAS: %.4000s", err);
    /* The CPU backend does (so the check above can see it). */
    snprintf(args, sizeof args, "run %s/tiny-cpu.yaml --no-db --set workload.requests=2", getenv("KVPLAN_LIBRARY"));
    ck_assert_int_eq(opened_files(args, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "libopenblas"), "the CPU backend ran without opening OpenBLAS");
}
END_TEST

START_TEST(cpu_backend_without_blas_exits_69)
{
    static char out[1 << 16], err[1 << 14];
    char args[1200];
    snprintf(args, sizeof args, "run %s/tiny-cpu.yaml --no-db --set workload.requests=2", getenv("KVPLAN_LIBRARY"));
    setenv("KVPLAN_OPENBLAS", "/nonexistent/libopenblas.so.0", 1);
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 69);
    ck_assert_msg(strstr(err, "needs OpenBLAS") && strstr(err, "tried /nonexistent/libopenblas.so.0"), "%s", err);
    /* A library that loads but is not OpenBLAS is refused by name. */
    setenv("KVPLAN_OPENBLAS", "libm.so.6", 1);
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 69);
    ck_assert_msg(strstr(err, "libm.so.6 has no cblas_sgemm: not OpenBLAS"), "%s", err);
    /* Commands that do not run the CPU backend do not care. */
    snprintf(args, sizeof args, "simulate %s/tiny-cpu.yaml --no-db --set workload.requests=2", getenv("KVPLAN_LIBRARY"));
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 0);
    unsetenv("KVPLAN_OPENBLAS");
}
END_TEST

Suite *suite_cpu_backend(void)
{
    Suite *su = suite_create("cpu_backend");
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, number_formats_by_bit_pattern);
    tcase_add_test(tc, paged_attention_equals_contiguous);
    tcase_add_test(tc, quantised_kv_within_stated_bounds);
    tcase_add_test(tc, sink_window_attends_exactly_its_keys);
    tcase_add_test(tc, prefix_hit_equals_recomputation);
    tcase_add_test(tc, a_sequence_does_not_depend_on_its_batch);
    tcase_add_test(tc, refuses_what_it_cannot_run);
    tcase_add_test(tc, matmul_through_opened_blas);
    tcase_add_test(tc, matmul_without_blas_sums_in_loops);
    tcase_add_test(tc, blas_opened_only_by_the_cpu_backend);
    tcase_add_test(tc, cpu_backend_without_blas_exits_69);
    suite_add_tcase(su, tc);
    return su;
}
