/* test_output_lag.c: outputs one step late (engine cpu.async_output: vLLM V0's asynchronous
 * output processor; docs/cost-model.md, "Engine profiles", "Output one step late"). A token
 * reaches the client when the step after the one that made it ends, or at once when no step
 * follows. A clock where every step takes one second makes every time a count of steps, worked
 * by hand below; the scheduling itself does not change, so the step counts are the same with
 * and without the lag. */
#include "tests.h"
#include "../sim/sim.h"
#include "../model/kv_model.h"

#include <stdlib.h>
#include <string.h>

typedef struct { double arrival[4], ttft[4], tpot[4], e2e[4]; int n; long steps; } rows;

static int on_row(void *ud, const sim_request_row *r)
{
    rows *x = ud;
    if (r->id >= 0 && r->id < 4) {
        x->arrival[r->id] = r->arrival;
        x->ttft[r->id] = r->ttft;
        x->tpot[r->id] = r->tpot;
        x->e2e[r->id] = r->e2e;
    }
    x->n++;
    return 0;
}

static scn_scenario s;

static void run(rows *x, int expect)
{
    s.engine.frontend_request = s.engine.frontend_token = 0;   /* times count steps only */
    sim_choice c = sim_choice_first(&s);
    sim_executor ex = t_one_second_executor();
    memset(x, 0, sizeof *x);
    sim_run_opts o = {.seed = 1, .on_request = on_row, .ud = x};
    sim_metrics m;
    char err[512];
    ck_assert_msg(sim_run(&s, &c, &ex, &o, &m, err, sizeof err) == SIM_OK, "%s", err);
    ck_assert_int_eq(x->n, expect);
    x->steps = m.steps;
}

/* A: arrives at 0, 16-token prompt, 6 output tokens; B: arrives at 1.5, 16 tokens, 3 out; the
 * continuous scheduler, `steps` decode steps per decision. `trace` replaces the requests. */
static void load_trace(const char *csv, int steps, bool lag)
{
    const char *trace = t_write("lag-trace.csv", csv);
    char text[1024];
    snprintf(text, sizeof text,
             "model: llama-3-8b\nhardware: a100-80g\nengine: vllm-0.7\n"   /* vllm with V0's multi-step */
             "deployment: {scheduler_steps: %d}\n"
             "workload:\n  arrival: {process: trace, trace: '%s'}\n"
             "options: {kv_layout: paged, block_size: 16, scheduler: continuous, prefix_cache: off}\n",
             steps, trace);
    scn_error e;
    ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s", e.msg);
    s.engine.async_output = lag;
}

static void load_two(int steps, bool lag)
{
    load_trace("arrival_s,prompt_tokens,output_tokens\n0.0,16,6\n1.5,16,3\n", steps, lag);
}

START_TEST(first_and_last_tokens_wait_for_the_next_step)
{
    rows x;
    /* The steps (as test_multistep's single-step case): 0-1 prefill A (A's token 1 made at 1);
     * 1-2 decode A (token 2); B arrived at 1.5, so 2-3 prefills B (B's token 1 at 3); 3-4, 4-5
     * decode both (B's tokens 2, 3: B ends at 5; A's tokens 3, 4); 5-6, 6-7 decode A (A ends at 7).
     * Without the lag: A's TTFT 1, E2E 7; B's TTFT 1.5, E2E 3.5. */
    load_two(1, false);
    run(&x, 2);
    ck_assert_double_eq_tol(x.ttft[0], 1.0, 1e-12);
    ck_assert_double_eq_tol(x.e2e[0], 7.0, 1e-12);
    ck_assert_double_eq_tol(x.ttft[1], 1.5, 1e-12);
    ck_assert_double_eq_tol(x.e2e[1], 3.5, 1e-12);
    ck_assert_int_eq(x.steps, 7);
    /* With it: A's first token is delivered as 1-2 ends (TTFT 2); B's as 3-4 ends (4 - 1.5 =
     * 2.5); B's last, made at 5, as 5-6 ends (E2E 6 - 1.5 = 4.5; TPOT (6 - 4) / 2 = 1); A's last,
     * made at 7, has no step after it and goes out at once (E2E 7; TPOT (7 - 2) / 5 = 1). */
    load_two(1, true);
    run(&x, 2);
    ck_assert_double_eq_tol(x.ttft[0], 2.0, 1e-12);
    ck_assert_double_eq_tol(x.e2e[0], 7.0, 1e-12);
    ck_assert_double_eq_tol(x.tpot[0], 1.0, 1e-12);
    ck_assert_double_eq_tol(x.ttft[1], 2.5, 1e-12);
    ck_assert_double_eq_tol(x.e2e[1], 4.5, 1e-12);
    ck_assert_double_eq_tol(x.tpot[1], 1.0, 1e-12);
    ck_assert_int_eq(x.steps, 7);
}
END_TEST

