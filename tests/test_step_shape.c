/* test_step_shape.c: a decode step priced from a cached batch shape (kv_step_shape, reused for
 * other contexts, then kv_step_complete) and the predicting executor's cached path give exactly
 * the doubles of kv_step_time on the same batch. Independent reference: kv_step_time computed
 * afresh for every batch. Over dense MHA, GQA, MoE, MLA and sliding-window models, StreamingLLM
 * windows, TP 1/2/8, flash and naive attention, with and without CUDA graphs. */
#include "tests.h"
#include "../model/kv_model.h"
#include "../sim/sim.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state;
static long rnd(long n)   /* 0 .. n-1; a fixed LCG so every run sees the same batches */
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (long)((rng_state >> 33) % (uint64_t)n);
}

/* Every figure the step reports, compared exactly (== on doubles: equal bits for these finite,
 * non-negative values). */
static void same_cost(const kv_step_cost *a, const kv_step_cost *b, const char *what)
{
    ck_assert_msg(a->seconds == b->seconds, "%s: seconds %.17g vs %.17g", what, a->seconds, b->seconds);
    ck_assert_msg(a->gpu_seconds == b->gpu_seconds && a->cpu_seconds == b->cpu_seconds, "%s: gpu/cpu", what);
    ck_assert_msg(a->bound == b->bound && a->graph == b->graph && a->graph_batch == b->graph_batch &&
                  a->tokens == b->tokens && a->mla_absorbed == b->mla_absorbed, "%s: bound/graph/tokens", what);
    for (int op = 0; op < KV_OP_COUNT; op++) {
        const kv_op_cost *x = &a->op[op], *y = &b->op[op];
        ck_assert_msg(x->seconds == y->seconds && x->flops == y->flops && x->bytes == y->bytes &&
                      x->t_compute == y->t_compute && x->t_memory == y->t_memory && x->t_network == y->t_network &&
                      x->t_overhead == y->t_overhead && x->kernels == y->kernels && x->bound == y->bound,
                      "%s: op %s differs", what, kv_op_name((kv_op)op));
    }
}

typedef struct { const char *model; int tp; bool graphs; scn_attention attn; int window; } config;

static const config CONFIGS[] = {
    {"llama-2-7b", 1, true, SCN_ATTN_FLASH, 0},      /* dense MHA */
    {"llama-2-7b", 2, false, SCN_ATTN_NAIVE, 0},
    {"llama-3-8b", 1, false, SCN_ATTN_FLASH, 0},     /* GQA */
    {"llama-3-8b", 8, true, SCN_ATTN_FLASH, 0},
    {"llama-3-8b", 2, true, SCN_ATTN_FLASH, 512},    /* StreamingLLM sink + window */
    {"mixtral-8x7b", 2, true, SCN_ATTN_FLASH, 0},    /* MoE */
    {"mixtral-8x7b", 8, false, SCN_ATTN_FLASH, 0},
    {"deepseek-v2-lite", 1, true, SCN_ATTN_FLASH, 0},  /* MLA, MoE */
    {"deepseek-v2-lite", 2, false, SCN_ATTN_FLASH, 0},
    {"gemma-2-9b", 1, true, SCN_ATTN_FLASH, 0},      /* sliding-window layers */
    {"gemma-2-9b", 8, false, SCN_ATTN_NAIVE, 0},
};

static void load(const config *k, scn_scenario *s)
{
    t_library(k->model, "h100-sxm", s);
    s->deployment.tensor_parallel = k->tp;
    s->engine.cuda_graphs = k->graphs;
}

/* A configuration's scenario, its first choice with the configuration's attention (a sink of 4
 * beside a window), the predicting executor on it and the cache configuration it prices. */
