/* test_accounting.c: one accounting for KV memory. `kvplan memory`, the simulator and the
 * capacity search size sequences and reservations by the same rules (model/kv_blocks.c), and a
 * StreamingLLM window only ever shrinks what a sequence reserves, under either layout. The edge
 * scenario is the one the planner issue reproduced the collapse with (11,817 preemptions and
 * 22 output tokens/s under contiguous + window, against 0 and 208 without the window). */
#include "tests.h"
#include "../model/kv_blocks.h"
#include "../model/kv_throughput.h"
#include "../sim/kv_manager.h"
#include "../sim/sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const EDGE =
    "name: edge-4090-assistant\nmodel: llama-3-8b\nhardware: rtx-4090\n"
    "deployment: {gpu_memory_utilization: 0.92, max_model_len: 8192, max_num_seqs: 64}\n"
    "workload:\n  requests: 800\n  arrival: {process: poisson, rate: 1/s}\n"
    "  prompt_tokens: {dist: lognormal, mean: 1500, sigma: 0.6, max: 6000}\n"
    "  output_tokens: {dist: lognormal, mean: 300, sigma: 0.6, max: 1200}\n"
    "  conversation: {turns: 3, think_time: 20 s}\n"
    "slo: {ttft_p99: 2 s, tpot_p99: 60 ms}\n";

static int simulate(const scn_scenario *s, const sim_choice *c, sim_metrics *m, char *err)
{
    sim_executor ex;
    ck_assert_int_eq(sim_executor_model(s, c, &ex), 0);
    sim_run_opts o = {.seed = 1};
    int rc = sim_run(s, c, &ex, &o, m, err, 512);
    ex.free(ex.ctx);
    return rc;
}

START_TEST(a_window_never_adds_reservation_or_preemptions)
{
    static scn_scenario s;
    scn_error e;
    ck_assert_int_eq(t_load(EDGE, NULL, 0, &s, &e), SCN_OK);
    for (int paged = 0; paged <= 1; paged++) {
        sim_choice off = sim_choice_first(&s), win;
        off.layout = paged ? SCN_LAYOUT_PAGED : SCN_LAYOUT_CONTIGUOUS;
        off.prefix_cache = false;
        off.window = off.sink = 0;
        win = off;
        win.sink = 4;
        win.window = 2044;
        sim_metrics mo, mw;
        char err[512];
        ck_assert_msg(simulate(&s, &off, &mo, err) == SIM_OK, "%s", err);
        ck_assert_msg(simulate(&s, &win, &mw, err) == SIM_OK, "%s", err);
        ck_assert_msg(mw.preemptions <= mo.preemptions, "%s: %ld preemptions with the window, %ld without",
                      paged ? "paged" : "contiguous", mw.preemptions, mo.preemptions);
        /* Holding less cannot serve fewer tokens per second on the same arrivals. */
        ck_assert_msg(mw.output_tok_per_s >= mo.output_tok_per_s * 0.999, "%g vs %g tokens/s", mw.output_tok_per_s,
                      mo.output_tok_per_s);
        ck_assert(mw.frag_mean >= 0 && mw.frag_mean <= 1 && mo.frag_mean >= 0 && mo.frag_mean <= 1);
    }
    /* Per sequence: the reservation at admission and the space held at every length. */
    kv_cache_cfg c0 = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0), cw = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 4, 2044);
    for (long prompt = 1; prompt < 8000; prompt += 97)
        ck_assert(kv_contiguous_reserve(&s, &cw, prompt, 300, prompt) <= kv_contiguous_reserve(&s, &c0, prompt, 300, prompt));
    for (int paged = 0; paged <= 1; paged++) {
        sim_kv *k0 = sim_kv_init(100000, 16, paged, false, 0, 0), *kw = sim_kv_init(100000, 16, paged, false, 4, 2044);
        sim_kv_seq q0, qw;
        memset(&q0, 0, sizeof q0);
        memset(&qw, 0, sizeof qw);
        if (!paged) {
            ck_assert_int_eq(sim_kv_reserve(k0, &q0, 3000), 0);
            ck_assert_int_eq(sim_kv_reserve(kw, &qw, kv_seq_held(&cw, 3000)), 0);
        }
        for (int pos = 1; pos <= 8000; pos++) {
            ck_assert_int_eq(sim_kv_grow(k0, &q0, pos), 0);
            ck_assert_int_eq(sim_kv_grow(kw, &qw, pos), 0);
            sim_kv_commit(k0, &q0, pos);
            sim_kv_commit(kw, &qw, pos);
            ck_assert_msg(sim_kv_seq_tokens(kw, &qw) <= sim_kv_seq_tokens(k0, &q0), "%s at %d: %ld > %ld",
                          paged ? "paged" : "contiguous", pos, sim_kv_seq_tokens(kw, &qw), sim_kv_seq_tokens(k0, &q0));
            /* The window bounds it: sink + window, plus a block of slack on each side when paged. */
            ck_assert(sim_kv_seq_tokens(kw, &qw) <= 2048 + (paged ? 32 : 0));
        }
        sim_kv_release(k0, &q0); sim_kv_seq_free(&q0);
        sim_kv_release(kw, &qw); sim_kv_seq_free(&qw);
        sim_kv_free(k0);
        sim_kv_free(kw);
    }
}
END_TEST

