/* test_capsearch.c: the capacity search's speed-ups keep its answers: a trial stopped early
 * never turns a verdict the whole trial would give, the galloping search from the cost model's
 * start finds the boundary a cold search (doubling from the offered rate, plain bisection, whole
 * trials) finds, the DP/EP start lies near the answer, and the memoised MoE routing prices every
 * step as a fresh computation does. */
#include "tests.h"
#include "../planner/plan.h"
#include "../model/kv_model.h"
#include "../model/kv_moe_parallel.h"
#include "../model/kv_throughput.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static scn_scenario s;
static plan_result r;

static void load(const char *file, const char *const *sets, int n)
{
    t_library_file(file, sets, n, &s);
    ck_assert_int_eq(plan_enumerate(&s, &r), 0);
}

/* The reference: the search as it was before the warm start, written out plainly. Doubling
 * from the offered rate until the verdict changes, then arithmetic bisection until hi / lo - 1
 * <= tol, every trial run whole (plan_sustains). Returns the highest rate kept up (0: none down
 * to 1/256 of the start) and counts its trials. */
static double cold_search(const plan_cand *c, unsigned long long seed, int *trials)
{
    sim_metrics m;
    double start = s.workload.rate, lo = 0, hi = INFINITY;
    *trials = 1;
    if (plan_sustains(&s, c, seed, start, c->replicas, &m)) {
        lo = start;
        while (!isfinite(hi) && lo < start * PLAN_CAPACITY_RANGE) {
            ++*trials;
            if (plan_sustains(&s, c, seed, 2 * lo, c->replicas, &m)) lo *= 2; else hi = 2 * lo;
        }
        if (!isfinite(hi)) return lo;
    } else {
        hi = start;
        while (lo == 0 && hi > start / 256) {
            ++*trials;
            if (plan_sustains(&s, c, seed, hi / 2, c->replicas, &m)) lo = hi / 2; else hi /= 2;
        }
        if (lo == 0) return 0;
    }
    while (hi / lo - 1 > PLAN_CAPACITY_TOL) {
        double mid = (lo + hi) / 2;
        ++*trials;
        if (plan_sustains(&s, c, seed, mid, c->replicas, &m)) lo = mid; else hi = mid;
    }
    return lo;
}

/* Scenarios cut to short trials (the floor 4 x max_num_seqs and 60 s of arrivals still apply),
 * each with a different binding limit: chat's TTFT/TPOT SLO, high-concurrency-api's queue at 512
 * sequences, and chat with SLO terms at p50, p90 and p99.9 (read as the maximum): every quantile the
 * early stop reads. */
static const char *const chat_sets[] = {"workload.requests=300", "options.kv_layout=paged", "options.prefix_cache=on",
                                        "options.kv_dtype=bf16", "deployment.max_num_seqs=64"};
static const char *const api_sets[] = {"workload.requests=300", "options.kv_dtype=bf16", "options.max_num_seqs=[128]"};
static const char *const quant_sets[] = {"workload.requests=300", "options.kv_layout=paged", "options.prefix_cache=off",
                                         "options.kv_dtype=bf16", "deployment.max_num_seqs=64",
                                         "slo={ttft_p90: 400 ms, tpot_p50: 30 ms, e2e_p99.9: 60 s}"};

START_TEST(an_early_stop_never_changes_a_verdict)
{
    struct { const char *file; const char *const *sets; int n; } cases[] = {
        {"chat.yaml", chat_sets, 5}, {"archetypes/high-concurrency-api.yaml", api_sets, 3}, {"chat.yaml", quant_sets, 6}};
    /* Around each case's capacity (found by the search itself), where the passing trial has
     * just under the count of values above a limit that would settle a failure, and well
     * beyond it, where the early stop acts. */
    static const double mult[] = {0.5, 0.9, 1.0, 1 + PLAN_CAPACITY_TOL, 1.1, 1.5, 2, 4};
    int stopped = 0, passed = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        load(cases[k].file, cases[k].sets, cases[k].n);
        ck_assert_int_ge(r.n, 1);
        const plan_cand *c = &r.c[0];
        plan_capacity_result x;
        plan_capacity_search(&s, c, s.seed, c->replicas, 0, PLAN_CAPACITY_FIRST_STEP, PLAN_CAPACITY_TOL, NULL, &x);
        ck_assert(x.rate > 0);
        double h = x.rate;
        for (size_t i = 0; i < sizeof mult / sizeof mult[0]; i++) {
            sim_metrics whole, early;
            bool complete;
            bool a = plan_sustains(&s, c, s.seed, h * mult[i], c->replicas, &whole);
            bool b = plan_sustains_early(&s, c, s.seed, h * mult[i], c->replicas, &early, &complete);
            ck_assert_msg(a == b, "%s x%.2f: whole trial %d, early %d", cases[k].file, mult[i], a, b);
            if (!complete) stopped++;
            if (a) {
                /* A trial that keeps up is never stopped: its metrics are the whole trial's. */
                passed++;
                ck_assert(complete);
                ck_assert(early.requests == whole.requests && early.q[SIM_Q_TTFT].p99 == whole.q[SIM_Q_TTFT].p99 &&
                          early.q[SIM_Q_QUEUE].p99 == whole.q[SIM_Q_QUEUE].p99 && early.steps == whole.steps);
            }
        }
        plan_result_free(&r);
    }
    /* The cases span both verdicts, and the stop acted on some failing trials. */
    ck_assert_int_gt(passed, 0);
    ck_assert_int_gt(stopped, 0);
}
END_TEST