START_TEST(lag_under_multistep_runs)
{
    rows x;
    /* Four decode steps per decision (test_multistep): 0-1 prefill A; run 1-5 (A's tokens 2..5);
     * B waits for the run's end, 5-6 prefills it (B's token 1 at 6); run 6-10 of A and B: A's
     * token 6 at 7 (A ends), B's tokens 2 and 3 at 7 and 8 (B ends); both stay to the run's end.
     * Delivered one step late: A's first as 1-2 ends (TTFT 2), B's first as 6-7 ends (TTFT
     * 7 - 1.5 = 5.5), A's last as 7-8 ends (E2E 8), B's last as 8-9 ends (E2E 9 - 1.5 = 7.5). */
    load_two(4, true);
    run(&x, 2);
    ck_assert_double_eq_tol(x.ttft[0], 2.0, 1e-12);
    ck_assert_double_eq_tol(x.ttft[1], 5.5, 1e-12);
    ck_assert_double_eq_tol(x.e2e[0], 8.0, 1e-12);
    ck_assert_double_eq_tol(x.e2e[1], 7.5, 1e-12);
    ck_assert_int_eq(x.steps, 10);
}
END_TEST

START_TEST(a_run_hands_its_tokens_over_at_its_end)
{
    rows x;
    /* vLLM 0.6.0-0.6.2 multi-step (engine.multi_step_stream false): a run's tokens reach the
     * client when the run ends. A and B as above, and C (16 tokens, 2 out) arriving at 7. Four
     * steps per decision: 0-1 prefill A, run 1-5, 5-6 prefill B, run 6-10 (A's last token at 7,
     * B's at 8), 10-11 prefill C (C waited for the run), run 11-15 (C's last token at 12): 15
     * steps. Prefill steps are no run: their first tokens go out as they end (TTFT A 1, B 6 - 1.5
     * = 4.5, C 11 - 7 = 4). A's and B's last tokens go out as the run ends at 10 (E2E 10 and 8.5),
     * C's at 15 (E2E 15 - 7 = 8). */
    const char *abc = "arrival_s,prompt_tokens,output_tokens\n0.0,16,6\n1.5,16,3\n7.0,16,2\n";
    load_trace(abc, 4, false);
    s.engine.multi_step_stream = false;
    run(&x, 3);
    ck_assert_double_eq_tol(x.ttft[0], 1.0, 1e-12);
    ck_assert_double_eq_tol(x.ttft[1], 4.5, 1e-12);
    ck_assert_double_eq_tol(x.ttft[2], 4.0, 1e-12);
    ck_assert_double_eq_tol(x.e2e[0], 10.0, 1e-12);
    ck_assert_double_eq_tol(x.e2e[1], 8.5, 1e-12);
    ck_assert_double_eq_tol(x.e2e[2], 8.0, 1e-12);
    ck_assert_int_eq(x.steps, 15);
    /* And one step late as well (vLLM 0.6.0's asynchronous output processor): first tokens as
     * the next step ends (A 2, B 7 - 1.5 = 5.5, C: 11-12 is the first step of C's run, 12 - 7 =
     * 5); A's and B's last as the step after their run ends, C's prefill 10-11 (E2E 11 and 9.5);
     * C's last at its run's end, 15, with no step after it (E2E 8). */
    load_trace(abc, 4, true);
    s.engine.multi_step_stream = false;
    run(&x, 3);
    ck_assert_double_eq_tol(x.ttft[0], 2.0, 1e-12);
    ck_assert_double_eq_tol(x.ttft[1], 5.5, 1e-12);
    ck_assert_double_eq_tol(x.ttft[2], 5.0, 1e-12);
    ck_assert_double_eq_tol(x.e2e[0], 11.0, 1e-12);
    ck_assert_double_eq_tol(x.e2e[1], 9.5, 1e-12);
    ck_assert_double_eq_tol(x.e2e[2], 8.0, 1e-12);
    ck_assert_int_eq(x.steps, 15);
    /* Streaming each step (the default) with the lag: C's last token, made at 12, goes out as
     * 12-13 ends (E2E 6); A's (7) as 7-8 ends (E2E 8); B's (8) as 8-9 ends (E2E 7.5). */
    load_trace(abc, 4, true);
    run(&x, 3);
    ck_assert_double_eq_tol(x.e2e[0], 8.0, 1e-12);
    ck_assert_double_eq_tol(x.e2e[1], 7.5, 1e-12);
    ck_assert_double_eq_tol(x.e2e[2], 6.0, 1e-12);
    ck_assert_int_eq(x.steps, 15);
}
END_TEST

