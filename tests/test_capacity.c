/* test_capacity.c: the memory budget and what fits in it, against hand arithmetic; the
 * planner's longest context, capped at max_model_len. */
#include "tests.h"
#include "../model/kv_model.h"
#include "../planner/plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static scn_scenario s;

START_TEST(chat_budget_by_hand)
{
    t_library("llama-3-8b", "h100-sxm", &s);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_capacity k = kv_capacity_compute(&s, &c, 16, 0);
    /* The engine's budget is a fraction of the total CUDA reports: 81559 MiB less the 0.43 GiB
     * the driver keeps (vLLM PR #10511's log: total_gpu_memory 79.22GiB). */
    double usable = (81559 * MIB - 0.43 * GIB) * 0.90;
    double weights = 8030261248.0 * 2;
    /* The default engine is vLLM: its profile run is a forward pass of 8192 batched tokens,
     * (4 * 4096 + 3 * 14336) * 2 B each, and the sampler over 1024 sequences' whole-vocabulary
     * logits at 2 + 4 + 4 B each (`vllm serve`'s defaults on an 80 GB H100: 1024 sequences,
     * 8192 tokens, EngineArgs.get_batch_defaults); then its 0.2 GiB of non-torch memory (the
     * CUDA context lies outside gpu_memory_utilization's budget). */
    ck_assert_int_eq(s.deployment.max_num_seqs, 1024);
    ck_assert_int_eq(s.deployment.max_num_batched_tokens, 8192);
    double act = 8192.0 * (4 * 4096 + 3 * 14336) * 2 + 1024.0 * 128256 * 10;
    double budget = usable - weights - act - 0.2 * GIB;
    ck_assert(fabs(k.activation - act) < 1e-3);
    ck_assert(fabs(k.kv_budget - budget) < 1e-3);
    ck_assert_int_eq(k.capacity_tokens, (long)floor(budget / (128 * KIB)));
    ck_assert_int_eq(k.capacity_blocks, (long)floor(budget / (16 * 128 * KIB)));
    /* The chat workload: 90 % of prompts carry the 2000-token shared prefix, so a prompt is
     * 0.9 * 2000 + 800 = 2600 tokens on average and a sequence ends at 2600 + 250 = 2850. */
    ck_assert(fabs(k.mean_tokens - 2850) < 1e-9);
    /* Contiguous reserves prompt + the most a request may generate (output max 2048):
     * 4648 tokens, under max_model_len 8192 -- the simulator's rule. */
    ck_assert_int_eq(k.reserve_contiguous, 4648);
    ck_assert_int_eq(k.max_seqs_contiguous, (long)floor(budget / (128 * KIB)) / 4648);
    /* Paged: 2850 tokens round up to 179 blocks of 16 = 2864 tokens. */
    ck_assert_int_eq(k.max_seqs_paged, (long)floor(budget / (16 * 128 * KIB)) / 179);
    ck_assert(k.max_seqs_paged > 1.5 * k.max_seqs_contiguous);
    /* Waste: contiguous leaves 1 - 2850/4648 unused; paged half a block on average. */
    ck_assert(fabs(k.waste_contiguous - (1 - 2850.0 / 4648)) < 1e-12);
    ck_assert(fabs(k.waste_paged - 7.5 / 2857.5) < 1e-12);
    ck_assert(k.waste_paged < 0.04);                 /* vLLM paper: < 4 % with paging */
}
END_TEST

START_TEST(vllm_profile_peak_matches_its_log)
{
    /* vLLM PR #10511 (youkaichao, 2024-12-14): `vllm serve meta-llama/Meta-Llama-3-8B` on an
     * H100 logs "PyTorch activation peak memory 1.26GiB" (max_model_len 8192, so 8192 batched
     * tokens, and 256 sequences). The derived peak must land within 10 % of it. */
    t_library("llama-3-8b", "h100-sxm", &s);
    double a = kv_activation_bytes(&s.model, 1, 8192, 256);
    ck_assert_msg(fabs(a / (1.26 * GIB) - 1) < 0.10, "%.3f GiB", a / GIB);
}
END_TEST

/* The same log at TP 1 and TP 2: vLLM PR #10511 prints "PyTorch activation peak memory 1.26GiB"
 * for both `vllm serve meta-llama/Meta-Llama-3-8B` and `... -tp 2` (youkaichao, 2024-12-14, V0).
 * The forward pass's per-rank activations shrink at TP 2 and the gathered vocabulary does not, so
 * an unchanged peak is the sampler's: V0's profile_run samples 256 sequences with top_p 0.99 and
 * top_k = vocab - 1 after the forward has returned, and _apply_top_k_top_p holds 40 B a logit at
 * its gather (docs/cost-model.md, "Memory budget and capacity"). By hand:
 *   hidden states 8192 x 4096 x 2 B = 67 108 864; sampler 256 x 128 256 x 40 B = 1 313 341 440;
 *   sum 1 380 450 304 B = 1.2856 GiB at either TP, +2.0 % against the log;
 *   forward TP 1: 8192 x (4 x 4096 + 3 x 14336) x 2 B = 973 078 528 (smaller);
 *   forward TP 2: 8192 x (4 x 4096 + 3 x 14336 / 2) x 2 B = 620 756 992 (smaller).
 * The additive rule (forward + 10 B a logit) gives 1.21 GiB at TP 1 but 0.88 GiB at TP 2 (-30 %). */
