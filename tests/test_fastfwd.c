/* test_fastfwd.c: the engine's fast-forward over runs of decode steps gives the very same run as
 * forming every step: every metric bit for bit, every request's record, the event and step
 * counts. Over every option choice of the bundled archetypes and over random scenarios that
 * mix layouts, block sizes, prefix caching, schedulers, windows, replicas, conversations and
 * overload. Independent reference: the per-step engine itself (sim_run_opts.per_step). */
#include "tests.h"
#include "../sim/sim.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { uint64_t h; long n; } digest;

static void mix(digest *d, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) d->h = (d->h ^ b[i]) * 0x100000001b3ULL;
}

static int on_row(void *ud, const sim_request_row *r)
{
    digest *d = ud;
    mix(d, &r->id, sizeof r->id); mix(d, &r->replica, sizeof r->replica);
    double t[6] = {r->arrival, r->queue, r->ttft, r->tpot, r->e2e, 0};
    mix(d, t, sizeof t);
    int k[4] = {r->prompt, r->output, r->cached, r->preemptions};
    mix(d, k, sizeof k);
    mix(d, &r->conversation, sizeof r->conversation); mix(d, &r->turn, sizeof r->turn);
    d->n++;
    return 0;
}

static int on_sample(void *ud, const sim_sample *x)
{
    digest *d = ud;
    mix(d, &x->t, sizeof x->t); mix(d, &x->kv_used, sizeof x->kv_used);
    mix(d, &x->waiting, sizeof x->waiting); mix(d, &x->running, sizeof x->running);
    return 0;
}

/* blocks: the pool per replica (0: the cost model's); counts: the fast-forward's, or NULL. */
static int run_mode(const scn_scenario *s, const sim_choice *c, bool per_step, long blocks, sim_metrics *m, digest *d,
                    sim_ff_counts *counts, char *err)
{
    sim_executor ex;
    ck_assert_int_eq(sim_executor_model(s, c, &ex), 0);
    d->h = 0xcbf29ce484222325ULL;
    d->n = 0;
    sim_run_opts o = {.seed = s->seed, .on_request = on_row, .on_sample = on_sample, .ud = d, .per_step = per_step,
                      .sample_interval = 7.0, .kv_blocks_override = blocks, .ff_counts = counts};
    int rc = sim_run(s, c, &ex, &o, m, err, 512);
    ex.free(ex.ctx);
    return rc;
}

/* Runs one choice both ways, on a pool of `blocks` (0: the cost model's); returns the steps the
 * run took (0 if it failed both ways) and adds the fast-forward's counts to *sum (if not NULL). */
static long same_both_ways_on(const scn_scenario *s, const sim_choice *c, const char *what, long blocks, sim_ff_counts *sum)
{
    sim_metrics a, b;
    digest da, db;
    char ea[512], eb[512];
    sim_ff_counts ca = {0}, cb = {0};
    int ra = run_mode(s, c, true, blocks, &a, &da, &ca, ea), rb = run_mode(s, c, false, blocks, &b, &db, &cb, eb);
    ck_assert_msg(ca.runs == 0 && ca.steps == 0, "%s: a per-step run fast-forwarded", what);
    if (sum) {
        sum->runs += cb.runs;
        sum->steps += cb.steps;
        sum->watched += cb.watched;
        sum->fired_commit += cb.fired_commit;
        sum->fired_evict += cb.fired_evict;
        sum->mixed += cb.mixed;
        sum->mixed_priced += cb.mixed_priced;
    }
    char desc[160];
    sim_choice_describe(c, desc, sizeof desc);
    ck_assert_msg(ra == rb, "%s %s: per-step %d (%s), fast-forward %d (%s)", what, desc, ra, ea, rb, eb);
    if (ra != SIM_OK) return 0;
    sim_metric_kv la[SIM_METRICS_MAX], lb[SIM_METRICS_MAX];
    int n = sim_metrics_list(&a, la, SIM_METRICS_MAX);
    sim_metrics_list(&b, lb, SIM_METRICS_MAX);
    for (int i = 0; i < n; i++)
        ck_assert_msg(!memcmp(&la[i].value, &lb[i].value, sizeof(double)), "%s %s: %s per-step %.17g, fast-forward %.17g",
                      what, desc, la[i].name, la[i].value, lb[i].value);
    ck_assert_msg(a.events == b.events && a.peak_in_flight == b.peak_in_flight, "%s %s: events %ld/%ld", what, desc,
                  a.events, b.events);
    ck_assert_msg(da.n == db.n && da.h == db.h, "%s %s: request records differ", what, desc);
    return a.steps;
}

static long same_both_ways(const scn_scenario *s, const sim_choice *c, const char *what)
{
    sim_ff_counts one = {0};
    return same_both_ways_on(s, c, what, 0, &one);
}