START_TEST(a_closed_loop_sends_after_the_delivery)
{
    /* One client, 16-token prompts, 2 output tokens, and a finished request kept one more step
     * (extra_decode_step), so a step always follows its last token. Request 0 sent at 0:
     * 0-1 prefill (token 1 at 1), 1-2 decode (token 2 at 2: done), 2-3 its extra step. Its first
     * token goes out as 1-2 ends (TTFT 2), its last as 2-3 ends (E2E 3), and the client sends
     * request 1 then, at 3: the same again from 3 (TTFT 2, E2E 3), 6 steps in all. Without the
     * lag the client sends at 2, while the extra step runs: request 1 waits for it, 3-4 prefills
     * it (TTFT 4 - 2 = 2) and 4-5 ends it (E2E 3); the same 6 steps. */
    const char *text = "model: llama-3-8b\nhardware: a100-80g\nengine: vllm\n"
                       "workload:\n  requests: 2\n  arrival: {process: closed, concurrency: 1}\n"
                       "  prompt_tokens: 16\n  output_tokens: 2\n"
                       "options: {kv_layout: paged, block_size: 16, scheduler: continuous, prefix_cache: off}\n";
    scn_error e;
    rows x;
    ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s", e.msg);
    s.engine.extra_decode_step = true;
    s.engine.async_output = true;
    run(&x, 2);
    ck_assert_double_eq_tol(x.arrival[1], 3.0, 1e-12);
    ck_assert_double_eq_tol(x.ttft[0], 2.0, 1e-12);
    ck_assert_double_eq_tol(x.e2e[0], 3.0, 1e-12);
    ck_assert_double_eq_tol(x.ttft[1], 2.0, 1e-12);
    ck_assert_double_eq_tol(x.e2e[1], 3.0, 1e-12);
    ck_assert_int_eq(x.steps, 6);
    ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s", e.msg);
    s.engine.extra_decode_step = true;
    run(&x, 2);
    ck_assert_double_eq_tol(x.arrival[1], 2.0, 1e-12);
    ck_assert_double_eq_tol(x.ttft[1], 2.0, 1e-12);
    ck_assert_double_eq_tol(x.e2e[1], 3.0, 1e-12);
    ck_assert_int_eq(x.steps, 6);
}
END_TEST

