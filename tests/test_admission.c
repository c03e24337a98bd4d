/* test_admission.c: guaranteed no-evict admission (engine cpu.no_evict, TensorRT-LLM's default
 * GUARANTEED_NO_EVICT capacity policy; docs/cost-model.md, "Engine profiles", "Admission")
 * against the fill-then-preempt admission of the other profiles. A clock where every step takes
 * one second and a KV pool of four 16-token blocks make each request's times a count of steps,
 * worked by hand below. */
#include "tests.h"
#include "../sim/sim.h"

#include <string.h>

typedef struct { double ttft[2], e2e[2]; int n; long preempted; } rows;

static int on_row(void *ud, const sim_request_row *r)
{
    rows *x = ud;
    if (r->id >= 0 && r->id < 2) { x->ttft[r->id] = r->ttft; x->e2e[r->id] = r->e2e; }
    x->n++;
    return 0;
}

static int one_second(void *ctx, const sim_batch *b, double *seconds, char *err, size_t n)
{
    (void)ctx; (void)b; (void)err; (void)n;
    *seconds = 1.0;
    return 0;
}

/* Four blocks of 16 tokens: 64 tokens of KV (the watermark, blocks / 100, is 0). */
static long four_blocks(void *ctx, int replica)
{
    (void)ctx; (void)replica;
    return 4;
}

/* A arrives at 0 with a 16-token prompt and 20 output tokens (36 tokens in all: 3 blocks); B at
 * 0.5 with 16 and 4 (20 tokens: 2 blocks). trtllm-v0 runs the continuous scheduler with prefill
 * rows in the decode step (in-flight batching), serial CPU, no extra step. */
static void run_two(const char *engine, bool no_evict, rows *x, scn_scenario *s)
{
    const char *trace = t_write("adm-trace.csv", "arrival_s,prompt_tokens,output_tokens\n0.0,16,20\n0.5,16,4\n");
    char text[1024];
    snprintf(text, sizeof text,
             "model: llama-3-8b\nhardware: h100-sxm\nengine: %s\n"
             "workload:\n  arrival: {process: trace, trace: '%s'}\n"
             "options: {kv_layout: paged, block_size: 16, prefix_cache: off}\n", engine, trace);
    scn_error e;
    ck_assert_msg(t_load(text, NULL, 0, s, &e) == SCN_OK, "%s", e.msg);
    s->engine.no_evict = no_evict;
    s->engine.frontend_request = s->engine.frontend_token = 0;   /* times count steps only */
    sim_choice c = sim_choice_first(s);
    sim_executor ex = {.name = "one-second", .run = one_second, .kv_blocks = four_blocks};
    memset(x, 0, sizeof *x);
    sim_run_opts o = {.seed = 1, .on_request = on_row, .ud = x};
    sim_metrics m;
    char err[512];
    ck_assert_msg(sim_run(s, &c, &ex, &o, &m, err, sizeof err) == SIM_OK, "%s", err);
    ck_assert_int_eq(x->n, 2);
    x->preempted = m.preemptions;
}

START_TEST(no_evict_waits_for_room_to_finish)
{
    static scn_scenario s;
    rows x;
    /* Fill (the default): 0-1 prefills A (A's token 1 at 1). At 1 A's next position takes its
     * second block and B's 16-token prompt fits the third: 1-2 decodes A and prefills B (B's
     * token 1 at 2: TTFT 1.5); B's token 2 needs the fourth block (2-3); its tokens 3 and 4 at 4
     * and 5 (E2E 4.5), which frees its two blocks long before A needs its third (position 32,
     * token 18). A's tokens 2..20 come one a step, 1-2 to 19-20: E2E 20. No preemption. */
    run_two("trtllm-v0", false, &x, &s);
    ck_assert_double_eq_tol(x.ttft[0], 1.0, 1e-12);
    ck_assert_double_eq_tol(x.e2e[0], 20.0, 1e-12);
    ck_assert_double_eq_tol(x.ttft[1], 1.5, 1e-12);
    ck_assert_double_eq_tol(x.e2e[1], 4.5, 1e-12);
    ck_assert_int_eq(x.preempted, 0);
    /* No evict: at 1 A holds 2 blocks and still needs 1 to reach 36 tokens; B needs 2 to reach
     * 20; 1 + 2 = 3 > the 2 free. When A holds all 3, 0 + 2 > 1 free. So B waits for A to end
     * at 20: 20-21 prefills B (TTFT 21 - 0.5 = 20.5), its tokens 2-4 at 22, 23, 24 (E2E 23.5).
     * A is unchanged. */
    run_two("trtllm-v0", true, &x, &s);
    ck_assert_double_eq_tol(x.ttft[0], 1.0, 1e-12);
    ck_assert_double_eq_tol(x.e2e[0], 20.0, 1e-12);
    ck_assert_double_eq_tol(x.ttft[1], 20.5, 1e-12);
    ck_assert_double_eq_tol(x.e2e[1], 23.5, 1e-12);
    ck_assert_int_eq(x.preempted, 0);
}
END_TEST

