/* test_workload.c: closed-loop and offline workloads and the steady-state window, checked
 * against cases solved by hand (a one-client loop is a chain of lone requests; an offline batch
 * is one prefill and a run of decodes) and against Little's law with N clients in the system;
 * and prompts too long for max_model_len, refused as engines refuse them rather than trimmed. */
#include "tests.h"
#include "../db/db.h"
#include "../model/kv_model.h"
#include "../planner/plan.h"
#include "../sim/sim.h"
#include "../sim/workload.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static scn_scenario s;
enum { MAX_ROWS = 4000 };
static sim_request_row rows[MAX_ROWS];
static long n_rows;

static int keep_row(void *ud, const sim_request_row *r)
{
    (void)ud;
    if (n_rows < MAX_ROWS) rows[n_rows] = *r;
    n_rows++;
    return 0;
}

static void load(const char *text)
{
    scn_error e;
    scn_status st = t_load(text, NULL, 0, &s, &e);
    char msg[1500];
    scn_error_format(&e, msg, sizeof msg);
    ck_assert_msg(st == SCN_OK, "%s", msg);
}

/* max_waiting: the engine's waiting bound (sim_run_opts.max_waiting; 0 the default). */
static void run_bounded(sim_metrics *m, long max_waiting)
{
    sim_choice ch = sim_choice_first(&s);
    sim_executor ex;
    ck_assert_int_eq(sim_executor_model(&s, &ch, &ex), 0);
    sim_run_opts o = {.seed = s.seed, .on_request = keep_row, .max_waiting = max_waiting};
    n_rows = 0;
    char err[512] = "";
    int rc = sim_run(&s, &ch, &ex, &o, m, err, sizeof err);
    ex.free(ex.ctx);
    ck_assert_msg(rc == SIM_OK, "%s", err);
}

static void run(sim_metrics *m) { run_bounded(m, 0); }

static double step(const kv_seq_work *w, int n)
{
    sim_choice c = sim_choice_first(&s);
    kv_cache_cfg cfg = kv_cache_cfg_make(&s, c.kv_dtype, c.sink, c.window);
    return kv_step_time(&s, &cfg, c.attention, w, n).seconds;
}

#define BASE "model: llama-3-8b\nhardware: h100-sxm\noptions: {kv_layout: paged}\nworkload:\n"
#define FIXED "  prompt_tokens: 400\n  output_tokens: 12\n"

START_TEST(one_client_is_a_chain_of_lone_requests)
{
    /* A lone request: prefill of 400 tokens, then 11 decode steps at growing context. */
    load(BASE "  requests: 1\n  arrival: {process: constant, rate: 1/s}\n" FIXED);
    kv_seq_work pre = {400, 0};
    double ttft = step(&pre, 1) + kv_frontend_seconds(&s, 400), e2e = ttft;   /* + the front end */
    for (int k = 1; k < 12; k++) { kv_seq_work d = {1, 400 + k - 1}; e2e += step(&d, 1); }
    /* One client with no think time sends request k+1 the instant request k completes. */
    load(BASE "  requests: 5\n  arrival: {process: closed, concurrency: 1}\n" FIXED);
    sim_metrics m;
    run(&m);
    ck_assert_int_eq(n_rows, 5);
    for (int i = 0; i < 5; i++) {
        ck_assert_msg(fabs(rows[i].arrival - i * e2e) < 1e-9, "send %d at %.9g, expected %.9g", i, rows[i].arrival, i * e2e);
        ck_assert(fabs(rows[i].ttft - ttft) < 1e-12);   /* TTFT counts from the send */
        ck_assert(fabs(rows[i].e2e - e2e) < 1e-12);
        ck_assert(rows[i].queue == 0);
    }
    ck_assert(fabs(m.duration - 5 * e2e) < 1e-9);
    ck_assert(fabs(m.req_per_s - 1 / e2e) < 1e-9);
    /* A think time of 0.5 s spaces the sends by it and leaves each request's timing alone. */
    load(BASE "  requests: 3\n  arrival: {process: closed, concurrency: 1, think_time: 500 ms}\n" FIXED);
    run(&m);
    for (int i = 0; i < 3; i++) {
        ck_assert(fabs(rows[i].arrival - i * (e2e + 0.5)) < 1e-9);
        ck_assert(fabs(rows[i].e2e - e2e) < 1e-12);
    }
}
END_TEST

/* One lockstep round of the closed-loop tests: eight 400-token prompts prefilled together, then
 * eleven decode steps of the eight (12 output tokens each). */
static double lockstep_round(void)
{
    kv_seq_work w[8];
    for (int i = 0; i < 8; i++) w[i] = (kv_seq_work){400, 0};
    double T = step(w, 8);
    for (int k = 1; k < 12; k++) {
        for (int i = 0; i < 8; i++) w[i] = (kv_seq_work){1, 400 + k - 1};
        T += step(w, 8);
    }
    return T;
}

START_TEST(closed_loop_keeps_n_in_flight_in_lockstep)
{
    /* Eight equal clients start together, prefill together and finish together, so each round
     * of eight takes the time T of one batched request: the measured window (rounds 1..8,
     * skipping the first and last round) holds 64 requests over 8 T, and X R = N exactly. */
    load(BASE "  requests: 80\n  arrival: {process: closed, concurrency: 8}\n" FIXED
              "  measure: {skip_first: 8, skip_last: 8}\n");
    /* No front end: it would prepare the eight sends one at a time and break the lockstep
     * (that queue is worked in test_frontend.c, burst_waits_for_the_front_end_in_turn). */
    s.engine.frontend_request = s.engine.frontend_token = 0;
    double T = lockstep_round();
    sim_metrics m;
    run(&m);
    ck_assert_int_eq(n_rows, 80);
    ck_assert_int_eq(m.requests, 64);
    ck_assert_int_eq(m.batch_max, 8);
    for (int i = 0; i < 80; i++) ck_assert(fabs(rows[i].arrival - (i / 8) * T) < 1e-9);
    ck_assert(fabs(m.q[SIM_Q_E2E].mean - T) < 1e-12);
    ck_assert_msg(fabs(m.duration - 8 * T) < 1e-9, "window %.9g s, expected %.9g", m.duration, 8 * T);
    ck_assert(fabs(m.req_per_s * m.q[SIM_Q_E2E].mean - 8) < 1e-9);
}
END_TEST

