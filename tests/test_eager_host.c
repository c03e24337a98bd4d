/* test_eager_host.c: the host's walk of a forward an engine launches eagerly from Python
 * (model/kv_host.c; docs/cost-model.md, "Engine profiles", "Eager forward on the host"). The
 * walk is worked by hand from the profiles' figure: SGLang's eager batch-1 decode step of
 * Llama-3-8B took 8.23 ms over its 32 layers (sgl-project/sglang PR #1401), 257 us a layer, so
 * 32 x 257 us = 8.224 ms for any 32-layer model and 80 x 257 us = 20.56 ms for Llama-3.1-70B. */
#include "tests.h"
#include "../model/kv_model.h"

#include <math.h>
#include <string.h>

static const double WALK_8B = 32 * 257e-6;   /* s: Llama-3-8B's 32 layers at 257 us */

/* One prefill of `tokens` tokens under `engine`, Llama-3-8B on one H100. */
static kv_step_cost prefill_step(const char *engine, long tokens, scn_scenario *s)
{
    t_library_engine("llama-3-8b", "h100-sxm", engine, s);
    kv_cache_cfg c = kv_cache_cfg_make(s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w = {tokens, 0};
    return kv_step_time(s, &c, SCN_ATTN_FLASH, &w, 1);
}

START_TEST(sglang_profiles_carry_the_walk)
{
    /* 257 us a layer in both SGLang profiles; engines without a figure walk for nothing. */
    scn_scenario s;
    const char *with[] = {"sglang", "sglang-v0.3"};
    for (int i = 0; i < 2; i++) {
        t_library_engine("llama-3-8b", "h100-sxm", with[i], &s);
        ck_assert_double_eq_tol(s.engine.eager_layer, 257e-6, 1e-15);
        ck_assert_double_eq_tol(kv_eager_host_seconds(&s, false), WALK_8B, 1e-15);
        ck_assert(kv_eager_host_seconds(&s, true) == 0);
    }
    const char *without[] = {"vllm", "trtllm", "trtllm-v0", "bare"};
    for (int i = 0; i < 4; i++) {
        t_library_engine("llama-3-8b", "h100-sxm", without[i], &s);
        ck_assert(s.engine.eager_layer == 0);
        ck_assert(kv_eager_host_seconds(&s, false) == 0);
    }
}
END_TEST

START_TEST(host_term_by_hand)
{
    /* Serial: cpu + max(0, host - gpu). One step ahead: max(0, cpu + host - gpu). In ms. */
    ck_assert_double_eq_tol(kv_step_host_term(5, 1, 8, false), 4, 1e-12);   /* 1 + (8 - 5) */
    ck_assert_double_eq_tol(kv_step_host_term(5, 1, 8, true), 4, 1e-12);    /* 1 + 8 - 5 */
    ck_assert_double_eq_tol(kv_step_host_term(10, 1, 8, false), 1, 1e-12);  /* walk hidden */
    ck_assert_double_eq_tol(kv_step_host_term(10, 1, 8, true), 0, 1e-12);   /* all hidden */
    ck_assert_double_eq_tol(kv_step_host_term(8.5, 1, 8, true), 0.5, 1e-12);
    /* Without a walk, the forms the profiles had before: cpu serial, max(0, cpu - gpu) ahead. */
    ck_assert_double_eq_tol(kv_step_host_term(5, 1, 0, false), 1, 1e-12);
    ck_assert_double_eq_tol(kv_step_host_term(0.5, 1, 0, true), 0.5, 1e-12);
}
END_TEST

START_TEST(short_prefill_waits_for_the_walk)
{
    /* A 16-token prefill of Llama-3-8B on an H100 streams 16 GB of weights, about 6 ms, under
     * the 8.224 ms walk: the serial sglang-v0.3 step is the walk plus its scheduling work. */
    scn_scenario s;
    kv_step_cost r = prefill_step("sglang-v0.3", 16, &s);
    ck_assert(!r.graph);
    ck_assert_double_eq_tol(r.host_seconds, WALK_8B, 1e-15);
    ck_assert_msg(r.gpu_seconds < WALK_8B, "GPU %.6g s should be under the walk", r.gpu_seconds);
    ck_assert_double_eq_tol(r.seconds, WALK_8B + r.cpu_seconds, 1e-12);
    ck_assert_double_eq_tol(r.op[KV_OP_STEP].seconds, r.cpu_seconds + WALK_8B - r.gpu_seconds, 1e-12);
    ck_assert_int_eq(r.bound, KV_BOUND_OVERHEAD);   /* the host binds, not the weights' stream */
    /* One step ahead (the current sglang profile): max(GPU, scheduling + walk). */
    r = prefill_step("sglang", 16, &s);
    ck_assert_double_eq_tol(r.seconds, fmax(r.gpu_seconds, r.cpu_seconds + WALK_8B), 1e-12);
    /* An engine without the figure is priced as before: GPU plus its serial CPU work. */
    r = prefill_step("vllm", 16, &s);
    ck_assert(r.host_seconds == 0);
    ck_assert_double_eq_tol(r.seconds, r.gpu_seconds + r.cpu_seconds, 1e-12);
}
END_TEST

START_TEST(long_prefill_hides_the_walk)
{
    /* 4096 tokens: 2 x 8e9 x 4096 = 66 TFLOP, tens of ms of GPU; the walk adds nothing. */
    scn_scenario s;
    kv_step_cost r = prefill_step("sglang-v0.3", 4096, &s);
    ck_assert(r.gpu_seconds > 3 * WALK_8B);
    ck_assert_double_eq_tol(r.seconds, r.gpu_seconds + r.cpu_seconds, 1e-12);
    ck_assert_int_eq(r.bound, KV_BOUND_COMPUTE);
}
END_TEST

START_TEST(graph_decode_skips_the_walk)
{
    /* Batch-1 decode replays a captured graph: one launch, no walk. */
    scn_scenario s;
    t_library_engine("llama-3-8b", "h100-sxm", "sglang-v0.3", &s);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w = {1, 500};
    kv_step_cost r = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    ck_assert(r.graph);
    ck_assert(r.host_seconds == 0);
    ck_assert_double_eq_tol(r.op[KV_OP_STEP].seconds, s.engine.graph_launch + r.cpu_seconds, 1e-15);
}
END_TEST

START_TEST(eager_decode_plan_matches_the_step)
{
    /* Decode above the largest captured size (160) runs eagerly and walks: the simulator's
     * closed form over row sums (kv_decode_plan_seconds) prices it as kv_step_time does. Llama-3-8B,
     * 200 rows of 100-token contexts, sums formed by hand from their definition in kv_model.h. */
    scn_scenario s;
    t_library_engine("llama-3-8b", "h100-sxm", "sglang-v0.3", &s);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    enum { N = 200 };
    static kv_seq_work w[N];
    for (int i = 0; i < N; i++) w[i] = (kv_seq_work){1, 100 + i % 7};
    ck_assert(kv_decode_sums_exact(&s, &c, SCN_ATTN_FLASH, N, 4096));
    kv_decode_sums d = {{0, 0}, {0, 0}};
    double split_cap = kv_decode_split_cap(&s, N);
    for (int i = 0; i < N; i++) {
        d.keys[0] += (double)(w[i].context + 1);
        d.splits[0] += kv_decode_split((double)(w[i].context + 1), split_cap);
    }
    kv_step_cost want = kv_step_time(&s, &c, SCN_ATTN_FLASH, w, N), shape;
    ck_assert(!want.graph);
    ck_assert_double_eq_tol(want.host_seconds, WALK_8B, 1e-15);
    kv_step_shape(&s, NULL, w, N, &shape);
    kv_decode_plan plan;
    kv_decode_plan_make(&shape, &s, &c, N, &plan);
    ck_assert_msg(kv_decode_plan_seconds(&plan, &d) == want.seconds, "plan %.17g, step %.17g",
                  kv_decode_plan_seconds(&plan, &d), want.seconds);
    ck_assert_double_eq_tol(want.seconds, fmax(want.gpu_seconds, WALK_8B) + want.cpu_seconds, 1e-12);
}
END_TEST

START_TEST(profile_field_is_a_time)
{
    /* A bare number where a time is required is refused with its place. */
    const char *text = "model: llama-3-8b\nhardware: h100-sxm\nengine: {name: x, cpu: {step: 1 ms, eager_layer: 257}}\n"
                       "workload:\n  arrival: {process: poisson, rate: 1/s}\n  prompt_tokens: 10\n  output_tokens: 10\n";
    scn_scenario s;
    scn_error e;
    ck_assert_int_ne(t_load(text, NULL, 0, &s, &e), SCN_OK);
    char msg[1024];
    scn_error_format(&e, msg, sizeof msg);
    ck_assert_msg(strstr(msg, "eager_layer") != NULL && strstr(msg, "has no unit") != NULL, "%s", msg);
}
END_TEST

Suite *suite_eager_host(void)
{
    Suite *su = suite_create("eager_host");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, sglang_profiles_carry_the_walk);
    tcase_add_test(tc, host_term_by_hand);
    tcase_add_test(tc, short_prefill_waits_for_the_walk);
    tcase_add_test(tc, long_prefill_hides_the_walk);
    tcase_add_test(tc, graph_decode_skips_the_walk);
    tcase_add_test(tc, eager_decode_plan_matches_the_step);
    tcase_add_test(tc, profile_field_is_a_time);
    suite_add_tcase(su, tc);
    return su;
}