START_TEST(the_warm_search_finds_the_cold_searchs_boundary)
{
    struct { const char *file; const char *const *sets; int n; } cases[] = {
        {"chat.yaml", chat_sets, 5}, {"archetypes/high-concurrency-api.yaml", api_sets, 3}, {"chat.yaml", quant_sets, 6}};
    int warm_trials = 0, cold_trials = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        load(cases[k].file, cases[k].sets, cases[k].n);
        const plan_cand *c = &r.c[0];
        for (int seed = 0; seed < 2; seed++) {
            plan_capacity_result x;
            plan_capacity_search_from(&s, c, s.seed + seed, c->replicas, 0, PLAN_CAPACITY_FIRST_STEP, PLAN_CAPACITY_TOL,
                                      0, NULL, &x);
            int n;
            double ref = cold_search(c, s.seed + seed, &n);
            warm_trials += x.sims;
            cold_trials += n;
            ck_assert_msg(!x.unbounded && x.rate > 0 && ref > 0, "%s: warm %g, cold %g", cases[k].file, x.rate, ref);
            /* The warm answer keeps up on a whole trial; both lie within their brackets of one
             * boundary (pass/fail need not be monotone between seeds' noise, so allow both). */
            sim_metrics m;
            ck_assert(plan_sustains(&s, c, s.seed + seed, x.rate, c->replicas, &m));
            ck_assert_msg(fabs(x.rate - ref) <= 2 * PLAN_CAPACITY_TOL * fmax(x.rate, ref), "%s seed %d: warm %g, cold %g",
                          cases[k].file, seed, x.rate, ref);
        }
        plan_result_free(&r);
    }
    ck_assert_msg(warm_trials < cold_trials, "warm %d trials, cold %d", warm_trials, cold_trials);
}
END_TEST

START_TEST(dp_ep_start_lies_near_the_answer)
{
    /* DeepSeek-V3 on 8 H200s, attention DP 8, EP 8, cut to 16 sequences per rank so trials stay
     * short (4 x 8 x 16 = 512 requests at least). The DP-aware start prices one rank's step and
     * counts the 8 ranks; the replica-wide estimate (kv_saturation_rate) counts one engine of 16
     * sequences and lands far below. */
    const char *sets[] = {"workload.requests=300", "deployment.max_num_seqs=16", "options.kv_dtype=[fp8]"};
    load("archetypes/deepseek-v3-dp-ep.yaml", sets, 3);
    const plan_cand *c = &r.c[0];
    double h = plan_capacity_hint(&s, c, 1);
    plan_capacity_result x;
    plan_capacity_search_from(&s, c, s.seed, 1, h, PLAN_CAPACITY_FIRST_STEP, PLAN_CAPACITY_TOL, 0, NULL, &x);
    ck_assert_msg(x.rate > 0 && !x.unbounded, "rate %g", x.rate);
    ck_assert_msg(h > x.rate / 2 && h < 2 * x.rate, "start %g, capacity %g", h, x.rate);
    scn_scenario t;
    plan_apply(&s, c, &t);
    kv_cache_cfg kc = kv_cache_cfg_make(&t, c->c.kv_dtype, 0, 0);
    kv_seq_work w[64];
    double whole = kv_saturation_rate(&t, &kc, c->c.attention, true, c->c.block_size, w, 64).rate;
    ck_assert_msg(whole < x.rate / 4, "replica-wide estimate %g, capacity %g", whole, x.rate);
    plan_result_free(&r);
}
END_TEST

