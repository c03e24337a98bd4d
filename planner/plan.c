/* plan.c: candidates from the option space, and their parallel evaluation. */
#include "plan.h"
#include "../db/db.h"
#include "../model/kv_model.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int count_or_1(int n) { return n > 0 ? n : 1; }

static bool native_dtype(const scn_model *m, scn_dtype d)
{
    return d == SCN_DTYPE_FP32 || d == SCN_DTYPE_FP16 || d == SCN_DTYPE_BF16 || d == m->weight_dtype;
}

int plan_enumerate(const scn_scenario *s, plan_result *r)
{
    const scn_options *o = &s->options;
    const scn_deployment *d = &s->deployment;
    int dims[] = {o->n_layout, o->n_block, o->n_prefix, o->n_dtype, o->n_attention, o->n_sched, o->n_window,
                  count_or_1(o->n_max_seqs), count_or_1(o->n_budget), count_or_1(o->n_tp), count_or_1(o->n_replicas),
                  count_or_1(o->n_kv_heads)};
    int nd = (int)(sizeof dims / sizeof dims[0]);
    long total = 1;
    for (int i = 0; i < nd; i++) total *= dims[i];
    if (total > 100000) return -1;
    memset(r, 0, sizeof *r);
    r->c = calloc((size_t)total, sizeof *r->c);
    r->order = calloc((size_t)total, sizeof *r->order);
    if (!r->c || !r->order) { plan_result_free(r); return -1; }
    r->best = -1;
    int idx[12] = {0};
    for (long k = 0; k < total; k++) {
        /* Mixed-radix counter over the dimensions, last dimension fastest. */
        long rest = k;
        for (int i = nd - 1; i >= 0; i--) { idx[i] = (int)(rest % dims[i]); rest /= dims[i]; }
        plan_cand *c = &r->c[r->n];
        c->c = (sim_choice){.layout = o->layout[idx[0]], .block_size = o->block_size[idx[1]],
                            .prefix_cache = o->prefix_cache[idx[2]], .kv_dtype = o->kv_dtype[idx[3]],
                            .attention = o->attention[idx[4]], .scheduler = o->scheduler[idx[5]],
                            .sink = o->sink[idx[6]], .window = o->window[idx[6]]};
        /* Contiguous allocation has no blocks: keep one candidate per contiguous choice. */
        if (c->c.layout == SCN_LAYOUT_CONTIGUOUS && idx[1] != 0) continue;
        if (c->c.layout == SCN_LAYOUT_CONTIGUOUS) c->c.block_size = o->block_size[0];
        c->max_num_seqs = o->n_max_seqs ? o->max_num_seqs[idx[7]] : d->max_num_seqs;
        c->max_batched = o->n_budget ? o->max_num_batched_tokens[idx[8]] : d->max_num_batched_tokens;
        c->tp = o->n_tp ? o->tensor_parallel[idx[9]] : d->tensor_parallel;
        c->replicas = o->n_replicas ? o->replicas[idx[10]] : d->replicas;
        c->kv_heads = o->n_kv_heads ? o->kv_heads[idx[11]] : 0;
        if (c->kv_heads == s->model.kv_heads) c->kv_heads = 0;
        c->gpus = (double)c->tp * c->replicas;
        c->risk_dtype = !native_dtype(&s->model, c->c.kv_dtype);
        c->risk_window = c->c.window > 0;
        c->risk_gqa = c->kv_heads > 0 && c->kv_heads < s->model.kv_heads;
        c->allowed = (!c->risk_dtype || s->quality.allow_kv_dtype[c->c.kv_dtype]) &&
                     (!c->risk_window || s->quality.allow_window) && (!c->risk_gqa || s->quality.allow_gqa);
        c->status = PLAN_PENDING;
        char why[200];
        if (sim_choice_check(&c->c, why, sizeof why)) {
            c->status = PLAN_SKIPPED;
            snprintf(c->why, sizeof c->why, "%s", why);
        } else {
            scn_scenario t;
            plan_apply(s, c, &t);
            kv_cache_cfg kc = kv_cache_cfg_make(&t, c->c.kv_dtype, c->c.sink, c->c.window);
            kv_capacity cap = kv_capacity_compute(&t, &kc, c->c.block_size, 0);
            if (cap.kv_budget <= 0) {
                c->status = PLAN_SKIPPED;
                snprintf(c->why, sizeof c->why, "does not fit: weights %.1f GiB + activations %.1f GiB + runtime %.1f GiB "
                         "exceed the %.1f GiB usable per GPU at tensor_parallel %d",
                         cap.weights / 1073741824.0, cap.activation / 1073741824.0, cap.runtime / 1073741824.0,
                         cap.usable / 1073741824.0, c->tp);
            }
        }
        r->n++;
    }
    return 0;
}