START_TEST(time_window_counts_whole_rounds)
{
    /* The lockstep loop above run for ten rounds: round r (r = 0..9) is sent at r T and completes
     * at (r + 1) T, so the run spans [0, 10 T] at the true rate of 8 requests per T.
     * Cut by request number, 15 % leaves ids 12..67 (floor(0.15 * 80) = 12 each side): the first
     * is sent in round 1 at T, the last completes with round 8 at 9 T, so 56 requests are
     * counted over 8 T, 7 per T, 0.875 of the rate (the window counts rounds 1 and 8 whole and
     * half their requests).
     * Cut by time, 15 % of the 10 T span leaves [1.5 T, 8.5 T]: the rounds completing at
     * 2 T .. 8 T, 7 rounds of 8 = 56 requests over 7 T, 8 per T: the true rate. */
    const char *const by[2] = {"  measure: {skip_first: 15%, skip_last: 15%}\n",
                               "  measure: {by: time, skip_first: 15%, skip_last: 15%}\n"};
    double T = 0;
    for (int v = 0; v < 2; v++) {
        char y[600];
        snprintf(y, sizeof y, BASE "  requests: 80\n  arrival: {process: closed, concurrency: 8}\n" FIXED "%s", by[v]);
        load(y);
        ck_assert(s.workload.measure_by_time == (v == 1));
        /* The stored scenario tells the two cuts apart (a run of one is never taken for the other). */
        char *js = db_scenario_json(&s);
        ck_assert(js && (strstr(js, "\"by\":\"time\"") != NULL) == (v == 1));
        free(js);
        s.engine.frontend_request = s.engine.frontend_token = 0;   /* as above: the lockstep */
        if (v == 0) T = lockstep_round();
        sim_metrics m;
        run(&m);
        ck_assert_int_eq(n_rows, 80);
        for (int i = 0; i < 80; i++) ck_assert(fabs(rows[i].arrival - (i / 8) * T) < 1e-9);
        ck_assert_int_eq(m.requests, 56);
        double span = v ? 7 * T : 8 * T;
        ck_assert_msg(fabs(m.duration - span) < 1e-9, "window %.9g s, expected %.9g", m.duration, span);
        ck_assert(fabs(m.req_per_s - 56 / span) < 1e-9);
        ck_assert(fabs(m.output_tok_per_s - 56 * 12 / span) < 1e-9);
        ck_assert(fabs(m.input_tok_per_s - 56 * 400 / span) < 1e-9);
        ck_assert(fabs(m.q[SIM_Q_E2E].mean - T) < 1e-12);
        /* Little's law holds in the window cut by time: X R = (8 / T) T = 8 clients. */
        if (v) ck_assert(fabs(m.req_per_s * m.q[SIM_Q_E2E].mean - 8) < 1e-9);
    }
}
END_TEST

START_TEST(littles_law_with_n_clients)
{
    /* Unequal requests drift out of lockstep; over the steady window the clients still keep N
     * requests in the system, or thinking: N = X (R + Z). */
    load(BASE "  requests: 3000\n  arrival: {process: closed, concurrency: 24, think_time: 200 ms}\n"
              "  prompt_tokens: {dist: lognormal, mean: 600, sigma: 0.5}\n"
              "  output_tokens: {dist: lognormal, mean: 150, sigma: 0.5}\n"
              "  measure: {skip_first: 10%, skip_last: 10%}\n");
    sim_metrics m;
    run(&m);
    ck_assert_int_eq(n_rows, 3000);
    ck_assert_int_eq(m.requests, 2400);
    double n = m.req_per_s * (m.q[SIM_Q_E2E].mean + 0.2);
    ck_assert_msg(fabs(n / 24 - 1) < 0.02, "X (R + Z) = %.4g, expected 24", n);
}
END_TEST

START_TEST(offline_is_one_batch_at_time_zero)
{
    load(BASE "  requests: 6\n  arrival: {process: offline}\n" FIXED);
    kv_seq_work w[6];
    for (int i = 0; i < 6; i++) w[i] = (kv_seq_work){400, 0};
    double ttft = step(w, 6), t = ttft;
    for (int k = 1; k < 12; k++) {
        for (int i = 0; i < 6; i++) w[i] = (kv_seq_work){1, 400 + k - 1};
        t += step(w, 6);
    }
    sim_metrics m;
    run(&m);
    ck_assert_int_eq(n_rows, 6);
    for (int i = 0; i < 6; i++) {
        ck_assert(rows[i].arrival == 0);
        ck_assert(fabs(rows[i].ttft - ttft) < 1e-12);
        ck_assert(fabs(rows[i].e2e - t) < 1e-12);
    }
    ck_assert(fabs(m.output_tok_per_s - 6 * 12 / t) < 1e-9);
    /* More requests than max_num_seqs wait their turn: the seventh starts when a slot frees. */
    load("model: llama-3-8b\nhardware: h100-sxm\noptions: {kv_layout: paged}\ndeployment: {max_num_seqs: 6}\n"
         "workload:\n  requests: 7\n  arrival: {process: offline}\n" FIXED);
    run(&m);
    ck_assert_int_eq(n_rows, 7);
    ck_assert(rows[6].arrival == 0);
    ck_assert_msg(rows[6].queue >= t - 1e-12, "the seventh waited %.9g s, expected at least %.9g", rows[6].queue, t);
}
END_TEST

START_TEST(unequal_offline_run_is_measured_as_clients_measure_it)
{
    /* Benchmark clients (vllm bench serve, benchmark_throughput, sglang bench_serving) report
     * throughput as every token over the time from the first send to the last completion, ramp
     * and drain included, and TTFT and TPOT as means over all requests. Three prompts of 400
     * tokens sent at t = 0 with 3, 6 and 10 output tokens: one prefill step of the three, then
     * decode step k runs the requests with more than k tokens left to make, so the batch drains
     * 3, 3, 2, 2, 2, 1, 1, 1, 1 and the run ends with the longest request alone. */
    char y[700];
    snprintf(y, sizeof y, "model: llama-3-8b\nhardware: h100-sxm\noptions: {kv_layout: paged}\n"
             "workload:\n  arrival: {process: trace, trace: '%s'}\n", t_write("drain.csv", "0,400,3\n0,400,6\n0,400,10\n"));
    load(y);
    /* No front end: it would prepare the three one at a time and split the prefill (that queue
     * is worked in test_frontend.c, burst_waits_for_the_front_end_in_turn). */
    s.engine.frontend_request = s.engine.frontend_token = 0;
    static const int out[3] = {3, 6, 10};
    kv_seq_work w[3];
    for (int i = 0; i < 3; i++) w[i] = (kv_seq_work){400, 0};
    double prefill = step(w, 3), e2e[3] = {prefill, prefill, prefill};
    for (int k = 1; k < 10; k++) {
        int n = 0;
        for (int i = 0; i < 3; i++)
            if (out[i] - 1 >= k) w[n++] = (kv_seq_work){1, 400 + k - 1};
        double t = step(w, n);
        for (int i = 0; i < 3; i++)
            if (out[i] - 1 >= k) e2e[i] += t;
    }
    double tpot = 0;
    for (int i = 0; i < 3; i++) tpot += (e2e[i] - prefill) / (out[i] - 1) / 3;
    sim_metrics m;
    run(&m);
    ck_assert_int_eq(n_rows, 3);
    ck_assert_int_eq(m.requests, 3);
    for (int i = 0; i < 3; i++) {
        int j = rows[i].output == 3 ? 0 : rows[i].output == 6 ? 1 : 2;
        ck_assert_msg(fabs(rows[i].e2e - e2e[j]) < 1e-12, "output %d ended at %.9g s, expected %.9g", out[j], rows[i].e2e, e2e[j]);
    }
    ck_assert(fabs(m.duration - e2e[2]) < 1e-12);
    ck_assert(fabs(m.output_tok_per_s - 19 / e2e[2]) < 1e-9);
    ck_assert(fabs(m.input_tok_per_s - 1200 / e2e[2]) < 1e-9);
    ck_assert(fabs(m.req_per_s - 3 / e2e[2]) < 1e-9);
    ck_assert(fabs(m.q[SIM_Q_TTFT].mean - prefill) < 1e-12);
    ck_assert_msg(fabs(m.q[SIM_Q_TPOT].mean - tpot) < 1e-12, "TPOT %.9g, expected %.9g", m.q[SIM_Q_TPOT].mean, tpot);
    /* The same lengths at their mean (19 / 3 tokens) would have no drain: the duration is the
     * longest request's, not the mean request's. */
    ck_assert(e2e[2] > e2e[1] && e2e[1] > e2e[0]);
}
END_TEST

