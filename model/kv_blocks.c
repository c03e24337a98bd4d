/* kv_blocks.c: the KV pool per replica in blocks (see kv_blocks.h). The engine sizes its block
 * managers with it, the backends allocate exactly this many blocks, and validation compares
 * runs that used the same count. */
#include "kv_blocks.h"

#include <stddef.h>

kv_pool kv_pool_size(const scn_scenario *s, const kv_cache_cfg *c, bool paged, int block_size)
{
    int bs = paged ? block_size : 1;
    kv_capacity k = kv_capacity_compute(s, c, bs, 0);
    kv_pool p = {.blocks = paged ? k.capacity_blocks : k.capacity_tokens, .block_size = bs, .kv_budget = k.kv_budget};
    if (p.blocks < 0) p.blocks = 0;
    return p;
}

/* A distribution's mean in tokens, or -1 when only a file knows it. */
static double dist_mean(const scn_dist *d)
{
    switch (d->kind) {
    case SCN_DIST_FIXED: return d->mean;
    case SCN_DIST_UNIFORM: return (d->min + d->max) / 2.0;
    case SCN_DIST_EMPIRICAL: return d->mean > 0 ? d->mean : -1;
    default: return d->mean > 0 ? d->mean : -1;
    }
}

long kv_output_max(const scn_scenario *s)
{
    const scn_dist *o = &s->workload.output;
    long lim = s->deployment.max_model_len;
    /* A trace's lengths are not known ahead: an allocator must then allow for the limit. */
    if (s->workload.arrival == SCN_ARRIVAL_TRACE) return lim;
    long m = o->kind == SCN_DIST_FIXED ? (long)o->mean : o->max > 0 ? o->max : lim;
    if (m < 1) m = lim;
    return m < lim ? m : lim;
}

kv_seq_size kv_seq_size_of(const scn_scenario *s)
{
    const scn_workload *w = &s->workload;
    double lim = s->deployment.max_model_len;
    kv_seq_size z = {.output_max = kv_output_max(s), .known = true};
    double msg = dist_mean(&w->prompt), out = dist_mean(&w->output);
    if (w->arrival == SCN_ARRIVAL_TRACE || msg < 0 || out < 0) {
        z.known = false;
        z.prompt = lim / 2;
        z.output = lim / 2;
        z.held = lim;
        return z;
    }
    double pre = w->prefix_groups > 0 ? w->prefix_share * w->prefix_tokens : 0;
    /* Turn k (0-based) of T sends prefix + (k + 1) messages + k replies; the mean over turns. */
    double T = w->turns > 1 ? w->turns : 1;
    z.prompt = pre + msg * (T + 1) / 2 + out * (T - 1) / 2;
    z.output = out;
    z.held = z.prompt + z.output < lim ? z.prompt + z.output : lim;
    if (z.prompt > lim - 1) z.prompt = lim - 1;
    return z;
}

long kv_seq_held(const kv_cache_cfg *c, long positions)
{
    if (c->window > 0 && positions > (long)c->sink + c->window) return (long)c->sink + c->window;
    return positions;
}

long kv_contiguous_reserve(const scn_scenario *s, const kv_cache_cfg *c0, long prompt, long output, long known)
{
    kv_cache_cfg f = kv_cache_fold(&s->model, c0);
    const kv_cache_cfg *c = &f;
    long lim = s->deployment.max_model_len;
    long out_max = kv_output_max(s);
    if (out_max < output) out_max = output;
    long want = prompt + out_max;
    if (want > lim) want = lim;
    if (want < known + 1) want = known + 1;
    return kv_seq_held(c, want);
}

kv_cache_cfg kv_cache_fold(const scn_model *m, const kv_cache_cfg *c)
{
    kv_cache_cfg f = *c;
    int mw = m->sliding_window;
    if (mw <= 0 || m->sliding_layers < m->layers) return f;
    /* Every layer forgets positions older than mw: the cache keeps the last mw, with no sink,
     * unless its own sink + window keeps less. */
    if (f.window <= 0 || (long)f.sink + f.window > mw) { f.sink = 0; f.window = mw; }
    return f;
}

kv_groups kv_groups_of(const scn_model *m)
{
    kv_groups g = {.full = m->layers};
    if (m->sliding_window > 0 && m->sliding_layers > 0 && m->sliding_layers < m->layers) {
        g.full = m->layers - m->sliding_layers;
        g.win = m->sliding_layers;
        g.window = m->sliding_window;
    }
    return g;
}

long kv_window_blocks(int window, int block_size, long positions)
{
    long all = (positions + block_size - 1) / block_size;
    if (window <= 0 || positions <= window) return all;
    return all - (positions - window) / block_size;
}

double kv_seq_layer_units(const kv_groups *g, int block_size, bool paged, long held, long positions)
{
    int bs = paged ? block_size : 1;
    long full = (held + bs - 1) / bs, win = full;
    if (g->win > 0) {
        long w = paged ? kv_window_blocks(g->window, bs, positions) : (held < g->window ? held : g->window);
        if (w < win) win = w;
    }
    return (double)g->full * (double)full + (double)g->win * (double)win;
}
