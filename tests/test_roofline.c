/* test_roofline.c: step time against independent references: "decode reads every weight byte
 * once plus every cached KV byte", "prefill does 2 flops per parameter per token", brute-force
 * sums over query and key positions, and the expected-experts formula checked by simulation. */
#include "tests.h"
#include "../model/kv_model.h"
#include "../model/kv_moe_parallel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static scn_scenario s;

/* Loads `model` on an ideal H100: efficiencies 1 and no fixed overheads (no CPU work, no
 * graph or launch gaps), so times are pure bytes / bandwidth or flops / peak. */
static void ideal(const char *model)
{
    char m[96];
    snprintf(m, sizeof m, "model=%s", model);
    const char *sets[] = {m, "hardware=h100-sxm", "hardware.efficiency={memory_bandwidth: 1, compute: 1, attention: 1, interconnect: 1}",
                          "hardware.overhead={kernel_launch: 0 s, step: 0 s}",
                          "engine.cpu={step: 0 s, per_sequence: 0 s}", "engine.cuda_graphs={enabled: false}"};
    scn_error e;
    char path[600];
    snprintf(path, sizeof path, "%s/chat.yaml", getenv("KVPLAN_LIBRARY"));
    ck_assert_int_eq(scn_scenario_load(path, sets, 6, &s, &e), SCN_OK);
}

static double total(const kv_step_cost *c, int field)
{
    double t = 0;
    for (int i = 0; i < KV_OP_COUNT; i++) t += field ? c->op[i].flops : c->op[i].bytes;
    return t;
}

START_TEST(decode_reads_weights_once_plus_kv)
{
    ideal("llama-2-7b");
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_FP16, 0, 0);
    kv_seq_work w = {1, 4095};
    kv_step_cost r = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    /* Weights read: every parameter but the input embedding table (a one-row lookup). KV:
     * 4096 tokens * 512 KiB. Activations are a rounding error at batch 1. */
    double weights = (6738415616.0 - 32000.0 * 4096) * 2, kv = 4096 * 512 * KIB;
    double bytes = total(&r, 0);
    ck_assert_msg(fabs(bytes / (weights + kv) - 1) < 0.005, "bytes %.6g vs %.6g", bytes, weights + kv);
    ck_assert_int_eq(r.bound, KV_BOUND_MEMORY);
    /* The GEMMs' memory time is bytes / bandwidth exactly; the smooth roofline adds their compute
     * time in quadrature, a few per cent at batch 1 (docs/cost-model.md, "Efficiency from shapes"). */
    double tm = 0, wb = 0;
    for (int i = KV_OP_QKV; i <= KV_OP_MLP; i++) if (i != KV_OP_ATTENTION) { tm += r.op[i].t_memory; wb += r.op[i].bytes; }
    ck_assert_msg(fabs(tm / (wb / 3.35e12) - 1) < 1e-12, "GEMM memory time is bytes / bandwidth");
    ck_assert_msg(r.seconds >= bytes / 3.35e12 && r.seconds < 1.06 * bytes / 3.35e12, "memory-bound step %.6g vs %.6g",
                  r.seconds, bytes / 3.35e12);
}
END_TEST

/* gpt-oss keeps attention in bf16 while its experts are MXFP4 (config.json quantization_config):
 * a batch-1 decode step reads the attention projections at 2 B a weight, 36 * (2880 * 5120 +
 * 4096 * 2880) * 2 = 1910292480 B, not at the experts' 0.53125 B. Activations and the rotary
 * kernel's traffic are a few hundred KB at batch 1. */
START_TEST(experts_only_checkpoint_reads_attention_in_bf16)
{
    ideal("gpt-oss-120b");
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w = {1, 100};
    kv_step_cost r = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    double attn = 36.0 * (2880.0 * 5120 + 4096.0 * 2880) * 2;
    double got = r.op[KV_OP_QKV].bytes + r.op[KV_OP_OUT_PROJ].bytes;
    ck_assert_msg(got >= attn && got < attn * 1.005, "attention projections read %.6g B, weights %.6g B", got, attn);
}
END_TEST

/* Meta's fp8_mixed 405B (llama-3.1-405b-fp8) keeps attention and the MLPs of layers 0 and 125
 * in bf16. Batch-1 decode at TP 8 on the ideal H100: the projections read 126 * (16384 * 2304 +
 * 2048 * 16384) * 2 = 17985175552 B (q|k|v 16384 x (2048 + 2 * 128) per rank, o 2048 x 16384),
 * exactly the bf16 model's; the MLP reads 124 layers of fp8 weights with a 4 B scale per 16384
 * inputs and 2 of bf16: 3 * 16384 * 6656 = 327155712 weights a layer and rank, so 124 *
 * 327155712 * (1 + 4/16384) + 2 * 327155712 * 2 = 41872220832 B; activations add a few MB. Their
 * compute runs at bf16's rate: the projections' t_compute equals the bf16 model's. */
