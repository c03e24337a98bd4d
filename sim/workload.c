/* workload.c: generates the request stream (see workload.h). */
#define _XOPEN_SOURCE 700
#include "workload.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct { int *len; double *cdf; int n; } empirical;

struct sim_workload {
    const scn_scenario *s;
    sim_rng arr, len, pick;      /* separate streams, so changing one draw keeps the others */
    uint64_t seed;
    long created;                /* requests handed out, turns included */
    long conversations;          /* conversations started */
    long clients;                /* closed: clients that have sent their first request */
    long total;                  /* requests in all; -1 for traces */
    double clock;                /* last arrival time */
    double *zipf_cdf;            /* prefix group popularity */
    empirical emp[2];            /* 0: prompt, 1: output */
    const scn_dist *dist[2];     /* the scenario's prompt and output distributions */
    double mu[2];                /* their lognormal mu, computed once (the same double every draw) */
    double rate[2];              /* their exponential rate, solved once */
    FILE *trace;
    const char *trace_path;
    long trace_line;
    uint64_t tag_mix[7];         /* sim_mix64(seed ^ (tag << 56)), stream_seed's first half, per tag */
    long m_total, m_first, m_last;   /* measured_of's bounds, for the total they were computed at */
};

static uint64_t stream_seed(uint64_t seed, uint64_t tag, uint64_t id)
{
    return sim_mix64(sim_mix64(seed ^ (tag << 56)) ^ id);
}

/* stream_seed(w->seed, tag, id) with its first half computed once (the same value). */
static uint64_t stream_seed_of(const sim_workload *w, uint64_t tag, uint64_t id)
{
    return sim_mix64(w->tag_mix[tag] ^ id);
}

/* Reads "tokens[,weight]" lines; '#' starts a comment, a non-numeric first line is a header. */
static int load_empirical(empirical *e, const char *path, int *noinput, char *err, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f) { *noinput = 1; snprintf(err, n, "%s: cannot open: %s", path, strerror(errno)); return -1; }
    char line[256];
    long ln = 0;
    double total = 0;
    int cap = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '#' || *p == '\n' || *p == 0) continue;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p) {
            if (ln == 1) continue;   /* header */
            snprintf(err, n, "%s:%ld:1: expected a token count, found '%.40s'", path, ln, p);
            goto fail;
        }
        double w = 1;
        while (*end == ' ' || *end == '\t') end++;
        if (*end == ',') {
            char *wend;
            w = strtod(end + 1, &wend);
            if (wend == end + 1 || !(w >= 0) || !isfinite(w)) {
                snprintf(err, n, "%s:%ld:%ld: expected a weight >= 0", path, ln, (long)(end + 2 - line));
                goto fail;
            }
            end = wend;
        }
        while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n') end++;
        if (*end || v < 1 || v > 100000000 || errno) {
            snprintf(err, n, "%s:%ld:1: expected a whole token count >= 1 and an optional weight", path, ln);
            goto fail;
        }
        if (e->n == cap) {
            cap = cap ? cap * 2 : 64;
            int *nl = realloc(e->len, sizeof(int) * (size_t)cap);
            double *nc = realloc(e->cdf, sizeof(double) * (size_t)cap);
            if (nl) e->len = nl;
            if (nc) e->cdf = nc;
            if (!nl || !nc) { snprintf(err, n, "out of memory"); goto fail; }
        }
        total += w;
        e->len[e->n] = (int)v;
        e->cdf[e->n++] = total;
    }
    fclose(f);
    if (e->n == 0 || total <= 0) { snprintf(err, n, "%s: no lengths with positive weight", path); return -1; }
    for (int i = 0; i < e->n; i++) e->cdf[i] /= total;
    return 0;
fail:
    fclose(f);
    return -1;
}

