/* test_bound.c: the planner's skip bound (planner/plan_bound.c, docs/planner.md "Skipping
 * candidates that cannot win") is sound: its lower bound on a step never exceeds the cost
 * model's step time on random batches; it never claims a candidate's capacity lies below the
 * capacity the simulated search finds (checked at exactly that rate, where the claim would be
 * tightest); and a plan that skips by it ranks its first rows and recommends exactly as a plan
 * that simulates every candidate. */
#include "tests.h"
#include "../planner/plan.h"
#include "../model/kv_model.h"
#include "../sim/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A chat-like workload on one H100: every candidate's capacity search runs in well under a
 * second. max_num_seqs spreads the candidates' capacities over a factor of ten or more, so the
 * bound has candidates to skip, and neighbours near the threshold where it is tightest. */
#define SMALL_CHAT                                                                         \
    "name: bound-chat\nmodel: llama-3-8b\nhardware: h100-sxm\n"                            \
    "workload:\n  requests: 300\n  arrival: {process: poisson, rate: 8/s}\n"              \
    "  prompt_tokens: {dist: uniform, min: 200, max: 1200}\n"                              \
    "  output_tokens: {dist: uniform, min: 20, max: 300}\n"                                \
    "  shared_prefix: {groups: 2, tokens: 512, share: 0.8}\n"                              \
    "quality: {allow_kv_dtype: [fp8]}\n"

static const char *CHAT_TTFT_TPOT = SMALL_CHAT
    "slo: {ttft_p99: 1 s, tpot_p99: 40 ms}\n"
    "options:\n  kv_layout: [paged]\n  block_size: [16]\n  prefix_cache: [off, on]\n  kv_dtype: [bf16, fp8]\n"
    "  max_num_seqs: [4, 8, 16, 64, 256]\n";

/* An end-to-end SLO term and two replicas: the other deadline form, and E engines. */
static const char *CHAT_E2E_REPLICAS = SMALL_CHAT
    "deployment: {replicas: 2}\nslo: {e2e_p95: 8 s}\n"
    "options:\n  kv_layout: [paged]\n  block_size: [16]\n  prefix_cache: [off]\n  kv_dtype: [bf16, fp8]\n"
    "  max_num_seqs: [2, 4, 16, 128]\n";

static void load(const char *text, scn_scenario *s, plan_result *r, int keep)
{
    scn_error e;
    ck_assert_int_eq(t_load(text, NULL, 0, s, &e), SCN_OK);
    ck_assert_int_eq(plan_enumerate(s, r), 0);
    plan_set_seeds(r, 1);
    plan_set_bound(r, keep);
}

static void evaluate(const scn_scenario *s, plan_result *r)
{
    char err[512];
    ck_assert_msg(plan_evaluate(s, r, 2, 0, 1, NULL, NULL, err, sizeof err) == 0, "%s", err);
    plan_rank(s, r);
}

/* The step floor against kv_step_time on random batches of decode rows and prefill chunks, on a
 * dense model, one with sliding-window layers, tensor parallelism (all-reduces) and a sink +
 * window cache, at every angle the proof uses. */
