/* test_loader.c: scenarios, library entries, overrides, extends and Hugging Face configs load
 * into the values their files state. */
#include "tests.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static scn_scenario s;
static scn_error e;

static void load_ok(const char *text, const char *const *sets, int n)
{
    scn_status st = t_load(text, sets, n, &s, &e);
    char msg[1500];
    scn_error_format(&e, msg, sizeof msg);
    ck_assert_msg(st == SCN_OK, "%s", msg);
}

START_TEST(bundled_chat_scenario)
{
    t_library("llama-3-8b", "h100-sxm", &s);
    ck_assert_str_eq(s.name, "chat-assistant");
    ck_assert_int_eq(s.workload.requests, 5000);
    ck_assert_int_eq(s.workload.arrival, SCN_ARRIVAL_POISSON);
    ck_assert(s.workload.rate == 8.0);
    ck_assert_int_eq(s.workload.prompt.kind, SCN_DIST_LOGNORMAL);
    ck_assert(s.workload.prompt.mean == 800 && s.workload.prompt.sigma == 0.6 && s.workload.prompt.max == 8192);
    ck_assert(s.workload.output.mean == 250 && s.workload.output.max == 2048);
    ck_assert_int_eq(s.workload.prefix_groups, 4);
    ck_assert_int_eq(s.workload.prefix_tokens, 2000);
    ck_assert(s.workload.prefix_share == 0.9 && s.workload.prefix_zipf == 1.1);
    ck_assert_int_eq(s.slo.n, 2);
    ck_assert(s.slo.terms[0].metric == SCN_METRIC_TTFT && s.slo.terms[0].percentile == 99 && s.slo.terms[0].limit == 1.0);
    ck_assert(s.slo.terms[1].metric == SCN_METRIC_TPOT && fabs(s.slo.terms[1].limit - 0.05) < 1e-15);
    ck_assert_int_eq(s.options.n_layout, 2);
    ck_assert_int_eq(s.options.layout[0], SCN_LAYOUT_CONTIGUOUS);
    ck_assert_int_eq(s.options.n_prefix, 2);
    ck_assert(!s.options.prefix_cache[0] && s.options.prefix_cache[1]);
    ck_assert_int_eq(s.options.n_dtype, 2);
    ck_assert_int_eq(s.options.kv_dtype[1], SCN_DTYPE_FP8);
    ck_assert_int_eq(s.deployment.max_model_len, 8192);  /* defaults to the model's max_position */
    ck_assert(s.deployment.gpu_memory_utilization == 0.90);
}
END_TEST

typedef struct { const char *name; int layers, hidden, heads, kv_heads, head_dim, inter, vocab, maxpos; } mrow;

/* The values of each model's config.json (sources named in the library files). */
START_TEST(library_models_match_their_configs)
{
    static const mrow rows[] = {
        {"llama-2-7b", 32, 4096, 32, 32, 128, 11008, 32000, 4096},
        {"llama-2-13b", 40, 5120, 40, 40, 128, 13824, 32000, 4096},
        {"llama-2-70b", 80, 8192, 64, 8, 128, 28672, 32000, 4096},
        {"llama-3-8b", 32, 4096, 32, 8, 128, 14336, 128256, 8192},
        {"llama-3-70b", 80, 8192, 64, 8, 128, 28672, 128256, 8192},
        {"mistral-7b", 32, 4096, 32, 8, 128, 14336, 32000, 32768},
        {"mixtral-8x7b", 32, 4096, 32, 8, 128, 14336, 32000, 32768},
        {"qwen2-7b", 28, 3584, 28, 4, 128, 18944, 152064, 32768},
        {"deepseek-v2-lite", 27, 2048, 16, 16, 128, 10944, 102400, 163840},
        {"gemma-2-9b", 42, 3584, 16, 8, 256, 14336, 256000, 8192},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const mrow *r = &rows[i];
        t_library(r->name, "h200", &s);
        ck_assert_str_eq(s.model.name, r->name);
        ck_assert_msg(s.model.layers == r->layers && s.model.hidden == r->hidden && s.model.heads == r->heads &&
                          s.model.kv_heads == r->kv_heads && s.model.head_dim == r->head_dim &&
                          s.model.intermediate == r->inter && s.model.vocab == r->vocab &&
                          s.model.max_position == r->maxpos,
                      "%s does not match its config", r->name);
    }
    t_library("mistral-7b", "h200", &s);
    ck_assert(s.model.sliding_window == 4096 && s.model.sliding_layers == 32);
    t_library("gemma-2-9b", "h200", &s);
    ck_assert(s.model.sliding_window == 4096 && s.model.sliding_layers == 21 && s.model.tie_embeddings &&
              s.model.norms_per_layer == 4);
    t_library("deepseek-v2-lite", "h200", &s);
    ck_assert(s.model.kv_lora_rank == 512 && s.model.qk_rope_head_dim == 64 && s.model.experts == 64 &&
              s.model.experts_per_token == 6 && s.model.shared_experts == 2 && s.model.dense_layers == 1 &&
              s.model.moe_intermediate == 1408 && s.model.q_lora_rank == 0);
    t_library("mixtral-8x7b", "h200", &s);
    ck_assert(s.model.experts == 8 && s.model.experts_per_token == 2 && s.model.moe_intermediate == 14336);
}
END_TEST