static void executor_of(const config *k, scn_scenario *s, sim_choice *ch, sim_executor *ex, kv_cache_cfg *c)
{
    load(k, s);
    *ch = sim_choice_first(s);
    ch->attention = k->attn;
    ch->window = k->window;
    ch->sink = k->window ? 4 : 0;
    ck_assert_int_eq(sim_executor_model(s, ch, ex), 0);
    *c = kv_cache_cfg_make(s, ch->kv_dtype, ch->sink, ch->window);
}

/* kv_step_shape of one batch, reused for other contexts (and mixed prefill/decode batches of
 * the same new-token counts), equals kv_step_time of each. */
START_TEST(shape_reused_is_step_time)
{
    const config *k = &CONFIGS[_i];
    scn_scenario s;
    load(k, &s);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, k->window ? 4 : 0, k->window);
    enum { NMAX = 300 };
    kv_seq_work a[NMAX], b[NMAX];
    rng_state = 0x5eed + (uint64_t)_i;
    long maxctx = s.deployment.max_model_len - 64;
    for (int trial = 0; trial < 60; trial++) {
        int n = trial < 8 ? trial + 1 : 1 + (int)rnd(NMAX);
        bool mixed = trial % 5 == 4;   /* a prefill chunk among the decodes */
        for (int i = 0; i < n; i++) {
            int nt = mixed && i == 0 ? 1 + (int)rnd(600) : 1;
            a[i] = (kv_seq_work){nt, rnd(maxctx)};
            b[i] = (kv_seq_work){nt, trial % 3 == 0 ? rnd(300) : rnd(maxctx)};
        }
        kv_step_cost shape;
        kv_step_shape(&s, NULL, a, n, &shape);
        char what[160];
        snprintf(what, sizeof what, "%s tp%d graphs=%d n=%d trial %d", k->model, k->tp, k->graphs, n, trial);
        kv_step_cost want_b = kv_step_time(&s, &c, k->attn, b, n), got_b = kv_step_complete(&shape, &s, &c, k->attn, b, NULL, n);
        same_cost(&got_b, &want_b, what);
        kv_step_cost want_a = kv_step_time(&s, &c, k->attn, a, n), got_a = kv_step_complete(&shape, &s, &c, k->attn, a, NULL, n);
        same_cost(&got_a, &want_a, what);
    }
}
END_TEST

/* The predicting executor, whose decode steps reuse cached shapes across calls, reports
 * kv_step_time's seconds for every decode batch, in any order of batch sizes. */
START_TEST(executor_decode_is_step_time)
{
    const config *k = &CONFIGS[_i];
    scn_scenario s;
    sim_choice ch;
    sim_executor ex;
    kv_cache_cfg c;
    executor_of(k, &s, &ch, &ex, &c);
    int nmax = s.deployment.max_num_seqs < 300 ? s.deployment.max_num_seqs : 300;
    sim_batch_seq *q = calloc((size_t)nmax, sizeof *q);
    kv_seq_work *w = calloc((size_t)nmax, sizeof *w);
    ck_assert(q && w);
    rng_state = 0xbeef + (uint64_t)_i;
    long maxctx = s.deployment.max_model_len - 64;
    for (int trial = 0; trial < 80; trial++) {
        int n = 1 + (int)rnd(trial < 40 ? 12 : nmax);   /* small sizes recur, so the cache is reused */
        for (int i = 0; i < n; i++) {
            int start = (int)rnd(maxctx);
            q[i] = (sim_batch_seq){.req_id = i, .new_tokens = 1, .start = start, .context = start};
            w[i] = (kv_seq_work){1, start};
        }
        sim_batch b = {.seqs = q, .n = n, .tokens = n};
        double got = -1;
        char err[256] = "";
        ck_assert_int_eq(ex.run(ex.ctx, &b, &got, err, sizeof err), 0);
        double want = kv_step_time(&s, &c, ch.attention, w, n).seconds;
        ck_assert_msg(got == want, "%s tp%d n=%d: executor %.17g, kv_step_time %.17g", k->model, k->tp, n, got, want);
    }
    free(q);
    free(w);
    ex.free(ex.ctx);
}
END_TEST

