/* plan_capacity.c: capacity questions answered by search over simulations: the highest rate a
 * candidate sustains within the SLO (one search shared by `plan`, `capacity` and `sweep`), the
 * fewest replicas for a target rate, and the longest context that fits at a given concurrency
 * (cost model only). */
#include "plan.h"
#include "../model/kv_model.h"
#include "../model/kv_throughput.h"
#include "../model/kv_blocks.h"
#include "../model/kv_moe_parallel.h"
#include "../model/kv_spec.h"
#include "../sim/hist.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

long plan_trial_concurrency(const scn_scenario *t, const sim_choice *ch)
{
    const scn_deployment *d = &t->deployment;
    long per_rank = d->max_num_seqs > 0 ? d->max_num_seqs : 1;
    if (ch) {
        /* Sequences of the workload's mean prompt + output that the KV cache of one rank holds
         * (kv_capacity_compute): above that the engine never runs max_num_seqs at once. */
        kv_cache_cfg kc = kv_cache_cfg_make(t, ch->kv_dtype, ch->sink, ch->window);
        bool paged = ch->layout == SCN_LAYOUT_PAGED;
        kv_capacity k = kv_capacity_compute(t, &kc, paged ? ch->block_size : 1, 0);
        long fit = paged ? k.max_seqs_paged : k.max_seqs_contiguous;
        if (fit < 1) fit = 1;   /* it does not fit at all: the trial fails whatever its size */
        if (fit < per_rank) per_rank = fit;
    }
    return per_rank * (d->attention_dp > 1 ? d->attention_dp : 1) * (d->replicas > 0 ? d->replicas : 1);
}

long plan_trial_base(const scn_scenario *t, const sim_choice *ch)
{
    long n = t->workload.requests < PLAN_CAPACITY_REQUESTS ? t->workload.requests : PLAN_CAPACITY_REQUESTS;
    /* The floor: the first B requests (B the sequences the deployment runs at once,
     * plan_trial_concurrency) find free slots whatever the rate, and the last B drain a
     * shrinking batch; PLAN_TRIAL_CYCLES turnovers leave at least half the trial at a full batch
     * with a queue that can grow (docs/planner.md, "Trial size"). */
    long slots = plan_trial_concurrency(t, ch);
    long floor_n = PLAN_TRIAL_CYCLES * slots;
    return n < floor_n ? floor_n : n;
}

long plan_trial_requests(const scn_scenario *t, const sim_choice *ch)
{
    double rate = scn_arrival_has_rate(t->workload.arrival) && t->workload.rate > 0 ? t->workload.rate : 0;
    return plan_trial_requests_at(plan_trial_base(t, ch), rate, t->workload.turns);
}

long plan_trial_requests_at(long base, double rate, int turns_in)
{
    long n = base;
    /* The span floor. Above the service rate m, at a rate r, the queue grows by r - m requests a
     * second, so the request arriving at time t waits about t (r - m)/m, and the last of N (at
     * N/r) about N (1/m - 1/r); the p99 wait about 0.99 of that. For r = (1 + e) m that is
     * 0.99 N e / r, which passes PLAN_MAX_QUEUE_P99 = W only when N >= W r / (0.99 e): with
     * k = PLAN_TRIAL_SPAN_WAITS = 12, any rate more than e = 1/(0.99 k) = 8.4 % above capacity
     * fails. A shorter trial passes overloaded rates (issue 16's review: 300 requests credited
     * 78 req/s to an engine serving 34, and "unbounded" to one serving 340). A conversation
     * arrival brings `turns` requests. */
    double turns = turns_in > 1 ? turns_in : 1;
    double span_n = ceil(PLAN_TRIAL_SPAN_WAITS * PLAN_MAX_QUEUE_P99 * rate * turns);
    if (span_n > n) n = span_n < 1e9 ? (long)span_n : 1000000000L;
    return n;
}

const char *plan_rate_unit(const scn_scenario *s)
{
    return s->workload.turns > 1 ? "conversations/s" : "req/s";
}

/* The trial's scenario: the candidate's, at `rate` with `replicas` and `seed`, trial-sized. */
static void trial_of(const scn_scenario *s, const plan_cand *c, unsigned long long seed, double rate, int replicas,
                     scn_scenario *t)
{
    plan_apply(s, c, t);
    t->deployment.replicas = replicas;
    t->workload.rate = rate;
    t->seed = seed;
    t->workload.requests = plan_trial_requests(t, &c->c);
}

/* ---- Stopping a trial once its verdict is certain (docs/planner.md, "Stopping a failing
 * trial early") ----
 * A trial fails when a percentile of a per-request quantity is above its limit: the queue wait's
 * p99 above PLAN_MAX_QUEUE_P99, or an SLO term's percentile of TTFT, TPOT or E2E above the term's
 * limit. The run's histograms (sim/hist.c) return the q-quantile of n values from the bucket
 * holding rank q (n - 1); when k of the n values lie in buckets wholly above the limit's and
 * n - k <= q (n - 1), that bucket is one of them and the quantile is above the limit. So once k
 * >= (1 - q) N + q, N bounding the requests the trial can complete, the trial has failed whatever
 * the rest of it does, and simulating the rest changes nothing but the time it takes. A value
 * more than EARLY_MARGIN above the limit lies in a bucket wholly above it (buckets are at most
 * sim_hist_resolution() wide relative to their value). ITL (per token, not per request) is not
 * watched: a trial failing only on it runs to the end. */