typedef struct { const char *name; double mem, bw, bf16, fp8; } hrow;

START_TEST(library_hardware_matches_datasheets)
{
    static const hrow rows[] = {
        {"a100-40g", 40960 * MIB, 1555e9, 312e12, 0},
        {"a100-80g", 81920 * MIB, 2039e9, 312e12, 0},
        {"h100-sxm", 81559 * MIB, 3.35e12, 989e12, 1979e12},
        {"h100-pcie", 81559 * MIB, 2.0e12, 756e12, 1513e12},
        {"h200", 143771 * MIB, 4.8e12, 989e12, 1979e12},
        {"l40s", 46068 * MIB, 864e9, 362e12, 733e12},
        {"rtx-4090", 24564 * MIB, 1008e9, 165.2e12, 330.3e12},
        {"mi300x", 191.7 * GIB, 5.3e12, 1307.4e12, 2614.9e12},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const hrow *r = &rows[i];
        t_library("llama-3-8b", r->name, &s);
        ck_assert_str_eq(s.hardware.name, r->name);
        ck_assert_msg(fabs(s.hardware.memory - r->mem) < 1 && fabs(s.hardware.memory_bandwidth - r->bw) < 1 &&
                          fabs(s.hardware.flops[SCN_DTYPE_BF16] - r->bf16) < 1e3 &&
                          fabs(s.hardware.flops[SCN_DTYPE_FP8] - r->fp8) < 1e3,
                      "%s does not match its datasheet", r->name);
        ck_assert(!s.hardware.calibrated);
        ck_assert(s.hardware.eff_bandwidth == 0.80 && s.hardware.kernel_overhead == 4e-6);
    }
}
END_TEST

#define MINI "model: llama-3-8b\nhardware: h100-sxm\nworkload:\n  arrival: {process: poisson, rate: 1/s}\n" \
             "  prompt_tokens: 100\n  output_tokens: 10\n"

START_TEST(overrides_apply_in_order)
{
    const char *sets[] = {"deployment.tensor_parallel=2", "model=llama-2-7b", "model.layers=8",
                          "options.kv_dtype=[fp8, int4]", "workload.arrival.rate=3/s", "hardware.memory=40 GiB"};
    load_ok(MINI, sets, 6);
    ck_assert_int_eq(s.deployment.tensor_parallel, 2);
    ck_assert_str_eq(s.model.name, "llama-2-7b");
    ck_assert_int_eq(s.model.layers, 8);
    ck_assert_int_eq(s.model.hidden, 4096);          /* the rest of llama-2-7b is kept */
    ck_assert_int_eq(s.options.n_dtype, 2);
    ck_assert_int_eq(s.options.kv_dtype[1], SCN_DTYPE_INT4);
    ck_assert(s.workload.rate == 3.0);
    ck_assert(s.hardware.memory == 40 * GIB);
    ck_assert_str_eq(s.hardware.name, "h100-sxm");
}
END_TEST