/* A decode row's attention, by hand from docs/cost-model.md: under FlashAttention one query
 * row attends min(ctx + 1, cap) keys, spends 2 * heads * (d_qk + d_v) flops on each, and moves
 * its Q and O, its new K/V and each key's K/V once. Summed over rows in batch order, times each
 * layer kind's count (global, then sliding), in the order kv_roofline.c adds them, so the
 * doubles must match exactly. Dense, GQA and sliding-window models (not MLA, whose decode runs
 * the absorbed kernel). */
static double keys_of(long ctx, long cap) { return cap > 0 && ctx + 1 > cap ? (double)cap : (double)ctx + 1.0; }

START_TEST(decode_attention_by_hand)
{
    static const config K[] = {
        {"llama-2-7b", 1, true, SCN_ATTN_FLASH, 0}, {"llama-3-8b", 2, false, SCN_ATTN_FLASH, 0},
        {"llama-3-8b", 8, true, SCN_ATTN_FLASH, 1000}, {"gemma-2-9b", 1, true, SCN_ATTN_FLASH, 0},
        {"gemma-2-9b", 2, false, SCN_ATTN_FLASH, 2000},
    };
    const config *k = &K[_i];
    scn_scenario s;
    load(k, &s);
    const scn_model *m = &s.model;
    int sink = k->window ? 4 : 0;
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, sink, k->window);
    double heads = (double)m->heads / k->tp, d = m->head_dim;
    double kv_tok = kv_bytes_per_token_layer_rank(m, &c, k->tp);
    double per_key = 2.0 * heads * (d + d), qo = heads * (d + d) * 2.0;
    long win = k->window ? sink + k->window : 0;
    long caps[2] = {win, m->sliding_window > 0 && (win == 0 || m->sliding_window < win) ? m->sliding_window : win};
    double layers[2] = {(double)m->layers - m->sliding_layers, (double)m->sliding_layers};
    enum { NMAX = 200 };
    kv_seq_work w[NMAX];
    rng_state = 0xfeed + (uint64_t)_i;
    for (int trial = 0; trial < 40; trial++) {
        int n = 1 + (int)rnd(NMAX);
        for (int i = 0; i < n; i++) w[i] = (kv_seq_work){1, rnd(s.deployment.max_model_len - 1)};
        double flops = 0, bytes = 0;
        for (int kind = 0; kind < 2; kind++) {
            if (layers[kind] <= 0) continue;
            double f = 0, b = 0;
            for (int i = 0; i < n; i++) {
                double keys = keys_of(w[i].context, caps[kind]);
                f += per_key * keys;
                b += qo + kv_tok + keys * kv_tok;
            }
            flops += f * layers[kind];
            bytes += b * layers[kind];
        }
        kv_op_cost at = kv_step_time(&s, &c, SCN_ATTN_FLASH, w, n).op[KV_OP_ATTENTION];
        ck_assert_msg(at.flops == flops && at.bytes == bytes, "%s tp%d n=%d: flops %.17g vs %.17g, bytes %.17g vs %.17g",
                      k->model, k->tp, n, at.flops, flops, at.bytes, bytes);
    }
}
END_TEST

/* The bundled library's names in one folder (models/ or hardware/), sorted; returns the count. */
static int library_names(const char *folder, char names[][64], int max)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", getenv("KVPLAN_LIBRARY"), folder);
    DIR *d = opendir(path);
    ck_assert_msg(d != NULL, "cannot list %s", path);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < max) {
        size_t len = strlen(de->d_name);
        if (len < 6 || len - 5 >= 64 || strcmp(de->d_name + len - 5, ".yaml")) continue;
        memcpy(names[n], de->d_name, len - 5);
        names[n++][len - 5] = 0;
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    return n;
}

