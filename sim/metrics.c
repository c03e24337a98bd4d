/* metrics.c: accumulates a run's measurements and summarises them (see metrics.h). */
#include "metrics.h"
#include "request.h"
#include "../model/kv_model.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const char *const QNAMES[SIM_Q_COUNT] = {"ttft", "tpot", "itl", "e2e", "queue"};
const char *sim_quantity_name(sim_quantity q) { return q < SIM_Q_COUNT ? QNAMES[q] : "?"; }

int sim_acc_init(sim_acc *a, const scn_workload *wl)
{
    memset(a, 0, sizeof *a);
    a->t_first_arrival = INFINITY;
    if (wl && wl->measure_by_time) {
        a->by_time = true;
        a->cut_first = wl->skip_first_frac;
        a->cut_last = wl->skip_last_frac;
    }
    for (int i = 0; i < SIM_Q_COUNT; i++)
        if (sim_hist_init(&a->h[i])) { sim_acc_free(a); return -1; }
    return 0;
}

void sim_acc_free(sim_acc *a)
{
    for (int i = 0; i < SIM_Q_COUNT; i++) sim_hist_free(&a->h[i]);
    free(a->rows);
    a->rows = NULL;
    a->n_rows = a->cap_rows = 0;
    free(a->rej);
    a->rej = NULL;
    a->n_rej = a->cap_rej = 0;
}

/* Keeps a completion for the window cut by time (sim_acc_finish). */
static void keep_row(sim_acc *a, const sim_request_row *r)
{
    if (a->rows_oom) return;
    if (a->n_rows == a->cap_rows) {
        long cap = a->cap_rows ? 2 * a->cap_rows : 1024;
        sim_request_row *p = realloc(a->rows, (size_t)cap * sizeof *p);
        if (!p) { a->rows_oom = true; return; }
        a->rows = p;
        a->cap_rows = cap;
    }
    a->rows[a->n_rows++] = *r;
}

static void count_reject(sim_acc *a, bool too_long)
{
    a->rejected++;
    a->too_long += too_long;
}