static void every_choice(const scn_scenario *s, const char *what)
{
    const scn_options *o = &s->options;
    for (int l = 0; l < o->n_layout; l++)
        for (int p = 0; p < o->n_prefix; p++)
            for (int d = 0; d < o->n_dtype; d++)
                for (int k = 0; k < o->n_sched; k++)
                    for (int w = 0; w < o->n_window; w++) {
                        sim_choice c = sim_choice_first(s);
                        c.layout = o->layout[l];
                        c.prefix_cache = o->prefix_cache[p];
                        c.kv_dtype = o->kv_dtype[d];
                        c.scheduler = o->scheduler[k];
                        c.sink = o->sink[w];
                        c.window = o->window[w];
                        char why[200];
                        if (sim_choice_check(&c, why, sizeof why)) continue;
                        same_both_ways(s, &c, what);
                    }
}

/* Every bundled archetype (every .yaml in scenarios/archetypes, listed from the folder so a new one is
 * covered without editing this test). */
START_TEST(archetypes_same_both_ways)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/archetypes", getenv("KVPLAN_LIBRARY"));
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot list %s", dir);
    static scn_scenario s;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 6 || strcmp(de->d_name + len - 5, ".yaml")) continue;
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        /* Fewer requests keep the suite quick; the runs still fill and drain the KV cache. */
        const char *sets[] = {strstr(de->d_name, "long-document") ? "workload.requests=60" : "workload.requests=500"};
        scn_error e;
        ck_assert_msg(scn_scenario_load(path, sets, 1, &s, &e) == SCN_OK, "%s: %s", path, e.msg);
        every_choice(&s, de->d_name);
        n++;
    }
    closedir(d);
    ck_assert_int_ge(n, 7);
}
END_TEST

START_TEST(random_scenarios_same_both_ways)
{
    static const char *const models[] = {"llama-3-8b", "mistral-7b", "gemma-2-9b", "mixtral-8x7b", "deepseek-v2-lite"};
    static const char *const sched[] = {"continuous", "chunked", "static"};
    unsigned long long x = 0x9e3779b97f4a7c15ULL;
    long steps = 0;
    for (int k = 0; k < 14; k++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        unsigned r = (unsigned)(x >> 33);
        char text[2048];
        bool paged = r % 3 != 0, prefix = paged && (r >> 2) % 2, window = !prefix && (r >> 3) % 4 == 0;
        int bs = (int[]){1, 8, 16, 32}[(r >> 5) % 4];
        double rate = (double[]){2, 8, 30, 200}[(r >> 7) % 4];
        int turns = (r >> 9) % 3 == 0 ? 3 : 1, reps = (r >> 11) % 4 == 0 ? 2 : 1;
        int seqs = (int[]){4, 32, 256}[(r >> 13) % 3];
        snprintf(text, sizeof text,
                 "model: %s\nhardware: %s\n"
                 "deployment: {replicas: %d, max_num_seqs: %d, gpu_memory_utilization: %.2f, max_model_len: 4096}\n"
                 "workload:\n  requests: 400\n  arrival: {process: poisson, rate: %g/s}\n"
                 "  prompt_tokens: {dist: lognormal, mean: %d, sigma: 0.8, max: 3000}\n"
                 "  output_tokens: {dist: lognormal, mean: %d, sigma: 0.8, max: 900}\n"
                 "  shared_prefix: {groups: 3, tokens: 256, share: 0.6}\n"
                 "%s%s"
                 "options: {kv_layout: [%s], block_size: [%d], prefix_cache: [%s], scheduler: [%s], window: [%s]}\n",
                 models[(r >> 15) % 5], (r >> 18) % 2 ? "rtx-4090" : "a100-80g", reps, seqs,
                 (r >> 19) % 2 ? 0.9 : 0.75, rate, 200 + (int)((r >> 20) % 900), 50 + (int)((r >> 23) % 300),
                 turns > 1 ? "  conversation: {turns: 3, think_time: 2 s}\n" : "",
                 (r >> 28) % 2 ? "  measure: {skip_first: 10%, skip_last: 5%}\n" : "", paged ? "paged" : "contiguous", bs,
                 prefix ? "on" : "off", sched[(r >> 26) % 3], window ? "{sink: 4, window: 508}" : "off");
        static scn_scenario s;
        scn_error e;
        scn_status st = t_load(text, NULL, 0, &s, &e);
        ck_assert_msg(st == SCN_OK, "%s\n%s", e.msg, text);
        char what[32];
        snprintf(what, sizeof what, "random %d", k);
        sim_choice c = sim_choice_first(&s);
        steps += same_both_ways(&s, &c, what);
    }
    ck_assert(steps > 0);
}
END_TEST

