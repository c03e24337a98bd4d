/* test_engine.c: the serving engine against cases solvable by hand, and against the laws a
 * queue must obey. Expected step times come from calling the cost model directly. */
#include "tests.h"
#include "../model/kv_model.h"
#include "../sim/sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static scn_scenario s;
enum { MAX_ROWS = 20000 };
static sim_request_row rows[MAX_ROWS];
static long n_rows;
static double sample_sum;
static long n_samples;

static int keep_row(void *ud, const sim_request_row *r)
{
    (void)ud;
    if (n_rows < MAX_ROWS) rows[n_rows] = *r;
    n_rows++;
    return 0;
}

static int keep_sample(void *ud, const sim_sample *x)
{
    (void)ud;
    sample_sum += (double)(x->waiting + x->running);
    n_samples++;
    return 0;
}

static void load(const char *text, const char *const *sets, int n)
{
    scn_error e;
    scn_status st = t_load(text, sets, n, &s, &e);
    char msg[1500];
    scn_error_format(&e, msg, sizeof msg);
    ck_assert_msg(st == SCN_OK, "%s", msg);
}

/* Runs the loaded scenario under its first choice (or `c`), keeping every request row. */
static int run(const sim_choice *c, long blocks, double interval, sim_metrics *m, char *err)
{
    sim_choice ch = c ? *c : sim_choice_first(&s);
    sim_executor ex;
    ck_assert_int_eq(sim_executor_model(&s, &ch, &ex), 0);
    sim_run_opts o = {.seed = s.seed, .on_request = keep_row, .on_sample = keep_sample, .sample_interval = interval,
                      .kv_blocks_override = blocks};
    n_rows = n_samples = 0;
    sample_sum = 0;
    static char buf[512];
    int rc = sim_run(&s, &ch, &ex, &o, m, err ? err : buf, 512);
    ex.free(ex.ctx);
    return rc;
}

static double step(const kv_seq_work *w, int n)
{
    sim_choice c = sim_choice_first(&s);
    kv_cache_cfg cfg = kv_cache_cfg_make(&s, c.kv_dtype, c.sink, c.window);
    return kv_step_time(&s, &cfg, c.attention, w, n).seconds;
}

#define BASE "model: llama-3-8b\nhardware: h100-sxm\noptions: {kv_layout: paged}\nworkload:\n"

START_TEST(one_request_alone)
{
    load(BASE "  requests: 1\n  arrival: {process: constant, rate: 1/s}\n  prompt_tokens: 500\n  output_tokens: 20\n",
         NULL, 0);
    sim_metrics m;
    ck_assert_int_eq(run(NULL, 0, 0, &m, NULL), SIM_OK);
    ck_assert_int_eq(n_rows, 1);
    /* TTFT is the prefill step; each later token takes one decode step at its context. */
    kv_seq_work pre = {500, 0};
    /* ... plus the engine's front end (tokenising 500 prompt tokens, kv_frontend_seconds). */
    double ttft = step(&pre, 1) + kv_frontend_seconds(&s, 500), decode = 0;
    for (int k = 1; k < 20; k++) { kv_seq_work d = {1, 500 + k - 1}; decode += step(&d, 1); }
    ck_assert_msg(fabs(rows[0].ttft - ttft) < 1e-12, "ttft %.12g vs %.12g", rows[0].ttft, ttft);
    ck_assert_msg(fabs(rows[0].tpot - decode / 19) < 1e-12, "tpot %.12g vs %.12g", rows[0].tpot, decode / 19);
    ck_assert(fabs(rows[0].e2e - (ttft + decode)) < 1e-12);
    ck_assert(rows[0].queue == 0);
    ck_assert_int_eq(m.steps, 20);
}
END_TEST

