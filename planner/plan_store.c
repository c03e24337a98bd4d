/* plan_store.c: plan persistence: each candidate's seeds stored as predicted runs (the capacity
 * found stored with them), and reuse of stored runs of the same choice and scenario digest.
 * plan_store_find is the one query by which a stored run is found. */
#include "plan.h"
#include "../db/db.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAP_RATE "capacity_req_per_s"
#define CAP_TOK "capacity_out_tok_per_s"
/* Written with the trial-length floor and the bounded search (issue 16's review): a stored
 * capacity without it came from the older search and is searched again. */
#define CAP_UNBOUNDED "capacity_unbounded"
#define CAP_BATCH "capacity_batch_mean"
/* The arrival span a capacity trial was floored at (PLAN_TRIAL_SPAN_WAITS x PLAN_MAX_QUEUE_P99,
 * issue 16's re-review): a stored capacity without it, or with another span, came from trials
 * that could pass overloaded rates and is searched again. */
#define CAP_SPAN "capacity_trial_span_s"
#define TRIAL_SPAN_S (PLAN_TRIAL_SPAN_WAITS * PLAN_MAX_QUEUE_P99)

/* The key a run is stored under: the choice as JSON, with the hardware profile, weight format
 * and engine when they are options (the scenario digest names only the scenario's own), so a
 * candidate on the scenario's own keeps the key `simulate` stores. */
static char *options_key(const scn_scenario *s, const plan_cand *c)
{
    char *opts = plan_options_json(s, c);
    if (!opts || (c->hw < 0 && c->wformat < 0 && c->engine < 0)) return opts;
    json_t *j = json_loads(opts, 0, NULL);
    free(opts);
    if (!j) return NULL;
    if (c->hw >= 0) json_object_set_new(j, "hardware", json_string(c->hw_name));
    if (c->wformat >= 0) json_object_set_new(j, "weight_dtype", json_string(c->wformat_name));
    if (c->engine >= 0) json_object_set_new(j, "engine", json_string(c->engine_name));
    char *out = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    return out;
}

long plan_store_find(db *d, const scn_scenario *s, const plan_cand *c, unsigned long long seed)
{
    char *opts = options_key(s, c);
    if (!opts) return -1;
    scn_scenario *t = malloc(sizeof *t);
    long id = -1;
    if (t) {
        *t = *s;
        t->seed = seed;
        id = db_find_run(d, t, "predicted", opts, seed);
    }
    free(t);
    free(opts);
    return id;
}

typedef struct {
    sim_metrics *m;
    double rate, tok, unbounded, batch, span;
    bool windowed_refusals;   /* stored with unsent_turns: refusals counted in the window */
} stored;

static int read_metric(void *ud, const char *name, double value, int is_null)
{
    stored *x = ud;
    if (!strcmp(name, CAP_RATE)) x->rate = is_null ? NAN : value;
    else if (!strcmp(name, CAP_TOK)) x->tok = is_null ? NAN : value;
    else if (!strcmp(name, CAP_UNBOUNDED)) x->unbounded = is_null ? NAN : value;
    else if (!strcmp(name, CAP_BATCH)) x->batch = is_null ? NAN : value;
    else if (!strcmp(name, CAP_SPAN)) x->span = is_null ? NAN : value;
    else {
        x->windowed_refusals |= !strcmp(name, "unsent_turns");
        sim_metrics_set(x->m, name, is_null ? NAN : value);
    }
    return 0;
}

long plan_store_reuse(db *d, const scn_scenario *s, plan_result *r)
{
    long reused = 0;
    bool cap = plan_objective_at_capacity(s);
    char err[256];
    for (int i = 0; i < r->n; i++) {
        plan_cand *c = &r->c[i];
        if (c->status != PLAN_PENDING) continue;
        bool all = true;
        for (int k = 0; k < c->n_seeds; k++) {
            long id = plan_store_find(d, s, c, s->seed + (unsigned long long)k);
            if (id <= 0) { all = false; continue; }
            sim_metrics m;
            memset(&m, 0, sizeof m);
            stored x = {.m = &m, .rate = NAN, .tok = NAN, .unbounded = NAN, .batch = NAN, .span = NAN};
            if (db_run_metrics(d, id, read_metric, &x, err, sizeof err) != DB_OK) { all = false; continue; }
            /* A run stored before refusals were counted in the measurement window (and turns
             * never sent were counted) has no unsent_turns: its rejected and SLO attainment mix
             * the window's served requests with the whole run's refusals, so it runs again. */
            if (!x.windowed_refusals) { all = false; continue; }
            plan_record_offered(s, c, k, &m);
            c->seed_reused |= 1u << k;
            if (k == 0) c->run_id = id;
            reused++;
            if (isfinite(x.rate) && isfinite(x.tok) && isfinite(x.unbounded) && x.span == TRIAL_SPAN_S) {
                c->seed_rate[k] = x.rate;
                c->seed_tok[k] = x.tok;
                c->seed_batch[k] = x.batch;
                if (x.unbounded > 0) c->seed_unbounded |= 1u << k;
                c->cap_done |= 1u << k;
            } else if (cap) {
                all = false;   /* a run from `simulate`: the capacity search still has to run */
            }
        }
        if (all) {
            c->status = PLAN_DONE;
            c->reused = true;
        }
    }
    return reused;
}

