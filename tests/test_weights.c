/* test_weights.c: parameter counts against the published counts and hand sums. */
#include "tests.h"
#include "../model/kv_model.h"

#include <math.h>

static scn_scenario s;

START_TEST(llama_dense_counts)
{
    t_library("llama-2-7b", "h100-sxm", &s);
    /* Per layer: 4 * 4096^2 (q, k, v, o) + 3 * 4096 * 11008 (MLP) + 2 * 4096 (norms) = 202383360;
     * x 32 = 6476267520; + 2 * 32000 * 4096 (embedding, LM head) + 4096 (final norm)
     * = 6738415616, the checkpoint's published parameter count. */
    kv_weights w = kv_weights_compute(&s.model, 1);
    ck_assert(w.params_total == 6738415616.0);
    ck_assert(w.bytes_total == 2 * 6738415616.0);
    t_library("llama-3-8b", "h100-sxm", &s);
    /* Per layer: q, o 2 * 4096^2 + k, v 2 * 4096 * 1024 + 3 * 4096 * 14336 + 8192 = 218112000;
     * x 32 = 6979584000; + 2 * 128256 * 4096 + 4096 = 8030261248 ("8.03B"). */
    w = kv_weights_compute(&s.model, 1);
    ck_assert(w.params_total == 8030261248.0);
    ck_assert(w.params_active == w.params_total);
}
END_TEST

START_TEST(mixtral_total_and_active)
{
    t_library("mixtral-8x7b", "h100-sxm", &s);
    /* Per layer: attention 41943040 + 8 experts * 3 * 4096 * 14336 (1409286144) + router 32768 +
     * norms 8192 = 1451270144; x 32 + 262144000 + 4096 = 46702792704 (Mistral AI: "46.7B total").
     * Active: 2 experts instead of 8: 32 * (41943040 + 352321536 + 32768 + 8192) + 262148096
     * = 12879925248 ("12.9B active"). */
    kv_weights w = kv_weights_compute(&s.model, 1);
    ck_assert(w.params_total == 46702792704.0);
    ck_assert(w.params_active == 12879925248.0);
}
END_TEST

START_TEST(deepseek_v2_lite_mla_moe)
{
    t_library("deepseek-v2-lite", "h100-sxm", &s);
    kv_weights w = kv_weights_compute(&s.model, 1);
    /* DeepSeek-V2 paper: V2-Lite has 15.7B total and 2.4B activated parameters. DeepSeek's
     * activated count leaves out the input embedding (a lookup, 102400 * 2048). */
    ck_assert_msg(fabs(w.params_total / 15.7e9 - 1) < 0.01, "total %.4g", w.params_total);
    double active = w.params_active - 102400.0 * 2048;
    ck_assert_msg(fabs(active / 2.4e9 - 1) < 0.03, "active %.4g", active);
    /* Hand sum of one layer's MLA: q 2048*16*192 + kv_a 2048*576 + 512 + kv_b 512*16*256 + o 16*128*2048. */
    ck_assert(w.params_attention == 27.0 * (6291456 + 1179648 + 512 + 2097152 + 4194304));
}
END_TEST

START_TEST(tensor_parallel_shards_all_but_norms)
{
    t_library("llama-3-70b", "h100-sxm", &s);
    kv_weights w1 = kv_weights_compute(&s.model, 1), w8 = kv_weights_compute(&s.model, 8);
    double norm_bytes = (2.0 * 8192 * 80 + 8192) * 2;
    ck_assert(fabs(w8.bytes_per_rank - ((w1.bytes_total - norm_bytes) / 8 + norm_bytes)) < 1);
    ck_assert(w1.bytes_per_rank == w1.bytes_total);
}
END_TEST

START_TEST(tied_embeddings_counted_once)
{
    t_library("gemma-2-9b", "h100-sxm", &s);
    kv_weights w = kv_weights_compute(&s.model, 1);
    ck_assert(w.params_embedding == 256000.0 * 3584);
    /* Gemma-2-9B: about 9.24B parameters (model card: "9B"). */
    ck_assert_msg(fabs(w.params_total / 9.24e9 - 1) < 0.01, "%.4g", w.params_total);
}
END_TEST

Suite *suite_weights(void)
{
    Suite *su = suite_create("weights");
    TCase *tc = tcase_create("counts");
    tcase_add_test(tc, llama_dense_counts);
    tcase_add_test(tc, mixtral_total_and_active);
    tcase_add_test(tc, deepseek_v2_lite_mla_moe);
    tcase_add_test(tc, tensor_parallel_shards_all_but_norms);
    tcase_add_test(tc, tied_embeddings_counted_once);
    suite_add_tcase(su, tc);
    return su;
}
