/* token.c: synthetic token ids for the workload's token streams (sim.h: sim_token_id,
 * sim_seq_token). A splitmix64-style finaliser of (stream seed, position): deterministic, so
 * every request sharing a stream (a prefix group, a conversation) sees the same ids, which is
 * what makes prefix-cache hits and the backends' KV contents reproducible. */
#include "sim.h"
#include "token.h"

uint32_t sim_token_id(uint64_t stream_seed, long pos)
{
    return sim_token_id_inline(stream_seed, pos);
}
