/* kv_tier.h: the memory tiers below a replica's GPU KV pool (docs/simulator.md, "KV offload
 * tiers"): host memory, then local NVMe, then a remote store (each replica its own share of it:
 * the store is not shared between replicas). A tier holds prefix-cache blocks by their chain hash,
 * least recently used first; a block the GPU's prefix cache evicts spills into the first tier,
 * a block a full tier evicts spills into the next tier the choice has, and the last drops it. The hierarchy is
 * exclusive: a block found in a tier is taken out of it and reloaded into a GPU block. A
 * separate swap area on the host holds preempted sequences' blocks (preemption: swap).
 * Memory is bounded by the tiers' capacities in blocks, never by the number of requests. */
#ifndef KVPLAN_SIM_KV_TIER_H
#define KVPLAN_SIM_KV_TIER_H

#include "kv_manager.h"
#include "metrics.h"
#include "../model/kv_offload.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct sim_kv_tiers sim_kv_tiers;

/* What one tier did over a run. */
typedef struct {
    long capacity;          /* blocks */
    long used;              /* blocks held now */
    long spilled;           /* blocks written into it (from the GPU or the tier above) */
    long reloaded;          /* blocks read back into GPU blocks by prefix hits */
    long dropped;           /* blocks it evicted to the next tier or dropped (last tier) */
    double occupancy;       /* block-seconds held (divide by run time x capacity for the mean) */
} sim_kv_tier_stats;

/* Tiers of cpu_blocks, disk_blocks and remote_blocks (0: no such tier; a tier of 0 is skipped in
 * the spill order) and a swap area of swap_blocks. NULL on out of memory. */
sim_kv_tiers *sim_kv_tiers_init(long cpu_blocks, long disk_blocks, long remote_blocks, long swap_blocks);
void sim_kv_tiers_free(sim_kv_tiers *t);
/* Whether any offload tier exists (the swap area aside). */
bool sim_kv_tiers_offload(const sim_kv_tiers *t);

/* A block with chain hash h left the GPU's prefix cache: it goes into the first tier, pushing
 * that tier's least recently used block down (or out). */
void sim_kv_tiers_spill(sim_kv_tiers *t, uint64_t h);
/* The tier holding h, or -1. */
int sim_kv_tiers_find(const sim_kv_tiers *t, uint64_t h);
/* Takes h out of tier k for a reload into the GPU and counts it. */
void sim_kv_tiers_take(sim_kv_tiers *t, int k, uint64_t h);
/* Blocks reloaded from each tier since the last call (then cleared): what the scheduler charges. */
void sim_kv_tiers_drain(sim_kv_tiers *t, long out[KV_TIER_COUNT]);

/* Swap area: reserves n blocks (0) or refuses (-1) when they do not fit; releases n. */
int sim_kv_tiers_swap_out(sim_kv_tiers *t, long n);
void sim_kv_tiers_swap_in(sim_kv_tiers *t, long n);
long sim_kv_tiers_swap_used(const sim_kv_tiers *t);

/* Adds dt seconds at the current occupancy to each tier's integral. */
void sim_kv_tiers_account(sim_kv_tiers *t, double dt);
sim_kv_tier_stats sim_kv_tiers_stats(const sim_kv_tiers *t, kv_tier_id k);

/* Gives a replica's block manager the tiers and swap area its choice asks for (none when
 * offload is off and preemption recomputes), sized from the scenario (model/kv_offload.h): a
 * tier of C bytes per GPU holds floor(C / block bytes per GPU) blocks. -1 on out of memory. */
int sim_kv_tiers_attach(sim_kv *kv, const scn_scenario *s, const sim_choice *c);

/* What a set of replicas' tiers did, summed: bytes moved (all GPUs) and the occupancy integral
 * and capacity. Add each pool (its own scenario: block bytes and GPUs per replica) in turn. */
typedef struct { double bytes[KV_TIER_COUNT], occ[KV_TIER_COUNT], cap[KV_TIER_COUNT]; } sim_kv_tier_sum;
void sim_kv_tiers_add(sim_kv_tier_sum *sum, sim_kv *const *kvs, int n, const scn_scenario *s, const sim_choice *c);
/* The run's tier and swap metrics (sim_metrics' tier_* and swap_* fields) from the schedulers'
 * counters and the sum; block_bytes and gpus convert swapped blocks to bytes. Call after
 * sim_acc_finish: it reads m->duration. */
void sim_kv_tiers_metrics(const sim_acc *a, const sim_kv_tier_sum *sum, double block_bytes, int gpus, sim_metrics *m);

#endif