#define EARLY_MARGIN (4 * sim_hist_resolution())
#define EARLY_MAX (1 + SCN_SLO_MAX)   /* the queue and every SLO term */

typedef struct {
    sim_quantity q;
    double limit;                  /* s: a value above this counts (the limit plus EARLY_MARGIN) */
    long need;                     /* values above it that settle the failure */
    long seen;
} early_watch;

typedef struct {
    early_watch w[EARLY_MAX];
    int n;
    bool stopped;                  /* the run was ended because a watch reached its count */
} early_stop;

/* The requests a trial can complete at most, less precise than the count only in being larger:
 * a conversation arrival brings at most `turns` requests. */
static long trial_max_requests(const scn_scenario *t)
{
    long turns = t->workload.turns > 1 ? t->workload.turns : 1;
    return t->workload.requests + turns - 1;
}

double plan_slo_margin(void) { return EARLY_MARGIN; }

double plan_slo_quantile(double pct)
{
    return pct <= 50 ? 0.50 : pct <= 90 ? 0.90 : pct <= 95 ? 0.95 : pct <= 99 ? 0.99 : 1;
}

static void early_add(early_stop *e, sim_quantity q, double quantile, double limit, long n_max)
{
    if (e->n >= EARLY_MAX || !(limit >= 0) || !isfinite(limit)) return;
    /* need = the least integer above (1 - q) N + q (the maximum: one value above the limit).
     * The 1e-6 keeps a product that should be an integer from rounding below it. */
    long need = quantile >= 1 ? 1 : (long)floor((1 - quantile) * (double)n_max + quantile + 1e-6) + 1;
    e->w[e->n++] = (early_watch){q, limit * (1 + EARLY_MARGIN), need, 0};
}

/* The watches for trial `t` (limits from the scenario `s`); none when some requests are outside
 * the measured window (the histograms leave them out, the sink cannot tell them apart). */
static void early_init(early_stop *e, const scn_scenario *t)
{
    memset(e, 0, sizeof *e);
    const scn_workload *wl = &t->workload;
    if (wl->skip_first || wl->skip_last || wl->skip_first_frac > 0 || wl->skip_last_frac > 0) return;
    long n_max = trial_max_requests(t);
    early_add(e, SIM_Q_QUEUE, 0.99, PLAN_MAX_QUEUE_P99, n_max);
    for (int i = 0; i < t->slo.n; i++) {
        const scn_slo_term *x = &t->slo.terms[i];
        sim_quantity q = x->metric == SCN_METRIC_TTFT ? SIM_Q_TTFT : x->metric == SCN_METRIC_TPOT ? SIM_Q_TPOT
                       : x->metric == SCN_METRIC_E2E ? SIM_Q_E2E : SIM_Q_COUNT;
        if (q != SIM_Q_COUNT) early_add(e, q, plan_slo_quantile(x->percentile), x->limit, n_max);
    }
}

/* The request sink: counts the values above each limit, ends the run (a non-zero return) once
 * one count settles the failure. */
static int early_on_request(void *ud, const sim_request_row *r)
{
    early_stop *e = ud;
    for (int i = 0; i < e->n; i++) {
        early_watch *w = &e->w[i];
        double v;
        switch (w->q) {
        case SIM_Q_QUEUE: v = r->queue; break;
        case SIM_Q_TTFT: v = r->ttft; break;
        case SIM_Q_E2E: v = r->e2e; break;
        case SIM_Q_TPOT: if (r->output <= 1) continue; v = r->tpot; break;   /* as sim_acc_request records it */
        default: continue;
        }
        if (v > w->limit && ++w->seen >= w->need) { e->stopped = true; return 1; }
    }
    return 0;
}

/* ---- Trials shared between block-size twins (docs/planner.md, "Block-size twins") ----
 * Candidates that differ only in block size run the same trials whenever their searches reach
 * the same rates. A trial asks the engine which of the option list's other block sizes would
 * make every scheduling decision the same (sim_twin_report, proven in sim/kv_twin.c), and files
 * its verdict and metrics under each such twin; the twin's search then takes the trial from the
 * table instead of simulating it. Only what a trial's search reads is the same (the verdict, the
 * percentiles, rates, tokens and batch sizes); the figures counted in blocks are not: the shared
 * copy carries the twin's own pool size and NaN for KV use and fragmentation, which nothing a
 * search returns reads. */
#define TWIN_KEY_N 24
enum { TWIN_NONE, TWIN_PENDING, TWIN_DONE };
typedef struct {
    long k[TWIN_KEY_N];        /* the twin's options, seed, rate bits, replicas and requests */
    int state;                 /* TWIN_PENDING: a twin's run that may stand for it is in flight */
    int verdict;
    bool complete;
    sim_metrics *m;            /* kept-up trials only */
} twin_entry;

struct plan_twins {
    pthread_mutex_t lock;
    pthread_cond_t settled;    /* a pending entry was settled */
    twin_entry *e;
    long n, cap;
    long *slot;                /* open addressing over e[] indices, -1 empty; cap_s a power of 2 */
    long cap_s;
    long shared;               /* trials taken from the table */
    long filed;                /* entries filed */
};

plan_twins *plan_twins_new(void)
{
    plan_twins *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    if (pthread_mutex_init(&t->lock, NULL)) { free(t); return NULL; }
    if (pthread_cond_init(&t->settled, NULL)) { pthread_mutex_destroy(&t->lock); free(t); return NULL; }
    return t;
}