START_TEST(vllm_v0_profile_peak_is_the_sampler_at_either_tp)
{
    t_library_engine("llama-3-8b", "h100-sxm", "vllm-v0", &s);
    ck_assert_int_eq(s.engine.mem_sampler_bytes, 40);
    double want = 1380450304.0;
    for (int tp = 1; tp <= 2; tp++) {
        double a = kv_profile_activation_bytes(&s, &s.model, tp, 8192, 256, 0);
        ck_assert_msg(fabs(a - want) < 1e-3, "tp %d: %.0f B", tp, a);
        ck_assert_msg(fabs(a / (1.26 * GIB) - 1) < 0.03, "tp %d: %.3f GiB", tp, a / GIB);
    }
    ck_assert(fabs(kv_activation_bytes(&s.model, 2, 8192, 256) / (1.26 * GIB) - 1) > 0.25);
    /* One sequence: the sampler is small and the forward pass (no sampler term) is the peak. */
    ck_assert(fabs(kv_profile_activation_bytes(&s, &s.model, 1, 8192, 1, 0) - 973078528.0) < 1e-3);
    /* The V1 profile keeps kvplan's additive rule (its sampler path depends on FlashInfer being
     * installed; not derived here), and so does vllm-0.2 (an older sampler). */
    t_library_engine("llama-3-8b", "h100-sxm", "vllm", &s);
    ck_assert_int_eq(s.engine.mem_sampler_bytes, 0);
    ck_assert(kv_profile_activation_bytes(&s, &s.model, 2, 8192, 256, 0) == kv_activation_bytes(&s.model, 2, 8192, 256));
    t_library_engine("llama-3-8b", "h100-sxm", "vllm-0.2", &s);
    ck_assert_int_eq(s.engine.mem_sampler_bytes, 0);
    t_library_engine("llama-3-8b", "h100-sxm", "vllm-0.6.3", &s);   /* inherited through vllm-0.6 */
    ck_assert_int_eq(s.engine.mem_sampler_bytes, 40);
}
END_TEST

/* vLLM 0.2.5 to 0.3.0 (the vllm-0.2 profile) sized the cache from total - free after the profile
 * run (vLLM PR #2031): the CUDA context (the a100-80g profile's 1 GiB runtime) and 0.2 GiB of
 * non-torch memory count; the profile run took max(max_model_len, 2048) = 4096 tokens for
 * Llama-2 and 256 sequences; at TP 4 the allocator still held every all-reduce message of that
 * pass, 2 per layer and the embedding's, 4096 x 8192 x 2 B each. The PR's own figures, out of
 * sample: 7351 blocks at TP 1 and 20865 at TP 4 ("This PR: # GPU blocks"). */
START_TEST(vllm_02_profiler_counts_the_device)
{
    t_library_engine("llama-2-7b", "a100-80g", "vllm-0.2", &s);
    ck_assert_int_eq(s.deployment.max_num_batched_tokens, 4096);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_FP16, 0, 0);
    kv_capacity k = kv_capacity_compute(&s, &c, 16, 0);
    double act = 4096.0 * (4 * 4096 + 3 * 11008) * 2 + 256.0 * 32000 * 10;
    double budget = 0.9 * 80 * GIB - k.weights - act - 1 * GIB - 0.2 * GIB;
    ck_assert(fabs(k.activation - act) < 1e-3);
    ck_assert(fabs(k.kv_budget - budget) < 1e-3);
    /* 16 tokens x 32 layers x 2 x 4096 x 2 B = 8 MiB a block. */
    ck_assert_int_eq(k.capacity_blocks, (long)floor(budget / (8 * MIB)));
    ck_assert_msg(fabs(k.capacity_blocks / 7351.0 - 1) < 0.01, "%ld blocks", k.capacity_blocks);

    t_library_engine("llama-2-70b", "a100-80g", "vllm-0.2", &s);
    s.deployment.tensor_parallel = 4;
    c = kv_cache_cfg_make(&s, SCN_DTYPE_FP16, 0, 0);
    k = kv_capacity_compute(&s, &c, 16, 0);
    double held = (2 * 80 + 1) * 4096.0 * 8192 * 2;
    ck_assert(fabs(kv_held_allreduce_bytes(&s) - held) < 1e-3);
    act = 4096.0 * (4 * 8192 + 3 * 28672 / 4.0) * 2 + 256.0 * 32000 * 10 + held;
    budget = 0.9 * 80 * GIB - k.weights - act - 1.2 * GIB;
    ck_assert(fabs(k.activation - act) < 1e-3);
    ck_assert(fabs(k.kv_budget - budget) < 1e-3);
    /* 16 x 80 layers x 2 x (8 / 4 KV heads) x 128 x 2 B = 1.25 MiB a block per rank. Without the
     * held messages the budget would be the PR's "current main" (31615 blocks); with them it
     * lands within 11 % of the fixed profiler's 20865: what remains is not modelled. */
    ck_assert_int_eq(k.capacity_blocks, (long)floor(budget / (1.25 * MIB)));
    ck_assert_msg(k.capacity_blocks > 20865 && k.capacity_blocks < 1.11 * 20865, "%ld blocks", k.capacity_blocks);
    /* One GPU all-reduces nothing; a custom all-reduce takes messages up to its limit itself. */
    s.deployment.tensor_parallel = 1;
    ck_assert(kv_held_allreduce_bytes(&s) == 0);
    s.deployment.tensor_parallel = 4;
    s.engine.allreduce = SCN_AR_CUSTOM;
    s.engine.custom_max = 64 * MIB;
    ck_assert(kv_held_allreduce_bytes(&s) == 0);
    s.engine.custom_max = 8 * MIB;
    ck_assert(fabs(kv_held_allreduce_bytes(&s) - held) < 1e-3);
    /* Other engines' profilers do not read free memory: nothing held. */
    t_library_engine("llama-2-70b", "a100-80g", "vllm", &s);
    s.deployment.tensor_parallel = 4;
    ck_assert(kv_held_allreduce_bytes(&s) == 0);
}
END_TEST