/* `mean` is a lognormal's mean, so mu = ln(mean) - sigma^2 / 2. */
static double lognormal_mu(const scn_dist *d)
{
    return d->kind == SCN_DIST_LOGNORMAL ? log(d->mean) - d->sigma * d->sigma / 2 : 0;
}

/* The mean of an exponential law of rate lam (per token; any sign, 0 = uniform) truncated to
 * [0, len]: 1/lam - len/(e^(lam len) - 1), written with expm1 so that small |lam len| keeps its
 * digits. It falls monotonically from len (lam -> -inf) through len/2 (lam = 0) to 0. */
static double trunc_exp_mean(double lam, double len)
{
    double x = lam * len;
    if (fabs(x) < 1e-6) return len / 2 - lam * len * len / 12;   /* series: len/2 - lam len^2/12 */
    return 1 / lam - len / expm1(x);
}

/* The rate of the maximum-entropy law on [min - 0.5, max + 0.5] whose mean is d->mean
 * (docs/scenarios.md "Length distributions"). Draws are rounded to whole tokens, so the half-token
 * margins make each whole length own an equal-width bin and keep the rounded mean on d->mean.
 * Unbounded (max 0): a shifted exponential, rate 1 / (mean - (min - 0.5)). Bounded: bisection on
 * the monotone mean; 200 halvings of [-1e3, 1e3]/len reach the double's resolution. */
static double exponential_rate(const scn_dist *d)
{
    if (d->kind != SCN_DIST_EXPONENTIAL) return 0;
    double lo = d->min - 0.5, target = d->mean - lo;
    if (d->max <= 0) return 1 / target;
    double len = d->max + 0.5 - lo, a = -1e3 / len, b = 1e3 / len;
    for (int i = 0; i < 200; i++) {
        double m = (a + b) / 2;
        if (trunc_exp_mean(m, len) > target) a = m; else b = m;
    }
    return (a + b) / 2;
}

/* Inverse CDF of that law at u in [0, 1): the offset above min - 0.5. */
static double exponential_offset(double lam, double len, double u)
{
    if (len <= 0) return -log1p(-u) / lam;                   /* unbounded */
    double x = lam * len;
    if (fabs(x) < 1e-9) return u * len;                      /* uniform limit */
    return -log1p(u * expm1(-x)) / lam;
}