int plan_store_save(db *d, const scn_scenario *s, plan_result *r, const char *started, char *err, size_t n)
{
    char finished[32];
    db_now_iso(finished, sizeof finished);
    scn_scenario *t = malloc(sizeof *t);
    if (!t) { snprintf(err, n, "out of memory"); return DB_E_INTERNAL; }
    *t = *s;
    for (int i = 0; i < r->n; i++) {
        plan_cand *c = &r->c[i];
        if (c->status != PLAN_DONE || !c->seed_m) continue;
        char *opts = options_key(s, c);
        for (int k = 0; k < c->n_seeds; k++) {
            if ((c->seed_reused >> k) & 1 || !((c->seed_done >> k) & 1)) continue;
            sim_metric_kv mv[SIM_METRICS_MAX + 5];
            int nm = sim_metrics_list(&c->seed_m[k], mv, SIM_METRICS_MAX);
            if ((c->cap_done >> k) & 1) {
                mv[nm++] = (sim_metric_kv){CAP_RATE, c->seed_rate[k], SIM_UNIT_RATE};
                mv[nm++] = (sim_metric_kv){CAP_TOK, c->seed_tok[k], SIM_UNIT_RATE};
                mv[nm++] = (sim_metric_kv){CAP_UNBOUNDED, (c->seed_unbounded >> k) & 1, SIM_UNIT_COUNT};
                mv[nm++] = (sim_metric_kv){CAP_BATCH, c->seed_batch[k], SIM_UNIT_NUMBER};
                mv[nm++] = (sim_metric_kv){CAP_SPAN, TRIAL_SPAN_S, SIM_UNIT_SECONDS};
            }
            t->seed = s->seed + (unsigned long long)k;
            db_run_rec rec = {.scenario = t, .kind = "predicted", .executor = "model", .options_json = opts ? opts : "{}",
                              .seed = t->seed, .started = started, .finished = finished, .metrics = mv, .n_metrics = nm};
            long id = 0;
            db_status st = db_run_insert(d, &rec, &id, err, n);
            if (st != DB_OK) { free(opts); free(t); return st; }
            if (k == 0) c->run_id = id;
        }
        free(opts);
    }
    free(t);
    return DB_OK;
}

int plan_store_curve(db *d, const scn_scenario *s, const plan_result *r, const plan_curve_point *p, int n,
                     const char *started, char *err, size_t nerr)
{
    char finished[32];
    db_now_iso(finished, sizeof finished);
    scn_scenario *t = malloc(sizeof *t);
    if (!t) { snprintf(err, nerr, "out of memory"); return DB_E_INTERNAL; }
    for (int i = 0; i < n; i++) {
        const plan_cand *c = &r->c[p[i].cand];
        char *opts = options_key(s, c);
        *t = *s;
        t->workload.rate = p[i].rate;
        if (t->workload.requests > PLAN_CAPACITY_REQUESTS) t->workload.requests = PLAN_CAPACITY_REQUESTS;
        sim_metric_kv mv[SIM_METRICS_MAX + 1];
        int nm = sim_metrics_list(&p[i].m, mv, SIM_METRICS_MAX);
        mv[nm++] = (sim_metric_kv){"sweep_rate_req_per_s", p[i].rate, SIM_UNIT_RATE};
        db_run_rec rec = {.scenario = t, .kind = "predicted", .executor = "model", .options_json = opts ? opts : "{}",
                          .seed = s->seed, .started = started, .finished = finished, .metrics = mv, .n_metrics = nm};
        long id;
        db_status st = db_run_insert(d, &rec, &id, err, nerr);
        free(opts);
        if (st != DB_OK) { free(t); return st; }
    }
    free(t);
    return DB_OK;
}
