/* test_moe_parallel.c: expert parallelism and attention data parallelism: the deployment
 * fields, the busiest expert rank by hand, an EP=8 step's all-to-all bytes by hand, DeepSeek-V3's
 * KV per DP rank and weights per GPU by hand, and attention-DP ranks that never share KV. */
#include "tests.h"
#include "../model/kv_moe_grouped.h"
#include "../model/kv_moe_parallel.h"
#include "../planner/plan.h"
#include "../sim/sim.h"

#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static scn_scenario s;

static void load(const char *text, const char *const *sets, int n)
{
    scn_error e;
    scn_status st = t_load(text, sets, n, &s, &e);
    char msg[1500];
    scn_error_format(&e, msg, sizeof msg);
    ck_assert_msg(st == SCN_OK, "%s", msg);
}

static void load_bad(const char *text, const char *path)
{
    scn_error e;
    char msg[1500];
    scn_status st = t_load(text, NULL, 0, &s, &e);
    scn_error_format(&e, msg, sizeof msg);
    ck_assert_msg(st == SCN_E_DATA && e.line > 0 && strstr(e.path, path), "expected an error at %s: %s", path, msg);
}

#define WL "workload: {requests: 10, arrival: {process: offline}, prompt_tokens: 100, output_tokens: 10}\n"
#define DSV3 "model: deepseek-v3\nhardware: h200\n" WL \
             "deployment: {tensor_parallel: 1, attention_data_parallel: 8, expert_parallel: 8}\n"

START_TEST(deployment_fields_and_their_errors)
{
    load(DSV3, NULL, 0);
    ck_assert_int_eq(s.deployment.expert_parallel, 8);
    ck_assert_int_eq(s.deployment.attention_dp, 8);
    ck_assert(kv_moe_parallel_on(&s));
    load("model: llama-3.1-8b\nhardware: h100-sxm\n" WL, NULL, 0);
    ck_assert_int_eq(s.deployment.expert_parallel, 1);
    ck_assert(!kv_moe_parallel_on(&s));
    load_bad("model: llama-3.1-8b\nhardware: h100-sxm\n" WL "deployment: {expert_parallel: 2}\n",
             "deployment.expert_parallel");
    /* 8 ranks need 8 GPUs in the replica: tensor_parallel 2 x DP 2 is 4. */
    load_bad("model: deepseek-v3\nhardware: h200\n" WL "deployment: {tensor_parallel: 2, attention_data_parallel: 2, "
             "expert_parallel: 8}\n", "deployment.expert_parallel");
    load_bad("model: deepseek-v3\nhardware: h200\n" WL "deployment: {attention_data_parallel: 8, expert_parallel: 3}\n",
             "deployment.expert_parallel");
    load_bad("model: llama-3.1-8b\nhardware: h100-sxm\n" WL "deployment: {expert_skew: 1}\n", "deployment.expert_skew");
}
END_TEST

START_TEST(busiest_rank_by_hand)
{
    /* Uniform routing: every rank gets 1/E. */
    ck_assert_double_eq_tol(kv_moe_busiest_share(256, 8, 8, 0), 1.0 / 8, 1e-12);
    /* 4 experts of popularity 1, 1/2, 1/3, 1/4 on 2 ranks (0 and 2 on rank 0): (1 + 1/3) /
     * (25/12) = 16/25. */
    ck_assert_double_eq_tol(kv_moe_busiest_share(4, 1, 2, 1), 16.0 / 25, 1e-12);
    /* A skewed popularity slows a compute-bound step (a prefill chunk: every expert is read
     * either way, so the busiest rank's rows bind). */
    load(DSV3, NULL, 0);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w[64];
    for (int i = 0; i < 64; i++) w[i] = (kv_seq_work){1, 2000};
    kv_moe_step even = kv_moe_step_time(&s, &c, SCN_ATTN_FLASH, w, 64);
    ck_assert_double_eq_tol(even.rows_busiest, 64.0 * 8 * 8 / 8, 1e-9);   /* 8 ranks x 64 tokens x k 8, 1/8 */
    kv_seq_work pf[2] = {{4096, 0}, {4096, 0}};
    kv_moe_step even_pf = kv_moe_step_time(&s, &c, SCN_ATTN_FLASH, pf, 2);
    s.deployment.expert_skew = 1.0;
    kv_moe_step skew = kv_moe_step_time(&s, &c, SCN_ATTN_FLASH, w, 64);
    kv_moe_step skew_pf = kv_moe_step_time(&s, &c, SCN_ATTN_FLASH, pf, 2);
    ck_assert(skew.rows_busiest > even.rows_busiest);
    ck_assert(skew_pf.experts > even_pf.experts);
}
END_TEST

/* Regression (issue 14 review): a token picks k DISTINCT experts, so no expert can take more
 * than one of a token's k assignments. Per-pick Zipf probabilities times k exceed 1 for hot
 * experts; the capped proportional-to-size inclusion probabilities cannot. */
