/* test_hybrid_kv.c: models with sliding-window layers. Windowed layers keep only the blocks
 * covering their window, so per-sequence KV and the pool's capacity count them at
 * min(tokens, window), in `kvplan memory`, the capacity search and the simulator alike
 * (model/kv_blocks.c; docs/cost-model.md, "Capacity"). Every expected value is derived by hand
 * below from the model cards' shapes. */
#include "tests.h"
#include "../model/kv_blocks.h"
#include "../sim/kv_manager.h"
#include "../sim/sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* gpt-oss-120b: 36 layers, 18 with a 128-token window; 8 KV heads of 64 dims in bf16:
 * 2 * 8 * 64 * 2 = 2048 bytes per token per layer. */
#define GOSS_LAYER_TOKEN 2048.0
/* gemma-2-9b: 42 layers, 21 with a 4096-token window; 8 KV heads of 256 dims:
 * 2 * 8 * 256 * 2 = 8192 bytes per token per layer. */
#define GEMMA_LAYER_TOKEN 8192.0
/* mistral-7b: 32 layers, all with a 4096-token window; 8 KV heads of 128 dims:
 * 2 * 8 * 128 * 2 * 32 = 131072 bytes per token over all layers. */
#define MISTRAL_TOKEN 131072.0

static void load(const char *model, const char *extra, scn_scenario *s)
{
    char text[1024];
    snprintf(text, sizeof text,
             "model: %s\nhardware: h200\n"
             "workload:\n  requests: 10\n  arrival: {process: poisson, rate: 1/s}\n"
             "  prompt_tokens: 1000\n  output_tokens: 100\n%s", model, extra);
    scn_error e;
    ck_assert_msg(t_load(text, NULL, 0, s, &e) == SCN_OK, "%s", e.msg);
}