START_TEST(mlp_only_checkpoint_reads_attention_in_bf16)
{
    ideal("llama-3.1-405b-fp8");
    s.deployment.tensor_parallel = 8;
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w = {1, 100};
    kv_step_cost r = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    double proj = 126.0 * (16384.0 * 2304 + 2048.0 * 16384) * 2;
    double got = r.op[KV_OP_QKV].bytes + r.op[KV_OP_OUT_PROJ].bytes;
    ck_assert_msg(got >= proj && got < proj * 1.001, "projections read %.6g B, weights %.6g B", got, proj);
    double mlp = 124.0 * 327155712 * (1 + 4.0 / 16384) + 2.0 * 327155712 * 2;
    ck_assert_msg(r.op[KV_OP_MLP].bytes >= mlp && r.op[KV_OP_MLP].bytes < mlp * 1.001, "MLP read %.6g B, weights %.6g B",
                  r.op[KV_OP_MLP].bytes, mlp);
    double qkv_t = r.op[KV_OP_QKV].t_compute;
    ideal("llama-3.1-405b");
    s.deployment.tensor_parallel = 8;
    kv_step_cost b = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    ck_assert(b.op[KV_OP_QKV].bytes == r.op[KV_OP_QKV].bytes);
    ck_assert(b.op[KV_OP_QKV].t_compute == qkv_t);
}
END_TEST

START_TEST(prefill_is_two_flops_per_parameter_per_token)
{
    ideal("llama-3-8b");
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    long T = 4096;
    kv_seq_work w = {T, 0};
    kv_step_cost r = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    /* GEMMs: 2 * T * (attention + MLP parameters) + the LM head for one token. */
    double per_layer = 2.0 * 4096 * 4096 + 2.0 * 4096 * 1024 + 3.0 * 4096 * 14336;
    double gemm = 2.0 * T * per_layer * 32 + 2.0 * 4096 * 128256;
    double got = r.op[KV_OP_QKV].flops + r.op[KV_OP_OUT_PROJ].flops + r.op[KV_OP_MLP].flops + r.op[KV_OP_LM_HEAD].flops;
    ck_assert_msg(fabs(got / gemm - 1) < 1e-12, "%.10g vs %.10g", got, gemm);
    /* Causal attention: 4 * heads * head_dim flops per (query, key) pair, T(T+1)/2 pairs. */
    ck_assert(fabs(r.op[KV_OP_ATTENTION].flops - 4.0 * 4096 * (T * (T + 1) / 2.0) * 32) < 1);
    ck_assert_int_eq(r.bound, KV_BOUND_COMPUTE);
}
END_TEST

/* Brute force: sum over each new query of the keys it sees, capped. */
static double brute_keys(long ctx, long n, long cap)
{
    double k = 0;
    for (long j = 1; j <= n; j++) { long v = ctx + j; k += cap > 0 && v > cap ? cap : v; }
    return k;
}

/* docs/cost-model.md, "Elementwise kernels": SiLU*mul and rotary are kernels of their own between
 * GEMMs; in a compute-bound prefill their memory time adds to the GEMMs' roofline instead of
 * hiding under it. Byte counts from the model's shape by hand; times from the definition. */
START_TEST(prefill_elementwise_kernels_add_to_the_gemms)
{
    ideal("llama-3-8b");
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    const double bw = 3.35e12, T = 2048, L = 32;
    kv_seq_work w = {(long)T, 0};
    kv_step_cost r = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    /* SiLU*mul reads gate|up (2 x 14336) and writes the product (14336); rotary reads and writes
     * the 32 query and 8 key heads of 128; 16-bit, every layer. */
    double act = 3.0 * T * 14336 * 2 * L, rot = 2.0 * T * (32 + 8) * 128 * 2 * L;
    const kv_op_cost *mlp = &r.op[KV_OP_MLP], *qkv = &r.op[KV_OP_QKV];
    ck_assert_msg(fabs(mlp->serial_bytes / act - 1) < 1e-12, "SiLU*mul bytes %.6g vs %.6g", mlp->serial_bytes, act);
    ck_assert_msg(fabs(qkv->serial_bytes / rot - 1) < 1e-12, "rotary bytes %.6g vs %.6g", qkv->serial_bytes, rot);
    const kv_op_cost *ops[] = {mlp, qkv};
    for (int i = 0; i < 2; i++) {
        const kv_op_cost *o = ops[i];
        double rest = (o->bytes - o->serial_bytes) / bw, alone = o->serial_bytes / bw;
        double want = sqrt(o->t_compute * o->t_compute + rest * rest) + alone + o->t_overhead;
        ck_assert_msg(fabs(o->seconds / want - 1) < 1e-12, "op %d: %.9g s vs %.9g s", i, o->seconds, want);
        /* Compute-bound: folding the bytes into the roofline (the old pricing) would have hidden
         * most of them (the quadrature sum counts a part); here they cost their whole streaming time. */
        double folded = sqrt(o->t_compute * o->t_compute + (o->bytes / bw) * (o->bytes / bw)) + o->t_overhead;
        ck_assert_msg(o->seconds - folded > 0.5 * alone, "op %d: %.6g s over the folded roofline, the kernel streams %.6g s", i,
                      o->seconds - folded, alone);
    }
    /* Decode: the same kernels move a few hundred KiB against GiB of weights. */
    kv_seq_work d = {1, 1023};
    kv_step_cost q = kv_step_time(&s, &c, SCN_ATTN_FLASH, &d, 1);
    ck_assert(q.op[KV_OP_MLP].serial_bytes / bw < 1e-3 * q.op[KV_OP_MLP].seconds);
}
END_TEST

