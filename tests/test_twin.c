/* test_twin.c: the block-size twin report (sim/kv_twin.c). Whenever a run at block size B says
 * that a run at block size b makes the same decisions, the run at b, simulated on its own, must
 * give every request the same record and every metric the same value but the ones counted in
 * blocks (KV use, fragmentation, the pool's size). Over random scenarios: tight and roomy pools,
 * prefix caching on and off with prefixes that are and are not whole blocks, both mixing
 * schedulers, windowed models, conversations, replicas, a no-evict engine, an engine whose
 * outputs come one step late, and runs a sink ends early. Independent reference: the engine
 * itself, run at b. The test also checks that the report is not vacuous (it says "same" often)
 * and that the scenarios do produce runs that differ (so a report that said "same" everywhere
 * would fail). */
#include "tests.h"
#include "../sim/sim.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NB 5
static const int BS[NB] = {8, 16, 32, 64, 128};

typedef struct {
    uint64_t h, at_stop;   /* hash of every row, and of the first `stop` rows */
    long n, stop;          /* rows seen; rows after which the sink ends the run (0: never) */
} rows;

static void mix(uint64_t *h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) *h = (*h ^ b[i]) * 0x100000001b3ULL;
}

static int on_row(void *ud, const sim_request_row *r)
{
    rows *d = ud;
    mix(&d->h, &r->id, sizeof r->id);
    mix(&d->h, &r->replica, sizeof r->replica);
    double t[5] = {r->arrival, r->queue, r->ttft, r->tpot, r->e2e};
    mix(&d->h, t, sizeof t);
    int k[4] = {r->prompt, r->output, r->cached, r->preemptions};
    mix(&d->h, k, sizeof k);
    d->n++;
    if (d->n == d->stop) d->at_stop = d->h;
    return d->stop > 0 && d->n >= d->stop;   /* a sink that ends the run, as the planner's early stop */
}

static long pool_of(const scn_scenario *s, const sim_choice *c)
{
    sim_executor ex;
    ck_assert_int_eq(sim_executor_model(s, c, &ex), 0);
    long b = ex.kv_blocks(ex.ctx, 0);
    ex.free(ex.ctx);
    return b;
}

/* Runs the scenario at BS[k], asking about every other size; returns sim_run's status. */
static int run_at(const scn_scenario *s, sim_choice c, int k, long stop, sim_metrics *m, rows *d, unsigned *same)
{
    sim_twin_report tw = {0};
    for (int j = 0; j < NB; j++) {
        if (j == k) continue;
        sim_choice o = c;
        o.block_size = BS[j];
        tw.block_size[tw.n] = BS[j];
        tw.blocks[tw.n++] = pool_of(s, &o);
    }
    c.block_size = BS[k];
    sim_executor ex;
    ck_assert_int_eq(sim_executor_model(s, &c, &ex), 0);
    *d = (rows){.h = 0xcbf29ce484222325ULL, .stop = stop};
    sim_run_opts o = {.seed = s->seed, .on_request = on_row, .ud = d, .twins = &tw};
    char err[512];
    int rc = sim_run(s, &c, &ex, &o, m, err, sizeof err);
    ex.free(ex.ctx);
    /* Bit j of *same: BS[j] (the report's bits skip k itself). */
    *same = 0;
    for (int j = 0, i = 0; j < NB; j++) {
        if (j == k) continue;
        if ((tw.same >> i) & 1) *same |= 1u << j;
        i++;
    }
    return rc;
}

static bool block_metric(const char *name)
{
    return !strcmp(name, "kv_util_mean") || !strcmp(name, "kv_util_peak") || !strcmp(name, "fragmentation_mean") ||
           !strcmp(name, "kv_blocks") || !strcmp(name, "kv_tokens");
}

/* True when the runs at two block sizes are the same but for the block-counted figures. */
static bool same_runs(const sim_metrics *a, const rows *da, const sim_metrics *b, const rows *db)
{
    if (da->n != db->n || da->h != db->h || a->events != b->events || a->peak_in_flight != b->peak_in_flight) return false;
    sim_metric_kv la[SIM_METRICS_MAX], lb[SIM_METRICS_MAX];
    int n = sim_metrics_list(a, la, SIM_METRICS_MAX);
    sim_metrics_list(b, lb, SIM_METRICS_MAX);
    for (int i = 0; i < n; i++)
        if (!block_metric(la[i].name) && memcmp(&la[i].value, &lb[i].value, sizeof(double))) return false;
    return true;
}