void plan_result_free(plan_result *r)
{
    free(r->c);
    free(r->order);
    memset(r, 0, sizeof *r);
}

void plan_apply(const scn_scenario *s, const plan_cand *c, scn_scenario *out)
{
    *out = *s;
    out->deployment.tensor_parallel = c->tp;
    out->deployment.replicas = c->replicas;
    out->deployment.max_num_seqs = c->max_num_seqs;
    out->deployment.max_num_batched_tokens = c->max_batched;
    if (c->kv_heads > 0) out->model.kv_heads = c->kv_heads;
}

void plan_describe(const plan_cand *c, char *buf, size_t n)
{
    char base[160];
    sim_choice_describe(&c->c, base, sizeof base);
    int used = snprintf(buf, n, "%s tp=%d x%d seqs=%d budget=%d", base, c->tp, c->replicas, c->max_num_seqs, c->max_batched);
    if (c->kv_heads > 0 && used > 0 && (size_t)used < n) snprintf(buf + used, n - (size_t)used, " kv_heads=%d", c->kv_heads);
}

char *plan_options_json(const plan_cand *c)
{
    /* The one options encoder (db_options_json), so a plan's key equals simulate's for the same choice. */
    scn_deployment d = {.tensor_parallel = c->tp, .replicas = c->replicas, .max_num_seqs = c->max_num_seqs,
                        .max_num_batched_tokens = c->max_batched};
    return db_options_json(&c->c, &d, c->kv_heads);
}

/* ---- parallel evaluation ---- */
typedef struct {
    const scn_scenario *s;
    plan_result *r;
    int shard_i, shard_n;
    long next, done, total;
    pthread_mutex_t lock;
    void (*progress)(void *ud, long done, long total);
    void *ud;
    char *err;
    size_t nerr;
    int failed;
} pool;

int plan_evaluate_one(const scn_scenario *s, plan_cand *c, char *err, size_t n)
{
    scn_scenario *t = malloc(sizeof *t);
    int rc = SIM_E_INTERNAL;
    err[0] = 0;
    if (t) {
        plan_apply(s, c, t);
        rc = sim_run_predicted(t, &c->c, &c->m, err, n);
    }
    free(t);
    if (rc == SIM_E_DATA) {
        c->status = PLAN_SKIPPED;
        snprintf(c->why, sizeof c->why, "%s", err);
        return 0;
    }
    if (rc != SIM_OK) {
        if (!err[0]) snprintf(err, n, "out of memory");
        return -1;
    }
    c->status = PLAN_DONE;
    return 0;
}

static void *worker(void *p)
{
    pool *w = p;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        long i = w->next++;
        pthread_mutex_unlock(&w->lock);
        if (i >= w->r->n) break;
        plan_cand *c = &w->r->c[i];
        if (c->status != PLAN_PENDING || i % w->shard_n != w->shard_i) continue;
        char err[512];
        int rc = plan_evaluate_one(w->s, c, err, sizeof err);
        pthread_mutex_lock(&w->lock);
        if (rc) {
            if (!w->failed) snprintf(w->err, w->nerr, "simulating a candidate failed: %s", err);
            w->failed = 1;
        }
        w->done++;
        if (w->progress) w->progress(w->ud, w->done, w->total);
        pthread_mutex_unlock(&w->lock);
    }
    return NULL;
}

int plan_evaluate(const scn_scenario *s, plan_result *r, int threads, int shard_i, int shard_n,
                  void (*progress)(void *ud, long done, long total), void *ud, char *err, size_t n)
{
    pool w = {.s = s, .r = r, .shard_i = shard_i, .shard_n = shard_n > 0 ? shard_n : 1, .progress = progress,
              .ud = ud, .err = err, .nerr = n};
    for (int i = 0; i < r->n; i++) if (r->c[i].status == PLAN_PENDING && i % w.shard_n == shard_i) w.total++;
    pthread_mutex_init(&w.lock, NULL);
    if (threads < 1) threads = 1;
    if (threads > 64) threads = 64;
    pthread_t th[64];
    int started = 0;
    for (int i = 0; i < threads; i++) if (pthread_create(&th[i], NULL, worker, &w) == 0) started++;
    if (!started) worker(&w);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    pthread_mutex_destroy(&w.lock);
    return w.failed ? -1 : 0;
}