START_TEST(attention_flops_match_brute_force_with_windows)
{
    ideal("mistral-7b");   /* every layer windowed at 4096 */
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    long cases[][2] = {{0, 1}, {0, 5000}, {3000, 2000}, {4095, 1}, {9000, 700}, {100, 100}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kv_seq_work w = {cases[i][1], cases[i][0]};
        kv_step_cost r = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
        double want = 4.0 * 32 * 128 * brute_keys(cases[i][0], cases[i][1], 4096) * 32;
        ck_assert_msg(fabs(r.op[KV_OP_ATTENTION].flops - want) < 1e-6 * want, "ctx %ld new %ld", cases[i][0], cases[i][1]);
    }
    /* StreamingLLM sink 4 + window 508 caps at 512, tighter than the model's window. */
    c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 4, 508);
    kv_seq_work w = {300, 400};
    kv_step_cost r = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    ck_assert(fabs(r.op[KV_OP_ATTENTION].flops - 4.0 * 32 * 128 * brute_keys(400, 300, 512) * 32) < 1);
    /* Decode attention bytes stop growing once the window is full. */
    c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work a = {1, 5000}, b = {1, 20000};
    ck_assert(kv_step_time(&s, &c, SCN_ATTN_FLASH, &a, 1).op[KV_OP_ATTENTION].bytes ==
              kv_step_time(&s, &c, SCN_ATTN_FLASH, &b, 1).op[KV_OP_ATTENTION].bytes);
}
END_TEST

START_TEST(naive_attention_moves_the_score_matrix)
{
    ideal("llama-3-8b");
    s.hardware.l2_cache = 0;   /* every re-read from device memory: the formula without cache reuse */
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    long n = 2048;
    kv_seq_work w = {n, 0};
    kv_step_cost f = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1), nv = kv_step_time(&s, &c, SCN_ATTN_NAIVE, &w, 1);
    /* Scores and probabilities, 32 heads x n x n in 16-bit, each written and read once. */
    double scores = 4.0 * 32 * n * n * 2 * 32;
    double extra = nv.op[KV_OP_ATTENTION].bytes - f.op[KV_OP_ATTENTION].bytes;
    /* Flash re-reads K/V once per 128-row tile: tile t (1..16) reads the 128 t keys it can see,
     * 128 * (1 + ... + 16) = 17408 tokens; naive reads the 2048 once. 4096 B per token per layer. */
    double kv_diff = (2048.0 - 17408.0) * 4096 * 32;
    ck_assert_msg(fabs(extra - (scores + kv_diff)) < 1e-9 * scores, "%.10g vs %.10g", extra, scores + kv_diff);
    ck_assert(nv.op[KV_OP_ATTENTION].seconds > f.op[KV_OP_ATTENTION].seconds);
    /* Naive does not skip the masked half. */
    ck_assert(fabs(nv.op[KV_OP_ATTENTION].flops - 4.0 * 4096 * n * n * 32) < 1);
}
END_TEST

START_TEST(moe_decode_touches_experts_as_expected)
{
    ideal("mixtral-8x7b");
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    double expert = 3.0 * 4096 * 14336 * 2 * 32;   /* one expert's bytes over all layers */
    kv_seq_work one = {1, 100};
    double b1 = kv_step_time(&s, &c, SCN_ATTN_FLASH, &one, 1).op[KV_OP_MLP].bytes;
    ck_assert(fabs(b1 / (2 * expert) - 1) < 0.01);   /* one token reads its top-2 experts */
    /* Simulate uniform top-2 routing of 16 tokens over 8 experts; compare expected distinct experts. */
    srand(7);
    double sum = 0;
    int trials = 20000;
    for (int t = 0; t < trials; t++) {
        int hit[8] = {0}, n = 0;
        for (int tok = 0; tok < 16; tok++) {
            int a = rand() % 8, b;
            do b = rand() % 8; while (b == a);
            hit[a] = hit[b] = 1;
        }
        for (int e = 0; e < 8; e++) n += hit[e];
        sum += n;
    }
    kv_seq_work many[16];
    for (int i = 0; i < 16; i++) many[i] = (kv_seq_work){1, 100};
    double b16 = kv_step_time(&s, &c, SCN_ATTN_FLASH, many, 16).op[KV_OP_MLP].bytes;
    ck_assert_msg(fabs(b16 / expert - sum / trials) < 0.05, "%.4f experts vs simulated %.4f", b16 / expert, sum / trials);
}
END_TEST

START_TEST(tensor_parallel_adds_allreduce)
{
    ideal("llama-3-70b");
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w = {512, 0};
    kv_step_cost r1 = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    ck_assert(r1.op[KV_OP_ALLREDUCE].seconds == 0);
    s.deployment.tensor_parallel = 4;
    kv_step_cost r4 = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    /* Ring all-reduce: each rank sends 2 (p-1)/p of the 512 x 8192 x 2 B message, twice a layer;
     * and V1's sampler all-gathers the one sampled row's logits (128 256 x 2 B), (p-1)/p of them
     * into each rank (docs/cost-model.md, "The sampler in the step"). */
    double msg = 512.0 * 8192 * 2;
    double gather = 3.0 / 4 * 128256 * 2;
    ck_assert_msg(fabs(r4.op[KV_OP_ALLREDUCE].net_bytes - (2 * 80 * 2.0 * 3 / 4 * msg + gather)) < 1, "%.1f",
                  r4.op[KV_OP_ALLREDUCE].net_bytes);
    ck_assert(fabs(r4.op[KV_OP_MLP].flops * 4 - r1.op[KV_OP_MLP].flops) < 1e-3 * r1.op[KV_OP_MLP].flops);
}
END_TEST