void plan_twins_free(plan_twins *t)
{
    if (!t) return;
    for (long i = 0; i < t->n; i++) free(t->e[i].m);
    free(t->e);
    free(t->slot);
    pthread_cond_destroy(&t->settled);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

long plan_twins_shared(const plan_twins *t) { return t ? t->shared : 0; }

/* The key of a trial of candidate c with block size bs: every option but the results. */
static void twin_key(const plan_cand *c, int bs, unsigned long long seed, double rate, int replicas, long requests,
                     long *k)
{
    const sim_choice *h = &c->c;
    long v[TWIN_KEY_N] = {h->layout, bs, h->prefix_cache, h->kv_dtype, h->attention, h->scheduler, h->sink, h->window,
                          h->spec, h->kv_offload, h->preemption, c->tp, c->replicas, c->max_num_seqs, c->max_batched,
                          c->kv_heads, c->hw, c->wformat, c->engine, (long)seed, 0, replicas, requests, 0};
    uint64_t bits;
    memcpy(&bits, &rate, sizeof bits);
    v[20] = (long)bits;
    memcpy(k, v, sizeof v);
}

static uint64_t twin_hash(const long *k)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 0; i < TWIN_KEY_N; i++) h = (h ^ (uint64_t)k[i]) * 0x100000001b3ULL, h ^= h >> 29;
    return h;
}

/* Under the lock: the entry of key k, or -1. */
static long twin_find(const plan_twins *t, const long *k)
{
    if (!t->cap_s) return -1;
    for (long i = (long)(twin_hash(k) & (uint64_t)(t->cap_s - 1));; i = (i + 1) & (t->cap_s - 1)) {
        if (t->slot[i] < 0) return -1;
        if (!memcmp(t->e[t->slot[i]].k, k, sizeof t->e[0].k)) return t->slot[i];
    }
}

static void twin_slot_put(plan_twins *t, long idx)
{
    long i = (long)(twin_hash(t->e[idx].k) & (uint64_t)(t->cap_s - 1));
    while (t->slot[i] >= 0) i = (i + 1) & (t->cap_s - 1);
    t->slot[i] = idx;
}

/* Under the lock: the entry of key k, created (TWIN_NONE) when missing; -1 when memory is short. */
static long twin_entry_of(plan_twins *t, const long *k)
{
    long i = twin_find(t, k);
    if (i >= 0) return i;
    if (t->n == t->cap) {
        long cap = t->cap ? 2 * t->cap : 256;
        twin_entry *e = realloc(t->e, sizeof *e * (size_t)cap);
        if (!e) return -1;
        t->e = e;
        t->cap = cap;
    }
    if (2 * (t->n + 1) > t->cap_s) {
        long cap = t->cap_s ? 2 * t->cap_s : 1024;
        long *sl = malloc(sizeof *sl * (size_t)cap);
        if (!sl) return -1;
        for (long j = 0; j < cap; j++) sl[j] = -1;
        free(t->slot);
        t->slot = sl;
        t->cap_s = cap;
        for (long j = 0; j < t->n; j++) twin_slot_put(t, j);
    }
    twin_entry *x = &t->e[t->n];
    memset(x, 0, sizeof *x);
    memcpy(x->k, k, sizeof x->k);
    x->state = TWIN_NONE;
    twin_slot_put(t, t->n);
    return t->n++;
}

/* Under the lock: marks key k pending (a run that may stand for it is starting) unless it is
 * settled or pending already; true when this call marked it. */
static bool twin_pend(plan_twins *t, const long *k)
{
    long i = twin_entry_of(t, k);
    if (i < 0 || t->e[i].state != TWIN_NONE) return false;
    t->e[i].state = TWIN_PENDING;
    return true;
}

/* Under the lock: settles key k with a trial's outcome (m: kept-up trials only), or, with
 * verdict < 0, releases a pending mark the run did not fill. */
static void twin_settle(plan_twins *t, const long *k, int verdict, bool complete, const sim_metrics *m)
{
    long i = twin_find(t, k);
    if (verdict < 0) {
        if (i >= 0 && t->e[i].state == TWIN_PENDING) t->e[i].state = TWIN_NONE;
        pthread_cond_broadcast(&t->settled);
        return;
    }
    if (i < 0) i = twin_entry_of(t, k);
    if (i < 0 || t->e[i].state == TWIN_DONE) { pthread_cond_broadcast(&t->settled); return; }
    sim_metrics *copy = m ? malloc(sizeof *copy) : NULL;
    if (m && !copy) {   /* out of memory: left unfiled */
        t->e[i].state = TWIN_NONE;
        pthread_cond_broadcast(&t->settled);
        return;
    }
    if (copy) *copy = *m;
    twin_entry *x = &t->e[i];
    x->state = TWIN_DONE;
    x->verdict = verdict;
    x->complete = complete;
    x->m = copy;
    t->filed++;
    pthread_cond_broadcast(&t->settled);
}

/* The twins a trial of candidate c on scenario t (trial-sized) asks about: the option list's
 * other block sizes whose own trial would have the same requests, with the pool each gets. */
static void twin_ask(const scn_scenario *s, const plan_cand *c, const scn_scenario *t, unsigned long long seed,
                     double rate, int replicas, sim_twin_report *r)
{
    memset(r, 0, sizeof *r);
    if (c->c.layout != SCN_LAYOUT_PAGED) return;
    plan_cand *tc = malloc(sizeof *tc);
    scn_scenario *tt = malloc(sizeof *tt);
    for (int i = 0; tc && tt && i < s->options.n_block && r->n < SIM_TWINS_MAX; i++) {
        int bs = s->options.block_size[i];
        bool seen = bs == c->c.block_size;
        for (int j = 0; j < r->n && !seen; j++) seen = r->block_size[j] == bs;
        if (seen || bs < 1) continue;
        *tc = *c;
        tc->c.block_size = bs;
        trial_of(s, tc, seed, rate, replicas, tt);
        if (tt->workload.requests != t->workload.requests) continue;   /* its trial is another size */
        long blocks = sim_executor_model_blocks(tt, &tc->c);
        if (blocks <= 0) continue;
        r->block_size[r->n] = bs;
        r->blocks[r->n++] = blocks;
    }
    free(tc);
    free(tt);
}

