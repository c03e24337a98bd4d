/* token.h: the synthetic token id formula (sim.h: sim_token_id), inline. The prefix cache's
 * block hashing (kv_manager.c) relies on ids being a fixed function of (stream seed, position):
 * it names a block's tokens by their streams and positions instead of digesting each id. */
#ifndef KVPLAN_SIM_TOKEN_H
#define KVPLAN_SIM_TOKEN_H

#include <stdint.h>

/* A splitmix64-style finaliser of (stream seed, position). */
static inline uint32_t sim_token_id_inline(uint64_t stream_seed, long pos)
{
    uint64_t x = stream_seed ^ ((uint64_t)pos * 0x9e3779b97f4a7c15ULL);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return (uint32_t)(x ^ (x >> 31));
}

#endif
