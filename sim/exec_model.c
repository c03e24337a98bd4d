/* exec_model.c: the predicting executor: a step takes the time the cost model says. */
#include "sim.h"
#include "../model/kv_blocks.h"
#include "../model/kv_moe_parallel.h"
#include "../model/kv_spec.h"
#include "step_plan.h"

#include <stdio.h>
#include <stdlib.h>

#define SHAPE_MAX 4097   /* batch sizes 0..4096 have a cached shape (about 1 KB each) */

typedef struct {
    const scn_scenario *s;
    kv_cache_cfg cfg;
    scn_attention attn;
    kv_seq_work *work;       /* cap rows, then cap rows of kv_spec scratch */
    int *drafts;             /* cap: speculative drafts verified per row */
    int cap;
    long blocks;             /* the cost model's pool per replica */
    sim_step_plan plan;      /* decode steps in O(1) */
    kv_step_cost *shape;     /* [n]: kv_step_shape of a plain decode step of n sequences, n <= max_num_seqs */
    bool *shaped;            /* [n]: shape[n] is computed */
    int n_shape;             /* entries in shape and shaped */
    const scn_spec *sp;      /* speculative decoding, or NULL */
    scn_scenario *ps;        /* the proposer's scenario (NULL for n-gram or off) */
    bool moe;                /* expert / attention-DP parallel: kv_moe_step_time prices the step */
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
        kv_seq_work *w = realloc(m->work, sizeof *w * (size_t)cap * 2);
        if (w) m->work = w;
        int *d = realloc(m->drafts, sizeof *d * (size_t)cap);
        if (d) m->drafts = d;
        if (!w || !d) { snprintf(err, n, "out of memory"); return -1; }
        m->cap = cap;
    }
    /* A decode step goes through the plan when it applies, so a step costs the same whether the
     * engine formed it or fast-forwarded to it. */
    long sum_start = 0;
    int d = 0;
    for (; d < b->n && b->seqs[d].new_tokens == 1; d++) sum_start += b->seqs[d].start;
    if (d == b->n && !m->moe && model_decode_time(m, b->n, sum_start, seconds) == 0) return 0;
    /* The cost model caps the attended context itself (sliding windows, sink + window), so it
     * takes each sequence's position count, not the tokens still held. */
    for (int i = 0; i < b->n; i++) {
        m->work[i] = (kv_seq_work){b->seqs[i].new_tokens, b->seqs[i].start};
        m->drafts[i] = b->seqs[i].draft;
    }
    if (d == b->n && !m->sp && !m->moe && b->n < m->n_shape) {
        /* A plain decode step: only attention depends on the contexts; the rest of the step is
         * priced once per batch size (kv_step_shape) and reused, giving kv_step_time's doubles. */
        if (!m->shaped[b->n]) {
            kv_step_shape(m->s, NULL, m->work, b->n, &m->shape[b->n]);
            m->shaped[b->n] = true;
        }
        *seconds = kv_step_complete(&m->shape[b->n], m->s, &m->cfg, m->attn, m->work, NULL, b->n).seconds;
    } else if (m->sp)   /* speculative decoding: verify plus the proposer's passes (model/kv_spec.c) */
        *seconds = kv_spec_step_time(m->s, m->ps, m->sp, &m->cfg, m->attn, m->work, m->drafts, b->n,
                                     m->work + m->cap).seconds;
    else if (m->moe)   /* one attention-DP rank, experts over EP ranks */
        *seconds = kv_moe_step_time(m->s, &m->cfg, m->attn, m->work, b->n).seconds;
    else
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
    free(m->drafts);
    free(m->shape);
    free(m->shaped);
    free(m->ps);
    free(m);
}

int sim_executor_model(const scn_scenario *s, const sim_choice *c, sim_executor *out)
{
    model_ctx *m = calloc(1, sizeof *m);
    if (!m) return -1;
    m->s = s;
    m->cfg = kv_cache_cfg_make(s, c->kv_dtype, c->sink, c->window);
    m->attn = c->attention;
    m->sp = kv_spec_get(s, c->spec);
    if (m->sp) {
        m->ps = malloc(sizeof *m->ps);
        if (!m->ps) { free(m); return -1; }
        if (!kv_spec_proposer_scenario(s, m->sp, m->ps)) { free(m->ps); m->ps = NULL; }
    }
    m->moe = !m->sp && kv_moe_parallel_on(s);
    m->blocks = kv_spec_pool_size(s, &m->cfg, c->layout == SCN_LAYOUT_PAGED, c->block_size, m->sp).blocks;
    if (m->moe)   /* per attention-DP rank, experts sharded */
        m->blocks = kv_moe_pool_size(s, &m->cfg, c->layout == SCN_LAYOUT_PAGED, c->block_size).blocks;
    /* The shape table is filled as batch sizes occur, so a run allocates nothing per step;
     * larger batches than it holds (a bound on its memory) take kv_step_time. */
    int ns = s->deployment.max_num_seqs > 0 ? s->deployment.max_num_seqs + 1 : 0;
    if (ns > SHAPE_MAX) ns = SHAPE_MAX;
    m->shape = ns ? malloc(sizeof *m->shape * (size_t)ns) : NULL;
    m->shaped = ns ? calloc((size_t)ns, sizeof *m->shaped) : NULL;
    if (ns && (!m->shape || !m->shaped)) { free(m->shape); free(m->shaped); free(m->ps); free(m); return -1; }
    m->n_shape = ns;
    if (sim_step_plan_init(&m->plan, s, &m->cfg, c->attention, s->deployment.max_num_seqs)) {
        free(m->shape); free(m->shaped); free(m->ps); free(m); return -1;
    }
    /* The O(1) decode plan (and with it fast-forward) prices plain decode steps only: not a
     * speculative step's drafts and verify, nor an expert-parallel step. */
    *out = (sim_executor){.name = "model", .ctx = m, .run = model_run, .kv_blocks = model_blocks, .free = model_free,
                          .decode_time = m->sp || m->moe ? NULL : model_decode_time};
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
