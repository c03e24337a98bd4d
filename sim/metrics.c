/* metrics.c: accumulates a run's measurements and summarises them (see metrics.h). */
#include "metrics.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const QNAMES[SIM_Q_COUNT] = {"ttft", "tpot", "itl", "e2e", "queue"};
const char *sim_quantity_name(sim_quantity q) { return q < SIM_Q_COUNT ? QNAMES[q] : "?"; }

int sim_acc_init(sim_acc *a)
{
    memset(a, 0, sizeof *a);
    a->t_first_arrival = INFINITY;
    for (int i = 0; i < SIM_Q_COUNT; i++)
        if (sim_hist_init(&a->h[i])) { sim_acc_free(a); return -1; }
    return 0;
}

void sim_acc_free(sim_acc *a)
{
    for (int i = 0; i < SIM_Q_COUNT; i++) sim_hist_free(&a->h[i]);
}

bool sim_slo_met(const scn_slo *slo, const sim_request_row *r)
{
    for (int i = 0; i < slo->n; i++) {
        const scn_slo_term *t = &slo->terms[i];
        double v = t->metric == SCN_METRIC_TTFT ? r->ttft : t->metric == SCN_METRIC_E2E ? r->e2e : r->tpot;
        if (v > t->limit) return false;
    }
    return true;
}

void sim_acc_request(sim_acc *a, const scn_slo *slo, const sim_request_row *r)
{
    a->requests++;
    a->in_tokens += r->prompt;
    a->out_tokens += r->output;
    sim_hist_add(&a->h[SIM_Q_TTFT], r->ttft);
    if (r->output > 1) sim_hist_add(&a->h[SIM_Q_TPOT], r->tpot);
    sim_hist_add(&a->h[SIM_Q_E2E], r->e2e);
    sim_hist_add(&a->h[SIM_Q_QUEUE], r->queue);
    if (r->arrival < a->t_first_arrival) a->t_first_arrival = r->arrival;
    if (r->arrival + r->e2e > a->t_last_finish) a->t_last_finish = r->arrival + r->e2e;
    if (sim_slo_met(slo, r)) a->good++;
}

void sim_acc_finish(const sim_acc *a, long total_blocks, sim_metrics *m)
{
    m->requests = a->requests;
    m->duration = a->requests ? a->t_last_finish - a->t_first_arrival : 0;
    double d = m->duration > 0 ? m->duration : NAN;
    m->req_per_s = a->requests / d;
    m->input_tok_per_s = a->in_tokens / d;
    m->output_tok_per_s = a->out_tokens / d;
    m->goodput = a->good / d;
    m->slo_attainment = a->requests ? (double)a->good / a->requests : NAN;
    for (int i = 0; i < SIM_Q_COUNT; i++) {
        const sim_hist *h = &a->h[i];
        sim_summary *s = &m->q[i];
        s->count = h->count;
        s->mean = h->count ? h->sum / h->count : NAN;
        s->p50 = sim_hist_quantile(h, 0.50);
        s->p90 = sim_hist_quantile(h, 0.90);
        s->p95 = sim_hist_quantile(h, 0.95);
        s->p99 = sim_hist_quantile(h, 0.99);
        s->max = h->count ? h->max : NAN;
    }
    m->kv_util_mean = m->duration > 0 && total_blocks > 0 ? a->used_integral / (m->duration * total_blocks) : 0;
    m->kv_util_peak = total_blocks > 0 ? a->used_peak / total_blocks : 0;
    m->frag_mean = a->frag_reserved > 0 ? a->frag_unused / a->frag_reserved : 0;
    m->prefix_hit_rate = a->prompt_tokens ? (double)a->hit_tokens / a->prompt_tokens : 0;
    m->preemptions = a->preemptions;
    m->steps = a->steps;
    m->batch_mean = a->steps ? (double)a->batch_sum / a->steps : 0;
    m->batch_max = a->batch_max;
}

