/* test_speed_paths.c: the simulator's fast paths against the plain computations they replace,
 * bit for bit: the GEMM tile memo (kept per 64-row band) against a search over every candidate
 * tile, and the expert-parallel step context (dense stand-ins built once, the experts and
 * collectives kept by token count and CUDA-graph size) against pricing each step from scratch,
 * down to a whole simulation with an executor that prices every step with kv_moe_step_time. */
#include "tests.h"
#include "../model/kv_model.h"
#include "../model/kv_moe_parallel.h"
#include "../sim/alloc_policy.h"

#include <sys/resource.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The rule docs/cost-model.md ("GEMM tiles") states, written out plainly: the best over the
 * swapped skinny tile (M <= 64) and CUTLASS's eight tiles of the real work over the padded work
 * of the tile's waves, K split when the tiles do not fill the SMs. */
static double ref_tile(double sm, double M, double N, double K, double tm, double tn, double tk)
{
    double mt = ceil(M / tm), nt = ceil(N / tn), kt = ceil(K / tk), tiles = mt * nt;
    double split = tiles < sm ? fmax(1, fmin(kt, floor(sm / tiles))) : 1;
    double units = tiles * split, waves = ceil(units / sm), k_per = ceil(kt / split);
    return M * N * K / (waves * sm * tm * tn * tk * k_per);
}

static double ref_gemm(const scn_hardware *hw, double M, double N, double K, scn_dtype dt)
{
    static const double tiles[][2] = {{256, 128}, {128, 256}, {256, 64}, {64, 256}, {128, 128}, {128, 64}, {64, 128}, {64, 64}};
    double sm = hw->sm_count, b = scn_dtype_bytes(dt), tk = 128 / (b > 0 ? b : 2);
    double best = M <= 64 ? ref_tile(sm, M, N, K, M <= 8 ? 8 : M <= 16 ? 16 : M <= 32 ? 32 : 64, 128, tk) : 0;
    for (int i = 0; i < 8; i++) best = fmax(best, ref_tile(sm, M, N, K, tiles[i][0], tiles[i][1], tk));
    return best;
}

/* Every row count up to 4,100 (whole, and some between, as the MoE expert rows are), for a model's
 * shapes in bf16 and fp8, asked in two orders so that each answer comes once from a cold entry
 * and once from an entry another row count of its band filled. */
START_TEST(gemm_memo_matches_the_search)
{
    scn_scenario s;
    t_library("llama-3-8b", "h100-sxm", &s);
    const scn_hardware *hw = &s.hardware;
    static const double NK[][2] = {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}, {128256, 4096}, {7, 9}};
    static const scn_dtype dts[] = {SCN_DTYPE_BF16, SCN_DTYPE_FP8};
    long checked = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int d = 0; d < 2; d++)
            for (int k = 0; k < 6; k++)
                for (int i = 1; i <= 4100; i++) {
                    double M = pass ? 4101 - i : i;
                    if (i % 7 == 0) M += 0.37;   /* between whole rows: rows / touched experts */
                    double got = kv_gemm_shape_efficiency(hw, M, NK[k][0], NK[k][1], dts[d]);
                    double want = ref_gemm(hw, M, NK[k][0], NK[k][1], dts[d]);
                    if (got != want) ck_abort_msg("M %.2f N %g K %g: %.17g, the search gives %.17g", M, NK[k][0], NK[k][1], got, want);
                    checked++;
                }
    ck_assert_int_eq(checked, 2 * 2 * 6 * 4100);
}
END_TEST

#define DSV3 "model: deepseek-v3\nhardware: h200\n" \
             "workload: {requests: 300, arrival: {process: poisson, rate: 30/s}, prompt_tokens: {dist: lognormal, mean: 900, sigma: 0.7, max: 8000}, " \
             "output_tokens: {dist: lognormal, mean: 200, sigma: 0.7, max: 2000}}\n" \
             "deployment: {tensor_parallel: 1, attention_data_parallel: 8, expert_parallel: 8, expert_skew: 0.3, max_num_seqs: 128}\n"

static void load_dsv3(scn_scenario *s)
{
    scn_error e;
    ck_assert_msg(t_load(DSV3, NULL, 0, s, &e) == SCN_OK, "%s", e.msg);
}