START_TEST(step_floor_is_below_every_step)
{
#define WL "workload: {requests: 10, arrival: {process: poisson, rate: 1/s}, prompt_tokens: 100, output_tokens: 10}\n"
    static const char *const cases[] = {
        WL "name: f1\nmodel: llama-3-8b\nhardware: h100-sxm\noptions: {kv_dtype: [bf16, fp8], max_num_seqs: [256]}\n",
        WL "name: f2\nmodel: gemma-2-9b\nhardware: a100-80g\noptions: {max_num_seqs: [128]}\n",
        WL "name: f3\nmodel: llama-3-70b\nhardware: h100-sxm\ndeployment: {tensor_parallel: 4}\n"
        "options: {max_num_seqs: [64], attention: [flash, naive]}\n",
        WL "name: f4\nmodel: mistral-7b\nhardware: l40s\nquality: {allow_window: true}\n"
        "options: {window: [{sink: 4, window: 1024}], max_num_seqs: [32]}\n",
    };
    sim_rng g;
    sim_rng_seed(&g, 7);
    kv_seq_work rows[64];
    long checked = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        scn_scenario s;
        scn_error e;
        plan_result r;
        ck_assert_msg(t_load(cases[k], NULL, 0, &s, &e) == SCN_OK, "case %zu: %s", k, e.msg);
        ck_assert_int_eq(plan_enumerate(&s, &r), 0);
        for (int i = 0; i < r.n; i++) {
            const plan_cand *c = &r.c[i];
            if (c->status != PLAN_PENDING) continue;
            scn_scenario t;
            plan_apply(&s, c, &t);
            kv_cache_cfg kc = kv_cache_cfg_make(&t, c->c.kv_dtype, c->c.sink, c->c.window);
            for (int trial = 0; trial < 200; trial++) {
                int cap = c->max_num_seqs < 64 ? c->max_num_seqs : 64;
                int n = 1 + (int)(sim_rng_uniform(&g) * cap);
                double pre = sim_rng_uniform(&g);   /* share of prefill rows in this batch */
                for (int j = 0; j < n; j++) {
                    bool prefill = sim_rng_uniform(&g) < pre;
                    rows[j].new_tokens = prefill ? 1 + (long)(sim_rng_uniform(&g) * 4096) : 1;
                    rows[j].context = (long)(sim_rng_uniform(&g) * 8000);
                }
                double step = kv_step_time(&t, &kc, c->c.attention, rows, n).seconds;
                for (int a = 0; a <= 4; a++) {
                    double theta = 1.5707963267948966 * a / 4;
                    double floor_s = plan_bound_step_floor(&s, c, rows, n, theta);
                    ck_assert_msg(isfinite(floor_s) && floor_s > 0, "case %zu: floor %g", k, floor_s);
                    ck_assert_msg(floor_s <= step, "case %zu cand %d: floor %.9g s above the step's %.9g s (n %d, theta %d/4)",
                                  k, i, floor_s, step, n, a);
                    checked++;
                }
            }
        }
        plan_result_free(&r);
    }
    ck_assert_int_gt(checked, 4000);
}
END_TEST

/* Every candidate's simulated capacity (bound off) against the bound asked at exactly that rate:
 * "the search returns less than R" is false there, so the bound must not claim it. It must also
 * claim something (the test is not vacuous): the weakest candidates are shown below the best. */
static void check_never_below(const char *text)
{
    scn_scenario s;
    plan_result r;
    load(text, &s, &r, 0);
    plan_set_seeds(&r, 2);
    evaluate(&s, &r);
    plan_bound_stream *st = NULL, *st2 = NULL;
    double best = 0;
    for (int i = 0; i < r.n; i++)
        if (r.c[i].status == PLAN_DONE && !(r.c[i].seed_unbounded & 1)) best = fmax(best, r.c[i].seed_rate[0]);
    ck_assert_double_gt(best, 0);
    int proved = 0, rated = 0;
    for (int i = 0; i < r.n; i++) {
        const plan_cand *c = &r.c[i];
        if (c->status != PLAN_DONE || (c->seed_unbounded & 1) || !(c->seed_rate[0] > 0)) continue;
        rated++;
        char why[200], d[300];
        plan_describe(c, d, sizeof d);
        int v = plan_bound_below(&s, c, &st, c->seed_rate[0], why, sizeof why);
        ck_assert_msg(v == 0, "%s: the search found %.6g, yet the bound says below it (%s)", d, c->seed_rate[0], why);
        /* The second seed's search, from the first seed's answer. */
        if (c->seed_rate[1] > 0 && !(c->seed_unbounded & 2)) {
            v = plan_bound_below_search(&s, c, s.seed + 1, c->seed_rate[0], PLAN_CAPACITY_SEED_STEP, 0, &st2,
                                        c->seed_rate[1], why, sizeof why);
            ck_assert_msg(v == 0, "%s: seed 2 found %.6g, yet the bound says below it (%s)", d, c->seed_rate[1], why);
            /* And whatever the first seed found (the bound used before any simulation). */
            v = plan_bound_below_later(&s, c, s.seed + 1, &st2, c->seed_rate[1], why, sizeof why);
            ck_assert_msg(v == 0, "%s: seed 2 found %.6g, yet the later-seed bound says below it (%s)", d, c->seed_rate[1], why);
        }
        proved += plan_bound_below(&s, c, &st, best, why, sizeof why) == 1;
    }
    ck_assert_int_gt(rated, 2);
    ck_assert_msg(proved >= 1, "the bound shows no candidate below the best (%.4g)", best);
    plan_bound_stream_free(st);
    plan_bound_stream_free(st2);
    plan_result_free(&r);
}