START_TEST(closed_batch_of_equal_requests)
{
    const char *trace = t_write("batch.csv", "0,300,10\n0,300,10\n0,300,10\n0,300,10\n0,300,10\n0,300,10\n0,300,10\n0,300,10\n");
    char set[600];
    snprintf(set, sizeof set, "workload={arrival: {process: trace, trace: '%s'}}", trace);
    const char *sets[] = {set};
    load(BASE "  arrival: {process: poisson, rate: 1/s}\n  prompt_tokens: 1\n  output_tokens: 1\n", sets, 1);
    /* No front end: it would prepare the eight one at a time and split the batch (that queue
     * is worked in test_frontend.c, burst_waits_for_the_front_end_in_turn). */
    s.engine.frontend_request = s.engine.frontend_token = 0;
    sim_metrics m;
    ck_assert_int_eq(run(NULL, 0, 0, &m, NULL), SIM_OK);
    /* All eight prefill together (2400 tokens fit the 8192 budget), then decode together. */
    kv_seq_work w[8];
    for (int i = 0; i < 8; i++) w[i] = (kv_seq_work){300, 0};
    double ttft = step(w, 8), t = ttft;
    for (int k = 1; k < 10; k++) {
        for (int i = 0; i < 8; i++) w[i] = (kv_seq_work){1, 300 + k - 1};
        t += step(w, 8);
    }
    ck_assert_int_eq(n_rows, 8);
    for (int i = 0; i < 8; i++) {
        ck_assert(fabs(rows[i].ttft - ttft) < 1e-12);
        ck_assert(fabs(rows[i].e2e - t) < 1e-12);
    }
    ck_assert(fabs(m.output_tok_per_s - 80 / t) < 1e-9);
    ck_assert_int_eq(m.batch_max, 8);
    ck_assert_int_eq(m.steps, 10);
}
END_TEST

START_TEST(littles_law_on_a_steady_poisson_run)
{
    load(BASE "  requests: 4000\n  arrival: {process: poisson, rate: 6/s}\n"
              "  prompt_tokens: {dist: lognormal, mean: 600, sigma: 0.5}\n"
              "  output_tokens: {dist: lognormal, mean: 150, sigma: 0.5}\n", NULL, 0);
    sim_metrics m;
    ck_assert_int_eq(run(NULL, 0, 0.25, &m, NULL), SIM_OK);
    /* L, the mean number in the system, measured by sampling the queues every 0.25 s; lambda is
     * the input rate; W the mean end-to-end latency of the requests. */
    double L = sample_sum / n_samples, W = m.q[SIM_Q_E2E].mean;
    ck_assert_msg(fabs(L / (6.0 * W) - 1) < 0.05, "L %.4g vs lambda W %.4g", L, 6.0 * W);
    ck_assert(fabs(m.req_per_s / 6.0 - 1) < 0.05);   /* stable: throughput equals the arrival rate */
}
END_TEST

START_TEST(paged_capacity_is_the_cost_models_block_count)
{
    load(BASE "  requests: 20\n  arrival: {process: poisson, rate: 5/s}\n  prompt_tokens: 100\n  output_tokens: 10\n",
         NULL, 0);
    sim_metrics m;
    ck_assert_int_eq(run(NULL, 0, 0, &m, NULL), SIM_OK);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    ck_assert_int_eq(m.kv_blocks, kv_capacity_compute(&s, &c, 16, 0).capacity_blocks);
}
END_TEST

START_TEST(shared_prefix_reaches_expected_hit_rate)
{
    load(BASE "  requests: 50\n  arrival: {process: constant, rate: 1/s}\n  prompt_tokens: 100\n  output_tokens: 5\n"
              "  shared_prefix: {groups: 1, tokens: 2000, share: 1}\n", NULL, 0);
    sim_choice c = sim_choice_first(&s);
    c.prefix_cache = true;
    sim_metrics m;
    ck_assert_int_eq(run(&c, 0, 0, &m, NULL), SIM_OK);
    /* The first request computes the 2000-token prefix (125 blocks); each later one finds all of
     * it cached: hit rate (50 - 1) * 2000 / (50 * 2100). */
    ck_assert_msg(fabs(m.prefix_hit_rate - 49.0 * 2000 / (50 * 2100)) < 1e-12, "%.6f", m.prefix_hit_rate);
    ck_assert_int_eq(rows[0].cached, 0);
    ck_assert_int_eq(rows[1].cached, 2000);
    /* The engine's part of TTFT (the front end tokenises the whole prompt, cached or not). */
    double fe = kv_frontend_seconds(&s, 2100);
    ck_assert(rows[1].ttft - fe < (rows[0].ttft - fe) / 5);
}
END_TEST