/* What the context replaced: the dense layers' and shared experts' MLP priced as a whole step of
 * a dense stand-in copy of the scenario. */
static double stand_in_mlp(const scn_scenario *s, const kv_cache_cfg *c, const kv_seq_work *w, int n, int layers, int width)
{
    if (layers <= 0 || width <= 0) return 0;
    scn_scenario *t = malloc(sizeof *t);
    ck_assert_ptr_nonnull(t);
    *t = *s;
    t->model.experts = t->model.experts_per_token = t->model.shared_experts = t->model.dense_layers = 0;
    t->model.layers = layers;
    t->model.sliding_layers = 0;
    t->model.intermediate = width;
    double sec = kv_step_time(t, c, SCN_ATTN_FLASH, w, n).op[KV_OP_MLP].seconds;
    free(t);
    return sec;
}

static bool same_step(const kv_moe_step *a, const kv_moe_step *b)
{
    return a->seconds == b->seconds && a->attention == b->attention && a->experts == b->experts && a->alltoall == b->alltoall &&
           a->alltoall_bytes == b->alltoall_bytes && a->gather == b->gather && a->engine_seconds == b->engine_seconds &&
           a->hot_factor == b->hot_factor && a->busiest_share == b->busiest_share && a->rows_busiest == b->rows_busiest &&
           a->dispatch.seconds == b->dispatch.seconds;
}

/* Random batches (plain decode, which runs as a CUDA graph, and prefill rows mixed in), priced by
 * one context in a shuffled order so that most come from its table: every field as a fresh
 * kv_moe_step_time_verify gives it, and the attention side as the stand-in pricing gives it. */
START_TEST(moe_context_matches_pricing_each_step)
{
    static scn_scenario s;
    load_dsv3(&s);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_moe_ctx *x = kv_moe_ctx_make(&s);
    ck_assert_ptr_nonnull(x);
    kv_seq_work w[128];
    unsigned long long r = 12345;
    for (int trial = 0; trial < 600; trial++) {
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        int n = 1 + (int)((r >> 33) % 128);
        bool decode = (r >> 20) % 3 != 0;
        for (int i = 0; i < n; i++) {
            r = r * 6364136223846793005ULL + 1442695040888963407ULL;
            w[i] = (kv_seq_work){decode || i ? 1 : 1 + (long)((r >> 30) % 3000), (long)((r >> 40) % 6000)};
        }
        if (trial % 50 == 0) n = 1 + trial / 50;   /* repeats of small sizes */
        kv_step_cost base = kv_step_time(&s, &c, SCN_ATTN_FLASH, w, n);
        kv_moe_step got = kv_moe_step_of(x, &base, w, NULL, n);
        kv_moe_step want = kv_moe_step_time(&s, &c, SCN_ATTN_FLASH, w, n);
        ck_assert_msg(same_step(&got, &want), "batch %d of %d rows: %.17g s, fresh %.17g s", trial, n, got.seconds, want.seconds);
        const scn_model *m = &s.model;
        double attention = base.seconds - base.op[KV_OP_MLP].seconds +
                           stand_in_mlp(&s, &c, w, n, m->dense_layers, m->intermediate) +
                           stand_in_mlp(&s, &c, w, n, m->layers - m->dense_layers, m->shared_experts * m->moe_intermediate);
        ck_assert(got.attention == attention);
        ck_assert(got.seconds == got.attention + got.experts + got.alltoall + got.gather);
    }
    kv_moe_ctx_free(x);
}
END_TEST

/* An executor that prices every step from scratch with kv_moe_step_time. */
typedef struct { const scn_scenario *s; kv_cache_cfg c; long blocks; kv_seq_work *w; } plain_moe;

static int plain_run(void *ctx, const sim_batch *b, double *seconds, char *err, size_t n)
{
    (void)err; (void)n;
    plain_moe *p = ctx;
    for (int i = 0; i < b->n; i++) p->w[i] = (kv_seq_work){b->seqs[i].new_tokens, b->seqs[i].start};
    *seconds = kv_moe_step_time(p->s, &p->c, SCN_ATTN_FLASH, p->w, b->n).seconds;
    return 0;
}

static long plain_blocks(void *ctx, int replica) { (void)replica; return ((plain_moe *)ctx)->blocks; }

