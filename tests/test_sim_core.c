/* test_sim_core.c: the event heap against a sorted reference, histogram quantiles against exact
 * order statistics, and the workload's distributions against their defining moments. */
#include "tests.h"
#include "../sim/heap.h"
#include "../sim/hist.h"
#include "../sim/rng.h"
#include "../sim/workload.h"
#include "../sim/sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(heap_orders_by_time_then_push_order)
{
    sim_heap h;
    sim_heap_init(&h);
    enum { N = 2000 };
    static sim_event ev[N];
    sim_rng r;
    sim_rng_seed(&r, 42);
    for (int i = 0; i < N; i++) {
        ev[i].kind = i;
        ev[i].idx = -1;
        /* Coarse times force many ties. */
        ck_assert_int_eq(sim_heap_push(&h, &ev[i], (double)(sim_rng_next(&r) % 50)), 0);
    }
    /* Remove a few from the middle; they must never come out. */
    for (int i = 0; i < N; i += 97) sim_heap_remove(&h, &ev[i]);
    double last_t = -1;
    int last_kind = -1, out = 0;
    sim_event *e;
    while ((e = sim_heap_pop(&h))) {
        ck_assert_msg(e->kind % 97 != 0, "removed event %d popped", e->kind);
        ck_assert(e->t > last_t || (e->t == last_t && e->kind > last_kind));
        last_t = e->t;
        last_kind = e->kind;
        out++;
    }
    ck_assert_int_eq(out, N - (N + 96) / 97);
    sim_heap_free(&h);
}
END_TEST

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The quantile as hist.h describes it, walking every bucket from the first: 2048 linear buckets
 * per power of two from 2^-31 s, bucket i's lower edge (1 + (i % 2048) / 2048) * 2^(i / 2048 - 31),
 * the rank interpolated within its bucket and clamped to [min, max]. */
static double plain_walk(const sim_hist *h, double q)
{
    if (q <= 0) return h->min;
    if (q >= 1) return h->max;
    double target = q * (double)(h->count - 1), seen = (double)h->zeros;
    if (target < seen) return h->min;
    for (long i = 0; i < 52L * 2048; i++) {
        uint32_t c = sim_hist_bucket_count(h, i);
        if (seen + c > target) {
            double lo = ldexp(1.0 + (double)(i % 2048) / 2048, (int)(i / 2048) - 31);
            double hi = ldexp(1.0 + (double)((i + 1) % 2048) / 2048, (int)((i + 1) / 2048) - 31);
            double v = lo + (hi - lo) * (target - seen + 0.5) / c;
            return v < h->min ? h->min : v > h->max ? h->max : v;
        }
        seen += c;
    }
    return h->max;
}

START_TEST(histogram_quantiles_within_resolution)
{
    sim_hist h;
    ck_assert_int_eq(sim_hist_init(&h), 0);
    enum { N = 20001 };
    static double v[N];
    sim_rng r;
    sim_rng_seed(&r, 7);
    for (int i = 0; i < N; i++) {
        v[i] = exp(-6 + 8 * sim_rng_uniform(&r));   /* 2.5 ms to 7 s, log-uniform */
        sim_hist_add(&h, v[i]);
    }
    qsort(v, N, sizeof v[0], cmp_d);
    double qs[] = {0.5, 0.9, 0.95, 0.99};
    for (int i = 0; i < 4; i++) {
        double exact = v[(int)(qs[i] * (N - 1))];
        double got = sim_hist_quantile(&h, qs[i]);
        ck_assert_msg(fabs(got / exact - 1) < 2 * sim_hist_resolution() + 1e-3, "q%.2f %.9g vs %.9g", qs[i], got, exact);
    }
    ck_assert(sim_hist_quantile(&h, 1.0) == v[N - 1]);
    ck_assert(sim_hist_quantile(&h, 0.0) == v[0]);
    /* One walk for many quantiles (the metrics' summary, skipping empty powers of two) gives
     * what a plain walk over every bucket gives, bit for bit, the extremes and repeated
     * quantiles included. */
    double many[] = {0, 1e-9, 0.25, 0.5, 0.5, 0.9, 0.95, 0.99, 0.999999, 1};
    double got[10];
    sim_hist_quantiles(&h, many, 10, got);
    for (int i = 0; i < 10; i++) {
        ck_assert_msg(got[i] == plain_walk(&h, many[i]), "q%g: %.17g vs %.17g", many[i], got[i], plain_walk(&h, many[i]));
        ck_assert(sim_hist_quantile(&h, many[i]) == got[i]);
    }
    /* Two clusters far apart (empty powers of two between them) and a value in the last bucket. */
    sim_hist w;
    ck_assert_int_eq(sim_hist_init(&w), 0);
    for (int i = 0; i < 300; i++) sim_hist_add(&w, 1e-6 * (1 + i % 13));
    sim_hist_add_n(&w, 3.0, 500);
    sim_hist_add(&w, 1e9);
    double mid[] = {0.1, 0.37, 0.375, 0.38, 0.5, 0.998, 0.9999};
    double gm[7];
    sim_hist_quantiles(&w, mid, 7, gm);
    for (int i = 0; i < 7; i++) ck_assert_msg(gm[i] == plain_walk(&w, mid[i]), "clusters q%g", mid[i]);
    sim_hist_free(&w);
    sim_hist_free(&h);
}
END_TEST