/* KV offload tiers and swap preemption: spills happen inside fast-forwarded runs (a block the
 * run needs evicts a cached one into the host tier), reloads and swap-ins end them. The RAG
 * archetype (documents 3.6x the pool) under each offload choice, with small host tiers so the
 * NVMe tier fills too, and a tight pool where sequences are swapped out and back. */
START_TEST(offload_and_swap_same_both_ways)
{
    static scn_scenario s;
    char path[1024];
    snprintf(path, sizeof path, "%s/archetypes/rag-offload.yaml", getenv("KVPLAN_LIBRARY"));
    const char *sets[] = {"workload.requests=400", "options.kv_offload_capacity={cpu: 40 GiB}", "options.preemption=[recompute, swap]",
                          "workload.arrival.rate=20/s"};
    scn_error e;
    ck_assert_int_eq(scn_scenario_load(path, sets, 4, &s, &e), SCN_OK);
    long steps = 0;
    for (int o = 0; o < s.options.n_offload; o++)
        for (int p = 0; p < s.options.n_preempt; p++) {
            sim_choice c = sim_choice_first(&s);
            c.kv_offload = s.options.kv_offload[o];
            c.preemption = s.options.preemption[p];
            steps += same_both_ways(&s, &c, "rag-offload");
        }
    ck_assert(steps > 0);
    /* Swapping: long outputs on a pool a tenth of its size (gpu_memory_utilization). */
    const char *tight[] = {"workload.requests=300", "options.preemption=[swap]", "options.kv_offload=[cpu]",
                           "deployment.gpu_memory_utilization=0.25", "workload.output_tokens={dist: fixed, value: 1500}",
                           "workload.arrival.rate=30/s"};
    ck_assert_int_eq(scn_scenario_load(path, tight, 6, &s, &e), SCN_OK);
    sim_choice c = sim_choice_first(&s);
    ck_assert(same_both_ways(&s, &c, "rag-offload swap") > 0);
    /* Prefill steps formed while a decode run is suspended (a reload in each): long shared
     * prompts on a third of the memory, mixed outputs. */
    snprintf(path, sizeof path, "%s/archetypes/long-prompt-tight-tpot.yaml", getenv("KVPLAN_LIBRARY"));
    const char *longp[] = {"workload.requests=300", "workload.shared_prefix={groups: 50, tokens: 3000, share: 1.0}",
                           "deployment.gpu_memory_utilization=0.3", "options.prefix_cache=on", "options.kv_offload=cpu",
                           "deployment.replicas=1", "options.disaggregation=off", "options.scheduler=continuous"};
    ck_assert_int_eq(scn_scenario_load(path, longp, 8, &s, &e), SCN_OK);
    c = sim_choice_first(&s);
    ck_assert(same_both_ways(&s, &c, "long prompts offload") > 0);
}
END_TEST

/* Multi-step scheduling (deployment.scheduler_steps > 1): the fast-forward declines such runs
 * (admissions wait for a run's end, sim/sched.c), so both ways must still give the same run,
 * at loads that queue requests behind runs and with preemptions in a tight pool. */
START_TEST(multistep_same_both_ways)
{
    static const char *const loads[] = {"4/s", "40/s"};
    long steps = 0;
    for (int k = 0; k < 4; k++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "model: llama-3-8b\nhardware: a100-80g\nengine: vllm-0.7\n"   /* V0: multi-step */
                 "deployment: {scheduler_steps: %d, gpu_memory_utilization: %s, max_model_len: 4096}\n"
                 "workload:\n  requests: 300\n  arrival: {process: poisson, rate: %s}\n"
                 "  prompt_tokens: {dist: lognormal, mean: 400, sigma: 0.8, max: 3000}\n"
                 "  output_tokens: {dist: lognormal, mean: 150, sigma: 0.8, max: 900}\n"
                 "options: {kv_layout: paged, block_size: 16, prefix_cache: off, scheduler: continuous}\n",
                 k % 2 ? 10 : 4, k >= 2 ? "0.25" : "0.9", loads[k % 2]);
        static scn_scenario s;
        scn_error e;
        ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s\n%s", e.msg, text);
        sim_choice c = sim_choice_first(&s);
        steps += same_both_ways(&s, &c, "multi-step");
    }
    /* The overlap scheduler's extra decode step (the trtllm profile): declined too. */
    for (int k = 0; k < 2; k++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "model: llama-3-8b\nhardware: a100-80g\nengine: trtllm\n"
                 "deployment: {gpu_memory_utilization: %s, max_model_len: 4096}\n"
                 "workload:\n  requests: 300\n  arrival: {process: poisson, rate: 40/s}\n"
                 "  prompt_tokens: {dist: lognormal, mean: 400, sigma: 0.8, max: 3000}\n"
                 "  output_tokens: {dist: lognormal, mean: 150, sigma: 0.8, max: 900}\n"
                 "options: {kv_layout: paged, block_size: 16, prefix_cache: %s, scheduler: %s}\n",
                 k ? "0.25" : "0.9", k ? "on" : "off", k ? "chunked" : "continuous");
        static scn_scenario s;
        scn_error e;
        ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s\n%s", e.msg, text);
        ck_assert(s.engine.extra_decode_step);
        sim_choice c = sim_choice_first(&s);
        steps += same_both_ways(&s, &c, "extra decode step");
    }
    ck_assert(steps > 0);
}
END_TEST

