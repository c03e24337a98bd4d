/* test_reserve.c: SGLang's admission reservation (engine `admission: {reserve: output, ...}`,
 * sim/sched.c; docs/cost-model.md, "Engine profiles", "Admission") against the fill-then-preempt
 * admission. A clock where every step takes one second, an inline engine with no CPU or front-end
 * time, the continuous scheduler (a prefill step when a waiting request is admitted, else a
 * decode step) and 16-token blocks make each request's times a count of steps, worked by hand
 * below. Every run is made both with and without the fast-forward, which must agree. */
#include "tests.h"
#include "../sim/sim.h"
#include "../sim/sched.h"

#include <string.h>

#define MAXR 4
typedef struct { double ttft[MAXR], e2e[MAXR]; int n; long preempted; } rows;

static int on_row(void *ud, const sim_request_row *r)
{
    rows *x = ud;
    if (r->id >= 0 && r->id < MAXR) { x->ttft[r->id] = r->ttft; x->e2e[r->id] = r->e2e; }
    x->n++;
    return 0;
}

static int one_second(void *ctx, const sim_batch *b, double *seconds, char *err, size_t n)
{
    (void)ctx; (void)b; (void)err; (void)n;
    *seconds = 1.0;
    return 0;
}

static long pool_blocks;   /* the pool each run gets (the watermark, blocks / 100, is 0) */
static long pool(void *ctx, int replica)
{
    (void)ctx; (void)replica;
    return pool_blocks;
}

/* The scheduler of the runs below, and the engine's chunked_prefill entry (continuous by
 * default; the chunked test sets both). */
static const char *scheduler = "continuous", *chunking = "";

/* Runs `trace` on an engine whose admission is `admission` (a YAML map, or "" for none) with a
 * pool of `blocks` 16-token blocks, per step and fast-forwarded; checks the two agree and
 * returns the fast-forwarded run's rows. */
static void run(const char *trace_csv, const char *admission, long blocks, int want_n, rows *x)
{
    const char *trace = t_write("reserve-trace.csv", trace_csv);
    char text[1400];
    snprintf(text, sizeof text,
             "model: llama-3-8b\nhardware: h100-sxm\n"
             "engine: {name: t, cpu: {step: 0 ms}%s%s%s}\n"
             "workload:\n  arrival: {process: trace, trace: '%s'}\n"
             "options: {kv_layout: paged, block_size: 16, prefix_cache: off, scheduler: %s}\n",
             chunking, admission[0] ? ", admission: " : "", admission, trace, scheduler);
    static scn_scenario s;
    scn_error e;
    ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s\n%s", e.msg, text);
    sim_choice c = sim_choice_first(&s);
    pool_blocks = blocks;
    rows y[2];
    sim_metrics m[2];
    for (int ff = 0; ff < 2; ff++) {
        sim_executor ex = {.name = "one-second", .run = one_second, .kv_blocks = pool};
        memset(&y[ff], 0, sizeof y[ff]);
        sim_run_opts o = {.seed = 1, .on_request = on_row, .ud = &y[ff], .per_step = ff == 0};
        char err[512];
        ck_assert_msg(sim_run(&s, &c, &ex, &o, &m[ff], err, sizeof err) == SIM_OK, "%s", err);
        ck_assert_int_eq(y[ff].n, want_n);
        y[ff].preempted = m[ff].preemptions;
    }
    for (int i = 0; i < want_n; i++) {
        ck_assert_msg(y[0].ttft[i] == y[1].ttft[i] && y[0].e2e[i] == y[1].e2e[i], "request %d: per step %g/%g, fast %g/%g",
                      i, y[0].ttft[i], y[0].e2e[i], y[1].ttft[i], y[1].e2e[i]);
    }
    ck_assert_int_eq(m[0].steps, m[1].steps);
    *x = y[1];
    x->preempted = m[1].preemptions;
}

/* SGLang's figures as the `sglang` profile gives them, and a fast decay for the tests below. */
#define SGLANG "{reserve: output, init_ratio: 0.7, min_ratio: 0.098, decay_steps: 600, clip: 4096, retract_steps: 20}"
#define FAST "{reserve: output, init_ratio: 0.7, min_ratio: 0.1, decay_steps: 6, clip: 4096, retract_steps: 20}"

