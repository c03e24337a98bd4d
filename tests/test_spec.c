/* test_spec.c: speculative decoding: the scenario format, the acceptance model against its
 * closed form, the engine against runs solvable by hand, the KV rollback, the proposer's
 * memory counted by hand, and the crossover batch against cases whose side is known. */
#include "tests.h"
#include "../db/db.h"
#include "../model/kv_blocks.h"
#include "../model/kv_model.h"
#include "../model/kv_moe_parallel.h"
#include "../model/kv_spec.h"
#include "../planner/plan.h"
#include "../sim/kv_manager.h"
#include "../sim/request.h"
#include "../sim/sim.h"
#include "../sim/spec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static scn_scenario s;

static void load(const char *text, const char *const *sets, int n)
{
    scn_error e;
    scn_status st = t_load(text, sets, n, &s, &e);
    char msg[1500];
    scn_error_format(&e, msg, sizeof msg);
    ck_assert_msg(st == SCN_OK, "%s", msg);
}

/* Loads text expecting a data error at `path`; returns the formatted message. */
static const char *load_bad(const char *text, const char *path)
{
    static char msg[1500];
    scn_error e;
    scn_status st = t_load(text, NULL, 0, &s, &e);
    scn_error_format(&e, msg, sizeof msg);
    ck_assert_msg(st == SCN_E_DATA, "expected a data error, got %d: %s", st, msg);
    ck_assert_msg(e.line > 0 && e.col > 0, "error without a position: %s", msg);
    ck_assert_msg(strstr(e.path, path) != NULL, "error at '%s', expected '%s': %s", e.path, path, msg);
    return msg;
}

#define HEAD "model: llama-3.1-8b\nhardware: h100-sxm\nworkload: {requests: 10, arrival: {process: offline}, prompt_tokens: 100, output_tokens: 10}\n"

/* (1 - a^(k+1)) / (1 - a), with its limit k + 1 at a = 1. */
static double closed_form(double a, int k)
{
    return a == 1 ? k + 1 : (1 - pow(a, k + 1)) / (1 - a);
}

START_TEST(loader_reads_every_method)
{
    load(HEAD "options:\n  speculative:\n    - off\n    - {method: eagle, k: 4}\n    - {method: ngram, k: 1, acceptance: 0.3}\n"
              "    - {method: draft, model: llama-3.2-1b, k: 3}\n    - {method: ngram, k: 4, acceptance: 50%}\n"
              "    - {method: eagle, k: 2, acceptance: [0.9, 0.6]}\n    - {method: eagle, k: 4, mean_accepted: 3}\n",
         NULL, 0);
    const scn_options *o = &s.options;
    ck_assert_int_eq(o->n_spec, 7);
    ck_assert_int_eq(o->spec[0].method, SCN_SPEC_OFF);
    ck_assert_ptr_null(kv_spec_get(&s, 0));
    /* Sourced first-position defaults (docs/sources.md): EAGLE 0.8, a draft model 0.7; EAGLE's
     * later positions decay geometrically with the rate itself (a^(i+1): 0.8, 0.64, 0.512,
     * 0.4096), a draft model's do not. */
    ck_assert_int_eq(o->spec[1].method, SCN_SPEC_EAGLE);
    ck_assert_int_eq(o->spec[1].k, 4);
    for (int j = 0; j < 4; j++) ck_assert_double_eq_tol(o->spec[1].accept[j], pow(0.8, j + 1), 1e-12);
    ck_assert_double_eq_tol(o->spec[2].accept[0], 0.3, 1e-12);
    ck_assert_int_eq(o->spec[3].method, SCN_SPEC_DRAFT);
    ck_assert_double_eq_tol(o->spec[3].accept[2], 0.7, 1e-12);
    ck_assert_double_eq_tol(o->spec[3].accept[0], 0.7, 1e-12);
    /* The draft model comes from the library: Llama-3.2-1B's published shape. */
    ck_assert_int_eq(o->spec[3].draft.layers, 16);
    ck_assert_int_eq(o->spec[3].draft.hidden, 2048);
    ck_assert_double_eq_tol(o->spec[4].accept[3], 0.5, 1e-12);
    ck_assert_double_eq_tol(o->spec[5].accept[0], 0.9, 1e-12);
    ck_assert_double_eq_tol(o->spec[5].accept[1], 0.6, 1e-12);
    /* A mean acceptance length becomes the first-position rate whose decayed rates give it back:
     * 1 + a + a^3 + a^6 + a^10 = 3 for EAGLE. */
    double a = o->spec[6].accept[0];
    ck_assert_msg(a > 0 && a < 1, "rate %g", a);
    ck_assert_double_eq_tol(1 + a + pow(a, 3) + pow(a, 6) + pow(a, 10), 3.0, 1e-9);
    ck_assert_double_eq_tol(kv_spec_expected_tokens(&o->spec[6], 4), 3.0, 1e-9);
    /* MTP on a model that ships an MTP module (DeepSeek-V3: one), at its sourced 0.85. */
    load("model: deepseek-v3\nhardware: h200\nworkload: {requests: 10, arrival: {process: offline}, prompt_tokens: 100, "
         "output_tokens: 10}\ndeployment: {tensor_parallel: 8}\noptions:\n  speculative: [{method: mtp, k: 1}]\n", NULL, 0);
    ck_assert_int_eq(s.model.mtp_layers, 1);
    ck_assert_double_eq_tol(s.options.spec[0].accept[0], 0.85, 1e-12);
    /* Without the option, speculation is off. */
    load(HEAD, NULL, 0);
    ck_assert_int_eq(s.options.n_spec, 0);
    ck_assert_ptr_null(kv_spec_get(&s, 0));
}
END_TEST