/* The unchunked V0 budget follows max_model_len; a deployment's own budget is kept. */
START_TEST(unchunked_budget_covers_max_model_len)
{
    scn_error e;
    const char *w = "workload: {requests: 10, arrival: {process: offline}, prompt_tokens: 100, output_tokens: 100}\n";
    char y[600];
    snprintf(y, sizeof y, "model: llama-3-8b\nhardware: a100-80g\nengine: vllm-0.2\n%s", w);
    ck_assert_int_eq(t_load(y, NULL, 0, &s, &e), SCN_OK);
    ck_assert_int_eq(s.deployment.max_num_batched_tokens, 8192);        /* Llama-3-8B: 8192 */
    snprintf(y, sizeof y, "model: llama-3-8b\nhardware: a100-80g\nengine: vllm-0.2\n"
             "deployment: {max_model_len: 1024}\n%s", w);
    ck_assert_int_eq(t_load(y, NULL, 0, &s, &e), SCN_OK);
    ck_assert_int_eq(s.deployment.max_num_batched_tokens, 2048);        /* the floor */
    snprintf(y, sizeof y, "model: llama-3-8b\nhardware: a100-80g\nengine: vllm-0.2\n"
             "deployment: {max_num_batched_tokens: 512}\n%s", w);
    ck_assert_int_eq(t_load(y, NULL, 0, &s, &e), SCN_OK);
    ck_assert_int_eq(s.deployment.max_num_batched_tokens, 512);
}
END_TEST

/* Loads MODEL on HW under ENGINE with an optional deployment mapping's contents. */
static void load_v0(const char *model, const char *hw, const char *engine, const char *deploy)
{
    char y[700];
    snprintf(y, sizeof y, "model: %s\nhardware: %s\nengine: %s\n%s%s%s"
             "workload: {requests: 10, arrival: {process: offline}, prompt_tokens: 100, output_tokens: 100}\n",
             model, hw, engine, deploy ? "deployment: {" : "", deploy ? deploy : "", deploy ? "}\n" : "");
    scn_error e;
    ck_assert_msg(t_load(y, NULL, 0, &s, &e) == SCN_OK, "%s: %s", e.path, e.msg);
}

/* vLLM V0's defaults (docs/cost-model.md, "Engine profiles", "vLLM V0 batch defaults"):
 * 256 sequences and graphs to 256 on any GPU; chunked prefill off with max(max_model_len, 2048)
 * tokens a step, unless max_model_len > 32768 (then on, at 512 tokens in 0.6.x, 2048 in 0.7.x);
 * MLA models never chunk from 0.7.1. Each case by hand from those rules. */