/* The whole run, fast-forward and per step, with the model executor (cached decode shapes, the
 * MoE context) and with the plain one: the same metrics to the last bit. */
START_TEST(moe_runs_match_the_plain_executor)
{
    static scn_scenario s;
    load_dsv3(&s);
    sim_choice ch = sim_choice_first(&s);
    static kv_seq_work w[4096];
    plain_moe p = {&s, kv_cache_cfg_make(&s, ch.kv_dtype, ch.sink, ch.window), 0, w};
    p.blocks = kv_moe_pool_size(&s, &p.c, ch.layout == SCN_LAYOUT_PAGED, ch.block_size).blocks;
    sim_executor plain = {.name = "plain", .ctx = &p, .run = plain_run, .kv_blocks = plain_blocks};
    sim_metrics want;
    char err[256];
    sim_run_opts o = {.seed = 3};
    ck_assert_int_eq(sim_run(&s, &ch, &plain, &o, &want, err, sizeof err), SIM_OK);
    ck_assert_int_eq(want.requests, 300);
    for (int per_step = 0; per_step < 2; per_step++) {
        sim_executor ex;
        ck_assert_int_eq(sim_executor_model(&s, &ch, &ex), 0);
        sim_run_opts q = {.seed = 3, .per_step = per_step};
        sim_metrics got;
        ck_assert_int_eq(sim_run(&s, &ch, &ex, &q, &got, err, sizeof err), SIM_OK);
        ex.free(ex.ctx);
        sim_metric_kv a[SIM_METRICS_MAX], b[SIM_METRICS_MAX];
        int na = sim_metrics_list(&got, a, SIM_METRICS_MAX), nb = sim_metrics_list(&want, b, SIM_METRICS_MAX);
        ck_assert_int_eq(na, nb);
        for (int i = 0; i < na; i++)
            if (strcmp(a[i].name, "events") && !(a[i].value == b[i].value || (isnan(a[i].value) && isnan(b[i].value))))
                ck_abort_msg("%s (per_step %d): %.17g, the plain executor's %.17g", a[i].name, per_step, a[i].value, b[i].value);
    }
}
END_TEST


/* The allocation policy (sim/alloc_policy.c): memory a simulation frees stays mapped for the
 * next. 64 blocks of 48 KiB (each under glibc's 128 KiB mmap threshold, so from the heap) are
 * touched, freed and taken again: without the policy the freed 3 MiB top is trimmed past
 * glibc's 128 KiB threshold and the second round faults its 768 pages in again; with it the
 * second round finds them mapped. Bound: under 64 faults (a quarter page per block) in the
 * second round. Only on glibc without a sanitizer (ASan brings its own allocator). */
#if defined(__SANITIZE_ADDRESS__)
#define T_OWN_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define T_OWN_MALLOC 1
#endif
#endif
static long minor_faults(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

START_TEST(freed_memory_stays_mapped_for_the_next_simulation)
{
#if defined(__GLIBC__) && !defined(T_OWN_MALLOC)
    ck_assert_int_eq(sim_alloc_policy(), 1);
    enum { NB = 64, SZ = 48 << 10 };
    long faults[2];
    for (int round = 0; round < 2; round++) {
        char *p[NB];
        long f0 = minor_faults();
        for (int i = 0; i < NB; i++) {
            p[i] = malloc(SZ);
            ck_assert_ptr_nonnull(p[i]);
            memset(p[i], i + 1, SZ);
        }
        faults[round] = minor_faults() - f0;
        for (int i = NB - 1; i >= 0; i--) free(p[i]);
    }
    ck_assert_msg(faults[1] < 64, "second round faulted %ld pages (first %ld)", faults[1], faults[0]);
#elif !defined(__GLIBC__)
    ck_assert_int_eq(sim_alloc_policy(), 0);   /* another C library: the policy does nothing */
#endif
}
END_TEST

Suite *suite_speed_paths(void)
{
    Suite *s = suite_create("speed_paths");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, gemm_memo_matches_the_search);
    tcase_add_test(tc, moe_context_matches_pricing_each_step);
    tcase_add_test(tc, moe_runs_match_the_plain_executor);
    tcase_add_test(tc, freed_memory_stays_mapped_for_the_next_simulation);
    suite_add_tcase(s, tc);
    return s;
}