START_TEST(loader_locates_bad_settings)
{
    const char *m = load_bad(HEAD "options:\n  speculative: [{method: ngram, k: 4}]\n", "options.speculative[0]");
    ck_assert_msg(strstr(m, "acceptance") != NULL, "%s", m);
    /* Regression (issue 14 review): MTP needs the model's own MTP layers, k at most their count. */
    m = load_bad(HEAD "options:\n  speculative: [{method: mtp, k: 1}]\n", "options.speculative[0].method");
    ck_assert_msg(strstr(m, "mtp_layers") != NULL, "%s", m);
    load_bad("model: deepseek-v3\nhardware: h200\nworkload: {requests: 10, arrival: {process: offline}, prompt_tokens: 100, "
             "output_tokens: 10}\noptions:\n  speculative: [{method: mtp, k: 2}]\n", "options.speculative[0].k");
    /* Regression: a draft model must share the target's vocabulary (Qwen2.5's 152064 tokens
     * against Llama-3.1's 128256). */
    m = load_bad(HEAD "options:\n  speculative: [off, {method: draft, model: qwen2.5-7b, k: 4}]\n",
                 "options.speculative[1].model");
    ck_assert_msg(strstr(m, "vocabulary") != NULL, "%s", m);
    load_bad(HEAD "options:\n  speculative: [{method: eagle, k: 4, decay: 1.5}]\n", "options.speculative[0].decay");
    load_bad(HEAD "options:\n  speculative: [{method: eagle, k: 2, acceptance: [0.9, 0.5], decay: 0.9}]\n",
             "options.speculative[0].decay");
    load_bad(HEAD "options:\n  speculative: [{method: eagle, k: 4, decay: 0.5, mean_accepted: 4.5}]\n",
             "options.speculative[0].mean_accepted");
    load_bad(HEAD "options:\n  speculative: [{method: eagle, k: 4, acceptance: 1.5}]\n", "options.speculative[0].acceptance");
    load_bad(HEAD "options:\n  speculative: [{method: eagle, k: 2, acceptance: [0.5]}]\n", "options.speculative[0].acceptance");
    load_bad(HEAD "options:\n  speculative: [{method: eagle, k: 4, mean_accepted: 6}]\n", "options.speculative[0].mean_accepted");
    load_bad(HEAD "options:\n  speculative: [{method: eagle, k: 0}]\n", "options.speculative[0].k");
    load_bad(HEAD "options:\n  speculative: [{method: eagle, k: 17}]\n", "options.speculative[0].k");
    load_bad(HEAD "options:\n  speculative: [{method: draft, k: 4}]\n", "options.speculative[0]");
    load_bad(HEAD "options:\n  speculative: [{method: eagle, model: llama-3.2-1b, k: 4}]\n", "options.speculative[0].model");
    load_bad(HEAD "options:\n  speculative: [{method: medusa, k: 4}]\n", "options.speculative[0].method");
    load_bad(HEAD "options:\n  speculative: [{method: eagle, k: 4, acceptance: 0.8, mean_accepted: 2}]\n",
             "options.speculative[0]");
    load_bad(HEAD "options:\n  speculative: [{method: draft, model: llama-9z, k: 4}]\n", "model");
    load_bad(HEAD "options:\n  speculative: [fast]\n", "options.speculative[0]");
}
END_TEST

/* Regression (issue 14 review): EAGLE's acceptance was a constant 0.8 at every position. It now
 * falls per position (a x d^i, d = a by default), and a stated decay or list overrides it. */
START_TEST(eagle_acceptance_falls_per_position)
{
    load(HEAD "options:\n  speculative: [{method: eagle, k: 4}, {method: eagle, k: 3, acceptance: 0.9, decay: 0.5}, "
              "{method: eagle, k: 3, acceptance: 0.7, decay: 1}, {method: draft, model: llama-3.2-1b, k: 3, decay: 0.8}]\n",
         NULL, 0);
    const scn_spec *sp = s.options.spec;
    /* Default: 1 + 0.8 + 0.8 * 0.64 + 0.8 * 0.64 * 0.512 + 0.8 * 0.64 * 0.512 * 0.4096 = 2.6810... */
    double e = 1 + 0.8 + 0.8 * 0.64 + 0.8 * 0.64 * 0.512 + 0.8 * 0.64 * 0.512 * 0.4096;
    ck_assert_double_eq_tol(kv_spec_expected_tokens(&sp[0], 4), e, 1e-12);
    ck_assert(e < closed_form(0.8, 4) - 0.5);   /* well below the constant-rate 3.36 */
    /* Stated: 0.9, 0.45, 0.225. */
    ck_assert_double_eq_tol(sp[1].accept[1], 0.45, 1e-12);
    ck_assert_double_eq_tol(sp[1].accept[2], 0.225, 1e-12);
    /* decay 1 restores a constant rate. */
    ck_assert_double_eq_tol(kv_spec_expected_tokens(&sp[2], 3), closed_form(0.7, 3), 1e-12);
    /* A draft model may decay too when stated: 0.7, 0.56, 0.448. */
    ck_assert_double_eq_tol(sp[3].accept[2], 0.7 * 0.8 * 0.8, 1e-12);
}
END_TEST

START_TEST(expected_tokens_follow_the_closed_form)
{
    scn_spec sp = {.method = SCN_SPEC_EAGLE};
    double rates[] = {0, 0.3, 0.6, 0.8, 0.95, 1};
    for (int k = 1; k <= 8; k++)
        for (int r = 0; r < 6; r++) {
            sp.k = k;
            for (int j = 0; j < k; j++) sp.accept[j] = rates[r];
            ck_assert_double_eq_tol(kv_spec_expected_tokens(&sp, k), closed_form(rates[r], k), 1e-12);
        }
    /* Per position: 1 + 0.9 + 0.9 * 0.5 = 2.35. */
    sp.k = 2;
    sp.accept[0] = 0.9;
    sp.accept[1] = 0.5;
    ck_assert_double_eq_tol(kv_spec_expected_tokens(&sp, 2), 2.35, 1e-12);
}
END_TEST

/* The distribution of tokens per verify step for constant a: P(T = t) = a^(t-1) (1 - a) for
 * t <= k, P(T = k + 1) = a^k. Its standard deviation bounds the sampling error of a mean. */
static double tokens_sd(double a, int k)
{
    double m = 0, m2 = 0;
    for (int t = 1; t <= k + 1; t++) {
        double p = t <= k ? pow(a, t - 1) * (1 - a) : pow(a, k);
        m += p * t;
        m2 += p * t * t;
    }
    return sqrt(m2 - m * m);
}

START_TEST(sampled_acceptance_matches_its_mean)
{
    /* 200000 draws of the engine's sampler; the mean must sit within 5 standard errors of the
     * closed form (the draws are seeded, so the outcome is fixed; the tolerance says how far a
     * correct sampler can stray). */
    scn_spec sp = {.method = SCN_SPEC_EAGLE, .k = 4};
    for (int j = 0; j < 4; j++) sp.accept[j] = 0.6;
    enum { N = 200000 };
    sim_req r;
    memset(&r, 0, sizeof r);
    double sum = 0;
    for (long i = 0; i < N; i++) {
        r.spec.id = i / 50;
        r.generated = (int)(i % 50) * 3;
        sum += 1 + sim_spec_accepted(&sp, 42, &r, 4);
    }
    double mean = sum / N, tol = 5 * tokens_sd(0.6, 4) / sqrt(N);
    ck_assert_msg(fabs(mean - closed_form(0.6, 4)) < tol, "mean %.5f vs %.5f (tol %.5f)", mean, closed_form(0.6, 4), tol);
    /* Per-position rates: 1 + 0.9 + 0.9 * 0.7 + 0.9 * 0.7 * 0.5 = 2.845; sd < k + 1 bounds it. */
    sp.k = 3;
    sp.accept[0] = 0.9; sp.accept[1] = 0.7; sp.accept[2] = 0.5;
    sum = 0;
    for (long i = 0; i < N; i++) { r.spec.id = i; r.generated = 1; sum += 1 + sim_spec_accepted(&sp, 7, &r, 3); }
    ck_assert_msg(fabs(sum / N - 2.845) < 5 * 4.0 / sqrt(N), "mean %.5f vs 2.845", sum / N);
    /* The extremes are exact: everything accepted at 1, nothing at 0. */
    for (int j = 0; j < 4; j++) sp.accept[j] = 1;
    ck_assert_int_eq(sim_spec_accepted(&sp, 1, &r, 4), 4);
    for (int j = 0; j < 4; j++) sp.accept[j] = 0;
    ck_assert_int_eq(sim_spec_accepted(&sp, 1, &r, 4), 0);
}
END_TEST

