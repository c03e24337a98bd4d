/* plan_bound.c: a provable upper bound on the rate a candidate's capacity search can return,
 * from the cost model and the seed's request stream without simulating, so that `plan` can
 * skip candidates that cannot beat the ones already evaluated. docs/planner.md, "Skipping
 * candidates that cannot win", gives the proof this code follows step by step. */
#include "plan.h"
#include "../model/kv_model.h"
#include "../model/kv_moe_parallel.h"
#include "../model/kv_spec.h"
#include "../sim/workload.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One seed's request stream at unit rate: arrival times scale as 1/rate (every gap of the
 * poisson, gamma and constant processes is a draw divided by the rate) and the lengths do not
 * depend on the rate, so the trial at any rate is a prefix of it. */
struct plan_bound_stream {
    unsigned long long seed;
    long n;                    /* requests generated */
    double *u;                 /* arrival at rate 1 (s) */
    int *prompt, *output, *shared;   /* tokens; shared: of the prompt, the shared prefix */
    /* Descending prefix sums over the whole stream (n + 1 entries): the K largest output
     * lengths, decode keys summed over a request's decode rows, and the tokens a request
     * computes at least without and with a prefix cache (prompt + output - 1, less the shared
     * prefix with the cache). */
    double *top_o, *top_keys, *top_tok, *top_tok_pc;
    double *o_sorted;          /* output lengths, descending (quantiles for the deadline slack) */
};

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Σ_{j=1}^{o-1} min(p + j, cap): the keys a request's decode rows attend (row j at context
 * p + j - 1 attends min(context + 1, cap)); cap 0: none. */
static double decode_keys(long p, long o, long cap)
{
    if (o <= 1) return 0;
    long n = o - 1;
    if (cap <= 0 || p + n <= cap) return (double)n * (double)p + (double)n * (double)(n + 1) / 2.0;
    if (p >= cap) return (double)n * (double)cap;
    long j0 = cap - p;   /* rows up to j0 are below the cap */
    return (double)j0 * (double)p + (double)j0 * (double)(j0 + 1) / 2.0 + (double)(n - j0) * (double)cap;
}

void plan_bound_stream_free(plan_bound_stream *b)
{
    if (!b) return;
    free(b->u); free(b->prompt); free(b->output); free(b->shared);
    free(b->top_o); free(b->top_keys); free(b->top_tok); free(b->top_tok_pc); free(b->o_sorted);
    free(b);
}