START_TEST(contiguous_admits_fewer_than_paged)
{
    char trace[40000] = "";
    for (int i = 0; i < 400; i++) strcat(trace, "0,1000,200\n");
    char set[600];
    snprintf(set, sizeof set, "workload={arrival: {process: trace, trace: '%s'}, output_tokens: {dist: fixed, value: 200}}",
             t_write("crowd.csv", trace));
    const char *sets[] = {set, "hardware.memory=24 GiB", "deployment.max_num_seqs=1024"};
    load(BASE "  arrival: {process: poisson, rate: 1/s}\n  prompt_tokens: 1\n  output_tokens: 1\n", sets, 3);
    sim_choice c = sim_choice_first(&s);
    sim_metrics paged, contig;
    ck_assert_int_eq(run(&c, 0, 0, &paged, NULL), SIM_OK);
    c.layout = SCN_LAYOUT_CONTIGUOUS;
    ck_assert_int_eq(run(&c, 0, 0, &contig, NULL), SIM_OK);
    /* Same memory: paged holds more sequences at once, so it finishes sooner. */
    ck_assert_msg(contig.batch_max < paged.batch_max, "contiguous %ld vs paged %ld", contig.batch_max, paged.batch_max);
    ck_assert(contig.duration > paged.duration);
    ck_assert(contig.frag_mean > paged.frag_mean);
}
END_TEST

START_TEST(sink_window_bounds_kv_for_any_output)
{
    load(BASE "  requests: 1\n  arrival: {process: constant, rate: 1/s}\n  prompt_tokens: 100\n  output_tokens: 1\n",
         NULL, 0);
    s.deployment.max_model_len = 1000000;
    sim_choice c = sim_choice_first(&s);
    c.sink = 4;
    c.window = 1020;
    for (int out = 500; out <= 20000; out *= 4) {
        s.workload.output.mean = out;
        s.workload.output.min = s.workload.output.max = out;
        sim_metrics m;
        ck_assert_int_eq(run(&c, 0, 0, &m, NULL), SIM_OK);
        double peak_blocks = m.kv_util_peak * m.kv_blocks;
        ck_assert_msg(peak_blocks <= (4 + 1020) / 16 + 3, "output %d peaks at %.0f blocks", out, peak_blocks);
        ck_assert_int_eq(rows[0].output, out);
    }
}
END_TEST

/* Rows compared field by field: a struct copy may carry its padding bytes along, and those are
 * whatever the engine's stack held (clang's build shows it), so memcmp would compare garbage. */
static int same_rows(const sim_request_row *a, const sim_request_row *b, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i].id != b[i].id || a[i].replica != b[i].replica || a[i].arrival != b[i].arrival ||
            a[i].queue != b[i].queue || a[i].ttft != b[i].ttft || a[i].tpot != b[i].tpot || a[i].e2e != b[i].e2e ||
            a[i].prompt != b[i].prompt || a[i].output != b[i].output || a[i].cached != b[i].cached ||
            a[i].preemptions != b[i].preemptions || a[i].conversation != b[i].conversation || a[i].turn != b[i].turn)
            return 0;
    return 1;
}

START_TEST(same_seed_same_run)
{
    load(BASE "  requests: 500\n  arrival: {process: gamma, rate: 8/s, cv: 2}\n"
              "  prompt_tokens: {dist: lognormal, mean: 700, sigma: 0.7}\n  output_tokens: {dist: normal, mean: 200, sigma: 50}\n",
         NULL, 0);
    static sim_request_row first[500];
    sim_metrics a, b;
    ck_assert_int_eq(run(NULL, 3000, 0, &a, NULL), SIM_OK);
    memcpy(first, rows, sizeof first);
    ck_assert_int_eq(run(NULL, 3000, 0, &b, NULL), SIM_OK);
    ck_assert(memcmp(&a, &b, sizeof a) == 0);
    ck_assert(same_rows(first, rows, 500));
    s.seed = 2;
    ck_assert_int_eq(run(NULL, 3000, 0, &b, NULL), SIM_OK);
    ck_assert(!same_rows(first, rows, 500));
}
END_TEST