void sim_acc_reject(sim_acc *a, bool measured, bool too_long, double t)
{
    a->rejected_run++;
    if (!a->by_time) {
        if (measured) count_reject(a, too_long);
        return;
    }
    if (a->rows_oom) return;
    if (a->n_rej == a->cap_rej) {
        long cap = a->cap_rej ? 2 * a->cap_rej : 64;
        struct sim_rejection *p = realloc(a->rej, (size_t)cap * sizeof *p);
        if (!p) { a->rows_oom = true; return; }
        a->rej = p;
        a->cap_rej = cap;
    }
    a->rej[a->n_rej++] = (struct sim_rejection){t, too_long};
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
    if (a->by_time) {
        a->slo = slo;
        keep_row(a, r);
    }
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

/* The window cut by time (docs/simulator.md, "Measurement window by time"): of the run's span
 * S = [first send, last completion], skip_first's share of S is cut from its start and
 * skip_last's from its end; what is left, [lo, hi], is the window. As Perf Analyzer's time
 * windows count "how many requests have completed during a window" and divide by its length,
 * the requests that complete in [lo, hi] are the ones measured (their latencies and tokens), and
 * the rates are over hi - lo. A request index window instead spans from the first measured send
 * to the last measured completion, which in a closed loop of synchronised rounds cuts rounds in
 * part and counts their whole time (tests/test_workload.c, time_window_counts_whole_rounds).
 * The histograms come from the kept rows; ITL gaps are recorded step by step, not per request,
 * so they stay the whole run's (a, the running accumulator, holds them). */
static int finish_by_time(const sim_acc *a, sim_acc *w, double *lo, double *hi, double *run_span)
{
    if (a->rows_oom || sim_acc_init(w, NULL)) return -1;
    double t0 = INFINITY, t1 = -INFINITY;
    for (long i = 0; i < a->n_rows; i++) {
        const sim_request_row *r = &a->rows[i];
        if (r->arrival < t0) t0 = r->arrival;
        if (r->arrival + r->e2e > t1) t1 = r->arrival + r->e2e;
    }
    /* A refusal is sent and answered at its arrival: it is part of the span too (a run whose
     * refusals came before its first served send, or that served none, keeps them). */
    for (long i = 0; i < a->n_rej; i++) {
        if (a->rej[i].t < t0) t0 = a->rej[i].t;
        if (a->rej[i].t > t1) t1 = a->rej[i].t;
    }
    if (!a->n_rows && !a->n_rej) t0 = t1 = 0;
    double span = t1 - t0;
    *run_span = span;
    *lo = t0 + a->cut_first * span;
    *hi = t1 - a->cut_last * span;
    for (long i = 0; i < a->n_rows; i++) {
        const sim_request_row *r = &a->rows[i];
        double done = r->arrival + r->e2e;
        if (done >= *lo && done <= *hi) sim_acc_request(w, a->slo, r);
    }
    /* A refusal is answered at once: it falls in the window when it arrives inside it. */
    for (long i = 0; i < a->n_rej; i++)
        if (a->rej[i].t >= *lo && a->rej[i].t <= *hi) count_reject(w, a->rej[i].too_long);
    return 0;
}

int sim_acc_finish(const sim_acc *a, long total_blocks, sim_metrics *m)
{
    /* q: where the per-request figures come from (the window's own accumulator when cut by time). */
    sim_acc win;
    const sim_acc *q = a;
    double lo = 0, hi = 0, run_span = 0;
    if (a->by_time) {
        if (finish_by_time(a, &win, &lo, &hi, &run_span)) return -1;
        q = &win;
    }
    m->requests = q->requests;
    m->duration = a->by_time ? hi - lo : q->requests ? q->t_last_finish - q->t_first_arrival : 0;
    double d = m->duration > 0 ? m->duration : NAN;
    m->req_per_s = q->requests / d;
    m->input_tok_per_s = q->in_tokens / d;
    m->output_tok_per_s = q->out_tokens / d;
    m->goodput = q->good / d;
    /* A rejected request met no SLO. */
    m->slo_attainment = q->requests + q->rejected ? (double)q->good / (double)(q->requests + q->rejected) : NAN;
    m->rejected = q->rejected;
    m->too_long = q->too_long;
    m->rejected_run = a->rejected_run;
    for (int i = 0; i < SIM_Q_COUNT; i++) {
        /* ITL gaps are recorded step by step, not per request: the run's own. */
        const sim_hist *h = i == SIM_Q_ITL ? &a->h[i] : &q->h[i];
        sim_summary *s = &m->q[i];
        s->count = h->count;
        s->mean = h->count ? sim_hist_sum(h) / h->count : NAN;
        static const double qs[4] = {0.50, 0.90, 0.95, 0.99};
        double v[4];
        sim_hist_quantiles(h, qs, 4, v);   /* one walk over the buckets for the four */
        s->p50 = v[0];
        s->p90 = v[1];
        s->p95 = v[2];
        s->p99 = v[3];
        s->max = h->count ? h->max : NAN;
    }
    if (q == &win) sim_acc_free(&win);
    /* KV use is integrated over the whole run: under a window cut by time, over the run's span. */
    double kv_span = a->by_time ? run_span : m->duration;
    m->kv_util_mean = kv_span > 0 && total_blocks > 0 ? a->used_integral / (kv_span * total_blocks) : 0;
    m->kv_util_peak = total_blocks > 0 ? a->used_peak / total_blocks : 0;
    m->frag_mean = a->frag_reserved > 0 ? a->frag_unused / a->frag_reserved : 0;
    m->prefix_hit_rate = a->prompt_tokens ? (double)a->hit_tokens / a->prompt_tokens : 0;
    m->preemptions = a->preemptions;
    m->steps = a->steps;
    m->batch_mean = a->steps ? (double)a->batch_sum / a->steps : 0;
    m->batch_max = a->batch_max;
    return 0;
}

/* Every metric a run reports, in the order the database and the outputs use: its name (unit
 * in the name), where it lives in sim_metrics, and its unit. sim_metrics_list reads through it
 * and sim_metrics_set writes through it, so the two cannot drift apart. */
typedef struct { const char *name; size_t off; bool is_long; sim_unit unit; bool disagg; } metric_field;

#define REAL(n, f, u) {n, offsetof(sim_metrics, f), false, u, false}
#define LONG(n, f, u) {n, offsetof(sim_metrics, f), true, u, false}
#define DREAL(n, f, u) {n, offsetof(sim_metrics, f), false, u, true}
#define DLONG(n, f, u) {n, offsetof(sim_metrics, f), true, u, true}
#define SUMMARY(nm, i)                                                                             \
    REAL(nm "_mean_s", q[i].mean, SIM_UNIT_SECONDS), REAL(nm "_p50_s", q[i].p50, SIM_UNIT_SECONDS), \
    REAL(nm "_p90_s", q[i].p90, SIM_UNIT_SECONDS), REAL(nm "_p95_s", q[i].p95, SIM_UNIT_SECONDS),  \
    REAL(nm "_p99_s", q[i].p99, SIM_UNIT_SECONDS), REAL(nm "_max_s", q[i].max, SIM_UNIT_SECONDS)

static const metric_field FIELDS[] = {
    LONG("requests", requests, SIM_UNIT_COUNT),
    REAL("duration_s", duration, SIM_UNIT_SECONDS),
    REAL("throughput_req_per_s", req_per_s, SIM_UNIT_RATE),
    REAL("input_tok_per_s", input_tok_per_s, SIM_UNIT_RATE),
    REAL("output_tok_per_s", output_tok_per_s, SIM_UNIT_RATE),
    REAL("goodput_req_per_s", goodput, SIM_UNIT_RATE),
    REAL("slo_attainment", slo_attainment, SIM_UNIT_FRACTION),
    SUMMARY("ttft", SIM_Q_TTFT), SUMMARY("tpot", SIM_Q_TPOT), SUMMARY("itl", SIM_Q_ITL),
    SUMMARY("e2e", SIM_Q_E2E), SUMMARY("queue", SIM_Q_QUEUE),
    REAL("kv_util_mean", kv_util_mean, SIM_UNIT_FRACTION),
    REAL("kv_util_peak", kv_util_peak, SIM_UNIT_FRACTION),
    REAL("fragmentation_mean", frag_mean, SIM_UNIT_FRACTION),
    REAL("prefix_hit_rate", prefix_hit_rate, SIM_UNIT_FRACTION),
    LONG("preemptions", preemptions, SIM_UNIT_COUNT),
    LONG("rejected", rejected, SIM_UNIT_COUNT),
    LONG("too_long", too_long, SIM_UNIT_COUNT),
    LONG("unsent_turns", unsent, SIM_UNIT_COUNT),
    LONG("rejected_run", rejected_run, SIM_UNIT_COUNT),
    REAL("batch_mean", batch_mean, SIM_UNIT_NUMBER),
    LONG("batch_max", batch_max, SIM_UNIT_COUNT),
    LONG("steps", steps, SIM_UNIT_COUNT),
    LONG("kv_blocks", kv_blocks, SIM_UNIT_COUNT),
    LONG("kv_tokens", kv_tokens, SIM_UNIT_COUNT),
    /* KV offload tiers and swap (sim/kv_tier.h); 0 when the choice has none. */
    REAL("offload_cpu_hit_rate", tier_hit_rate[0], SIM_UNIT_FRACTION),
    REAL("offload_cpu_bytes", tier_bytes[0], SIM_UNIT_NUMBER),
    REAL("offload_cpu_transfer_s", tier_xfer_s[0], SIM_UNIT_SECONDS),
    REAL("offload_cpu_occupancy", tier_occupancy[0], SIM_UNIT_FRACTION),
    REAL("offload_disk_hit_rate", tier_hit_rate[1], SIM_UNIT_FRACTION),
    REAL("offload_disk_bytes", tier_bytes[1], SIM_UNIT_NUMBER),
    REAL("offload_disk_transfer_s", tier_xfer_s[1], SIM_UNIT_SECONDS),
    REAL("offload_disk_occupancy", tier_occupancy[1], SIM_UNIT_FRACTION),
    REAL("offload_remote_hit_rate", tier_hit_rate[2], SIM_UNIT_FRACTION),
    REAL("offload_remote_bytes", tier_bytes[2], SIM_UNIT_NUMBER),
    REAL("offload_remote_transfer_s", tier_xfer_s[2], SIM_UNIT_SECONDS),
    REAL("offload_remote_occupancy", tier_occupancy[2], SIM_UNIT_FRACTION),
    LONG("swaps", swaps, SIM_UNIT_COUNT),
    REAL("swap_bytes", swap_bytes, SIM_UNIT_NUMBER),
    REAL("swap_transfer_s", swap_xfer_s, SIM_UNIT_SECONDS),
    /* disaggregation (listed only for a disaggregated run) */
    DLONG("prefill_replicas", prefill_replicas, SIM_UNIT_COUNT),
    DLONG("decode_replicas", decode_replicas, SIM_UNIT_COUNT),
    DREAL("transfer_bytes", transfer_bytes, SIM_UNIT_NUMBER),
    DREAL("transfer_mean_s", transfer_mean, SIM_UNIT_SECONDS),
    DREAL("transfer_p99_s", transfer_p99, SIM_UNIT_SECONDS),
    DREAL("transfer_wait_mean_s", transfer_wait_mean, SIM_UNIT_SECONDS),
    DREAL("transfer_wait_p99_s", transfer_wait_p99, SIM_UNIT_SECONDS),
    DREAL("transfer_wait_max_s", transfer_wait_max, SIM_UNIT_SECONDS),
    DREAL("prefill_busy", prefill_busy, SIM_UNIT_FRACTION),
    DREAL("decode_busy", decode_busy, SIM_UNIT_FRACTION),
    DREAL("prefill_kv_util_mean", prefill_kv_util_mean, SIM_UNIT_FRACTION),
    DREAL("prefill_batch_mean", prefill_batch_mean, SIM_UNIT_NUMBER),
    DREAL("decode_batch_mean", decode_batch_mean, SIM_UNIT_NUMBER),
    DLONG("decode_batch_max", decode_batch_max, SIM_UNIT_COUNT),
    DLONG("decode_max_num_seqs", decode_max_num_seqs, SIM_UNIT_COUNT),
};
#define N_FIELDS ((int)(sizeof FIELDS / sizeof FIELDS[0]))

double sim_arrivals(const sim_metrics *m) { return (double)m->requests + (double)m->rejected; }

double sim_rejected_share(const sim_metrics *m)
{
    double arrivals = sim_arrivals(m);
    return arrivals > 0 ? (double)m->rejected / arrivals : NAN;
}

int sim_metrics_list(const sim_metrics *m, sim_metric_kv *out, int max)
{
    int n = 0;
    for (int i = 0; i < N_FIELDS && n < max; i++) {
        if (FIELDS[i].disagg && m->prefill_replicas <= 0) continue;   /* a colocated run */
        const char *p = (const char *)m + FIELDS[i].off;
        double v = FIELDS[i].is_long ? (double)*(const long *)p : *(const double *)p;
        out[n++] = (sim_metric_kv){FIELDS[i].name, v, FIELDS[i].unit};
    }
    return n;
}

int sim_metrics_set(sim_metrics *m, const char *name, double v)
{
    for (int i = 0; i < N_FIELDS; i++) {
        if (strcmp(name, FIELDS[i].name)) continue;
        char *p = (char *)m + FIELDS[i].off;
        if (FIELDS[i].is_long) *(long *)p = (long)v;
        else *(double *)p = v;
        return 0;
    }
    return -1;
}

double sim_req_row(const scn_scenario *s, const struct sim_req *r, int replica, int output, sim_request_row *row)
{
    memset(row, 0, sizeof *row);
    row->id = r->spec.id;
    row->replica = replica;
    row->arrival = r->spec.arrival;
    row->queue = r->t_sched - r->spec.arrival;
    /* The front end (tokenisation, request handling, streaming) delays what the client sees of
     * the first token, and so of every later one, by the same amount (kv_frontend_seconds). */
    double fe = kv_frontend_seconds(s, r->spec.prompt);
    /* An engine that hands a step's outputs over one step late (engine.async_output) shows the
     * client its first and last token lag_first and lag_last after they were made (0 otherwise). */
    row->ttft = r->t_first - r->spec.arrival + r->lag_first + fe;
    row->tpot = output > 1 ? ((r->t_last + r->lag_last) - (r->t_first + r->lag_first)) / (output - 1) : 0;
    row->e2e = r->t_last - r->spec.arrival + r->lag_last + fe;
    row->prompt = r->spec.prompt;
    row->output = output;
    row->cached = r->cached;
    row->preemptions = r->preemptions;
    row->conversation = r->spec.conversation;
    row->turn = r->spec.turn;
    return fe;
}