START_TEST(topk_picks_distinct_experts)
{
    /* 4 experts of popularity 1, 1/4, 1/9, 1/16 (skew 2), k = 2: lambda = 2 / (205/144) puts
     * expert 0 above 1, so it is capped; the other three share the remaining 1 in proportion:
     * lambda = 1 / (61/144), pi = 1, 36/61, 16/61, 9/61. */
    double pi[4];
    ck_assert_int_eq(kv_moe_inclusion(4, 2, 2.0, pi), 1);
    ck_assert_double_eq_tol(pi[0], 1.0, 1e-12);
    ck_assert_double_eq_tol(pi[1], 36.0 / 61, 1e-12);
    ck_assert_double_eq_tol(pi[2], 16.0 / 61, 1e-12);
    ck_assert_double_eq_tol(pi[3], 9.0 / 61, 1e-12);
    /* On 2 ranks (experts 0, 2 on rank 0): (1 + 16/61) / 2 = 77/122 of the assignments. */
    ck_assert_double_eq_tol(kv_moe_busiest_share(4, 2, 2, 2.0), 77.0 / 122, 1e-12);
    /* k = E: every token picks every expert, whatever the skew: each of 8 ranks gets 1/8. */
    ck_assert_double_eq_tol(kv_moe_busiest_share(8, 8, 8, 3.0), 1.0 / 8, 1e-12);
    /* DeepSeek-V3's 256 experts, k 8, a steep skew: the inclusion probabilities sum to k and
     * none exceeds 1. */
    double big[256], sum = 0;
    kv_moe_inclusion(256, 8, 1.5, big);
    for (int i = 0; i < 256; i++) { ck_assert(big[i] <= 1.0 + 1e-12 && big[i] >= 0); sum += big[i]; }
    ck_assert_double_eq_tol(sum, 8.0, 1e-9);
    ck_assert_double_eq_tol(big[0], 1.0, 1e-12);
}
END_TEST

/* Regression (issue 14 review): under skew the busiest EP rank receives busiest_share x EP
 * times the mean rank's dispatch (and sends as much back in the combine); its bytes bind. */
START_TEST(alltoall_hottest_rank_binds)
{
    load(DSV3, NULL, 0);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w[64];
    for (int i = 0; i < 64; i++) w[i] = (kv_seq_work){1, 2000};
    kv_moe_step even = kv_moe_step_time(&s, &c, SCN_ATTN_FLASH, w, 64);
    ck_assert_double_eq_tol(even.hot_factor, 1.0, 1e-12);
    s.deployment.expert_skew = 1.0;
    kv_moe_step skew = kv_moe_step_time(&s, &c, SCN_ATTN_FLASH, w, 64);
    double f = 8 * kv_moe_busiest_share(256, 8, 8, 1.0);
    ck_assert(f > 1.05);
    ck_assert_double_eq_tol(skew.hot_factor, f, 1e-12);
    /* 6 422 528 bytes leave the mean GPU per layer each way (ep8_alltoall_bytes_by_hand). */
    ck_assert_double_eq_tol(skew.dispatch.net_bytes, 6422528.0 * f, 1e-3);
    ck_assert(skew.alltoall > even.alltoall);
}
END_TEST

START_TEST(ep8_alltoall_bytes_by_hand)
{
    /* DeepSeek-V3, DP 8 x TP 1, EP 8, 64 decoding sequences per DP rank. Each MoE layer (61 -
     * 3 dense = 58) dispatches every token's 7168-wide bf16 hidden state to its 8 experts and
     * combines the results back: 64 x 8 x 7168 x 2 = 7 340 032 bytes per GPU each way, of which
     * 7/8 leave the GPU (1/8 of the experts are local): 6 422 528 bytes, twice per layer. */
    load(DSV3, NULL, 0);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w[64];
    for (int i = 0; i < 64; i++) w[i] = (kv_seq_work){1, 2000};
    kv_moe_step st = kv_moe_step_time(&s, &c, SCN_ATTN_FLASH, w, 64);
    ck_assert_double_eq_tol(st.dispatch.net_bytes, 6422528.0, 1e-6);
    ck_assert_double_eq_tol(st.alltoall_bytes, 6422528.0 * 2 * 58, 1e-3);
    /* Within one NVLink node the transfer is those bytes over the link (450 GB/s x 0.7 by
     * default); 116 of them make the all-to-all's time, plus their latency. */
    double link = s.hardware.link_bandwidth * s.hardware.eff_link;
    ck_assert_double_eq_tol(st.dispatch.transfer, 6422528.0 / link, 1e-12);
    ck_assert_double_eq_tol(st.alltoall, 116 * st.dispatch.seconds, 1e-12);
    ck_assert_double_eq_tol(st.seconds, st.attention + st.experts + st.alltoall, 1e-12);
    ck_assert(st.alltoall > 0 && st.alltoall < st.seconds);
}
END_TEST