/* Models with sliding-window layers, whose window frees KV as sequences grow: the run commits
 * each sequence as a block fills, where the window moves. gpt-oss-20b (half its layers on a
 * 128-token window: layer-block counting), mistral-7b (every layer windowed: blocks go back to
 * the pool; contexts past its 4096-token window) and gemma-2-9b, paged (with and without the
 * prefix cache, which the every-layer case declines), contiguous, and a tight pool that
 * preempts. */
START_TEST(sliding_window_same_both_ways)
{
    static const struct { const char *model, *mem, *rate; int prompt, output, len; } cases[] = {
        {"gpt-oss-20b", "0.9", "20/s", 300, 200, 4096},
        {"gpt-oss-20b", "0.35", "40/s", 600, 400, 4096},
        {"mistral-7b", "0.9", "4/s", 3000, 1200, 8192},
        {"mistral-7b", "0.3", "8/s", 3500, 1500, 8192},
        {"gemma-2-9b", "0.9", "4/s", 3000, 1200, 8192},
        {"gemma-2-9b", "0.35", "8/s", 3500, 1500, 8192},
        /* Past the window in a full pool, requests waiting: blocks the window gives back admit
         * them between completions, as the scheduler would every step. */
        {"mistral-7b", "0.6", "10/s", 6000, 1000, 16384},
        {"gpt-oss-20b", "0.3", "30/s", 3000, 800, 8192},
    };
    static const char *const layouts[][3] = {{"paged", "16", "off"}, {"paged", "16", "on"}, {"paged", "32", "off"},
                                             {"contiguous", "16", "off"}, {"paged", "48", "off"}};
    long steps = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
            char text[1400];
            snprintf(text, sizeof text,
                     "model: %s\nhardware: h100-sxm\n"
                     "deployment: {gpu_memory_utilization: %s, max_model_len: %d}\n"
                     "workload:\n  requests: 150\n  arrival: {process: poisson, rate: %s}\n"
                     "  prompt_tokens: {dist: lognormal, mean: %d, sigma: 0.7, max: %d}\n"
                     "  output_tokens: {dist: lognormal, mean: %d, sigma: 0.7, max: %d}\n"
                     "  shared_prefix: {groups: 2, tokens: 512, share: 0.5}\n"
                     "options: {kv_layout: %s, block_size: %s, prefix_cache: %s, scheduler: continuous}\n",
                     cases[k].model, cases[k].mem, cases[k].len, cases[k].rate, cases[k].prompt, cases[k].len / 2,
                     cases[k].output, cases[k].len / 2, layouts[l][0], layouts[l][1], layouts[l][2]);
            static scn_scenario s;
            scn_error e;
            ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s\n%s", e.msg, text);
            ck_assert(s.model.sliding_window > 0 && s.model.sliding_layers > 0);
            char what[96];
            snprintf(what, sizeof what, "%s mem %s", cases[k].model, cases[k].mem);
            sim_choice c = sim_choice_first(&s);
            steps += same_both_ways(&s, &c, what);
        }
    ck_assert(steps > 0);
}
END_TEST

/* A request waiting for a free seat with the prefix cache on (docs/simulator.md, "Fast-forward",
 * "Requests waiting with the prefix cache"): the run watches the head's prefix match instead of
 * attempting its admission every step. A pool of a few hundred blocks, twelve prefix groups
 * (whose unreferenced prefix blocks the running sequences' growth evicts), overload; the
 * continuous scheduler (a prefill step attempts before the decode step grows), the chunked one
 * and the continuous one with prefill rows in the decode step (both attempt after the growth),
 * plain and no-evict admission, block sizes 8 and 16, and one to three replicas' worth of
 * requests. The counts show that the runs really carried such steps, and that both of the
 * watch's events happened in them. */