START_TEST(no_evict_refuses_what_can_never_fit)
{
    /* 16 + 60 tokens need ceil(76 / 16) = 5 blocks to completion and the pool has 4: no-evict
     * admission could never admit it, so the run is refused with the request named instead of
     * waiting for ever. */
    static scn_scenario s;
    const char *trace = t_write("adm-big.csv", "arrival_s,prompt_tokens,output_tokens\n0.0,16,60\n");
    char text[1024];
    snprintf(text, sizeof text,
             "model: llama-3-8b\nhardware: h100-sxm\nengine: trtllm-v0\n"
             "workload:\n  arrival: {process: trace, trace: '%s'}\n"
             "options: {kv_layout: paged, block_size: 16, prefix_cache: off}\n", trace);
    scn_error e;
    ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s", e.msg);
    s.engine.no_evict = true;
    sim_choice c = sim_choice_first(&s);
    sim_executor ex = {.name = "one-second", .run = one_second, .kv_blocks = four_blocks};
    sim_run_opts o = {.seed = 1};
    sim_metrics m;
    char err[512] = "";
    ck_assert_int_ne(sim_run(&s, &c, &ex, &o, &m, err, sizeof err), SIM_OK);
    ck_assert_msg(strstr(err, "request 0 needs 5 blocks to completion") && strstr(err, "the 4"), "%s", err);
}
END_TEST

START_TEST(no_evict_counts_what_a_window_keeps)
{
    /* The same 16 + 60 tokens under a sink + window of 4 + 12: the window frees every block
     * wholly past its last 12 positions, so the request holds the sink's block and at most
     * ceil(12 / 16) + 1 = 2 window blocks, 3 in all (TensorRT-LLM's blocks to completion count
     * min(prompt + max new tokens, attention window) tokens). No-evict admits it into the 4
     * blocks and it never needs more: 0-1 prefills it (TTFT 1), tokens 2..60 one a step (E2E
     * 60), no preemption. Counting every position's block it was refused (5 > 4). */
    static scn_scenario s;
    const char *trace = t_write("adm-win.csv", "arrival_s,prompt_tokens,output_tokens\n0.0,16,60\n");
    char text[1024];
    snprintf(text, sizeof text,
             "model: llama-3-8b\nhardware: h100-sxm\nengine: trtllm-v0\n"
             "workload:\n  arrival: {process: trace, trace: '%s'}\n"
             "options: {kv_layout: paged, block_size: 16, prefix_cache: off, window: {sink: 4, window: 12}}\n", trace);
    scn_error e;
    ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s", e.msg);
    s.engine.no_evict = true;
    s.engine.frontend_request = s.engine.frontend_token = 0;
    sim_choice c = sim_choice_first(&s);
    sim_executor ex = {.name = "one-second", .run = one_second, .kv_blocks = four_blocks};
    rows x;
    memset(&x, 0, sizeof x);
    sim_run_opts o = {.seed = 1, .on_request = on_row, .ud = &x};
    sim_metrics m;
    char err[512] = "";
    ck_assert_msg(sim_run(&s, &c, &ex, &o, &m, err, sizeof err) == SIM_OK, "%s", err);
    ck_assert_int_eq(x.n, 1);
    ck_assert_double_eq_tol(x.ttft[0], 1.0, 1e-12);
    ck_assert_double_eq_tol(x.e2e[0], 60.0, 1e-12);
    ck_assert_int_eq(m.preemptions, 0);
}
END_TEST

START_TEST(no_evict_binds_and_profiles_say_so)
{
    /* TensorRT-LLM's PyTorch backend (trtllm-serve) defaults to GUARANTEED_NO_EVICT; trtllm-bench
     * before 1.0 (trtllm-v0's offline rows) ran MAX_UTILIZATION; vLLM and SGLang fill. */
    static scn_scenario s;
    scn_error e;
    static const char *const names[] = {"trtllm", "trtllm-v0", "vllm", "sglang"};
    static const bool want[] = {true, false, false, false};
    for (int i = 0; i < 4; i++) {
        char text[256];
        snprintf(text, sizeof text, "model: llama-3-8b\nhardware: h100-sxm\nengine: %s\nworkload:\n  arrival: "
                                    "{process: poisson, rate: 1/s}\n  prompt_tokens: 10\n  output_tokens: 10\n", names[i]);
        ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s: %s", names[i], e.msg);
        ck_assert_msg(s.engine.no_evict == want[i], "%s: no_evict %d", names[i], (int)s.engine.no_evict);
    }
    /* A value that is not a boolean is refused at the field, with its location. */
    const char *bad = "model: llama-3-8b\nhardware: h100-sxm\n"
                      "engine: {name: x, cpu: {step: 1 ms, no_evict: sometimes}}\n"
                      "workload:\n  arrival: {process: poisson, rate: 1/s}\n  prompt_tokens: 10\n  output_tokens: 10\n";
    ck_assert_int_ne(t_load(bad, NULL, 0, &s, &e), SCN_OK);
    ck_assert_msg(strstr(e.path, "no_evict") && e.line == 3 && e.col > 0, "%s:%d:%d: %s", e.path, e.line, e.col, e.msg);
}
END_TEST

Suite *suite_admission(void)
{
    Suite *s = suite_create("admission");
    TCase *tc = tcase_create("admission");
    tcase_add_test(tc, no_evict_waits_for_room_to_finish);
    tcase_add_test(tc, no_evict_refuses_what_can_never_fit);
    tcase_add_test(tc, no_evict_counts_what_a_window_keeps);
    tcase_add_test(tc, no_evict_binds_and_profiles_say_so);
    suite_add_tcase(s, tc);
    return s;
}