/* kv_step_complete_decode from sums over the rows (the closed form the simulator uses for decode
 * steps) gives kv_step_complete's doubles, field for field, and kv_decode_plan_seconds its seconds, whenever kv_decode_sums_exact admits
 * the batch: over every bundled model on every bundled hardware profile, TP 1 and 8, plain and
 * with a sink + window, bf16 and fp8 KV, random decode batches from 1 row (where split-KV counts
 * differ per row) to max_num_seqs. Independent reference: kv_step_time over the rows. The sums
 * are formed here by hand from their definition in kv_model.h. */
START_TEST(decode_sums_are_step_time)
{
    static char models[64][64], hws[32][64];
    int nm = library_names("models", models, 64), nh = library_names("hardware", hws, 32);
    ck_assert(nm >= 10 && nh >= 5);
    long checked = 0;
    int exact_configs = 0, configs = 0;
    rng_state = 0xd3c0de;
    enum { NMAX = 400 };
    static kv_seq_work w[NMAX];
    for (int mi = 0; mi < nm; mi++)
        for (int hi = 0; hi < nh; hi++)
            for (int v = 0; v < 4; v++) {
                scn_scenario s;
                t_library(models[mi], hws[hi], &s);
                s.deployment.tensor_parallel = v & 1 ? 8 : 1;
                if (s.model.heads % s.deployment.tensor_parallel) continue;
                int window = v & 2 ? 1000 : 0;
                kv_cache_cfg c = kv_cache_cfg_make(&s, v == 3 ? SCN_DTYPE_FP8 : SCN_DTYPE_BF16, window ? 4 : 0, window);
                int max_n = s.deployment.max_num_seqs < NMAX ? s.deployment.max_num_seqs : NMAX;
                long max_ctx = s.deployment.max_model_len;
                configs++;
                if (!kv_decode_sums_exact(&s, &c, SCN_ATTN_FLASH, max_n, max_ctx)) continue;
                exact_configs++;
                for (int trial = 0; trial < 6; trial++) {
                    int n = trial < 2 ? 1 + trial : 1 + (int)rnd(max_n);
                    for (int i = 0; i < n; i++) w[i] = (kv_seq_work){1, rnd(trial == 5 ? max_ctx : 300)};
                    double split_cap = kv_decode_split_cap(&s, n);
                    kv_decode_sums d = {{0, 0}, {0, 0}};
                    for (int k = 0; k < 2; k++) {
                        long cap = kv_decode_cap(&s, &c, k);
                        for (int i = 0; i < n; i++) {
                            long held = w[i].context + 1;
                            if (cap > 0 && held > cap) held = cap;
                            d.keys[k] += (double)held;
                            d.splits[k] += kv_decode_split((double)held, split_cap);
                        }
                    }
                    kv_step_cost shape, want = kv_step_time(&s, &c, SCN_ATTN_FLASH, w, n);
                    kv_step_shape(&s, NULL, w, n, &shape);
                    kv_step_cost got = kv_step_complete_decode(&shape, &s, &c, n, &d);
                    kv_decode_plan plan;
                    kv_decode_plan_make(&shape, &s, &c, n, &plan);
                    double fast = kv_decode_plan_seconds(&plan, &d);
                    char what[200];
                    snprintf(what, sizeof what, "%s on %s tp%d window %d dtype %d n=%d", models[mi], hws[hi],
                             s.deployment.tensor_parallel, window, (int)c.dtype, n);
                    same_cost(&got, &want, what);
                    ck_assert_msg(fast == want.seconds, "%s: plan %.17g, kv_step_time %.17g", what, fast, want.seconds);
                    checked++;
                }
            }
    /* Dense and GQA models in bf16 are exact everywhere; MLA models never are (absorbed decode). */
    ck_assert_msg(exact_configs > configs / 2 && checked > 1000, "%d of %d configurations exact, %ld batches", exact_configs,
                  configs, checked);
}
END_TEST