START_TEST(twin_report_is_sound)
{
    /* mistral-7b and gemma-2-9b have windowed layers, which the report declines. */
    static const char *const models[] = {"llama-3-8b", "llama-3-8b", "deepseek-v2-lite", "llama-3-8b", "mistral-7b", "gemma-2-9b"};
    static const int prefix_tokens[] = {2000, 256, 100, 1000};
    long claims = 0, pairs = 0, differ = 0, stop_claims = 0;
    unsigned long long x = 0x2545f4914f6cdd1dULL;
    for (int k = 0; k < 24; k++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        unsigned r = (unsigned)(x >> 33);
        bool prefix = r % 3 != 0, chunked = (r >> 2) % 2, convo = (r >> 3) % 5 == 0;
        /* The no-evict admission (declined), and outputs one step late (held requests). */
        const char *engine = (r >> 4) % 7 == 0 ? "engine: trtllm\n" : (r >> 4) % 7 == 1 ? "engine: vllm-0.6\n" : "";
        bool small = (r >> 15) % 3 == 0;   /* an RTX 4090: a few GiB of KV at most */
        double util = small ? (double[]){0.9, 0.85}[(r >> 5) % 2] : (double[]){0.9, 0.5, 0.3, 0.26}[(r >> 5) % 4];
        double rate = (double[]){3, 12, 40, 150}[(r >> 7) % 4];
        int seqs = (int[]){16, 64, 256}[(r >> 9) % 3], reps = (r >> 11) % 4 == 0 ? 2 : 1;
        const char *model = models[(r >> 12) % 6];
        if (small && !strcmp(model, "deepseek-v2-lite")) model = "llama-3-8b";
        char text[2048];
        snprintf(text, sizeof text,
                 "model: %s\nhardware: %s\n%s"
                 "deployment: {replicas: %d, max_num_seqs: %d, gpu_memory_utilization: %.2f, max_model_len: 8192}\n"
                 "workload:\n  requests: 300\n  arrival: {process: poisson, rate: %g/s}\n"
                 "  prompt_tokens: {dist: lognormal, mean: %d, sigma: 0.8, max: 4000}\n"
                 "  output_tokens: {dist: lognormal, mean: %d, sigma: 0.8, max: 1500}\n"
                 "  shared_prefix: {groups: %d, tokens: %d, share: 0.8}\n%s"
                 "options: {kv_layout: paged, block_size: [8, 16, 32, 64, 128], prefix_cache: %s, scheduler: %s}\n",
                 model, small ? "rtx-4090" : "a100-80g", engine, reps, seqs, util, rate,
                 300 + (int)((r >> 16) % 900), 50 + (int)((r >> 20) % 300), 1 + (int)((r >> 24) % 4),
                 prefix_tokens[(r >> 26) % 4], convo ? "  conversation: {turns: 3, think_time: 2 s}\n" : "",
                 prefix ? "on" : "off", chunked ? "chunked" : "continuous");
        static scn_scenario s;
        scn_error e;
        ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s\n%s", e.msg, text);
        sim_choice c = sim_choice_first(&s);
        sim_metrics m[NB];
        rows d[NB];
        unsigned same[NB];
        int rc[NB];
        for (int j = 0; j < NB; j++) rc[j] = run_at(&s, c, j, 0, &m[j], &d[j], &same[j]);
        for (int a = 0; a < NB; a++)
            for (int b = 0; b < NB; b++) {
                if (a == b) continue;
                bool claim = (same[a] >> b) & 1;
                bool ok = rc[a] == SIM_OK && rc[b] == SIM_OK;
                pairs++;
                if (ok && !same_runs(&m[a], &d[a], &m[b], &d[b])) differ++;
                if (!claim) continue;
                claims++;
                ck_assert_msg(ok && same_runs(&m[a], &d[a], &m[b], &d[b]),
                              "scenario %d: block size %d said %d runs the same, but it does not (rc %d/%d, rows %ld/%ld)\n%s",
                              k, BS[a], BS[b], rc[a], rc[b], d[a].n, d[b].n, text);
            }
        /* Ended early by the sink after a third of the requests: a "same" then covers the part
         * run, which must match the twin's whole run up to that request. */
        for (int a = 0; a < NB; a++) {
            if (rc[a] != SIM_OK || d[a].n < 3) continue;
            sim_metrics ms;
            rows ds;
            unsigned ss;
            long stop = d[a].n / 3;
            run_at(&s, c, a, stop, &ms, &ds, &ss);
            ck_assert_int_eq(ds.n, stop);
            for (int b = 0; b < NB; b++) {
                if (!((ss >> b) & 1)) continue;
                stop_claims++;
                rows db = {.h = 0xcbf29ce484222325ULL, .stop = stop};
                sim_metrics mb;
                unsigned sb;
                run_at(&s, c, b, stop, &mb, &db, &sb);
                ck_assert_msg(db.n == stop && db.at_stop == ds.at_stop,
                              "scenario %d: ended early, block size %d said %d runs the same, but its first %ld "
                              "requests differ\n%s", k, BS[a], BS[b], stop, text);
            }
        }
    }
    /* Not vacuous: many pairs are claimed, and some pairs really differ (a report claiming every
     * pair would fail above). */
    ck_assert_msg(claims >= 30, "only %ld of %ld pairs claimed the same", claims, pairs);
    ck_assert_msg(differ >= pairs / 10, "only %ld of %ld pairs differ: the scenarios do not test the report", differ, pairs);
    ck_assert(stop_claims > 0);
}
END_TEST