START_TEST(ep_moe_layer_pays_its_kernels)
{
    /* With EP the step model's fused-MoE op is replaced by the routed phase, which runs the same
     * kernels: router GEMM, top-k, permute, grouped gate|up, activation, grouped down, weighted
     * sum, and (fp8 math) the two activation quantisations: 9 a MoE layer. A decode batch of 64 is
     * replayed from a CUDA graph (vllm captures 64), so each costs its boundary (3 us): the phase
     * carries 58 x 9 x 3 us = 1.566 ms of them, which a boundary cost of 0 removes exactly. */
    load(DSV3, NULL, 0);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w[64];
    for (int i = 0; i < 64; i++) w[i] = (kv_seq_work){1, 2000};
    kv_moe_step st = kv_moe_step_time(&s, &c, SCN_ATTN_FLASH, w, 64);
    ck_assert(s.engine.graph_kernel == 3e-6);
    s.engine.graph_kernel = 0;
    kv_moe_step bare = kv_moe_step_time(&s, &c, SCN_ATTN_FLASH, w, 64);
    ck_assert_msg(fabs((st.experts - bare.experts) - 58 * 9 * 3e-6) < 1e-12, "%.9g", st.experts - bare.experts);
    /* Eager (no graph), the CPU's 4 us launches (36 us a layer) hide behind the phase's GPU
     * time, so the boundaries are what shows: the same 27 us a layer. */
    s.engine.graph_kernel = 3e-6;
    s.engine.cuda_graphs = false;
    kv_moe_step eager = kv_moe_step_time(&s, &c, SCN_ATTN_FLASH, w, 64);
    ck_assert(fabs((eager.experts - bare.experts) - 58 * 9 * 3e-6) < 1e-12);
}
END_TEST

START_TEST(grouped_routing_pays_its_published_time)
{
    /* TensorRT-LLM's fused group-limited top-k for DeepSeek-V3/R1 (expert_groups 8): 15 us a MoE
     * layer, two kernels (NVIDIA, "Optimizing DeepSeek R1 Throughput on NVIDIA Blackwell GPUs",
     * TensorRT-LLM tech blog 3, "Top-K Kernels Fusions": "reduce the kernel time from 252us to
     * 15us in the target setting"). The routed phase of a 128-sequence decode step (replayed:
     * trtllm captures 128) carries, against a profile without the figure, 58 MoE layers x
     * (15 us + one more 3 us boundary) = 1.044 ms; the unsplit step's MoE op 58 x 15 us = 870 us
     * of kernel time on top of its roofline. Cross-check of the figure's unit (a layer, not a
     * step): 58 x (252 - 15) us = 13.7 ms saved per step was the blog's 7.4 % E2E, a step of
     * 13.7 / (1 - 1/1.074) = 199 ms, the ~190 ms of 384 tokens a rank at the blog's February
     * 2000 TPS/GPU. */
    load("model: deepseek-r1\nhardware: h200\nengine: trtllm\n" WL
         "deployment: {tensor_parallel: 1, attention_data_parallel: 8, expert_parallel: 8}\n", NULL, 0);
    ck_assert_int_eq(s.model.expert_groups, 8);
    ck_assert_double_eq_tol(s.engine.moe_grouped_routing, 15e-6, 1e-15);
    ck_assert_double_eq_tol(kv_moe_routing_seconds(&s.engine, &s.model), 15e-6, 1e-15);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w[128];
    for (int i = 0; i < 128; i++) w[i] = (kv_seq_work){1, 2048};
    kv_moe_step st = kv_moe_step_time(&s, &c, SCN_ATTN_FLASH, w, 128);
    kv_step_cost full = kv_step_time(&s, &c, SCN_ATTN_FLASH, w, 128);
    s.engine.moe_grouped_routing = 0;
    kv_moe_step bare = kv_moe_step_time(&s, &c, SCN_ATTN_FLASH, w, 128);
    kv_step_cost full_bare = kv_step_time(&s, &c, SCN_ATTN_FLASH, w, 128);
    ck_assert_msg(fabs((st.experts - bare.experts) - 58 * (15e-6 + 3e-6)) < 1e-12, "%.9g", st.experts - bare.experts);
    ck_assert_double_eq_tol(st.attention, bare.attention, 1e-12);
    ck_assert_double_eq_tol(full.op[KV_OP_MLP].t_latency, 58 * 15e-6, 1e-12);
    ck_assert_double_eq_tol(full_bare.op[KV_OP_MLP].t_latency, 0, 1e-15);
    /* A plain top-k router (expert_groups 1, e.g. Mixtral's or Qwen3's) pays nothing extra. */
    s.engine.moe_grouped_routing = 15e-6;
    s.model.expert_groups = 1;
    ck_assert_double_eq_tol(kv_moe_routing_seconds(&s.engine, &s.model), 0, 1e-15);
    kv_moe_step plain = kv_moe_step_time(&s, &c, SCN_ATTN_FLASH, w, 128);
    ck_assert_double_eq_tol(plain.experts, bare.experts, 1e-12);
    /* vLLM's profile states no figure: the same model pays nothing extra there. */
    load(DSV3, NULL, 0);
    ck_assert_double_eq_tol(kv_moe_routing_seconds(&s.engine, &s.model), 0, 1e-15);
    /* docs/scenarios.md: "0 or 1 = plain top-k"; 0 loads (it was refused as "at least 1") and
     * the trtllm profile charges it nothing, as for 1. */
    load("model: {extends: deepseek-v3, expert_groups: 0}\nhardware: h200\nengine: trtllm\n" WL, NULL, 0);
    ck_assert_int_eq(s.model.expert_groups, 0);
    ck_assert_double_eq_tol(s.engine.moe_grouped_routing, 15e-6, 1e-15);
    ck_assert_double_eq_tol(kv_moe_routing_seconds(&s.engine, &s.model), 0, 1e-15);
    /* The field's errors, at their field. */
    load_bad("model: {extends: deepseek-v3, expert_groups: -1}\nhardware: h200\n" WL, "expert_groups");
    load_bad("model: {extends: deepseek-v3, expert_groups: 7}\nhardware: h200\n" WL, "expert_groups");
    load_bad("model: {extends: llama-3.1-8b, expert_groups: 8}\nhardware: h200\n" WL, "expert_groups");
}
END_TEST