START_TEST(prefix_watch_same_both_ways)
{
    static const char *const sched[] = {"continuous", "chunked", "continuous"};
    sim_ff_counts sum = {0};
    long steps = 0;
    for (int k = 0; k < 3; k++)
        for (int ne = 0; ne < 2; ne++)
            for (int b = 0; b < 3; b++) {
                char text[1400];
                snprintf(text, sizeof text,
                         "model: llama-3-8b\nhardware: a100-80g\n"
                         "deployment: {max_num_seqs: 48, max_num_batched_tokens: %d, max_model_len: 4096}\n"
                         "workload:\n  requests: 300\n  arrival: {process: poisson, rate: %s}\n"
                         "  prompt_tokens: {dist: lognormal, mean: 250, sigma: 0.7, max: 1500}\n"
                         "  output_tokens: {dist: lognormal, mean: 200, sigma: 0.8, max: 900}\n"
                         "  shared_prefix: {groups: 12, tokens: 384, share: 0.9}\n"
                         "options: {kv_layout: paged, block_size: %d, prefix_cache: on, scheduler: %s}\n",
                         b == 2 ? 256 : 2048, b ? "30/s" : "12/s", b ? 16 : 8, sched[k]);
                static scn_scenario s;
                scn_error e;
                ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s\n%s", e.msg, text);
                s.engine.no_evict = ne;
                if (k == 2) s.engine.prefill_mix = SCN_PREFILL_MIX_ALWAYS;
                char what[64];
                snprintf(what, sizeof what, "prefix watch %s%s%s bs %d budget %d", sched[k], k == 2 ? " mixed" : "",
                         ne ? " no-evict" : "", b ? 16 : 8, b == 2 ? 256 : 2048);
                sim_choice c = sim_choice_first(&s);
                long blocks = (b ? 6400 : 7200) / c.block_size;
                sim_ff_counts one = {0};
                steps += same_both_ways_on(&s, &c, what, blocks, &one);
                sum.runs += one.runs; sum.steps += one.steps; sum.watched += one.watched;
                sum.fired_commit += one.fired_commit; sum.fired_evict += one.fired_evict;
            }
    ck_assert(steps > 0);
    ck_assert_msg(sum.watched > 1000 && sum.fired_evict > 0, "watched %ld, fired by eviction %ld", sum.watched, sum.fired_evict);
}
END_TEST

/* The watch's other event: the first block of the waiting request's match is registered by a
 * running sequence. Requests of one conversation in a trace share a token stream, so B's prompt
 * (positions 0-783 of the stream: 49 blocks of 16) is A's prompt (64 tokens) and then A's
 * output: each block A fills is the next block of B's match. With F (160 tokens, then decoding)
 * running beside A in a pool of 60 blocks, B, arriving during the first 16 decode steps, needs
 * 49 - 4 blocks beyond its 4 hits while 60 - 5 - 11 = 44 are free; when A fills block 4 its
 * hits are 5 and 44 suffice, until the next step's growth takes two more. So B is admitted just
 * after that commit, which only the watch's commit event tells the run (the prefill step
 * attempts before the growth); later fills never suffice again. Pools around it, both schedulers,
 * plain and no-evict admission. */
START_TEST(prefix_watch_commit_same_both_ways)
{
    char trace[1024];   /* t_write's path is overwritten by the next (t_load's) */
    snprintf(trace, sizeof trace, "%s", t_write("ff-watch.csv",
             "arrival_s,prompt_tokens,output_tokens,prefix_id,conversation_id\n"
             "0.0,64,400,-1,7\n0.0,160,300,-1,1\n0.06,784,20,-1,7\n"));
    static const char *const sched[] = {"continuous", "chunked"};
    sim_ff_counts sum = {0};
    for (int k = 0; k < 2; k++)
        for (int ne = 0; ne < 2; ne++)
            for (long pool = 59; pool <= 61; pool++) {
                char text[2048];
                snprintf(text, sizeof text,
                         "model: llama-3-8b\nhardware: a100-80g\n"
                         "deployment: {max_num_seqs: 16, max_model_len: 4096}\n"
                         "workload:\n  arrival: {process: trace, trace: '%s'}\n"
                         "options: {kv_layout: paged, block_size: 16, prefix_cache: on, scheduler: %s}\n",
                         trace, sched[k]);
                static scn_scenario s;
                scn_error e;
                ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s\n%s", e.msg, text);
                s.engine.no_evict = ne;
                sim_choice c = sim_choice_first(&s);
                char what[80];
                snprintf(what, sizeof what, "prefix watch commit %s%s pool %ld", sched[k], ne ? " no-evict" : "", pool);
                sim_ff_counts one = {0};
                ck_assert(same_both_ways_on(&s, &c, what, pool, &one) > 0);
                sum.fired_commit += one.fired_commit;
                sum.watched += one.watched;
            }
    ck_assert_msg(sum.fired_commit > 0 && sum.watched > 0, "watched %ld, fired by a commit %ld", sum.watched, sum.fired_commit);
}
END_TEST

/* Random traces whose requests share token streams (a few conversation ids reused while others
 * of the same id still run, a few prefix groups) on KV-bound prefix-cached pools: the watch's
 * two events in every combination of engine profile (async scheduling, prefill mixing),
 * scheduler, no-evict admission, block size, seats, step budget and replicas. */