/* The histogram's sum is exact on the 2^-64 s grid: values on a coarser grid (multiples of
 * 2^-20 s) sum to exactly their integer sum, computed by hand in 64-bit integers; any values
 * give the same bits in any order and grouping (reversed, and in runs through sim_hist_add_n),
 * which is what lets the fast-forward record a step's gaps in one call. */
START_TEST(histogram_sum_exact_in_any_order)
{
    sim_hist a, b, c;
    ck_assert(!sim_hist_init(&a) && !sim_hist_init(&b) && !sim_hist_init(&c));
    enum { N = 5000 };
    static double v[N];
    sim_rng r;
    sim_rng_seed(&r, 11);
    long long units = 0;   /* 2^-20 s */
    for (int i = 0; i < N; i++) {
        long long k = (long long)(sim_rng_uniform(&r) * 100.0 * 1048576.0);   /* 0 to 100 s */
        units += k;
        sim_hist_add(&a, ldexp((double)k, -20));
    }
    ck_assert_msg(sim_hist_sum(&a) == ldexp((double)units, -20), "%.17g vs %.17g", sim_hist_sum(&a), ldexp((double)units, -20));
    /* Arbitrary doubles: forward one at a time, backward in runs of up to 7 equal values. */
    sim_hist_free(&a);
    ck_assert(!sim_hist_init(&a));
    for (int i = 0; i < N; i++) v[i] = exp(-9 + 12 * sim_rng_uniform(&r)) * (i % 17 == 0 ? -1 : 1);
    for (int i = 0; i < N; i++)
        for (int k = 0; k <= i % 7; k++) sim_hist_add(&a, v[i]);
    for (int i = N - 1; i >= 0; i--) sim_hist_add_n(&b, v[i], i % 7 + 1);
    ck_assert(sim_hist_sum(&a) == sim_hist_sum(&b) && a.count == b.count && a.zeros == b.zeros);
    ck_assert(sim_hist_quantile(&a, 0.5) == sim_hist_quantile(&b, 0.5) && sim_hist_quantile(&a, 0.99) == sim_hist_quantile(&b, 0.99));
    /* Naive double summation of the same values differs from the exact sum by at most its error
     * bound, (n - 1) * eps * Σ|v| (Higham, Accuracy and Stability of Numerical Algorithms, 4.2). */
    double naive = 0, mag = 0;
    long n = 0;
    for (int i = 0; i < N; i++)
        for (int k = 0; k <= i % 7; k++) { naive += v[i]; mag += fabs(v[i]); n++; }
    ck_assert(fabs(naive - sim_hist_sum(&a)) <= (double)(n - 1) * 0x1p-53 * mag);
    /* Values too large for the fixed-point sum still add up. */
    sim_hist_add_n(&c, 0x1p41, 3);
    sim_hist_add(&c, 1.5);
    ck_assert(sim_hist_sum(&c) == 3 * 0x1p41 + 1.5);
    sim_hist_free(&a);
    sim_hist_free(&b);
    sim_hist_free(&c);
}
END_TEST