START_TEST(reserve_refuses_what_fill_admits)
{
    /* A: 64-token prompt, 16 out (80 tokens: positions 0-78, 5 blocks); B at 0.5: 16 + 40
     * (positions 0-54, 4 blocks); a pool of 9 blocks holds both, so nothing is ever preempted.
     * Fill: 0-1 prefills A (A's 4 blocks; token 1 at 1). At 1 B needs 1 block of the 5 free:
     * 1-2 prefills B (TTFT 2 - 0.5 = 1.5); from 2 both decode, A's tokens 2..16 at 3..17 (E2E
     * 17), B's tokens 2..40 at 3..41 (E2E 40.5).
     * Reservation: at 1, rem = 5 free blocks x 16 = 80 - 0.7 x A's 15 tokens left (10.5) =
     * 69.5, and B asks 16 + 40 + a page of 16 = 72 >= 69.5: refused (without the ratio's term,
     * 72 < 80 would be admitted). From 2 A holds 5 blocks (position 64): 4 free = 64 < 72,
     * refused whatever the ratio, until A ends at 16 (tokens 1..16 at 1..16). 16-17 prefills B
     * (TTFT 16.5), its tokens 2..40 at 18..56 (E2E 55.5). */
    const char *trace = "arrival_s,prompt_tokens,output_tokens\n0.0,64,16\n0.5,16,40\n";
    rows x;
    run(trace, "", 9, 2, &x);
    ck_assert_double_eq_tol(x.ttft[0], 1.0, 1e-12);
    ck_assert_double_eq_tol(x.e2e[0], 17.0, 1e-12);
    ck_assert_double_eq_tol(x.ttft[1], 1.5, 1e-12);
    ck_assert_double_eq_tol(x.e2e[1], 40.5, 1e-12);
    ck_assert_int_eq(x.preempted, 0);
    run(trace, SGLANG, 9, 2, &x);
    ck_assert_double_eq_tol(x.ttft[0], 1.0, 1e-12);
    ck_assert_double_eq_tol(x.e2e[0], 16.0, 1e-12);
    ck_assert_double_eq_tol(x.ttft[1], 16.5, 1e-12);
    ck_assert_double_eq_tol(x.e2e[1], 55.5, 1e-12);
    ck_assert_int_eq(x.preempted, 0);
}
END_TEST

/* A: 64 + 40 (positions 0-102, 7 blocks), holding 5 blocks from 2 to 17 (position 80 at the
 * step that starts at 18); B at 2.5: 16 + 33 (positions 0-47, 3 blocks); a pool of 10 blocks
 * holds both. With the ratio falling 0.1 a decode step (FAST: (0.7 - 0.1) / 6), the decode
 * steps formed at 1 and 2 leave 0.5 at 3, and B asks 16 + 33 + 16 = 65 of rem = 5 x 16 - r x
 * A's tokens left: at 3, 80 - 0.5 x 37 = 61.5 (refused); at 4, 80 - 0.4 x 36 = 65.6 (admitted).
 * 4-5 prefills B (TTFT 5 - 2.5 = 2.5; a prefill step leaves the ratio), A's tokens 5..40 at
 * 6..41 (E2E 41), B's 2..33 at 6..37 (E2E 34.5). */
#define DECAY_TRACE "arrival_s,prompt_tokens,output_tokens\n0.0,64,40\n2.5,16,33\n"

START_TEST(reserve_ratio_decays_each_decode_step)
{
    rows x;
    run(DECAY_TRACE, FAST, 10, 2, &x);
    ck_assert_double_eq_tol(x.ttft[0], 1.0, 1e-12);
    ck_assert_double_eq_tol(x.e2e[0], 41.0, 1e-12);
    ck_assert_double_eq_tol(x.ttft[1], 2.5, 1e-12);
    ck_assert_double_eq_tol(x.e2e[1], 34.5, 1e-12);
    ck_assert_int_eq(x.preempted, 0);
    /* With SGLang's slow decay the ratio is still 0.7 - 16 x 0.001003 = 0.684 at 17, where
     * rem = 80 - 0.684 x 23 = 64.3 < 65; from 18 A holds 6 blocks (64 < 65): B waits for A's
     * end at 40. 40-41 prefills B (TTFT 38.5), its tokens 2..33 at 42..73 (E2E 70.5). */
    run(DECAY_TRACE, SGLANG, 10, 2, &x);
    ck_assert_double_eq_tol(x.e2e[0], 40.0, 1e-12);
    ck_assert_double_eq_tol(x.ttft[1], 38.5, 1e-12);
    ck_assert_double_eq_tol(x.e2e[1], 70.5, 1e-12);
}
END_TEST