/* The engine's fixed costs (docs/cost-model.md, "Engine profiles"): the model changed here
 * from a flat 2 ms + 4 us per kernel to the engine profile's CPU and launch terms. */
START_TEST(overheads_are_added)
{
    t_library("llama-3-8b", "h100-sxm", &s);   /* engine vllm: 0.5 ms + 5 us/seq CPU, serial; graphs */
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w = {1, 10};
    kv_step_cost r = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    /* Per layer: 2 norms, qkv GEMM + rotary, attention write + kernel, out proj, 3 MLP kernels;
     * plus the embedding, the LM head's 2 and V1's sampler's 2 (fp32 cast, argmax; TP 1: no
     * gather). */
    double kernels = 1 + 32 * (2 + 2 + 2 + 1 + 3) + 2 + 2;
    ck_assert(r.graph && r.graph_batch == 1);
    /* A captured decode step: 3 us per kernel boundary in the graph, one 10 us graph launch, and
     * the CPU's 0.5 ms + 5 us serial with the GPU. */
    double launch = 0;
    for (int i = 0; i < KV_OP_COUNT; i++) if (i != KV_OP_STEP) launch += r.op[i].t_overhead;
    ck_assert_msg(fabs(launch - kernels * 3e-6) < 1e-12, "%.9g", launch);
    ck_assert(fabs(r.op[KV_OP_STEP].seconds - (10e-6 + 0.5e-3 + 5e-6)) < 1e-12);
    /* Asynchronous scheduling hides CPU work shorter than the GPU's step. */
    s.engine.async_scheduling = true;
    kv_step_cost a = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    ck_assert(a.gpu_seconds > a.cpu_seconds && fabs(a.op[KV_OP_STEP].seconds - 10e-6) < 1e-12);
    /* A prefill is not captured: eager launches hide behind kernels longer than 4 us, so what
     * shows is each kernel's 3 us boundary, and 4 us where launches outpace short kernels. */
    s.engine.async_scheduling = false;
    kv_seq_work p = {2048, 0};
    kv_step_cost e = kv_step_time(&s, &c, SCN_ATTN_FLASH, &p, 1);
    ck_assert(!e.graph);
    double shown = 0;
    for (int i = 0; i < KV_OP_COUNT; i++) if (i != KV_OP_STEP) shown += e.op[i].t_overhead;
    ck_assert(shown >= kernels * 3e-6 - 1e-12 && shown < kernels * 4e-6);
    /* 96 MLP kernels of ~40 us each hide their launches: only the boundaries show. */
    ck_assert(fabs(e.op[KV_OP_MLP].t_overhead - 96 * 3e-6) < 1e-12);
}
END_TEST

/* The graph's per-kernel boundary cost against the measurement it is derived from (docs/cost-
 * model.md, "Engine profiles"): Hazy Research, "Look Ma, No Bubbles!" (2025-05-27), H100,
 * Llama-3.2-1B, batch 1: SGLang uses at most 50 % of the memory bandwidth, and a fused kernel at
 * 78 % is over 1.5x faster. */
START_TEST(graph_boundaries_match_the_published_batch1_decode)
{
    scn_error e;
    const char *y = "name: t\nmodel: llama-3.2-1b\nhardware: h100-sxm\nengine: sglang\n"
                    "workload: {requests: 10, arrival: {process: offline}, prompt_tokens: 32, output_tokens: 128}\n";
    ck_assert_int_eq(t_load(y, NULL, 0, &s, &e), SCN_OK);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w = {1, 100};
    kv_step_cost r = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    double bytes = 0;
    for (int i = 0; i < KV_OP_COUNT; i++) bytes += r.op[i].bytes;
    double bw = s.hardware.memory_bandwidth;
    /* At most 50 % of the bandwidth: the step is at least bytes / (0.5 bw), and the fused kernel
     * (78 %) beats it by 1.5x or more; 3 % slack for the blog's rounded percentages. */
    ck_assert_msg(r.seconds >= 0.97 * bytes / (0.5 * bw), "%.4g ms vs %.4g", r.seconds * 1e3, bytes / (0.5 * bw) * 1e3);
    ck_assert_msg(r.seconds >= 0.97 * 1.5 * bytes / (0.78 * bw), "%.4g ms", r.seconds * 1e3);
    /* ... and not far beyond: "at most 50 %" with "over 1.5x" puts it near both bounds. */
    ck_assert_msg(r.seconds <= 1.05 * bytes / (0.5 * bw), "%.4g ms", r.seconds * 1e3);
}
END_TEST

/* Kernels a DeepSeek-V3 decode step launches (docs/cost-model.md, "Kernels per layer"), counted
 * by hand: embedding 1; per layer 2 norms and the 2 MLA latent norms (kv_a, q_a), the query-LoRA
 * and kv_a GEMMs, the q_b GEMM and rotary (3), attention's cache write, kernel and absorption
 * (3), the output projection (1); 3 dense MLP layers of 3; 58 MoE layers of 7 fused-MoE kernels,
 * 2 quantisations of the grouped GEMMs' fp8 inputs (the checkpoint's fp8 runs in fp8 on an H200)
 * and the shared expert's 3; the LM head's 2; V1's sampler (the default engine, vllm): the fp32
 * cast and the argmax (2) after the all-gather of the vocabulary shards (1). */