START_TEST(prefix_watch_random_traces_same_both_ways)
{
    static const char *const engines[] = {"kvplan", "vllm", "sglang", "trtllm-v0", "vllm-v0"};
    static const char *const sched[] = {"continuous", "chunked"};
    unsigned long long x = 3;
    sim_ff_counts sum = {0};
    long steps = 0;
    for (int k = 0; k < 40; k++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        unsigned r = (unsigned)(x >> 33);
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        unsigned r2 = (unsigned)(x >> 33);
        int bs = (int[]){4, 8, 16, 32}[r % 4], seqs = (int[]){8, 32, 128}[(r >> 2) % 3];
        int budget = (int[]){128, 512, 2048, 8192}[(r >> 4) % 4], ptoks = (int[]){64, 300, 1000}[(r >> 8) % 3];
        double rate = (double[]){5, 15, 60}[(r >> 10) % 3];
        int reps = (r >> 14) % 4 == 0 ? 2 : 1;
        static char csv[16384];
        int len = snprintf(csv, sizeof csv, "arrival_s,prompt_tokens,output_tokens,prefix_id,conversation_id\n");
        double at = 0;
        unsigned long long y = x;
        for (int i = 0; i < 250; i++) {
            y = y * 6364136223846793005ULL + 1442695040888963407ULL;
            unsigned q = (unsigned)(y >> 33);
            at += (double)(q % 1000) / 1000.0 * 3.0 / rate;
            int conv = (q >> 27) % 4 ? (int)((q >> 10) % 6) : -1, pre = (q >> 13) % 3 == 0 ? (int)((q >> 15) % 3) : -1;
            len += snprintf(csv + len, sizeof csv - (size_t)len, "%.6f,%d,%d,%d,%d\n", at, 16 + (int)((q >> 17) % 1500),
                            1 + (int)((q >> 5) % 600), pre, conv);
        }
        ck_assert((size_t)len < sizeof csv);
        char trace[1024], text[2048];
        snprintf(trace, sizeof trace, "%s", t_write("ff-watch-random.csv", csv));
        snprintf(text, sizeof text,
                 "model: llama-3-8b\nhardware: a100-80g\nengine: %s\n"
                 "deployment: {replicas: %d, max_num_seqs: %d, max_num_batched_tokens: %d, max_model_len: 4096}\n"
                 "workload:\n  arrival: {process: trace, trace: '%s'}\n"
                 "  shared_prefix: {groups: 3, tokens: %d, share: 0.8}\n"
                 "options: {kv_layout: paged, block_size: %d, prefix_cache: on, scheduler: %s}\n",
                 engines[(r >> 16) % 5], reps, seqs, budget, trace, ptoks, bs, sched[(r >> 19) % 2]);
        static scn_scenario s;
        scn_error e;
        ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s\n%s", e.msg, text);
        if ((r >> 22) % 3 == 0) s.engine.no_evict = true;
        if ((r >> 24) % 3 == 0) s.engine.prefill_mix = (r >> 26) % 2 ? SCN_PREFILL_MIX_ALWAYS : SCN_PREFILL_MIX_NEVER;
        char what[48];
        snprintf(what, sizeof what, "prefix watch random trace %d", k);
        sim_choice c = sim_choice_first(&s);
        steps += same_both_ways_on(&s, &c, what, (2400 + (long)((r2 >> 20) % 6000)) / bs, &sum);
    }
    ck_assert(steps > 0);
    ck_assert_msg(sum.watched > 1000 && sum.fired_commit > 0 && sum.fired_evict > 0, "watched %ld, commits %ld, evictions %ld",
                  sum.watched, sum.fired_commit, sum.fired_evict);
}
END_TEST

/* Mixed steps (docs/simulator.md, "Fast-forward", "Mixed steps"): the run keeps its slots as the
 * step's decode rows while the scheduler adds the chunks of the prompts being prefilled and the
 * prompts it admits, and prices the step from the slots' sums (the executor's mixed_time) or
 * from the whole batch. The chunked scheduler and continuous steps that mix whole prompts in
 * (prefill_mix always), with step budgets from 64 tokens (prompts in many chunks, the decode
 * rows near the budget) to 4,096, prefix caching on and off, no-evict admission, pools tight
 * enough to preempt, two replicas; on an H100 (every decode row splits once: priced from sums)
 * and an A100 with few rows (their splits vary: priced from the batch), and two models whose
 * windows free KV as prefills are committed (gpt-oss-20b, mistral-7b). The counts show that
 * the runs carried mixed steps both ways of pricing them. */