START_TEST(preemption_when_and_only_when_blocks_run_out)
{
    /* Two requests at t = 0, 16-token prompts, 40 output tokens, 16-token blocks. Each ends
     * needing ceil(55 / 16) = 4 blocks. With 8 blocks both fit: no preemption. With 5, when
     * both reach position 32 the older takes the fifth block and the newer must give its blocks
     * up: exactly one preemption; it resumes when the older finishes. */
    const char *sets[] = {"workload={arrival: {process: trace, trace: PLACEHOLDER}}"};
    char set[600];
    snprintf(set, sizeof set, "workload={arrival: {process: trace, trace: '%s'}}", t_write("two.csv", "0,16,40\n0,16,40\n"));
    sets[0] = set;
    load(BASE "  arrival: {process: poisson, rate: 1/s}\n  prompt_tokens: 1\n  output_tokens: 1\n", sets, 1);
    sim_metrics m;
    ck_assert_int_eq(run(NULL, 8, 0, &m, NULL), SIM_OK);
    ck_assert_int_eq(m.preemptions, 0);
    ck_assert_int_eq(run(NULL, 5, 0, &m, NULL), SIM_OK);
    ck_assert_int_eq(m.preemptions, 1);
    ck_assert_int_eq(rows[0].preemptions, 0);
    ck_assert_int_eq(rows[1].preemptions, 1);
    ck_assert(rows[1].e2e > rows[0].e2e);
    /* A request that can never fit is an error, not a hang. */
    char err[512];
    ck_assert_int_eq(run(NULL, 3, 0, &m, err), SIM_E_DATA);
    ck_assert_msg(strstr(err, "more than the"), "%s", err);
}
END_TEST

START_TEST(chunked_prefill_keeps_decodes_flowing)
{
    load(BASE "  requests: 600\n  arrival: {process: poisson, rate: 5/s}\n"
              "  prompt_tokens: {dist: lognormal, mean: 3000, sigma: 0.5, max: 7000}\n  output_tokens: 200\n",
         NULL, 0);
    sim_choice c = sim_choice_first(&s);
    sim_metrics cont, chunk;
    ck_assert_int_eq(run(&c, 0, 0, &cont, NULL), SIM_OK);
    c.scheduler = SCN_SCHED_CHUNKED;
    s.deployment.max_num_batched_tokens = 512;
    ck_assert_int_eq(run(&c, 0, 0, &chunk, NULL), SIM_OK);
    /* Prefill-first scheduling stalls every decode for whole prompts; chunking bounds the stall. */
    ck_assert_msg(chunk.q[SIM_Q_ITL].max < cont.q[SIM_Q_ITL].max, "itl max %.4g vs %.4g",
                  chunk.q[SIM_Q_ITL].max, cont.q[SIM_Q_ITL].max);
    ck_assert_int_eq(chunk.requests, 600);
}
END_TEST

START_TEST(static_batching_is_the_slower_baseline)
{
    load(BASE "  requests: 400\n  arrival: {process: poisson, rate: 10/s}\n"
              "  prompt_tokens: {dist: uniform, min: 100, max: 1500}\n  output_tokens: {dist: uniform, min: 10, max: 400}\n",
         NULL, 0);
    sim_choice c = sim_choice_first(&s);
    sim_metrics cont, stat;
    ck_assert_int_eq(run(&c, 0, 0, &cont, NULL), SIM_OK);
    c.scheduler = SCN_SCHED_STATIC;
    ck_assert_int_eq(run(&c, 0, 0, &stat, NULL), SIM_OK);
    ck_assert_int_eq(stat.requests, 400);
    ck_assert_msg(stat.q[SIM_Q_E2E].mean > 1.5 * cont.q[SIM_Q_E2E].mean, "static %.4g vs continuous %.4g",
                  stat.q[SIM_Q_E2E].mean, cont.q[SIM_Q_E2E].mean);
    ck_assert(stat.q[SIM_Q_QUEUE].mean > cont.q[SIM_Q_QUEUE].mean);
}
END_TEST