START_TEST(moe_and_mla_kernel_counts)
{
    t_library("deepseek-v3", "h200", &s);
    s.deployment.tensor_parallel = 8;
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w = {1, 100};
    kv_step_cost r = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    /* The fp8 checkpoint is block-scaled and the default engine (vllm) runs block-fp8 GEMMs on
     * Hopper: each of them adds its input's group quantisation (q_a|kv_a, q_b, o_proj in every
     * layer; gate|up and down of the dense MLPs and the shared experts). */
    double quant = 61 * 3 + 3 * 2 + 58 * 2;
    /* Attention in decode: cache write, latent attention as FlashMLA runs it on Hopper (its
     * split-KV kernel and its combine kernel: kv_mla_decode_kernels), and the two absorption
     * bmms (W_UK before, W_UV after): 5 a layer. */
    double want = 1 + 61 * (2 + 2 + 3 + 5 + 1) + 3 * 3 + 58 * (7 + 2 + 3) + 2 + 2 + 1 + 2 * 61 /* TP 8: two all-reduces */ + quant;
    double got = 0;
    for (int i = 0; i < KV_OP_COUNT; i++) got += r.op[i].kernels;
    ck_assert_msg(fabs(got - want) < 1e-9, "%g kernels, want %g", got, want);
    ck_assert(fabs(r.op[KV_OP_NORM].kernels - 61 * 4) < 1e-9);
    ck_assert(fabs(r.op[KV_OP_MLP].kernels - (3 * 5 + 58 * 14)) < 1e-9);
    ck_assert(fabs(r.op[KV_OP_ATTENTION].kernels - 61 * 5) < 1e-9);
    /* A prefill chunk expands with one kv_b GEMM (3 a layer); a step mixing it with a decode row
     * runs the expansion, both absorption bmms and FlashMLA's combine (6 a layer). */
    kv_seq_work pw[2] = {{512, 0}, {1, 100}};
    r = kv_step_time(&s, &c, SCN_ATTN_FLASH, pw, 1);
    ck_assert(fabs(r.op[KV_OP_ATTENTION].kernels - 61 * 3) < 1e-9);
    r = kv_step_time(&s, &c, SCN_ATTN_FLASH, pw, 2);
    ck_assert(fabs(r.op[KV_OP_ATTENTION].kernels - 61 * 6) < 1e-9);
    /* In 16-bit math the activations are not quantised: 7 + 3 a MoE layer. */
    s.model.weight_dtype = SCN_DTYPE_BF16;
    s.model.weight_quant = SCN_WQ_NONE;
    r = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    ck_assert(fabs(r.op[KV_OP_MLP].kernels - (3 * 3 + 58 * 10)) < 1e-9);
}
END_TEST

/* The routed experts at thousands of tokens against published Triton fused_moe timings
 * (benchmark_moe.py, CUDA-graph replay): vLLM PR #24700 on an H100, Mixtral-8x7B bf16 at TP 2
 * with its tuned config, 1024 / 1536 tokens: 833.72 / 1122.93 us a layer. kvplan's MLP op for a
 * prefill of that many tokens, less its router GEMM, under the vllm profile (Triton fused-MoE
 * GEMMs at KV_TRITON_MOE_BF16_SHARE = 0.437 of the bf16 peak, the mean of this kernel's 0.516 and
 * Gemma-4's 0.358 on an H200, PR #44818, each with its silu_and_mul and moe_sum time taken out;
 * those two kernels then run alone: 132.1 + 37.7 MB, 63 us at 0.80 x 3.35 TB/s, at 1536 tokens)
 * and under kvplan's own pricing (the dense shape efficiency). The flat share over-prices these
 * large experts: the op also adds the weights' memory time in the roofline combination, so it
 * lands 28-42 % above the published times (1096 and 1562 us), where kvplan's own pricing lands
 * within 15 % below; both bounds are asserted, so a change to either shows here
 * (docs/cost-model.md, "Fused-MoE kernels", states the spread). */
START_TEST(triton_fused_moe_matches_published_large_batch_times)
{
    static const int tokens[2] = {1024, 1536};
    static const double us_pub[2] = {833.72, 1122.93};
    for (int i = 0; i < 2; i++) {
        double got[2];
        for (int eng = 0; eng < 2; eng++) {
            t_library_engine("mixtral-8x7b", "h100-sxm", eng ? "vllm" : "kvplan", &s);
            s.deployment.tensor_parallel = 2;
            kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
            kv_seq_work w = {tokens[i], 0};
            kv_step_cost r = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
            double L = s.model.layers;
            /* The router GEMM (T x h x E) at the dense rate, as the op prices it. */
            double rf = 2.0 * tokens[i] * s.model.hidden * s.model.experts;
            double router = rf / kv_compute_rate(&s.hardware, SCN_DTYPE_BF16);
            got[eng] = (r.op[KV_OP_MLP].seconds / L - router) * 1e6;
        }
        double tri = got[1] / us_pub[i] - 1, own = got[0] / us_pub[i] - 1;
        ck_assert_msg(tri > 0.28 && tri < 0.42, "%d tokens, Triton: %.1f us vs published %.2f", tokens[i], got[1], us_pub[i]);
        ck_assert_msg(own > -0.15 && own < 0, "%d tokens, kvplan's own: %.1f us vs published %.2f", tokens[i], got[0], us_pub[i]);
    }
}
END_TEST