START_TEST(bound_never_below_the_capacity_found)
{
    check_never_below(CHAT_TTFT_TPOT);
    check_never_below(CHAT_E2E_REPLICAS);
}
END_TEST

/* The plan skipping by the bound against the plan simulating everything: the same
 * recommendation, the same first `keep` rows with the same objectives and per-seed capacities,
 * some candidates skipped, every one of them below the keep-th best and none one option away
 * from the recommendation; the reasons word for word; fewer simulations. */
static void check_same(const scn_scenario *s, plan_result *all, plan_result *some, int keep)
{
    ck_assert_int_ge(all->best, 0);
    ck_assert_int_eq(some->best, all->best);
    for (int k = 0; k < keep; k++) {
        const plan_cand *a = &all->c[all->order[k]], *b = &some->c[some->order[k]];
        ck_assert_int_eq(some->order[k], all->order[k]);
        ck_assert_double_eq(b->objective, a->objective);
        ck_assert_double_eq(b->obj.lo, a->obj.lo);
        ck_assert_double_eq(b->obj.hi, a->obj.hi);
        ck_assert_double_eq(b->offered.mean, a->offered.mean);
        for (int j = 0; j < a->n_seeds; j++) {
            ck_assert_double_eq(b->seed_rate[j], a->seed_rate[j]);
            ck_assert_double_eq(b->seed_tok[j], a->seed_tok[j]);
        }
        ck_assert_int_eq(b->pareto, a->pareto);
    }
    int skipped = 0;
    double kth = all->c[all->order[keep - 1]].objective;
    for (int i = 0; i < some->n; i++) {
        if (!some->c[i].bound_skipped) {
            if (some->c[i].status == PLAN_DONE) ck_assert_double_eq(some->c[i].objective, all->c[i].objective);
            continue;
        }
        skipped++;
        ck_assert_int_eq(all->c[i].status, PLAN_DONE);
        ck_assert_msg(all->c[i].objective < kth, "skipped candidate %d reached %g against the %d-th best %g", i,
                      all->c[i].objective, keep, kth);
        ck_assert(!plan_one_option_apart(&some->c[some->best], &some->c[i]));
        ck_assert(strstr(some->c[i].why, "not simulated"));
    }
    ck_assert_int_gt(skipped, 0);
    /* The recommendation's reasons, word for word. */
    static char la[24][PLAN_LINE], lb[24][PLAN_LINE];
    int na = plan_explain(s, all, la, 24), nb = plan_explain(s, some, lb, 24);
    ck_assert_int_eq(na, nb);
    for (int k = 0; k < na; k++) ck_assert_str_eq(la[k], lb[k]);
    long sims_all = 0, sims_some = 0;
    for (int i = 0; i < all->n; i++) { sims_all += all->c[i].sims; sims_some += some->c[i].sims; }
    ck_assert_int_lt(sims_some, sims_all);
}

/* Against the plan simulating everything, the bounded plan with every refinement and with each
 * one turned off (PLAN_PRUNE_*): each must leave the ranking's first rows and the reasons as
 * they are. *reused and *recut add up how often the trial memo and the second cutoff acted. */
#define ALL_OFF (PLAN_PRUNE_MEMO | PLAN_PRUNE_RECUT | PLAN_PRUNE_NEIGHBOURS)
static void check_skipping(const char *text, int seeds, int threads, const unsigned *offs, int n_offs, long *reused,
                           int *recut)
{
    const int keep = 3;
    scn_scenario s;
    plan_result all;
    char err[512];
    load(text, &s, &all, 0);
    plan_set_seeds(&all, seeds);
    evaluate(&s, &all);
    for (int v = 0; v < n_offs; v++) {
        plan_result some;
        load(text, &s, &some, keep);
        plan_set_seeds(&some, seeds);
        plan_set_prune_off(&some, offs[v]);
        ck_assert_msg(plan_evaluate(&s, &some, threads, 0, 1, NULL, NULL, err, sizeof err) == 0, "%s", err);
        plan_rank(&s, &some);
        check_same(&s, &all, &some, keep);
        if (offs[v] & PLAN_PRUNE_MEMO) ck_assert_int_eq(some.trials_reused, 0);
        if (offs[v] & PLAN_PRUNE_RECUT) ck_assert_int_eq(some.recut_searches, 0);
        *reused += some.trials_reused;
        *recut += some.recut_searches;
        plan_result_free(&some);
    }
    plan_result_free(&all);
}

