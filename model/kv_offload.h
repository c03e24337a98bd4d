/* kv_offload.h: what moving KV between the GPU and a memory tier below it costs, and whether
 * reloading a prefix-cache hit from a tier beats recomputing it (docs/cost-model.md, "KV offload
 * tiers"). Pure functions of the scenario. */
#ifndef KVPLAN_MODEL_KV_OFFLOAD_H
#define KVPLAN_MODEL_KV_OFFLOAD_H

#include "kv_model.h"

/* The tiers a block can sit in below HBM, in spill order. */
typedef enum { KV_TIER_CPU, KV_TIER_DISK, KV_TIER_REMOTE, KV_TIER_COUNT } kv_tier_id;
const char *kv_tier_name(kv_tier_id t);

/* Seconds to move `bytes` (per GPU) through tier t's link: its latency plus bytes over its
 * effective bandwidth (datasheet x efficiency). A disk reload is staged through host memory,
 * as engines that read NVMe into pinned buffers do: both links, one after the other; so is a
 * remote-store reload (LMCache's remote backends fetch into its CPU buffer first). Infinity
 * when the profile lacks the tier. */
double kv_tier_transfer_s(const scn_hardware *hw, kv_tier_id t, double bytes);

/* Seconds of a reload of load_s that a step of step_s with `layers` layers still waits for when
 * the engine loads layer by layer (layer i + 1's KV arrives while layer i computes):
 * max(load_s / L, load_s - step_s (L - 1) / L) (docs/cost-model.md, "Layerwise reload
 * overlap"). load_s itself when layers < 2. */
double kv_layerwise_exposed_s(double load_s, double step_s, int layers);

/* KV bytes of `tokens` tokens held on one GPU (one tensor-parallel rank). */
double kv_offload_bytes_per_rank(const scn_scenario *s, const kv_cache_cfg *c, long tokens);

/* A tier's capacity per GPU in bytes: options.kv_offload_capacity when given, else the
 * hardware profile's. */
double kv_tier_capacity(const scn_scenario *s, kv_tier_id t);

/* Reload or recompute: a prompt of `prompt` tokens whose first `hit` tokens sit in tier t. */
typedef struct {
    double bytes;          /* per GPU, to reload the hit */
    double reload_s;       /* kv_tier_transfer_s of those bytes */
    double recompute_s;    /* prefill time of the prompt without the hit minus with it */
    bool reload_pays;      /* reload_s < recompute_s */
} kv_offload_cmp;
kv_offload_cmp kv_offload_compare(const scn_scenario *s, const kv_cache_cfg *c, int block_size, kv_tier_id t,
                                  long prompt, long hit);

#endif
