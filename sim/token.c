/* token.c: synthetic token ids for the workload's token streams (sim.h: sim_token_id,
 * sim_seq_token). A splitmix64-style finaliser of (stream seed, position): deterministic, so
 * every request sharing a stream (a prefix group, a conversation) sees the same ids, which is
 * what makes prefix-cache hits and the backends' KV contents reproducible. */
#include "sim.h"

uint32_t sim_token_id(uint64_t stream_seed, long pos)
{
    uint64_t x = stream_seed ^ ((uint64_t)pos * 0x9e3779b97f4a7c15ULL);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return (uint32_t)(x ^ (x >> 31));
}
