/* kv_moe_parallel.h: DeepSeek-style MoE serving: attention data parallelism (each DP rank holds
 * whole sequences and their KV) with routed experts sharded over expert-parallel ranks, joined
 * by an all-to-all dispatch and combine per MoE layer. Memory per GPU, KV per DP rank, and one
 * DP rank's step time with the busiest expert rank setting the expert phase. Derivations:
 * docs/cost-model.md, "Expert parallelism and attention data parallelism". */
#ifndef KVPLAN_KV_MOE_PARALLEL_H
#define KVPLAN_KV_MOE_PARALLEL_H

#include "kv_blocks.h"
#include "kv_model.h"

/* Flops per second the routed experts' grouped GEMMs run at, for expert GEMMs of Me rows per
 * expert, N columns and depth K in math dtype dt, as the engine's fused-MoE kernel family runs
 * them (docs/cost-model.md, "Fused-MoE kernels"): Triton's fused_moe on Hopper at
 * KV_TRITON_MOE_BF16_SHARE of the bf16 dense peak whatever the weight format, times the
 * shape's tile efficiency; otherwise the dense GEMM rate of dt times that efficiency. The share
 * is the GEMMs' alone: the published fused_experts timings less the time of its silu_and_mul and
 * moe_sum kernels, which the step prices as memory traffic of their own (kv_moe_movement_bytes):
 * the mean of Mixtral-8x7B's 0.516 and Gemma-4's 0.358 (docs/cost-model.md, "Fused-MoE
 * kernels"). */
#define KV_TRITON_MOE_BF16_SHARE 0.437
double kv_moe_gemm_rate(const scn_hardware *hw, const scn_engine *e, scn_dtype dt, double Me, double N, double K);

/* True when the deployment uses expert parallelism or attention data parallelism. */
bool kv_moe_parallel_on(const scn_scenario *s);
/* Expert and attention-DP degrees, at least 1. */
int kv_moe_ep(const scn_scenario *s);
int kv_moe_dp(const scn_scenario *s);

/* The probability pi[i] that a token's k distinct routed experts include expert i (0-based),
 * for popularity proportional to (i + 1)^-skew: pi_i = min(1, lambda (i + 1)^-skew) with lambda
 * such that the pi sum to k (a proportional-to-size design, capped: no expert can be picked
 * twice by one token). pi holds `experts` entries. Returns how many experts are capped at 1. */
int kv_moe_inclusion(int experts, int k, double skew, double *pi);
/* The share of all token-to-expert assignments the busiest expert-parallel rank receives when
 * each token picks k distinct experts with kv_moe_inclusion's probabilities and expert i lives
 * on rank i mod E: 1/E for skew 0. */
double kv_moe_busiest_share(int experts, int k, int ep, double skew);

/* The expected maximum, over the `ep` expert-parallel ranks (expert i on rank i mod ep), of the
 * number of a rank's experts that `tokens` tokens touch when each token's k picks include expert
 * i with probability pi[i] (kv_moe_inclusion): expert i is touched with q_i = 1 - (1 - pi_i)^T,
 * independently, and the ranks' counts are taken as independent. Exact enumeration for one
 * DeepSeek-V3 token gives 2.5637; this returns 2.5445 (tests/test_moe_parallel.c). -1: out of
 * memory. */
double kv_moe_expected_max_touched(const double *pi, int experts, int ep, double tokens);

typedef struct {
    double weights;             /* bytes per GPU: non-expert weights / tp + routed experts / (EP x expert TP) */
    double expert_weights;      /* of which routed experts */
    double kv_bytes_per_token;  /* per GPU of a DP rank (MLA's latent whole on every TP rank) */
    double kv_budget;           /* bytes per GPU left for the KV cache */
} kv_moe_memory;

/* Bytes per GPU of model m's weights under s's deployment: the routed experts sharded over the
 * replica's GPUs when EP or attention DP is on and m has experts, else kv_weights_compute's. */
double kv_moe_weight_bytes(const scn_scenario *s, const scn_model *m);
kv_moe_memory kv_moe_memory_compute(const scn_scenario *s, const kv_cache_cfg *c);
/* One DP rank's KV pool, in blocks (contiguous: tokens). */
kv_pool kv_moe_pool_size(const scn_scenario *s, const kv_cache_cfg *c, bool paged, int block_size);

typedef struct {
    double seconds;          /* the DP rank's step */
    double attention;        /* s: everything but the routed experts and the all-to-all (attention,
                              * projections, norms, dense layers, shared experts, LM head, TP
                              * all-reduces, engine overhead) */
    double experts;          /* s: the busiest rank's routed-expert GEMMs */
    double alltoall;         /* s: dispatch + combine over all MoE layers */
    double alltoall_bytes;   /* bytes the busiest EP rank moves over all MoE layers (dispatch + combine) */
    double gather;           /* s: attention DP without EP: the all-gather of every DP rank's tokens
                              * before each MoE layer and the reduce-scatter of the experts' partial
                              * sums after it, over all MoE layers (0 with EP) */
    kv_coll_cost gather_layer; /* one MoE layer's all-gather + reduce-scatter, priced as the ring
                                * all-reduce whose two halves they are */
    double engine_seconds;   /* s: of `seconds`, the engine's CPU work the GPU does not hide */
    double hot_factor;       /* the busiest rank's all-to-all bytes over the mean rank's (>= 1) */
    kv_coll_cost dispatch;   /* one layer's dispatch */
    double busiest_share;    /* share of the expert assignments on the busiest rank */
    double rows_busiest;     /* token-expert rows the busiest rank computes per MoE layer */
    double touched_busiest;  /* expected experts the busiest rank touches per MoE layer (the
                              * maximum over EP ranks, kv_moe_expected_max_touched) */
} kv_moe_step;

/* The step of one attention-DP rank running `seqs` while every other rank runs a batch like it
 * (the ranks step together: the all-to-all is a barrier). */
kv_moe_step kv_moe_step_time(const scn_scenario *s, const kv_cache_cfg *c, scn_attention attn,
                             const kv_seq_work *seqs, int n);
/* The same with speculative verify rows: verify[i] > 0 marks row i a verify of verify[i] drafts
 * (kv_step_time_verify); verify NULL is kv_moe_step_time. */
kv_moe_step kv_moe_step_time_verify(const scn_scenario *s, const kv_cache_cfg *c, scn_attention attn,
                                    const kv_seq_work *seqs, const int *verify, int n);

/* Pricing many steps of one scenario (the simulator's model executor): what a step adds to the
 * step model besides attention depends on the batch only through its token count and CUDA-graph
 * size, so the context keeps it by those, and builds the dense stand-in models once. s must
 * outlive the context and not change while it lives. NULL: out of memory. */
typedef struct kv_moe_ctx kv_moe_ctx;
kv_moe_ctx *kv_moe_ctx_make(const scn_scenario *s);
void kv_moe_ctx_free(kv_moe_ctx *x);
/* kv_moe_step_time_verify's result, bit for bit, given base = kv_step_time_verify of the same
 * rows under the context's scenario (the caller may have it from a cached shape). */
kv_moe_step kv_moe_step_of(kv_moe_ctx *x, const kv_step_cost *base, const kv_seq_work *seqs, const int *verify, int n);

#endif