/* One trial: 1 when it keeps up (bounded queue, SLO met), 0 when not, -1 when it cannot run.
 * With `early`, a trial whose failure is settled stops there (its metrics are then not filled:
 * *complete says whether they are). With `tw` (early trials only), a block-size twin's trial
 * at the same rate is taken from the table (*shared: nothing was simulated), and this one is
 * filed for its own twins. */
static int trial_run(const scn_scenario *s, const plan_cand *c, unsigned long long seed, double rate, int replicas,
                     bool early, sim_metrics *m, bool *complete, plan_twins *tw, bool *shared)
{
    *complete = false;
    if (shared) *shared = false;
    if (!early) tw = NULL;
    scn_scenario *t = malloc(sizeof *t);
    if (!t) return -1;
    trial_of(s, c, seed, rate, replicas, t);
    long key[TWIN_KEY_N];
    if (tw) {
        twin_key(c, c->c.block_size, seed, rate, replicas, t->workload.requests, key);
        pthread_mutex_lock(&tw->lock);
        long i = twin_find(tw, key);
        /* A twin's run that may stand for this trial is in flight: its outcome, not a second run. */
        while (i >= 0 && tw->e[i].state == TWIN_PENDING) {
            pthread_cond_wait(&tw->settled, &tw->lock);
            i = twin_find(tw, key);
        }
        if (i >= 0 && tw->e[i].state != TWIN_DONE) i = -1;
        int v = i >= 0 ? tw->e[i].verdict : 0;
        if (i >= 0) {
            *complete = tw->e[i].complete;
            if (tw->e[i].m) *m = *tw->e[i].m; else memset(m, 0, sizeof *m);
            tw->shared++;
        }
        pthread_mutex_unlock(&tw->lock);
        if (i >= 0) {
            if (shared) *shared = true;
            free(t);
            return v;
        }
    }
    char err[256];
    sim_executor ex;
    if (sim_executor_model(t, &c->c, &ex)) { free(t); return -1; }
    early_stop e;
    early_init(&e, t);
    sim_twin_report rep;
    unsigned pend = 0;   /* bit i: this run marked twin i's trial pending */
    if (tw) {
        twin_ask(s, c, t, seed, rate, replicas, &rep);
        pthread_mutex_lock(&tw->lock);
        for (int i = 0; i < rep.n; i++) {
            twin_key(c, rep.block_size[i], seed, rate, replicas, t->workload.requests, key);
            if (twin_pend(tw, key)) pend |= 1u << i;
        }
        pthread_mutex_unlock(&tw->lock);
    }
    sim_run_opts o = {.seed = t->seed, .twins = tw && rep.n ? &rep : NULL};
    if (early && e.n > 0) { o.on_request = early_on_request; o.ud = &e; }
    double t0 = plan_trace_clock();
    int rc = sim_run(t, &c->c, &ex, &o, m, err, sizeof err);
    ex.free(ex.ctx);
    int v;
    if (e.stopped) {
        memset(m, 0, sizeof *m);
        v = 0;
    } else {
        /* Keeping up: the queue stays bounded (an overloaded engine's queue grows with every
         * request, so its p99 wait climbs past seconds within a trial), and the SLO holds.
         * Completions per second are no test: a short trial's drain tail lowers them. */
        *complete = rc == SIM_OK;
        v = rc != SIM_OK ? (rc == SIM_E_DATA ? 0 : -1) : m->q[SIM_Q_QUEUE].p99 <= PLAN_MAX_QUEUE_P99 && plan_slo_met(t, m);
    }
    plan_trace_sim(rate, t->workload.requests, v, e.stopped, t0);
    /* Filed for the twins the run proved the same: a whole run, or one the early stop ended;
     * the other pending marks are released. */
    if (o.twins) {
        bool file = rep.same && (rc == SIM_OK || e.stopped);
        pthread_mutex_lock(&tw->lock);
        for (int i = 0; i < rep.n; i++) {
            bool same = file && ((rep.same >> i) & 1);
            if (!same && !((pend >> i) & 1)) continue;
            twin_key(c, rep.block_size[i], seed, rate, replicas, t->workload.requests, key);
            if (!same) { twin_settle(tw, key, -1, false, NULL); continue; }
            sim_metrics twin_m;
            if (v == 1) {
                twin_m = *m;
                twin_m.kv_util_mean = twin_m.kv_util_peak = twin_m.frag_mean = NAN;   /* counted in blocks */
                twin_m.kv_blocks = rep.blocks[i];
                twin_m.kv_tokens = rep.blocks[i] * rep.block_size[i];
            }
            twin_settle(tw, key, v, *complete, v == 1 ? &twin_m : NULL);
        }
        pthread_mutex_unlock(&tw->lock);
    }
    free(t);
    return v;
}

bool plan_sustains(const scn_scenario *s, const plan_cand *c, unsigned long long seed, double rate, int replicas,
                   sim_metrics *m)
{
    bool complete;
    return trial_run(s, c, seed, rate, replicas, false, m, &complete, NULL, NULL) == 1;
}