plan_bound_stream *plan_bound_stream_init(const scn_scenario *s, unsigned long long seed, long n)
{
    if (n < 1 || !scn_arrival_has_rate(s->workload.arrival)) return NULL;
    plan_bound_stream *b = calloc(1, sizeof *b);
    scn_scenario *g = malloc(sizeof *g);
    if (!b || !g) { free(b); free(g); return NULL; }
    *g = *s;
    g->workload.rate = 1;
    g->workload.requests = n;
    b->seed = seed;
    b->n = n;
    b->u = malloc(sizeof *b->u * (size_t)n);
    b->prompt = malloc(sizeof *b->prompt * (size_t)n);
    b->output = malloc(sizeof *b->output * (size_t)n);
    b->shared = malloc(sizeof *b->shared * (size_t)n);
    b->top_tok_pc = malloc(sizeof *b->top_tok_pc * (size_t)(n + 1));
    b->top_o = malloc(sizeof *b->top_o * (size_t)(n + 1));
    b->top_keys = malloc(sizeof *b->top_keys * (size_t)(n + 1));
    b->top_tok = malloc(sizeof *b->top_tok * (size_t)(n + 1));
    b->o_sorted = malloc(sizeof *b->o_sorted * (size_t)n);
    int noinput;
    char err[256];
    sim_workload *w = b->u && b->prompt && b->output && b->shared && b->top_o && b->top_keys && b->top_tok &&
                      b->top_tok_pc && b->o_sorted
                      ? sim_workload_init(g, seed, &noinput, err, sizeof err) : NULL;
    if (!w) { free(g); plan_bound_stream_free(b); return NULL; }
    /* The generator reads the scenario as it goes: g lives until it is freed. */
    for (long i = 0; i < n; i++) {
        sim_req_spec r;
        if (sim_workload_next(w, &r, err, sizeof err)) { sim_workload_free(w); free(g); plan_bound_stream_free(b); return NULL; }
        b->u[i] = r.arrival;
        /* A prompt too long for the context is refused on arrival (sim/workload.c, fit) and
         * costs the engine nothing: no work, which keeps the bound a bound. */
        b->prompt[i] = r.too_long ? 0 : r.prompt;
        b->output[i] = r.too_long ? 0 : r.output;
        b->shared[i] = r.prefix_group >= 0 && !r.too_long ? r.prefix_len : 0;
    }
    sim_workload_free(w);
    free(g);
    /* The sorted copies (top_* as scratch first, then their prefix sums in place). */
    double *cols[4] = {b->top_o, b->top_keys, b->top_tok, b->top_tok_pc};
    for (long i = 0; i < n; i++) {
        long p = b->prompt[i], o = b->output[i];
        b->top_o[i] = (double)o;
        b->top_keys[i] = decode_keys(p, o, 0);
        b->top_tok[i] = (double)(p + (o > 0 ? o - 1 : 0));
        b->top_tok_pc[i] = b->top_tok[i] - b->shared[i];
        b->o_sorted[i] = (double)o;
    }
    for (int k = 0; k < 4; k++) {
        qsort(cols[k], (size_t)n, sizeof *cols[k], cmp_desc);
        double acc = 0;
        for (long i = 0; i < n; i++) { double v = cols[k][i]; cols[k][i] = acc; acc += v; }
        cols[k][n] = acc;   /* cols[k][K] = the sum of the K largest */
    }
    qsort(b->o_sorted, (size_t)n, sizeof *b->o_sorted, cmp_desc);
    return b;
}

long plan_bound_stream_length(const plan_bound_stream *b) { return b ? b->n : 0; }

/* Per-request work coefficients of one candidate: a lower bound on the engine time any trial
 * spends on request i is o_i x per_o + keys_i x per_key + tok_i x per_tok (docs/planner.md,
 * "A lower bound on a step", for a chosen angle theta). */
typedef struct {
    double per_o, per_key, per_tok;
} work_coef;

typedef struct {
    double b1;                 /* bytes every step moves outside attention (weights), per rank */
    double bw;                 /* the model's bandwidth: memory_bandwidth x eff_bandwidth */
    double kv_tok;             /* bytes of one key + value per layer per rank */
    double layers[2];          /* global and sliding layers */
    long cap[2];               /* keys a layer of each kind holds at most; 0: no cap */
    double c_tok, c_row;       /* s of compute per token (GEMMs, norms) and per row (LM head), at peak */
    double fixed;              /* s every step costs whatever the batch: kernel boundaries, CPU */
    double cpu_row;            /* s of CPU per row (serial CPU only) */
    long rows;                 /* rows a step holds at most: max_num_seqs */
    bool prefix_cache;
} step_floor;

static work_coef coef_at(const step_floor *f, double theta)
{
    double c = cos(theta), sn = sin(theta);
    double per_step = c * f->b1 / f->bw + f->fixed;
    /* Attention's roofline is its own: its memory term counts whole, whatever theta is. */
    return (work_coef){per_step / (double)f->rows + f->cpu_row + sn * f->c_row, f->kv_tok / f->bw, sn * f->c_tok};
}

/* The step floor of candidate scenario t (every op priced as kv_step_shape prices one decode
 * row, which every step's ops equal or exceed). False when the model has no such floor here. */
