/* kv_blocks.c: the KV pool per replica in blocks (see kv_blocks.h). The engine sizes its block
 * managers with it, the backends allocate exactly this many blocks, and validation compares
 * runs that used the same count. */
#include "kv_blocks.h"

kv_pool kv_pool_size(const scn_scenario *s, const kv_cache_cfg *c, bool paged, int block_size)
{
    int bs = paged ? block_size : 1;
    kv_capacity k = kv_capacity_compute(s, c, bs, 0);
    kv_pool p = {.blocks = paged ? k.capacity_blocks : k.capacity_tokens, .block_size = bs, .kv_budget = k.kv_budget};
    if (p.blocks < 0) p.blocks = 0;
    return p;
}