START_TEST(extends_merges_and_overrides)
{
    t_write("my-gpu.yaml", "extends: h100-sxm\nname: my-gpu\nmemory_bandwidth: 3 TB/s\n"
                           "efficiency: {memory_bandwidth: 0.9}\ncalibrated: true\n");
    load_ok("model: llama-3-8b\nhardware: ./my-gpu.yaml\nworkload:\n  arrival: {process: constant, rate: 1/s}\n"
            "  prompt_tokens: 10\n  output_tokens: 10\n", NULL, 0);
    ck_assert_str_eq(s.hardware.name, "my-gpu");
    ck_assert(s.hardware.memory_bandwidth == 3e12);
    ck_assert(s.hardware.memory == 81559 * MIB);          /* from h100-sxm */
    ck_assert(s.hardware.eff_bandwidth == 0.9);           /* overridden */
    ck_assert(s.hardware.eff_compute == 0.75);            /* merged from the base's mapping (large-GEMM default) */
    ck_assert(s.hardware.calibrated);
    /* A scenario extending another, and inline model fields over a library entry. */
    t_write("base.yaml", MINI "seed: 7\n");
    load_ok("extends: base.yaml\nmodel: {extends: llama-3-8b, kv_heads: 32}\n", NULL, 0);
    ck_assert_int_eq(s.seed, 7);
    ck_assert_int_eq(s.model.kv_heads, 32);
    ck_assert_int_eq(s.model.layers, 32);
}
END_TEST

/* efficiency.compute_scale: the library's values, a fraction or a percentage inline, the whole
 * peak accepted, and a profile extending h200 that sets its own compute keeps the ratio. */
START_TEST(compute_scale_loads)
{
    load_ok("model: llama-3-8b\nhardware: h200\nworkload:\n  arrival: {process: poisson, rate: 1/s}\n"
            "  prompt_tokens: 10\n  output_tokens: 10\n", NULL, 0);
    ck_assert(s.hardware.eff_compute == 0.75 && s.hardware.eff_compute_scale[SCN_DTYPE_FP8] == 0.89);
    ck_assert(s.hardware.eff_compute_scale[SCN_DTYPE_BF16] == 0 && s.hardware.eff_compute_scale[SCN_DTYPE_INT8] == 0);
    const char *hw = "model: llama-3-8b\nhardware:\n  memory: 80 GiB\n  memory_bandwidth: 1 TB/s\n"
                     "  compute: {bf16: 1 TFLOPS, fp8: 2 TFLOPS, int8: 2 TOPS}\n"
                     "  efficiency: {compute: 0.8, compute_scale: {fp8: 90 %, int8: 1.25}}\n"
                     "workload:\n  arrival: {process: poisson, rate: 1/s}\n  prompt_tokens: 10\n  output_tokens: 10\n";
    load_ok(hw, NULL, 0);
    ck_assert(fabs(s.hardware.eff_compute_scale[SCN_DTYPE_FP8] - 0.9) < 1e-15);
    ck_assert(s.hardware.eff_compute_scale[SCN_DTYPE_INT8] == 1.25);   /* 0.8 x 1.25: the whole peak */
    ck_assert(s.hardware.eff_compute_scale[SCN_DTYPE_FP16] == 0);
    /* An override of compute alone keeps the base's ratio (the extends merge is per key). */
    t_write("my-h200.yaml", "extends: h200\nname: my-h200\nefficiency: {compute: 0.5}\n");
    load_ok("model: llama-3-8b\nhardware: ./my-h200.yaml\nworkload:\n  arrival: {process: constant, rate: 1/s}\n"
            "  prompt_tokens: 10\n  output_tokens: 10\n", NULL, 0);
    ck_assert(s.hardware.eff_compute == 0.5 && s.hardware.eff_compute_scale[SCN_DTYPE_FP8] == 0.89);
    /* The shipped calibrated profile extends h200: its fitted compute with h200's ratio. */
    load_ok("model: llama-3-8b\nhardware: h200.calibrated\nworkload:\n  arrival: {process: constant, rate: 1/s}\n"
            "  prompt_tokens: 10\n  output_tokens: 10\n", NULL, 0);
    ck_assert(s.hardware.calibrated && s.hardware.eff_compute == 0.0639944);
    ck_assert(s.hardware.eff_compute_scale[SCN_DTYPE_FP8] == 0.89);
}
END_TEST