/* What the sums may not stand for: MLA (absorbed decode), naive attention, and batches whose
 * sums could pass 2^53. */
START_TEST(decode_sums_decline)
{
    scn_scenario s;
    t_library("deepseek-v2-lite", "h100-sxm", &s);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    ck_assert(!kv_decode_sums_exact(&s, &c, SCN_ATTN_FLASH, 256, 8192));
    t_library("llama-3-8b", "h100-sxm", &s);
    c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    ck_assert(kv_decode_sums_exact(&s, &c, SCN_ATTN_FLASH, 256, 8192));
    ck_assert(!kv_decode_sums_exact(&s, &c, SCN_ATTN_NAIVE, 256, 8192));
    /* 16384 flops per key per layer (32 heads x 2 x 256): 2^53 / 16384 = 2^39 keys at most. */
    ck_assert(!kv_decode_sums_exact(&s, &c, SCN_ATTN_FLASH, 4096, 1L << 28));
}
END_TEST

/* The executor's O(1) decode time (n, Σ positions) is kv_step_time's seconds on any batch with
 * those sums, and it answers for every batch size whose rows all split once. */
START_TEST(executor_decode_time_is_step_time)
{
    scn_scenario s;
    t_library("llama-3-8b", "h100-sxm", &s);
    sim_choice ch = sim_choice_first(&s);
    sim_executor ex;
    ck_assert_int_eq(sim_executor_model(&s, &ch, &ex), 0);
    ck_assert(ex.decode_time != NULL);
    kv_cache_cfg c = kv_cache_cfg_make(&s, ch.kv_dtype, ch.sink, ch.window);
    enum { NMAX = 256 };
    static kv_seq_work w[NMAX];
    rng_state = 0x0fa57;
    int answered = 0;
    for (int trial = 0; trial < 60; trial++) {
        int n = 1 + (int)rnd(trial < 20 ? 20 : NMAX);
        long sum = 0;
        for (int i = 0; i < n; i++) { w[i] = (kv_seq_work){1, rnd(s.deployment.max_model_len - 1)}; sum += w[i].context; }
        double got = -1;
        if (ex.decode_time(ex.ctx, n, sum, &got)) {
            /* Declined only where split-KV counts differ per row: few rows over many SMs. */
            ck_assert_msg(kv_decode_split_cap(&s, n) > 1, "n=%d declined", n);
            continue;
        }
        answered++;
        double want = kv_step_time(&s, &c, ch.attention, w, n).seconds;
        ck_assert_msg(got == want, "n=%d: decode_time %.17g, kv_step_time %.17g", n, got, want);
    }
    ck_assert(answered > 30);
    ex.free(ex.ctx);
}
END_TEST

/* The executor's prefill steps (rows that are not plain decode), one-row ones memoised by (new
 * tokens, start), report kv_step_time's seconds on every call: first pricings, repeats (start 0
 * and later chunks), keys that share a memo slot and evict each other, and steps of several rows
 * in between. */
