/* test_multistep.c: multi-step scheduling (deployment.scheduler_steps, vLLM 0.6's
 * --num-scheduler-steps; docs/simulator.md, "Multi-step scheduling"). A clock where every step
 * takes one second makes each request's times a count of steps, worked by hand below. */
#include "tests.h"
#include "../sim/sim.h"

#include <string.h>

typedef struct { double ttft[2], e2e[2]; int n; long steps; } rows;

static int on_row(void *ud, const sim_request_row *r)
{
    rows *x = ud;
    if (r->id >= 0 && r->id < 2) { x->ttft[r->id] = r->ttft; x->e2e[r->id] = r->e2e; }
    x->n++;
    return 0;
}

/* A: arrives at 0, 16-token prompt, 6 output tokens; B: arrives at 1.5, 16 tokens, 3 out.
 * `engine` is a library profile; `extra` sets its extra_decode_step; `seqs` is max_num_seqs. */
static void run_two_with(const char *engine, int extra, int steps, int seqs, rows *x)
{
    const char *trace = t_write("ms-trace.csv", "arrival_s,prompt_tokens,output_tokens\n0.0,16,6\n1.5,16,3\n");
    char text[1024];
    snprintf(text, sizeof text,
             "model: llama-3-8b\nhardware: a100-80g\nengine: %s\n"
             "deployment: {scheduler_steps: %d, max_num_seqs: %d}\n"
             "workload:\n  arrival: {process: trace, trace: '%s'}\n"
             "options: {kv_layout: paged, block_size: 16, scheduler: continuous, prefix_cache: off}\n",
             engine, steps, seqs, trace);
    static scn_scenario s;
    scn_error e;
    ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s", e.msg);
    s.engine.extra_decode_step = extra;
    s.engine.frontend_request = s.engine.frontend_token = 0;   /* times count steps only */
    sim_choice c = sim_choice_first(&s);
    sim_executor ex = t_one_second_executor();
    memset(x, 0, sizeof *x);
    sim_run_opts o = {.seed = 1, .on_request = on_row, .ud = x};
    sim_metrics m;
    char err[512];
    ck_assert_msg(sim_run(&s, &c, &ex, &o, &m, err, sizeof err) == SIM_OK, "%s", err);
    ck_assert_int_eq(x->n, 2);
    x->steps = m.steps;
}

/* vllm-0.7: the vllm profile (as for any dense model) with V0's multi-step scheduling. */
static void run_two(int steps, rows *x) { run_two_with("vllm-0.7", 0, steps, 256, x); }

START_TEST(multistep_gates_admission_by_hand)
{
    rows x;
    /* One step per decision (vLLM's default). t 0-1 prefill A (A's token 1 at 1); 1-2 decode A
     * (token 2); B arrived at 1.5, so 2-3 prefills B (B's token 1 at 3: TTFT 1.5); 3-4, 4-5
     * decode both (B's tokens 2, 3: B ends at 5, E2E 3.5; A's tokens 3, 4); 5-6, 6-7 decode A
     * (tokens 5, 6: A ends at 7). */
    run_two(1, &x);
    ck_assert_double_eq_tol(x.ttft[0], 1.0, 1e-12);
    ck_assert_double_eq_tol(x.ttft[1], 1.5, 1e-12);
    ck_assert_double_eq_tol(x.e2e[1], 3.5, 1e-12);
    ck_assert_double_eq_tol(x.e2e[0], 7.0, 1e-12);
    ck_assert_int_eq(x.steps, 7);
    /* Four steps per decision. 0-1 prefill A (a prefill is one step); at 1 nothing waits, so
     * the decision is a decode run of 4 steps: 1-5, A's tokens 2..5. B (arrived at 1.5) waits
     * for the run's end: 5-6 prefills it (TTFT 6 - 1.5 = 4.5); at 6 a new run of A and B: 6-7
     * gives A's token 6 (A ends at 7) and B's token 2; 7-8 gives B's token 3 (E2E 6.5). */
    run_two(4, &x);
    ck_assert_double_eq_tol(x.ttft[0], 1.0, 1e-12);
    ck_assert_double_eq_tol(x.ttft[1], 4.5, 1e-12);
    ck_assert_double_eq_tol(x.e2e[1], 6.5, 1e-12);
    ck_assert_double_eq_tol(x.e2e[0], 7.0, 1e-12);
    /* A and B stay in the batch until their run ends (A finished in its first step: 3 more; B
     * in its second: 2 more), so the run still takes 4 steps, 6-10: 1 + 4 + 1 + 4 = 10 steps. */
    ck_assert_int_eq(x.steps, 10);
}
END_TEST