START_TEST(json_scenarios_and_anchors)
{
    load_ok("{\"model\": \"llama-3-8b\", \"hardware\": \"h200\", \"workload\": {\"arrival\": "
            "{\"process\": \"poisson\", \"rate\": \"2/s\"}, \"prompt_tokens\": 64, \"output_tokens\": 8}}", NULL, 0);
    ck_assert_str_eq(s.hardware.name, "h200");
    load_ok("model: llama-3-8b\nhardware: h200\nworkload:\n  arrival: {process: gamma, rate: 4/s, cv: 2}\n"
            "  prompt_tokens: &len {dist: uniform, min: 10, max: 30}\n  output_tokens: *len\n", NULL, 0);
    ck_assert_int_eq(s.workload.arrival, SCN_ARRIVAL_GAMMA);
    ck_assert(s.workload.cv == 2.0);
    ck_assert(s.workload.output.kind == SCN_DIST_UNIFORM && s.workload.output.mean == 20);
}
END_TEST

static const char *LLAMA3_CFG =
    "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"hidden_size\": 4096,\n  \"intermediate_size\": 14336,\n"
    "  \"max_position_embeddings\": 8192,\n  \"model_type\": \"llama\",\n  \"num_attention_heads\": 32,\n"
    "  \"num_hidden_layers\": 32,\n  \"num_key_value_heads\": 8,\n  \"rms_norm_eps\": 1e-05,\n"
    "  \"rope_theta\": 500000.0,\n  \"tie_word_embeddings\": false,\n  \"torch_dtype\": \"bfloat16\",\n"
    "  \"vocab_size\": 128256\n}\n";

START_TEST(hf_config_matches_library_entry)
{
    t_write("llama3-config.json", LLAMA3_CFG);
    load_ok("model: {hf_config: llama3-config.json, name: l3}\nhardware: h100-sxm\nworkload:\n"
            "  arrival: {process: poisson, rate: 1/s}\n  prompt_tokens: 1\n  output_tokens: 1\n", NULL, 0);
    scn_model hf = s.model;
    t_library("llama-3-8b", "h100-sxm", &s);
    ck_assert_str_eq(hf.name, "l3");
    ck_assert(hf.layers == s.model.layers && hf.hidden == s.model.hidden && hf.heads == s.model.heads &&
              hf.kv_heads == s.model.kv_heads && hf.head_dim == s.model.head_dim &&
              hf.intermediate == s.model.intermediate && hf.vocab == s.model.vocab &&
              hf.max_position == s.model.max_position && hf.tie_embeddings == s.model.tie_embeddings &&
              hf.weight_dtype == s.model.weight_dtype && hf.sliding_window == 0);
}
END_TEST

