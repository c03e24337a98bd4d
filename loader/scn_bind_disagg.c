/* scn_bind_disagg.c: binds deployment.disaggregation (prefill/decode pools and the KV hand-off
 * link between them) to scn_disagg. The pools' hardware entries were resolved to mappings by
 * the loader (scn_load.c), as the scenario's own hardware is. docs/scenarios.md, "Disaggregation",
 * is the reference for the fields and their defaults. */
#include "scn_bind.h"

#include <stdio.h>
#include <string.h>

static const char *const DISAGG_KEYS[] = {"prefill", "decode", "transfer", NULL};
static const char *const POOL_KEYS[] = {"replicas", "tensor_parallel", "hardware", NULL};
static const char *const TRANSFER_KEYS[] = {"link", "bandwidth", "latency", "layerwise", NULL};

static int fail_at(scn_ctx *c, const scn_node *at, const char *path, const char *msg)
{
    scn_fail(c->err, SCN_E_DATA, at, path, "%s", msg);
    return -1;
}

static int bind_pool(scn_ctx *c, const scn_node *m, const char *parent, const char *key, const scn_scenario *s,
                     scn_pool *out)
{
    char p[256], f[300];
    scn_path_join(p, sizeof p, parent, key);
    out->replicas = 1;
    out->tensor_parallel = s->deployment.tensor_parallel;
    out->hardware = s->hardware;
    const scn_node *pm = scn_map_get(m, key);
    if (!pm) return fail_at(c, m, p, "missing required field (a pool: {replicas, tensor_parallel, hardware})");
    if (scn_expect_map(c, pm, p) || scn_check_keys(c, pm, p, POOL_KEYS)) return -1;
    if (scn_get_int(c, pm, p, "replicas", 1, 100000, &out->replicas) ||
        scn_get_int(c, pm, p, "tensor_parallel", 1, 1024, &out->tensor_parallel))
        return -1;
    if (s->model.heads % out->tensor_parallel)
        return fail_at(c, scn_map_get(pm, "tensor_parallel"), scn_path_join(f, sizeof f, p, "tensor_parallel"),
                       "the model's query heads must divide evenly across tensor-parallel ranks");
    const scn_node *hw = scn_map_get(pm, "hardware");
    if (hw) {
        if (scn_bind_hardware(c, hw, scn_path_join(f, sizeof f, p, "hardware"), &out->hardware)) return -1;
        /* The engine's launch and step costs, as scn_engine_apply gives the scenario's hardware. */
        if (!out->hardware.overhead_given) {
            out->hardware.kernel_overhead = s->engine.kernel_launch;
            out->hardware.step_overhead = s->engine.step_cpu;
        }
    }
    return 0;
}

/* The transfer link and its figures: given, or the prefill hardware profile's figure for that
 * link (its scale-out network by default: the pools are separate instances). */