START_TEST(executor_prefill_is_step_time)
{
    const config *k = &CONFIGS[_i];
    scn_scenario s;
    sim_choice ch;
    sim_executor ex;
    kv_cache_cfg c;
    executor_of(k, &s, &ch, &ex, &c);
    enum { NMAX = 6 };
    sim_batch_seq q[NMAX];
    kv_seq_work w[NMAX];
    rng_state = 0x9ef111 + (uint64_t)_i;
    long len = s.deployment.max_model_len;
    /* Many distinct keys for the first config (more than the memo's slots, so some collide);
     * a few hundred elsewhere, drawn from a small pool so that most repeat. */
    int trials = _i == 0 ? 9000 : 600;
    for (int trial = 0; trial < trials; trial++) {
        int n = trial % 4 == 3 ? 2 + (int)rnd(NMAX - 1) : 1;
        long tok_pool = _i == 0 && trial >= 600 ? len / 2 : 40;
        for (int i = 0; i < n; i++) {
            int nt = 2 + (int)(rnd(tok_pool) * 97 % (len / 2));
            int start = rnd(3) ? 0 : (int)(rnd(_i == 0 && trial >= 600 ? 4000 : 4) * 256 % (len / 2));
            q[i] = (sim_batch_seq){.req_id = i, .new_tokens = nt, .start = start, .context = start};
            w[i] = (kv_seq_work){nt, start};
        }
        sim_batch b = {.seqs = q, .n = n, .tokens = 0};
        for (int i = 0; i < n; i++) b.tokens += q[i].new_tokens;
        double want = kv_step_time(&s, &c, ch.attention, w, n).seconds;
        for (int rep = 0; rep < 2; rep++) {   /* the second call of a one-row step hits the memo */
            double got = -1;
            char err[256] = "";
            ck_assert_int_eq(ex.run(ex.ctx, &b, &got, err, sizeof err), 0);
            ck_assert_msg(got == want, "%s tp%d trial %d n=%d row0 %d@%d: executor %.17g, kv_step_time %.17g", k->model,
                          k->tp, trial, n, q[0].new_tokens, q[0].start, got, want);
        }
    }
    ex.free(ex.ctx);
}
END_TEST

/* The executor's decode price from positions alone (decode_time_rows, for the fast-forward's
 * steps that decode_time declines) is kv_step_time's on the same rows, over the configurations
 * it answers for, at small batch sizes (whose rows split the keys) and large ones. */
START_TEST(executor_decode_time_rows_is_step_time)
{
    const config *k = &CONFIGS[_i];
    scn_scenario s;
    sim_choice ch;
    sim_executor ex;
    kv_cache_cfg c;
    executor_of(k, &s, &ch, &ex, &c);
    enum { NMAX = 300 };
    static int starts[NMAX];
    static kv_seq_work w[NMAX];
    rng_state = 0x7005 + (uint64_t)_i;
    int nmax = s.deployment.max_num_seqs < NMAX ? s.deployment.max_num_seqs : NMAX;
    long maxctx = s.deployment.max_model_len - 64;
    int answered = 0;
    for (int trial = 0; trial < 80; trial++) {
        int n = 1 + (int)rnd(trial < 40 ? 8 : nmax);
        for (int i = 0; i < n; i++) { starts[i] = (int)rnd(maxctx); w[i] = (kv_seq_work){1, starts[i]}; }
        double got = -1;
        if (!ex.decode_time_rows || ex.decode_time_rows(ex.ctx, n, starts, &got)) continue;
        answered++;
        double want = kv_step_time(&s, &c, ch.attention, w, n).seconds;
        ck_assert_msg(got == want, "%s tp%d n=%d: decode_time_rows %.17g, kv_step_time %.17g", k->model, k->tp, n, got, want);
    }
    /* Dense and GQA models under FlashAttention answer (their sums are exact). */
    if (_i == 0 || _i == 2 || _i == 3) ck_assert_int_gt(answered, 60);
    ex.free(ex.ctx);
}
END_TEST

Suite *suite_step_shape(void)
{
    Suite *s = suite_create("step_shape");
    TCase *tc = tcase_create("step_shape");
    int n = (int)(sizeof CONFIGS / sizeof CONFIGS[0]);
    tcase_add_loop_test(tc, shape_reused_is_step_time, 0, n);
    tcase_add_loop_test(tc, executor_decode_is_step_time, 0, n);
    tcase_add_loop_test(tc, executor_prefill_is_step_time, 0, n);
    tcase_add_loop_test(tc, executor_decode_time_rows_is_step_time, 0, n);
    tcase_add_loop_test(tc, decode_attention_by_hand, 0, 5);
    tcase_add_test(tc, decode_sums_are_step_time);
    tcase_add_test(tc, decode_sums_decline);
    tcase_add_test(tc, executor_decode_time_is_step_time);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return s;
}