START_TEST(ep_without_dp_dispatches_nothing)
{
    /* TP 8 with EP 8 and no attention DP: the tokens are on every GPU already (tensor-parallel
     * attention), each GPU runs its 32 experts on all of them and the layer's all-reduce sums the
     * outputs (vLLM FusedMoE.forward_impl dispatches and combines only when dp_size > 1). No
     * all-to-all; the step is attention and the rest plus the experts. */
    load("model: deepseek-v3\nhardware: h200\n" WL "deployment: {tensor_parallel: 8, expert_parallel: 8}\n", NULL, 0);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w[64];
    for (int i = 0; i < 64; i++) w[i] = (kv_seq_work){1, 2000};
    kv_moe_step st = kv_moe_step_time(&s, &c, SCN_ATTN_FLASH, w, 64);
    ck_assert(st.alltoall == 0 && st.alltoall_bytes == 0 && st.gather == 0);
    ck_assert(st.experts > 0);
    ck_assert_double_eq_tol(st.seconds, st.attention + st.experts, 1e-12);
    /* The experts' rows are all 64 tokens' picks on every rank: 64 x 8 / 8 = 64 a rank on
     * average, so the busiest of 8 even ranks holds 1/8 of the 512 assignments. */
    ck_assert_double_eq_tol(st.busiest_share, 1.0 / 8, 1e-12);
    ck_assert_double_eq_tol(st.rows_busiest, 64.0, 1e-9);
}
END_TEST

START_TEST(shared_experts_priced_as_dense_mlp)
{
    /* DeepSeek-V3's shared expert is a dense MLP of width 2048 in each of the 58 MoE layers
     * (vLLM's DeepseekV2MLP): the step must price it exactly as a dense model of 58 layers of
     * that width, no experts, prices its MLP, with the profile's block-fp8 kernel (vllm: Triton,
     * whose few CTAs at batch 1 stream the weights slowly, t_fill), and the EP step's dense
     * stand-in does. So the MLP op with the shared expert minus the one without it is that dense
     * model's MLP op, part by part. At batch 1 the routed part is the same in both (8 of 8 rows
     * touched either way). Before the fix the shared expert ran at the dense peak without the
     * block-fp8 kernel's fill or rate, and TP 8 with EP 8 (no DP) took 1.7 ms a step more than
     * TP 8 alone on vllm. */
    const char *base = "model: deepseek-v3\nhardware: h200\nengine: vllm\n" WL "deployment: {tensor_parallel: 8}\n";
    kv_seq_work w[1] = {{1, 1000}};
    kv_step_cost with, without, dense;
    load(base, NULL, 0);
    ck_assert(s.engine.block_fp8 != SCN_BF8_NATIVE);
    kv_step_shape(&s, NULL, w, 1, &with);
    s.model.shared_experts = 0;
    kv_step_shape(&s, NULL, w, 1, &without);
    load(base, NULL, 0);
    s.model.experts = s.model.experts_per_token = s.model.shared_experts = s.model.dense_layers = 0;
    s.model.layers = 58;
    s.model.intermediate = 2048;
    kv_step_shape(&s, NULL, w, 1, &dense);
    const kv_op_cost *a = &with.op[KV_OP_MLP], *b = &without.op[KV_OP_MLP], *d = &dense.op[KV_OP_MLP];
    ck_assert_double_eq_tol(a->bytes - b->bytes, d->bytes, 1e-6 * d->bytes);
    ck_assert_double_eq_tol(a->flops - b->flops, d->flops, 1e-6 * d->flops);
    ck_assert_double_eq_tol(a->kernels - b->kernels, d->kernels, 1e-9);
    ck_assert_double_eq_tol(a->t_compute - b->t_compute, d->t_compute, 1e-6 * d->t_compute);
    ck_assert(d->t_fill > 0);
    ck_assert_double_eq_tol(a->t_fill - b->t_fill, d->t_fill, 1e-6 * d->t_fill);
    /* And so TP 8 with EP 8 differs from TP 8 only in the routed phase. At batch 1 every TP rank
     * reads 1/8 of each of the token's 8 experts (one expert's bytes); under EP 8 the busiest
     * rank reads whole experts, the expected maximum over the 8 ranks of those it holds
     * (kv_moe_expected_max_touched): (tmax - 1) x 3 x 7168 x 2048 fp8 bytes a layer more, at the
     * streaming rate, in each of 58 layers. The rest agrees within 1 % of the step. */
    load("model: deepseek-v3\nhardware: h200\nengine: vllm\n" WL "deployment: {tensor_parallel: 8}\n", NULL, 0);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_moe_step tp = kv_moe_step_time(&s, &c, SCN_ATTN_FLASH, w, 1);
    load("model: deepseek-v3\nhardware: h200\nengine: vllm\n" WL "deployment: {tensor_parallel: 8, expert_parallel: 8}\n", NULL, 0);
    kv_moe_step ep = kv_moe_step_time(&s, &c, SCN_ATTN_FLASH, w, 1);
    double pi[256];
    kv_moe_inclusion(256, 8, 0, pi);
    double tmax = kv_moe_expected_max_touched(pi, 256, 8, 1);
    ck_assert_double_eq_tol(ep.touched_busiest, tmax, 1e-12);
    double extra = 58 * (tmax - 1) * 3.0 * 7168 * 2048 / (s.hardware.memory_bandwidth * s.hardware.eff_bandwidth);
    ck_assert_msg(fabs(ep.seconds - tp.seconds - extra) < 0.01 * tp.seconds, "tp %.6g ep %.6g extra %.6g", tp.seconds,
                  ep.seconds, extra);
}
END_TEST