START_TEST(window_counts)
{
    load(BASE "  requests: 10\n  arrival: {process: offline}\n" FIXED "  measure: {skip_first: 2, skip_last: 3}\n");
    sim_metrics m;
    run(&m);
    ck_assert_int_eq(n_rows, 10);
    ck_assert_int_eq(m.requests, 5);
    load(BASE "  requests: 10\n  arrival: {process: poisson, rate: 2/s}\n" FIXED "  measure: {skip_first: 20%}\n");
    run(&m);
    ck_assert_int_eq(m.requests, 8);
}
END_TEST

static void load_fails(const char *text, const char *path, const char *what, int line)
{
    scn_error e;
    ck_assert_int_eq(t_load(text, NULL, 0, &s, &e), SCN_E_DATA);
    char msg[1500];
    scn_error_format(&e, msg, sizeof msg);
    ck_assert_msg(!strcmp(e.path, path) && strstr(e.msg, what) && e.line == line, "got %s", msg);
}

START_TEST(bad_closed_and_window_fields_are_located)
{
    load_fails(BASE "  arrival: {process: closed}\n" FIXED, "workload.arrival.concurrency", "missing", 5);
    load_fails(BASE "  arrival: {process: closed, concurrency: 0}\n" FIXED, "workload.arrival.concurrency", "", 5);
    load_fails(BASE "  arrival: {process: poisson, rate: 1/s, concurrency: 4}\n" FIXED, "workload.arrival.concurrency",
               "only to process closed", 5);
    load_fails(BASE "  arrival: {process: offline}\n" FIXED "  requests: 10\n  measure: {skip_first: 5, skip_last: 5}\n",
               "workload.measure", "no request", 9);
    load_fails(BASE "  arrival: {process: offline}\n" FIXED "  measure: {skip_last: 150%}\n", "workload.measure.skip_last",
               "share below 100%", 8);
    load_fails(BASE "  arrival: {process: trace, trace: x.csv}\n  measure: {skip_last: 3}\n", "workload.measure.skip_last",
               "trace", 6);
    /* A window cut by time takes shares of the run's time, never request counts. */
    load_fails(BASE "  arrival: {process: offline}\n" FIXED "  measure: {by: time, skip_first: 8}\n",
               "workload.measure.skip_first", "shares of the run's time", 8);
    load_fails(BASE "  arrival: {process: offline}\n" FIXED "  measure: {by: time, skip_first: 60%, skip_last: 40%}\n",
               "workload.measure", "no time to measure", 8);
    load_fails(BASE "  arrival: {process: offline}\n" FIXED "  measure: {by: tokens}\n", "workload.measure.by", "", 8);
}
END_TEST

START_TEST(closed_and_offline_runs_are_stored_and_reported)
{
    static char out[131072], errs[4096];
    char args[2048];
    const char *dbfile = t_write("workload.db", "");
    remove(dbfile);
    const char *chat = getenv("KVPLAN_LIBRARY");
    snprintf(args, sizeof args, "simulate '%s/chat.yaml' --set 'workload.arrival={process: closed, concurrency: 32}' "
             "--set workload.requests=400 --set 'workload.measure={skip_first: 10%%, skip_last: 10%%}' --db '%s' --format json",
             chat, dbfile);
    ck_assert_msg(t_run(args, out, sizeof out, errs, sizeof errs) == 0, "%s", errs);
    ck_assert_msg(strstr(out, "\"requests\": 320"), "the window keeps 320 of 400: %.400s", out);
    snprintf(args, sizeof args, "simulate '%s/chat.yaml' --set 'workload.arrival={process: offline}' "
             "--set workload.requests=200 --db '%s' --format json", chat, dbfile);
    ck_assert_msg(t_run(args, out, sizeof out, errs, sizeof errs) == 0, "%s", errs);
    snprintf(args, sizeof args, "runs --db '%s' --format csv", dbfile);
    ck_assert_msg(t_run(args, out, sizeof out, errs, sizeof errs) == 0, "%s", errs);
    ck_assert_msg(strstr(out, "\n1,") && strstr(out, "\n2,") && strstr(out, ",320,") && strstr(out, ",200,"), "%s", out);
    snprintf(args, sizeof args, "report '%s/chat.yaml' --set 'workload.arrival={process: closed, concurrency: 32}' "
             "--set workload.requests=400 --set 'workload.measure={skip_first: 10%%, skip_last: 10%%}' --db '%s' --format json",
             chat, dbfile);
    ck_assert_msg(t_run(args, out, sizeof out, errs, sizeof errs) == 0, "%s", errs);
    ck_assert_msg(strstr(out, "\"run\": 1,"), "%.600s", out);
}
END_TEST

START_TEST(plan_judges_a_closed_loop_as_it_runs)
{
    /* A closed loop has no arrival rate to raise, so a plan cannot judge it at capacity (a review
     * found both candidates scored -inf and "missing the SLO at every rate"): each candidate is
     * judged on the run itself, and its objective is that run's goodput per GPU. */
    load(BASE "  requests: 120\n  arrival: {process: closed, concurrency: 16}\n" FIXED
              "slo: {ttft_p99: 5 s, tpot_p99: 200 ms}\n");
    ck_assert(!plan_objective_at_capacity(&s));
    plan_result pr;
    ck_assert_int_eq(plan_enumerate(&s, &pr), 0);
    plan_set_seeds(&pr, 1);
    char err[512];
    ck_assert_int_eq(plan_evaluate(&s, &pr, 1, 0, 1, NULL, NULL, err, sizeof err), 0);
    plan_rank(&s, &pr);
    ck_assert_int_ge(pr.best, 0);
    const plan_cand *b = &pr.c[pr.best];
    ck_assert(!b->at_capacity);
    ck_assert_msg(isfinite(b->objective) && b->objective > 0, "objective %g", b->objective);
    /* Every request met an SLO this loose, so goodput per GPU is the run's request rate. */
    ck_assert_msg(fabs(b->objective - b->m.req_per_s / b->gpus) <= 1e-9 * b->objective, "%g vs %g", b->objective,
                  b->m.req_per_s);
    plan_result_free(&pr);
}
END_TEST