/* The overlap scheduler's extra decode step (engine.extra_decode_step), with one seat
 * (max_num_seqs 1) so that the seat A holds one step longer delays B. */
START_TEST(extra_decode_step_by_hand)
{
    rows x;
    /* Without it: 0-1 prefills A, 1-6 decode A (tokens 2..6: A ends at 6); B waited for the seat:
     * 6-7 prefills B (TTFT 7 - 1.5 = 5.5), 7-8 and 8-9 decode it (E2E 9 - 1.5 = 7.5); 9 steps. */
    run_two_with("trtllm", 0, 1, 1, &x);
    ck_assert_double_eq_tol(x.e2e[0], 6.0, 1e-12);
    ck_assert_double_eq_tol(x.ttft[1], 5.5, 1e-12);
    ck_assert_double_eq_tol(x.e2e[1], 7.5, 1e-12);
    ck_assert_int_eq(x.steps, 9);
    /* With it: A still ends at 6 as the client sees it, but runs 6-7 as well; B's prefill is 7-8
     * (TTFT 6.5), its tokens at 9 and 10 (E2E 8.5), and its own extra step 10-11: 11 steps. */
    run_two_with("trtllm", 1, 1, 1, &x);
    ck_assert_double_eq_tol(x.e2e[0], 6.0, 1e-12);
    ck_assert_double_eq_tol(x.ttft[1], 6.5, 1e-12);
    ck_assert_double_eq_tol(x.e2e[1], 8.5, 1e-12);
    ck_assert_int_eq(x.steps, 11);
}
END_TEST

/* Multi-step needs the continuous scheduler: the vLLM profile's chunked default is refused at
 * the field, with its location. */
START_TEST(multistep_refuses_chunked_prefill)
{
    static scn_scenario s;
    scn_error e;
    const char *text = "model: llama-3-8b\nhardware: a100-80g\nengine: vllm-0.7\n"
                       "deployment: {scheduler_steps: 10}\n"
                       "workload:\n  requests: 10\n  arrival: {process: poisson, rate: 1/s}\n"
                       "  prompt_tokens: 100\n  output_tokens: 10\n";
    ck_assert_int_ne(t_load(text, NULL, 0, &s, &e), SCN_OK);
    ck_assert_msg(!strcmp(e.path, "deployment.scheduler_steps") && strstr(e.msg, "continuous"), "%s: %s", e.path, e.msg);
    ck_assert_msg(e.line == 4 && e.col > 0, "location %d:%d", e.line, e.col);
    const char *sets[] = {"options.scheduler=continuous"};
    ck_assert_msg(t_load(text, sets, 1, &s, &e) == SCN_OK, "%s", e.msg);
    ck_assert_int_eq(s.deployment.scheduler_steps, 10);
    const char *zero[] = {"deployment.scheduler_steps=0"};
    ck_assert_int_ne(t_load(text, zero, 1, &s, &e), SCN_OK);
}
END_TEST

/* Multi-step scheduling is vLLM V0's alone (0.6.0 on, PR #7000; V1 never had it, PR #12535):
 * scheduler_steps > 1 on an engine without it is refused at the field (line 4; column 31, just
 * after the 30 characters of "deployment: {scheduler_steps: "), exit 65 from the CLI, naming the
 * engine; the V0 profiles take it; so does a profile of one's own that says cpu.multi_step. */