START_TEST(reserve_ratio_resets_on_idle)
{
    /* A alone (0-40) drives the ratio to its floor 0.1 in 6 decode steps; the replica then idles
     * (nothing to run at 40), which resets it to 0.7. The decay test's pair again from 50: A2
     * at 50 (prefill 50-51), B at 52.5; decode steps at 51 and 52 leave 0.5 at 53 (refused,
     * 61.5 < 65) and 0.4 at 54 (admitted): B's TTFT 55 - 52.5 = 2.5. Had the ratio stayed at
     * 0.1, rem at 53 = 80 - 0.1 x 37 = 76.3 would have admitted B then (TTFT 1.5). */
    rows x;
    run("arrival_s,prompt_tokens,output_tokens\n0.0,64,40\n50.0,64,40\n52.5,16,33\n", FAST, 10, 3, &x);
    ck_assert_double_eq_tol(x.e2e[0], 40.0, 1e-12);
    ck_assert_double_eq_tol(x.ttft[1], 1.0, 1e-12);
    ck_assert_double_eq_tol(x.ttft[2], 2.5, 1e-12);
    ck_assert_double_eq_tol(x.e2e[2], 34.5, 1e-12);
}
END_TEST

START_TEST(reserve_decay_arithmetic)
{
    /* sim_sched_decay on its own: SGLang's figures fall by (0.7 - 0.098) / 600 = 0.0010033 a
     * step: 0.7 - 300 x 0.0010033 = 0.399 after 300, the floor 0.098 after 600 and every step
     * past it. */
    static scn_scenario s;
    memset(&s, 0, sizeof s);
    s.engine.adm_reserve = true;
    s.engine.adm_init = 0.7;
    s.engine.adm_min = 0.7 * 0.14;
    s.engine.adm_decay_steps = 600;
    sim_sched q;
    memset(&q, 0, sizeof q);
    q.s = &s;
    sim_replica rep;
    memset(&rep, 0, sizeof rep);
    ck_assert_double_eq(sim_sched_ratio(&q, &rep), 0.7);
    for (int i = 0; i < 300; i++) sim_sched_decay(&q, &rep);
    ck_assert_double_eq_tol(sim_sched_ratio(&q, &rep), 0.399, 1e-9);
    for (int i = 0; i < 300; i++) sim_sched_decay(&q, &rep);
    ck_assert_double_eq_tol(sim_sched_ratio(&q, &rep), 0.098, 1e-9);
    sim_sched_decay(&q, &rep);
    ck_assert_double_eq(sim_sched_ratio(&q, &rep), 0.7 * 0.14);
}
END_TEST

START_TEST(reserve_binds_and_refuses_bad_values)
{
    /* The SGLang profiles reserve (0.098 floor from 0.5: 0.7 x 0.14; v0.3's GlobalConfig 0.1);
     * vLLM and TensorRT-LLM do not. */
    static scn_scenario s;
    scn_error e;
    static const char *const names[] = {"sglang", "sglang-0.5.4", "sglang-v0.3", "vllm", "trtllm"};
    static const double floor_[] = {0.098, 0.098, 0.1, 0, 0};
    for (int i = 0; i < 5; i++) {
        char text[256];
        snprintf(text, sizeof text, "model: llama-3-8b\nhardware: h100-sxm\nengine: %s\nworkload:\n  arrival: "
                                    "{process: poisson, rate: 1/s}\n  prompt_tokens: 10\n  output_tokens: 10\n", names[i]);
        ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s: %s", names[i], e.msg);
        ck_assert_msg(s.engine.adm_reserve == (floor_[i] > 0), "%s: reserve %d", names[i], (int)s.engine.adm_reserve);
        if (floor_[i] > 0) {
            ck_assert_double_eq_tol(s.engine.adm_min, floor_[i], 1e-12);
            ck_assert_double_eq_tol(s.engine.adm_init, 0.7, 1e-12);
            ck_assert_int_eq(s.engine.adm_decay_steps, 600);
            ck_assert_int_eq(s.engine.adm_clip, 4096);
            ck_assert_int_eq(s.engine.adm_retract_steps, 20);
        }
    }
    /* Bad values are refused at the field, with its location (line 3). */
    static const struct { const char *adm, *field; } bad[] = {
        {"{reserve: output, init_ratio: 0.5, min_ratio: 0.6, decay_steps: 600, clip: 4096, retract_steps: 20}", "min_ratio"},
        {"{reserve: output, init_ratio: 0.7, min_ratio: 0.1, decay_steps: 0, clip: 4096, retract_steps: 20}", "decay_steps"},
        {"{reserve: output, init_ratio: 0.7, min_ratio: 0.1, decay_steps: 600, clip: -1, retract_steps: 20}", "clip"},
        {"{reserve: some, init_ratio: 0.7, min_ratio: 0.1, decay_steps: 600, clip: 4096, retract_steps: 20}", "reserve"},
        {"{reserve: output, init_ratio: 0, min_ratio: 0, decay_steps: 600, clip: 4096, retract_steps: 20}", "init_ratio"},
        {"{reserve: output, init_ratio: 0.7, min_ratio: 0.1, clip: 4096, retract_steps: 20}", "admission"},
        {"{reserve: output, init_ratio: 0.7, min_ratio: 0.1, decay_steps: 600, clip: 4096, retract_step: 20}",
         "retract_step"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, "model: llama-3-8b\nhardware: h100-sxm\n"
                                    "engine: {name: x, admission: %s}\n"
                                    "workload:\n  arrival: {process: poisson, rate: 1/s}\n  prompt_tokens: 10\n"
                                    "  output_tokens: 10\n", bad[i].adm);
        ck_assert_msg(t_load(text, NULL, 0, &s, &e) != SCN_OK, "accepted %s", bad[i].adm);
        ck_assert_msg(strstr(e.path, bad[i].field) && e.line == 3 && e.col > 0, "%s:%d:%d: %s", e.path, e.line, e.col,
                      e.msg);
    }
    /* Two admission rules on one engine are refused. */
    const char *both = "model: llama-3-8b\nhardware: h100-sxm\n"
                       "engine: {name: x, cpu: {no_evict: true}, admission: " SGLANG "}\n"
                       "workload:\n  arrival: {process: poisson, rate: 1/s}\n  prompt_tokens: 10\n  output_tokens: 10\n";
    ck_assert_int_ne(t_load(both, NULL, 0, &s, &e), SCN_OK);
    ck_assert_msg(strstr(e.path, "reserve") && strstr(e.msg, "no_evict"), "%s: %s", e.path, e.msg);
}
END_TEST

