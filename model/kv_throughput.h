/* kv_throughput.h: the request rate at which one replica saturates, from the cost model alone
 * (docs/simulator.md, "Saturation rate"): a starting bracket for a capacity search, so it
 * need not simulate its way up from a low rate. */
#ifndef KVPLAN_KV_THROUGHPUT_H
#define KVPLAN_KV_THROUGHPUT_H

#include "kv_model.h"

#include <stdbool.h>

typedef struct {
    double rate;          /* requests/s for the whole deployment (all replicas) */
    long batch;           /* sequences per decode step at saturation: max_num_seqs or what the KV holds */
    double decode_step;   /* s: one decode step of `batch` sequences at the mean context */
    double prefill;       /* s: the prefill share of one request, in full prefill steps */
    double per_request;   /* s of one replica's time a request takes: prefill + output * decode_step / batch */
} kv_saturation;

/* The saturation estimate for a layout (paged with block_size, or contiguous). `work` is the
 * caller's scratch of `cap` entries (max_num_seqs is enough); the batch is capped at cap.
 * Every decode step is taken at the mean context and the largest batch that fits, so the
 * estimate sits near the rate a simulation saturates at (a test checks within a factor) --
 * a bracket to search from, not a guarantee. */
kv_saturation kv_saturation_rate(const scn_scenario *s, const kv_cache_cfg *c, scn_attention attn, bool paged,
                                 int block_size, kv_seq_work *work, int cap);

#endif