/* ---- Prompts too long for the context ----
 * A prompt that leaves no room for one output token within max_model_len (prompt >= M) is
 * refused as vLLM, SGLang and TensorRT-LLM refuse it, not trimmed; a prompt that fits has its
 * output cut at M, where the engine stops (sim/workload.c, fit). M = 1024 below. */
#define MML "model: llama-3-8b\nhardware: h100-sxm\noptions: {kv_layout: paged}\ndeployment: {max_model_len: 1024}\n"

static void load_trace(const char *csv)
{
    char y[700];
    snprintf(y, sizeof y, MML "workload:\n  arrival: {process: trace, trace: '%s'}\n", t_write("too-long.csv", csv));
    load(y);
}

/* Six requests, all at t = 0: prompts 500, 1024, 1023, 2000, 300 and 1000 tokens. The second and
 * fourth leave no room for an output token (1024 >= M, 2000 >= M): refused. The others are served:
 * 1023 + 10 > M keeps its prompt and generates 1 token, 1000 + 100 > M generates 24. */
#define SIX "0,500,10\n0,1024,10\n0,1023,10\n0,2000,10\n0,300,10\n0,1000,100\n"

START_TEST(too_long_prompts_are_rejected_not_trimmed)
{
    load_trace(SIX);
    /* The generator marks them and leaves their prompts as sent. */
    int noinput = 0;
    char err[512];
    sim_workload *w = sim_workload_init(&s, 1, &noinput, err, sizeof err);
    ck_assert_ptr_nonnull(w);
    static const int prompt[6] = {500, 1024, 1023, 2000, 300, 1000};
    static const bool refused[6] = {false, true, false, true, false, false};
    sim_req_spec q;
    for (int i = 0; i < 6; i++) {
        ck_assert_int_eq(sim_workload_next(w, &q, err, sizeof err), 0);
        ck_assert_int_eq(q.prompt, prompt[i]);
        ck_assert_msg(q.too_long == refused[i], "request %d (prompt %d): too_long %d", i, prompt[i], q.too_long);
    }
    ck_assert_int_eq(sim_workload_next(w, &q, err, sizeof err), 1);
    sim_workload_free(w);
    /* The run serves the other four, whole, and counts the two in too_long and in rejected. */
    sim_metrics m;
    run(&m);
    ck_assert_int_eq(m.too_long, 2);
    ck_assert_int_eq(m.rejected, 2);
    ck_assert_int_eq(m.requests, 4);
    ck_assert_int_eq(n_rows, 4);
    ck_assert_int_eq(m.requests + m.too_long, 6);
    long in = 0;
    for (int i = 0; i < n_rows; i++) {
        ck_assert_msg(rows[i].id != 1 && rows[i].id != 3, "refused request %ld was served", rows[i].id);
        ck_assert_int_eq(rows[i].prompt, prompt[rows[i].id]);
        in += rows[i].prompt;
    }
    ck_assert_int_eq(in, 500 + 1023 + 300 + 1000);
    /* Every refused request counts as a miss in SLO attainment, as a full queue's do. */
    ck_assert(fabs(m.slo_attainment - 4.0 / 6.0) < 1e-12);
}
END_TEST

START_TEST(output_is_still_cut_at_max_model_len)
{
    load_trace(SIX);
    sim_metrics m;
    run(&m);
    ck_assert_int_eq(n_rows, 4);
    for (int i = 0; i < n_rows; i++) {
        int want = rows[i].prompt == 1023 ? 1 : rows[i].prompt == 1000 ? 24 : 10;
        ck_assert_msg(rows[i].output == want, "prompt %d generated %d, expected %d", rows[i].prompt, rows[i].output, want);
        ck_assert_int_le(rows[i].prompt + rows[i].output, 1024);
    }
    ck_assert(fabs(m.output_tok_per_s * m.duration - (10 + 1 + 10 + 24)) < 1e-9);
}
END_TEST

/* Refusals are counted in the window the served requests are counted in (sim_acc_reject), so
 * requests + rejected are the window's arrivals and SLO attainment's denominator is theirs. Every
 * refusal below is too long; with no SLO set, every served request meets it. */
static void expect_window(const char *file, const char *csv, const char *measure, long served, long refused,
                          long refused_in_run)
{
    char y[800];
    snprintf(y, sizeof y, MML "workload:\n  arrival: {process: trace, trace: '%s'}\n  measure: %s\n",
             t_write(file, csv), measure);
    load(y);
    sim_metrics m;
    run(&m);
    ck_assert_int_eq(m.requests, served);
    ck_assert_int_eq(m.rejected, refused);
    ck_assert_int_eq(m.too_long, refused);
    ck_assert_int_eq(m.rejected_run, refused_in_run);
    ck_assert(fabs(m.slo_attainment - (double)served / (double)(served + refused)) < 1e-12);
}

START_TEST(rejections_are_counted_in_the_measurement_window)
{
    /* By index: SIX with the first two skipped. Request 1 (too long) is outside; 3 is inside and
     * 2, 4, 5 are served in it: 3 served, 1 rejected, attainment 3 of 4. */
    expect_window("too-long-window.csv", SIX, "{skip_first: 2}", 3, 1, 2);
    /* By time: two refusals at t = 0 and two at t = 10 s, and 200-token requests served at 0 and
     * 10 s, each done in well under 1 s (tens of ms on an H100). The span is [0, 10 + d], d < 1 s,
     * so skipping its first 50 % starts the window after 5 s: the refusals at 10 s are in it, those
     * at 0 are not, and so is the one served at 10 s only. */
    expect_window("too-long-time.csv", "0,200,8\n0,2000,8\n0,1500,8\n10,200,8\n10,2000,8\n10,1024,8\n",
                  "{by: time, skip_first: 50%}", 1, 2, 4);
    /* The run's span holds its refusals too: refusals before the first served send, or a run that
     * served none, are inside a window that cuts nothing (a span of the served alone dropped
     * them, and a run of refusals only reported none). */
    expect_window("refused-first.csv", "0,2000,8\n1,1500,8\n2,200,8\n", "{by: time}", 1, 2, 2);
    expect_window("refused-all.csv", "0,2000,8\n3,1500,8\n", "{by: time}", 0, 2, 2);
}
END_TEST