START_TEST(memory_and_simulator_size_sequences_alike)
{
    /* Fixed lengths make the means exact: every prompt carries the 1000-token prefix; a
     * conversation's turns send 1000 + 500, then + 100 + 500, then + 100 + 500 tokens:
     * 1500, 2100, 2700, a mean of 2100 = 1000 + 500 * (3 + 1) / 2 + 100 * (3 - 1) / 2. */
    static scn_scenario s;
    scn_error e;
    ck_assert_int_eq(t_load("model: llama-3-8b\nhardware: h100-sxm\n"
                            "workload:\n  requests: 300\n  arrival: {process: poisson, rate: 2/s}\n"
                            "  prompt_tokens: 500\n  output_tokens: 100\n"
                            "  shared_prefix: {groups: 2, tokens: 1000, share: 1.0}\n"
                            "  conversation: {turns: 3, think_time: 1 s}\n"
                            "options: {kv_layout: [contiguous], prefix_cache: [off]}\n", NULL, 0, &s, &e), SCN_OK);
    kv_seq_size z = kv_seq_size_of(&s);
    ck_assert(z.known);
    ck_assert(fabs(z.prompt - 2100) < 1e-9 && fabs(z.output - 100) < 1e-9 && fabs(z.held - 2200) < 1e-9);
    ck_assert_int_eq(z.output_max, 100);
    sim_choice c = sim_choice_first(&s);
    sim_metrics m;
    char err[512];
    ck_assert_msg(simulate(&s, &c, &m, err) == SIM_OK, "%s", err);
    ck_assert_int_eq(m.requests, 300);
    /* The simulator's prompts average what memory assumes. */
    ck_assert(fabs(m.input_tok_per_s / m.req_per_s - z.prompt) < 1e-6);
    kv_cache_cfg cfg = kv_cache_cfg_make(&s, c.kv_dtype, 0, 0);
    kv_capacity k = kv_capacity_compute(&s, &cfg, 16, 0);
    ck_assert(fabs(k.mean_tokens - 2200) < 1e-9);
    /* Contiguous: prompt + the most a request may generate (fixed 100), as the simulator reserves. */
    ck_assert_int_eq(k.reserve_contiguous, 2200);
    ck_assert_int_eq(k.max_seqs_contiguous, k.capacity_tokens / 2200);
    /* One request alone: the simulator's peak reservation is exactly that rule's. */
    const char *one[] = {"workload.requests=1", "workload.conversation.turns=1"};
    ck_assert_int_eq(t_load("model: llama-3-8b\nhardware: h100-sxm\nworkload:\n  requests: 1\n"
                            "  arrival: {process: constant, rate: 1/s}\n  prompt_tokens: 700\n"
                            "  output_tokens: {dist: uniform, min: 50, max: 400}\n"
                            "options: {kv_layout: [contiguous], prefix_cache: [off]}\n", one, 0, &s, &e), SCN_OK);
    c = sim_choice_first(&s);
    ck_assert_msg(simulate(&s, &c, &m, err) == SIM_OK, "%s", err);
    cfg = kv_cache_cfg_make(&s, c.kv_dtype, 0, 0);
    ck_assert_int_eq(kv_contiguous_reserve(&s, &cfg, 700, 1, 700), 1100);
    ck_assert(fabs(m.kv_util_peak * (double)m.kv_tokens - 1100) < 1e-6);
}
END_TEST

