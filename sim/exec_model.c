/* exec_model.c: the predicting executor: a step takes the time the cost model says. */
#include "sim.h"
#include "../model/kv_blocks.h"
#include "step_plan.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct {
    const scn_scenario *s;
    kv_cache_cfg cfg;
    scn_attention attn;
    kv_seq_work *work;
    int cap;
    long blocks;             /* the cost model's pool per replica */
    sim_step_plan plan;      /* decode steps in O(1) */
} model_ctx;

static int model_decode_time(void *ctx, long n, long sum_start, double *seconds)
{
    model_ctx *m = ctx;
    return sim_step_plan_decode(&m->plan, n, sum_start, seconds) ? 0 : 1;
}

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
    /* A decode step goes through the plan when it applies, so a step costs the same whether the
     * engine formed it or fast-forwarded to it. */
    long sum_start = 0;
    int d = 0;
    for (; d < b->n && b->seqs[d].new_tokens == 1; d++) sum_start += b->seqs[d].start;
    if (d == b->n && model_decode_time(m, b->n, sum_start, seconds) == 0) return 0;
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
    sim_step_plan_free(&m->plan);
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
    if (sim_step_plan_init(&m->plan, s, &m->cfg, c->attention, s->deployment.max_num_seqs)) { free(m); return -1; }
    *out = (sim_executor){.name = "model", .ctx = m, .run = model_run, .kv_blocks = model_blocks, .free = model_free,
                          .decode_time = model_decode_time};
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