START_TEST(vllm_v0_batch_defaults_by_model)
{
    /* Llama-3.1-8B's own context (131072 > 32768) on an H100: V0 0.6 chunks at 512 tokens. */
    load_v0("llama-3.1-8b", "h100-sxm", "vllm-0.6", NULL);
    ck_assert_int_eq(s.deployment.max_model_len, 131072);
    ck_assert_int_eq(s.deployment.max_num_seqs, 256);
    ck_assert_int_eq(s.deployment.max_num_batched_tokens, 512);
    ck_assert_int_eq(s.options.scheduler[0], SCN_SCHED_CHUNKED);
    ck_assert_int_eq(s.engine.graph_sizes[s.engine.n_graph_sizes - 1], 256);
    /* At --max-model-len 4096 it does not chunk, and a step takes a whole 4096-token prompt. */
    load_v0("llama-3.1-8b", "h100-sxm", "vllm-0.6", "max_model_len: 4096");
    ck_assert_int_eq(s.deployment.max_num_batched_tokens, 4096);
    ck_assert_int_eq(s.options.scheduler[0], SCN_SCHED_CONTINUOUS);
    /* Multi-step (--num-scheduler-steps 10) does not split prompts: unchunked, 131072 a step. */
    load_v0("llama-3.1-8b", "h100-sxm", "vllm-0.6", "scheduler_steps: 10");
    ck_assert_int_eq(s.deployment.max_num_batched_tokens, 131072);
    ck_assert_int_eq(s.options.scheduler[0], SCN_SCHED_CONTINUOUS);
    /* Exactly 32768 is not "> 32768"; 1024 takes the 2048 floor. */
    load_v0("llama-3.1-8b", "a100-80g", "vllm-0.6.3", "max_model_len: 32768");
    ck_assert_int_eq(s.deployment.max_num_batched_tokens, 32768);
    ck_assert_int_eq(s.options.scheduler[0], SCN_SCHED_CONTINUOUS);
    load_v0("llama-3.1-8b", "a100-80g", "vllm-0.6.3", "max_model_len: 1024");
    ck_assert_int_eq(s.deployment.max_num_batched_tokens, 2048);
    /* A budget the deployment gives is kept, chunked or not. */
    load_v0("llama-3.1-8b", "h100-sxm", "vllm-0.6", "max_num_batched_tokens: 1000");
    ck_assert_int_eq(s.deployment.max_num_batched_tokens, 1000);
    ck_assert_int_eq(s.options.scheduler[0], SCN_SCHED_CHUNKED);
    /* A model with sliding-window layers never took the long-context rule. */
    load_v0("gpt-oss-120b", "h100-sxm", "vllm-0.6", NULL);
    ck_assert_int_eq(s.options.scheduler[0], SCN_SCHED_CONTINUOUS);
    ck_assert_int_eq(s.deployment.max_num_batched_tokens, 131072);
    /* 0.7.1: long contexts chunk at 2048; MLA never chunks and prefills max_model_len tokens. */
    load_v0("llama-3.1-8b", "h200", "vllm-0.7.1", NULL);
    ck_assert_int_eq(s.deployment.max_num_batched_tokens, 2048);
    ck_assert_int_eq(s.options.scheduler[0], SCN_SCHED_CHUNKED);
    load_v0("deepseek-v3", "h200", "vllm-0.7.1", "tensor_parallel: 8");
    ck_assert_int_eq(s.deployment.max_num_batched_tokens, 163840);
    ck_assert_int_eq(s.deployment.max_num_seqs, 256);
    ck_assert_int_eq(s.options.scheduler[0], SCN_SCHED_CONTINUOUS);
    /* Before vLLM PR #6666 (the vllm-0.2 profile) nothing chunked by itself. */
    load_v0("llama-3.1-8b", "a100-80g", "vllm-0.2", NULL);
    ck_assert_int_eq(s.options.scheduler[0], SCN_SCHED_CONTINUOUS);
    ck_assert_int_eq(s.deployment.max_num_batched_tokens, 131072);
    /* The current (V1) profile is untouched: always chunked, 8192 tokens, 1024 sequences. */
    load_v0("deepseek-v3", "h200", "vllm", "tensor_parallel: 8");
    ck_assert_int_eq(s.deployment.max_num_batched_tokens, 8192);
    ck_assert_int_eq(s.deployment.max_num_seqs, 1024);
    ck_assert_int_eq(s.options.scheduler[0], SCN_SCHED_CHUNKED);
}
END_TEST

/* scn_engine_chunks alone, on a hand-made profile: each rule in isolation. */
START_TEST(engine_chunking_rules)
{
    scn_engine e;
    memset(&e, 0, sizeof e);
    scn_model m;
    memset(&m, 0, sizeof m);
    int b = 2048;
    ck_assert(!scn_engine_chunks(&e, &m, 65536, false, false, &b));
    ck_assert_int_eq(b, 2048);                          /* no rule: the budget stands */
    e.budget_covers_context = true;
    ck_assert(!scn_engine_chunks(&e, &m, 65536, false, false, &b));
    ck_assert_int_eq(b, 65536);
    b = 2048;
    ck_assert(!scn_engine_chunks(&e, &m, 65536, false, true, &b));
    ck_assert_int_eq(b, 2048);                          /* given: kept */
    e.chunk_above_len = 32768;
    e.chunk_long_budget = 512;
    ck_assert(scn_engine_chunks(&e, &m, 65536, false, false, &b));
    ck_assert_int_eq(b, 512);
    b = 2048;                                           /* multi-step: whole prompts */
    ck_assert(!scn_engine_chunks(&e, &m, 65536, true, false, &b));
    ck_assert_int_eq(b, 65536);
    b = 2048;
    ck_assert(!scn_engine_chunks(&e, &m, 32768, false, false, &b));
    ck_assert_int_eq(b, 32768);
    m.sliding_window = 4096;
    m.sliding_layers = 0;                               /* a window no layer uses */
    b = 2048;
    ck_assert(scn_engine_chunks(&e, &m, 65536, false, false, &b));
    m.sliding_layers = 1;
    b = 2048;
    ck_assert(!scn_engine_chunks(&e, &m, 65536, false, false, &b));
    ck_assert_int_eq(b, 65536);
    m.sliding_window = m.sliding_layers = 0;
    m.kv_lora_rank = 512;
    e.unchunked_mla = true;
    e.chunked_prefill = true;                           /* forced off even for a chunking engine */
    b = 2048;
    ck_assert(!scn_engine_chunks(&e, &m, 163840, false, false, &b));
    ck_assert_int_eq(b, 163840);
    e.unchunked_mla = false;
    ck_assert(scn_engine_chunks(&e, &m, 163840, false, false, &b));
}
END_TEST

/* vLLM's fused_experts sizes its caches for min(tokens, VLLM_FUSED_MOE_CHUNK_SIZE) rows. By hand
 * for DeepSeek-V3 at TP 8 (h 7168, 8 routed experts of 2048, 1 shared, 3 dense layers of 18432):
 * below the chunk, the formula as before; at 163840 tokens, the MoE layer holds 4h + 3 x 2048 / 8
 * per token over every token and 3 x 8 x 2048 / 8 + 8 x 7168 over 32768 rows; the dense layer
 * 4h + 3 x 18432 / 8 over every token; the larger wins. 2 B each; the sampler as always. */