START_TEST(v0_computes_a_finished_request_once_more)
{
    /* The vllm-0.6 profile as it stands (lag, and the deferred stop check's extra decode step),
     * one request: 16-token prompt, 6 output tokens, one-second steps. 0-1 prefill (token 1 at
     * 1), 1-2 ... 5-6 decode (tokens 2-6: done at 6), 6-7 its extra step. Its first token goes
     * out as 1-2 ends (TTFT 2), its last as the extra step ends (E2E 7; TPOT (7 - 2) / 5 = 1),
     * 7 steps. Without the extra step the last token has no step after it and goes out at once:
     * E2E 6, TPOT (6 - 2) / 5 = 0.8, 6 steps. */
    const char *text = "model: llama-3-8b\nhardware: a100-80g\nengine: vllm-0.6\n"
                       "workload:\n  requests: 1\n  arrival: {process: closed, concurrency: 1}\n"
                       "  prompt_tokens: 16\n  output_tokens: 6\n"
                       "options: {kv_layout: paged, block_size: 16, scheduler: continuous, prefix_cache: off}\n";
    scn_error e;
    rows x;
    ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s", e.msg);
    ck_assert(s.engine.async_output && s.engine.extra_decode_step);
    run(&x, 1);
    ck_assert_double_eq_tol(x.ttft[0], 2.0, 1e-12);
    ck_assert_double_eq_tol(x.e2e[0], 7.0, 1e-12);
    ck_assert_double_eq_tol(x.tpot[0], 1.0, 1e-12);
    ck_assert_int_eq(x.steps, 7);
    ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s", e.msg);
    s.engine.extra_decode_step = false;
    run(&x, 1);
    ck_assert_double_eq_tol(x.ttft[0], 2.0, 1e-12);
    ck_assert_double_eq_tol(x.e2e[0], 6.0, 1e-12);
    ck_assert_double_eq_tol(x.tpot[0], 0.8, 1e-12);
    ck_assert_int_eq(x.steps, 6);
}
END_TEST

START_TEST(the_field_binds_and_the_v0_profiles_carry_it)
{
    const char *base = "model: llama-3-8b\nhardware: h100-sxm\nworkload:\n  arrival: {process: poisson, rate: 1/s}\n"
                       "  prompt_tokens: 10\n  output_tokens: 10\n";
    scn_error e;
    const char *on[] = {"engine={name: x, cpu: {async_output: true}}"};
    ck_assert_int_eq(t_load(base, on, 1, &s, &e), SCN_OK);
    ck_assert(s.engine.async_output);
    const char *bad[] = {"engine={name: x, cpu: {async_output: 3 ms}}"};
    ck_assert_int_eq(t_load(base, bad, 1, &s, &e), SCN_E_DATA);
    ck_assert_str_eq(e.path, "engine.cpu.async_output");
    const char *stream[] = {"engine={name: x, cpu: {multi_step_stream: false}}"};
    ck_assert_int_eq(t_load(base, stream, 1, &s, &e), SCN_OK);
    ck_assert(!s.engine.multi_step_stream && !s.engine.async_output);
    ck_assert_int_eq(t_load(base, on, 1, &s, &e), SCN_OK);
    ck_assert(s.engine.multi_step_stream);   /* the default */
    const char *bad2[] = {"engine={name: x, cpu: {multi_step_stream: per_run}}"};
    ck_assert_int_eq(t_load(base, bad2, 1, &s, &e), SCN_E_DATA);
    ck_assert_str_eq(e.path, "engine.cpu.multi_step_stream");
    /* vLLM's V0 engine from 0.6 (vllm-0.6, vllm-0.6.3, vllm-0.7.1) has the lag, and 0.6.0-0.6.2
     * (vllm-0.6) hand a run's tokens over at its end; V1 (vllm), the V0 loop before 0.6
     * (vllm-v0) and vllm-0.7 (the V1 rows of 0.7.0) have neither. */
    /* The V0 profiles with the lag also compute a finished sequence once more (its stop check is
     * deferred with the outputs); trtllm's overlap scheduler does too, without the lag. */
    const struct { const char *name; bool lag, stream, extra; } P[] = {
        {"vllm-0.6", true, false, true}, {"vllm-0.6.3", true, true, true}, {"vllm-0.7.1", true, true, true},
        {"vllm", false, true, false}, {"vllm-v0", false, true, false}, {"vllm-0.2", false, true, false},
        {"vllm-0.7", false, true, false}, {"sglang", false, true, false}, {"trtllm", false, true, true},
    };
    for (int i = 0; i < (int)(sizeof P / sizeof P[0]); i++) {
        char set[64];
        snprintf(set, sizeof set, "engine=%s", P[i].name);
        const char *sets[] = {set};
        ck_assert_int_eq(t_load(base, sets, 1, &s, &e), SCN_OK);
        ck_assert_msg(s.engine.async_output == P[i].lag && s.engine.multi_step_stream == P[i].stream &&
                          s.engine.extra_decode_step == P[i].extra,
                      "%s", P[i].name);
    }
    /* vllm-0.6 is vllm-0.7 plus the lag: MLA still cached expanded. */
    const char *v06[] = {"engine=vllm-0.6"};
    ck_assert_int_eq(t_load(base, v06, 1, &s, &e), SCN_OK);
    ck_assert(s.engine.mla_expanded);
}
END_TEST

