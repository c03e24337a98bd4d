/* exec_model.c: the predicting executor: a step takes the time the cost model says. */
#include "sim.h"
#include "../model/kv_blocks.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct {
    const scn_scenario *s;
    kv_cache_cfg cfg;
    scn_attention attn;
    kv_seq_work *work;
    int cap;
    long blocks;             /* the cost model's pool per replica */
} model_ctx;

static int model_run(void *ctx, const sim_batch *b, double *seconds, char *err, size_t n)
{
    model_ctx *m = ctx;
    if (b->n > m->cap) {
        int cap = m->cap ? m->cap : 64;
        while (cap < b->n) cap *= 2;
        kv_seq_work *w = realloc(m->work, sizeof *w * (size_t)cap);
        if (!w) { snprintf(err, n, "out of memory"); return -1; }
        m->work = w;
        m->cap = cap;
    }
    /* The cost model caps the attended context itself (sliding windows, sink + window), so it
     * takes each sequence's position count, not the tokens still held. */
    for (int i = 0; i < b->n; i++) m->work[i] = (kv_seq_work){b->seqs[i].new_tokens, b->seqs[i].start};
    *seconds = kv_step_time(m->s, &m->cfg, m->attn, m->work, b->n).seconds;
    return 0;
}

static long model_blocks(void *ctx, int replica)
{
    (void)replica;
    return ((model_ctx *)ctx)->blocks;
}

static void model_free(void *ctx)
{
    model_ctx *m = ctx;
    if (!m) return;
    free(m->work);
    free(m);
}

int sim_executor_model(const scn_scenario *s, const sim_choice *c, sim_executor *out)
{
    model_ctx *m = calloc(1, sizeof *m);
    if (!m) return -1;
    m->s = s;
    m->cfg = kv_cache_cfg_make(s, c->kv_dtype, c->sink, c->window);
    m->attn = c->attention;
    m->blocks = kv_pool_size(s, &m->cfg, c->layout == SCN_LAYOUT_PAGED, c->block_size).blocks;
    *out = (sim_executor){.name = "model", .ctx = m, .run = model_run, .kv_blocks = model_blocks, .free = model_free};
    return 0;
}

int sim_run_predicted(const scn_scenario *s, const sim_choice *c, sim_metrics *m, char *err, size_t n)
{
    sim_executor ex;
    if (sim_executor_model(s, c, &ex)) { snprintf(err, n, "out of memory"); return SIM_E_INTERNAL; }
    sim_run_opts o = {.seed = s->seed};
    int rc = sim_run(s, c, &ex, &o, m, err, n);
    ex.free(ex.ctx);
    return rc;
}