#define ONE "model: llama-3.1-8b\nhardware: h100-sxm\nworkload:\n  requests: 1\n" \
            "  arrival: {process: constant, rate: 1/s}\n  prompt_tokens: 100\n"

static int run_one(sim_metrics *m, sim_request_row *row, unsigned long long seed);

static sim_request_row last_row;
static int keep(void *ud, const sim_request_row *r) { (void)ud; last_row = *r; return 0; }

static int run_one(sim_metrics *m, sim_request_row *row, unsigned long long seed)
{
    sim_choice c = sim_choice_first(&s);
    sim_executor ex;
    ck_assert_int_eq(sim_executor_model(&s, &c, &ex), 0);
    sim_run_opts o = {.seed = seed, .on_request = keep};
    char err[512] = "";
    int rc = sim_run(&s, &c, &ex, &o, m, err, sizeof err);
    ex.free(ex.ctx);
    ck_assert_msg(rc == SIM_OK, "%s", err);
    if (row) *row = last_row;
    return rc;
}

/* The time of a verify step of one sequence with `drafts` drafts at `context`. */
static double verify_step(int drafts, long context)
{
    const scn_spec *sp = kv_spec_get(&s, 0);
    scn_scenario *ps = malloc(sizeof *ps);
    ck_assert_ptr_nonnull(ps);
    bool has = kv_spec_proposer_scenario(&s, sp, ps);
    sim_choice c = sim_choice_first(&s);
    kv_cache_cfg cfg = kv_cache_cfg_make(&s, c.kv_dtype, c.sink, c.window);
    kv_seq_work w[2] = {{drafts + 1, context}, {0, 0}};
    int d = drafts;
    double t = kv_spec_step_time(&s, has ? ps : NULL, sp, &cfg, c.attention, w, &d, 1, w + 1).seconds;
    free(ps);
    return t;
}

START_TEST(full_acceptance_emits_k_plus_one_per_step)
{
    /* Prompt 100, output 21: the prefill emits token 1, then each verify step of k = 4 drafts
     * accepts all four and adds the bonus token: 5 tokens a step, 4 steps for the other 20. */
    load(ONE "  output_tokens: 21\noptions:\n  speculative: [{method: eagle, k: 4, acceptance: 1.0}]\n", NULL, 0);
    sim_metrics m;
    sim_request_row row;
    run_one(&m, &row, 1);
    ck_assert_int_eq(m.steps, 5);
    ck_assert_int_eq(row.output, 21);
    /* The verify steps run at contexts 100, 105, 110, 115: their times, summed, are the time
     * from the first token to the last. */
    double sum = 0;
    for (int j = 0; j < 4; j++) sum += verify_step(4, 100 + 5 * j);
    ck_assert_msg(fabs(row.tpot * 20 - sum) < 1e-12, "tpot*20 %.12g vs %.12g", row.tpot * 20, sum);
    /* Output 23: after four full steps two tokens remain, so the fifth verifies one draft. */
    load(ONE "  output_tokens: 23\noptions:\n  speculative: [{method: eagle, k: 4, acceptance: 1.0}]\n", NULL, 0);
    run_one(&m, &row, 1);
    ck_assert_int_eq(m.steps, 6);
    ck_assert_int_eq(row.output, 23);
}
END_TEST

START_TEST(zero_acceptance_emits_one_per_step)
{
    load(ONE "  output_tokens: 21\noptions:\n  speculative: [{method: eagle, k: 4, acceptance: 0}]\n", NULL, 0);
    sim_metrics m;
    sim_request_row row;
    run_one(&m, &row, 1);
    /* One token per verify step: the prefill and 20 verify steps. */
    ck_assert_int_eq(m.steps, 21);
    ck_assert_int_eq(row.output, 21);
    /* Speculation off: the same step count, each a plain decode (cheaper than a verify). */
    sim_metrics off;
    sim_request_row r0;
    load(ONE "  output_tokens: 21\n", NULL, 0);
    run_one(&off, &r0, 1);
    ck_assert_int_eq(off.steps, 21);
    ck_assert_msg(r0.tpot < row.tpot, "plain %.6g vs rejected speculation %.6g", r0.tpot, row.tpot);
}
END_TEST

START_TEST(engine_mean_tokens_per_step_matches_the_closed_form)
{
    /* One long reply at a = 0.6, k = 4: 4000 tokens after the first over the verify steps.
     * Tolerance: 5 standard errors, plus the end effect (at most k steps draft fewer than k,
     * each losing at most k tokens). */
    load(ONE "  output_tokens: 4001\ndeployment: {max_model_len: 8192}\n"
             "options:\n  speculative: [{method: eagle, k: 4, acceptance: 0.6, decay: 1}]\n", NULL, 0);
    sim_metrics m;
    run_one(&m, NULL, 3);
    double steps = (double)(m.steps - 1), mean = 4000 / steps;
    double tol = 5 * tokens_sd(0.6, 4) / sqrt(steps) + 16.0 / steps;
    ck_assert_msg(fabs(mean - closed_form(0.6, 4)) < tol, "mean %.4f vs %.4f (tol %.4f)", mean, closed_form(0.6, 4), tol);
}
END_TEST

START_TEST(runs_are_bit_identical)
{
    load("model: llama-3.1-8b\nhardware: h100-sxm\nworkload:\n  requests: 200\n  arrival: {process: poisson, rate: 4/s}\n"
         "  prompt_tokens: {dist: lognormal, mean: 400, sigma: 0.5, max: 2000}\n"
         "  output_tokens: {dist: lognormal, mean: 150, sigma: 0.5, max: 800}\n"
         "options:\n  speculative: [{method: eagle, k: 3, acceptance: 0.7}]\n", NULL, 0);
    sim_metrics a, b, c;
    sim_choice ch = sim_choice_first(&s);
    char err[256];
    ck_assert_int_eq(sim_run_predicted(&s, &ch, &a, err, sizeof err), SIM_OK);
    ck_assert_int_eq(sim_run_predicted(&s, &ch, &b, err, sizeof err), SIM_OK);
    ck_assert_int_eq(a.steps, b.steps);
    ck_assert(a.q[SIM_Q_TPOT].mean == b.q[SIM_Q_TPOT].mean);
    ck_assert(a.duration == b.duration);
    s.seed += 1;
    ck_assert_int_eq(sim_run_predicted(&s, &ch, &c, err, sizeof err), SIM_OK);
    ck_assert_msg(c.steps != a.steps || c.q[SIM_Q_TPOT].mean != a.q[SIM_Q_TPOT].mean, "another seed gave the same run");
}
END_TEST