static bool step_floor_of(const scn_scenario *t, const plan_cand *c, step_floor *f)
{
    const scn_model *m = &t->model;
    const scn_hardware *hw = &t->hardware;
    const scn_engine *e = &t->engine;
    memset(f, 0, sizeof *f);
    kv_cache_cfg kc = kv_cache_cfg_make(t, c->c.kv_dtype, c->c.sink, c->c.window);
    kv_seq_work one = {1, 0};
    kv_step_cost sh;
    kv_step_shape(t, NULL, &one, 1, &sh);
    f->bw = hw->memory_bandwidth * hw->eff_bandwidth;
    if (!(f->bw > 0) || !isfinite(f->bw)) return false;
    double kernels = 0;
    for (int op = 0; op < KV_OP_COUNT; op++) {
        if (op == KV_OP_ATTENTION || op == KV_OP_STEP) continue;
        f->b1 += sh.op[op].bytes;
        kernels += sh.op[op].kernels;
    }
    /* Attention's kernels a layer (kv_roofline.c attention()): cache write + kernel with
     * FlashAttention, five with the naive path, one more for MLA's kv_b GEMM. */
    double attn_k = (c->c.attention == SCN_ATTN_FLASH ? 2 : 5) + (m->kv_lora_rank > 0 ? 1 : 0);
    kernels += attn_k * m->layers;
    f->fixed = kernels * fmax(0, e->graph_kernel);
    if (!e->async_scheduling) {
        f->fixed += fmax(0, hw->step_overhead);
        f->cpu_row = fmax(0, e->seq_cpu);
    }
    /* The rates kv_step_shape divides by: its GEMMs' dtype and the LM head's bf16 at
     * kv_compute_rate, the norms at the fp32 rate. */
    double gpeak = kv_compute_rate(hw, sh.gemm_dtype);
    double fp32 = hw->flops[SCN_DTYPE_FP32] > 0 ? hw->flops[SCN_DTYPE_FP32] : gpeak / 8;
    double lpeak = kv_compute_rate(hw, SCN_DTYPE_BF16);
    if (gpeak > 0) f->c_tok += (sh.op[KV_OP_QKV].flops + sh.op[KV_OP_OUT_PROJ].flops + sh.op[KV_OP_MLP].flops) / gpeak;
    if (fp32 > 0) f->c_tok += sh.op[KV_OP_NORM].flops / fp32;
    if (lpeak > 0) f->c_row = sh.op[KV_OP_LM_HEAD].flops / lpeak;
    f->kv_tok = kv_bytes_per_token_layer_rank(m, &kc, t->deployment.tensor_parallel);
    f->layers[0] = m->layers - m->sliding_layers;
    f->layers[1] = m->sliding_layers;
    f->cap[0] = kv_decode_cap(t, &kc, 0);
    f->cap[1] = kv_decode_cap(t, &kc, 1);
    f->rows = t->deployment.max_num_seqs;
    f->prefix_cache = c->c.prefix_cache;
    return f->rows >= 1 && isfinite(f->b1) && isfinite(f->c_tok) && isfinite(f->kv_tok) && f->kv_tok >= 0;
}

double plan_bound_step_floor(const scn_scenario *s, const plan_cand *c, const kv_seq_work *rows, int n, double theta)
{
    scn_scenario *t = malloc(sizeof *t);
    if (!t) return NAN;
    plan_apply(s, c, t);
    step_floor f;
    double v = NAN;
    if (step_floor_of(t, c, &f)) {
        work_coef w = coef_at(&f, theta);
        /* coef_at spreads the per-step term over `rows` rows; a step of n rows pays it whole. */
        double per_step = cos(theta) * f.b1 / f.bw + f.fixed;
        v = per_step;
        for (int i = 0; i < n; i++) {
            long nt = rows[i].new_tokens, ctx = rows[i].context;
            v += f.cpu_row + sin(theta) * f.c_row + w.per_tok * (double)nt;
            if (nt == 1)   /* a decode row attends min(context + 1, cap) keys in each layer */
                for (int k = 0; k < 2; k++)
                    v += w.per_key * f.layers[k] * (double)(f.cap[k] > 0 && ctx + 1 > f.cap[k] ? f.cap[k] : ctx + 1);
        }
    }
    free(t);
    return v;
}

/* The SLO terms a trial that keeps up must meet, as deadlines: a request served within them
 * completes by arrival + min(e2e, ttft + (output - 1) x tpot), each limit widened by the
 * histograms' margin; `excl` counts per request how many may miss (filled by slo_excluded). */