sim_workload *sim_workload_init(const scn_scenario *s, uint64_t seed, int *noinput, char *err, size_t n)
{
    *noinput = 0;
    sim_workload *w = calloc(1, sizeof *w);
    if (!w) { snprintf(err, n, "out of memory"); return NULL; }
    const scn_workload *wl = &s->workload;
    w->s = s;
    w->seed = seed;
    sim_rng_seed(&w->arr, stream_seed(seed, 1, 0));
    sim_rng_seed(&w->len, stream_seed(seed, 2, 0));
    sim_rng_seed(&w->pick, stream_seed(seed, 3, 0));
    for (uint64_t t = 0; t < 7; t++) w->tag_mix[t] = sim_mix64(seed ^ (t << 56));
    w->m_total = -2;   /* no bounds yet (a total is >= -1) */
    w->total = wl->arrival == SCN_ARRIVAL_TRACE ? -1 : wl->requests;
    if (wl->prefix_groups > 0) {
        w->zipf_cdf = malloc(sizeof(double) * (size_t)wl->prefix_groups);
        if (!w->zipf_cdf) { snprintf(err, n, "out of memory"); goto fail; }
        double acc = 0;
        for (int g = 0; g < wl->prefix_groups; g++) {
            acc += wl->prefix_zipf > 0 ? pow(g + 1.0, -wl->prefix_zipf) : 1.0;
            w->zipf_cdf[g] = acc;
        }
        for (int g = 0; g < wl->prefix_groups; g++) w->zipf_cdf[g] /= acc;
    }
    const scn_dist *d[2] = {&wl->prompt, &wl->output};
    for (int i = 0; i < 2; i++) {
        w->dist[i] = d[i];
        w->mu[i] = lognormal_mu(d[i]);
        w->rate[i] = exponential_rate(d[i]);
    }
    for (int i = 0; i < 2; i++)
        if (wl->arrival != SCN_ARRIVAL_TRACE && d[i]->kind == SCN_DIST_EMPIRICAL &&
            load_empirical(&w->emp[i], d[i]->file, noinput, err, n))
            goto fail;
    if (wl->arrival == SCN_ARRIVAL_TRACE) {
        w->trace_path = wl->trace;
        struct stat sb;
        if (stat(wl->trace, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            *noinput = 1;
            snprintf(err, n, "%s: is a directory, not a trace file", wl->trace);
            goto fail;
        }
        w->trace = fopen(wl->trace, "r");
        if (!w->trace) { *noinput = 1; snprintf(err, n, "%s: cannot open: %s", wl->trace, strerror(errno)); goto fail; }
    }
    return w;
fail:
    sim_workload_free(w);
    return NULL;
}

void sim_workload_free(sim_workload *w)
{
    if (!w) return;
    for (int i = 0; i < 2; i++) { free(w->emp[i].len); free(w->emp[i].cdf); }
    free(w->zipf_cdf);
    if (w->trace) fclose(w->trace);
    free(w);
}

long sim_workload_total(const sim_workload *w) { return w->total; }
long sim_workload_unsent(const sim_workload *w) { return w->total >= 0 ? w->s->workload.requests - w->total : 0; }

/* lround(v), the same value: below 2^52 in magnitude by truncation and the fraction (both exact;
 * halves round away from zero), without the library call a length draw would pay; beyond, and
 * for NaN and infinities, lround itself. */
static long round_len(double v)
{
    if (!(fabs(v) < 0x1p52)) return lround(v);
    long x = (long)v;
    double f = v - (double)x;   /* exact: the fraction of a double */
    return f >= 0.5 ? x + 1 : f <= -0.5 ? x - 1 : x;
}

static int clamp_len(double v, const scn_dist *d)
{
    long x = round_len(v);
    if (x < d->min) x = d->min;
    if (x < 1) x = 1;
    if (d->max > 0 && x > d->max) x = d->max;
    return (int)x;
}

int sim_workload_draw(sim_workload *w, const scn_dist *d, int which)
{
    sim_rng *r = &w->len;
    switch (d->kind) {
    case SCN_DIST_FIXED: return (int)d->mean;
    case SCN_DIST_UNIFORM: return d->min + (int)(sim_rng_uniform(r) * (d->max - d->min + 1));
    case SCN_DIST_NORMAL: return clamp_len(d->mean + d->sigma * sim_rng_normal(r), d);
    case SCN_DIST_LOGNORMAL: {
        double mu = which >= 0 && which < 2 && d == w->dist[which] ? w->mu[which] : lognormal_mu(d);
        return clamp_len(exp(mu + d->sigma * sim_rng_normal(r)), d);
    }
    case SCN_DIST_EXPONENTIAL: {
        double lam = which >= 0 && which < 2 && d == w->dist[which] ? w->rate[which] : exponential_rate(d);
        double len = d->max > 0 ? d->max - d->min + 1.0 : 0;
        return clamp_len(d->min - 0.5 + exponential_offset(lam, len, sim_rng_uniform(r)), d);
    }
    case SCN_DIST_EMPIRICAL: {
        const empirical *e = &w->emp[which];
        double u = sim_rng_uniform(r);
        int lo = 0, hi = e->n - 1;
        while (lo < hi) { int mid = (lo + hi) / 2; if (e->cdf[mid] > u) hi = mid; else lo = mid + 1; }
        return e->len[lo];
    }
    }
    return 1;
}

static int pick_group(sim_workload *w)
{
    const scn_workload *wl = &w->s->workload;
    if (wl->prefix_groups <= 0 || sim_rng_uniform(&w->pick) >= wl->prefix_share) return -1;
    double u = sim_rng_uniform(&w->pick);
    int lo = 0, hi = wl->prefix_groups - 1;
    while (lo < hi) { int mid = (lo + hi) / 2; if (w->zipf_cdf[mid] > u) hi = mid; else lo = mid + 1; }
    return lo;
}

bool sim_workload_measured(const sim_workload *w, const sim_req_spec *r);

/* sim_workload_measured, with the window's bounds kept until the total changes (a conversation
 * that outgrows the context shrinks it). */
static bool measured_of(sim_workload *w, const sim_req_spec *r)
{
    const scn_workload *wl = &w->s->workload;
    /* A window cut by time is applied to every completion at the end (sim/metrics.c). */
    if (wl->measure_by_time) return true;
    long total = w->total >= 0 ? w->total : wl->requests;
    if (total != w->m_total) {
        w->m_total = total;
        w->m_first = wl->skip_first + (long)floor(wl->skip_first_frac * (double)total);
        w->m_last = wl->skip_last + (long)floor(wl->skip_last_frac * (double)total);
    }
    if (r->id < w->m_first) return false;
    return w->total < 0 || r->id < w->total - w->m_last;
}

static int max_len(const sim_workload *w) { return w->s->deployment.max_model_len; }

/* Fits a request to max_model_len as engines do. A prompt that leaves no room for one output
 * token is not trimmed but marked too_long: vLLM's input validation refuses it ("The decoder
 * prompt (length N) is longer than the maximum model length of M"), SGLang refuses it unless
 * --allow-auto-truncate is set, and TensorRT-LLM fails it; the engine counts it instead of
 * serving it (docs/simulator.md, "Workload"). So is a request whose client sent max_tokens (its
 * output length, workload.max_tokens: output) when prompt + max_tokens exceeds max_model_len:
 * vLLM's server ("'max_tokens' or 'max_completion_tokens' is too large"), SGLang ("Requested
 * token count exceeds the model's maximum context length") and TensorRT-LLM ("The sum of prompt
 * length ... and max_tokens ... should not exceed max_seq_len") all refuse it. Otherwise a prompt
 * that fits keeps its length and its output is cut at max_model_len, where the engine stops
 * generating (a "length" finish). */
static void fit(const sim_workload *w, sim_req_spec *r)
{
    int lim = max_len(w);
    r->too_long = r->prompt >= lim || (w->s->workload.max_tokens_sent && r->prompt + r->output > lim);
    if (r->prefix_len > r->prompt - 1) r->prefix_len = r->prompt - 1 > 0 ? r->prompt - 1 : 0;
    if (!r->too_long && r->prompt + r->output > lim) r->output = lim - r->prompt;
}

/* Reads one whole-number field after a comma; 0 on success. */
static int trace_field(char **p, long *out)
{
    char *q = *p;
    while (*q == ' ' || *q == '\t') q++;
    if (*q != ',') return -1;
    q++;
    char *end;
    errno = 0;
    long v = strtol(q, &end, 10);
    if (end == q || errno) return -1;
    *out = v;
    *p = end;
    return 0;
}

static int next_trace(sim_workload *w, sim_req_spec *out, char *err, size_t n)
{
    char line[512];
    for (;;) {
        if (!fgets(line, sizeof line, w->trace)) {
            /* The end of the file, a read error (a directory reads as EISDIR), or no requests at
             * all: only the first is a finished trace. */
            if (ferror(w->trace)) {
                snprintf(err, n, "%s: cannot read: %s", w->trace_path, strerror(errno ? errno : EIO));
                return -1;
            }
            if (w->created == 0) {
                snprintf(err, n, "%s: the trace holds no requests", w->trace_path);
                return -1;
            }
            return 1;
        }
        w->trace_line++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n' && !feof(w->trace)) {
            snprintf(err, n, "%s:%ld: line longer than %zu characters", w->trace_path, w->trace_line, sizeof line - 2);
            return -1;
        }
        char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '#' || *p == '\n' || *p == '\r' || !*p) continue;
        double t;
        long prompt = 0, output = 0, prefix = -1, conv = -1;
        char *end;
        t = strtod(p, &end);
        if (end == p) {
            if (w->trace_line == 1) continue;   /* header */
            snprintf(err, n, "%s:%ld:1: expected an arrival time in seconds", w->trace_path, w->trace_line);
            return -1;
        }
        int got = 0;
        if (!trace_field(&end, &prompt)) got++;
        if (got == 1 && !trace_field(&end, &output)) got++;
        if (got == 2 && !trace_field(&end, &prefix)) got++;
        if (got == 3 && !trace_field(&end, &conv)) got++;
        while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n') end++;
        if (got < 2 || *end || !(t >= 0) || !isfinite(t) || prompt < 1 || output < 1) {
            snprintf(err, n, "%s:%ld: expected 'arrival_s,prompt_tokens,output_tokens[,prefix_id[,conversation_id]]' "
                             "with finite times >= 0 and counts >= 1", w->trace_path, w->trace_line);
            return -1;
        }
        if (t < w->clock) {
            snprintf(err, n, "%s:%ld:1: arrival %.6g s is before the previous line's %.6g s; sort the trace",
                     w->trace_path, w->trace_line, t, w->clock);
            return -1;
        }
        const scn_workload *wl = &w->s->workload;
        memset(out, 0, sizeof *out);
        out->id = w->created++;
        out->arrival = w->clock = t;
        out->prompt = (int)(prompt > 1000000000 ? 1000000000 : prompt);
        out->output = (int)(output > 1000000000 ? 1000000000 : output);
        out->prefix_group = got >= 3 && prefix >= 0 ? (int)(prefix % 1000000007) : -1;
        out->prefix_len = out->prefix_group >= 0 ? (wl->prefix_tokens ? wl->prefix_tokens : 0) : 0;
        if (out->prefix_len > out->prompt) out->prefix_len = out->prompt;
        out->prefix_seed = stream_seed_of(w, 4, (uint64_t)out->prefix_group);
        out->conversation = got >= 4 && conv >= 0 ? conv : -1;
        out->body_seed = out->conversation >= 0 ? stream_seed_of(w, 5, (uint64_t)conv)
                                                : stream_seed_of(w, 6, (uint64_t)out->id);
        fit(w, out);
        out->measured = measured_of(w, out);
        return 0;
    }
}

