/* test_frag.c: fragmentation with sliding-window layers. A sequence's KV space is the blocks (or
 * reservation) each layer kind occupies; what it keeps is every computed position in full
 * layers and only the last `window` in windowed ones (docs/simulator.md, "Fragmentation").
 * Expected values are derived by hand below; the run-level check is the metric's range. */
#include "tests.h"
#include "../sim/kv_manager.h"
#include "../sim/sim.h"

#include <stdio.h>
#include <string.h>

/* Grows q to `pos` positions and commits them, as the scheduler does after a step. */
static void fill(sim_kv *kv, sim_kv_seq *q, int pos)
{
    ck_assert_int_eq(sim_kv_grow(kv, q, pos), 0);
    sim_kv_commit(kv, q, pos);
}

START_TEST(terms_by_hand)
{
    long space, held;
    sim_kv_seq q;

    /* Every layer windowed, window 32 = 2 blocks of 16; 50 positions computed. Blocks 0..3 hold
     * [0, 64); the commit at 50 frees block j once (j + 1) * 16 <= 50 - 32 = 18: block 0 only.
     * Space 3 blocks = 48 tokens, kept the last 32: 16 unused, fragmentation 1/3. (Counting
     * kept as the 50 positions gave 48 - 50 = -2: the negative fragmentation.) */
    sim_kv *kv = sim_kv_init(100, 16, true, false, 0, 0);
    sim_kv_set_groups(kv, 0, 4, 32);
    memset(&q, 0, sizeof q);
    fill(kv, &q, 50);
    sim_kv_frag_terms(kv, &q, 50, &space, &held);
    ck_assert_int_eq(space, 48);
    ck_assert_int_eq(held, 32);
    /* The next decode step (measured as formed, before its commit): position 50 fits block 3. */
    ck_assert_int_eq(sim_kv_grow(kv, &q, 51), 0);
    sim_kv_frag_terms(kv, &q, 51, &space, &held);
    ck_assert_int_eq(space, 48);
    ck_assert_int_eq(held, 32);
    sim_kv_release(kv, &q);
    sim_kv_seq_free(&q);
    sim_kv_free(kv);

    /* One full layer and one windowed (window 32, blocks of 16), 50 positions: the full layer
     * occupies 4 blocks = 64 tokens and keeps 50; the windowed layer's blocks 1..3 = 48 tokens,
     * keeping 32. Layer-tokens: space 64 + 48 = 112, kept 50 + 32 = 82. */
    kv = sim_kv_init(100, 16, true, false, 0, 0);
    sim_kv_set_groups(kv, 1, 1, 32);
    memset(&q, 0, sizeof q);
    fill(kv, &q, 50);
    sim_kv_frag_terms(kv, &q, 50, &space, &held);
    ck_assert_int_eq(space, 112);
    ck_assert_int_eq(held, 82);
    sim_kv_release(kv, &q);
    sim_kv_seq_free(&q);
    sim_kv_free(kv);

    /* The same groups, three full and two windowed layers, with the cache's own sink 16 +
     * window 64, 200 positions (13 blocks). The cache keeps [0, 16) and [136, 200): blocks 1..7
     * go ((j + 1) * 16 <= 136), 6 blocks = 96 tokens remain and full layers keep 16 + 64 = 80.
     * The model window keeps [168, 200) in windowed layers: blocks 10..12 = 48 tokens, all 32
     * kept. Space 3 * 96 + 2 * 48 = 384, kept 3 * 80 + 2 * 32 = 304. */
    kv = sim_kv_init(100, 16, true, false, 16, 64);
    sim_kv_set_groups(kv, 3, 2, 32);
    memset(&q, 0, sizeof q);
    fill(kv, &q, 200);
    sim_kv_frag_terms(kv, &q, 200, &space, &held);
    ck_assert_int_eq(space, 384);
    ck_assert_int_eq(held, 304);
    sim_kv_release(kv, &q);
    sim_kv_seq_free(&q);
    sim_kv_free(kv);

    /* A model window of 190 reaches into the sink: windowed layers keep [10, 200) of what the
     * cache keeps, [10, 16) and [136, 200): 6 + 64 = 70. Full layers keep 80. */
    kv = sim_kv_init(100, 16, true, false, 16, 64);
    sim_kv_set_groups(kv, 1, 1, 190);
    memset(&q, 0, sizeof q);
    fill(kv, &q, 200);
    sim_kv_frag_terms(kv, &q, 200, &space, &held);
    ck_assert_int_eq(held, 80 + 70);
    ck_assert(space >= held);
    sim_kv_release(kv, &q);
    sim_kv_seq_free(&q);
    sim_kv_free(kv);

    /* Contiguous, one full and one windowed layer (window 32): a reservation of 60 tokens
     * takes 60 on the full layer and a ring of 32 on the windowed one; at 50 positions they
     * keep 50 and 32. */
    kv = sim_kv_init(1000, 16, false, false, 0, 0);
    sim_kv_set_groups(kv, 1, 1, 32);
    memset(&q, 0, sizeof q);
    ck_assert_int_eq(sim_kv_reserve(kv, &q, 60), 0);
    sim_kv_frag_terms(kv, &q, 50, &space, &held);
    ck_assert_int_eq(space, 92);
    ck_assert_int_eq(held, 82);
    sim_kv_release(kv, &q);
    sim_kv_free(kv);

    /* No model window: tokens, as sim_kv_seq_tokens and sim_kv_held give them. */
    kv = sim_kv_init(100, 16, true, false, 0, 0);
    memset(&q, 0, sizeof q);
    fill(kv, &q, 50);
    sim_kv_frag_terms(kv, &q, 50, &space, &held);
    ck_assert_int_eq(space, 64);
    ck_assert_int_eq(held, 50);
    sim_kv_release(kv, &q);
    sim_kv_seq_free(&q);
    sim_kv_free(kv);
}
END_TEST