typedef struct {
    bool e2e, ttft_tpot;
    double l_e2e, l_ttft, l_tpot;   /* s, widened */
    double q[3];                    /* quantiles read for ttft, tpot, e2e (0: term not used) */
} deadlines;

static bool deadlines_of(const scn_scenario *s, deadlines *d)
{
    memset(d, 0, sizeof *d);
    double margin = 1 + plan_slo_margin();
    double best_q[3] = {0, 0, 0}, lim[3] = {0, 0, 0};
    for (int i = 0; i < s->slo.n; i++) {
        const scn_slo_term *x = &s->slo.terms[i];
        int k = x->metric == SCN_METRIC_TTFT ? 0 : x->metric == SCN_METRIC_TPOT ? 1 : x->metric == SCN_METRIC_E2E ? 2 : -1;
        if (k < 0 || !(x->limit >= 0) || !isfinite(x->limit)) continue;
        double q = plan_slo_quantile(x->percentile);
        /* Of several terms on one metric, the one that lets the fewest requests miss. */
        if (q > best_q[k] || (q == best_q[k] && x->limit < lim[k])) { best_q[k] = q; lim[k] = x->limit; }
    }
    if (best_q[2] > 0) { d->e2e = true; d->l_e2e = lim[2] * margin; d->q[2] = best_q[2]; }
    if (best_q[0] > 0 && best_q[1] > 0) {
        d->ttft_tpot = true;
        d->l_ttft = lim[0] * margin;
        d->l_tpot = lim[1] * margin;
        d->q[0] = best_q[0];
        d->q[1] = best_q[1];
    }
    return d->e2e || d->ttft_tpot;
}

/* Requests of a trial of n that may miss the deadlines: per term, the values above its widened
 * limit number fewer than (1 - q) n + q when its quantile is within the limit, so at most
 * floor((1 - q) n + q) (the 1e-6 keeps a product that should be an integer from rounding
 * below it: a larger count is only more cautious). */
static long slo_excluded(const deadlines *d, long n)
{
    long k = 0;
    for (int i = 0; i < 3; i++)
        if (d->q[i] > 0) k += (long)floor((1 - d->q[i]) * (double)n + d->q[i] + 1e-6);
    return k;
}

static double slack_of(const deadlines *d, double o)
{
    double x = INFINITY;
    if (d->e2e) x = d->l_e2e;
    if (d->ttft_tpot) x = fmin(x, d->l_ttft + (o > 1 ? o - 1 : 0) * d->l_tpot);
    return x;
}

#define N_THETA 5
#define HALF_PI 1.5707963267948966
#define N_SLACK 6

/* True when no trial at a rate in [ra, rb] keeps up: the trial at any such rate holds at least the
 * first m requests of the stream and at most n_hi, all arriving no later than at ra; the requests
 * served within the SLO whose deadline is at most H need at least their work before H on
 * `engines` engines, and only slo_excluded(n_hi) may be missing from them. */