START_TEST(memory_labels_carry_units)
{
    char out[1 << 15], err[4096], cmd[1024];
    snprintf(cmd, sizeof cmd, "memory %s/chat.yaml", getenv("KVPLAN_LIBRARY"));
    ck_assert_int_eq(t_run(cmd, out, sizeof out, err, sizeof err), 0);
    ck_assert_msg(strstr(out, "prompt per request (tokens, shared prefix and history included)  2600"), "%s", out);
    ck_assert(strstr(out, "sequence at its end (tokens)") && strstr(out, "capacity (tokens)") &&
              strstr(out, "capacity (blocks)") && strstr(out, "block (tokens)"));
    ck_assert(!strstr(out, "max_model_len (8192 tokens) per sequence"));
}
END_TEST

START_TEST(saturation_rate_brackets_the_simulated_one)
{
    /* Independent reference: the simulator driven at five times the estimate saturates, and
     * its throughput is what the replica really sustains. */
    static const char *const cases[][2] = {{"chat.yaml", "options.kv_layout=paged"},
                                           {"../bench/splitwise.yaml", "options.kv_layout=paged"},
                                           {"archetypes/edge-gpu.yaml", "options.kv_layout=paged"}};
    static scn_scenario s;
    static kv_seq_work w[1024];
    for (int i = 0; i < 3; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", getenv("KVPLAN_LIBRARY"), cases[i][0]);
        const char *sets[] = {cases[i][1], "options.prefix_cache=off", "workload.requests=2000"};
        scn_error e;
        ck_assert_int_eq(scn_scenario_load(path, sets, 3, &s, &e), SCN_OK);
        sim_choice c = sim_choice_first(&s);
        kv_cache_cfg cfg = kv_cache_cfg_make(&s, c.kv_dtype, c.sink, c.window);
        kv_saturation k = kv_saturation_rate(&s, &cfg, c.attention, true, c.block_size, w, 1024);
        ck_assert(k.rate > 0 && k.batch >= 1 && k.batch <= s.deployment.max_num_seqs);
        s.workload.arrival = SCN_ARRIVAL_POISSON;
        s.workload.rate = 5 * k.rate;
        sim_metrics m;
        char err[512];
        ck_assert_msg(simulate(&s, &c, &m, err) == SIM_OK, "%s", err);
        double ratio = k.rate / m.req_per_s;
        ck_assert_msg(ratio > 0.75 && ratio < 1.35, "%s: estimate %.3f req/s, simulated %.3f req/s", cases[i][0], k.rate,
                      m.req_per_s);
    }
}
END_TEST

Suite *suite_accounting(void)
{
    Suite *s = suite_create("accounting");
    TCase *tc = tcase_create("accounting");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, a_window_never_adds_reservation_or_preemptions);
    tcase_add_test(tc, memory_and_simulator_size_sequences_alike);
    tcase_add_test(tc, memory_labels_carry_units);
    tcase_add_test(tc, saturation_rate_brackets_the_simulated_one);
    suite_add_tcase(s, tc);
    return s;
}