/* KV_TRITON_MOE_BF16_SHARE from its two published points, recomputed: the fused_experts time
 * less its silu_and_mul (3 values per copy and expert column) and moe_sum (k copies in, one row
 * out) kernels at 0.80 of the datasheet bandwidth, over the GEMMs' flops 2·T·k·3·h·I, per
 * 989 TFLOP/s. Mixtral-8x7B at TP 2 on an H100 (vLLM PR #24700): T 1536, k 2, h 4096, I 7168,
 * 1122.93 us. Gemma-4 26B-A4B on an H200 (vLLM PR #44818; its shape E 128, N = I = 704,
 * K = h = 2816, top-8 as PR #55241 states it): T 4096, 1189.6 us. Without the kernels taken
 * out the two points are 0.487 and 0.331 (not 0.41: I is 704). */
/* V1's sampler in the step (docs/cost-model.md, "The sampler in the step"), against the older
 * rule, by hand: gpt-oss-120b (vocab V = 201 088) at TP 4, 900 decode rows. Older rule: the LM
 * head writes its shard's logits in fp32, S (V/4) (4 - 2) B beyond its 16-bit GEMM output. V1:
 * the 16-bit output, then each rank receives (3/4) S V x 2 B of the other shards (all-gather),
 * casts all S V logits to fp32 (2 B read, 4 B written) and takes their argmax (4 B read), in
 * kernels of their own after the GEMM: serial bytes S V (10 + 1.5). The all-gather sends
 * (3/4) S V x 2 B a rank over the link: half a ring all-reduce's share of the same bytes. */
START_TEST(v1_sampler_gathers_and_samples_the_whole_vocabulary)
{
    t_library("gpt-oss-120b", "h100-sxm", &s);
    s.deployment.tensor_parallel = 4;
    ck_assert_int_eq(s.engine.sampler_bytes_per_logit, 10);
    ck_assert(s.engine.sampler_gather);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w[900];
    for (int i = 0; i < 900; i++) w[i] = (kv_seq_work){1, 400};
    kv_step_cost v1 = kv_step_time(&s, &c, SCN_ATTN_FLASH, w, 900);
    s.engine.sampler_bytes_per_logit = 0;
    s.engine.sampler_gather = false;
    kv_step_cost old = kv_step_time(&s, &c, SCN_ATTN_FLASH, w, 900);
    double S = 900, V = 201088;
    double want = S * V * (10 + 1.5) - S * (V / 4) * 2;
    double got = v1.op[KV_OP_LM_HEAD].bytes - old.op[KV_OP_LM_HEAD].bytes;
    ck_assert_msg(fabs(got / want - 1) < 1e-9, "%.6g B more, want %.6g", got, want);
    ck_assert_msg(fabs(v1.op[KV_OP_LM_HEAD].serial_bytes - old.op[KV_OP_LM_HEAD].serial_bytes - S * V * 11.5) < 1, "%.6g",
                  v1.op[KV_OP_LM_HEAD].serial_bytes);
    ck_assert(fabs(v1.op[KV_OP_LM_HEAD].kernels - old.op[KV_OP_LM_HEAD].kernels - 2) < 1e-9);
    double gather = 0.75 * S * V * 2;
    ck_assert(fabs(v1.op[KV_OP_ALLREDUCE].net_bytes - old.op[KV_OP_ALLREDUCE].net_bytes - gather) < 1);
    ck_assert(fabs(v1.op[KV_OP_ALLREDUCE].kernels - old.op[KV_OP_ALLREDUCE].kernels - 1) < 1e-9);
    kv_coll_cost ag = kv_allgather_time(&s.hardware, 4, S * V * 2), ring = kv_allreduce_algo(&s.hardware, 4, S * V * 2, KV_COLL_RING);
    ck_assert(fabs(ag.net_bytes * 2 - ring.net_bytes) < 1);
    ck_assert(ag.seconds < ring.seconds && ag.seconds > 0.4 * ring.seconds);
    ck_assert(v1.seconds > old.seconds);
}
END_TEST

START_TEST(triton_share_is_the_published_gemm_time)
{
    static const struct { double T, k, h, I, us, bw; } P[2] = {
        {1536, 2, 4096, 7168, 1122.93, 3.35e12},
        {4096, 8, 2816, 704, 1189.6, 4.8e12},
    };
    double sum = 0, raw[2];
    for (int i = 0; i < 2; i++) {
        double c = P[i].T * P[i].k;
        double bytes = (3 * c * P[i].I + c * P[i].h + P[i].T * P[i].h) * 2;
        double flops = 2 * P[i].T * P[i].k * 3 * P[i].h * P[i].I;
        raw[i] = flops / (P[i].us * 1e-6) / 989e12;
        sum += flops / (P[i].us * 1e-6 - bytes / (0.80 * P[i].bw)) / 989e12;
    }
    ck_assert_msg(fabs(raw[0] - 0.487) < 5e-4 && fabs(raw[1] - 0.331) < 5e-4, "%g %g", raw[0], raw[1]);
    ck_assert_msg(fabs(sum / 2 - KV_TRITON_MOE_BF16_SHARE) < 5e-4, "%g", sum / 2);
}
END_TEST