/* The expected maximum over EP ranks of the experts each touches, against references computed
 * here: exact enumeration for one token, the plain mean for one rank, and a fixed-seed Monte
 * Carlo of the routing itself (no independence assumed) for several tokens. */
static double choose(int n, int r)
{
    double c = 1;
    for (int i = 1; i <= r; i++) c = c * (n - r + i) / i;
    return c;
}

/* E[max] over `ranks` ranks of `per` experts each when one token picks k distinct experts
 * uniformly: the counts per rank are multivariate hypergeometric; every composition of k into
 * `ranks` parts is enumerated with its weight prod C(per, c_r) / C(ranks * per, k). */
static void compositions(int left, int r, int ranks, int per, double w, int mx, double *sum)
{
    if (r == ranks - 1) {
        *sum += w * choose(per, left) * (left > mx ? left : mx);
        return;
    }
    for (int c = 0; c <= left && c <= per; c++) compositions(left - c, r + 1, ranks, per, w * choose(per, c), c > mx ? c : mx, sum);
}

static unsigned long long lcg_state;
static unsigned lcg(void)
{
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)(lcg_state >> 33);
}

/* Monte Carlo: `tokens` tokens each pick 8 distinct of 256 experts uniformly (a partial
 * Fisher-Yates shuffle); expert i lives on rank i mod 8; the mean over trials of the most
 * experts any rank had touched. */
static double monte_carlo_max(int tokens, int trials)
{
    lcg_state = 20261201;
    double acc = 0;
    for (int t = 0; t < trials; t++) {
        bool hit[256] = {false};
        for (int j = 0; j < tokens; j++) {
            int deck[256];
            for (int i = 0; i < 256; i++) deck[i] = i;
            for (int i = 0; i < 8; i++) {
                int r = i + (int)(lcg() % (unsigned)(256 - i)), tmp = deck[i];
                deck[i] = deck[r];
                deck[r] = tmp;
                hit[deck[i]] = true;
            }
        }
        int cnt[8] = {0}, mx = 0;
        for (int i = 0; i < 256; i++) cnt[i % 8] += hit[i];
        for (int r = 0; r < 8; r++) mx = cnt[r] > mx ? cnt[r] : mx;
        acc += mx;
    }
    return acc / trials;
}

START_TEST(busiest_rank_touches_the_expected_maximum)
{
    double pi[256];
    kv_moe_inclusion(256, 8, 0, pi);
    /* One token, DeepSeek-V3 at EP 8: exact enumeration 2.5637 (the mean is 1). The model takes
     * the ranks as independent, which slightly underrates the spread of a fixed total of 8:
     * within 1 %. */
    double exact = 0;
    compositions(8, 0, 8, 32, 1, 0, &exact);
    exact /= choose(256, 8);
    ck_assert_double_eq_tol(exact, 2.5637, 1e-4);
    double one = kv_moe_expected_max_touched(pi, 256, 8, 1);
    ck_assert_msg(fabs(one / exact - 1) < 0.01, "%.6g vs exact %.6g", one, exact);
    /* One rank: the maximum is the mean, E (1 - (1 - k/E)^T), exactly. */
    for (int T = 1; T <= 64; T *= 4)
        ck_assert_double_eq_tol(kv_moe_expected_max_touched(pi, 256, 1, T), 256 * (1 - pow(1 - 8.0 / 256, T)), 1e-9);
    /* Several tokens: within 2 % of 20 000 simulated steps (standard error well under 0.5 %). */
    int toks[] = {2, 8, 32};
    for (int i = 0; i < 3; i++) {
        double mc = monte_carlo_max(toks[i], 20000), got = kv_moe_expected_max_touched(pi, 256, 8, toks[i]);
        ck_assert_msg(fabs(got / mc - 1) < 0.02, "T %d: %.6g vs Monte Carlo %.6g", toks[i], got, mc);
        ck_assert(got > 32 * (1 - pow(1 - 8.0 / 256, toks[i])));   /* above the mean rank's */
    }
    /* Many tokens: every rank touches all 32 of its experts. */
    ck_assert_double_eq_tol(kv_moe_expected_max_touched(pi, 256, 8, 4096), 32, 1e-6);
    /* In the step: DP 8 x EP 8, one sequence per rank (8 tokens over the ranks), the busiest rank
     * reads the expected maximum's whole experts; memory-bound, so its phase exceeds the
     * mean rank's by about that ratio of weight bytes. */
    load(DSV3, NULL, 0);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w[1] = {{1, 1000}};
    kv_moe_step st = kv_moe_step_time(&s, &c, SCN_ATTN_FLASH, w, 1);
    ck_assert_double_eq_tol(st.touched_busiest, kv_moe_expected_max_touched(pi, 256, 8, 8), 1e-12);
    ck_assert(st.touched_busiest > 32 * (1 - pow(1 - 8.0 / 256, 8)) + 2);
}
END_TEST