START_TEST(samplers_match_their_moments)
{
    sim_rng r;
    sim_rng_seed(&r, 1);
    enum { N = 200000 };
    double s = 0, s2 = 0, g = 0, g2 = 0;
    for (int i = 0; i < N; i++) {
        double x = sim_rng_exp(&r, 4.0);
        s += x; s2 += x * x;
        double y = sim_rng_gamma(&r, 0.25);   /* mean 0.25, variance 0.25 */
        g += y; g2 += y * y;
    }
    double m = s / N, var = s2 / N - m * m;
    ck_assert_msg(fabs(m - 0.25) < 0.005 && fabs(var - 0.0625) < 0.003, "exp mean %g var %g", m, var);
    double gm = g / N, gv = g2 / N - gm * gm;
    ck_assert_msg(fabs(gm - 0.25) < 0.005 && fabs(gv - 0.25) < 0.01, "gamma mean %g var %g", gm, gv);
}
END_TEST

static scn_scenario s;

static sim_workload *wl(const char *text, const char *const *sets, int n)
{
    scn_error e;
    ck_assert_int_eq(t_load(text, sets, n, &s, &e), SCN_OK);
    char err[512];
    int noinput;
    sim_workload *w = sim_workload_init(&s, 99, &noinput, err, sizeof err);
    ck_assert_msg(w != NULL, "%s", err);
    return w;
}

#define WL "model: llama-3-8b\nhardware: h100-sxm\nworkload:\n"

START_TEST(workload_lengths_and_arrivals)
{
    sim_workload *w = wl(WL "  requests: 100000\n  arrival: {process: gamma, rate: 10/s, cv: 3}\n"
                            "  prompt_tokens: {dist: lognormal, mean: 800, sigma: 0.6, max: 5000}\n"
                            "  output_tokens: {dist: uniform, min: 10, max: 30}\n", NULL, 0);
    sim_req_spec q;
    char err[256];
    double sp = 0, so = 0, sg = 0, sg2 = 0, last = 0;
    int omin = 1000, omax = 0;
    long n = 0;
    while (sim_workload_next(w, &q, err, sizeof err) == 0) {
        double gap = q.arrival - last;
        ck_assert(gap >= 0);
        last = q.arrival;
        sg += gap; sg2 += gap * gap;
        sp += q.prompt; so += q.output;
        if (q.output < omin) omin = q.output;
        if (q.output > omax) omax = q.output;
        ck_assert_int_eq(q.id, n);
        n++;
    }
    ck_assert_int_eq(n, 100000);
    double gm = sg / n, cv = sqrt(sg2 / n - gm * gm) / gm;
    ck_assert_msg(fabs(gm - 0.1) < 0.005, "mean gap %g", gm);
    ck_assert_msg(fabs(cv - 3) < 0.15, "cv %g", cv);
    ck_assert_msg(fabs(sp / n - 800) < 8, "lognormal mean %g", sp / n);   /* `mean` is the distribution's mean */
    ck_assert_msg(fabs(so / n - 20) < 0.1 && omin == 10 && omax == 30, "uniform %g [%d, %d]", so / n, omin, omax);
    sim_workload_free(w);
}
END_TEST

START_TEST(workload_prefix_popularity_is_zipf)
{
    sim_workload *w = wl(WL "  requests: 60000\n  arrival: {process: constant, rate: 1/s}\n  prompt_tokens: 10\n"
                            "  output_tokens: 5\n  shared_prefix: {groups: 3, tokens: 32, share: 0.5, popularity: zipf 1}\n",
                         NULL, 0);
    sim_req_spec q;
    char err[256];
    long count[3] = {0}, none = 0, n = 0;
    while (sim_workload_next(w, &q, err, sizeof err) == 0) {
        if (q.prefix_group < 0) { none++; ck_assert_int_eq(q.prompt, 10); }
        else { count[q.prefix_group]++; ck_assert_int_eq(q.prompt, 42); ck_assert_int_eq(q.prefix_len, 32); }
        ck_assert(q.arrival == (double)n);   /* constant: first at 0, then every second */
        n++;
    }
    /* Zipf s = 1 over 3 groups: weights 1, 1/2, 1/3, normalised by 11/6. */
    double with = (double)(n - none);
    ck_assert_msg(fabs(none / (double)n - 0.5) < 0.01, "share %g", none / (double)n);
    ck_assert(fabs(count[0] / with - 6.0 / 11) < 0.01);
    ck_assert(fabs(count[1] / with - 3.0 / 11) < 0.01);
    ck_assert(fabs(count[2] / with - 2.0 / 11) < 0.01);
    sim_workload_free(w);
}
END_TEST