START_TEST(multistep_only_where_the_engine_has_it)
{
    static scn_scenario s;
    scn_error e;
    char text[600];
    static const char *const refused[] = {"vllm", "sglang", "sglang-v0.3", "trtllm", "trtllm-v0", "trtllm-v0.6",
                                          "vllm-v0", "vllm-0.2", "bare", "kvplan"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        snprintf(text, sizeof text,
                 "model: llama-3-8b\nhardware: a100-80g\nengine: %s\n"
                 "deployment: {scheduler_steps: 10}\n"
                 "workload:\n  requests: 10\n  arrival: {process: poisson, rate: 1/s}\n"
                 "  prompt_tokens: 100\n  output_tokens: 10\n"
                 "options: {scheduler: continuous}\n", refused[i]);
        ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_E_DATA, "%s accepted multi-step", refused[i]);
        char want[64];
        snprintf(want, sizeof want, "'%s' has no multi-step scheduling", refused[i]);
        ck_assert_msg(!strcmp(e.path, "deployment.scheduler_steps") && strstr(e.msg, want), "%s: %s: %s", refused[i],
                      e.path, e.msg);
        ck_assert_msg(e.line == 4 && e.col == 31, "%s: location %d:%d", refused[i], e.line, e.col);
    }
    static const char *const taken[] = {"vllm-0.6", "vllm-0.6.3", "vllm-0.7", "vllm-0.7.1"};
    for (size_t i = 0; i < sizeof taken / sizeof taken[0]; i++) {
        snprintf(text, sizeof text,
                 "model: llama-3-8b\nhardware: a100-80g\nengine: %s\n"
                 "deployment: {scheduler_steps: 10}\n"
                 "workload:\n  requests: 10\n  arrival: {process: poisson, rate: 1/s}\n"
                 "  prompt_tokens: 100\n  output_tokens: 10\n"
                 "options: {scheduler: continuous}\n", taken[i]);
        ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s: %s: %s", taken[i], e.path, e.msg);
        ck_assert(s.engine.multi_step && s.deployment.scheduler_steps == 10);
    }
    /* One step is every engine's: nothing to refuse. */
    const char *one[] = {"engine=sglang", "deployment.scheduler_steps=1"};
    ck_assert_msg(t_load(text, one, 2, &s, &e) == SCN_OK, "%s", e.msg);
    ck_assert(!s.engine.multi_step);
    /* An inline profile says so itself; a plan's engine choices are checked too. */
    const char *own[] = {"engine={extends: vllm, name: mine, cpu: {multi_step: true}}"};
    ck_assert_msg(t_load(text, own, 1, &s, &e) == SCN_OK, "%s", e.msg);
    const char *opts[] = {"options.engine=[vllm-0.6.3, trtllm]"};
    ck_assert_int_eq(t_load(text, opts, 1, &s, &e), SCN_E_DATA);
    ck_assert_msg(strstr(e.msg, "options.engine[1] 'trtllm' has no multi-step"), "%s", e.msg);
    /* The CLI: exit 65 with file:line:col: field. */
    const char *path = t_write("ms-sglang.yaml", "model: llama-3-8b\nhardware: a100-80g\nengine: sglang\n"
                                                 "deployment: {scheduler_steps: 10}\n"
                                                 "workload:\n  requests: 10\n  arrival: {process: poisson, rate: 1/s}\n"
                                                 "  prompt_tokens: 100\n  output_tokens: 10\n"
                                                 "options: {scheduler: continuous}\n");
    char args[1200], out[4096], err[4096], want[1200];
    snprintf(args, sizeof args, "simulate %s --no-db", path);
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 65);
    snprintf(want, sizeof want, "%s:4:31: deployment.scheduler_steps: the engine 'sglang' has no multi-step", path);
    ck_assert_msg(strstr(err, want), "want '%s' in: %s", want, err);
}
END_TEST

Suite *suite_multistep(void)
{
    Suite *s = suite_create("multistep");
    TCase *tc = tcase_create("multistep");
    tcase_add_test(tc, multistep_gates_admission_by_hand);
    tcase_add_test(tc, multistep_refuses_chunked_prefill);
    tcase_add_test(tc, multistep_only_where_the_engine_has_it);
    tcase_add_test(tc, extra_decode_step_by_hand);
    suite_add_tcase(s, tc);
    return s;
}