bool plan_sustains_early(const scn_scenario *s, const plan_cand *c, unsigned long long seed, double rate, int replicas,
                         sim_metrics *m, bool *complete)
{
    return trial_run(s, c, seed, rate, replicas, true, m, complete, NULL, NULL) == 1;
}

/* Output tokens per second in steady state at `rate` arrivals/s: each arrival brings its
 * requests' output tokens, so rate x (output tokens per completed request) x (requests per
 * arrival: the turns a conversation completed, 1 without conversations), as the trial measured
 * them. The trial's own tokens/s would read low by its drain tail. */
static double steady_tokens(const scn_scenario *s, const plan_cand *c, int replicas, double rate, const sim_metrics *m)
{
    if (!(m->req_per_s > 0)) return 0;
    double per_request = m->output_tok_per_s / m->req_per_s, per_arrival = 1;
    int turns = s->workload.turns;
    if (turns > 1) {
        scn_scenario *t = malloc(sizeof *t);
        if (t) {
            trial_of(s, c, s->seed, rate, replicas, t);
            long arrivals = (t->workload.requests + turns - 1) / turns;   /* conversations (sim/workload.c) */
            if (arrivals > 0 && m->requests > 0) per_arrival = (double)m->requests / (double)arrivals;
            free(t);
        }
    }
    return rate * per_request * per_arrival;
}

/* The saturation rate of an expert-parallel / attention-DP candidate: kv_saturation_rate's
 * formula (docs/simulator.md, "Saturation rate") with the step priced as one DP rank runs it
 * (kv_moe_step_time: attention on the rank, its experts over EP, the all-to-all) and the rate
 * multiplied by the DP ranks, each serving its own max_num_seqs sequences. kv_saturation_rate
 * prices a whole replica as one engine of max_num_seqs sequences, 16x below the capacity the
 * simulation finds on the DeepSeek-V3 DP 8 / EP 8 archetype. */
static double moe_saturation(const scn_scenario *t, const plan_cand *c, kv_seq_work *w, int cap)
{
    const scn_deployment *d = &t->deployment;
    kv_cache_cfg kc = kv_cache_cfg_make(t, c->c.kv_dtype, c->c.sink, c->c.window);
    kv_seq_size z = kv_seq_size_of(t);
    kv_capacity k = kv_capacity_compute(t, &kc, c->c.layout == SCN_LAYOUT_PAGED ? c->c.block_size : 1, 0);
    long fit = c->c.layout == SCN_LAYOUT_PAGED ? k.max_seqs_paged : k.max_seqs_contiguous;
    long B = d->max_num_seqs < fit ? d->max_num_seqs : fit;
    if (B > cap) B = cap;
    if (B < 1 || z.output < 1) return 0;
    long ctx = (long)(z.prompt + z.output / 2);
    for (long i = 0; i < B; i++) w[i] = (kv_seq_work){1, ctx};
    double decode = kv_moe_step_time(t, &kc, c->c.attention, w, (int)B).seconds;
    long P = (long)ceil(z.prompt), per_step = d->max_num_batched_tokens / (P > 0 ? P : 1);
    if (per_step < 1) per_step = 1;
    if (per_step > cap) per_step = cap;
    for (long i = 0; i < per_step; i++) w[i] = (kv_seq_work){P, 0};
    double prefill = kv_moe_step_time(t, &kc, c->c.attention, w, (int)per_step).seconds / (double)per_step;
    double per_request = prefill + z.output * decode / (double)B;
    return per_request > 0 ? (double)d->replicas * kv_moe_dp(t) / per_request : 0;
}

double plan_capacity_hint(const scn_scenario *s, const plan_cand *c, int replicas)
{
    double fallback = s->workload.rate > 0 ? s->workload.rate : 1;
    scn_scenario *t = malloc(sizeof *t);
    if (!t) return fallback;
    plan_apply(s, c, t);
    t->deployment.replicas = replicas;
    int cap = t->deployment.max_num_seqs > 1 ? t->deployment.max_num_seqs : 1;
    long per_step = t->deployment.max_num_batched_tokens > 0 ? t->deployment.max_num_batched_tokens : 1;
    if (per_step > cap) cap = (int)(per_step < 65536 ? per_step : 65536);
    kv_seq_work *w = malloc(sizeof *w * (size_t)cap);
    double rate = 0;
    if (w) {
        if (kv_moe_parallel_on(t) && !kv_spec_get(t, c->c.spec) && !t->deployment.disagg.on) {
            rate = moe_saturation(t, c, w, cap);
        } else {
            kv_cache_cfg kc = kv_cache_cfg_make(t, c->c.kv_dtype, c->c.sink, c->c.window);
            kv_saturation x = kv_saturation_rate(t, &kc, c->c.attention, c->c.layout == SCN_LAYOUT_PAGED, c->c.block_size, w, cap);
            rate = x.rate;
        }
        /* The estimate counts requests; a conversation arrival brings `turns` of them. */
        if (t->workload.turns > 1) rate /= t->workload.turns;
        free(w);
    }
    free(t);
    return rate > 0 && isfinite(rate) ? rate : fallback;
}

/* The search (docs/planner.md, "The rate search"). The state is a bracket: lo, the highest rate
 * known to keep up (0: none yet), and hi, the lowest known not to (infinite: none yet), each
 * known from a trial on this seed. While one side is missing it gallops away from the other:
 * each step the previous one squared (its logarithm doubles), so a start within `step` of the
 * answer brackets it in one or two trials and one far off still brackets it in a few; then it
 * bisects (the geometric mean) until hi / lo - 1 <= tol. */