START_TEST(rejected_drafts_release_their_blocks)
{
    /* Block size 4, 10 blocks: a sequence grown to 13 positions (a verify of 4 drafts on 9
     * committed) holds 4 blocks; rolling back to 9 frees the fourth; rolling back to a length
     * inside the third block frees nothing more. */
    sim_kv *kv = sim_kv_init(10, 4, true, false, 0, 0);
    ck_assert_ptr_nonnull(kv);
    sim_kv_seq q;
    memset(&q, 0, sizeof q);
    ck_assert_int_eq(sim_kv_grow(kv, &q, 13), 0);
    ck_assert_int_eq(q.n_blocks, 4);
    ck_assert_int_eq(sim_kv_available(kv), 6);
    sim_kv_commit(kv, &q, 9);
    sim_kv_truncate(kv, &q, 9);
    ck_assert_int_eq(q.n_blocks, 3);
    ck_assert_int_eq(q.room, 12);
    ck_assert_int_eq(sim_kv_available(kv), 7);
    sim_kv_truncate(kv, &q, 10);
    ck_assert_int_eq(q.n_blocks, 3);
    sim_kv_release(kv, &q);
    sim_kv_seq_free(&q);   /* release keeps the table's buffer for reuse */
    ck_assert_int_eq(sim_kv_available(kv), 10);
    /* With the prefix cache, committed full blocks stay: truncation never cuts below them. */
    sim_kv *pc = sim_kv_init(10, 4, true, true, 0, 0);
    memset(&q, 0, sizeof q);
    ck_assert_int_eq(sim_kv_grow(pc, &q, 13), 0);
    sim_kv_commit(pc, &q, 8);
    sim_kv_truncate(pc, &q, 5);
    ck_assert_int_eq(q.n_blocks, 2);
    sim_kv_release(pc, &q);
    sim_kv_seq_free(&q);
    sim_kv_free(pc);
    sim_kv_free(kv);
}
END_TEST

START_TEST(proposer_memory_counted_by_hand)
{
    load(HEAD "options:\n  speculative: [{method: eagle, k: 4}, {method: draft, model: llama-3.2-1b, k: 4}, "
              "{method: ngram, k: 4, acceptance: 0.5}]\n", NULL, 0);
    /* EAGLE on Llama-3.1-8B: one decoder layer (q 4096x4096, k and v 4096x1024, o 4096x4096;
     * MLP 3 x 4096 x 14336; two norms) + the final norm + the 2h x h fc, in bf16. */
    double layer = 2.0 * 4096 * 4096 + 2.0 * 4096 * 1024 + 3.0 * 4096 * 14336 + 2 * 4096 + 4096;
    double eagle = (layer + 2.0 * 4096 * 4096) * 2;
    ck_assert_double_eq_tol(kv_spec_weight_bytes(&s, &s.options.spec[0]), eagle, 1);
    /* Its KV: one layer of 8 KV heads x 128 dims, K and V, 2 bytes. */
    sim_choice c = sim_choice_first(&s);
    kv_cache_cfg cfg = kv_cache_cfg_make(&s, c.kv_dtype, 0, 0);
    ck_assert_double_eq_tol(kv_spec_kv_bytes_per_token(&s, &cfg, &s.options.spec[0]), 4096, 1e-9);
    /* The pool: the budget less the head and k more fp32 logit rows per sequence, over the
     * target's 128 KiB plus the head's 4 KiB per token. */
    kv_pool base = kv_pool_size(&s, &cfg, true, 16);
    double budget = base.kv_budget - eagle - 4.0 * s.deployment.max_num_seqs * 128256 * 4;
    long want = (long)floor(budget / (16 * (131072.0 + 4096)));
    ck_assert_int_eq(kv_spec_pool_size(&s, &cfg, true, 16, &s.options.spec[0]).blocks, want);
    /* The draft model: Llama-3.2-1B's 1,235,814,400 parameters in bf16 (model card) and its
     * 16 layers x 8 heads x 64 dims x 2 x 2 bytes = 32 KiB per token. */
    ck_assert_double_eq_tol(kv_spec_weight_bytes(&s, &s.options.spec[1]), 1235814400.0 * 2, 1);
    ck_assert_double_eq_tol(kv_spec_kv_bytes_per_token(&s, &cfg, &s.options.spec[1]), 32768, 1e-9);
    /* n-gram keeps nothing on the device. */
    ck_assert(kv_spec_weight_bytes(&s, &s.options.spec[2]) == 0);
    ck_assert_int_eq(kv_spec_pool_size(&s, &cfg, true, 16, &s.options.spec[2]).blocks,
                     (long)floor((base.kv_budget - 4.0 * s.deployment.max_num_seqs * 128256 * 4) / (16 * 131072.0)));
}
END_TEST

/* Regression (issue 14 review): `memory`'s table and plan's fit check left the draft model out
 * (Qwen3-32B + a Qwen3-8B draft on an H100 "fit" with 35,274 tokens while the speculative
 * section gave 0 blocks; EAGLE: 2,204 blocks in the table, 1,807 in the simulator's pool). One
 * accounting now: kv_capacity_spec, which the pool and `memory` both take. */