START_TEST(per_sequence_bytes_by_hand)
{
    static scn_scenario s;
    load("gpt-oss-120b", "", &s);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    /* 8192 tokens, blocks of 16: full layers 18 * 8192 tokens; windowed layers the 8 blocks
     * (128 tokens) covering the last 128 positions. The reviewer's 292.5 MiB. */
    kv_capacity k = kv_capacity_compute(&s, &c, 16, 8192);
    double want = GOSS_LAYER_TOKEN * (18.0 * 8192 + 18.0 * 128);
    ck_assert_msg(fabs(k.seq_bytes_paged - want) < 0.5, "%.0f vs %.0f", k.seq_bytes_paged, want);
    ck_assert(fabs(want - 292.5 * 1048576) < 0.5);
    /* Not block-aligned, 8200 tokens: 513 blocks; the last 128 positions [8072, 8200) span
     * blocks 504..512, nine of them. */
    k = kv_capacity_compute(&s, &c, 16, 8200);
    want = GOSS_LAYER_TOKEN * 16 * (18.0 * 513 + 18.0 * 9);
    ck_assert_msg(fabs(k.seq_bytes_paged - want) < 0.5, "%.0f vs %.0f", k.seq_bytes_paged, want);
    /* Paged capacity: the pool's blocks of every layer hold 36 layer-blocks each; a sequence
     * takes 18 * (513 + 9) of them. */
    ck_assert_int_eq(k.max_seqs_paged, (long)(k.capacity_blocks * 36 / (18 * 522)));
    /* Contiguous: 8199 prompt tokens + the fixed 100 output = 8299 reserved on the full
     * layers, a ring of 128 on the windowed ones. */
    ck_assert_int_eq(k.reserve_contiguous, 8299);
    want = GOSS_LAYER_TOKEN * (18.0 * 8299 + 18.0 * 128);
    ck_assert_msg(fabs(k.seq_bytes_contiguous - want) < 0.5, "%.0f vs %.0f", k.seq_bytes_contiguous, want);
    ck_assert_int_eq(k.max_seqs_contiguous, (long)(k.capacity_tokens * 36 / (18 * (8299 + 128))));

    load("gemma-2-9b", "", &s);
    c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    /* 6000 tokens = 375 blocks; the last 4096 positions [1904, 6000) span blocks 119..374,
     * 256 blocks = 4096 tokens. 21 * 8192 * (6000 + 4096) bytes. */
    k = kv_capacity_compute(&s, &c, 16, 6000);
    want = GEMMA_LAYER_TOKEN * 21 * (6000.0 + 4096);
    ck_assert_msg(fabs(k.seq_bytes_paged - want) < 0.5, "%.0f vs %.0f", k.seq_bytes_paged, want);
    ck_assert(fabs(want - 1736835072.0) < 0.5);
    /* Contiguous: 5999 + 100 = 6099 tokens; the windowed ring holds 4096. */
    want = GEMMA_LAYER_TOKEN * 21 * (6099.0 + 4096);
    ck_assert_msg(fabs(k.seq_bytes_contiguous - want) < 0.5, "%.0f vs %.0f", k.seq_bytes_contiguous, want);
    /* A short sequence is within the window: every layer holds all of it. */
    k = kv_capacity_compute(&s, &c, 16, 1000);
    ck_assert(fabs(k.seq_bytes_paged - GEMMA_LAYER_TOKEN * 42 * 1008) < 0.5);   /* 63 blocks */

    /* Every layer windowed: a sequence keeps its last 4096 positions, no more. */
    load("mistral-7b", "deployment: {max_model_len: 16384}\n", &s);
    c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    k = kv_capacity_compute(&s, &c, 16, 6000);
    ck_assert_msg(fabs(k.seq_bytes_paged - MISTRAL_TOKEN * 4096) < 0.5, "%.0f", k.seq_bytes_paged);
    ck_assert_int_eq(k.reserve_contiguous, 4096);
    ck_assert_int_eq(k.max_seqs_paged, k.capacity_blocks / 256);
    /* A StreamingLLM window smaller than the model's still rules. */
    c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 4, 1020);
    k = kv_capacity_compute(&s, &c, 16, 6000);
    ck_assert(fabs(k.seq_bytes_paged - MISTRAL_TOKEN * 1024) < 0.5);
    ck_assert_int_eq(k.reserve_contiguous, 1024);
}
END_TEST