/* Candidates a few per cent apart (max_num_seqs in small steps, prefix cache on, fp8): at three
 * seeds, on one thread, some later seed stops below its cutoff while another does not, so the
 * stopped one is searched again with the cutoff the others' answers leave (one such candidate is
 * then skipped, and simulated again in full as a neighbour of the recommendation, on its trials
 * kept). */
static const char *CHAT_CLOSE = SMALL_CHAT
    "slo: {ttft_p99: 1 s, tpot_p99: 40 ms}\n"
    "options:\n  kv_layout: [paged]\n  prefix_cache: [on]\n  kv_dtype: [fp8]\n"
    "  max_num_seqs: [8, 12, 16, 20, 24, 32]\n  max_num_batched_tokens: [1024, 2048]\n";

/* One seed (the bound judges a candidate before simulating it), two and three (after its first
 * seed's search, the later seeds' searches from that answer, which stop once their answers keep
 * the mean below the bar, and stop again at a lower cutoff when the others' answers leave one);
 * with every refinement and with each turned off, on one thread (a fixed order) and two. The
 * memo and the second cutoff must have acted somewhere. */
START_TEST(skipping_keeps_the_ranking_and_recommendation)
{
    static const unsigned every[] = {0, PLAN_PRUNE_MEMO, PLAN_PRUNE_RECUT, PLAN_PRUNE_NEIGHBOURS, ALL_OFF};
    long reused = 0;
    int recut = 0;
    check_skipping(CHAT_TTFT_TPOT, 1, 2, every, 1, &reused, &recut);
    check_skipping(CHAT_TTFT_TPOT, 2, 2, every, 1, &reused, &recut);
    check_skipping(CHAT_TTFT_TPOT, 3, 2, every, 1, &reused, &recut);
    check_skipping(CHAT_CLOSE, 3, 1, every, 5, &reused, &recut);
    ck_assert_int_gt(reused, 0);
    ck_assert_int_gt(recut, 0);
}
END_TEST

/* Block-size twins (docs/planner.md, "Block-size twins"): block sizes that divide the 512-token
 * shared prefix, with and without the prefix cache, so that many trials are run by one twin for
 * the others. */
static const char *CHAT_BLOCKS = SMALL_CHAT
    "slo: {ttft_p99: 1 s, tpot_p99: 40 ms}\n"
    "options:\n  kv_layout: [paged]\n  block_size: [8, 16, 32, 64]\n  prefix_cache: [off, on]\n  kv_dtype: [bf16, fp8]\n"
    "  max_num_seqs: [16, 64, 256]\n";

static bool same_double(double a, double b) { return !memcmp(&a, &b, sizeof a); }

static bool same_interval(plan_interval a, plan_interval b)
{
    return a.n == b.n && same_double(a.mean, b.mean) && same_double(a.lo, b.lo) && same_double(a.hi, b.hi);
}

/* Every candidate's results, its status and reason, the order, the recommendation and its
 * reasons: identical. */