START_TEST(proposer_memory_is_one_accounting)
{
    load(HEAD "options:\n  speculative: [{method: eagle, k: 4}]\n", NULL, 0);
    kv_cache_cfg cfg = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    const scn_spec *sp = &s.options.spec[0];
    /* By hand (proposer_memory_counted_by_hand): the budget less the head's weights and 4 more
     * fp32 logit rows per sequence, over 128 KiB + 4 KiB per token. */
    double layer = 2.0 * 4096 * 4096 + 2.0 * 4096 * 1024 + 3.0 * 4096 * 14336 + 2 * 4096 + 4096;
    double eagle = (layer + 2.0 * 4096 * 4096) * 2;
    kv_capacity plain = kv_capacity_compute(&s, &cfg, 16, 0);
    kv_capacity with = kv_capacity_spec(&s, &cfg, 16, 0, sp);
    double budget = plain.kv_budget - eagle - 4.0 * s.deployment.max_num_seqs * 128256 * 4;
    ck_assert_double_eq_tol(with.kv_budget, budget, 1);
    ck_assert_double_eq_tol(with.weights, plain.weights + eagle, 1);
    ck_assert_double_eq_tol(with.kv_bytes_per_token, 131072.0 + 4096, 1e-9);
    long want = (long)floor(budget / (16 * (131072.0 + 4096)));
    ck_assert_int_eq(with.capacity_blocks, want);
    ck_assert_int_eq(kv_spec_pool_size(&s, &cfg, true, 16, sp).blocks, want);

    /* Qwen3-32B (bf16) with a Qwen3-8B draft on an H100: 61.0 GiB + 15.3 GiB of weights exceed
     * the 71.7 GiB usable, so nothing fits, in the table and in plan's check alike. */
    load("model: qwen3-32b\nhardware: h100-sxm\nworkload: {requests: 10, arrival: {process: offline}, prompt_tokens: 800, "
         "output_tokens: 300}\ndeployment: {max_num_seqs: 256, max_model_len: 8192}\n"
         "options:\n  speculative: [{method: draft, model: qwen3-8b, k: 4}]\n", NULL, 0);
    cfg = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    sp = &s.options.spec[0];
    plain = kv_capacity_compute(&s, &cfg, 16, 0);
    with = kv_capacity_spec(&s, &cfg, 16, 0, sp);
    ck_assert(plain.kv_budget > 0);
    ck_assert_msg(with.kv_budget < 0, "budget with the draft %.3g", with.kv_budget);
    ck_assert(with.weights > 76.0 * 1073741824.0 && with.weights < 76.6 * 1073741824.0);
    ck_assert_int_eq(with.capacity_blocks, 0);
    ck_assert_int_eq(with.max_seqs_paged, 0);
    ck_assert_int_eq(kv_spec_pool_size(&s, &cfg, true, 16, sp).blocks, 0);
    char out[65536], err[8192], args[1024];
    const char *f = t_write("spec-draft-too-big.yaml",
                            "model: qwen3-32b\nhardware: h100-sxm\nworkload: {requests: 10, arrival: {process: offline}, "
                            "prompt_tokens: 800, output_tokens: 300}\ndeployment: {max_num_seqs: 256, max_model_len: 8192}\n"
                            "options:\n  speculative: [{method: draft, model: qwen3-8b, k: 4}]\n");
    snprintf(args, sizeof args, "plan %s --no-db --seeds 1", f);
    /* Its only candidate skipped, the plan fails as bad input data and says why on stderr. */
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 65);
    ck_assert_msg(strstr(err, "does not fit: weights 76.") != NULL, "%s\n%s", out, err);
}
END_TEST

START_TEST(verify_rows_run_the_decode_kernels)
{
    /* DeepSeek-V3 on 8 H200s: a verify of 1 draft (MTP, k = 1) runs MLA absorbed over the
     * latent cache like decode; the same two tokens as a prefill chunk decompress the keys. */
    t_library("deepseek-v3", "h200", &s);
    s.deployment.tensor_parallel = 8;
    kv_cache_cfg cfg = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w = {2, 3000};
    int v = 2;
    kv_step_cost ver = kv_step_time_verify(&s, &cfg, SCN_ATTN_FLASH, &w, &v, 1);
    kv_step_cost pre = kv_step_time(&s, &cfg, SCN_ATTN_FLASH, &w, 1);
    ck_assert(ver.mla_absorbed);
    ck_assert(!pre.mla_absorbed);
    /* Every verify row needs its logits: the LM head does 2x the rows' flops of a prefill
     * chunk, which samples only its last token. */
    ck_assert_double_eq_tol(ver.op[KV_OP_LM_HEAD].flops, 2 * pre.op[KV_OP_LM_HEAD].flops, 1e-6 * pre.op[KV_OP_LM_HEAD].flops);
    /* Absorbed attention reads the latent once: far fewer bytes than expanding 3000 keys. */
    ck_assert(ver.op[KV_OP_ATTENTION].bytes < pre.op[KV_OP_ATTENTION].bytes);
}
END_TEST

/* Regression (issue 14 review): MTP could not combine with expert parallelism: the verify and
 * the MTP layer were priced on the unsplit step (every expert on every GPU), the proposer's
 * weights counted every expert, and the pool took the plain replica's (negative) budget. */
START_TEST(mtp_with_ep_prices_the_split_step)
{
    load("model: deepseek-v3\nhardware: h200\nworkload: {requests: 16, arrival: {process: offline}, prompt_tokens: 200, "
         "output_tokens: 20}\ndeployment: {tensor_parallel: 1, attention_data_parallel: 8, expert_parallel: 8}\n"
         "options:\n  speculative: [{method: mtp, k: 1}]\n", NULL, 0);
    const scn_spec *sp = kv_spec_get(&s, 0);
    ck_assert_ptr_nonnull(sp);
    sim_choice c = sim_choice_first(&s);
    kv_cache_cfg cfg = kv_cache_cfg_make(&s, c.kv_dtype, 0, 0);
    /* Weights: the MTP layer's 256 routed experts (3 x 7168 x 2048 each) are sharded 8 ways like
     * the target's, so a GPU holds 7/8 of them fewer than on an unsharded TP-1 GPU. */
    scn_scenario *plain = malloc(sizeof *plain);
    ck_assert_ptr_nonnull(plain);
    *plain = s;
    plain->deployment.attention_dp = plain->deployment.expert_parallel = 1;
    double routed = 256.0 * 3 * 7168 * 2048 * kv_weight_bytes_per_param(&s.model);
    double w_ep = kv_spec_weight_bytes(&s, sp);
    ck_assert_double_eq_tol(kv_spec_weight_bytes(plain, sp) - w_ep, routed * 7 / 8, 1);
    /* The pool: one DP rank's budget (the sharded one) less the MTP layer and one more fp32
     * logit row per sequence, over the target's 70 272 plus the MTP layer's 576 x 2 bytes. */
    kv_pool base = kv_pool_size(&s, &cfg, true, 16);
    ck_assert(base.kv_budget > 0);
    double budget = base.kv_budget - w_ep - 1.0 * s.deployment.max_num_seqs * 129280 * 4;
    long want = (long)floor(budget / (16 * (70272.0 + 1152)));
    ck_assert(want > 0);
    ck_assert_int_eq(kv_spec_pool_size(&s, &cfg, true, 16, sp).blocks, want);
    /* The verify step is the DP rank's split step, far cheaper than reading every expert. */
    scn_scenario *ps = malloc(sizeof *ps);
    ck_assert_ptr_nonnull(ps);
    ck_assert(kv_spec_proposer_scenario(&s, sp, ps));
    kv_seq_work w[64], scratch[64], one[32];
    int d[32];
    for (int i = 0; i < 32; i++) { w[i] = (kv_seq_work){2, 1000}; d[i] = 1; one[i] = (kv_seq_work){1, 1000}; }
    kv_spec_step st = kv_spec_step_time(&s, ps, sp, &cfg, c.attention, w, d, 32, scratch);
    kv_moe_step mv = kv_moe_step_time_verify(&s, &cfg, c.attention, w, d, 32);
    ck_assert_double_eq_tol(st.verify_seconds, mv.seconds, 1e-15);
    ck_assert(mv.alltoall > 0);
    ck_assert_msg(st.verify_seconds < 0.5 * st.verify.seconds, "split %.6g vs unsplit %.6g", st.verify_seconds,
                  st.verify.seconds);
    /* The MTP pass: the one-layer proposer's split step (engine CPU aside) plus its 2h x h fc. */
    kv_moe_step mp = kv_moe_step_time(ps, &cfg, c.attention, one, 32);
    double fc = 2.0 * 7168 * 7168 * kv_weight_bytes_per_param(&s.model) /
                (s.hardware.memory_bandwidth * s.hardware.eff_bandwidth);
    ck_assert_double_eq_tol(st.draft_seconds, mp.seconds - mp.engine_seconds + fc, 1e-15);
    /* End to end: the simulation runs on that pool. */
    sim_metrics m;
    char err[512] = "";
    ck_assert_msg(sim_run_predicted(&s, &c, &m, err, sizeof err) == SIM_OK, "%s", err);
    ck_assert_int_eq(m.kv_blocks, kv_spec_pool_size(&s, &cfg, c.layout == SCN_LAYOUT_PAGED, c.block_size, sp).blocks);
    free(ps);
    free(plain);
}
END_TEST