START_TEST(mixed_steps_same_both_ways)
{
    static const struct { const char *model, *hw, *mem; int seqs, budget, bs, prompt, output, len; } cases[] = {
        {"llama-3-8b", "h100-sxm", "0.9", 64, 256, 16, 600, 200, 4096},
        {"llama-3-8b", "h100-sxm", "0.9", 48, 64, 8, 300, 150, 4096},
        {"llama-3-8b", "h100-sxm", "0.3", 128, 1024, 16, 900, 300, 4096},
        {"llama-3-8b", "h100-sxm", "0.25", 256, 4096, 32, 1200, 300, 4096},
        {"llama-3-8b", "a100-80g", "0.3", 8, 512, 16, 700, 200, 4096},
        {"gpt-oss-20b", "h100-sxm", "0.35", 64, 512, 16, 600, 400, 4096},
        {"mistral-7b", "h100-sxm", "0.6", 32, 1024, 16, 5000, 800, 16384},
        {"mistral-7b", "h100-sxm", "0.3", 64, 512, 16, 6000, 600, 16384},
        {"gpt-oss-20b", "h100-sxm", "0.25", 128, 256, 16, 3000, 800, 8192},
    };
    static const char *const sched[] = {"chunked", "continuous"};
    sim_ff_counts sum = {0};
    long steps = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int v = 0; v < 4; v++) {
            bool prefix = v & 1, chunked = !(v & 2);
            char text[1600];
            snprintf(text, sizeof text,
                     "model: %s\nhardware: %s\n"
                     "deployment: {replicas: %d, max_num_seqs: %d, max_num_batched_tokens: %d, gpu_memory_utilization: %s, "
                     "max_model_len: %d}\n"
                     "workload:\n  requests: 250\n  arrival: {process: poisson, rate: %s}\n"
                     "  prompt_tokens: {dist: lognormal, mean: %d, sigma: 0.8, max: %d}\n"
                     "  output_tokens: {dist: lognormal, mean: %d, sigma: 0.8, max: %d}\n"
                     "  shared_prefix: {groups: 4, tokens: 384, share: 0.7}\n"
                     "options: {kv_layout: paged, block_size: %d, prefix_cache: %s, scheduler: %s}\n",
                     cases[k].model, cases[k].hw, k == 2 && v == 1 ? 2 : 1, cases[k].seqs,
                     chunked ? cases[k].budget : cases[k].budget > 2048 ? cases[k].budget : 2048, cases[k].mem, cases[k].len,
                     k == 1 ? "20/s" : "40/s", cases[k].prompt, cases[k].len / 2, cases[k].output, cases[k].len / 2, cases[k].bs,
                     prefix ? "on" : "off", sched[chunked ? 0 : 1]);
            static scn_scenario s;
            scn_error e;
            ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s\n%s", e.msg, text);
            if (!chunked) s.engine.prefill_mix = SCN_PREFILL_MIX_ALWAYS;
            s.engine.no_evict = k == 3;
            char what[96];
            snprintf(what, sizeof what, "mixed %s %s budget %d %s%s", cases[k].model, cases[k].hw, cases[k].budget,
                     chunked ? "chunked" : "continuous mixed", prefix ? " prefix" : "");
            sim_choice c = sim_choice_first(&s);
            steps += same_both_ways_on(&s, &c, what, 0, &sum);
        }
    ck_assert(steps > 0);
    ck_assert_msg(sum.mixed > 5000 && sum.mixed_priced > 2000 && sum.mixed - sum.mixed_priced > 500,
                  "mixed steps %ld, priced from sums %ld", sum.mixed, sum.mixed_priced);
}
END_TEST

/* Swap preemption inside a run of mixed steps: a prefill row that the scheduler's rows cannot
 * grow swaps itself out (grow_or_preempt's victim is the row), so the step keeps only the run's
 * decode rows yet waits for the swap-out it charged, as a formed step does (start_formed adds
 * sim_sched_wait_s to every step). Llama-3.1-8B on one L40S, 1024-token chunks, long prompts
 * at a load that fills the pool: the fast-forward once timed such a step without the swap
 * (E2E 10.6 ms short for the requests in flight). */
START_TEST(mixed_steps_swap_same_both_ways)
{
    const char *text = "model: llama-3.1-8b\nhardware: l40s\nengine: vllm\n"
                       "deployment: {max_num_batched_tokens: 1024, max_model_len: 16384}\n"
                       "workload:\n  requests: 400\n  arrival: {process: poisson, rate: 8/s}\n"
                       "  prompt_tokens: {dist: lognormal, mean: 1500, sigma: 0.8, max: 12000}\n"
                       "  output_tokens: {dist: lognormal, mean: 300, sigma: 0.8, max: 3000}\n"
                       "options: {scheduler: chunked, prefix_cache: off, preemption: swap}\n";
    static scn_scenario s;
    scn_error e;
    ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s", e.msg);
    sim_choice c = sim_choice_first(&s);
    ck_assert_int_eq(c.preemption, SCN_PREEMPT_SWAP);
    sim_ff_counts sum = {0};
    ck_assert(same_both_ways_on(&s, &c, "mixed steps swap", 0, &sum) > 0);
    ck_assert_msg(sum.mixed > 0, "no mixed step was fast-forwarded");
    sim_metrics m;
    digest d;
    char err[512];
    ck_assert_int_eq(run_mode(&s, &c, false, 0, &m, &d, NULL, err), SIM_OK);
    ck_assert_msg(m.swaps > 0, "no sequence was swapped out");
}
END_TEST