static int bind_transfer(scn_ctx *c, const scn_node *m, const char *parent, scn_disagg *d)
{
    char p[256], f[300];
    scn_path_join(p, sizeof p, parent, "transfer");
    const scn_hardware *hw = &d->prefill.hardware;
    d->link = hw->net != SCN_LINK_NONE ? hw->net : hw->link;
    d->layerwise = true;
    const scn_node *t = scn_map_get(m, "transfer");
    if (t && (scn_expect_map(c, t, p) || scn_check_keys(c, t, p, TRANSFER_KEYS))) return -1;
    int link = (int)d->link;
    bool has_bw = false, has_lat = false;
    if (t) {
        if (scn_get_enum(c, t, p, "link", SCN_LINK_NAMES, &link) || scn_get_bool(c, t, p, "layerwise", &d->layerwise))
            return -1;
        has_bw = scn_has(t, "bandwidth");
        has_lat = scn_has(t, "latency");
        if (scn_get_qty(c, t, p, "bandwidth", SCN_UNIT_BANDWIDTH, false, &d->bandwidth) ||
            scn_get_qty(c, t, p, "latency", SCN_UNIT_TIME, true, &d->latency))
            return -1;
    }
    d->link = (scn_link)link;
    if (d->link == SCN_LINK_NONE)
        return fail_at(c, t ? scn_map_get(t, "link") : m, scn_path_join(f, sizeof f, p, "link"),
                       "the KV must travel over a link: nvlink, pcie, infinity_fabric, infiniband or roce");
    bool is_net = d->link == hw->net, is_link = d->link == hw->link;
    if (!has_bw) {
        if (!is_net && !is_link) {
            snprintf(f, sizeof f, "hardware profile '%s' has no figure for link %s: give transfer.bandwidth", hw->name,
                     SCN_LINK_NAMES[d->link]);
            return fail_at(c, t ? (const scn_node *)t : m, p, f);
        }
        d->bandwidth = is_net ? hw->net_bandwidth : hw->link_bandwidth;
        if (!(d->bandwidth > 0)) {
            snprintf(f, sizeof f, "hardware profile '%s' gives no bandwidth for link %s: give transfer.bandwidth",
                     hw->name, SCN_LINK_NAMES[d->link]);
            return fail_at(c, t ? (const scn_node *)t : m, p, f);
        }
    }
    if (!has_lat) d->latency = is_net ? hw->net_latency : is_link ? hw->link_latency : 0;
    return 0;
}

int scn_bind_disagg(scn_ctx *c, const scn_node *dep, const char *dpath, scn_scenario *s)
{
    char p[256], f[300];
    const scn_node *m = scn_map_get(dep, "disaggregation");
    scn_path_join(p, sizeof p, dpath, "disaggregation");
    scn_disagg *d = &s->deployment.disagg;
    memset(d, 0, sizeof *d);
    if (!m) return 0;
    /* "off" (the documented default, e.g. from --set deployment.disaggregation=off) is no
     * disaggregation; "on" alone says nothing about the pools. */
    if (m->kind == SCN_NODE_SCALAR) {
        bool on;
        if (scn_parse_bool(c, m, p, &on)) return -1;
        if (!on) return 0;
        return fail_at(c, m, p, "give the pools: {prefill: {replicas, tensor_parallel}, decode: {...}} (or off)");
    }
    if (scn_expect_map(c, m, p) || scn_check_keys(c, m, p, DISAGG_KEYS)) return -1;
    /* A replica count at the deployment level would be ambiguous: the pools carry their own. */
    if (scn_has(dep, "replicas"))
        return fail_at(c, scn_map_get(dep, "replicas"), scn_path_join(f, sizeof f, dpath, "replicas"),
                       "with disaggregation, give replicas per pool (disaggregation.prefill.replicas, .decode.replicas)");
    if (s->deployment.attention_dp > 1 || s->deployment.expert_parallel > 1)
        return fail_at(c, m, p, "disaggregation is not modelled together with expert or attention data parallelism");
    if (bind_pool(c, m, p, "prefill", s, &d->prefill) || bind_pool(c, m, p, "decode", s, &d->decode) ||
        bind_transfer(c, m, p, d))
        return -1;
    d->on = true;
    return 0;
}

int scn_bind_disagg_option(scn_ctx *c, const scn_node *m, scn_options *o)
{
    const scn_node *l = scn_map_get(m, "disaggregation");
    int n = !l ? 0 : l->kind == SCN_NODE_SEQ ? l->n : 1;
    if (l && n < 1) return fail_at(c, l, "options.disaggregation", "expected off, on or [off, on]");
    for (int i = 0; i < n; i++) {
        const scn_node *v = l->kind == SCN_NODE_SEQ ? l->vals[i] : l;
        char p[64];
        snprintf(p, sizeof p, "options.disaggregation[%d]", i);
        bool on;
        if (scn_parse_bool(c, v, p, &on)) return -1;
        if (on) o->disagg_sweep = true;
    }
    return 0;
}
