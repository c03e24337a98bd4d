/* kv_moe_parallel.h: DeepSeek-style MoE serving: attention data parallelism (each DP rank holds
 * whole sequences and their KV) with routed experts sharded over expert-parallel ranks, joined
 * by an all-to-all dispatch and combine per MoE layer. Memory per GPU, KV per DP rank, and one
 * DP rank's step time with the busiest expert rank setting the expert phase. Derivations:
 * docs/cost-model.md, "Expert parallelism and attention data parallelism". */
#ifndef KVPLAN_KV_MOE_PARALLEL_H
#define KVPLAN_KV_MOE_PARALLEL_H

#include "kv_blocks.h"
#include "kv_model.h"

/* True when the deployment uses expert parallelism or attention data parallelism. */
bool kv_moe_parallel_on(const scn_scenario *s);
/* Expert and attention-DP degrees, at least 1. */
int kv_moe_ep(const scn_scenario *s);
int kv_moe_dp(const scn_scenario *s);

/* The share of all token-to-expert assignments the busiest expert-parallel rank receives when
 * expert i (0-based) is chosen with probability proportional to (i + 1)^-skew and expert i
 * lives on rank i mod E: 1/E for skew 0. */
double kv_moe_busiest_share(int experts, int ep, double skew);

typedef struct {
    double weights;             /* bytes per GPU: non-expert weights / tp + routed experts / (EP x expert TP) */
    double expert_weights;      /* of which routed experts */
    double kv_bytes_per_token;  /* per GPU of a DP rank (MLA's latent whole on every TP rank) */
    double kv_budget;           /* bytes per GPU left for the KV cache */
} kv_moe_memory;

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
    double alltoall_bytes;   /* bytes each GPU sends over all MoE layers (dispatch + combine) */
    kv_coll_cost dispatch;   /* one layer's dispatch */
    double busiest_share;    /* share of the expert assignments on the busiest rank */
    double rows_busiest;     /* token-expert rows the busiest rank computes per MoE layer */
} kv_moe_step;

/* The step of one attention-DP rank running `seqs` while every other rank runs a batch like it
 * (the ranks step together: the all-to-all is a barrier). */
kv_moe_step kv_moe_step_time(const scn_scenario *s, const kv_cache_cfg *c, scn_attention attn,
                             const kv_seq_work *seqs, int n);

#endif
