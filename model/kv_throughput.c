/* kv_throughput.c: the saturation rate estimate (see kv_throughput.h). */
#include "kv_throughput.h"
#include "kv_blocks.h"

#include <math.h>

kv_saturation kv_saturation_rate(const scn_scenario *s, const kv_cache_cfg *c, scn_attention attn, bool paged,
                                 int block_size, kv_seq_work *work, int cap)
{
    kv_saturation r = {0};
    const scn_deployment *d = &s->deployment;
    kv_seq_size z = kv_seq_size_of(s);
    kv_capacity k = kv_capacity_compute(s, c, paged ? block_size : 1, 0);
    long fit = paged ? k.max_seqs_paged : k.max_seqs_contiguous;
    long B = d->max_num_seqs < fit ? d->max_num_seqs : fit;
    if (B > cap) B = cap;
    if (B < 1 || z.output < 1) return r;
    /* Decode: B sequences at the mean context over a request's life (prompt + half its output). */
    long ctx = (long)(z.prompt + z.output / 2);
    for (long i = 0; i < B; i++) work[i] = (kv_seq_work){1, ctx};
    r.decode_step = kv_step_time(s, c, attn, work, (int)B).seconds;
    /* Prefill: full steps of max_num_batched_tokens, shared by the prompts that fill one. */
    long P = (long)ceil(z.prompt), per_step = d->max_num_batched_tokens / (P > 0 ? P : 1);
    if (per_step < 1) per_step = 1;
    if (per_step > cap) per_step = cap;
    for (long i = 0; i < per_step; i++) work[i] = (kv_seq_work){P, 0};
    r.prefill = kv_step_time(s, c, attn, work, (int)per_step).seconds / (double)per_step;
    r.batch = B;
    r.per_request = r.prefill + z.output * r.decode_step / (double)B;
    r.rate = r.per_request > 0 ? d->replicas / r.per_request : 0;
    return r;
}