START_TEST(workload_conversations_carry_history)
{
    sim_workload *w = wl(WL "  requests: 7\n  arrival: {process: poisson, rate: 1/s}\n  prompt_tokens: 100\n"
                            "  output_tokens: 50\n  conversation: {turns: 3, think_time: 2 s}\n", NULL, 0);
    sim_req_spec a, b, c, d;
    char err[256];
    ck_assert_int_eq(sim_workload_next(w, &a, err, sizeof err), 0);
    ck_assert_int_eq(a.turns_left, 2);
    ck_assert_int_eq(sim_workload_next_turn(w, &a, 10.0, &b), 0);
    ck_assert_int_eq(b.prompt, 100 + 50 + 100);      /* history + reply + new message */
    ck_assert(b.arrival == 12.0 && b.turn == 1 && b.conversation == a.conversation && b.body_seed == a.body_seed);
    ck_assert_int_eq(sim_workload_next_turn(w, &b, 20.0, &c), 0);
    ck_assert_int_eq(c.prompt, 250 + 50 + 100);
    ck_assert_int_eq(sim_workload_next_turn(w, &c, 30.0, &d), 1);   /* three turns */
    /* 7 requests over 3-turn conversations: conversations of 3, 3 and 1. */
    sim_req_spec x;
    ck_assert_int_eq(sim_workload_next(w, &x, err, sizeof err), 0);
    ck_assert_int_eq(x.turns_left, 2);
    ck_assert_int_eq(sim_workload_next(w, &x, err, sizeof err), 0);
    ck_assert_int_eq(x.turns_left, 0);
    ck_assert_int_eq(sim_workload_next(w, &x, err, sizeof err), 1);
    /* Token ids of a turn's history are those of the turn before. */
    sim_batch_seq qa = {.prefix_seed = a.prefix_seed, .body_seed = a.body_seed, .prefix_len = a.prefix_len};
    sim_batch_seq qb = {.prefix_seed = b.prefix_seed, .body_seed = b.body_seed, .prefix_len = b.prefix_len};
    for (int p = 0; p < 150; p++) ck_assert_uint_eq(sim_seq_token(&qa, p), sim_seq_token(&qb, p));
    sim_workload_free(w);
}
END_TEST