START_TEST(hf_config_family_rules)
{
    /* Gemma 2: alternating windows, four norms, tied embeddings when the config says nothing. */
    t_write("gemma2.json", "{\"model_type\": \"gemma2\", \"hidden_size\": 3584, \"num_hidden_layers\": 42,"
                           "\"num_attention_heads\": 16, \"num_key_value_heads\": 8, \"head_dim\": 256,"
                           "\"intermediate_size\": 14336, \"vocab_size\": 256000, \"max_position_embeddings\": 8192,"
                           "\"sliding_window\": 4096}");
    load_ok("model: {hf_config: gemma2.json}\nhardware: h100-sxm\nworkload:\n  arrival: {process: poisson, rate: 1/s}\n"
            "  prompt_tokens: 1\n  output_tokens: 1\n", NULL, 0);
    ck_assert(s.model.sliding_window == 4096 && s.model.sliding_layers == 21 && s.model.norms_per_layer == 4 &&
              s.model.tie_embeddings);
    /* Qwen2: sliding_window present but switched off; q/k/v biases. */
    t_write("qwen2.json", "{\"model_type\": \"qwen2\", \"hidden_size\": 3584, \"num_hidden_layers\": 28,"
                          "\"num_attention_heads\": 28, \"num_key_value_heads\": 4, \"intermediate_size\": 18944,"
                          "\"vocab_size\": 152064, \"max_position_embeddings\": 32768, \"sliding_window\": 131072,"
                          "\"use_sliding_window\": false, \"max_window_layers\": 28, \"tie_word_embeddings\": false}");
    load_ok("model: {hf_config: qwen2.json}\nhardware: h100-sxm\nworkload:\n  arrival: {process: poisson, rate: 1/s}\n"
            "  prompt_tokens: 1\n  output_tokens: 1\n", NULL, 0);
    ck_assert(s.model.sliding_window == 0 && s.model.attention_bias && s.model.head_dim == 128);
    /* DeepSeek-V2-Lite: MLA and MoE fields, q_lora_rank null. */
    t_write("dsv2.json", "{\"model_type\": \"deepseek_v2\", \"hidden_size\": 2048, \"num_hidden_layers\": 27,"
                         "\"num_attention_heads\": 16, \"num_key_value_heads\": 16, \"intermediate_size\": 10944,"
                         "\"vocab_size\": 102400, \"max_position_embeddings\": 163840, \"kv_lora_rank\": 512,"
                         "\"q_lora_rank\": null, \"qk_rope_head_dim\": 64, \"qk_nope_head_dim\": 128, \"v_head_dim\": 128,"
                         "\"n_routed_experts\": 64, \"n_shared_experts\": 2, \"num_experts_per_tok\": 6,"
                         "\"moe_intermediate_size\": 1408, \"first_k_dense_replace\": 1, \"n_group\": 1}");
    load_ok("model: {hf_config: dsv2.json}\nhardware: h100-sxm\nworkload:\n  arrival: {process: poisson, rate: 1/s}\n"
            "  prompt_tokens: 1\n  output_tokens: 1\n", NULL, 0);
    ck_assert(s.model.kv_lora_rank == 512 && s.model.q_lora_rank == 0 && s.model.experts == 64 &&
              s.model.shared_experts == 2 && s.model.dense_layers == 1 && s.model.experts_per_token == 6 &&
              s.model.expert_groups == 1);   /* n_group 1: V2-Lite's router picks over all 64 */
    /* Mixtral: experts use intermediate_size. */
    t_write("mixtral.json", "{\"model_type\": \"mixtral\", \"hidden_size\": 4096, \"num_hidden_layers\": 32,"
                            "\"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"intermediate_size\": 14336,"
                            "\"vocab_size\": 32000, \"max_position_embeddings\": 32768, \"num_local_experts\": 8,"
                            "\"num_experts_per_tok\": 2, \"sliding_window\": null}");
    load_ok("model: {hf_config: mixtral.json}\nhardware: h100-sxm\nworkload:\n  arrival: {process: poisson, rate: 1/s}\n"
            "  prompt_tokens: 1\n  output_tokens: 1\n", NULL, 0);
    ck_assert(s.model.experts == 8 && s.model.moe_intermediate == 14336 && s.model.sliding_window == 0);
}
END_TEST

START_TEST(every_bundled_scenario_loads)
{
    static const char *const files[] = {"chat.yaml", "tiny-cpu.yaml", "gpu-decode.yaml", "gpu-prefix.yaml",
                                        "archetypes/chat-shared-prompt.yaml", "archetypes/high-concurrency-api.yaml",
                                        "archetypes/long-document.yaml", "archetypes/edge-gpu.yaml", "../bench/sweep-500.yaml"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[700], msg[1500];
        snprintf(path, sizeof path, "%s/%s", getenv("KVPLAN_LIBRARY"), files[i]);
        scn_status st = scn_scenario_load(path, NULL, 0, &s, &e);
        scn_error_format(&e, msg, sizeof msg);
        ck_assert_msg(st == SCN_OK, "%s: %s", files[i], msg);
    }
}
END_TEST

