/* step_plan.c: O(1) decode-step times from constants taken from kv_step_time (see step_plan.h). */
#include "step_plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static kv_op_cost attention_of(const sim_step_plan *p, const kv_seq_work *w, int n)
{
    return kv_step_time(p->s, &p->c, p->attn, w, n).op[KV_OP_ATTENTION];
}

/* The other operations' time for n decode sequences (their positions do not matter). */
static double rest_of(sim_step_plan *p, int n)
{
    for (int i = 0; i < n; i++) p->work[i] = (kv_seq_work){1, 0};
    kv_step_cost r = kv_step_time(p->s, &p->c, p->attn, p->work, n);
    double t = 0;
    for (int op = 0; op < KV_OP_COUNT; op++)
        if (op != KV_OP_ATTENTION) t += r.op[op].seconds;
    return t;
}

static double att_seconds(const sim_step_plan *p, double flops, double bytes)
{
    double tc = p->peak > 0 ? flops / p->peak : 0, tm = p->bw > 0 ? bytes / p->bw : 0;
    return (tc > tm ? tc : tm) + p->ov;
}

int sim_step_plan_init(sim_step_plan *p, const scn_scenario *s, const kv_cache_cfg *c, scn_attention attn, int max_n)
{
    memset(p, 0, sizeof *p);
    p->s = s;
    p->c = *c;
    p->attn = attn;
    const scn_model *m = &s->model;
    /* The premise: no layer caps the keys a decode token reads within max_model_len. */
    bool capped = c->window > 0 ||
                  (m->sliding_layers > 0 && m->sliding_window > 0 && m->sliding_window < s->deployment.max_model_len);
    if (capped || max_n < 3) return 0;
    p->max_n = max_n;
    p->rest = malloc(sizeof *p->rest * (size_t)(max_n + 1));
    p->work = malloc(sizeof *p->work * (size_t)(max_n + 1));
    if (!p->rest || !p->work) { sim_step_plan_free(p); return -1; }
    for (int i = 0; i <= max_n; i++) p->rest[i] = NAN;
    /* Two one-sequence probes: 1 key and 2 keys read. */
    kv_seq_work w1 = {1, 0}, w2 = {1, 1};
    kv_op_cost a1 = attention_of(p, &w1, 1), a2 = attention_of(p, &w2, 1);
    p->fk = a2.flops - a1.flops;
    p->f0 = a1.flops - p->fk;
    p->bk = a2.bytes - a1.bytes;
    p->b0 = a1.bytes - p->bk;
    p->peak = a1.t_compute > 0 ? a1.flops / a1.t_compute : 0;
    p->bw = a1.t_memory > 0 ? a1.bytes / a1.t_memory : 0;
    p->ov = a1.t_overhead;
    /* Self-check on a mixed batch (long and short contexts, so both bounds are exercised). */
    p->ok = true;
    long ctx[3] = {0, 777, (long)s->deployment.max_model_len - 1}, sum = 0;
    for (int i = 0; i < 3; i++) { p->work[i] = (kv_seq_work){1, ctx[i]}; sum += ctx[i]; }
    double want = kv_step_time(s, c, attn, p->work, 3).seconds, got;
    if (!sim_step_plan_decode(p, 3, sum, &got) || !(fabs(got - want) <= 1e-9 * want)) p->ok = false;
    return 0;
}

void sim_step_plan_free(sim_step_plan *p)
{
    free(p->rest);
    free(p->work);
    p->rest = NULL;
    p->work = NULL;
    p->ok = false;
}

bool sim_step_plan_decode(sim_step_plan *p, long n, long sum_start, double *seconds)
{
    if (!p->ok || n < 1 || n > p->max_n) return false;
    if (isnan(p->rest[n])) p->rest[n] = rest_of(p, (int)n);
    double keys = (double)(sum_start + n);   /* a token at position x reads x + 1 keys */
    double att = att_seconds(p, p->f0 * (double)n + p->fk * keys, p->b0 * (double)n + p->bk * keys);
    *seconds = p->rest[n] + att;
    return true;
}
