/* kv_offload.c: transfer times through the memory tiers below HBM, and reload against
 * recompute for a prefix hit (see kv_offload.h; derivation in docs/cost-model.md, "KV offload
 * tiers"). */
#include "kv_offload.h"

#include <math.h>

const char *kv_tier_name(kv_tier_id t)
{
    return t == KV_TIER_CPU ? "cpu" : t == KV_TIER_DISK ? "disk" : t == KV_TIER_REMOTE ? "remote" : "?";
}

static double link_s(const scn_tier *l, double bytes)
{
    double bw = l->bandwidth * l->efficiency;
    return bw > 0 ? l->latency + bytes / bw : INFINITY;
}

double kv_tier_transfer_s(const scn_hardware *hw, kv_tier_id t, double bytes)
{
    if (bytes <= 0) return 0;
    if (t == KV_TIER_CPU) return link_s(&hw->host, bytes);
    return link_s(t == KV_TIER_DISK ? &hw->nvme : &hw->remote, bytes) + link_s(&hw->host, bytes);
}

double kv_layerwise_exposed_s(double load_s, double step_s, int layers)
{
    if (!(load_s > 0)) return 0;
    if (layers < 2 || !(step_s > 0)) return load_s;
    double L = layers;
    return fmax(load_s / L, load_s - step_s * (L - 1) / L);
}

double kv_offload_bytes_per_rank(const scn_scenario *s, const kv_cache_cfg *c, long tokens)
{
    return kv_bytes_for_context(&s->model, c, s->deployment.tensor_parallel, tokens);
}

double kv_tier_capacity(const scn_scenario *s, kv_tier_id t)
{
    const scn_options *o = &s->options;
    if (t == KV_TIER_CPU) return o->offload_cpu_bytes > 0 ? o->offload_cpu_bytes : s->hardware.host.capacity;
    if (t == KV_TIER_DISK) return o->offload_disk_bytes > 0 ? o->offload_disk_bytes : s->hardware.nvme.capacity;
    return o->offload_remote_bytes > 0 ? o->offload_remote_bytes : s->hardware.remote.capacity;
}

kv_offload_cmp kv_offload_compare(const scn_scenario *s, const kv_cache_cfg *c, int block_size, kv_tier_id t,
                                  long prompt, long hit)
{
    kv_offload_cmp r = {0};
    r.bytes = kv_offload_bytes_per_rank(s, c, hit);
    r.reload_s = kv_tier_transfer_s(&s->hardware, t, r.bytes);
    r.recompute_s = kv_prefix_saving_compute(s, c, block_size, prompt, hit).prefill_seconds_saved;
    r.reload_pays = r.reload_s < r.recompute_s;
    return r;
}