typedef struct {
    double lo, hi, start, top, bottom, f, tol;
    int dir;                   /* +1 galloping up from lo, -1 down from hi, 0 bisecting */
    bool try_start;            /* the start is tried first (it lies inside the bracket) */
} search_state;

/* The next rate the search tries from state z; false when it has its answer. One function for the
 * search and for the forecast of its path (seek_rate), so both compute the same doubles. */
static bool search_next(const search_state *z, double *r)
{
    if (z->try_start) *r = z->start;
    else if (z->dir > 0 && z->lo * z->f < z->hi && z->lo < z->top) *r = fmin(z->lo * z->f, z->top);
    else if (z->dir < 0 && z->hi / z->f > z->lo && z->hi > z->bottom) *r = fmax(z->hi / z->f, z->bottom);
    else if (z->lo > 0 && isfinite(z->hi) && z->hi / z->lo - 1 > z->tol) *r = sqrt(z->lo * z->hi);
    else return false;
    return true;
}

/* The state after a trial at r (the rate search_next gave) with verdict ok. */
static void search_step(search_state *z, double r, bool ok)
{
    bool bisecting = !z->try_start && !(z->dir > 0 && z->lo * z->f < z->hi && z->lo < z->top) &&
                     !(z->dir < 0 && z->hi / z->f > z->lo && z->hi > z->bottom);
    if (bisecting) z->dir = 0;
    if (ok) z->lo = r; else z->hi = r;
    if (z->try_start) { z->dir = ok ? 1 : -1; z->try_start = false; }
    else if (z->dir != 0 && (ok ? 1 : -1) == z->dir) z->f *= z->f;   /* the same way again: a longer stride */
    else z->dir = 0;                                                  /* it turned: bisect from here */
}

/* Trials already run on one candidate and seed (docs/planner.md, "Seeking the cutoff" and
 * "Trials are run once"): their rates, verdicts and, for those that kept up, metrics. Trials
 * are deterministic (the same candidate, seed and rate give the same verdict and metrics), so
 * one found out of turn serves the search when it reaches that rate, and one run by an earlier
 * search of the same candidate and seed (a search stopped at a cutoff and run again, a
 * candidate the plan simulates again) serves a later search. */
typedef struct {
    double rate;
    bool ok;
    sim_metrics *m;            /* kept-up trials only */
} memo_entry;

struct plan_trials {
    memo_entry *e;
    int n, cap;
    long reused;
    plan_twins *twins;         /* the plan's block-size twin table, or NULL */
};

void plan_trials_share(plan_trials *t, plan_twins *tw)
{
    if (t) t->twins = tw;
}

plan_trials *plan_trials_new(void) { return calloc(1, sizeof(plan_trials)); }

void plan_trials_free(plan_trials *t)
{
    if (!t) return;
    for (int k = 0; k < t->n; k++) free(t->e[k].m);
    free(t->e);
    free(t);
}

int plan_trials_count(const plan_trials *t) { return t ? t->n : 0; }
long plan_trials_reused(const plan_trials *t) { return t ? t->reused : 0; }

static int memo_find(const plan_trials *t, double r)
{
    for (int k = 0; k < t->n; k++) if (t->e[k].rate == r) return k;
    return -1;
}

/* Records a trial; false when out of memory (the trial is then simply not remembered). */
static bool memo_add(plan_trials *t, double r, bool ok, const sim_metrics *m)
{
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 8;
        memo_entry *e = realloc(t->e, sizeof *e * (size_t)cap);
        if (!e) return false;
        t->e = e;
        t->cap = cap;
    }
    sim_metrics *copy = NULL;
    if (ok && !(copy = malloc(sizeof *copy))) return false;
    if (copy) *copy = *m;
    t->e[t->n++] = (memo_entry){r, ok, copy};
    return true;
}

/* The next trial that settles fastest whether the search's answer lies below `cutoff`, from
 * state z (docs/planner.md, "Seeking the cutoff"). F is the search's path forecast with every
 * unknown trial at or below the cutoff keeping up and every unknown one above it failing (known
 * trials as they went). The search follows F until its first trial that disagrees with it; when
 * every point above the cutoff on F up to some place is known, that can only be an unknown point
 * at or below the cutoff failing, which puts the answer below the cutoff. So the answer is
 * settled below the cutoff (*settled, with *below the rate it is at most) when F, with no unknown
 * point above the cutoff, reaches a known failure at or below it, or ends with its answer below
 * it. Otherwise returns the trial to run first: the first unknown point above the cutoff on F (a
 * rate past capacity fails within seconds of simulated time, where one at or below the cutoff
 * that keeps up is a whole run); 0 when F ends at or above the cutoff with nothing unknown above
 * it (the search then runs in its own order). Which trial goes first changes only the cost. */
static double seek_rate(search_state z, const plan_trials *t, double cutoff, bool *settled, double *below)
{
    double above = 0, r;
    int steps = 0;
    *settled = false;
    while (search_next(&z, &r) && steps++ < 256) {
        int k = memo_find(t, r);
        bool ok = k >= 0 ? t->e[k].ok : r <= cutoff;
        if (k < 0 && r > cutoff) { above = r; break; }
        if (!ok && r <= cutoff) { *settled = true; *below = r; return 0; }   /* a known failure */
        search_step(&z, r, ok);
    }
    if (above == 0) {
        /* F ends (or runs past 256 steps: then nothing is claimed) with nothing unknown above. */
        if (!search_next(&z, &r) && z.lo < cutoff) { *settled = true; *below = z.lo; }
        return 0;
    }
    return above;
}

