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
} kv_spec_compare;

/* Plain decode versus speculative decode for `batch` sequences of `context` cached tokens. */
kv_spec_compare kv_spec_compare_at(const scn_scenario *s, const scn_spec *sp, const kv_cache_cfg *c,
                                   scn_attention attn, int batch, long context);
/* The smallest batch (<= max_batch) at which speculative decode stops beating plain decode per
 * token; 0 when it already loses at batch 1, max_batch + 1 when it wins throughout. */
int kv_spec_crossover(const scn_scenario *s, const scn_spec *sp, const kv_cache_cfg *c, scn_attention attn,
                      long context, int max_batch);

#endif
