/* test_model_library.c: the models people deploy now, each loaded from the bundled library and
 * checked against its model card's parameter counts (within 0.5 % where the card gives a
 * figure to three digits) and against hand sums from its config.json, and their KV bytes per
 * token by hand. Sources are named in each model's YAML file and in docs/sources.md. */
#include "tests.h"
#include "../model/kv_model.h"

#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static scn_scenario s;

static kv_weights load(const char *model)
{
    t_library(model, "h100-sxm", &s);
    return kv_weights_compute(&s.model, 1);
}

/* |got / want - 1| <= tol, with the numbers in the message. */
#define NEAR(got, want, tol) \
    ck_assert_msg(fabs((got) / (want) - 1) <= (tol), "%s: %.6g against %.6g", #got, (double)(got), (double)(want))

START_TEST(llama_3_1_family)
{
    /* Llama-3.1-8B shares Llama-3-8B's shapes: 8030261248 by the hand sum in test_weights.c. */
    ck_assert(load("llama-3.1-8b").params_total == 8030261248.0);
    ck_assert_int_eq(s.model.max_position, 131072);
    /* 70B per layer: q, o 2 * 8192^2 + k, v 2 * 8192 * 1024 + MLP 3 * 8192 * 28672 + norms
     * 2 * 8192 = 855654400; x 80 + embedding and head 2 * 128256 * 8192 + final norm 8192
     * = 70553706496 (Hugging Face lists 70.6B). */
    ck_assert(load("llama-3.1-70b").params_total == 70553706496.0);
    /* 405B per layer: 2 * 16384^2 + 2 * 16384 * 1024 + 3 * 16384 * 53248 + 2 * 16384
     * = 3187703808; x 126 + 2 * 128256 * 16384 + 16384 = 405853388800 (card: 405B). */
    ck_assert(load("llama-3.1-405b").params_total == 405853388800.0);
    NEAR(s.model.layers * 1.0, 126.0, 0);
}
END_TEST

START_TEST(qwen_family)
{
    /* Qwen2.5-7B: 7.61B total, 6.53B non-embedding (model card). */
    kv_weights w = load("qwen2.5-7b");
    NEAR(w.params_total, 7.61e9, 0.005);
    NEAR(w.params_total - w.params_embedding, 6.53e9, 0.005);
    /* Qwen2.5-72B: 72.7B total, 70.0B non-embedding. */
    w = load("qwen2.5-72b");
    NEAR(w.params_total, 72.7e9, 0.005);
    NEAR(w.params_total - w.params_embedding, 70.0e9, 0.005);
    /* Qwen3-8B: 8.2B total, 6.95B non-embedding. */
    w = load("qwen3-8b");
    NEAR(w.params_total, 8.2e9, 0.005);
    NEAR(w.params_total - w.params_embedding, 6.95e9, 0.005);
    /* Qwen3-32B: 32.8B total, 31.2B non-embedding. */
    w = load("qwen3-32b");
    NEAR(w.params_total, 32.8e9, 0.005);
    NEAR(w.params_total - w.params_embedding, 31.2e9, 0.005);
}
END_TEST

START_TEST(qwen3_moe)
{
    /* Qwen3-30B-A3B: 30.5B total, 3.3B activated, 29.9B non-embedding (model card). Hand sum of
     * one layer: attention 2 * 2048 * 4096 + 2 * 2048 * 512 = 18874368, 128 experts
     * 3 * 2048 * 768 each = 603979776, router 2048 * 128 = 262144, norms 4096: 623120384; x 48
     * + 2 * 151936 * 2048 + 2048 = 30532110336. */
    kv_weights w = load("qwen3-30b-a3b");
    ck_assert(w.params_total == 30532110336.0);
    NEAR(w.params_total, 30.5e9, 0.005);
    NEAR(w.params_total - w.params_embedding, 29.9e9, 0.005);
    /* Activated: the card's 3.3B has two digits, so 2 % here. */
    NEAR(w.params_active, 3.3e9, 0.02);
    /* Qwen3-235B-A22B: 235B total, 22B activated. */
    w = load("qwen3-235b-a22b");
    NEAR(w.params_total, 235e9, 0.005);
    NEAR(w.params_active, 22e9, 0.02);
}
END_TEST

START_TEST(deepseek_v3_mla_moe)
{
    /* DeepSeek-V3 report: 671B total, 37B activated per token. */
    kv_weights w = load("deepseek-v3");
    NEAR(w.params_total, 671e9, 0.005);
    NEAR(w.params_active, 37e9, 0.03);
    /* Hand sum of one layer's MLA: q_a 7168 * 1536 + its norm 1536 + q_b 1536 * 128 * 192,
     * kv_a 7168 * 576 + its norm 512, kv_b 512 * 128 * 256, o 128 * 128 * 7168. */
    double mla = 7168.0 * 1536 + 1536 + 1536.0 * 128 * 192 + 7168.0 * 576 + 512 +
                 512.0 * 128 * 256 + 128.0 * 128 * 7168;
    ck_assert(w.params_attention == 61 * mla);
    /* The latent cache: (kv_lora_rank 512 + rope 64) elements a layer, once, not x2, not x heads:
     * 576 * 61 layers * 2 bytes = 70272 bytes per token in bf16. */
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    ck_assert(kv_bytes_per_token(&s.model, &c) == 576.0 * 61 * 2);
    /* DeepSeek-R1 is the same network. */
    kv_weights r1 = load("deepseek-r1");
    ck_assert(r1.params_total == w.params_total);
}
END_TEST

START_TEST(gpt_oss)
{
    /* gpt-oss model card: 116.83B total and 5.13B active for 120b; 20.91B and 3.61B for 20b;
     * "active" leaves out the input embedding (201088 * 2880). kvplan does not count the expert
     * and output-projection biases, the router bias or the sinks (0.04 % of the total). */
    kv_weights w = load("gpt-oss-120b");
    NEAR(w.params_total, 116.83e9, 0.005);
    NEAR(w.params_active - 201088.0 * 2880, 5.13e9, 0.005);
    /* KV: 2 * 8 heads * 64 dims * 2 bytes = 2048 bytes a layer a token; 18 full layers hold the
     * whole context, 18 banded layers at most 128 tokens. At 4096 tokens:
     * 2048 * (18 * 4096 + 18 * 128) bytes. */
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    ck_assert(kv_bytes_for_context(&s.model, &c, 1, 4096) == 2048.0 * (18 * 4096 + 18 * 128));
    w = load("gpt-oss-20b");
    NEAR(w.params_total, 20.91e9, 0.005);
    NEAR(w.params_active - 201088.0 * 2880, 3.61e9, 0.005);
}
END_TEST

START_TEST(mistral_small)
{
    /* Per layer: q 5120 * 4096 and o 4096 * 5120, k, v 2 * 5120 * 1024, MLP 3 * 5120 * 32768,
     * norms 2 * 5120 = 555755520; x 40 + 2 * 131072 * 5120 + 5120 = 23572403200 (card: 24B,
     * Hugging Face lists 23.6B). */
    kv_weights w = load("mistral-small-24b");
    ck_assert(w.params_total == 23572403200.0);
    NEAR(w.params_total, 23.6e9, 0.005);
}
END_TEST

/* Every model file in the library has its card's total parameter count here, and the count
 * computed from its config (kv_weights_compute) is within 0.5 % of it. A model file without an
 * entry fails the test, so a new model must bring its card figure. Figures: the total the
 * model card or its Hugging Face page states (safetensors "params"), to three digits or more. */
static const struct { const char *name; double card; } CARDS[] = {
    {"deepseek-r1", 671e9},        /* DeepSeek-V3 report (arXiv:2412.19437): 671B, MTP module aside */
    {"deepseek-v2-lite", 15.7e9},  /* DeepSeek-V2-Lite card: 15.7B total */
    {"deepseek-v3", 671e9},        /* DeepSeek-V3 report: 671B total */
    {"gemma-2-9b", 9.24e9},        /* google/gemma-2-9b on Hugging Face: 9.24B */
    {"gpt-oss-120b", 116.83e9},    /* gpt-oss model card: 116.83B */
    {"gpt-oss-20b", 20.91e9},      /* gpt-oss model card: 20.91B */
    {"llama-2-13b", 13.0e9},       /* meta-llama/Llama-2-13b-hf: 13B (13,015,864,320 by hand sum) */
    {"llama-2-70b", 69.0e9},       /* meta-llama/Llama-2-70b-hf on Hugging Face: 69B */
    {"llama-2-7b", 6.74e9},        /* meta-llama/Llama-2-7b-hf on Hugging Face: 6.74B */
    {"llama-3-70b", 70.6e9},       /* meta-llama/Meta-Llama-3-70B on Hugging Face: 70.6B */
    {"llama-3-8b", 8.03e9},        /* meta-llama/Meta-Llama-3-8B on Hugging Face: 8.03B */
    {"llama-3.1-405b", 406e9},     /* meta-llama/Llama-3.1-405B on Hugging Face: 406B */
    {"llama-3.1-405b-fp8", 406e9}, /* Meta's FP8 checkpoint of the same network (406B; it adds scales only) */
    {"llama-3.1-70b", 70.6e9},     /* meta-llama/Llama-3.1-70B on Hugging Face: 70.6B */
    {"llama-3.1-8b", 8.03e9},      /* meta-llama/Llama-3.1-8B on Hugging Face: 8.03B */
    {"llama-3.2-1b", 1.24e9},      /* meta-llama/Llama-3.2-1B on Hugging Face: 1.24B (1,235,814,400) */
    {"mistral-7b", 7.24e9},        /* mistralai/Mistral-7B-v0.1 on Hugging Face: 7.24B */
    {"mistral-small-24b", 23.6e9}, /* Mistral-Small-24B on Hugging Face: 23.6B */
    {"mixtral-8x7b", 46.7e9},      /* Mixtral of Experts (arXiv:2401.04088): 46.7B total */
    {"qwen2-7b", 7.62e9},          /* Qwen/Qwen2-7B on Hugging Face: 7.62B */
    {"qwen2.5-72b", 72.7e9},       /* Qwen2.5-72B card: 72.7B */
    {"qwen2.5-7b", 7.61e9},        /* Qwen2.5-7B card: 7.61B */
    {"qwen3-235b-a22b", 235e9},    /* Qwen3-235B-A22B card: 235B */
    {"qwen3-30b-a3b", 30.5e9},     /* Qwen3-30B-A3B card: 30.5B */
    {"qwen3-32b", 32.8e9},         /* Qwen3-32B card: 32.8B */
    {"qwen3-8b", 8.2e9},           /* Qwen3-8B card: 8.2B */
};
/* Synthetic models with no card (tiny-cpu stands in for a Llama on the CPU backend). */
static const char *const NO_CARD[] = {"tiny-cpu", NULL};

START_TEST(every_model_matches_its_card)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/models", getenv("KVPLAN_LIBRARY"));
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot open %s", dir);
    int checked = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".yaml")) continue;
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(len - 5), e->d_name);
        bool exempt = false;
        for (int i = 0; NO_CARD[i]; i++) exempt |= !strcmp(NO_CARD[i], name);
        if (exempt) continue;
        double card = 0;
        for (size_t i = 0; i < sizeof CARDS / sizeof CARDS[0]; i++)
            if (!strcmp(CARDS[i].name, name)) card = CARDS[i].card;
        ck_assert_msg(card > 0, "models/%s has no card parameter count in this test", e->d_name);
        kv_weights w = load(name);
        ck_assert_msg(fabs(w.params_total / card - 1) <= 0.005, "%s: %.6g parameters from its config against %.6g on "
                      "its card (%.2f %%)", name, w.params_total, card, 100 * (w.params_total / card - 1));
        checked++;
    }
    closedir(d);
    ck_assert_int_eq(checked, (int)(sizeof CARDS / sizeof CARDS[0]));
}
END_TEST

Suite *suite_model_library(void)
{
    Suite *su = suite_create("model_library");
    TCase *tc = tcase_create("cards");
    tcase_add_test(tc, llama_3_1_family);
    tcase_add_test(tc, qwen_family);
    tcase_add_test(tc, qwen3_moe);
    tcase_add_test(tc, deepseek_v3_mla_moe);
    tcase_add_test(tc, gpt_oss);
    tcase_add_test(tc, mistral_small);
    tcase_add_test(tc, every_model_matches_its_card);
    suite_add_tcase(su, tc);
    return su;
}