/* An MLA model cached expanded (vLLM before 0.7.1: the vllm-0.7 profile) decodes as ordinary
 * attention over per-head K and V of 192 dims (V padded), heads split over TP ranks: at TP 8 a
 * rank's 16 heads read 16 * 192 * 2 * 2 = 12288 B per cached token a layer, against the
 * latent's 576 * 2 = 1152 B; kv_b decompresses the one new token (2 * 512 * 16 * (128 + 128)
 * flops) and its weight is read once a layer. Written out per layer, times 61 layers. */
START_TEST(mla_expanded_decodes_as_padded_heads)
{
    t_library_engine("deepseek-v3", "h200", "vllm-0.7", &s);
    s.deployment.tensor_parallel = 8;
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    ck_assert(c.mla_expanded);
    long ctx = 999, held = ctx + 1;
    kv_seq_work w = {1, ctx};
    kv_step_cost r = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    const kv_op_cost *a = &r.op[KV_OP_ATTENTION];
    double kv_tok = 16.0 * 192 * 2 * 2, qo = 16.0 * (192 + 192) * 2;
    double wb = 512.0 * 16 * (128 + 128) * kv_weight_bytes_per_param(&s.model);
    double bytes = 61 * (qo + kv_tok + held * kv_tok + 512.0 * 2 + wb);
    double flops = 61 * (2.0 * 16 * (192 + 192) * held + 2.0 * 512 * 16 * (128 + 128));
    ck_assert_msg(fabs(a->bytes / bytes - 1) < 1e-12, "%.17g vs %.17g", a->bytes, bytes);
    ck_assert_msg(fabs(a->flops / flops - 1) < 1e-12, "%.17g vs %.17g", a->flops, flops);
    ck_assert(!r.mla_absorbed);
    /* The latent cache of the same step reads about a tenth of those bytes beside kv_b's
     * weight, which both read once a layer. */
    c.mla_expanded = false;
    kv_step_cost l = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    ck_assert(l.mla_absorbed);
    ck_assert(l.op[KV_OP_ATTENTION].bytes - 61 * wb < 0.15 * (a->bytes - 61 * wb));
    /* With 64 sequences the expanded cache's ten times the bytes set the time: the latent's
     * attention is faster (at batch 1 the latent kernel's few work items may not be). */
    kv_seq_work many[64];
    for (int i = 0; i < 64; i++) many[i] = w;
    double lat = kv_step_time(&s, &c, SCN_ATTN_FLASH, many, 64).op[KV_OP_ATTENTION].seconds;
    c.mla_expanded = true;
    double exp_ = kv_step_time(&s, &c, SCN_ATTN_FLASH, many, 64).op[KV_OP_ATTENTION].seconds;
    ck_assert_msg(lat < 0.5 * exp_, "%g vs %g", lat, exp_);
}
END_TEST

/* A fused-MoE layer's decode time against published kernel timings: vLLM's
 * benchmarks/kernels/benchmark_moe.py on an H100 (vLLM PR #24700, "Benchmarks on H100": Qwen3 from
 * the PR's column, Mixtral from the tuned-config column), which times the fused experts (top-k, alignment, both grouped GEMMs, the
 * activation, the sum, and for fp8 the input quantisations) in a CUDA graph, without the router
 * GEMM: Qwen3-30B-A3B fp8_w8a8 at TP 1, batch 1 / 4 / 16: 40.44 / 78.10 / 164.64 us; Mixtral-8x7B
 * bf16 at TP 2: 144.03 / 351.10 / 471.49 us. And DeepSeek-R1-0528's experts on an H200 (vLLM PR
 * #36554, "Main": benchmark_moe.py --dtype fp8_w8a8 at the script's default --tp-size 2, the
 * checkpoint's 128 x 128 blocks: 256 experts of 7168 x 1024 per GPU, 8 a token) at batch 1 / 4 / 8:
 * 77.42 / 190.77 / 350.54 us; its dense layers and shared expert are set aside so that the MLP op
 * holds the routed experts and the router alone. kvplan's MLP op per layer less the router GEMM
 * (its weight read and its kernel boundary) must land within 15 % of each (docs/cost-model.md,
 * "Kernels per layer"). */
START_TEST(fused_moe_layer_matches_published_kernel_times)
{
    static const struct { const char *model, *gpu; int tp; scn_dtype dt; scn_wquant q; int batch[3]; double us[3]; } C[] = {
        {"qwen3-30b-a3b", "h100-sxm", 1, SCN_DTYPE_FP8, SCN_WQ_NONE, {1, 4, 16}, {40.44, 78.10, 164.64}},
        {"mixtral-8x7b", "h100-sxm", 2, SCN_DTYPE_BF16, SCN_WQ_NONE, {1, 4, 16}, {144.03, 351.10, 471.49}},
        {"deepseek-r1", "h200", 2, SCN_DTYPE_FP8, SCN_WQ_BLOCK, {1, 4, 8}, {77.42, 190.77, 350.54}},
    };
    for (size_t k = 0; k < sizeof C / sizeof C[0]; k++) {
        t_library(C[k].model, C[k].gpu, &s);
        s.deployment.tensor_parallel = C[k].tp;
        s.model.weight_dtype = C[k].dt;
        s.model.weight_quant = C[k].q;
        s.model.dense_layers = s.model.shared_experts = 0;
        kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
        double L = s.model.layers - s.model.dense_layers;
        double router = s.model.hidden * (double)s.model.experts * 2 / (s.hardware.memory_bandwidth * s.hardware.eff_bandwidth) +
                        s.engine.graph_kernel;
        for (int i = 0; i < 3; i++) {
            kv_seq_work w[16];
            for (int j = 0; j < C[k].batch[i]; j++) w[j] = (kv_seq_work){1, 100};
            kv_step_cost r = kv_step_time(&s, &c, SCN_ATTN_FLASH, w, C[k].batch[i]);
            ck_assert(r.graph);
            double us = (r.op[KV_OP_MLP].seconds / L - router) * 1e6;
            ck_assert_msg(fabs(us / C[k].us[i] - 1) < 0.15, "%s batch %d: %.1f us vs published %.2f", C[k].model,
                          C[k].batch[i], us, C[k].us[i]);
        }
    }
}
END_TEST