START_TEST(a_deployment_list_points_to_options)
{
    /* A review wrote deployment: {tensor_parallel: [4, 8]} meaning "compare both"; the error must
     * say where choices go, at the list's position. */
    static scn_scenario sc;
    scn_status st = t_load("model: llama-3-8b\nhardware: h100-sxm\ndeployment: {tensor_parallel: [1, 2]}\n"
                           "workload: {requests: 10, arrival: {process: poisson, rate: 1/s}, prompt_tokens: 100, "
                           "output_tokens: 10}\n", NULL, 0, &sc, &e);
    ck_assert_int_eq(st, SCN_E_DATA);
    ck_assert_int_eq(e.line, 3);
    ck_assert_str_eq(e.path, "deployment.tensor_parallel");
    ck_assert_msg(strstr(e.msg, "options.tensor_parallel"), "%s", e.msg);
}
END_TEST

/* Option lists that a run could not honour are refused where they stand (rev12c): a TP choice
 * whose replica cannot hold the deployment's expert-parallel split, and TP, replica or hardware
 * lists beside disaggregated pools, which set their own. */
START_TEST(option_lists_a_run_cannot_honour_are_located)
{
    static scn_scenario sc;
    const char *wl = "workload: {requests: 10, arrival: {process: poisson, rate: 1/s}, prompt_tokens: 100, "
                     "output_tokens: 10}\n";
    char y[600];
    snprintf(y, sizeof y, "model: qwen3-30b-a3b\nhardware: h100-sxm\ndeployment: {tensor_parallel: 8, expert_parallel: 8}\n"
             "options: {tensor_parallel: [4, 8]}\n%s", wl);
    ck_assert_int_eq(t_load(y, NULL, 0, &sc, &e), SCN_E_DATA);
    ck_assert_int_eq(e.line, 4);
    ck_assert_str_eq(e.path, "options.tensor_parallel");
    ck_assert_msg(strstr(e.msg, "multiple of deployment.expert_parallel"), "%s", e.msg);
    /* TP 8 alone holds it. */
    snprintf(y, sizeof y, "model: qwen3-30b-a3b\nhardware: h100-sxm\ndeployment: {tensor_parallel: 8, expert_parallel: 8}\n"
             "options: {tensor_parallel: [8]}\n%s", wl);
    ck_assert_int_eq(t_load(y, NULL, 0, &sc, &e), SCN_OK);
    static const char *const lists[] = {"tensor_parallel: [2, 1]", "replicas: [1, 2]", "hardware: [a100-80g]"};
    static const char *const paths[] = {"options.tensor_parallel", "options.replicas", "options.hardware"};
    for (int i = 0; i < 3; i++) {
        snprintf(y, sizeof y, "model: llama-3-8b\nhardware: h100-sxm\n"
                 "deployment: {disaggregation: {prefill: {replicas: 1}, decode: {replicas: 1}}}\noptions: {%s}\n%s",
                 lists[i], wl);
        ck_assert_int_eq(t_load(y, NULL, 0, &sc, &e), SCN_E_DATA);
        ck_assert_int_eq(e.line, 4);
        ck_assert_str_eq(e.path, paths[i]);
        ck_assert_msg(strstr(e.msg, "pools set their own"), "%s", e.msg);
    }
}
END_TEST

Suite *suite_loader(void)
{
    Suite *su = suite_create("loader");
    TCase *tc = tcase_create("load");
    tcase_add_test(tc, bundled_chat_scenario);
    tcase_add_test(tc, a_deployment_list_points_to_options);
    tcase_add_test(tc, option_lists_a_run_cannot_honour_are_located);
    tcase_add_test(tc, library_models_match_their_configs);
    tcase_add_test(tc, library_hardware_matches_datasheets);
    tcase_add_test(tc, overrides_apply_in_order);
    tcase_add_test(tc, extends_merges_and_overrides);
    tcase_add_test(tc, compute_scale_loads);
    tcase_add_test(tc, json_scenarios_and_anchors);
    tcase_add_test(tc, hf_config_matches_library_entry);
    tcase_add_test(tc, hf_config_family_rules);
    tcase_add_test(tc, every_bundled_scenario_loads);
    suite_add_tcase(su, tc);
    return su;
}