static void check_identical(const scn_scenario *s, plan_result *a, plan_result *b)
{
    ck_assert_int_eq(a->n, b->n);
    ck_assert_int_eq(a->best, b->best);
    for (int i = 0; i < a->n; i++) {
        const plan_cand *x = &a->c[i], *y = &b->c[i];
        ck_assert_int_eq(a->order[i], b->order[i]);
        ck_assert_int_eq(x->status, y->status);
        ck_assert_str_eq(x->why, y->why);
        ck_assert_int_eq(x->bound_skipped, y->bound_skipped);
        ck_assert(x->seed_done == y->seed_done && x->cap_done == y->cap_done && x->seed_slo == y->seed_slo &&
                  x->seed_unbounded == y->seed_unbounded);
        for (int k = 0; k < x->n_seeds; k++)
            ck_assert_msg(same_double(x->seed_rate[k], y->seed_rate[k]) && same_double(x->seed_tok[k], y->seed_tok[k]) &&
                              same_double(x->seed_batch[k], y->seed_batch[k]) &&
                              same_double(x->seed_offered[k], y->seed_offered[k]),
                          "candidate %d seed %d: rate %.17g/%.17g tokens %.17g/%.17g", i, k, x->seed_rate[k], y->seed_rate[k],
                          x->seed_tok[k], y->seed_tok[k]);
        ck_assert(same_interval(x->obj, y->obj) && same_interval(x->offered, y->offered) && same_interval(x->rate, y->rate));
        ck_assert(same_double(x->objective, y->objective) && same_double(x->usd_per_mtok, y->usd_per_mtok) &&
                  same_double(x->batch_judged, y->batch_judged) && x->unbounded == y->unbounded && x->pareto == y->pareto);
        sim_metric_kv la[SIM_METRICS_MAX], lb[SIM_METRICS_MAX];
        int n = sim_metrics_list(&x->m, la, SIM_METRICS_MAX);
        sim_metrics_list(&y->m, lb, SIM_METRICS_MAX);
        for (int j = 0; j < n; j++)
            ck_assert_msg(same_double(la[j].value, lb[j].value), "candidate %d: %s %.17g/%.17g", i, la[j].name, la[j].value,
                          lb[j].value);
    }
    static char la[24][PLAN_LINE], lb[24][PLAN_LINE];
    int na = plan_explain(s, a, la, 24), nb = plan_explain(s, b, lb, 24);
    ck_assert_int_eq(na, nb);
    for (int k = 0; k < na; k++) ck_assert_str_eq(la[k], lb[k]);
}

/* A plan whose block-size twins share trials against the same plan simulating each of them: on
 * one thread (a fixed order) every candidate's results are bit for bit the same, at one seed and
 * at three, with fewer simulations; on two threads the first rows and the reasons are (which
 * weaker candidates are skipped depends on the order threads finish in, check_same). */
START_TEST(block_size_twins_keep_the_plan)
{
    long shared = 0;
    for (int seeds = 1; seeds <= 3; seeds += 2) {
        scn_scenario s;
        plan_result with, without;
        char err[512];
        load(CHAT_BLOCKS, &s, &with, 3);
        load(CHAT_BLOCKS, &s, &without, 3);
        plan_set_seeds(&with, seeds);
        plan_set_seeds(&without, seeds);
        plan_set_prune_off(&without, PLAN_PRUNE_TWINS);
        ck_assert_msg(plan_evaluate(&s, &with, 1, 0, 1, NULL, NULL, err, sizeof err) == 0, "%s", err);
        ck_assert_msg(plan_evaluate(&s, &without, 1, 0, 1, NULL, NULL, err, sizeof err) == 0, "%s", err);
        plan_rank(&s, &with);
        plan_rank(&s, &without);
        check_identical(&s, &with, &without);
        ck_assert_int_eq(without.trials_shared, 0);
        ck_assert_int_gt(with.trials_shared, 0);
        long sw = 0, so = 0;
        for (int i = 0; i < with.n; i++) { sw += with.c[i].sims; so += without.c[i].sims; }
        ck_assert_int_eq(sw + with.trials_shared, so);   /* each shared trial is one the other plan simulated */
        shared += with.trials_shared;
        plan_result_free(&with);
        plan_result_free(&without);
    }
    ck_assert_int_gt(shared, 0);
    long reused = 0;
    int recut = 0;
    static const unsigned twins_only[] = {0};
    check_skipping(CHAT_BLOCKS, 3, 2, twins_only, 1, &reused, &recut);
}
END_TEST

/* Several seeds and two GPU counts: plan_rank recommends a candidate with fewer GPUs than the
 * first-ranked one whenever the seeds cannot tell them apart, however far down it ranks, so a
 * bounded plan must leave no such candidate unsimulated. Here tensor parallelism 1 has the higher
 * saturation rate per GPU (queued first) and tensor parallelism 2 the higher capacity per GPU
 * under the 9 ms TPOT limit (one GPU's decode step of Llama-3-8B is about 6 ms, two GPUs' about
 * 4 ms: `kvplan plan` on this scenario), so the best found fills with one-GPU candidates, weaker
 * one-GPU ones are skipped against them, and two-GPU ones rank first afterwards. Before the fix,
 * two one-GPU candidates stayed skipped (naive attention at max_num_seqs 128 and 256). One thread,
 * so the order candidates finish in is fixed. */