/* Every request of a run that preempts (a small cache), runs two replicas and ten-step runs is
 * recorded once, and each row keeps E2E >= TTFT >= its queueing: held requests survive
 * preemption, tail retirement and the hand-over. */
typedef struct { long n; int bad; } check_rows;

static int on_check(void *ud, const sim_request_row *r)
{
    check_rows *c = ud;
    c->n++;
    if (!(r->e2e >= r->ttft && r->ttft >= r->queue && r->queue >= 0)) c->bad++;
    return 0;
}

START_TEST(preemption_and_replicas_keep_every_request)
{
    const char *text = "model: llama-3-8b\nhardware: a100-80g\nengine: vllm-0.6\n"
                       "deployment: {replicas: 2, scheduler_steps: 10}\n"
                       "workload:\n  requests: 300\n  arrival: {process: poisson, rate: 40/s}\n"
                       "  prompt_tokens: {dist: exponential, mean: 227, min: 4, max: 1024}\n"
                       "  output_tokens: {dist: exponential, mean: 197, min: 1, max: 2044}\n"
                       "options: {kv_layout: paged, block_size: 16, scheduler: continuous}\n";
    scn_error e;
    ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s", e.msg);
    for (int stream = 0; stream < 2; stream++) {
        s.engine.multi_step_stream = stream;
        sim_choice c = sim_choice_first(&s);
        sim_executor ex;
        ck_assert_int_eq(sim_executor_model(&s, &c, &ex), 0);
        check_rows x = {0};
        sim_run_opts o = {.seed = 3, .on_request = on_check, .ud = &x, .kv_blocks_override = 300};
        sim_metrics m;
        char err[512];
        int rc = sim_run(&s, &c, &ex, &o, &m, err, sizeof err);
        ex.free(ex.ctx);
        ck_assert_msg(rc == SIM_OK, "%s", err);
        ck_assert_int_eq(x.n, 300);
        ck_assert_int_eq(x.bad, 0);
        ck_assert_msg(m.preemptions > 0, "the cache was meant to be short: %ld preemptions", m.preemptions);
    }
}
END_TEST