START_TEST(fused_moe_chunk_bounds_the_expert_outputs)
{
    t_library_engine("deepseek-v3", "h200", "vllm-0.7.1", &s);
    const scn_model *m = &s.model;
    ck_assert_int_eq(m->hidden, 7168);
    ck_assert_int_eq(m->moe_intermediate, 2048);
    double sampler = 256.0 * m->vocab * 10;
    double small = 8192.0 * (4 * 7168 + 3 * 18432 / 8.0 + 8 * 7168) * 2 + sampler;
    ck_assert_double_eq_tol(kv_activation_bytes_chunked(m, 8, 8192, 256, 32768), small, 1e-3);
    ck_assert_double_eq_tol(kv_activation_bytes(m, 8, 8192, 256), small, 1e-3);
    double moe = (163840.0 * (4 * 7168 + 3 * 2048 / 8.0) + 32768.0 * (3 * 8 * 2048 / 8.0 + 8 * 7168)) * 2;
    double dense = 163840.0 * (4 * 7168 + 3 * 18432 / 8.0) * 2;
    ck_assert(moe > dense);
    ck_assert_double_eq_tol(kv_activation_bytes_chunked(m, 8, 163840, 256, 32768), moe + sampler, 1e-3);
    ck_assert(kv_activation_bytes(m, 8, 163840, 256) > moe + sampler);   /* unchunked: every row */
    /* A dense model has no experts to chunk. */
    t_library("llama-3-8b", "h100-sxm", &s);
    ck_assert_double_eq_tol(kv_activation_bytes_chunked(&s.model, 1, 65536, 256, 32768),
                            kv_activation_bytes(&s.model, 1, 65536, 256), 1e-3);
}
END_TEST

/* The engines size their budgets from the total cudaMemGetInfo reports: on our H200 150109880320
 * bytes (validation/h200-2026-11-30/probe-env.txt), 644939776 B under the 143771 MiB nvidia-smi
 * shows; the device's memory in the report stays the driver's. */
START_TEST(engines_see_the_cuda_total)
{
    t_library_engine("llama-3-8b", "h200", "vllm", &s);
    ck_assert_double_eq_tol(scn_hw_cuda_memory(&s.hardware), 150109880320.0, 1e-3);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_capacity k = kv_capacity_compute(&s, &c, 16, 0);
    ck_assert_double_eq_tol(k.usable, 0.9 * 150109880320.0, 1e-3);
    ck_assert_double_eq_tol(k.device_memory, 143771.0 * MIB, 1e-3);
    scn_error e;
    char y[600];
    snprintf(y, sizeof y, "model: llama-3-8b\nhardware: {name: x, memory: 80 GiB, memory_reserved: 80 GiB, "
             "memory_bandwidth: 2 TB/s, compute: {bf16: 300 TFLOPS}}\n"
             "workload: {requests: 10, arrival: {process: offline}, prompt_tokens: 100, output_tokens: 100}\n");
    ck_assert_int_eq(t_load(y, NULL, 0, &s, &e), SCN_E_DATA);
    ck_assert_msg(strstr(e.path, "memory_reserved") && strstr(e.msg, "less than memory") && e.line > 0, "%s: %s", e.path, e.msg);
    /* `kvplan memory` shows the CUDA total the budget came from. */
    const char *p = t_write("cuda-total.yaml", "name: t\nmodel: llama-3-8b\nhardware: h200\nengine: vllm\n"
                            "workload: {requests: 10, arrival: {process: offline}, prompt_tokens: 100, output_tokens: 100}\n");
    static char out[65536], errs[4096];
    char args[700];
    snprintf(args, sizeof args, "memory '%s' --format json", p);
    ck_assert_int_eq(t_run(args, out, sizeof out, errs, sizeof errs), 0);
    ck_assert_msg(strstr(out, "\"cuda_bytes\": 150109880320"), "%s", out);
}
END_TEST

static const char *engine_scn(const char *engine, int tp, const char *util)
{
    static char y[600];
    snprintf(y, sizeof y, "name: t\nmodel: llama-3-8b\nhardware: h100-sxm\nengine: %s\n"
             "deployment: {tensor_parallel: %d%s%s}\n"
             "workload: {requests: 10, arrival: {process: offline}, prompt_tokens: 100, output_tokens: 100}\n",
             engine, tp, util ? ", gpu_memory_utilization: " : "", util ? util : "");
    return y;
}

START_TEST(sglang_static_fraction_by_tp)
{
    /* SGLang: KV = mem_fraction_static * (memory free at start-up) - weights; the fraction
     * defaults by TP size (0.88 at 1, 0.85 from 4), and a scenario's own value wins. */
    scn_error e;
    double free0 = 81559 * MIB - 0.43 * GIB - 1 * GIB, w1 = 8030261248.0 * 2;
    ck_assert_int_eq(t_load(engine_scn("sglang", 1, NULL), NULL, 0, &s, &e), SCN_OK);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_capacity k = kv_capacity_compute(&s, &c, 16, 0);
    ck_assert(fabs(k.kv_budget - (0.88 * free0 - w1)) < 1e-3);
    ck_assert(k.activation == 0);   /* activations live outside the static fraction */
    ck_assert_int_eq(t_load(engine_scn("sglang", 4, NULL), NULL, 0, &s, &e), SCN_OK);
    k = kv_capacity_compute(&s, &c, 16, 0);
    ck_assert(fabs(k.kv_budget - (0.85 * free0 - k.weights)) < 1e-3);
    ck_assert_int_eq(t_load(engine_scn("sglang", 4, "0.93"), NULL, 0, &s, &e), SCN_OK);
    k = kv_capacity_compute(&s, &c, 16, 0);
    ck_assert(fabs(k.kv_budget - (0.93 * free0 - k.weights)) < 1e-3);
}
END_TEST

