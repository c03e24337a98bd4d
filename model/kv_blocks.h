/* kv_blocks.h: the KV pool a replica gets, in blocks: the one block-count function the
 * simulator, the backends and the planner share (derivation: docs/cost-model.md, "Memory
 * budget and capacity"). A contiguous pool is counted in blocks of one token. */
#ifndef KVPLAN_KV_BLOCKS_H
#define KVPLAN_KV_BLOCKS_H

#include "kv_model.h"

#include <stdbool.h>

typedef struct {
    long blocks;          /* blocks per replica (per tensor-parallel group); 0 when nothing fits */
    int block_size;       /* tokens per block: the paged block size, or 1 for contiguous */
    double kv_budget;     /* bytes per rank left for the KV cache; may be negative */
} kv_pool;

/* The pool kv_capacity_compute() leaves for the KV cache under one cache config and layout. */
kv_pool kv_pool_size(const scn_scenario *s, const kv_cache_cfg *c, bool paged, int block_size);

#endif