START_TEST(closed_loop_clients_go_on_after_a_rejection)
{
    /* Every prompt too long: each of the two clients is refused and sends its next request at
     * once, so all six are refused and none waits for a reply that never comes (a client that
     * did would stop the run after two). */
    sim_metrics m;
    load(MML "workload:\n  requests: 6\n  arrival: {process: closed, concurrency: 2, think_time: 1 s}\n"
             "  prompt_tokens: 2000\n  output_tokens: 12\n");
    run(&m);
    ck_assert_int_eq(m.too_long, 6);
    ck_assert_int_eq(m.rejected, 6);
    ck_assert_int_eq(m.requests, 0);
    ck_assert_int_eq(n_rows, 0);
    /* Prompts of 600 or 2000 tokens, one or the other with equal weight. The k-th request created
     * has the generator's k-th lengths whatever the arrival process (its draws have their own
     * streams), so an offline replay of the generator says which requests the loop must refuse. */
    char y[900];
    const char *lens = t_write("half-too-long.csv", "600,1\n2000,1\n");
    snprintf(y, sizeof y, MML "workload:\n  requests: 40\n  arrival: {process: offline}\n"
             "  prompt_tokens: {dist: empirical, file: '%s'}\n  output_tokens: 12\n", lens);
    load(y);
    int noinput = 0;
    char err[512];
    sim_workload *w = sim_workload_init(&s, s.seed, &noinput, err, sizeof err);
    ck_assert_ptr_nonnull(w);
    bool refused[40];
    int n_refused = 0;
    sim_req_spec q;
    for (int i = 0; i < 40; i++) {
        ck_assert_int_eq(sim_workload_next(w, &q, err, sizeof err), 0);
        ck_assert_int_eq(q.id, i);
        refused[i] = q.too_long;
        n_refused += q.too_long;
        ck_assert_int_eq(q.prompt, q.too_long ? 2000 : 600);
    }
    sim_workload_free(w);
    ck_assert_msg(n_refused > 5 && n_refused < 35, "a replay with %d of 40 refused does not mix them", n_refused);
    snprintf(y, sizeof y, MML "workload:\n  requests: 40\n  arrival: {process: closed, concurrency: 2}\n"
             "  prompt_tokens: {dist: empirical, file: '%s'}\n  output_tokens: 12\n", lens);
    load(y);
    run(&m);
    ck_assert_int_eq(m.too_long, n_refused);
    ck_assert_int_eq(m.requests, 40 - n_refused);
    ck_assert_int_eq(n_rows, 40 - n_refused);
    for (int i = 0; i < n_rows; i++) {
        ck_assert_msg(!refused[rows[i].id], "request %ld should have been refused", rows[i].id);
        ck_assert_int_eq(rows[i].prompt, 600);
        ck_assert_int_eq(rows[i].output, 12);
    }
    /* Offline: refused alike. */
    snprintf(y, sizeof y, MML "workload:\n  requests: 40\n  arrival: {process: offline}\n"
             "  prompt_tokens: {dist: empirical, file: '%s'}\n  output_tokens: 12\n", lens);
    load(y);
    run(&m);
    ck_assert_int_eq(m.too_long, n_refused);
    ck_assert_int_eq(m.requests + m.too_long, 40);
}
END_TEST

/* workload.max_tokens: output: the client sends max_tokens = the output length, and engines
 * refuse prompt + max_tokens over max_model_len (sim/workload.c, fit) instead of cutting the
 * output. SIX under M = 1024: 1023 + 10 and 1000 + 100 now exceed M as well as 1024 and 2000; 500
 * + 10 and 300 + 10 are served whole. Unset (the default), the two are served with their outputs
 * cut (output_is_still_cut_at_max_model_len). */
START_TEST(max_tokens_over_the_context_is_refused_when_sent)
{
    char y[800];
    const char *csv = t_write("max-tokens.csv", SIX);
    snprintf(y, sizeof y, MML "workload:\n  arrival: {process: trace, trace: '%s'}\n  max_tokens: output\n", csv);
    load(y);
    ck_assert(s.workload.max_tokens_sent);
    sim_metrics m;
    run(&m);
    ck_assert_int_eq(m.requests, 2);
    ck_assert_int_eq(m.too_long, 4);
    ck_assert_int_eq(m.rejected, 4);
    for (int i = 0; i < n_rows; i++) {
        ck_assert_msg(rows[i].id == 0 || rows[i].id == 4, "request %ld should have been refused", rows[i].id);
        ck_assert_int_eq(rows[i].output, 10);
    }
    /* A prompt + output of exactly M fits: 1014 + 10. */
    snprintf(y, sizeof y, MML "workload:\n  arrival: {process: trace, trace: '%s'}\n  max_tokens: output\n",
             t_write("max-tokens-edge.csv", "0,1014,10\n0,1015,10\n"));
    load(y);
    run(&m);
    ck_assert_int_eq(m.requests, 1);
    ck_assert_int_eq(m.too_long, 1);
    ck_assert_int_eq(rows[0].prompt, 1014);
    /* The report says why, and a bad value is located. */
    static char out[65536], errs[4096];
    char args[1024];
    snprintf(args, sizeof args, "simulate '%s'", t_write("max-tokens.yaml", y));
    ck_assert_msg(t_run(args, out, sizeof out, errs, sizeof errs) == 0, "%s", errs);
    ck_assert_msg(strstr(out, "1 request(s) asked for more tokens than max_model_len (1024) holds"), "%s", out);
    snprintf(y, sizeof y, MML "workload:\n  arrival: {process: trace, trace: '%s'}\n  max_tokens: 10\n", csv);
    snprintf(args, sizeof args, "simulate '%s'", t_write("max-tokens-bad.yaml", y));
    ck_assert_int_ne(t_run(args, out, sizeof out, errs, sizeof errs), 0);
    ck_assert_msg(strstr(errs, "workload.max_tokens") && strstr(errs, ":7:"), "%s", errs);
}
END_TEST

/* Requests too long for the context are refused at every rate, so plan's, sweep's and capacity's verdicts
 * leave them out; the outputs must say so rather than read "met" over them. Half the prompts
 * (2000 tokens) exceed the 1024-token context. */
START_TEST(plan_and_sweep_say_too_long_is_left_out)
{
    static char out[65536], errs[4096];
    char y[800], yf[512], args[2048];
    snprintf(y, sizeof y, MML "workload:\n  requests: 60\n  arrival: {process: poisson, rate: 2/s}\n"
             "  prompt_tokens: {dist: empirical, file: '%s'}\n  output_tokens: 12\n",
             t_write("half-long.csv", "600,1\n2000,1\n"));
    snprintf(yf, sizeof yf, "%s", t_write("half-long.yaml", y));
    snprintf(args, sizeof args, "plan '%s' --no-db", yf);
    ck_assert_msg(t_run(args, out, sizeof out, errs, sizeof errs) == 0, "%s", errs);
    ck_assert_msg(strstr(out, "too long for max_model_len (1024 tokens; refused at every rate, so the verdicts leave them out"),
                  "%s", out);
    snprintf(args, sizeof args, "sweep '%s' --no-db --top 1 --points 2", yf);
    ck_assert_msg(t_run(args, out, sizeof out, errs, sizeof errs) == 0, "%s", errs);
    ck_assert_msg(strstr(out, "were too long for max_model_len (1024 tokens) and were rejected at every rate"), "%s", out);
    snprintf(args, sizeof args, "capacity '%s'", yf);
    ck_assert_msg(t_run(args, out, sizeof out, errs, sizeof errs) == 0, "%s", errs);
    ck_assert_msg(strstr(out, "are too long for max_model_len (1024 tokens) and are refused at every rate"), "%s", out);
}
END_TEST