/* Llama-3-8B bf16 at TP 1 on an H100 under a TensorRT-LLM profile: the KV budget, and by hand
 * what is free once the runtime, weights and activation buffers are in place. */
static double trt_budget(const char *engine, double *free_left)
{
    scn_error e;
    ck_assert_int_eq(t_load(engine_scn(engine, 1, NULL), NULL, 0, &s, &e), SCN_OK);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    double act = kv_activation_bytes(&s.model, 1, s.deployment.max_num_batched_tokens, s.deployment.max_num_seqs);
    *free_left = 81559 * MIB - 0.43 * GIB - 1 * GIB - 8030261248.0 * 2 - act;
    return kv_capacity_compute(&s, &c, 16, 0).kv_budget;
}

START_TEST(trtllm_fraction_of_free_memory)
{
    /* TensorRT-LLM: KV = 0.9 * (memory - runtime - weights - activation buffers). */
    double free_left, budget = trt_budget("trtllm", &free_left);
    ck_assert(fabs(budget - 0.9 * free_left) < 1e-3);
    /* The three engines order as their rules say on the same GPU: SGLang's 0.88 of free memory
     * without activations above TensorRT-LLM's 0.9 of what is left, the latter above 0. */
    ck_assert(budget > 0);
}
END_TEST

START_TEST(trtllm_06_session_sizes_the_cache_to_the_batch)
{
    /* trtllm-v0.6 (gptSessionBenchmark): the session sizes its cache to the batch, so the whole
     * of what is free once the runtime, weights and activation buffers are in place may hold it:
     * fraction 1 at every TP size, against trtllm-v0's 0.9 (docs/cost-model.md, "Memory budget
     * and capacity"). */
    scn_error e;
    double free_left, free0;
    ck_assert(fabs(trt_budget("trtllm-v0.6", &free_left) - free_left) < 1e-3);
    ck_assert(fabs(trt_budget("trtllm-v0", &free0) - 0.9 * free0) < 1e-3);
    /* The entry for tp 1 holds from there up: at TP 4 the budget is all of each rank's rest. */
    ck_assert_int_eq(t_load(engine_scn("trtllm-v0.6", 4, NULL), NULL, 0, &s, &e), SCN_OK);
    ck_assert_double_eq(scn_engine_mem_fraction(&s.engine, &s.deployment, &s.hardware), 1.0);
    ck_assert_int_eq(t_load(engine_scn("trtllm-v0", 4, NULL), NULL, 0, &s, &e), SCN_OK);
    ck_assert_double_eq_tol(scn_engine_mem_fraction(&s.engine, &s.deployment, &s.hardware), 0.9, 1e-12);
}
END_TEST