START_TEST(memoised_moe_routing_prices_as_computed)
{
    /* Three routings: skew 0.3 over EP 8, skew 0 over EP 8, skew 0.3 over EP 4 (each differs from
     * another in one key). Priced in turn, each call finds another routing memoised and computes
     * afresh: the reference. Priced one routing at a time, over token counts in two rhythms,
     * calls hit the memo (and its table's shared slots): every price equals the reference bit
     * for bit, and the busiest share equals kv_moe_busiest_share's. */
    enum { R = 3, N = 300 };
    static scn_scenario v[R];
    static const int ep[R] = {8, 8, 4};
    static const double skew[R] = {0.3, 0, 0.3};
    kv_cache_cfg cc[R];
    for (int j = 0; j < R; j++) {
        t_library("deepseek-v3", "h200", &v[j]);
        v[j].deployment.attention_dp = ep[j];
        v[j].deployment.expert_parallel = ep[j];
        v[j].deployment.expert_skew = skew[j];
        cc[j] = kv_cache_cfg_make(&v[j], SCN_DTYPE_BF16, 0, 0);
    }
    static double ref[R][N + 1];
    static kv_seq_work w[N];
    for (int n = 1; n <= N; n++) {
        for (int i = 0; i < n; i++) w[i] = (kv_seq_work){1, 1000 + i};
        for (int j = 0; j < R; j++) ref[j][n] = kv_moe_step_time(&v[j], &cc[j], SCN_ATTN_FLASH, w, n).seconds;
        ck_assert(ref[0][n] != ref[1][n] && ref[0][n] != ref[2][n]);
    }
    for (int j = 0; j < R; j++)
        for (int rhythm = 1; rhythm <= 3; rhythm += 2)
            for (int start = 1; start <= rhythm; start++)
                for (int n = start; n <= N; n += rhythm) {
                    for (int i = 0; i < n; i++) w[i] = (kv_seq_work){1, 1000 + i};
                    kv_moe_step x = kv_moe_step_time(&v[j], &cc[j], SCN_ATTN_FLASH, w, n);
                    ck_assert_msg(x.seconds == ref[j][n], "routing %d, n %d", j, n);
                    ck_assert(x.busiest_share ==
                              kv_moe_busiest_share(v[j].model.experts, v[j].model.experts_per_token, ep[j], skew[j]));
                }
}
END_TEST

/* A tight deployment.max_queued_requests sheds the load a candidate cannot carry: the requests
 * it serves stay fast however high the rate. Those turned away missed the SLO (plan_slo_met), so
 * the capacity with a bound of 2 is not above the unbounded one. Before, only the served were
 * judged: the search galloped to 1024x its start and called the candidate unbounded. */
START_TEST(queue_rejections_do_not_raise_capacity)
{
    load("chat.yaml", chat_sets, 5);
    const plan_cand *c = &r.c[0];
    plan_capacity_result free_q, bounded;
    plan_capacity_search(&s, c, s.seed, c->replicas, 0, PLAN_CAPACITY_FIRST_STEP, PLAN_CAPACITY_TOL, NULL, &free_q);
    ck_assert(free_q.rate > 0);
    plan_result_free(&r);
    static const char *const sets[] = {"workload.requests=300", "options.kv_layout=paged", "options.prefix_cache=on",
                                       "options.kv_dtype=bf16", "deployment.max_num_seqs=64",
                                       "deployment.max_queued_requests=2"};
    load("chat.yaml", sets, 6);
    ck_assert_int_eq(s.deployment.max_queued_requests, 2);
    c = &r.c[0];
    plan_capacity_search(&s, c, s.seed, c->replicas, 0, PLAN_CAPACITY_FIRST_STEP, PLAN_CAPACITY_TOL, NULL, &bounded);
    ck_assert_msg(bounded.rate <= free_q.rate * (1 + 2 * PLAN_CAPACITY_TOL), "bound 2: %g req/s, unbounded %g req/s",
                  bounded.rate, free_q.rate);
    plan_result_free(&r);
}
END_TEST

Suite *suite_capsearch(void)
{
    Suite *su = suite_create("capsearch");
    TCase *tc = tcase_create("search");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, an_early_stop_never_changes_a_verdict);
    tcase_add_test(tc, the_warm_search_finds_the_cold_searchs_boundary);
    tcase_add_test(tc, dp_ep_start_lies_near_the_answer);
    tcase_add_test(tc, memoised_moe_routing_prices_as_computed);
    tcase_add_test(tc, queue_rejections_do_not_raise_capacity);
    suite_add_tcase(su, tc);
    return su;
}
