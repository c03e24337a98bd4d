/* kv_spec.h: the cost of speculative decoding: what a proposer (a draft model, an EAGLE head,
 * a DeepSeek MTP module, or an n-gram lookup) adds in weights, KV and time, what a verify step
 * of k + 1 tokens per sequence costs, how many tokens it emits on average, and the batch size
 * above which speculation stops paying. Derivations: docs/cost-model.md, "Speculative
 * decoding". Pure functions, like the rest of model/. */
#ifndef KVPLAN_KV_SPEC_H
#define KVPLAN_KV_SPEC_H

#include "kv_blocks.h"
#include "kv_model.h"
#include "kv_moe_parallel.h"

/* The speculative setting a scenario's option index names, or NULL when it is off. */
const scn_spec *kv_spec_get(const scn_scenario *s, int index);

/* Expected tokens one verify step emits for `k` drafts: sum over i = 0..k of the product of
 * the first i acceptance rates; (1 - a^(k+1)) / (1 - a) for a constant rate a. */
double kv_spec_expected_tokens(const scn_spec *sp, int k);

/* The proposer as a model the step-time model can price: the draft model; for EAGLE one
 * decoder layer of the target's attention shape with a dense MLP; for MTP one layer of the
 * target itself (MoE and MLA kept). False for n-gram (no model). */
bool kv_spec_proposer_model(const scn_scenario *s, const scn_spec *sp, scn_model *out);
/* The scenario the proposer runs in: the target's with the proposer as model. False when the
 * method has no model. */
bool kv_spec_proposer_scenario(const scn_scenario *s, const scn_spec *sp, scn_scenario *out);

/* Bytes per rank the proposer's weights add (EAGLE and MTP share the target's embedding and
 * LM head; they add their layer and the 2h x h input projection). */
double kv_spec_weight_bytes(const scn_scenario *s, const scn_spec *sp);
/* KV bytes per token per rank the proposer keeps beside the target's. */
double kv_spec_kv_bytes_per_token(const scn_scenario *s, const kv_cache_cfg *c, const scn_spec *sp);
/* The replica's pool with the proposer resident: the budget less the proposer's weights and
 * the extra logits of k + 1 rows per sequence, over the target's plus the proposer's bytes per
 * token. sp NULL: kv_pool_size(). */
/* kv_capacity_compute with proposer sp (NULL: none) inside the budget: its weights count with
 * the target's, its k extra fp32 logit rows per sequence at max_num_seqs with the activations,
 * and every token's KV costs the target's bytes plus the proposer's. `memory`, plan's fit check
 * and the simulator's pool (kv_spec_pool_size) all take it from here. */
kv_capacity kv_capacity_spec(const scn_scenario *s, const kv_cache_cfg *c, int block_size, double mean_tokens,
                             const scn_spec *sp);
/* The pool kv_pool_size gives, with proposer sp (NULL: none) inside the budget
 * (kv_capacity_spec). */
kv_pool kv_spec_pool_size(const scn_scenario *s, const kv_cache_cfg *c, bool paged, int block_size,
                          const scn_spec *sp);

typedef struct {
    kv_step_cost verify;    /* the target's step: verify rows and any prefill chunks (unsplit) */
    double verify_seconds;  /* s: the verify step as priced: verify.seconds, or moe.seconds under EP / DP */
    kv_moe_step moe;        /* under expert parallelism: the DP rank's verify step, split */
    double draft_seconds;   /* s: the proposer's passes (k single-token steps, plus prefill chunks) */
    double proposer_cpu;    /* s: n-gram lookups on the CPU */
    double seconds;         /* the step: verify + draft + proposer CPU */
} kv_spec_step;

/* One speculative engine step. drafts[i] > 0 marks row i a verify of drafts[i] draft tokens
 * (new_tokens = drafts[i] + 1); other rows are prefill chunks or plain decodes, which the
 * proposer also runs. ps is kv_spec_proposer_scenario()'s result (NULL for n-gram). scratch
 * holds n entries. */
