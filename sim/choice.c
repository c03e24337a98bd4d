/* choice.c: one point of a scenario's option space, and whether it can run. */
#include "sim.h"

#include <stdio.h>

sim_choice sim_choice_first(const scn_scenario *s)
{
    const scn_options *o = &s->options;
    sim_choice c = {
        .layout = o->layout[0], .block_size = o->block_size[0], .prefix_cache = o->prefix_cache[0],
        .kv_dtype = o->kv_dtype[0], .attention = o->attention[0], .scheduler = o->scheduler[0],
        .sink = o->sink[0], .window = o->window[0],
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
    return 0;
}

void sim_choice_describe(const sim_choice *c, char *buf, size_t n)
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
