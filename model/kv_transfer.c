/* kv_transfer.c: the KV hand-off of prefill/decode disaggregation (kv_transfer.h). Bytes come
 * from kv_bytes_for_context at each pool's tensor parallelism; time from the point-to-point
 * primitive of kv_collective.c over the transfer link. docs/cost-model.md, "KV transfer
 * (disaggregation)". */
#include "kv_transfer.h"

#include <math.h>

scn_hardware kv_transfer_link(const scn_disagg *d, bool *same_node)
{
    scn_hardware hw = d->prefill.hardware;
    /* NVLink, PCIe and Infinity Fabric join GPUs inside a node (or an NVL72 rack); InfiniBand
     * and RoCE are the scale-out network. */
    bool intra = d->link == SCN_LINK_NVLINK || d->link == SCN_LINK_PCIE || d->link == SCN_LINK_INFINITY_FABRIC;
    if (intra) {
        hw.link = d->link;
        hw.link_bandwidth = d->bandwidth;
        hw.link_latency = d->latency;
    } else {
        hw.net = d->link;
        hw.net_bandwidth = d->bandwidth;
        hw.net_latency = d->latency;
    }
    if (same_node) *same_node = intra;
    return hw;
}

kv_transfer_cost kv_transfer_time(const scn_scenario *s, const kv_cache_cfg *c, long tokens, double prefill_seconds,
                                  bool overlap)
{
    const scn_disagg *d = &s->deployment.disagg;
    kv_transfer_cost r = {.layers = s->model.layers > 0 ? s->model.layers : 1};
    if (tokens <= 0) return r;
    int tp_p = d->prefill.tensor_parallel > 0 ? d->prefill.tensor_parallel : 1;
    int tp_d = d->decode.tensor_parallel > 0 ? d->decode.tensor_parallel : 1;
    /* Each decode rank receives its own shard; together they are what the prefill ranks send,
     * split evenly over them. The busier side binds (every rank has its own NIC). */
    double per_decode_rank = kv_bytes_for_context(&s->model, c, tp_d, tokens);
    r.bytes = per_decode_rank * tp_d;
    r.bytes_rank = fmax(per_decode_rank, r.bytes / tp_p);
    bool same_node;
    scn_hardware hw = kv_transfer_link(d, &same_node);
    kv_coll_cost one = kv_p2p_time(&hw, r.bytes_rank, same_node);
    r.latency = one.latency;
    r.transfer = one.transfer;
    r.whole = one.seconds;
    r.exposed = r.whole;
    if (overlap && d->layerwise && prefill_seconds > 0) {
        /* Layer l's KV is ready at l * prefill/L and goes as its own message (tau each), one
         * at a time: the last arrives max(tau, L tau - (L - 1) prefill/L) after the prefill. */
        double L = r.layers, tau = one.latency + one.transfer / L;
        r.exposed = fmax(tau, L * tau - (L - 1) * prefill_seconds / L);
    }
    return r;
}