START_TEST(workload_traces_and_empirical_files)
{
    const char *trace = t_write("trace.csv", "arrival_s,prompt_tokens,output_tokens,prefix_id,conversation_id\n"
                                             "0.0,100,10\n0.5,200,20,3\n# a comment\n0.5,300,30,3,7\n");
    char set[700];
    snprintf(set, sizeof set, "workload={arrival: {process: trace, trace: '%s'}, shared_prefix: {groups: 4, tokens: 64}}", trace);
    const char *sets[] = {set};
    sim_workload *w = wl(WL "  arrival: {process: poisson, rate: 1/s}\n  prompt_tokens: 1\n  output_tokens: 1\n", sets, 1);
    sim_req_spec q;
    char err[512];
    ck_assert_int_eq(sim_workload_next(w, &q, err, sizeof err), 0);
    ck_assert(q.arrival == 0 && q.prompt == 100 && q.output == 10 && q.prefix_group == -1 && q.conversation == -1);
    ck_assert_int_eq(sim_workload_next(w, &q, err, sizeof err), 0);
    ck_assert(q.arrival == 0.5 && q.prefix_group == 3 && q.prefix_len == 64);
    ck_assert_int_eq(sim_workload_next(w, &q, err, sizeof err), 0);
    ck_assert(q.conversation == 7 && q.prompt == 300);
    ck_assert_int_eq(sim_workload_next(w, &q, err, sizeof err), 1);
    sim_workload_free(w);
    /* A bad line is reported with its file and line. */
    const char *bad = t_write("bad-trace.csv", "0,10,10\n1,ten,10\n");
    snprintf(set, sizeof set, "workload={arrival: {process: trace, trace: '%s'}}", bad);
    w = wl(WL "  arrival: {process: poisson, rate: 1/s}\n  prompt_tokens: 1\n  output_tokens: 1\n", sets, 1);
    ck_assert_int_eq(sim_workload_next(w, &q, err, sizeof err), 0);
    ck_assert_int_eq(sim_workload_next(w, &q, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "bad-trace.csv:2:"), "%s", err);
    sim_workload_free(w);
    /* Empirical lengths: weights 3 : 1. */
    const char *emp = t_write("lengths.csv", "tokens,weight\n100,3\n300,1\n");
    snprintf(set, sizeof set, "workload.prompt_tokens={dist: empirical, file: '%s'}", emp);
    w = wl(WL "  requests: 40000\n  arrival: {process: poisson, rate: 1/s}\n  prompt_tokens: 1\n  output_tokens: 1\n",
           sets, 1);
    long n100 = 0, n = 0;
    while (sim_workload_next(w, &q, err, sizeof err) == 0) { n++; if (q.prompt == 100) n100++; else ck_assert_int_eq(q.prompt, 300); }
    ck_assert_msg(fabs(n100 / (double)n - 0.75) < 0.01, "%g", n100 / (double)n);
    sim_workload_free(w);
    /* A missing file is "no input", not bad data. */
    snprintf(set, sizeof set, "workload.prompt_tokens={dist: empirical, file: /nonexistent.csv}");
    scn_error e;
    ck_assert_int_eq(t_load(WL "  arrival: {process: poisson, rate: 1/s}\n  prompt_tokens: 1\n  output_tokens: 1\n",
                            sets, 1, &s, &e), SCN_OK);
    int noinput = 0;
    ck_assert_ptr_null(sim_workload_init(&s, 1, &noinput, err, sizeof err));
    ck_assert_int_eq(noinput, 1);
}
END_TEST

/* The exponential (maximum-entropy) law, checked against hand-derived properties rather than
 * against the solver: (a) unbounded, min 1, mean 100.5: a draw is ceil(Y) for Y exponential with
 * mean 100, so P(len <= k) = 1 - e^(-k/100) and the mean is 1 / (1 - e^(-1/100)) = 100.50;
 * (b) bounded: the log-density is linear, so equal-width bins equally far apart hold counts in a
 * constant ratio, and the mean is the one asked for; (c) a mean at the midpoint is uniform;
 * (d) a mean above the midpoint rises instead of falling. */
static void exp_draws(const char *dist, long n, long *hist, int hmax, double *mean)
{
    char set[200];
    snprintf(set, sizeof set, "workload.prompt_tokens=%s", dist);
    const char *sets[] = {set};
    sim_workload *w = wl(WL "  requests: 200000\n  arrival: {process: poisson, rate: 1/s}\n  prompt_tokens: 1\n"
                            "  output_tokens: 1\n", sets, 1);
    double sum = 0;
    for (long i = 0; i < n; i++) {
        int x = sim_workload_draw(w, &s.workload.prompt, 0);
        ck_assert_int_ge(x, 1);
        if (x <= hmax) hist[x]++;
        sum += x;
    }
    *mean = sum / n;
    sim_workload_free(w);
}

/* A drawn length is rounded as lround does (halves away from zero; values at and beyond 2^52,
 * infinities and NaN as lround returns them), then clamped to [max(min, 1), max]: a normal law
 * of sigma 0 draws exactly its mean, so each case below is one rounding, checked against libm's
 * lround clamped by hand. */