START_TEST(block_manager_frees_window_layers)
{
    /* gpt-oss's groups in a pool of 1000 blocks of every layer: 36,000 layer-blocks. */
    for (int prefix = 0; prefix <= 1; prefix++) {
        sim_kv *kv = sim_kv_init(1000, 16, true, prefix, 0, 0);
        sim_kv_set_groups(kv, 18, 18, 128);
        ck_assert(sim_kv_windowed(kv));
        /* Sequences of 2000 positions each (125 blocks): admitting one needs all 125 blocks of
         * every layer (125 * 36 = 4500); once computed, the window keeps the 8 blocks covering
         * positions [1872, 2000), so each then holds 18 * 125 + 18 * 8 = 2394. The n-th admission
         * fits while (n - 1) * 2394 + 4500 <= 36000: n <= 14.15, so 14 sequences. */
        sim_kv_seq q[20];
        memset(q, 0, sizeof q);
        int n = 0;
        for (; n < 20; n++) {
            q[n].body_seed = (uint64_t)n + 1;
            if (sim_kv_grow(kv, &q[n], 2000)) break;
            sim_kv_commit(kv, &q[n], 2000);
        }
        ck_assert_int_eq(n, 14);
        /* Held: 14 * 2394 layer-blocks = 33,516, 931 blocks of every layer rounded up. */
        ck_assert_int_eq(sim_kv_referenced(kv), (14 * 2394 + 35) / 36);
        ck_assert_int_eq(sim_kv_total(kv), 1000);
        /* Room left: 36000 - 33516 = 2484 layer-blocks, 69 new blocks of every layer. */
        ck_assert_int_eq(sim_kv_available(kv), 2484 / 36);
        /* Growing one token past a boundary frees one more windowed block and takes a new one. */
        ck_assert_int_eq(sim_kv_grow(kv, &q[0], 2001), 0);
        sim_kv_commit(kv, &q[0], 2001);
        ck_assert_int_eq(sim_kv_referenced(kv), (14 * 2394 + 18 + 35) / 36);
        for (int i = 0; i < 20; i++) { sim_kv_release(kv, &q[i]); sim_kv_seq_free(&q[i]); }
        ck_assert_int_eq(sim_kv_referenced(kv), 0);
        ck_assert_int_eq(sim_kv_available(kv), 1000);
        sim_kv_free(kv);
    }
    /* Every layer windowed (mistral-7b): blocks are freed whole, like a window with no sink. */
    sim_kv *kv = sim_kv_init(1000, 16, true, false, 0, 0);
    sim_kv_set_groups(kv, 0, 32, 4096);
    sim_kv_seq q;
    memset(&q, 0, sizeof q);
    for (int pos = 1; pos <= 10000; pos++) {
        ck_assert_int_eq(sim_kv_grow(kv, &q, pos), 0);
        sim_kv_commit(kv, &q, pos);
        ck_assert_int_eq(sim_kv_seq_tokens(kv, &q), 16 * kv_window_blocks(4096, 16, pos));
    }
    sim_kv_release(kv, &q);
    sim_kv_seq_free(&q);
    sim_kv_free(kv);
    /* Contiguous: the full layers reserve every token, the windowed a ring of 128. 100,000
     * tokens of every layer = 3.6M layer-tokens; 2048 reserved takes 18 * 2048 + 18 * 128. */
    kv = sim_kv_init(100000, 16, false, false, 0, 0);
    sim_kv_set_groups(kv, 18, 18, 128);
    sim_kv_seq c[100];
    memset(c, 0, sizeof c);
    int n = 0;
    while (n < 100 && sim_kv_reserve(kv, &c[n], 2048) == 0) n++;
    ck_assert_int_eq(n, 3600000 / (18 * 2048 + 18 * 128));   /* 91 */
    for (int i = 0; i < 100; i++) sim_kv_release(kv, &c[i]);
    ck_assert_int_eq(sim_kv_referenced(kv), 0);
    sim_kv_free(kv);
}
END_TEST

static long peak_batch(const scn_scenario *s, long blocks)
{
    sim_choice c = sim_choice_first(s);
    sim_executor ex;
    ck_assert_int_eq(sim_executor_model(s, &c, &ex), 0);
    sim_run_opts o = {.seed = 1, .kv_blocks_override = blocks};
    sim_metrics m;
    char err[512];
    int rc = sim_run(s, &c, &ex, &o, &m, err, sizeof err);
    ex.free(ex.ctx);
    ck_assert_msg(rc == SIM_OK, "%s", err);
    ck_assert_int_eq(m.preemptions, 0);
    return m.batch_max;
}

/* Every request arrives at once with a 16-token prompt and 2032 fixed output tokens: a
 * contiguous allocator reserves 16 + 2032 = 2048 tokens at admission, none finishes before the
 * pool is full, so the peak batch is the number of reservations the pool holds. */
static const char *const CONTIG =
    "deployment: {max_num_seqs: 512}\n"
    "options: {kv_layout: [contiguous], prefix_cache: [off]}\n";

START_TEST(simulation_admits_hand_computed_count)
{
    static scn_scenario s;
    char text[1024];
    snprintf(text, sizeof text,
             "model: gpt-oss-120b\nhardware: h200\n"
             "workload:\n  requests: 200\n  arrival: {process: constant, rate: 100000/s}\n"
             "  prompt_tokens: 16\n  output_tokens: 2032\n%s", CONTIG);
    scn_error e;
    ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s", e.msg);
    /* 100,000 tokens of every layer: 36 * 100000 layer-tokens over 18 * 2048 + 18 * 128 a
     * sequence = 91 sequences; counting every layer at 2048 would give 100000 / 2048 = 48. */
    ck_assert_int_eq(peak_batch(&s, 100000), 91);
    s.model.sliding_layers = 0;
    s.model.sliding_window = 0;
    ck_assert_int_eq(peak_batch(&s, 100000), 48);
}
END_TEST