START_TEST(cli_notes_rejected_prompts)
{
    static char out[65536], errs[4096];
    char y[700], args[1024];
    snprintf(y, sizeof y, MML "workload:\n  arrival: {process: trace, trace: '%s'}\n", t_write("too-long-cli.csv", SIX));
    snprintf(args, sizeof args, "simulate '%s'", t_write("too-long.yaml", y));
    ck_assert_msg(t_run(args, out, sizeof out, errs, sizeof errs) == 0, "%s", errs);
    ck_assert_msg(strstr(out, "2 request(s) had prompts of max_model_len (1024 tokens) or longer"), "%s", out);
    /* Without such prompts, no note. */
    snprintf(y, sizeof y, MML "workload:\n  arrival: {process: trace, trace: '%s'}\n", t_write("fits-cli.csv", "0,500,10\n"));
    snprintf(args, sizeof args, "simulate '%s'", t_write("fits.yaml", y));
    ck_assert_msg(t_run(args, out, sizeof out, errs, sizeof errs) == 0, "%s", errs);
    ck_assert_msg(!strstr(out, "max_model_len"), "%s", out);
}
END_TEST

/* ---- Arrivals turned away by a full waiting queue ----
 * A request that finds max_waiting requests waiting is rejected (sim/engine.c, enqueue). Its
 * client learns at once, as from a prompt too long, and goes on the same way
 * (sim_workload_next_rejected): in a closed loop it sends its next request after its think time,
 * and a conversation's later turns are never sent, so the request total shrinks by them. */

START_TEST(closed_loop_client_goes_on_after_a_full_queue)
{
    /* Eight clients, a waiting bound of 2 on the one replica, 14 requests, think time 10 s (a
     * 400-token request takes milliseconds). At t = 0 all eight send: the first two are taken
     * (the bound counts those behind the front end too), the other six are
     * rejected, and each of their clients creates its next request, for 10 s, as it is rejected,
     * before the next client's first is created: ids in creation order, 0, 1, 2, 4, 6, 8, 10 and
     * 12 are sent at t = 0 and 3, 5, 7, 9, 11 and 13 at 10 s. The 14 are all created: when 0 and 1
     * complete, nothing is left to send. At 10 s the replica is idle again: 3 and 5 are taken, the
     * other four rejected. Served 0, 1, 3, 5; rejected 6 + 4 = 10.
     * A client that stopped at its rejection (the defect) left clients 0 and 1 to send the six
     * left one after another, all served: 8 served, 6 rejected. */
    load(BASE "  requests: 14\n  arrival: {process: closed, concurrency: 8, think_time: 10 s}\n" FIXED);
    sim_metrics m;
    run_bounded(&m, 2);
    ck_assert_int_eq(m.too_long, 0);
    ck_assert_int_eq(m.requests, 4);
    ck_assert_int_eq(m.rejected, 10);
    ck_assert_int_eq(m.requests + m.rejected, 14);
    ck_assert_int_eq(n_rows, 4);
    static const long id[4] = {0, 1, 3, 5};
    static const double sent[4] = {0, 0, 10, 10};
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(rows[i].id, id[i]);
        ck_assert_msg(fabs(rows[i].arrival - sent[i]) < 1e-9, "request %ld sent at %.9g", rows[i].id, rows[i].arrival);
    }
}
END_TEST

START_TEST(closed_loop_without_think_time_does_not_spin_on_a_full_queue)
{
    /* Eight clients, think time 0, max_queued_requests 2, max_num_seqs 4, 200 requests of 12
     * output tokens. A rejected client's next request cannot reach the engine before the
     * replica's scheduler next runs (SGLang reads and turns away new requests between steps; the
     * answer and the retry cross the network): it is sent after the replica's pending step forms,
     * or when its running step ends (sim/engine.c, refuse). So four run, two wait, and the other
     * two clients are turned away about once a step each: 30 served, 170 rejected in 97 steps
     * (a request lasts about 12 of them). The defect: the six rejected at t = 0 retried at the
     * same instant, before any step, were rejected again, and again, until all 198 other
     * requests were spent at t = 0: 2 served, 198 rejected, whatever the engine's speed. */
    load(BASE "  requests: 200\n  arrival: {process: closed, concurrency: 8, think_time: 0 s}\n" FIXED
              "deployment: {max_num_seqs: 4, max_queued_requests: 2}\n");
    sim_metrics m;
    run(&m);
    ck_assert_int_eq(m.requests + m.rejected, 200);
    ck_assert_int_eq(m.too_long, 0);
    ck_assert_msg(m.requests >= 20, "served %ld, rejected %ld", m.requests, m.rejected);
    /* At most the six surplus clients are turned away at a step. */
    ck_assert_msg(m.rejected <= 6 * m.steps, "rejected %ld in %ld steps", m.rejected, m.steps);
    /* Requests went on being sent while the engine worked: the last served one was sent after
     * the first finished. */
    ck_assert_int_eq(n_rows, m.requests);
    ck_assert_msg(rows[n_rows - 1].arrival > rows[0].e2e, "last sent at %.9g, first done at %.9g",
                  rows[n_rows - 1].arrival, rows[0].e2e);
}
END_TEST

START_TEST(full_queue_drops_a_conversations_later_turns_from_the_total)
{
    /* Four two-turn conversations, offline (every first turn at t = 0, no front end), a waiting
     * bound of 2, the window skipping the last request. First turns 0 and 1 are taken, 2 and 3
     * rejected: their second turns are never sent, so 8 - 2 = 6 requests are sent. The second
     * turns of 0 and 1 are created at their completion as ids 4 and 5, judged against a total of
     * 6: the last, id 5, is outside the window. Measured 0, 1, 4: 3. A total left at 8 (the
     * defect) measured id 5 too: 4. */
    load(BASE "  requests: 8\n  arrival: {process: offline}\n  conversation: {turns: 2}\n"
             "  measure: {skip_last: 1}\n" FIXED);
    sim_metrics m;
    run_bounded(&m, 2);
    ck_assert_int_eq(m.rejected, 2);
    ck_assert_int_eq(n_rows, 4);
    ck_assert_int_eq(m.requests, 3);
    for (int i = 0; i < n_rows; i++) ck_assert_int_le(rows[i].id, 5);
    /* The two second turns never sent are counted, over the whole run. */
    ck_assert_int_eq(m.unsent, 2);
}
END_TEST

/* A conversation that outgrows the context sends no further turns, and the run says how many.
 * Two three-turn conversations of 400-token messages and 12-token replies under M = 1024: turn 2
 * carries 400 + 12 + 400 = 812 tokens and fits (812 + 12 <= M); turn 3 would carry 812 + 12 + 400
 * = 1224 > M, so each conversation ends after two turns: 4 served, 2 never sent. */