START_TEST(length_rounding_is_lround)
{
    sim_workload *w = wl(WL "  requests: 10\n  arrival: {process: poisson, rate: 1/s}\n  prompt_tokens: 10\n  output_tokens: 10\n", NULL, 0);
    static const double V[] = {0.49999999999999994, 0.5, 1.5, 2.4999999999999996, 2.5, 3.5, 7.499999999999999,
                               1000000.5, 1048575.9999999999, 123456789.5, 4503599627370495.5, 4503599627370496.0,
                               9007199254740993.0, 1e300, -2.5, -0.5, -1e300};
    const double inf = HUGE_VAL;
    double vals[sizeof V / sizeof V[0] + 3];
    int n = 0;
    for (size_t i = 0; i < sizeof V / sizeof V[0]; i++) vals[n++] = V[i];
    vals[n++] = inf;
    vals[n++] = -inf;
    vals[n++] = nan("");
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 2; k++) {
            scn_dist d = {.kind = SCN_DIST_NORMAL, .mean = vals[i], .sigma = 0, .min = k ? 3 : 0, .max = 2000000000};
            long want = lround(vals[i]);
            if (want < d.min) want = d.min;
            if (want < 1) want = 1;
            if (want > d.max) want = d.max;
            int got = sim_workload_draw(w, &d, -1);
            ck_assert_msg(got == want, "mean %.17g min %d: drew %d, lround gives %ld", vals[i], d.min, got, want);
        }
    sim_workload_free(w);
}
END_TEST

START_TEST(workload_exponential_lengths)
{
    enum { N = 200000, H = 1100 };
    static long h[H + 1];
    double m;
    /* (a) */
    memset(h, 0, sizeof h);
    exp_draws("{dist: exponential, mean: 100.5, min: 1}", N, h, H, &m);
    long le69 = 0;
    for (int k = 1; k <= 69; k++) le69 += h[k];
    ck_assert_int_eq(h[0], 0);
    ck_assert_msg(fabs(le69 / (double)N - (1 - exp(-0.69))) < 0.005, "P(<=69) %g", le69 / (double)N);
    ck_assert_msg(fabs(m - 1 / (1 - exp(-0.01))) < 0.7, "mean %g", m);
    /* (b): ShareGPT-like prompt bounds (vLLM's filter: 4 <= prompt <= 1024). */
    memset(h, 0, sizeof h);
    exp_draws("{dist: exponential, mean: 227, min: 4, max: 1024}", N, h, H, &m);
    for (int k = 0; k < 4; k++) ck_assert_int_eq(h[k], 0);
    for (int k = 1025; k <= H; k++) ck_assert_int_eq(h[k], 0);
    ck_assert_msg(fabs(m - 227) < 2.0, "mean %g", m);
    double bin[3] = {0, 0, 0};
    for (int b = 0; b < 3; b++)
        for (int k = 4 + 150 * b; k < 4 + 150 * b + 150; k++) bin[b] += h[k];
    ck_assert_msg(fabs(bin[1] / bin[0] - bin[2] / bin[1]) < 0.03, "ratios %g %g", bin[1] / bin[0], bin[2] / bin[1]);
    ck_assert(bin[1] < bin[0]);
    /* (c) */
    memset(h, 0, sizeof h);
    exp_draws("{dist: exponential, mean: 50.5, min: 1, max: 100}", N, h, H, &m);
    for (int k = 1; k <= 100; k++) ck_assert_msg(fabs(h[k] / (double)N - 0.01) < 0.0015, "P(%d) %g", k, h[k] / (double)N);
    /* (d) */
    memset(h, 0, sizeof h);
    exp_draws("{dist: exponential, mean: 70, min: 1, max: 100}", N, h, H, &m);
    ck_assert_msg(fabs(m - 70) < 0.5, "mean %g", m);
    long lo = 0, hi = 0;
    for (int k = 1; k <= 20; k++) { lo += h[k]; hi += h[k + 80]; }
    ck_assert(hi > 2 * lo);
}
END_TEST

Suite *suite_sim_core(void)
{
    Suite *su = suite_create("sim_core");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, heap_orders_by_time_then_push_order);
    tcase_add_test(tc, histogram_quantiles_within_resolution);
    tcase_add_test(tc, histogram_sum_exact_in_any_order);
    tcase_add_test(tc, samplers_match_their_moments);
    tcase_add_test(tc, workload_lengths_and_arrivals);
    tcase_add_test(tc, workload_exponential_lengths);
    tcase_add_test(tc, length_rounding_is_lround);
    tcase_add_test(tc, workload_prefix_popularity_is_zipf);
    tcase_add_test(tc, workload_conversations_carry_history);
    tcase_add_test(tc, workload_traces_and_empirical_files);
    suite_add_tcase(su, tc);
    return su;
}