static long conv_total(const scn_workload *wl)
{
    int turns = wl->turns > 0 ? wl->turns : 1;
    return (wl->requests + turns - 1) / turns;
}

/* The first turn of the next conversation, sent at `at` seconds. */
static void first_turn(sim_workload *w, double at, sim_req_spec *out)
{
    const scn_workload *wl = &w->s->workload;
    int turns = wl->turns > 0 ? wl->turns : 1;
    long c = w->conversations++;
    memset(out, 0, sizeof *out);
    out->id = w->created++;
    out->arrival = at;
    out->prefix_group = pick_group(w);
    out->prefix_len = out->prefix_group >= 0 ? wl->prefix_tokens : 0;
    out->prefix_seed = stream_seed_of(w, 4, (uint64_t)(out->prefix_group >= 0 ? out->prefix_group : 0));
    out->prompt = out->prefix_len + sim_workload_draw(w, &wl->prompt, 0);
    out->output = sim_workload_draw(w, &wl->output, 1);
    long turns_here = wl->requests - c * turns < turns ? wl->requests - c * turns : turns;
    out->conversation = turns > 1 ? c : -1;
    out->turns_left = (int)turns_here - 1;
    out->body_seed = turns > 1 ? stream_seed_of(w, 5, (uint64_t)c) : stream_seed_of(w, 6, (uint64_t)out->id);
    fit(w, out);
    out->measured = measured_of(w, out);
}