static bool interval_fails(const plan_bound_stream *b, const step_floor *f, const deadlines *d, int engines, double ra,
                           long m, long n_hi)
{
    long K = slo_excluded(d, n_hi);
    if (K >= m) return false;
    /* Arrival times at ra, rounded up: the engine sums gaps of draw / rate where this stream
     * sums draws at rate 1 (a relative difference below n x 2^-52). */
    const double up = 1 + 1e-9;
    double end = b->u[m - 1] / ra * up;
    /* Slacks: the deadlines of requests at a spread of output-length quantiles. */
    double slack[N_SLACK];
    const double qs[N_SLACK] = {0.5, 0.7, 0.85, 0.95, 0.99, 1.0};
    for (int j = 0; j < N_SLACK; j++) {
        long idx = (long)((1 - qs[j]) * (double)(b->n - 1));   /* o_sorted is descending */
        slack[j] = slack_of(d, b->o_sorted[idx]);
    }
    double so[N_SLACK] = {0}, sk[N_SLACK] = {0}, st[N_SLACK] = {0};
    for (long i = 0; i < m; i++) {
        double a = b->u[i] / ra * up, o = b->output[i];
        double di = a + slack_of(d, o);
        long p = b->prompt[i];
        double keys = f->layers[0] * decode_keys(p, (long)o, f->cap[0]) + f->layers[1] * decode_keys(p, (long)o, f->cap[1]);
        double tok = (double)p + (o > 0 ? o - 1 : 0) - (f->prefix_cache ? b->shared[i] : 0);
        for (int j = 0; j < N_SLACK; j++)
            if (di <= end + slack[j]) { so[j] += o; sk[j] += keys; st[j] += tok; }
    }
    double layers = f->layers[0] + f->layers[1];
    for (int t = 0; t < N_THETA; t++) {
        work_coef w = coef_at(f, HALF_PI * t / (N_THETA - 1));
        /* The K requests that may miss their deadline removed at their largest: the top-K sum of
         * a sum of terms is at most the sum of the terms' top-K sums, over the whole stream. */
        double excl = w.per_o * b->top_o[K] + w.per_key * layers * b->top_keys[K] + w.per_tok * (f->prefix_cache ? b->top_tok_pc[K] : b->top_tok[K]);
        for (int j = 0; j < N_SLACK; j++) {
            double need = w.per_o * so[j] + w.per_key * sk[j] + w.per_tok * st[j] - excl;
            if (need > engines * (end + slack[j])) return true;
        }
    }
    return false;
}

/* The first rate of the search's upward gallop from `base` (strides f0, f0^2, f0^4, ...: each the
 * previous squared; points clamped to `top`) at or above x; 0 when the gallop stops below x. */
static double first_reach(double base, double f0, double top, double x)
{
    if (!(base > 0)) return 0;
    double p = base, f = f0;
    for (int i = 0; i < 200 && p < x; i++) {
        if (p >= top) return 0;
        p = fmin(p * f, top);
        f *= f;
    }
    return p >= x ? p : 0;
}

int plan_bound_below(const scn_scenario *s, const plan_cand *c, plan_bound_stream **bp, double x, char *why,
                     size_t nwhy)
{
    /* The first seed's search: from the cost model's saturation rate in strides of
     * PLAN_CAPACITY_FIRST_STEP, knowing the offered-load run when it is trial-sized. */
    return plan_bound_below_search(s, c, s->seed, plan_capacity_hint(s, c, c->replicas), PLAN_CAPACITY_FIRST_STEP,
                                   s->workload.rate, bp, x, why, nwhy);
}

/* 1 when no trial of candidate c on `seed` at a rate in [x, P] keeps up (0: not shown; -1: out of
 * memory); why says so. */