START_TEST(memory_section_errors_are_located)
{
    static const char *const bad[][2] = {
        {"memory: {budget: half}", "budget"},
        {"memory: {budget: static, fraction_by_tp: [{tp: 1, fraction: 0.8}, {tp: 1, fraction: 0.9}]}", "ascending"},
        {"memory: {budget: static, fraction_by_tp: [{tp: 2, fraction: 0.8}, {tp: 4, fraction: 0.9}]}", "first entry must be tp 1"},
        {"memory: {budget: static, fraction_by_tp: [{tp: 1, fraction: 1.5}]}", "fraction"},
        {"memory: {budget: static, fraction_by_tp: [{tp: 1}]}", "tp and fraction"},
        {"memory: {budget: total, non_torch: 3}", "non_torch"},
        {"memory: {budget: static, held_allreduce: true}", "held_allreduce goes with budget total or device"},
        {"memory: {budget: device, held_allreduce: 2}", "held_allreduce"},
        {"chunked_prefill: {at_least_max_model_len: yes please}", "at_least_max_model_len"},
        {"chunked_prefill: {long_context: {max_num_batched_tokens: 512}}", "needs above"},
        {"chunked_prefill: {long_context: {above: 32768}}", "needs max_num_batched_tokens"},
        {"chunked_prefill: {long_context: {above: 32768, max_num_batched_tokens: 0}}", "max_num_batched_tokens"},
        {"chunked_prefill: {long_context: {above: 32768, budget: 512}}", "budget"},
        {"chunked_prefill: {unchunked_mla: maybe}", "unchunked_mla"},
        {"memory: {budget: total, moe_chunk: 0}", "moe_chunk"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char y[700];
        snprintf(y, sizeof y, "name: t\nmodel: llama-3-8b\nhardware: h100-sxm\nengine: {name: x, %s}\n"
                 "workload: {requests: 10, arrival: {process: offline}, prompt_tokens: 100, output_tokens: 100}\n",
                 bad[i][0]);
        scn_error e;
        ck_assert_int_eq(t_load(y, NULL, 0, &s, &e), SCN_E_DATA);
        ck_assert_msg(strstr(e.msg, bad[i][1]) || strstr(e.path, bad[i][1]), "%zu: %s: %s", i, e.path, e.msg);
        ck_assert_msg(e.line > 0, "%zu: no location", i);
    }
}
END_TEST

static scn_status load_on(const char *engine, const char *hw, const char *deploy, scn_error *e)
{
    char y[900];
    snprintf(y, sizeof y, "name: t\nmodel: llama-3-8b\nhardware: %s\nengine: %s\n%s"
             "workload: {requests: 10, arrival: {process: offline}, prompt_tokens: 100, output_tokens: 100}\n",
             hw, engine, deploy);
    return t_load(y, NULL, 0, &s, e);
}

START_TEST(engine_batch_defaults_by_gpu)
{
    /* `vllm serve` (EngineArgs.get_batch_defaults, OPENAI_API_SERVER): a GPU of at least 70 GiB
     * whose name is not an A100's runs 1024 sequences and 8192 tokens a step, any other 256 and
     * 2048 (the L40S has 45 GiB; the A100 80 GB is excluded by name). SGLang's running-request
     * cap is at least 2048 (its chunked prefill stays 8192); TensorRT-LLM's BuildConfig has
     * max_batch_size 2048 and max_num_tokens 8192. */
    static const struct { const char *engine, *hw; int seqs, tokens; } want[] = {
        {"vllm", "h100-sxm", 1024, 8192}, {"vllm", "h200", 1024, 8192},   {"vllm", "a100-80g", 256, 2048},
        {"vllm", "a100-40g", 256, 2048},  {"vllm", "l40s", 256, 2048},    {"sglang", "h100-sxm", 2048, 8192},
        {"sglang", "a100-80g", 2048, 8192}, {"trtllm", "h200", 2048, 8192},
    };
    scn_error e;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        ck_assert_int_eq(load_on(want[i].engine, want[i].hw, "", &e), SCN_OK);
        ck_assert_msg(s.deployment.max_num_seqs == want[i].seqs && s.deployment.max_num_batched_tokens == want[i].tokens,
                      "%s on %s: %d sequences, %d tokens", want[i].engine, want[i].hw, s.deployment.max_num_seqs,
                      s.deployment.max_num_batched_tokens);
    }
    /* A scenario's own limits win over the engine's. */
    ck_assert_int_eq(load_on("vllm", "h100-sxm", "deployment: {max_num_seqs: 64, max_num_batched_tokens: 512}\n", &e), SCN_OK);
    ck_assert_int_eq(s.deployment.max_num_seqs, 64);
    ck_assert_int_eq(s.deployment.max_num_batched_tokens, 512);
    /* A rule without a token budget keeps the chunked-prefill one; the first matching rule wins,
     * and a GPU no rule matches keeps kvplan's own 256. */
    ck_assert_int_eq(load_on("{name: x, chunked_prefill: {max_num_batched_tokens: 4096}, batch_defaults: "
                             "[{min_memory: 200 GiB, max_num_seqs: 8}, {except: [h100], max_num_seqs: 16}, "
                             "{min_memory: 1 GiB, max_num_seqs: 32}]}", "h100-sxm", "", &e), SCN_OK);
    ck_assert_int_eq(s.deployment.max_num_seqs, 32);
    ck_assert_int_eq(s.deployment.max_num_batched_tokens, 4096);
    ck_assert_int_eq(load_on("{name: x, batch_defaults: [{min_memory: 200 GiB, max_num_seqs: 8}]}", "h100-sxm", "", &e), SCN_OK);
    ck_assert_int_eq(s.deployment.max_num_seqs, 256);
}
END_TEST

START_TEST(batch_defaults_errors_are_located)
{
    static const char *const bad[][2] = {
        {"batch_defaults: {max_num_seqs: 8}", "expected a list"},
        {"batch_defaults: [{min_memory: 70 GiB}]", "needs max_num_seqs"},
        {"batch_defaults: [{max_num_seqs: 0}]", "max_num_seqs"},
        {"batch_defaults: [{max_num_seqs: 8, except: a100}]", "hardware name parts"},
        {"batch_defaults: [{max_num_seqs: 8, gpus: 2}]", "gpus"},
        {"batch_defaults: [{max_num_seqs: 8, min_memory: lots}]", "min_memory"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char eng[300];
        snprintf(eng, sizeof eng, "{name: x, %s}", bad[i][0]);
        scn_error e;
        ck_assert_int_eq(load_on(eng, "h100-sxm", "", &e), SCN_E_DATA);
        ck_assert_msg(strstr(e.msg, bad[i][1]) || strstr(e.path, bad[i][1]), "%zu: %s: %s", i, e.path, e.msg);
        ck_assert_msg(e.line > 0 && strstr(e.path, "engine.batch_defaults"), "%zu: %s line %d", i, e.path, e.line);
    }
}
END_TEST

START_TEST(paging_beats_contiguous_at_every_length)
{
    t_library("llama-2-13b", "a100-80g", &s);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_FP16, 0, 0);
    for (double L = 64; L < 4096; L *= 2) {
        kv_capacity k = kv_capacity_compute(&s, &c, 16, L);
        ck_assert_msg(k.max_seqs_paged > k.max_seqs_contiguous, "L=%g", L);
    }
    /* At max_model_len they meet: every sequence needs its full reservation. */
    kv_capacity k = kv_capacity_compute(&s, &c, 16, 4096);
    ck_assert_int_eq(k.max_seqs_paged, k.max_seqs_contiguous);
}
END_TEST

START_TEST(fp8_doubles_capacity)
{
    t_library("llama-3-8b", "h200", &s);
    kv_cache_cfg b = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0), f = kv_cache_cfg_make(&s, SCN_DTYPE_FP8, 0, 0);
    kv_capacity kb = kv_capacity_compute(&s, &b, 16, 0), kf = kv_capacity_compute(&s, &f, 16, 0);
    ck_assert(kb.kv_budget == kf.kv_budget);
    ck_assert(labs(kf.capacity_tokens - 2 * kb.capacity_tokens) <= 1);
}
END_TEST