int sim_workload_next(sim_workload *w, sim_req_spec *out, char *err, size_t n)
{
    const scn_workload *wl = &w->s->workload;
    if (wl->arrival == SCN_ARRIVAL_TRACE) return next_trace(w, out, err, n);
    if (w->conversations >= conv_total(wl)) return 1;
    double gap;
    switch (wl->arrival) {
    case SCN_ARRIVAL_CLOSED:
        /* Every client sends its first request at t = 0, as benchmark clients start; later
         * requests come from completions (sim_workload_next_turn). */
        if (w->clients >= wl->concurrency) return 1;
        w->clients++;
        gap = 0;
        break;
    case SCN_ARRIVAL_OFFLINE: gap = 0; break;
    case SCN_ARRIVAL_CONSTANT: gap = 1 / wl->rate; break;
    case SCN_ARRIVAL_GAMMA: {
        /* Inter-arrival times with mean 1/rate and coefficient of variation cv: shape 1/cv^2. */
        double k = 1 / (wl->cv * wl->cv);
        gap = sim_rng_gamma(&w->arr, k) / (k * wl->rate);
        break;
    }
    default: gap = sim_rng_exp(&w->arr, wl->rate); break;
    }
    /* The first request arrives at t = 0 for constant arrivals, after one gap otherwise. */
    w->clock = w->conversations == 0 && wl->arrival == SCN_ARRIVAL_CONSTANT ? 0 : w->clock + gap;
    first_turn(w, w->clock, out);
    return 0;
}