static int range_fails(const scn_scenario *s, const plan_cand *c, unsigned long long seed, double x, double P,
                       plan_bound_stream **bp, char *why, size_t nwhy)
{
    const scn_workload *wl = &s->workload;
    /* The cases the proof covers (docs/planner.md): an open-loop rate the search scales, single
     * requests (no conversations, whose later turns arrive after earlier replies), no measured
     * window, and an engine whose every step gives each row at most one token and is priced by
     * kv_step_complete. */
    if (!scn_arrival_has_rate(wl->arrival) || wl->turns > 1 || wl->skip_first || wl->skip_last ||
        wl->skip_first_frac > 0 || wl->skip_last_frac > 0 || !(x > 0) || !(P >= x) || !isfinite(P))
        return 0;
    if (kv_spec_get(s, c->c.spec) || s->deployment.disagg.on) return 0;
    scn_scenario *t = malloc(sizeof *t);
    if (!t) return -1;
    plan_apply(s, c, t);
    int rc = 0;
    step_floor f;
    deadlines d;
    if (kv_moe_parallel_on(t) || t->deployment.attention_dp > 1 || t->deployment.scheduler_steps > 1 ||
        t->engine.extra_decode_step || t->deployment.max_model_len != s->deployment.max_model_len ||
        t->model.max_position != s->model.max_position || !step_floor_of(t, c, &f) || !deadlines_of(s, &d))
        goto out;
    int engines = t->deployment.replicas > 0 ? t->deployment.replicas : 1;
    long base = plan_trial_base(t, &c->c);
    long n_top = plan_trial_requests_at(base, P, wl->turns);
    /* No request is ever turned away while the trial's requests fit the waiting queue (a
     * replica's, deployment.max_queued_requests when the scenario bounds it). */
    if (n_top > sim_max_waiting(t, NULL, engines)) goto out;
    if (!*bp || (*bp)->n < n_top || (*bp)->seed != seed) {
        long want = n_top * 2 > 4096 ? n_top * 2 : 4096;
        plan_bound_stream *nb = plan_bound_stream_init(s, seed, want);
        if (!nb) { rc = -1; goto out; }
        plan_bound_stream_free(*bp);
        *bp = nb;
    }
    /* [x, P] in pieces: one where the trial size does not change; else a doubling first (far
     * above capacity a piece fails by a wide margin), and where that cannot be shown, 5 % (the
     * SLO's allowance grows with the trial's size across a piece). */
    double ra = x;
    for (int guard = 0; guard < 4096; guard++) {
        long m = plan_trial_requests_at(base, ra, wl->turns);
        double rb = plan_trial_requests_at(base, P, wl->turns) == m ? P : fmin(P, ra * 2);
        if (!interval_fails(*bp, &f, &d, engines, ra, m, plan_trial_requests_at(base, rb, wl->turns))) {
            if (rb <= ra * 1.05) goto out;
            rb = fmin(P, ra * 1.05);
            if (!interval_fails(*bp, &f, &d, engines, ra, m, plan_trial_requests_at(base, rb, wl->turns))) goto out;
        }
        if (rb >= P) {
            if (why) snprintf(why, nwhy, "the cost model's step floor and its SLO bound its capacity below %.4g %s", x,
                              plan_rate_unit(s));
            rc = 1;
            goto out;
        }
        ra = rb;
    }
out:
    free(t);
    return rc;
}

int plan_bound_below_search(const scn_scenario *s, const plan_cand *c, unsigned long long seed, double start,
                            double step, double known, plan_bound_stream **bp, double x, char *why, size_t nwhy)
{
    if (why && nwhy) why[0] = 0;
    if (!(x > 0) || !(start > 0) || !(step > 1)) return 0;
    /* Every rate the search can try at or above x lies in [x, P] (docs/planner.md, "What the
     * search can return"): its start h, the offered rate r_o (a trial it may know), and the
     * first point at or above x of the upward gallops from either. */
    double h = start, ro = known > 0 ? known : 0, top = h * PLAN_CAPACITY_RANGE;
    double P = 0;
    if (h >= x) P = fmax(P, h);
    if (ro >= x) P = fmax(P, ro);
    P = fmax(P, first_reach(h, step, top, x));
    P = fmax(P, first_reach(ro, step, top, x));
    if (P < x) {   /* no trial reaches x: the answer is below it */
        if (why) snprintf(why, nwhy, "its rate search cannot reach %.4g %s", x, plan_rate_unit(s));
        return 1;
    }
    return range_fails(s, c, seed, x, P, bp, why, nwhy);
}

int plan_bound_below_later(const scn_scenario *s, const plan_cand *c, unsigned long long seed, plan_bound_stream **bp,
                           double x, char *why, size_t nwhy)
{
    if (why && nwhy) why[0] = 0;
    /* A later seed's search starts at the first seed's answer a (below x here), or at a rate
     * below it when that seed found none or was unbounded, with a first stride f of 1.0299 or 2,
     * and gallops up to at most 1,024 a. Its first point at or above x, from a point below x, is
     * below f x^2 / a and at most 1,024 a: below sqrt(1024 f) x, whatever a is. */
    double reach = sqrt(PLAN_CAPACITY_RANGE * 2.0) * x;
    return range_fails(s, c, seed, x, reach, bp, why, nwhy);
}