START_TEST(dp_without_ep_gathers_by_hand)
{
    /* DeepSeek-V3, DP 8 x TP 1 with the experts split over all 8 GPUs (no EP), 32 decoding
     * sequences per DP rank. Before each of the 58 MoE layers every GPU gathers the 8 ranks'
     * 8 x 32 hidden states (8 x 32 x 7168 x 2 = 3 670 016 bytes) and afterwards reduce-scatters
     * the partial sums: a ring all-reduce of 3.67 MB in two halves. Under the default engine's
     * custom all-reduce that size (above 256 KiB on 8 GPUs, below 8 MiB) runs two-shot: the h200
     * profile's measured 12.6 us, bytes 2 x 7/8 x 3 670 016 at its measured 249 GB/s. */
    load("model: deepseek-v3\nhardware: h200\n" WL "deployment: {tensor_parallel: 1, attention_data_parallel: 8}\n", NULL, 0);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w[32];
    for (int i = 0; i < 32; i++) w[i] = (kv_seq_work){1, 300};
    kv_moe_step st = kv_moe_step_time(&s, &c, SCN_ATTN_FLASH, w, 32);
    double m = 8.0 * 32 * 7168 * 2;
    double layer = 12.6e-6 + 2.0 * 7 / 8 * m / 249e9;
    ck_assert_msg(fabs(st.gather / (58 * layer) - 1) < 1e-6, "%.6g ms vs %.6g", st.gather * 1e3, 58 * layer * 1e3);
    ck_assert_double_eq_tol(st.seconds, st.attention + st.experts + st.alltoall + st.gather, 1e-12);
    ck_assert(st.alltoall == 0);
    /* With EP the tokens travel by the all-to-all instead: no gather. */
    load(DSV3, NULL, 0);
    st = kv_moe_step_time(&s, &c, SCN_ATTN_FLASH, w, 32);
    ck_assert(st.gather == 0 && st.alltoall > 0);
}
END_TEST

START_TEST(deepseek_memory_per_gpu_by_hand)
{
    load(DSV3, NULL, 0);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_moe_memory mm = kv_moe_memory_compute(&s, &c);
    /* MLA caches kv_lora_rank 512 + rope 64 per layer per token, once, in bf16, on every GPU of
     * its DP rank: 576 x 61 x 2 = 70 272 bytes. */
    ck_assert_double_eq_tol(mm.kv_bytes_per_token, 70272, 1e-9);
    /* Routed experts: 256 x 3 x 7168 x 2048 parameters in each of 58 layers at the entry's
     * stored bytes per parameter (fp8), one eighth per GPU. */
    double routed = 256.0 * 3 * 7168 * 2048 * 58 * kv_weight_bytes_per_param(&s.model);
    ck_assert_double_eq_tol(mm.expert_weights, routed / 8, 1);
    /* Everything else is whole on every GPU (TP 1): total - routed + routed / 8. */
    kv_weights w = kv_weights_compute(&s.model, 1);
    ck_assert_double_eq_tol(mm.weights, w.bytes_per_rank - routed + routed / 8, 1);
    ck_assert_msg(mm.kv_budget > 0, "DeepSeek-V3 must fit on 8 H200s with EP 8: budget %.3g", mm.kv_budget);
}
END_TEST

/* Two requests sharing a 512-token prefix (each prompt: the prefix + 600 tokens of its own),
 * one after the other, under a router. */
static double hit_rate(int dp, const char *router)
{
    char text[1024];
    snprintf(text, sizeof text,
             "model: qwen3-30b-a3b\nhardware: h100-sxm\n"
             "workload: {requests: 2, arrival: {process: constant, rate: 1/s}, prompt_tokens: 600, output_tokens: 4,\n"
             "  shared_prefix: {groups: 1, tokens: 512, share: 1}}\n"
             "deployment: {tensor_parallel: 1, attention_data_parallel: %d, expert_parallel: %d, router: %s}\n"
             "options: {kv_layout: paged, prefix_cache: on}\n", dp, dp, router);
    load(text, NULL, 0);
    sim_metrics m;
    sim_choice c = sim_choice_first(&s);
    char err[256];
    ck_assert_int_eq(sim_run_predicted(&s, &c, &m, err, sizeof err), SIM_OK);
    ck_assert_int_eq(m.requests, 2);
    return m.prefix_hit_rate;
}

START_TEST(attention_dp_ranks_never_share_kv)
{
    /* One rank: the second request finds the first one's 512-token prefix (32 blocks) of the
     * 2 x 1112 prompt tokens. */
    ck_assert_double_eq_tol(hit_rate(1, "round_robin"), 512.0 / 2224, 1e-12);
    /* Two DP ranks, round robin: the second request lands on the other rank, whose pool never
     * saw the prefix: no hit. */
    ck_assert(hit_rate(2, "round_robin") == 0);
    /* Routing by prefix sends both to one rank, where the hit comes back. */
    ck_assert_double_eq_tol(hit_rate(2, "prefix_affinity"), 512.0 / 2224, 1e-12);
    /* Each rank's pool is the expert-sharded one. */
    load("model: qwen3-30b-a3b\nhardware: h100-sxm\n" WL "deployment: {attention_data_parallel: 2, expert_parallel: 2}\n",
         NULL, 0);
    sim_metrics m;
    sim_choice c = sim_choice_first(&s);
    char err[256];
    ck_assert_int_eq(sim_run_predicted(&s, &c, &m, err, sizeof err), SIM_OK);
    kv_cache_cfg kc = kv_cache_cfg_make(&s, c.kv_dtype, 0, 0);
    ck_assert_int_eq(m.kv_blocks, kv_moe_pool_size(&s, &kc, true, c.block_size).blocks);
}
END_TEST