static const char *TP_SEEDS =
    "name: bound-tp\nmodel: llama-3.1-8b\nhardware: h100-sxm\n"
    "workload:\n  requests: 100\n  arrival: {process: poisson, rate: 2/s}\n"
    "  prompt_tokens: {dist: uniform, min: 200, max: 1200}\n"
    "  output_tokens: {dist: uniform, min: 20, max: 300}\n"
    "slo: {ttft_p99: 1 s, tpot_p99: 9 ms}\nobjective: goodput_per_gpu\n"
    "options:\n  tensor_parallel: [1, 2]\n  max_num_seqs: [64, 128, 256]\n"
    "  max_num_batched_tokens: [512, 8192]\n  attention: [flash, naive]\n";

START_TEST(fewer_gpus_than_the_first_are_simulated)
{
    scn_scenario s;
    plan_result r;
    load(TP_SEEDS, &s, &r, 3);
    plan_set_seeds(&r, 3);
    char err[512];
    ck_assert_msg(plan_evaluate(&s, &r, 1, 0, 1, NULL, NULL, err, sizeof err) == 0, "%s", err);
    plan_rank(&s, &r);
    const plan_cand *top = &r.c[r.order[0]];
    ck_assert_int_eq(top->status, PLAN_DONE);
    ck_assert_double_eq(top->gpus, 2);   /* the case the test is about: the first rank has more GPUs */
    int skipped = 0, fewer = 0;
    for (int i = 0; i < r.n; i++) {
        const plan_cand *c = &r.c[i];
        fewer += c->gpus < top->gpus;
        if (!c->bound_skipped) continue;
        skipped++;
        char d[300];
        plan_describe(c, d, sizeof d);
        ck_assert_msg(c->gpus >= top->gpus, "%s: skipped with %g GPUs, fewer than the first-ranked candidate's %g (%s)", d,
                      c->gpus, top->gpus, c->why);
    }
    ck_assert_int_gt(skipped, 0);
    ck_assert_int_gt(fewer, 0);
    plan_result_free(&r);
}
END_TEST

/* The search that stops below a cutoff, trying first the trials that settle it (docs/planner.md,
 * "Seeking the cutoff"): when it stops, the whole search's answer is below the cutoff; when it
 * does not, it is the whole search, to the bit (the same trials along its path, reused where
 * they were found out of turn: the answer, whether it is unbounded, and the metrics of the run at
 * the answer). Both the first seed's search (from the cost model's saturation rate, strides of
 * 25 %) and a later seed's (from the first seed's answer, strides just under 3 %), at cutoffs
 * from a third of the answer to 1.3 times it, so that the settling trials lie before, on and
 * after the path's own. Over all the cuts it needs fewer simulations than the whole searches. */