/* Regression (issue 14 review): a verify of k + 1 rows counted its sequence's work items per
 * query head (the prefill rule) instead of per KV head and split (the decode kernel it runs),
 * so at small contexts its attention streamed the cache faster than one decode row did and a
 * verify step could cost less than a plain step: n-gram with acceptance 0 "paid" at batch 1. */
START_TEST(more_verify_rows_never_cost_less)
{
    load("model: llama-3.1-8b\nhardware: h100-sxm\nworkload: {requests: 10, arrival: {process: offline}, "
         "prompt_tokens: 150, output_tokens: 150}\ndeployment: {max_num_seqs: 256}\n"
         "options:\n  speculative: [{method: ngram, k: 4, acceptance: 0}]\n", NULL, 0);
    kv_cache_cfg cfg = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    for (long ctx = 100; ctx <= 4000; ctx *= 3) {
        kv_seq_work one = {1, ctx};
        double last = kv_step_time(&s, &cfg, SCN_ATTN_FLASH, &one, 1).seconds;
        for (int rows = 2; rows <= 9; rows++) {
            kv_seq_work w = {rows, ctx};
            int v = rows - 1;
            kv_step_cost r = kv_step_time_verify(&s, &cfg, SCN_ATTN_FLASH, &w, &v, 1);
            ck_assert_msg(r.seconds >= last, "ctx %ld: %d rows %.6g s < %.6g s", ctx, rows, r.seconds, last);
            last = r.seconds;
        }
    }
    /* With nothing accepted a verify step emits one token and costs at least a plain step. */
    kv_spec_wins w = kv_spec_win_ranges(&s, &s.options.spec[0], &cfg, SCN_ATTN_FLASH, 225, 256);
    ck_assert_int_eq(w.n, 0);
}
END_TEST

START_TEST(crossover_sits_where_the_sides_change)
{
    load(HEAD "deployment: {max_num_seqs: 1024}\noptions:\n  speculative: [{method: eagle, k: 4, acceptance: 0.6, decay: 1}, "
              "{method: eagle, k: 4, acceptance: 0.9, decay: 1}, {method: draft, model: llama-3.1-8b, k: 4}]\n", NULL, 0);
    kv_cache_cfg cfg = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    const scn_spec *lo = &s.options.spec[0], *hi = &s.options.spec[1], *same = &s.options.spec[2];
    int x = kv_spec_crossover(&s, lo, &cfg, SCN_ATTN_FLASH, 100, 1024);
    ck_assert_msg(x > 1 && x <= 1024, "crossover %d", x);
    /* Speculation wins just below the crossover and loses at it. */
    kv_spec_compare below = kv_spec_compare_at(&s, lo, &cfg, SCN_ATTN_FLASH, x - 1, 100);
    kv_spec_compare at = kv_spec_compare_at(&s, lo, &cfg, SCN_ATTN_FLASH, x, 100);
    ck_assert(below.spec_token < below.plain_token);
    ck_assert(at.spec_token >= at.plain_token);
    /* At batch 1 decode reads the 16 GB of weights for one token; speculation reads them for
     * 2.3 tokens, so it must pay there. */
    kv_spec_compare one = kv_spec_compare_at(&s, lo, &cfg, SCN_ATTN_FLASH, 1, 100);
    ck_assert_msg(one.plain_token / one.spec_token > 1.5, "speed-up at batch 1: %.3f", one.plain_token / one.spec_token);
    /* Higher acceptance moves the crossover up (or keeps it). */
    ck_assert_int_ge(kv_spec_crossover(&s, hi, &cfg, SCN_ATTN_FLASH, 100, 1024), x);
    /* A draft model as large as the target: four draft passes cost about four decode steps,
     * and 2.77 expected tokens cannot repay them: it loses already at batch 1. */
    ck_assert_int_eq(kv_spec_crossover(&s, same, &cfg, SCN_ATTN_FLASH, 100, 1024), 0);
}
END_TEST

/* A candidate of the loaded scenario with speculative option `spec`, as plan_enumerate makes it. */
static plan_cand cand(int spec, double batch_mean)
{
    plan_cand c;
    memset(&c, 0, sizeof c);
    c.c = sim_choice_first(&s);
    c.c.spec = spec;
    c.tp = 1;
    c.replicas = 1;
    c.max_num_seqs = s.deployment.max_num_seqs;
    c.max_batched = s.deployment.max_num_batched_tokens;
    c.hw = c.wformat = c.engine = -1;
    c.status = PLAN_DONE;
    c.allowed = true;
    c.m.batch_mean = batch_mean;
    c.batch_judged = batch_mean;   /* judged at the offered load (plan_rank) */
    return c;
}

START_TEST(planner_recommends_speculation_only_below_its_crossover)
{
    load(HEAD "options:\n  speculative: [off, {method: eagle, k: 4}, {method: draft, model: llama-3.1-8b, k: 4}]\n", NULL, 0);
    plan_cand c[3] = {cand(0, 4), cand(1, 4), cand(2, 4)};
    /* EAGLE at the workload's 105-token decode context pays well above a batch of 4: it stays recommended. */
    int x = plan_spec_crossover(&s, &c[1]);
    ck_assert_msg(x > 4, "crossover %d", x);
    int order[3] = {1, 0, 2};
    plan_result r = {.c = c, .n = 3, .order = order, .best = 1};
    plan_spec_gate(&s, &r);
    ck_assert_int_eq(r.best, 1);
    ck_assert(!r.spec_gated);
    char line[PLAN_LINE];
    ck_assert_int_eq(plan_spec_explain(&s, &r, line, sizeof line), 1);
    ck_assert_msg(strstr(line, "recommended") != NULL, "%s", line);
    /* At or above the crossover it is passed over for the same deployment without it. */
    c[1].m.batch_mean = c[1].batch_judged = x;
    plan_spec_gate(&s, &r);
    ck_assert_int_eq(r.best, 0);
    ck_assert(r.spec_gated);
    ck_assert_int_eq(r.spec_gated_cand, 1);
    ck_assert_int_eq(plan_spec_explain(&s, &r, line, sizeof line), 1);
    ck_assert_msg(strstr(line, "not recommended") != NULL, "%s", line);
    /* A draft model as large as the target never pays: its crossover is 0 and it is passed over
     * even at batch 1, and the explanation says it loses at one sequence. */
    ck_assert_int_eq(plan_spec_crossover(&s, &c[2]), 0);
    c[2].m.batch_mean = c[2].batch_judged = 1;
    r.best = 2;
    plan_spec_gate(&s, &r);
    ck_assert_int_eq(r.best, 0);
    ck_assert_int_eq(plan_spec_explain(&s, &r, line, sizeof line), 1);
    ck_assert_msg(strstr(line, "loses at every decode batch") != NULL, "%s", line);
}
END_TEST

