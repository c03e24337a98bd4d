/* kv_transfer.h: the KV hand-off of prefill/decode disaggregation: how many bytes a request's
 * KV is on each pool's ranks, and how long moving it from a prefill instance to a decode
 * instance takes, whole or pipelined layer by layer behind the prefill. docs/cost-model.md,
 * "KV transfer (disaggregation)", derives every term. */
#ifndef KVPLAN_KV_TRANSFER_H
#define KVPLAN_KV_TRANSFER_H

#include "kv_model.h"

#include <stdbool.h>

typedef struct {
    double bytes;        /* the request's KV as the decode instance stores it, all ranks */
    double bytes_rank;   /* the busiest endpoint's share: received per decode rank, or sent per
                          * prefill rank when the decode pool has more ranks */
    double latency;      /* s: one message's fixed part (kv_p2p_time over the transfer link) */
    double transfer;     /* s: bytes_rank over the link's achieved bandwidth */
    double whole;        /* s: latency + transfer, the hand-off started after the prefill */
    double exposed;      /* s: what the request waits for after its prefill: `whole`, or the
                          * per-layer pipeline's tail when it ran behind the prefill */
    int layers;          /* messages when layerwise */
} kv_transfer_cost;

/* The hand-off of `tokens` tokens of KV under the scenario's deployment.disaggregation, at
 * cache config c. prefill_seconds is the time the request's prefill took; with `overlap` (the
 * transfer link and the decode blocks were ready when the prefill began, and the link is
 * layerwise) all but the last layer's share hides behind it. */
kv_transfer_cost kv_transfer_time(const scn_scenario *s, const kv_cache_cfg *c, long tokens, double prefill_seconds,
                                  bool overlap);

/* The transfer link as a hardware profile kv_p2p_time reads (the prefill hardware with the
 * link's figures in the intra-node or network slot); *same_node says which slot. */
scn_hardware kv_transfer_link(const scn_disagg *d, bool *same_node);

#endif