static int search(const scn_scenario *s, const plan_cand *c, unsigned long long seed, int replicas, double start,
                  double step, double tol, double known_rate, const sim_metrics *known, double cutoff,
                  plan_trials *shared, plan_capacity_result *out)
{
    memset(out, 0, sizeof *out);
    if (!scn_arrival_has_rate(s->workload.arrival)) { out->rate = NAN; return -1; }
    if (!(start > 0)) start = plan_capacity_hint(s, c, replicas);
    if (!(step > 1)) step = 2;
    if (!(tol > 0)) tol = PLAN_CAPACITY_TOL;
    search_state z = {.lo = 0, .hi = INFINITY, .start = start, .f = step, .tol = tol};
    z.top = start * PLAN_CAPACITY_RANGE;   /* lo reaching it: unbounded (below) */
    /* Downward to 1/256 of the start, or of the offered rate when that is lower (a warm start
     * from the saturation rate must not stop above where a search from the offered rate would
     * have gone): below that the answer is "misses the SLO at every rate". */
    z.bottom = fmin(start, s->workload.rate > 0 ? s->workload.rate : start) / 256;
    out->lowest = start;
    if (known && known_rate > 0) {
        if (known->q[SIM_Q_QUEUE].p99 <= PLAN_MAX_QUEUE_P99 && plan_slo_met(s, known)) { z.lo = known_rate; out->m = *known; }
        else z.hi = known_rate;
        out->lowest = fmin(out->lowest, known_rate);
    }
    /* The start is tried first when it lies inside the bracket; otherwise the gallop leaves from
     * the known side. */
    z.try_start = start > z.lo && start < z.hi;
    z.dir = z.lo > 0 ? 1 : -1;
    /* A failed trial at or below `cutoff` settles that the answer (below it) is below the cutoff. */
    out->cut = cutoff > 0 && z.hi <= cutoff;
    /* With a cutoff, the trials that settle whether the answer lies below it go first, out of
     * the search's order (seek_rate); the search then reuses them on reaching their rates. */
    plan_trials local = {0}, *memo = shared ? shared : &local;
    double r, cut_below = z.hi;
    int sought = 0;
    while (!out->cut && search_next(&z, &r)) {
        while (cutoff > 0 && sought < 64 && !out->cut) {
            bool settled;
            double below = 0, d = seek_rate(z, memo, cutoff, &settled, &below);
            if (settled) { out->cut = true; cut_below = below; break; }
            if (!(d > 0) || d == r || memo_find(memo, d) >= 0) break;
            sim_metrics md;
            bool complete, was_shared;
            sought++;
            bool okd = trial_run(s, c, seed, d, replicas, true, &md, &complete, memo->twins, &was_shared) == 1;
            if (!was_shared) out->sims++;
            if (!memo_add(memo, d, okd, &md)) break;
        }
        if (out->cut) break;
        sim_metrics m;
        bool complete, ok;
        int k = memo_find(memo, r);
        if (r < out->lowest) out->lowest = r;
        if (k >= 0) {
            ok = memo->e[k].ok;
            if (ok) m = *memo->e[k].m;
            memo->reused++;
        } else {
            bool was_shared;
            ok = trial_run(s, c, seed, r, replicas, true, &m, &complete, memo->twins, &was_shared) == 1;
            if (!was_shared) out->sims++;
            memo_add(memo, r, ok, &m);
        }
        if (ok) out->m = m;
        search_step(&z, r, ok);
        if (cutoff > 0 && z.hi <= cutoff) { out->cut = true; cut_below = z.hi; }
    }
    for (int k = 0; k < local.n; k++) free(local.e[k].m);
    free(local.e);
    double lo = z.lo, hi = z.hi;
    if (out->cut) { out->rate = lo; out->cut_at = cut_below; return 0; }
    if (lo == 0) { memset(&out->m, 0, sizeof out->m); return 0; }
    out->rate = lo;
    /* A candidate that keeps up at PLAN_CAPACITY_RANGE x the start has no capacity this search
     * can name (its trial may be too short to load it, or the SLO too loose), and says so
     * instead of returning a huge rate. */
    out->unbounded = !isfinite(hi);
    out->out_tok_per_s = steady_tokens(s, c, replicas, lo, &out->m);
    return 0;
}

int plan_capacity_search(const scn_scenario *s, const plan_cand *c, unsigned long long seed, int replicas, double hint,
                         double step, double tol, const sim_metrics *at_hint, plan_capacity_result *out)
{
    if (!(hint > 0) && scn_arrival_has_rate(s->workload.arrival)) hint = plan_capacity_hint(s, c, replicas);
    return search(s, c, seed, replicas, hint, step, tol, hint, at_hint, 0, NULL, out);
}

int plan_capacity_search_from(const scn_scenario *s, const plan_cand *c, unsigned long long seed, int replicas,
                              double start, double step, double tol, double known_rate, const sim_metrics *known,
                              plan_capacity_result *out)
{
    return search(s, c, seed, replicas, start, step, tol, known_rate, known, 0, NULL, out);
}

int plan_capacity_search_below(const scn_scenario *s, const plan_cand *c, unsigned long long seed, int replicas,
                               double start, double step, double tol, double known_rate, const sim_metrics *known,
                               double cutoff, plan_capacity_result *out)
{
    return search(s, c, seed, replicas, start, step, tol, known_rate, known, cutoff, NULL, out);
}