/* Regression (issue 14 review): the crossover is not monotone. The search assumed one sign
 * change (doubling, then bisection); with vLLM's CUDA-graph capture sizes (up to 512 rows) the
 * verify step of k + 1 = 5 rows per sequence loses its graph at batch 103 (5 x 103 = 515 > 512
 * >= 5 x 102), and plain decode loses its own at batch 513, where speculation can pay again. */
START_TEST(speculation_pays_in_ranges)
{
    load("model: llama-3.1-8b\nhardware: h100-sxm\nworkload: {requests: 10, arrival: {process: offline}, "
         "prompt_tokens: 90, output_tokens: 20}\ndeployment: {max_num_seqs: 1024}\n"
         "options:\n  speculative: [off, {method: eagle, k: 4, acceptance: 0.6, decay: 1}, "
         "{method: eagle, k: 4, acceptance: 0.8, decay: 1}]\n", NULL, 0);
    /* The graph caps' crossings by themselves: V1's sampler (docs/cost-model.md, "The sampler in
     * the step") charges each verify row's 128 256 logits too, which at 0.8 closes the range
     * past 512 (speculation then loses from 423 on); it is left out here, as the older rule. */
    s.engine.sampler_bytes_per_logit = 0;
    s.engine.sampler_gather = false;
    kv_cache_cfg cfg = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    /* At 0.6 the first range opens at batch 1 and closes at a real sign change. Whether the
     * graph cap at 103 ends it depends on the GEMM tiles of the 515 verify rows (64-row tiles
     * pad them to 576, where 128-row tiles padded them to 640): the reason given must match
     * the place, the graph's at 103, the smooth compute crossing elsewhere. */
    kv_spec_wins w6 = kv_spec_win_ranges(&s, &s.options.spec[1], &cfg, SCN_ATTN_FLASH, 100, 1024);
    ck_assert_int_ge(w6.n, 1);
    ck_assert_int_eq(w6.r[0].lo, 1);
    int x6 = w6.x[0].batch;
    ck_assert_int_eq(x6, w6.r[0].hi + 1);
    kv_spec_compare in6 = kv_spec_compare_at(&s, &s.options.spec[1], &cfg, SCN_ATTN_FLASH, x6 - 1, 100);
    kv_spec_compare out6 = kv_spec_compare_at(&s, &s.options.spec[1], &cfg, SCN_ATTN_FLASH, x6, 100);
    ck_assert(in6.spec_token < in6.plain_token && out6.spec_token >= out6.plain_token);
    if (x6 == 103) ck_assert_int_eq(w6.x[0].why, KV_SPEC_WHY_GRAPH_LOST);
    else ck_assert_int_ne(w6.x[0].why, KV_SPEC_WHY_GRAPH_LOST);
    /* At 0.8 speculation pays in more than one range, and every boundary is a real sign change
     * of the per-token comparison. */
    kv_spec_wins w = kv_spec_win_ranges(&s, &s.options.spec[2], &cfg, SCN_ATTN_FLASH, 100, 1024);
    ck_assert_msg(w.n >= 2, "expected several ranges, got %d", w.n);
    for (int i = 0; i < w.n; i++) {
        kv_spec_compare in_lo = kv_spec_compare_at(&s, &s.options.spec[2], &cfg, SCN_ATTN_FLASH, w.r[i].lo, 100);
        kv_spec_compare in_hi = kv_spec_compare_at(&s, &s.options.spec[2], &cfg, SCN_ATTN_FLASH, w.r[i].hi, 100);
        ck_assert(in_lo.spec_token < in_lo.plain_token && in_hi.spec_token < in_hi.plain_token);
        if (w.r[i].hi < 1024) {
            kv_spec_compare out = kv_spec_compare_at(&s, &s.options.spec[2], &cfg, SCN_ATTN_FLASH, w.r[i].hi + 1, 100);
            ck_assert(out.spec_token >= out.plain_token);
        }
        if (w.r[i].lo > 1) {
            kv_spec_compare out = kv_spec_compare_at(&s, &s.options.spec[2], &cfg, SCN_ATTN_FLASH, w.r[i].lo - 1, 100);
            ck_assert(out.spec_token >= out.plain_token);
        }
    }
    /* A range opens where plain decode's 513 rows pass the 512 cap, for that reason. */
    bool opens = false;
    for (int i = 0; i < w.n_cross; i++)
        if (w.x[i].batch == 513) opens = w.x[i].wins && w.x[i].why == KV_SPEC_WHY_GRAPH_PLAIN;
    ck_assert(opens);
    ck_assert(kv_spec_wins_at(&w, 513) && !kv_spec_wins_at(&w, 512));
    /* The planner recommends speculation inside a range past the first crossing (the old
     * single-crossing gate passed it over) and not in the gap between ranges. */
    int gap = w.r[0].hi + 1, inside = w.r[1].lo + 1;
    plan_cand c[3] = {cand(0, inside), cand(2, inside), cand(1, 1)};
    int order[3] = {1, 0, 2};
    plan_result r = {.c = c, .n = 3, .order = order, .best = 1};
    ck_assert_int_eq(plan_spec_crossover(&s, &c[1]), gap);
    plan_spec_gate(&s, &r);
    ck_assert_int_eq(r.best, 1);
    ck_assert(!r.spec_gated);
    char line[PLAN_LINE], want[200];
    ck_assert_int_eq(plan_spec_explain(&s, &r, line, sizeof line), 1);
    snprintf(want, sizeof want, "pays only at decode batches %d-%d, %d-%d", w.r[0].lo, w.r[0].hi, w.r[1].lo, w.r[1].hi);
    ck_assert_msg(strstr(line, want) != NULL, "want '%s' in: %s", want, line);
    ck_assert_msg(strstr(line, "CUDA-graph capture size") != NULL, "%s", line);
    ck_assert_msg(strstr(line, "; recommended: ") != NULL, "%s", line);
    c[1].m.batch_mean = c[0].m.batch_mean = c[1].batch_judged = c[0].batch_judged = gap + 1;
    r.best = 1;
    plan_spec_gate(&s, &r);
    ck_assert_int_eq(r.best, 0);
    ck_assert(r.spec_gated);
    ck_assert_int_eq(plan_spec_explain(&s, &r, line, sizeof line), 1);
    ck_assert_msg(strstr(line, "where it does not pay") != NULL, "%s", line);
}
END_TEST