START_TEST(turns_never_sent_are_counted_and_noted)
{
    const char *y = MML "workload:\n  requests: 6\n  arrival: {process: offline}\n  conversation: {turns: 3}\n"
                        "  prompt_tokens: 400\n  output_tokens: 12\n";
    load(y);
    sim_metrics m;
    run(&m);
    ck_assert_int_eq(m.requests, 4);
    ck_assert_int_eq(m.unsent, 2);
    ck_assert_int_eq(m.rejected, 0);
    static char out[65536], errs[4096];
    char args[1024];
    snprintf(args, sizeof args, "simulate '%s'", t_write("unsent.yaml", y));
    ck_assert_msg(t_run(args, out, sizeof out, errs, sizeof errs) == 0, "%s", errs);
    ck_assert_msg(strstr(out, "2 conversation turn(s) of the workload's 6 were never sent"), "%s", out);
    /* Single-turn requests that fit: nothing unsent, no note. */
    load(MML "workload:\n  requests: 6\n  arrival: {process: offline}\n  prompt_tokens: 400\n  output_tokens: 12\n");
    run(&m);
    ck_assert_int_eq(m.unsent, 0);
}
END_TEST

/* ---- deployment.max_queued_requests: the engine's own waiting bound ----
 * SGLang's --max-queued-requests, TensorRT-LLM's max_queue_size: an arrival that finds the bound
 * waiting on its replica is rejected (sim_max_waiting maps the field to each replica's bound). */
#define QUEUED BASE "  requests: 10\n  arrival: {process: offline}\n" FIXED

START_TEST(max_queued_requests_rejects_what_the_queue_cannot_hold)
{
    /* Offline, 10 requests, one replica, max_num_seqs 2, max_queued_requests 3. All ten arrive
     * at t = 0, and every arrival at a time fires before the replica's first step there (the
     * step's kick is the later event class, sim/engine.c enqueue), as SGLang's scheduler adds
     * every received request to its waiting queue before it forms a batch: requests 0, 1, 2
     * wait, 3 is the fourth and finds 3 waiting, and so do 4..9: 7 rejected, 3 served. Only then
     * does the first step take 0 and 1 (max_num_seqs 2); 2 waits for a seat, so its TTFT is the
     * longest. Without the field the guard (2^18) holds all ten: none rejected. */
    load(QUEUED "deployment: {max_num_seqs: 2, max_queued_requests: 3}\n");
    ck_assert_int_eq(s.deployment.max_queued_requests, 3);
    sim_metrics m;
    run(&m);
    ck_assert_int_eq(m.rejected, 7);
    ck_assert_int_eq(m.too_long, 0);
    ck_assert_int_eq(m.requests, 3);
    ck_assert_int_eq(n_rows, 3);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(rows[i].id, i);
    ck_assert(rows[2].ttft > rows[0].ttft && rows[2].ttft > rows[1].ttft);
    load(QUEUED "deployment: {max_num_seqs: 2}\n");
    ck_assert_int_eq(s.deployment.max_queued_requests, 0);
    run(&m);
    ck_assert_int_eq(m.rejected, 0);
    ck_assert_int_eq(m.requests, 10);
    /* The bound is each replica's, as engines apply it per server: two replicas hold 3 each
     * (least-outstanding routing alternates them), 6 served, 4 rejected. Read as a bound over
     * the engine split evenly (sim_run_opts.max_waiting), it would have held 1 each: 2 served. */
    load(QUEUED "deployment: {replicas: 2, max_num_seqs: 2, max_queued_requests: 3}\n");
    run(&m);
    ck_assert_int_eq(m.rejected, 4);
    ck_assert_int_eq(m.requests, 6);
    /* A caller's sim_run_opts.max_waiting (over the engine) still overrides the scenario's. */
    run_bounded(&m, 8);
    ck_assert_int_eq(m.rejected, 2);
    ck_assert_int_eq(m.requests, 8);
}
END_TEST

START_TEST(bad_max_queued_requests_is_located)
{
    /* Line 9, the deployment mapping; the value starts at column 35. */
    static const char *const bad[] = {"0", "-3", "2.5", "lots", "1e3", "[4]"};
    static const char *const what[] = {"must be at least 1, found 0", "must be at least 1, found -3",
                                       "expected a whole number, found '2.5'", "expected a whole number, found 'lots'",
                                       "expected a whole number, found '1e3'", "expected a single value, found a list"};
    for (int i = 0; i < 6; i++) {
        char y[512];
        snprintf(y, sizeof y, QUEUED "deployment: {max_queued_requests: %s}\n", bad[i]);
        scn_error e;
        ck_assert_int_eq(t_load(y, NULL, 0, &s, &e), SCN_E_DATA);
        char msg[1500];
        scn_error_format(&e, msg, sizeof msg);
        ck_assert_msg(!strcmp(e.path, "deployment.max_queued_requests") && strstr(e.msg, what[i]) && e.line == 9 &&
                      e.col == 35, "%s: got %s", bad[i], msg);
    }
}
END_TEST

START_TEST(cli_honours_max_queued_requests_through_set)
{
    static char out[65536], errs[4096];
    char args[1024];
    const char *y = t_write("queued.yaml", QUEUED "deployment: {max_num_seqs: 2}\n");
    snprintf(args, sizeof args, "simulate '%s' --set deployment.max_queued_requests=3", y);
    ck_assert_msg(t_run(args, out, sizeof out, errs, sizeof errs) == 0, "%s", errs);
    ck_assert_msg(strstr(out, "7 request(s) found the waiting queue full (deployment.max_queued_requests: 3"), "%s", out);
    snprintf(args, sizeof args, "simulate '%s' --set deployment.max_queued_requests=3 --format json", y);
    ck_assert_msg(t_run(args, out, sizeof out, errs, sizeof errs) == 0, "%s", errs);
    ck_assert_msg(strstr(out, "\"requests\": 3,"), "%s", out);
    /* The counts are keys of their own, not only words in a note: a script reads them. */
    ck_assert_msg(strstr(out, "\"rejected\": 7,") && strstr(out, "\"too_long\": 0,"), "%s", out);
    snprintf(args, sizeof args, "simulate '%s' --format json", y);
    ck_assert_msg(t_run(args, out, sizeof out, errs, sizeof errs) == 0, "%s", errs);
    ck_assert_msg(strstr(out, "\"requests\": 10,") && !strstr(out, "waiting queue full"), "%s", out);
    ck_assert_msg(strstr(out, "\"rejected\": 0,") && strstr(out, "\"too_long\": 0,"), "%s", out);
    /* A bad value through --set is located in the argument: the value starts at column 32. */
    snprintf(args, sizeof args, "simulate '%s' --set deployment.max_queued_requests=0", y);
    ck_assert_int_eq(t_run(args, out, sizeof out, errs, sizeof errs), 65);
    ck_assert_msg(strstr(errs, "--set:1:32: deployment.max_queued_requests: must be at least 1, found 0"), "%s", errs);
}
END_TEST

/* `plan` on QUEUED with the deployment line `deployment`, into a fresh database: the command
 * line in args, the database's path in dbf. */