int sim_metrics_list(const sim_metrics *m, sim_metric_kv *out, int max)
{
    static const char *const QN[SIM_Q_COUNT][7] = {
        {"ttft_mean_s", "ttft_p50_s", "ttft_p90_s", "ttft_p95_s", "ttft_p99_s", "ttft_max_s", "ttft_count"},
        {"tpot_mean_s", "tpot_p50_s", "tpot_p90_s", "tpot_p95_s", "tpot_p99_s", "tpot_max_s", "tpot_count"},
        {"itl_mean_s", "itl_p50_s", "itl_p90_s", "itl_p95_s", "itl_p99_s", "itl_max_s", "itl_count"},
        {"e2e_mean_s", "e2e_p50_s", "e2e_p90_s", "e2e_p95_s", "e2e_p99_s", "e2e_max_s", "e2e_count"},
        {"queue_mean_s", "queue_p50_s", "queue_p90_s", "queue_p95_s", "queue_p99_s", "queue_max_s", "queue_count"},
    };
    sim_metric_kv v[SIM_METRICS_MAX];
    int n = 0;
#define PUT(nm, val, u) (v[n++] = (sim_metric_kv){nm, (double)(val), u})
    PUT("requests", m->requests, SIM_UNIT_COUNT);
    PUT("duration_s", m->duration, SIM_UNIT_SECONDS);
    PUT("throughput_req_per_s", m->req_per_s, SIM_UNIT_RATE);
    PUT("input_tok_per_s", m->input_tok_per_s, SIM_UNIT_RATE);
    PUT("output_tok_per_s", m->output_tok_per_s, SIM_UNIT_RATE);
    PUT("goodput_req_per_s", m->goodput, SIM_UNIT_RATE);
    PUT("slo_attainment", m->slo_attainment, SIM_UNIT_FRACTION);
    for (int q = 0; q < SIM_Q_COUNT; q++) {
        const sim_summary *s = &m->q[q];
        PUT(QN[q][0], s->mean, SIM_UNIT_SECONDS);
        PUT(QN[q][1], s->p50, SIM_UNIT_SECONDS);
        PUT(QN[q][2], s->p90, SIM_UNIT_SECONDS);
        PUT(QN[q][3], s->p95, SIM_UNIT_SECONDS);
        PUT(QN[q][4], s->p99, SIM_UNIT_SECONDS);
        PUT(QN[q][5], s->max, SIM_UNIT_SECONDS);
    }
    PUT("kv_util_mean", m->kv_util_mean, SIM_UNIT_FRACTION);
    PUT("kv_util_peak", m->kv_util_peak, SIM_UNIT_FRACTION);
    PUT("fragmentation_mean", m->frag_mean, SIM_UNIT_FRACTION);
    PUT("prefix_hit_rate", m->prefix_hit_rate, SIM_UNIT_FRACTION);
    PUT("preemptions", m->preemptions, SIM_UNIT_COUNT);
    PUT("batch_mean", m->batch_mean, SIM_UNIT_NUMBER);
    PUT("batch_max", m->batch_max, SIM_UNIT_COUNT);
    PUT("steps", m->steps, SIM_UNIT_COUNT);
    PUT("kv_blocks", m->kv_blocks, SIM_UNIT_COUNT);
    PUT("kv_tokens", m->kv_tokens, SIM_UNIT_COUNT);
#undef PUT
    int k = n < max ? n : max;
    for (int i = 0; i < k; i++) out[i] = v[i];
    return k;
}

int sim_metrics_set(sim_metrics *m, const char *name, double v)
{
    /* The inverse of sim_metrics_list: the same names, back into their fields. */
    static const char *const STAT[] = {"mean", "p50", "p90", "p95", "p99", "max"};
    for (int q = 0; q < SIM_Q_COUNT; q++) {
        size_t l = strlen(QNAMES[q]);
        if (strncmp(name, QNAMES[q], l) || name[l] != '_') continue;
        double *f[] = {&m->q[q].mean, &m->q[q].p50, &m->q[q].p90, &m->q[q].p95, &m->q[q].p99, &m->q[q].max};
        for (int k = 0; k < 6; k++) {
            char want[48];
            snprintf(want, sizeof want, "%s_%s_s", QNAMES[q], STAT[k]);
            if (!strcmp(name, want)) { *f[k] = v; return 0; }
        }
    }
    struct { const char *n; double *d; long *l; } T[] = {
        {"requests", NULL, &m->requests}, {"duration_s", &m->duration, NULL}, {"throughput_req_per_s", &m->req_per_s, NULL},
        {"input_tok_per_s", &m->input_tok_per_s, NULL}, {"output_tok_per_s", &m->output_tok_per_s, NULL},
        {"goodput_req_per_s", &m->goodput, NULL}, {"slo_attainment", &m->slo_attainment, NULL},
        {"kv_util_mean", &m->kv_util_mean, NULL}, {"kv_util_peak", &m->kv_util_peak, NULL},
        {"fragmentation_mean", &m->frag_mean, NULL}, {"prefix_hit_rate", &m->prefix_hit_rate, NULL},
        {"preemptions", NULL, &m->preemptions}, {"batch_mean", &m->batch_mean, NULL}, {"batch_max", NULL, &m->batch_max},
        {"steps", NULL, &m->steps}, {"kv_blocks", NULL, &m->kv_blocks}, {"kv_tokens", NULL, &m->kv_tokens},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
        if (!strcmp(name, T[i].n)) { if (T[i].d) *T[i].d = v; else *T[i].l = (long)v; return 0; }
    return -1;
}