START_TEST(memory_and_simulator_agree)
{
    /* The simulator's pool is the one capacity computes; its peak contiguous batch is memory's
     * max concurrent sequences. gpu_memory_utilization keeps the pool small. */
    static scn_scenario s;
    char text[1024];
    snprintf(text, sizeof text,
             "model: gemma-2-9b\nhardware: h200\n"
             "deployment: {max_num_seqs: 1024, gpu_memory_utilization: 0.2}\n"
             "workload:\n  requests: 300\n  arrival: {process: constant, rate: 100000/s}\n"
             "  prompt_tokens: 16\n  output_tokens: 6000\n"
             "options: {kv_layout: [contiguous], prefix_cache: [off]}\n");
    scn_error e;
    ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s", e.msg);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_capacity k = kv_capacity_compute(&s, &c, 1, 0);
    ck_assert_int_eq(k.reserve_contiguous, 6016);
    /* By hand: 42 * capacity_tokens layer-tokens over 21 * 6016 + 21 * 4096 a sequence. */
    long want = k.capacity_tokens * 42 / (21 * (6016 + 4096));
    ck_assert_int_eq(k.max_seqs_contiguous, want);
    ck_assert_msg(want > 1 && want < 300, "%ld", want);
    ck_assert_int_eq(peak_batch(&s, 0), want);
}
END_TEST

START_TEST(memory_reports_window_layers)
{
    /* `kvplan memory` on gpt-oss-120b at 8192 tokens: 2048 B * (18 * 8192 + 18 * 128) =
     * 306,708,480 bytes per sequence (292.5 MiB), not 36 * 8192 * 2048 = 603,979,776. */
    char out[1 << 15], err[4096], cmd[1024];
    snprintf(cmd, sizeof cmd,
             "memory %s/chat.yaml --set model=gpt-oss-120b --set hardware=h200 --set options.kv_dtype=bf16 "
             "--set options.kv_layout=paged --context 8192 --format csv", getenv("KVPLAN_LIBRARY"));
    ck_assert_int_eq(t_run(cmd, out, sizeof out, err, sizeof err), 0);
    ck_assert_msg(strstr(out, "bf16,off,paged,16,73728,8192,306708480,"), "%s", out);
    /* The same sequence in the simulator's block manager: 18 * 512 + 18 * 8 layer-blocks, or
     * 9360 / 36 = 260 blocks of every layer, 260 * 16 * 73728 bytes = the same figure. */
    sim_kv *kv = sim_kv_init(100000, 16, true, false, 0, 0);
    sim_kv_set_groups(kv, 18, 18, 128);
    sim_kv_seq q;
    memset(&q, 0, sizeof q);
    ck_assert_int_eq(sim_kv_grow(kv, &q, 8192), 0);
    sim_kv_commit(kv, &q, 8192);
    ck_assert_int_eq(sim_kv_referenced(kv), 260);
    ck_assert(fabs(260.0 * 16 * 73728 - 306708480.0) < 0.5);
    sim_kv_release(kv, &q);
    sim_kv_seq_free(&q);
    sim_kv_free(kv);
}
END_TEST

Suite *suite_hybrid_kv(void)
{
    Suite *s = suite_create("hybrid_kv");
    TCase *tc = tcase_create("hybrid_kv");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, per_sequence_bytes_by_hand);
    tcase_add_test(tc, block_manager_frees_window_layers);
    tcase_add_test(tc, simulation_admits_hand_computed_count);
    tcase_add_test(tc, memory_and_simulator_agree);
    tcase_add_test(tc, memory_reports_window_layers);
    suite_add_tcase(s, tc);
    return s;
}