START_TEST(replicas_and_routers)
{
    load(BASE "  requests: 3000\n  arrival: {process: poisson, rate: 24/s}\n  prompt_tokens: 200\n  output_tokens: 50\n"
              "  shared_prefix: {groups: 16, tokens: 1024, share: 1, popularity: uniform}\n", NULL, 0);
    s.deployment.replicas = 4;
    s.hardware.memory = 20.0 * 1073741824;   /* a small cache, so where a prefix lives matters */
    sim_choice c = sim_choice_first(&s);
    c.prefix_cache = true;
    sim_metrics rr, aff;
    s.deployment.router = SCN_ROUTER_ROUND_ROBIN;
    ck_assert_int_eq(run(&c, 0, 0, &rr, NULL), SIM_OK);
    long used[4] = {0};
    for (long i = 0; i < n_rows && i < MAX_ROWS; i++) used[rows[i].replica]++;
    for (int i = 0; i < 4; i++) ck_assert_int_eq(used[i], 750);   /* round robin: exactly a quarter each */
    s.deployment.router = SCN_ROUTER_PREFIX_AFFINITY;
    ck_assert_int_eq(run(&c, 0, 0, &aff, NULL), SIM_OK);
    for (long i = 0; i < n_rows && i < MAX_ROWS; i++)
        ck_assert_int_eq(rows[i].replica, (int)(rows[i].id >= 0 ? rows[i].replica : 0));
    ck_assert_msg(aff.prefix_hit_rate >= rr.prefix_hit_rate, "affinity %.4f vs round robin %.4f", aff.prefix_hit_rate,
                  rr.prefix_hit_rate);
    ck_assert_int_eq(aff.requests, 3000);
}
END_TEST

START_TEST(conversations_reuse_their_history)
{
    load(BASE "  requests: 300\n  arrival: {process: poisson, rate: 2/s}\n  prompt_tokens: 200\n  output_tokens: 100\n"
              "  conversation: {turns: 3, think_time: 5 s}\n", NULL, 0);
    sim_choice c = sim_choice_first(&s);
    c.prefix_cache = true;
    sim_metrics m;
    ck_assert_int_eq(run(&c, 0, 0, &m, NULL), SIM_OK);
    ck_assert_int_eq(m.requests, 300);
    /* Turn 1 repeats 300 of its 500 prompt tokens, turn 2 600 of 800: whole blocks of them hit. */
    long hits = 0, later = 0;
    for (long i = 0; i < n_rows; i++)
        if (rows[i].turn > 0) { later++; hits += rows[i].cached >= (rows[i].prompt - 200 - 100) / 16 * 16 - 16; }
    ck_assert_int_eq(later, 200);
    ck_assert_msg(hits == later, "%ld of %ld follow-up turns found their history", hits, later);
}
END_TEST

Suite *suite_engine(void)
{
    Suite *su = suite_create("engine");
    TCase *tc = tcase_create("runs");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, one_request_alone);
    tcase_add_test(tc, closed_batch_of_equal_requests);
    tcase_add_test(tc, littles_law_on_a_steady_poisson_run);
    tcase_add_test(tc, paged_capacity_is_the_cost_models_block_count);
    tcase_add_test(tc, shared_prefix_reaches_expected_hit_rate);
    tcase_add_test(tc, contiguous_admits_fewer_than_paged);
    tcase_add_test(tc, sink_window_bounds_kv_for_any_output);
    tcase_add_test(tc, same_seed_same_run);
    tcase_add_test(tc, preemption_when_and_only_when_blocks_run_out);
    tcase_add_test(tc, chunked_prefill_keeps_decodes_flowing);
    tcase_add_test(tc, static_batching_is_the_slower_baseline);
    tcase_add_test(tc, replicas_and_routers);
    tcase_add_test(tc, conversations_reuse_their_history);
    suite_add_tcase(su, tc);
    return su;
}