/* Closed loop: the client whose request just finished sends a new conversation after its
 * think time, while the workload has requests left to send. */
static int closed_next(sim_workload *w, double now, sim_req_spec *out)
{
    const scn_workload *wl = &w->s->workload;
    if (wl->arrival != SCN_ARRIVAL_CLOSED || w->conversations >= conv_total(wl)) return 1;
    first_turn(w, now + wl->client_think_time, out);
    return 0;
}

int sim_workload_next_rejected(sim_workload *w, const sim_req_spec *r, double now, sim_req_spec *out)
{
    /* The total shrinks by the turns never sent, as for a conversation that outgrows the context
     * (sim_workload_next_turn); a trace's requests have no turns left. */
    if (r->turns_left > 0 && w->total >= 0) w->total -= r->turns_left;
    return closed_next(w, now, out);
}

bool sim_workload_measured(const sim_workload *w, const sim_req_spec *r)
{
    const scn_workload *wl = &w->s->workload;
    if (wl->measure_by_time) return true;
    long total = w->total >= 0 ? w->total : wl->requests;
    long first = wl->skip_first + (long)floor(wl->skip_first_frac * (double)total);
    long last = wl->skip_last + (long)floor(wl->skip_last_frac * (double)total);
    if (r->id < first) return false;
    return w->total < 0 || r->id < w->total - last;
}

int sim_workload_next_turn(sim_workload *w, const sim_req_spec *prev, double now, sim_req_spec *out)
{
    const scn_workload *wl = &w->s->workload;
    if (prev->turns_left <= 0) return closed_next(w, now, out);
    *out = *prev;
    out->id = w->created++;
    out->arrival = now + wl->think_time;
    out->turn = prev->turn + 1;
    out->turns_left = prev->turns_left - 1;
    long prompt = (long)prev->prompt + prev->output + sim_workload_draw(w, &wl->prompt, 0);
    out->output = sim_workload_draw(w, &wl->output, 1);
    if (prompt + out->output > max_len(w)) {
        /* The conversation no longer fits the context: it ends, and its remaining turns are
         * not sent (the total shrinks accordingly). */
        w->created--;
        w->total -= prev->turns_left;
        return closed_next(w, now, out);
    }
    out->prompt = (int)prompt;
    out->measured = measured_of(w, out);
    return 0;
}