/* The planner benchmark's case (bench/sweep-500.yaml, scaled down): a 2,000-token shared prefix
 * hits 2,000 tokens in whole blocks of 8 and 16, 1,984 in blocks of 32 and 64 and 1,920 in
 * blocks of 128, so with the prefix cache exactly the pairs 8-16 and 32-64 can be the same; with
 * the prefix cache off and a roomy pool every block size is. A load below capacity on an H100
 * (the pool a few times what the running sequences hold) must get those claims, and no others. */
START_TEST(twin_report_claims_the_expected_pairs)
{
    for (int pc = 0; pc < 2; pc++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "model: llama-3-8b\nhardware: h100-sxm\n"
                 "deployment: {max_num_seqs: 64, max_model_len: 8192}\n"
                 "workload:\n  requests: 400\n  arrival: {process: poisson, rate: 6/s}\n"
                 "  prompt_tokens: {dist: lognormal, mean: 800, sigma: 0.6, max: 4000}\n"
                 "  output_tokens: {dist: lognormal, mean: 250, sigma: 0.8, max: 1500}\n"
                 "  shared_prefix: {groups: 4, tokens: 2000, share: 0.9, popularity: zipf 1.1}\n"
                 "options: {kv_layout: paged, block_size: [8, 16, 32, 64, 128], prefix_cache: %s, scheduler: chunked}\n",
                 pc ? "on" : "off");
        static scn_scenario s;
        scn_error e;
        ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s", e.msg);
        sim_choice c = sim_choice_first(&s);
        sim_metrics m[NB];
        rows d[NB];
        for (int a = 0; a < NB; a++) {
            unsigned same;
            ck_assert_int_eq(run_at(&s, c, a, 0, &m[a], &d[a], &same), SIM_OK);
            for (int b = 0; b < a; b++)   /* and they are the same */
                if ((same >> b) & 1) ck_assert(same_runs(&m[a], &d[a], &m[b], &d[b]));
            unsigned want = ((1u << NB) - 1) & ~(1u << a);                  /* prefix cache off: every other size */
            if (pc) want = a < 2 ? 3u & ~(1u << a) : a < 4 ? 12u & ~(1u << a) : 0;   /* 8-16, 32-64, none for 128 */
            ck_assert_msg(same == want, "prefix cache %s, block size %d: claims %x, expected %x", pc ? "on" : "off", BS[a],
                          same, want);
        }
    }
}
END_TEST

Suite *suite_twin(void)
{
    Suite *s = suite_create("twin");
    TCase *tc = tcase_create("twin");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, twin_report_is_sound);
    tcase_add_test(tc, twin_report_claims_the_expected_pairs);
    suite_add_tcase(s, tc);
    return s;
}