kv_spec_step kv_spec_step_time(const scn_scenario *s, const scn_scenario *ps, const scn_spec *sp,
                               const kv_cache_cfg *c, scn_attention attn, const kv_seq_work *seqs,
                               const int *drafts, int n, kv_seq_work *scratch);

typedef struct {
    double plain_token;     /* s per token, plain decode at this batch */
    double spec_token;      /* s per token, speculative: step / (batch * expected tokens) */
    double expected;        /* tokens per verify step per sequence */
    bool plain_graph;       /* the plain decode step replays a CUDA graph */
    bool spec_graph;        /* the verify step ((k + 1) x batch rows) replays one */
    long verify_rows;       /* (k + 1) x batch */
} kv_spec_compare;

/* Plain decode versus speculative decode for `batch` sequences of `context` cached tokens. */
kv_spec_compare kv_spec_compare_at(const scn_scenario *s, const scn_spec *sp, const kv_cache_cfg *c,
                                   scn_attention attn, int batch, long context);

/* Where speculation pays is not one interval in general: the verify step's (k + 1) x B rows
 * leave the engine's largest CUDA-graph capture size long before the plain step's B rows do,
 * and GEMM tiles and waves step at multiples of their rows, so the sign of the difference can
 * change more than once (docs/cost-model.md, "Where speculation pays"). */
#define KV_SPEC_RANGES_MAX 16
typedef struct {
    int lo, hi;                 /* batches lo..hi (inclusive) where speculative decode wins per token */
} kv_spec_range;

typedef enum {
    KV_SPEC_WHY_COMPUTE,        /* the verify rows make the step compute-bound: the smooth crossing */
    KV_SPEC_WHY_GRAPH_LOST,     /* the verify rows pass the largest CUDA-graph capture size */
    KV_SPEC_WHY_GRAPH_PLAIN,    /* the plain step passes it too (speculation's handicap goes) */
    KV_SPEC_WHY_TILE            /* a GEMM tile or wave step in the rows */
} kv_spec_why;

typedef struct {
    int batch;                  /* the first batch on the new side */
    bool wins;                  /* speculation wins from `batch` on (until the next crossing) */
    kv_spec_why why;            /* what changed between batch - 1 and batch */
    long verify_rows;           /* (k + 1) x batch */
    bool spec_graph, plain_graph; /* at `batch`: whether the verify and the plain step replay a CUDA graph */
} kv_spec_crossing;

typedef struct {
    int max_batch;                                   /* batches 1..max_batch were scanned */
    int n;                                           /* ranges where speculation wins */
    kv_spec_range r[KV_SPEC_RANGES_MAX];
    int n_cross;                                     /* sign changes, in batch order */
    kv_spec_crossing x[2 * KV_SPEC_RANGES_MAX];
    bool truncated;                                  /* more ranges than KV_SPEC_RANGES_MAX */
} kv_spec_wins;

/* Every batch from 1 to max_batch compared (kv_spec_compare_at): the ranges where speculation
 * wins and each crossing with its cause. */
kv_spec_wins kv_spec_win_ranges(const scn_scenario *s, const scn_spec *sp, const kv_cache_cfg *c,
                                scn_attention attn, long context, int max_batch);
/* "1-37, 64-95" (or "none"); and a clause per crossing (the first `max_listed`, then how many
 * more) saying what changed there. */
void kv_spec_ranges_text(const kv_spec_wins *w, char *buf, size_t n);
void kv_spec_crossings_text(const kv_spec_wins *w, int k, int max_listed, char *buf, size_t n);
/* Whether `batch` lies in one of the winning ranges. */
bool kv_spec_wins_at(const kv_spec_wins *w, int batch);
/* The first batch at which speculation stops winning: 0 when it loses at batch 1, max_batch + 1
 * when it wins throughout. With several ranges this is only the first crossing; callers that
 * decide should use kv_spec_win_ranges. */
int kv_spec_crossover(const scn_scenario *s, const scn_spec *sp, const kv_cache_cfg *c, scn_attention attn,
                      long context, int max_batch);

#endif