START_TEST(cost_and_simulate_say_it)
{
    /* `kvplan cost --prefill 467` under vllm-0.6: a lone request's TTFT is the front end, the
     * prefill step and its next step, its first decode at context 467, priced here by
     * kv_step_time (one row of 1 token over 467 cached). */
    const char *yaml = t_write("lag-cost.yaml", "model: llama-3-8b\nhardware: h100-sxm\nengine: vllm-0.6\n"
                                                "workload:\n  arrival: {process: poisson, rate: 1/s}\n"
                                                "  prompt_tokens: 467\n  output_tokens: 10\n");
    char args[600], out[16384], err[2048];
    snprintf(args, sizeof args, "cost %s --batch 0 --prefill 467 --format json", yaml);
    ck_assert_msg(t_run(args, out, sizeof out, err, sizeof err) == 0, "%s", err);
    const char *f = strstr(out, "\"frontend_seconds\":"), *t = strstr(out, "\"ttft_lone_seconds\":"),
               *st = strstr(out, "\"step_seconds\":");
    ck_assert_msg(f && t && st, "%s", out);
    double fe = strtod(f + strlen("\"frontend_seconds\":"), NULL);
    double lone = strtod(t + strlen("\"ttft_lone_seconds\":"), NULL);
    double step = strtod(st + strlen("\"step_seconds\":"), NULL);
    scn_error e;
    const char *text = "model: llama-3-8b\nhardware: h100-sxm\nengine: vllm-0.6\n"
                       "workload:\n  arrival: {process: poisson, rate: 1/s}\n  prompt_tokens: 467\n  output_tokens: 10\n";
    ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s", e.msg);
    kv_cache_cfg cc = kv_cache_cfg_make(&s, s.options.kv_dtype[0], s.options.sink[0], s.options.window[0]);
    kv_seq_work nx = {1, 467};
    double next = kv_step_time(&s, &cc, s.options.attention[0], &nx, 1).seconds;
    ck_assert_double_eq_tol(lone, fe + step + next, 1e-9);
    /* `kvplan simulate` says so; under vllm (V1) it does not. */
    snprintf(args, sizeof args, "simulate %s --no-db --set workload.requests=5", yaml);
    ck_assert_msg(t_run(args, out, sizeof out, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(strstr(out, "when the next step ends"), "%s", out);
    snprintf(args, sizeof args, "simulate %s --no-db --set workload.requests=5 --set engine=vllm", yaml);
    ck_assert_msg(t_run(args, out, sizeof out, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(!strstr(out, "when the next step ends"), "%s", out);
    /* Disaggregated pools hand tokens over at once (sim/disagg.c): no note. */
    snprintf(args, sizeof args,
             "simulate %s --no-db --set workload.requests=5 --set 'deployment.disaggregation={prefill: {}, decode: {}}'",
             yaml);
    ck_assert_msg(t_run(args, out, sizeof out, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(!strstr(out, "when the next step ends"), "%s", out);
    /* Multi-step runs handed over at their end (vllm-0.6), and not when each step streams
     * (vllm-0.6.3). */
    snprintf(args, sizeof args, "simulate %s --no-db --set workload.requests=5 --set deployment.scheduler_steps=4 "
             "--set options.scheduler=continuous", yaml);
    ck_assert_msg(t_run(args, out, sizeof out, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(strstr(out, "when the run ends") && strstr(out, "when the next step ends"), "%s", out);
    snprintf(args, sizeof args, "simulate %s --no-db --set workload.requests=5 --set deployment.scheduler_steps=4 "
             "--set options.scheduler=continuous --set engine=vllm-0.6.3", yaml);
    ck_assert_msg(t_run(args, out, sizeof out, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(!strstr(out, "when the run ends") && strstr(out, "when the next step ends"), "%s", out);
}
END_TEST

Suite *suite_output_lag(void)
{
    Suite *su = suite_create("outputlag");
    TCase *tc = tcase_create("outputlag");
    tcase_add_test(tc, first_and_last_tokens_wait_for_the_next_step);
    tcase_add_test(tc, lag_under_multistep_runs);
    tcase_add_test(tc, a_run_hands_its_tokens_over_at_its_end);
    tcase_add_test(tc, a_closed_loop_sends_after_the_delivery);
    tcase_add_test(tc, v0_computes_a_finished_request_once_more);
    tcase_add_test(tc, the_field_binds_and_the_v0_profiles_carry_it);
    tcase_add_test(tc, cost_and_simulate_say_it);
    tcase_add_test(tc, preemption_and_replicas_keep_every_request);
    suite_add_tcase(su, tc);
    return su;
}