START_TEST(plan_explains_the_ep_step)
{
    load(DSV3, NULL, 0);
    plan_cand c;
    memset(&c, 0, sizeof c);
    c.c = sim_choice_first(&s);
    c.tp = 1;
    c.replicas = 1;
    c.max_num_seqs = s.deployment.max_num_seqs;
    c.max_batched = s.deployment.max_num_batched_tokens;
    c.hw = c.wformat = c.engine = -1;
    c.status = PLAN_DONE;
    c.allowed = true;
    c.m.batch_mean = 64;
    int order[1] = {0};
    plan_result r = {.c = &c, .n = 1, .order = order, .best = 0};
    char line[PLAN_LINE];
    ck_assert_int_eq(plan_moe_explain(&s, &r, line, sizeof line), 1);
    /* The DP rank's step at 64 sequences, as kv_moe_step_time has it, and its all-to-all share. */
    kv_cache_cfg kc = kv_cache_cfg_make(&s, c.c.kv_dtype, 0, 0);
    kv_seq_work w[64];
    for (int i = 0; i < 64; i++) w[i] = (kv_seq_work){1, 105};   /* the workload's context: 100 + 10 / 2 */
    kv_moe_step st = kv_moe_step_time(&s, &kc, c.c.attention, w, 64);
    char want[160];
    snprintf(want, sizeof want, "all-to-all %.2f ms (%.0f %% of the step", st.alltoall * 1e3, 100 * st.alltoall / st.seconds);
    ck_assert_msg(strstr(line, "Expert parallelism (EP 8, attention DP 8 x TP 1)") != NULL, "%s", line);
    ck_assert_msg(strstr(line, "68.6 KiB per token per DP rank") != NULL, "%s", line);
    ck_assert_msg(strstr(line, want) != NULL, "want '%s' in: %s", want, line);
    /* A plain deployment gets no such line. */
    load("model: llama-3.1-8b\nhardware: h100-sxm\n" WL, NULL, 0);
    c.c = sim_choice_first(&s);
    ck_assert_int_eq(plan_moe_explain(&s, &r, line, sizeof line), 0);
}
END_TEST

START_TEST(cli_reports_dp_ep)
{
    char out[65536], err[8192], args[1024];
    const char *lib = getenv("KVPLAN_LIBRARY");
    snprintf(args, sizeof args, "memory %s/archetypes/deepseek-v3-dp-ep.yaml", lib);
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 0);
    ck_assert_msg(strstr(out, "KV/token per DP rank") != NULL, "%s", out);
    snprintf(args, sizeof args, "cost %s/archetypes/deepseek-v3-dp-ep.yaml --batch 64", lib);
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 0);
    ck_assert_msg(strstr(out, "all-to-all share of the step") != NULL, "%s", out);
}
END_TEST

/* Regression (issue 14 review): `capacity` reported "max context 0" under EP (the plain replica's
 * budget, every expert on every GPU, is negative), and `memory`/`cost` headlined that unsplit
 * replica. The budget is one DP rank's on each GPU, with its share of the routed experts. */