static void check_cutoffs(const char *text, int *cuts, int *whole, long *sims_cut, long *sims_full)
{
    scn_scenario s;
    plan_result r;
    load(text, &s, &r, 0);
    for (int i = 0; i < r.n; i++) {
        const plan_cand *c = &r.c[i];
        if (c->status != PLAN_PENDING) continue;
        double h = plan_capacity_hint(&s, c, c->replicas);
        plan_capacity_result first;
        plan_capacity_search_from(&s, c, s.seed, c->replicas, h, PLAN_CAPACITY_FIRST_STEP, PLAN_CAPACITY_TOL,
                                  s.workload.rate, NULL, &first);
        for (int later = 0; later < 2; later++) {
            if (later && !(first.rate > 0 && !first.unbounded)) continue;
            unsigned long long seed = s.seed + (unsigned long long)later;
            double start = later ? first.rate : h, step = later ? PLAN_CAPACITY_SEED_STEP : PLAN_CAPACITY_FIRST_STEP;
            double known = later ? 0 : s.workload.rate;
            plan_capacity_result full, part;
            if (later) plan_capacity_search_from(&s, c, seed, c->replicas, start, step, PLAN_CAPACITY_TOL, 0, NULL, &full);
            else full = first;
            const double f[] = {0.33, 0.8, 0.97, 1.02, 1.3};
            for (int k = 0; k < 5; k++) {
                double cutoff = full.rate > 0 ? f[k] * full.rate : f[k] * h;
                /* The search keeps its trials (`kept`) for the whole search after it (below). */
                plan_trials *kept = plan_trials_new();
                ck_assert_ptr_nonnull(kept);
                plan_capacity_search_memo(&s, c, seed, c->replicas, start, step, PLAN_CAPACITY_TOL, known, NULL, cutoff,
                                          kept, &part);
                if (part.cut) {
                    ++*cuts;
                    *sims_cut += part.sims;
                    *sims_full += full.sims;
                    ck_assert_msg(full.rate < cutoff && full.rate <= part.cut_at && part.cut_at < cutoff,
                                  "cand %d seed %llu: cut at %g under %g, the whole search found %g", i, seed, part.cut_at,
                                  cutoff, full.rate);
                } else {
                    ++*whole;
                    ck_assert_double_eq(part.rate, full.rate);
                    ck_assert_int_eq(part.unbounded, full.unbounded);
                    ck_assert_double_eq(part.out_tok_per_s, full.out_tok_per_s);
                    ck_assert_int_eq(part.m.requests, full.m.requests);
                    ck_assert_int_eq(part.m.steps, full.m.steps);
                    ck_assert_double_eq(part.m.batch_mean, full.m.batch_mean);
                    ck_assert_double_eq(part.m.q[SIM_Q_TTFT].p99, full.m.q[SIM_Q_TTFT].p99);
                    ck_assert_int_ge(part.sims, full.sims);
                }
                /* Then the whole search on the trials it kept: the whole search to the bit,
                 * simulating only the trials the first did not run (docs/planner.md, "Trials are
                 * run once"). */
                plan_capacity_result b;
                long reused_before = plan_trials_reused(kept);
                plan_capacity_search_memo(&s, c, seed, c->replicas, start, step, PLAN_CAPACITY_TOL, known, NULL, 0, kept, &b);
                ck_assert(!b.cut);
                ck_assert_double_eq(b.rate, full.rate);
                ck_assert_int_eq(b.unbounded, full.unbounded);
                ck_assert_double_eq(b.out_tok_per_s, full.out_tok_per_s);
                ck_assert_int_eq(b.m.requests, full.m.requests);
                ck_assert_int_eq(b.m.steps, full.m.steps);
                ck_assert_double_eq(b.m.batch_mean, full.m.batch_mean);
                ck_assert_double_eq(b.m.q[SIM_Q_TTFT].p99, full.m.q[SIM_Q_TTFT].p99);
                ck_assert_double_eq(b.lowest, full.lowest);
                ck_assert_int_eq(b.sims + plan_trials_reused(kept) - reused_before, full.sims);
                plan_trials_free(kept);
            }
        }
    }
    plan_result_free(&r);
}

START_TEST(search_below_a_cutoff_agrees_with_the_whole_search)
{
    int cuts = 0, whole = 0;
    long sims_cut = 0, sims_full = 0;
    check_cutoffs(CHAT_E2E_REPLICAS, &cuts, &whole, &sims_cut, &sims_full);
    check_cutoffs(CHAT_TTFT_TPOT, &cuts, &whole, &sims_cut, &sims_full);
    ck_assert_int_gt(cuts, 0);
    ck_assert_int_gt(whole, 0);
    ck_assert_int_lt(sims_cut, sims_full);
}
END_TEST

Suite *suite_bound(void)
{
    Suite *su = suite_create("bound");
    TCase *tc = tcase_create("bound");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, step_floor_is_below_every_step);
    tcase_add_test(tc, bound_never_below_the_capacity_found);
    tcase_add_test(tc, skipping_keeps_the_ranking_and_recommendation);
    tcase_add_test(tc, search_below_a_cutoff_agrees_with_the_whole_search);
    tcase_add_test(tc, fewer_gpus_than_the_first_are_simulated);
    tcase_add_test(tc, block_size_twins_keep_the_plan);
    suite_add_tcase(su, tc);
    return su;
}