/* Regression (issue 14 review): `simulate` runs with different speculative settings stored the
 * same options key (only a non-zero list index went in), so `runs` could not tell them apart
 * and `plan` could reuse a run made with another setting. */
START_TEST(options_key_carries_the_speculative_setting)
{
    load(HEAD "options:\n  speculative: [{method: eagle, k: 4}]\n", NULL, 0);
    sim_choice c = sim_choice_first(&s);
    char *eagle = db_options_json(&c, &s.deployment, 0, kv_spec_get(&s, c.spec));
    load(HEAD "options:\n  speculative: [{method: eagle, k: 4, acceptance: 0.6}]\n", NULL, 0);
    char *eagle6 = db_options_json(&c, &s.deployment, 0, kv_spec_get(&s, c.spec));
    load(HEAD "options:\n  speculative: [{method: draft, model: llama-3.2-1b, k: 4}]\n", NULL, 0);
    char *draft = db_options_json(&c, &s.deployment, 0, kv_spec_get(&s, c.spec));
    load(HEAD, NULL, 0);
    char *off = db_options_json(&c, &s.deployment, 0, kv_spec_get(&s, c.spec));
    ck_assert_ptr_nonnull(eagle);
    ck_assert_ptr_nonnull(eagle6);
    ck_assert_ptr_nonnull(draft);
    ck_assert_ptr_nonnull(off);
    ck_assert_str_ne(eagle, eagle6);
    ck_assert_str_ne(eagle, draft);
    ck_assert_str_ne(eagle, off);
    ck_assert_msg(strstr(eagle, "\"method\":\"eagle\"") && strstr(eagle, "\"k\":4") && strstr(eagle, "\"acceptance\":[0.8,"),
                  "%s", eagle);
    ck_assert_msg(strstr(draft, "\"name\":\"llama-3.2-1b\"") != NULL, "%s", draft);
    ck_assert_msg(strstr(off, "speculative") == NULL, "%s", off);
    /* The planner's key for the same setting, listed second, equals simulate's for it first. */
    load(HEAD "options:\n  speculative: [off, {method: eagle, k: 4, acceptance: 0.6}]\n", NULL, 0);
    plan_cand pc = cand(1, 1);
    char *planned = plan_options_json(&s, &pc);
    ck_assert_ptr_nonnull(planned);
    ck_assert_str_eq(planned, eagle6);
    free(eagle);
    free(eagle6);
    free(draft);
    free(off);
    free(planned);
}
END_TEST

/* Regression (issue 14 review): `cost` ignored options.speculative when its first entry was
 * off, printed "first crossover batch 65" when speculation won at every batch up to
 * max_num_seqs 64, and its default context left out conversation history; simulate's choice
 * line omitted the speculative setting. */
START_TEST(cost_and_simulate_name_the_speculative_setting)
{
    char out[65536], err[8192], args[1024];
    const char *f = t_write("spec-off-first.yaml",
                            "model: llama-3.1-8b\nhardware: h100-sxm\ndeployment: {max_num_seqs: 64, max_model_len: 4096}\n"
                            "workload: {requests: 10, arrival: {process: poisson, rate: 1/s}, prompt_tokens: 150, output_tokens: 150,\n"
                            "  conversation: {turns: 3, think_time: 1 s}}\n"
                            "options:\n  speculative: [off, {method: eagle, k: 4, acceptance: 0.8, decay: 1}]\n");
    snprintf(args, sizeof args, "cost %s", f);
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 0);
    ck_assert_msg(strstr(out, "options.speculative[1], the first entry that is on") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "none up to max_num_seqs (64)") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "first crossover batch                65") == NULL, "%s", out);
    /* Three turns of 150 + 150: turn t carries 2 (t - 1) earlier messages of 150 tokens, so
     * the mean prompt is 150 + 300 x (0 + 1 + 2) / 3 = 450 tokens; decode context 450 + 75. */
    ck_assert_msg(strstr(out, "decode context (tokens)            525") != NULL, "%s", out);
    snprintf(args, sizeof args, "simulate %s --no-db --set 'options.speculative=[{method: eagle, k: 4, acceptance: 0.8, decay: 1}]'", f);
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 0);
    ck_assert_msg(strstr(out, "spec=eagle k=4 a=0.80") != NULL, "%s", out);
}
END_TEST

START_TEST(cli_simulates_and_plans_speculation)
{
    char out[65536], err[8192];
    char args[1024];
    const char *lib = getenv("KVPLAN_LIBRARY");
    snprintf(args, sizeof args, "simulate %s/archetypes/low-latency-assistant.yaml --no-db --set workload.requests=60 "
             "--set 'options.speculative=[{method: eagle, k: 4}]'", lib);
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 0);
    snprintf(args, sizeof args, "plan %s/archetypes/low-latency-assistant.yaml --no-db --seeds 1 --set workload.requests=60", lib);
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 0);
    ck_assert_msg(strstr(out, "Speculative decoding (") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "spec=eagle k=4") != NULL, "%s", out);
    /* A bad setting is located and exits 65. */
    const char *bad = t_write("bad-spec.yaml", HEAD "options:\n  speculative: [{method: ngram, k: 4}]\n");
    snprintf(args, sizeof args, "simulate %s --no-db", bad);
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 65);
    ck_assert_msg(strstr(err, "bad-spec.yaml:") != NULL && strstr(err, "options.speculative[0]") != NULL, "%s", err);
}
END_TEST

Suite *suite_spec(void)
{
    Suite *su = suite_create("spec");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, loader_reads_every_method);
    tcase_add_test(tc, loader_locates_bad_settings);
    tcase_add_test(tc, eagle_acceptance_falls_per_position);
    tcase_add_test(tc, expected_tokens_follow_the_closed_form);
    tcase_add_test(tc, sampled_acceptance_matches_its_mean);
    tcase_add_test(tc, full_acceptance_emits_k_plus_one_per_step);
    tcase_add_test(tc, zero_acceptance_emits_one_per_step);
    tcase_add_test(tc, engine_mean_tokens_per_step_matches_the_closed_form);
    tcase_add_test(tc, runs_are_bit_identical);
    tcase_add_test(tc, rejected_drafts_release_their_blocks);
    tcase_add_test(tc, proposer_memory_counted_by_hand);
    tcase_add_test(tc, proposer_memory_is_one_accounting);
    tcase_add_test(tc, verify_rows_run_the_decode_kernels);
    tcase_add_test(tc, mtp_with_ep_prices_the_split_step);
    tcase_add_test(tc, crossover_sits_where_the_sides_change);
    tcase_add_test(tc, more_verify_rows_never_cost_less);
    tcase_add_test(tc, planner_recommends_speculation_only_below_its_crossover);
    tcase_add_test(tc, speculation_pays_in_ranges);
    tcase_add_test(tc, options_key_carries_the_speculative_setting);
    tcase_add_test(tc, cli_simulates_and_plans_speculation);
    tcase_add_test(tc, cost_and_simulate_name_the_speculative_setting);
    suite_add_tcase(su, tc);
    return su;
}