START_TEST(model_that_does_not_fit)
{
    t_library("llama-3-70b", "rtx-4090", &s);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_capacity k = kv_capacity_compute(&s, &c, 16, 0);
    ck_assert(k.kv_budget < 0);
    ck_assert_int_eq(k.capacity_tokens, 0);
    ck_assert_int_eq(k.max_seqs_paged, 0);
    ck_assert_int_eq(k.max_seqs_contiguous, 0);
}
END_TEST

START_TEST(tensor_parallel_frees_memory_per_rank)
{
    t_library("llama-3-70b", "h100-sxm", &s);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    s.deployment.tensor_parallel = 4;
    kv_capacity k4 = kv_capacity_compute(&s, &c, 16, 0);
    s.deployment.tensor_parallel = 8;
    kv_capacity k8 = kv_capacity_compute(&s, &c, 16, 0);
    ck_assert(k8.weights < k4.weights && k8.kv_budget > k4.kv_budget);
    /* Per-rank KV per token halves (8 KV heads over 4 then 8 ranks). */
    ck_assert(k4.kv_bytes_per_token == 2 * k8.kv_bytes_per_token);
}
END_TEST

START_TEST(block_waste_is_half_a_block)
{
    /* Lengths uniform modulo b leave (b - 1) / 2 slots empty on average: check by enumeration. */
    for (int b = 1; b <= 64; b *= 2) {
        double sum = 0;
        for (int len = 1; len <= b * 100; len++) sum += (double)((len + b - 1) / b * b - len);
        ck_assert(fabs(sum / (b * 100) - kv_expected_block_waste(b)) < 1e-12);
    }
}
END_TEST


START_TEST(longest_context_is_capped_at_max_model_len)
{
    /* Issue 16, finding 5: capacity said 43,887 tokens for Llama-3-70B, whose limit is 8,192.
     * With 4 H100s and one sequence the memory would hold far more than 8192 tokens; no request
     * may be longer than max_model_len, so the answer is 8192. */
    t_library("llama-3-70b", "h100-sxm", &s);
    s.deployment.tensor_parallel = 4;
    ck_assert_int_eq(s.deployment.max_model_len, 8192);
    plan_cand c;
    memset(&c, 0, sizeof c);
    c.c = (sim_choice){.layout = SCN_LAYOUT_PAGED, .block_size = 16, .kv_dtype = SCN_DTYPE_BF16};
    c.tp = 4;
    c.replicas = 1;
    c.max_num_seqs = s.deployment.max_num_seqs;
    c.max_batched = s.deployment.max_num_batched_tokens;
    c.hw = c.wformat = c.engine = -1;   /* the scenario's own hardware, weights and engine */
    kv_cache_cfg kc = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_capacity cap = kv_capacity_compute(&s, &kc, 16, 0);
    ck_assert(kv_bytes_for_context(&s.model, &kc, 4, 8192) < cap.kv_budget);   /* memory alone would allow more */
    ck_assert_int_eq(plan_max_context(&s, &c, 1), 8192);
    /* Where memory binds first, the answer is the memory's: 1000 sequences of it fit, one token more does not. */
    long ctx = plan_max_context(&s, &c, 1000);
    ck_assert(ctx > 0 && ctx < 8192);
    ck_assert(kv_bytes_for_context(&s.model, &kc, 4, ctx) <= cap.kv_budget / 1000);
    ck_assert(kv_bytes_for_context(&s.model, &kc, 4, ctx + 1) > cap.kv_budget / 1000);
}
END_TEST

Suite *suite_capacity(void)
{
    Suite *su = suite_create("capacity");
    TCase *tc = tcase_create("budget");
    tcase_add_test(tc, chat_budget_by_hand);
    tcase_add_test(tc, vllm_profile_peak_matches_its_log);
    tcase_add_test(tc, sglang_static_fraction_by_tp);
    tcase_add_test(tc, trtllm_fraction_of_free_memory);
    tcase_add_test(tc, trtllm_06_session_sizes_the_cache_to_the_batch);
    tcase_add_test(tc, memory_section_errors_are_located);
    tcase_add_test(tc, engine_batch_defaults_by_gpu);
    tcase_add_test(tc, batch_defaults_errors_are_located);
    tcase_add_test(tc, paging_beats_contiguous_at_every_length);
    tcase_add_test(tc, fp8_doubles_capacity);
    tcase_add_test(tc, model_that_does_not_fit);
    tcase_add_test(tc, tensor_parallel_frees_memory_per_rank);
    tcase_add_test(tc, block_waste_is_half_a_block);
    tcase_add_test(tc, longest_context_is_capped_at_max_model_len);
    tcase_add_test(tc, vllm_02_profiler_counts_the_device);
    tcase_add_test(tc, unchunked_budget_covers_max_model_len);
    tcase_add_test(tc, vllm_v0_batch_defaults_by_model);
    tcase_add_test(tc, engine_chunking_rules);
    tcase_add_test(tc, fused_moe_chunk_bounds_the_expert_outputs);
    tcase_add_test(tc, engines_see_the_cuda_total);
    tcase_add_test(tc, vllm_v0_profile_peak_is_the_sampler_at_either_tp);
    suite_add_tcase(su, tc);
    return su;
}