START_TEST(reserve_gates_a_chunked_prompt_on_its_whole_extend)
{
    /* SGLang's PrefillAdder.add_one_req computes total_tokens from the request's whole extend
     * (len(fill_ids) - prefix, before it truncates the prompt to the chunk: `full_untruncated_
     * fill_ids` in 0.5's schedule_policy.py) + min(max_new_tokens, 4096) (+ a page) and refuses
     * when that reaches rem_total_tokens, even when only a chunk then runs.
     * Separate chunked steps of 32 tokens, a pool of 8 blocks. A: 16 + 40 (0-1 prefills A's one
     * block; token k at k). B at 0.5: 64 + 16. At 1 A holds 1 block: rem = 7 x 16 = 112 - 0.7 x
     * A's 39 left (27.3) = 84.7; B asks its whole 64 + 16 + a page of 16 = 96 >= 84.7: refused
     * (its first chunk, 32 + 16 = 48, would have fitted: the rule before this fix admitted it).
     * From 2 A holds 2 blocks or more: at most 6 free = 96 < 96 + r x left, refused until A ends
     * at 40 (E2E 40). 40-41 and 41-42 prefill B's two chunks: TTFT 42 - 0.5 = 41.5; its tokens
     * 2..16 at 43..57: E2E 56.5. */
    scheduler = "chunked";
    chunking = ", chunked_prefill: {enabled: true, max_num_batched_tokens: 32, mixed: false}";
    rows x;
    run("arrival_s,prompt_tokens,output_tokens\n0.0,16,40\n0.5,64,16\n", SGLANG, 8, 2, &x);
    scheduler = "continuous";
    chunking = "";
    ck_assert_double_eq_tol(x.ttft[0], 1.0, 1e-12);
    ck_assert_double_eq_tol(x.e2e[0], 40.0, 1e-12);
    ck_assert_double_eq_tol(x.ttft[1], 41.5, 1e-12);
    ck_assert_double_eq_tol(x.e2e[1], 56.5, 1e-12);
    ck_assert_int_eq(x.preempted, 0);
}
END_TEST

Suite *suite_reserve(void)
{
    Suite *s = suite_create("reserve");
    TCase *tc = tcase_create("reserve");
    tcase_add_test(tc, reserve_refuses_what_fill_admits);
    tcase_add_test(tc, reserve_ratio_decays_each_decode_step);
    tcase_add_test(tc, reserve_ratio_resets_on_idle);
    tcase_add_test(tc, reserve_decay_arithmetic);
    tcase_add_test(tc, reserve_binds_and_refuses_bad_values);
    tcase_add_test(tc, reserve_gates_a_chunked_prompt_on_its_whole_extend);
    suite_add_tcase(s, tc);
    return s;
}
