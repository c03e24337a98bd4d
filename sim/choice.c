/* choice.c: one point of a scenario's option space, and whether it can run. */
#include "sim.h"

#include <stdio.h>
#include <string.h>

sim_choice sim_choice_first(const scn_scenario *s)
{
    const scn_options *o = &s->options;
    sim_choice c = {
        .layout = o->layout[0], .block_size = o->block_size[0], .prefix_cache = o->prefix_cache[0],
        .kv_dtype = o->kv_dtype[0], .attention = o->attention[0], .scheduler = o->scheduler[0],
        .sink = o->sink[0], .window = o->window[0],
        .kv_offload = o->n_offload ? o->kv_offload[0] : SCN_OFFLOAD_OFF,
        .preemption = o->n_preempt ? o->preemption[0] : SCN_PREEMPT_RECOMPUTE,
    };
    return c;
}

int sim_choice_check(const sim_choice *c, char *why, size_t n)
{
    if (c->prefix_cache && c->layout != SCN_LAYOUT_PAGED) {
        snprintf(why, n, "prefix caching shares KV blocks, so it needs the paged layout");
        return -1;
    }
    if (c->layout == SCN_LAYOUT_PAGED && c->block_size < 1) {
        snprintf(why, n, "block_size must be at least 1");
        return -1;
    }
    if (c->window > 0 && c->prefix_cache) {
        snprintf(why, n, "sink + window drops old blocks, which a shared prefix cache cannot do");
        return -1;
    }
    if (c->kv_offload != SCN_OFFLOAD_OFF && !c->prefix_cache) {
        snprintf(why, n, "KV offload keeps evicted prefix-cache blocks in host memory, so it needs the prefix cache on");
        return -1;
    }
    if (c->preemption == SCN_PREEMPT_SWAP && (c->layout != SCN_LAYOUT_PAGED || c->scheduler == SCN_SCHED_STATIC)) {
        snprintf(why, n, "swap preemption moves a sequence's blocks, so it needs the paged layout and a preempting scheduler");
        return -1;
    }
    return 0;
}

static void describe_base(const sim_choice *c, char *buf, size_t n);

void sim_choice_describe(const sim_choice *c, char *buf, size_t n)
{
    describe_base(c, buf, n);
    size_t l = strlen(buf);
    if (c->kv_offload != SCN_OFFLOAD_OFF && l < n) l += (size_t)snprintf(buf + l, n - l, " offload=%s", SCN_OFFLOAD_NAMES[c->kv_offload]);
    if (c->preemption != SCN_PREEMPT_RECOMPUTE && l < n) snprintf(buf + l, n - l, " preempt=%s", SCN_PREEMPT_NAMES[c->preemption]);
}

static void describe_base(const sim_choice *c, char *buf, size_t n)
{
    char win[48] = "off";
    if (c->window > 0) snprintf(win, sizeof win, "%d+%d", c->sink, c->window);
    if (c->layout == SCN_LAYOUT_PAGED)
        snprintf(buf, n, "paged/%d prefix=%s %s %s %s window=%s", c->block_size, c->prefix_cache ? "on" : "off",
                 scn_dtype_name(c->kv_dtype), SCN_ATTN_NAMES[c->attention],
                 SCN_SCHED_NAMES[c->scheduler], win);
    else
        snprintf(buf, n, "contiguous prefix=%s %s %s %s window=%s", c->prefix_cache ? "on" : "off",
                 scn_dtype_name(c->kv_dtype), SCN_ATTN_NAMES[c->attention],
                 SCN_SCHED_NAMES[c->scheduler], win);
}