static void plan_queued(const char *name, const char *deployment, char *args, size_t n, char *dbf, size_t ndbf)
{
    char text[512], yaml[64], y[512];
    snprintf(text, sizeof text, QUEUED "deployment: %s\n", deployment);
    snprintf(yaml, sizeof yaml, "%s.yaml", name);
    snprintf(y, sizeof y, "%s", t_write(yaml, text));
    snprintf(yaml, sizeof yaml, "%s.db", name);
    snprintf(dbf, ndbf, "%s", t_write(yaml, ""));
    remove(dbf);
    snprintf(args, n, "plan '%s' --db '%s' --format json", y, dbf);
}

START_TEST(cli_plan_shows_rejected_arrivals)
{
    /* The same ten offline requests through `plan`: 7 of 10 turned away on every seed (equal
     * lengths, all at t = 0), shown as the candidate's rejected share and in the recommendation. */
    static char out[65536], errs[4096];
    char args[2048], dbf[512];
    plan_queued("queued-plan", "{max_num_seqs: 2, max_queued_requests: 3}", args, sizeof args, dbf, sizeof dbf);
    ck_assert_msg(t_run(args, out, sizeof out, errs, sizeof errs) == 0, "%s", errs);
    const char *share = strstr(out, "\"rejected_share\": ");
    ck_assert_msg(share && fabs(strtod(share + 18, NULL) - 0.7) < 1e-12, "%s", out);
    ck_assert_msg(strstr(out, "Rejected (at the offered load, first seed): 7 of 10 arrivals (70.0 %), 7 by a full waiting queue"),
                  "%s", out);
    /* Without the bound nothing is turned away: a share of 0 and no such line. */
    plan_queued("free-plan", "{max_num_seqs: 2}", args, sizeof args, dbf, sizeof dbf);
    ck_assert_msg(t_run(args, out, sizeof out, errs, sizeof errs) == 0, "%s", errs);
    share = strstr(out, "\"rejected_share\": ");
    ck_assert_msg(share && strtod(share + 18, NULL) == 0 && !strstr(out, "Rejected ("), "%s", out);
}
END_TEST

/* A plan run stored before refusals were counted in the window (it has no unsent_turns) is run
 * again, not reused: its rejected share would mix two windows. */
START_TEST(plan_reruns_runs_stored_before_windowed_refusals)
{
    static char out[65536], errs[4096];
    char args[2048], dbf[512];
    plan_queued("stale-plan", "{max_num_seqs: 2, max_queued_requests: 3}", args, sizeof args, dbf, sizeof dbf);
    ck_assert_msg(t_run(args, out, sizeof out, errs, sizeof errs) == 0, "%s", errs);
    ck_assert_msg(t_run(args, out, sizeof out, errs, sizeof errs) == 0, "%s", errs);
    ck_assert_msg(!strstr(out, "\"reused\": 0,"), "a current stored run is reused: %s", out);
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open(dbf, &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(h, "DELETE FROM metrics WHERE name = 'unsent_turns'", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
    ck_assert_msg(t_run(args, out, sizeof out, errs, sizeof errs) == 0, "%s", errs);
    ck_assert_msg(strstr(out, "\"reused\": 0,"), "a stale stored run was reused: %s", out);
}
END_TEST

START_TEST(cli_sweep_notes_queue_rejections)
{
    /* A sweep whose points a bound of 2 overloads (Poisson up to 400/s of 400-token prompts on
     * one replica, max_num_seqs 2) says the rejected are in no latency column and count against
     * the SLO; the same sweep without the bound has no such note. */
    static char out[65536], errs[4096];
    char args[1024];
    const char *y = t_write("sweep-q.yaml", BASE "  requests: 200\n  arrival: {process: poisson, rate: 10/s}\n" FIXED
                                            "deployment: {max_num_seqs: 2}\nslo: {ttft_p99: 10 s}\n");
    snprintf(args, sizeof args, "sweep '%s' --no-db --points 2 --max-rate 400/s --jobs 1 --set deployment.max_queued_requests=2", y);
    ck_assert_msg(t_run(args, out, sizeof out, errs, sizeof errs) == 0, "%s", errs);
    ck_assert_msg(strstr(out, "a full waiting queue (deployment.max_queued_requests: 2 a replica) turned arrivals away"),
                  "%s", out);
    snprintf(args, sizeof args, "sweep '%s' --no-db --points 2 --max-rate 400/s --jobs 1", y);
    ck_assert_msg(t_run(args, out, sizeof out, errs, sizeof errs) == 0, "%s", errs);
    ck_assert_msg(!strstr(out, "turned arrivals away"), "%s", out);
}
END_TEST

Suite *suite_workload(void)
{
    Suite *su = suite_create("workload");
    TCase *tc = tcase_create("closed_offline");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, one_client_is_a_chain_of_lone_requests);
    tcase_add_test(tc, closed_loop_keeps_n_in_flight_in_lockstep);
    tcase_add_test(tc, time_window_counts_whole_rounds);
    tcase_add_test(tc, littles_law_with_n_clients);
    tcase_add_test(tc, offline_is_one_batch_at_time_zero);
    tcase_add_test(tc, unequal_offline_run_is_measured_as_clients_measure_it);
    tcase_add_test(tc, window_counts);
    tcase_add_test(tc, bad_closed_and_window_fields_are_located);
    tcase_add_test(tc, closed_and_offline_runs_are_stored_and_reported);
    tcase_add_test(tc, plan_judges_a_closed_loop_as_it_runs);
    suite_add_tcase(su, tc);
    tc = tcase_create("too_long");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, too_long_prompts_are_rejected_not_trimmed);
    tcase_add_test(tc, rejections_are_counted_in_the_measurement_window);
    tcase_add_test(tc, output_is_still_cut_at_max_model_len);
    tcase_add_test(tc, closed_loop_clients_go_on_after_a_rejection);
    tcase_add_test(tc, cli_notes_rejected_prompts);
    tcase_add_test(tc, plan_and_sweep_say_too_long_is_left_out);
    tcase_add_test(tc, max_tokens_over_the_context_is_refused_when_sent);
    tcase_add_test(tc, closed_loop_client_goes_on_after_a_full_queue);
    tcase_add_test(tc, closed_loop_without_think_time_does_not_spin_on_a_full_queue);
    tcase_add_test(tc, full_queue_drops_a_conversations_later_turns_from_the_total);
    tcase_add_test(tc, turns_never_sent_are_counted_and_noted);
    suite_add_tcase(su, tc);
    tc = tcase_create("max_queued_requests");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, max_queued_requests_rejects_what_the_queue_cannot_hold);
    tcase_add_test(tc, bad_max_queued_requests_is_located);
    tcase_add_test(tc, cli_honours_max_queued_requests_through_set);
    tcase_add_test(tc, cli_sweep_notes_queue_rejections);
    tcase_add_test(tc, cli_plan_shows_rejected_arrivals);
    tcase_add_test(tc, plan_reruns_runs_stored_before_windowed_refusals);
    suite_add_tcase(su, tc);
    return su;
}