/* SGLang's admission reservation (engine adm_reserve; docs/simulator.md, "Fast-forward"): the
 * ratio falls every decode step, which the run applies step by step as the scheduler does, and a
 * request that waits goes to the scheduler (the reservation shrinks every step). The `sglang`
 * profile (chunked, separate prefill steps) and its reservation under the continuous scheduler,
 * with prefill rows mixed into decode steps or not, prefix caching on and off, pools from tight
 * (preemptions, so the ratio's re-estimate after a retraction) to roomy, one and two replicas,
 * and a decay of 6 steps besides SGLang's 600 (so runs cross the floor). The counts show that
 * runs were carried and that requests were preempted. */
START_TEST(admission_reserve_same_both_ways)
{
    static const char *const sched[] = {"chunked", "continuous"};
    sim_ff_counts sum = {0};
    long steps = 0, preempted = 0;
    for (int k = 0; k < 2; k++)
        for (int mix = 0; mix < 2; mix++)
            for (int v = 0; v < 4; v++) {
                bool prefix = v & 1, fast = v & 2;
                char text[1400];
                snprintf(text, sizeof text,
                         "model: llama-3-8b\nhardware: h100-sxm\nengine: sglang\n"
                         "deployment: {replicas: %d, max_num_seqs: 128, max_num_batched_tokens: 1024, max_model_len: 4096}\n"
                         "workload:\n  requests: 300\n  arrival: {process: poisson, rate: %s}\n"
                         "  prompt_tokens: {dist: lognormal, mean: 400, sigma: 0.8, max: 2000}\n"
                         "  output_tokens: {dist: lognormal, mean: 250, sigma: 0.9, max: 1500}\n"
                         "  shared_prefix: {groups: 4, tokens: 256, share: 0.6}\n"
                         "options: {kv_layout: paged, block_size: 16, prefix_cache: %s, scheduler: %s}\n",
                         v == 1 ? 2 : 1, v & 1 ? "25/s" : "8/s", prefix ? "on" : "off", sched[k]);
                static scn_scenario s;
                scn_error e;
                ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s\n%s", e.msg, text);
                ck_assert(s.engine.adm_reserve);
                s.engine.prefill_mix = mix ? SCN_PREFILL_MIX_ALWAYS : SCN_PREFILL_MIX_NEVER;
                if (fast) s.engine.adm_decay_steps = 6;
                char what[96];
                snprintf(what, sizeof what, "reserve %s%s%s%s", sched[k], mix ? " mixed" : "", prefix ? " prefix" : "",
                         fast ? " fast decay" : "");
                sim_choice c = sim_choice_first(&s);
                for (long blocks = 250; blocks <= 1000; blocks *= 4) {
                    sim_ff_counts one = {0};
                    steps += same_both_ways_on(&s, &c, what, blocks, &one);
                    sum.runs += one.runs;
                    sum.steps += one.steps;
                    sim_metrics m;
                    digest d;
                    char err[512];
                    ck_assert_int_eq(run_mode(&s, &c, false, blocks, &m, &d, NULL, err), SIM_OK);
                    preempted += m.preemptions;
                }
            }
    ck_assert(steps > 0);
    ck_assert_msg(sum.runs > 100 && sum.steps > 10000 && preempted > 0, "runs %ld, steps %ld, preempted %ld", sum.runs,
                  sum.steps, preempted);
}
END_TEST

Suite *suite_fastfwd(void)
{
    Suite *s = suite_create("fastfwd");
    TCase *tc = tcase_create("fastfwd");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, archetypes_same_both_ways);
    tcase_add_test(tc, random_scenarios_same_both_ways);
    tcase_add_test(tc, offload_and_swap_same_both_ways);
    tcase_add_test(tc, multistep_same_both_ways);
    tcase_add_test(tc, sliding_window_same_both_ways);
    tcase_add_test(tc, prefix_watch_same_both_ways);
    tcase_add_test(tc, prefix_watch_commit_same_both_ways);
    tcase_add_test(tc, prefix_watch_random_traces_same_both_ways);
    tcase_add_test(tc, mixed_steps_same_both_ways);
    tcase_add_test(tc, mixed_steps_swap_same_both_ways);
    tcase_add_test(tc, admission_reserve_same_both_ways);
    suite_add_tcase(s, tc);
    return s;
}