START_TEST(prefix_hits_save_whole_blocks)
{
    t_library("llama-3-8b", "h100-sxm", &s);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_prefix_saving p = kv_prefix_saving_compute(&s, &c, 16, 2500, 2000);
    ck_assert_int_eq(p.blocks_shared, 125);          /* 2000 / 16 */
    ck_assert_int_eq(p.hit_tokens, 2000);
    ck_assert(p.kv_bytes_saved == 2000 * 128 * KIB);
    ck_assert(p.prefill_seconds_saved > 0 && p.prefill_flops_saved > 0);
    /* The whole prompt cached: the last token is recomputed, so 1999 usable -> 124 blocks. */
    p = kv_prefix_saving_compute(&s, &c, 16, 2000, 2000);
    ck_assert_int_eq(p.blocks_shared, 124);
    ck_assert_int_eq(p.hit_tokens, 1984);
    /* A hit shorter than a block saves nothing. */
    p = kv_prefix_saving_compute(&s, &c, 16, 2000, 15);
    ck_assert_int_eq(p.hit_tokens, 0);
    ck_assert(p.prefill_seconds_saved == 0);
}
END_TEST

/* FlashAttention's K/V re-reads hit the L2 when a tile's keys fit it (docs/cost-model.md,
 * "Efficiency from shapes"). */
START_TEST(flash_rereads_hit_l2_when_they_fit)
{
    ideal("llama-3-8b");   /* H100: 50 MiB of L2; 4 KiB of K/V per token per layer */
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w = {2048, 0};
    double with = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1).op[KV_OP_ATTENTION].bytes;
    s.hardware.l2_cache = 0;
    double without = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1).op[KV_OP_ATTENTION].bytes;
    /* 2048 keys x 4 KiB = 8 MiB fit: each key is read once instead of 17408 times in all. */
    ck_assert(fabs((without - with) - (17408.0 - 2048) * 4096 * 32) < 1);
    /* 32768 cached + 512 new: 33280 keys x 4 KiB = 130 MiB; 50 MiB of it stays, so 1 - 50/130
     * of the re-reads (4 tiles, 33280 + 33152 + 33024 + 32896 = 132352 reads, 33280 first
     * reads) go to device memory. */
    s.hardware.l2_cache = 50 * MIB;
    kv_seq_work v = {512, 32768};
    double b = kv_step_time(&s, &c, SCN_ATTN_FLASH, &v, 1).op[KV_OP_ATTENTION].bytes;
    s.hardware.l2_cache = 0;
    double b0 = kv_step_time(&s, &c, SCN_ATTN_FLASH, &v, 1).op[KV_OP_ATTENTION].bytes;
    double spill = 1 - 50 * MIB / (33280.0 * 4096);
    ck_assert(fabs((b0 - b) - (132352.0 - 33280) * (1 - spill) * 4096 * 32) < 1);
}
END_TEST

Suite *suite_roofline(void)
{
    Suite *su = suite_create("roofline");
    TCase *tc = tcase_create("step");
    tcase_add_test(tc, decode_reads_weights_once_plus_kv);
    tcase_add_test(tc, experts_only_checkpoint_reads_attention_in_bf16);
    tcase_add_test(tc, mlp_only_checkpoint_reads_attention_in_bf16);
    tcase_add_test(tc, prefill_is_two_flops_per_parameter_per_token);
    tcase_add_test(tc, prefill_elementwise_kernels_add_to_the_gemms);
    tcase_add_test(tc, attention_flops_match_brute_force_with_windows);
    tcase_add_test(tc, naive_attention_moves_the_score_matrix);
    tcase_add_test(tc, moe_decode_touches_experts_as_expected);
    tcase_add_test(tc, tensor_parallel_adds_allreduce);
    tcase_add_test(tc, overheads_are_added);
    tcase_add_test(tc, v1_sampler_gathers_and_samples_the_whole_vocabulary);
    tcase_add_test(tc, graph_boundaries_match_the_published_batch1_decode);
    tcase_add_test(tc, moe_and_mla_kernel_counts);
    tcase_add_test(tc, mla_expanded_decodes_as_padded_heads);
    tcase_add_test(tc, triton_fused_moe_matches_published_large_batch_times);
    tcase_add_test(tc, triton_share_is_the_published_gemm_time);
    tcase_add_test(tc, fused_moe_layer_matches_published_kernel_times);
    tcase_add_test(tc, flash_rereads_hit_l2_when_they_fit);
    tcase_add_test(tc, prefix_hits_save_whole_blocks);
    suite_add_tcase(su, tc);
    return su;
}