int plan_capacity_search_memo(const scn_scenario *s, const plan_cand *c, unsigned long long seed, int replicas,
                              double start, double step, double tol, double known_rate, const sim_metrics *known,
                              double cutoff, plan_trials *trials, plan_capacity_result *out)
{
    return search(s, c, seed, replicas, start, step, tol, known_rate, known, cutoff, trials, out);
}

double plan_max_rate(const scn_scenario *s, const plan_cand *c, int iterations)
{
    if (!scn_arrival_has_rate(s->workload.arrival)) return NAN;   /* a trace, closed loop or offline run has no rate to scale */
    plan_capacity_result x;
    /* Doubling brackets [r, 2r]; `iterations` halvings make it 2^-iterations of r wide. */
    plan_capacity_search(s, c, s->seed, c->replicas, 0, 2, ldexp(1.0, -iterations), NULL, &x);
    return x.unbounded ? INFINITY : x.rate;
}

int plan_min_replicas(const scn_scenario *s, const plan_cand *c, double rate, int max)
{
    sim_metrics m;
    int lo = 0, hi = 1;
    while (hi <= max && !plan_sustains(s, c, s->seed, rate, hi, &m)) { lo = hi; hi *= 2; }
    if (hi > max) {
        if (lo < max && plan_sustains(s, c, s->seed, rate, max, &m)) hi = max;
        else return 0;
    }
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (plan_sustains(s, c, s->seed, rate, mid, &m)) hi = mid; else lo = mid;
    }
    return hi;
}

long plan_max_context(const scn_scenario *s, const plan_cand *c, long concurrency)
{
    scn_scenario t;
    plan_apply(s, c, &t);
    kv_cache_cfg kc = kv_cache_cfg_make(&t, c->c.kv_dtype, c->c.sink, c->c.window);
    kv_capacity cap = kv_capacity_compute(&t, &kc, c->c.block_size, 0);
    if (cap.kv_budget <= 0 || concurrency < 1) return 0;
    /* No request may be longer than max_model_len, whatever memory is left over. */
    long limit = t.deployment.max_model_len > 0 ? t.deployment.max_model_len : t.model.max_position;
    if (limit <= 0) limit = 100000000L;
    double per = cap.kv_budget / (double)concurrency;
    if (kv_bytes_for_context(&t.model, &kc, t.deployment.tensor_parallel, limit) <= per) return limit;
    long lo = 0, hi = limit;
    while (hi - lo > 1) {
        long mid = lo + (hi - lo) / 2;
        if (kv_bytes_for_context(&t.model, &kc, t.deployment.tensor_parallel, mid) <= per) lo = mid; else hi = mid;
    }
    return lo;
}

int plan_capacity_rows(const scn_scenario *s, const plan_result *r, int top, double target, int max_replicas,
                       long concurrency, plan_capacity_row *rows, int max,
                       void (*progress)(void *ud, long done, long total), void *ud)
{
    int n = 0, ranked = 0;
    unsigned seen_hw = 0;   /* bit h+1: hardware h (or -1, the scenario's) already has a row */
    for (int k = 0; k < r->n && n < max; k++) {
        const plan_cand *x = &r->c[r->order[k]];
        if (x->status != PLAN_DONE || !x->allowed) continue;
        /* The best `top`, and the best of every other hardware profile (fewest GPUs across hardware). */
        unsigned bit = 1u << (x->hw + 1);
        if (ranked >= top && (seen_hw & bit)) continue;
        if (ranked < top) ranked++;
        seen_hw |= bit;
        plan_capacity_row *w = &rows[n++];
        w->cand = r->order[k];
        w->rate = x->rate;   /* plan_rank's: over seeds, widened by the search's resolution */
        w->unbounded = x->unbounded;
        w->rate_per_gpu = w->rate.mean / x->gpus;
        w->usd_per_mtok = x->usd_per_mtok;
        int reps = target > 0 ? plan_min_replicas(s, x, target, max_replicas) : 0;
        /* Colocated, the search scales replicas: each brings gpus/replicas GPUs. Disaggregated,
         * the pools are the scenario's as given (a replica count does not scale them): the
         * target is met on their GPUs or not at all. */
        if (s->deployment.disagg.on) w->gpus_for_target = reps > 0 ? (int)x->gpus : 0;
        else w->gpus_for_target = reps * (int)(x->gpus / (x->replicas > 0 ? x->replicas : 1));
        w->max_context = plan_max_context(s, x, concurrency);
        if (progress) progress(ud, n, max);
    }
    return n;
}

int plan_capacity_fewest(const plan_capacity_row *rows, int n)
{
    int best = -1;
    for (int i = 0; i < n; i++) {
        const plan_capacity_row *a = &rows[i];
        if (a->gpus_for_target <= 0) continue;
        /* An unbounded capacity has no rate to break a tie with; its GPU count still stands. */
        if (best < 0) { best = i; continue; }
        const plan_capacity_row *b = &rows[best];
        if (a->gpus_for_target != b->gpus_for_target) { if (a->gpus_for_target < b->gpus_for_target) best = i; continue; }
        /* Equal GPU counts: the cheaper per token, then the higher rate. */
        if (isfinite(a->usd_per_mtok) && isfinite(b->usd_per_mtok) && a->usd_per_mtok != b->usd_per_mtok) {
            if (a->usd_per_mtok < b->usd_per_mtok) best = i;
        } else if (a->rate.mean > b->rate.mean) best = i;
    }
    return best;
}