START_TEST(ep_headlines_and_max_context)
{
    load(DSV3, NULL, 0);
    plan_cand c;
    memset(&c, 0, sizeof c);
    c.c = sim_choice_first(&s);
    c.tp = 1;
    c.replicas = 1;
    c.max_num_seqs = s.deployment.max_num_seqs;
    c.max_batched = s.deployment.max_num_batched_tokens;
    c.hw = c.wformat = c.engine = -1;
    /* By hand: weights per GPU are the model less 7/8 of its routed experts (256 x 3 x 7168 x
     * 2048 x 58 parameters at the stored bytes per parameter); the budget is usable memory less
     * weights, activations and the runtime; 64 sequences share it at 70 272 bytes per token. */
    double routed = 256.0 * 3 * 7168 * 2048 * 58 * kv_weight_bytes_per_param(&s.model);
    double weights = kv_weights_compute(&s.model, 1).bytes_per_rank - routed + routed / 8;
    /* The engine's memory rules (kv_memory_split, tested on their own in test_capacity) turn
     * those weights and the activation peak into the KV budget. */
    double budget = kv_memory_split(&s, weights,
                                    kv_activation_bytes(&s.model, 1, s.deployment.max_num_batched_tokens,
                                                        s.deployment.max_num_seqs)).kv_budget;
    long want = (long)floor(budget / 64 / 70272.0);
    if (want > s.deployment.max_model_len) want = s.deployment.max_model_len;
    ck_assert(want > 1000);
    ck_assert_int_eq(plan_max_context(&s, &c, 64), want);

    /* memory --format json on the archetype: headline weights and budget are the sharded ones,
     * the MLA split is latent 512 x 61 x 2 and rope 64 x 61 x 2 bytes per token per DP rank. */
    char out[65536], err[8192], args[1024];
    const char *lib = getenv("KVPLAN_LIBRARY");
    snprintf(args, sizeof args, "memory %s/archetypes/deepseek-v3-dp-ep.yaml --format json", lib);
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 0);
    json_error_t je;
    json_t *root = json_loads(out, 0, &je);
    ck_assert_msg(root != NULL, "%s", je.text);
    json_t *mem = json_object_get(root, "memory"), *moe = json_object_get(root, "moe_parallel");
    json_t *sc = json_object_get(root, "scenario");
    ck_assert_int_eq(json_integer_value(json_object_get(sc, "attention_data_parallel")), 8);
    ck_assert_int_eq(json_integer_value(json_object_get(sc, "expert_parallel")), 8);
    ck_assert_double_eq_tol(json_number_value(json_object_get(mem, "weight_bytes")), weights, 1);
    double kvb = json_number_value(json_object_get(mem, "kv_budget_bytes"));
    ck_assert(kvb > 0);
    json_t *row = json_array_get(json_object_get(root, "capacity"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(row, "kv_bytes_per_token")), 70272);
    /* Paged capacity in whole 16-token blocks, as the simulator allocates it. */
    ck_assert_int_eq(json_integer_value(json_object_get(row, "capacity_tokens")), (long)floor(kvb / 70272 / 16) * 16);
    ck_assert_int_eq(json_integer_value(json_object_get(moe, "kv_latent_bytes_per_token")), 512 * 61 * 2);
    ck_assert_int_eq(json_integer_value(json_object_get(moe, "kv_rope_bytes_per_token")), 64 * 61 * 2);
    json_decref(root);

    /* cost: the headline step is the DP rank's split step, and the all-to-all share its part. */
    snprintf(args, sizeof args, "cost %s/archetypes/deepseek-v3-dp-ep.yaml --batch 64 --context 2000 --format json", lib);
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 0);
    root = json_loads(out, 0, &je);
    ck_assert_msg(root != NULL, "%s", je.text);
    json_t *step = json_object_get(root, "step");
    moe = json_object_get(root, "moe_parallel");
    double head = json_number_value(json_object_get(step, "step_seconds"));
    double split = json_number_value(json_object_get(moe, "step_seconds"));
    double a2a = json_number_value(json_object_get(moe, "alltoall_seconds"));
    ck_assert_double_eq_tol(head, split, 1e-12);
    ck_assert_double_eq_tol(json_number_value(json_object_get(moe, "alltoall_share")), a2a / split, 1e-12);
    ck_assert(json_number_value(json_object_get(moe, "expert_seconds")) > 0);
    ck_assert(json_number_value(json_object_get(moe, "attention_seconds")) > 0);
    json_decref(root);

    /* plan: the recommendation names the split, and "What binds" prices the DP rank's step. */
    load(DSV3, NULL, 0);
    c.status = PLAN_DONE;
    c.allowed = true;
    c.m.batch_mean = 16;
    int order[1] = {0};
    plan_result r = {.c = &c, .n = 1, .order = order, .best = 0};
    char lines[12][PLAN_LINE];
    int nl = plan_explain(&s, &r, lines, 12);
    kv_cache_cfg kc = kv_cache_cfg_make(&s, c.c.kv_dtype, 0, 0);
    kv_seq_work w16[16];
    for (int i = 0; i < 16; i++) w16[i] = (kv_seq_work){1, 105};
    kv_moe_step st = kv_moe_step_time(&s, &kc, c.c.attention, w16, 16);
    char wantb[160];
    snprintf(wantb, sizeof wantb, "a DP rank's decode step of 16 sequences at 105 tokens of context takes %.2f ms", st.seconds * 1e3);
    bool rec = false, binds = false;
    for (int i = 0; i < nl; i++) {
        rec |= strstr(lines[i], "Recommended:") && strstr(lines[i], "(attention DP 8 x TP 1, experts over EP 8)");
        binds |= strstr(lines[i], "What binds") && strstr(lines[i], wantb);
    }
    ck_assert_msg(rec && binds, "want '%s' in: %s | %s | %s", wantb, lines[0], nl > 1 ? lines[1] : "", nl > 2 ? lines[2] : "");
}
END_TEST

Suite *suite_moe_parallel(void)
{
    Suite *su = suite_create("moe_parallel");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, deployment_fields_and_their_errors);
    tcase_add_test(tc, busiest_rank_by_hand);
    tcase_add_test(tc, topk_picks_distinct_experts);
    tcase_add_test(tc, busiest_rank_touches_the_expected_maximum);
    tcase_add_test(tc, alltoall_hottest_rank_binds);
    tcase_add_test(tc, ep8_alltoall_bytes_by_hand);
    tcase_add_test(tc, ep_moe_layer_pays_its_kernels);
    tcase_add_test(tc, grouped_routing_pays_its_published_time);
    tcase_add_test(tc, ep_without_dp_dispatches_nothing);
    tcase_add_test(tc, dp_without_ep_gathers_by_hand);
    tcase_add_test(tc, shared_experts_priced_as_dense_mlp);
    tcase_add_test(tc, deepseek_memory_per_gpu_by_hand);
    tcase_add_test(tc, attention_dp_ranks_never_share_kv);
    tcase_add_test(tc, plan_explains_the_ep_step);
    tcase_add_test(tc, cli_reports_dp_ep);
    tcase_add_test(tc, ep_headlines_and_max_context);
    suite_add_tcase(su, tc);
    return su;
}