/* Windowed models with contexts past their window, over layouts, block sizes, prefix caching
 * and seeds: the time-weighted fragmentation is a fraction of the space, in [0, 1). */
START_TEST(fraction_over_random_windowed_runs)
{
    static const char *const models[] = {"mistral-7b", "gemma-2-9b", "gpt-oss-20b"};
    static const char *const layouts[][3] = {{"paged", "16", "off"}, {"paged", "16", "on"}, {"paged", "32", "off"},
                                             {"contiguous", "16", "off"}};
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    int runs = 0;
    for (int k = 0; k < 12; k++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        const char *model = models[(x >> 33) % 3];
        const char *const *lay = layouts[(x >> 40) % 4];
        int prompt = 2000 + (int)((x >> 20) % 5000);   /* past the 128- and 4096-token windows */
        int output = 50 + (int)((x >> 12) % 400);
        char text[1400];
        snprintf(text, sizeof text,
                 "model: %s\nhardware: h100-sxm\nseed: %d\n"
                 "deployment: {gpu_memory_utilization: 0.9, max_model_len: 8192}\n"
                 "workload:\n  requests: 40\n  arrival: {process: poisson, rate: 4/s}\n"
                 "  prompt_tokens: {dist: lognormal, mean: %d, sigma: 0.5, max: 6000}\n"
                 "  output_tokens: {dist: lognormal, mean: %d, sigma: 0.5, max: 2000}\n"
                 "options: {kv_layout: %s, block_size: %s, prefix_cache: %s, scheduler: continuous}\n",
                 model, k + 1, prompt, output, lay[0], lay[1], lay[2]);
        static scn_scenario s;
        scn_error e;
        ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s\n%s", e.msg, text);
        sim_choice c = sim_choice_first(&s);
        sim_executor ex;
        ck_assert_int_eq(sim_executor_model(&s, &c, &ex), 0);
        sim_run_opts o = {.seed = s.seed};
        sim_metrics m;
        char err[512];
        int rc = sim_run(&s, &c, &ex, &o, &m, err, sizeof err);
        ex.free(ex.ctx);
        ck_assert_msg(rc == SIM_OK, "%s\n%s", err, text);
        ck_assert_msg(m.frag_mean >= 0 && m.frag_mean < 1, "fragmentation %.6f\n%s", m.frag_mean, text);
        runs++;
    }
    ck_assert_int_eq(runs, 12);
}
END_TEST

Suite *suite_frag(void)
{
    Suite *s = suite_create("frag");
    TCase *tc = tcase_create("frag");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, terms_by_hand);
    tcase_add_test(tc, fraction_over_random_windowed_runs);
    suite_add_tcase(s, tc);
    return s;
}
