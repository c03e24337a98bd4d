/* scn_bind_scenario.c: binds a resolved scenario tree (model and hardware already mappings)
 * to scn_scenario: deployment, workload, SLO and the option space. */
#include "scn_bind.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIG 1000000000L

static const char *const TOP_KEYS[] = {"name", "extends", "model", "hardware", "engine", "deployment", "workload", "slo",
                                       "options", "objective", "price", "quality", "seed", NULL};
static const char *const PRICE_KEYS[] = {"usd_per_gpu_hour", NULL};
static const char *const QUALITY_KEYS[] = {"allow_kv_dtype", "allow_window", "allow_gqa", "allow_weight_dtype", NULL};
static const char *const DEPLOY_KEYS[] = {"tensor_parallel", "replicas", "router", "gpu_memory_utilization",
                                          "max_model_len", "max_num_seqs", "max_num_batched_tokens", "expert_parallel",
                                          "attention_data_parallel", "expert_skew", "disaggregation", "scheduler_steps",
                                          "max_queued_requests", NULL};
static const char *const WORK_KEYS[] = {"requests", "arrival", "prompt_tokens", "output_tokens",
                                        "shared_prefix", "conversation", "measure", "max_tokens", NULL};
/* What the client sends as max_tokens (workload.max_tokens): nothing, or the request's output. */
static const char *const MAX_TOKENS_NAMES[] = {"unset", "output", NULL};
static const char *const ARRIVAL_KEYS[] = {"process", "rate", "cv", "trace", "concurrency", "think_time", "via", NULL};
/* How offline prompts reach the engine (workload.arrival.via). */
static const char *const VIA_NAMES[] = {"in-process", "server", NULL};
static const char *const MEASURE_KEYS[] = {"skip_first", "skip_last", "by", NULL};
/* What the window is cut by (workload.measure.by): request numbers, or the run's time. */
static const char *const MEASURE_BY_NAMES[] = {"requests", "time", NULL};
static const char *const DIST_KEYS[] = {"dist", "value", "mean", "sigma", "min", "max", "file", NULL};
static const char *const PREFIX_KEYS[] = {"groups", "tokens", "share", "popularity", NULL};
static const char *const CONV_KEYS[] = {"turns", "think_time", NULL};
static const char *const OPT_KEYS[] = {"kv_layout", "block_size", "prefix_cache", "kv_dtype", "attention",
                                       "scheduler", "window", "kv_quant", "max_num_seqs", "max_num_batched_tokens",
                                       "tensor_parallel", "replicas", "kv_heads", "weight_dtype", "engine", "hardware", "speculative",
                                       "kv_offload", "kv_offload_capacity", "preemption", "swap_space",
                                       "disaggregation", NULL};
static const char *const OFFLOAD_CAP_KEYS[] = {"cpu", "disk", "remote", NULL};
static const char *const WINDOW_KEYS[] = {"sink", "window", NULL};
static const char *const SPEC_KEYS[] = {"method", "k", "model", "acceptance", "mean_accepted", "decay", NULL};
static const char *const QUANT_KEYS[] = {"granularity", "group_size", "scale_dtype", "zero_point", NULL};

static int fail_at(scn_ctx *c, const scn_node *at, const char *path, const char *msg)
{
    scn_fail(c->err, SCN_E_DATA, at, path, "%s", msg);
    return -1;
}

static int sub_map(scn_ctx *c, const scn_node *m, const char *path, const char *key,
                   const char *const *keys, const scn_node **out, char *full, size_t n)
{
    *out = scn_map_get(m, key);
    scn_path_join(full, n, path, key);
    if (!*out) return 0;
    return scn_expect_map(c, *out, full) || scn_check_keys(c, *out, full, keys);
}

/* ---- engine: the loader resolved it (default vllm) to a mapping ---- */
static int bind_engine(scn_ctx *c, const scn_node *root, scn_scenario *s)
{
    scn_engine e;
    const scn_node *m = scn_map_get(root, "engine");
    if (!m) return fail_at(c, root, "engine", "missing engine profile");
    if (scn_bind_engine(c, m, "engine", &e)) return -1;
    scn_engine_apply(s, &e);
    return 0;
}

/* ---- deployment ---- */
/* Whether the engine chunks prefills for this model and max_model_len, and its budget
 * (scn_engine_chunks): an unchunked V0 scheduler takes a whole prompt in one step, so its
 * default budget is at least max_model_len (vLLM SchedulerConfig: max(max_model_len, 2048)),
 * and V0 chunked by itself past 32K of context; a budget the deployment gives is kept. The
 * scenario's copy of the engine records the outcome (options.scheduler's default follows it). */
static void cover_context(scn_scenario *s, bool budget_given)
{
    scn_deployment *d = &s->deployment;
    int budget = d->max_num_batched_tokens;
    s->engine.chunked_prefill =
        scn_engine_chunks(&s->engine, &s->model, d->max_model_len, d->scheduler_steps > 1, budget_given, &budget);
    d->max_num_batched_tokens = budget;
}

static int bind_deployment(scn_ctx *c, const scn_node *root, scn_scenario *s)
{
    scn_deployment *d = &s->deployment;
    d->tensor_parallel = 1;
    d->replicas = 1;
    d->router = SCN_ROUTER_LEAST_OUTSTANDING;
    d->gpu_memory_utilization = 0.90;
    d->max_model_len = s->model.max_position;
    /* The engine's own defaults for this GPU (batch_defaults). */
    scn_engine_batch_defaults(&s->engine, &s->hardware, &d->max_num_seqs, &d->max_num_batched_tokens);
    d->expert_parallel = d->attention_dp = 1;
    d->expert_skew = 0;
    d->scheduler_steps = 1;
    d->max_queued_requests = 0;   /* unbounded: only the simulator's guard (SIM_MAX_WAITING) */
    char p[256];
    const scn_node *m;
    if (sub_map(c, root, "", "deployment", DEPLOY_KEYS, &m, p, sizeof p)) return -1;
    if (!m) {
        cover_context(s, false);
        return 0;
    }
    d->gpu_memory_utilization_given = scn_map_get(m, "gpu_memory_utilization") != NULL;
    int router = (int)d->router;
    if (scn_get_enum(c, m, p, "router", SCN_ROUTER_NAMES, &router)) return -1;
    d->router = (scn_router)router;
    if (scn_get_int(c, m, p, "tensor_parallel", 1, 1024, &d->tensor_parallel) ||
        scn_get_int(c, m, p, "replicas", 1, 100000, &d->replicas) ||
        scn_get_qty(c, m, p, "gpu_memory_utilization", SCN_UNIT_FRACTION, false, &d->gpu_memory_utilization) ||
        scn_get_int(c, m, p, "max_model_len", 1, BIG, &d->max_model_len) ||
        scn_get_int(c, m, p, "max_num_seqs", 1, 1000000, &d->max_num_seqs) ||
        scn_get_int(c, m, p, "max_num_batched_tokens", 1, BIG, &d->max_num_batched_tokens) ||
        scn_get_int(c, m, p, "scheduler_steps", 1, 1024, &d->scheduler_steps) ||
        scn_get_int(c, m, p, "max_queued_requests", 1, BIG, &d->max_queued_requests) ||
        scn_get_int(c, m, p, "expert_parallel", 1, 4096, &d->expert_parallel) ||
        scn_get_int(c, m, p, "attention_data_parallel", 1, 4096, &d->attention_dp) ||
        scn_get_qty(c, m, p, "expert_skew", SCN_UNIT_FRACTION, true, &d->expert_skew))
        return -1;
    d->max_num_seqs_given = scn_map_get(m, "max_num_seqs") != NULL;
    d->max_num_batched_tokens_given = scn_map_get(m, "max_num_batched_tokens") != NULL;
    cover_context(s, d->max_num_batched_tokens_given);
    char f[256];
    int gpus = d->tensor_parallel * d->attention_dp;
    if (d->expert_parallel > 1 && s->model.experts == 0)
        return fail_at(c, scn_map_get(m, "expert_parallel"), scn_path_join(f, sizeof f, p, "expert_parallel"),
                       "the model has no routed experts to shard");
    if (d->expert_parallel > 1 && (s->model.experts % d->expert_parallel || gpus % d->expert_parallel))
        return fail_at(c, scn_map_get(m, "expert_parallel"), scn_path_join(f, sizeof f, p, "expert_parallel"),
                       "must divide the routed experts and the replica's GPUs (tensor_parallel x attention_data_parallel)");
    if (d->expert_skew > 0 && s->model.experts == 0)
        return fail_at(c, scn_map_get(m, "expert_skew"), scn_path_join(f, sizeof f, p, "expert_skew"),
                       "the model has no routed experts");
    if (d->gpu_memory_utilization > 1)
        return fail_at(c, scn_map_get(m, "gpu_memory_utilization"),
                       scn_path_join(f, sizeof f, p, "gpu_memory_utilization"), "must be a fraction in (0, 1]");
    if (s->model.heads % d->tensor_parallel)
        return fail_at(c, scn_map_get(m, "tensor_parallel"), scn_path_join(f, sizeof f, p, "tensor_parallel"),
                       "the model's query heads must divide evenly across tensor-parallel ranks");
    if (d->max_model_len > s->model.max_position)
        return fail_at(c, scn_map_get(m, "max_model_len"), scn_path_join(f, sizeof f, p, "max_model_len"),
                       "exceeds the model's max_position");
    return scn_bind_disagg(c, m, p, s);
}

/* ---- workload ---- */
/* A distribution is a mapping, or a bare whole number meaning a fixed length. */
static int bind_dist(scn_ctx *c, const scn_node *w, const char *wpath, const char *key, scn_dist *o)
{
    char p[256];
    scn_path_join(p, sizeof p, wpath, key);
    const scn_node *v = scn_map_get(w, key);
    memset(o, 0, sizeof *o);
    if (v->kind == SCN_NODE_SCALAR) {
        long x;
        if (scn_parse_int(c, v, p, 1, BIG, &x)) return -1;
        o->kind = SCN_DIST_FIXED;
        o->mean = (double)x;
        o->min = o->max = (int)x;
        return 0;
    }
    if (scn_expect_map(c, v, p) || scn_check_keys(c, v, p, DIST_KEYS) || scn_require(c, v, p, "dist")) return -1;
    int k = 0;
    if (scn_get_enum(c, v, p, "dist", SCN_DIST_NAMES, &k)) return -1;
    o->kind = (scn_dist_kind)k;
    o->min = 1;
    char f[256];
    switch (o->kind) {
    case SCN_DIST_FIXED: {
        int x = 0;
        if (scn_require(c, v, p, "value") || scn_get_int(c, v, p, "value", 1, BIG, &x)) return -1;
        o->mean = x; o->min = o->max = x;
        return 0;
    }
    case SCN_DIST_UNIFORM:
        if (scn_require(c, v, p, "min") || scn_require(c, v, p, "max") ||
            scn_get_int(c, v, p, "min", 1, BIG, &o->min) || scn_get_int(c, v, p, "max", 1, BIG, &o->max))
            return -1;
        if (o->max < o->min)
            return fail_at(c, scn_map_get(v, "max"), scn_path_join(f, sizeof f, p, "max"), "must be at least min");
        o->mean = (o->min + o->max) / 2.0;
        return 0;
    case SCN_DIST_NORMAL:
    case SCN_DIST_LOGNORMAL: {
        if (scn_require(c, v, p, "mean") || scn_require(c, v, p, "sigma")) return -1;
        long mean = 0;
        if (scn_get_long(c, v, p, "mean", 1, BIG, &mean)) return -1;
        o->mean = (double)mean;
        if (scn_get_qty(c, v, p, "sigma", SCN_UNIT_FRACTION, true, &o->sigma) ||
            scn_get_int(c, v, p, "min", 1, BIG, &o->min) || scn_get_int(c, v, p, "max", 1, BIG, &o->max))
            return -1;
        if (o->max && o->max < o->min)
            return fail_at(c, scn_map_get(v, "max"), scn_path_join(f, sizeof f, p, "max"), "must be at least min");
        return 0;
    }
    case SCN_DIST_EXPONENTIAL: {
        /* Bounds are whole tokens; the mean must lie strictly inside them (at a bound the law
         * degenerates to a point mass, outside it no law on [min, max] has that mean). */
        if (scn_require(c, v, p, "mean") || scn_get_qty(c, v, p, "mean", SCN_UNIT_FRACTION, true, &o->mean) ||
            scn_get_int(c, v, p, "min", 1, BIG, &o->min) || scn_get_int(c, v, p, "max", 1, BIG, &o->max))
            return -1;
        if (o->max && o->max <= o->min)
            return fail_at(c, scn_map_get(v, "max"), scn_path_join(f, sizeof f, p, "max"), "must be above min");
        if (!(o->mean > o->min) || (o->max && !(o->mean < o->max))) {
            char msg[96];
            if (o->max) snprintf(msg, sizeof msg, "must lie strictly between min (%d) and max (%d)", o->min, o->max);
            else snprintf(msg, sizeof msg, "must be above min (%d)", o->min);
            return fail_at(c, scn_map_get(v, "mean"), scn_path_join(f, sizeof f, p, "mean"), msg);
        }
        return 0;
    }
    case SCN_DIST_EMPIRICAL:
        if (scn_require(c, v, p, "file") || scn_get_str(c, v, p, "file", o->file, sizeof o->file)) return -1;
        return 0;
    }
    return 0;
}

/* One side of the steady-state window: a whole number of requests, or "P%" of them (of the
 * run's time when the window is cut by time, where only a share makes sense). */
static int measure_side(scn_ctx *c, const scn_node *m, const char *path, const char *key, long requests,
                        bool by_time, long *count, double *frac)
{
    const scn_node *v = scn_map_get(m, key);
    if (!v) return 0;
    char p[256];
    scn_path_join(p, sizeof p, path, key);
    size_t len = v->kind == SCN_NODE_SCALAR ? strlen(v->text) : 0;
    if (len && v->text[len - 1] == '%') {
        char msg[160];
        double x;
        if (scn_quantity_parse(v->text, SCN_UNIT_FRACTION, &x, msg, sizeof msg) || !(x >= 0) || x >= 1)
            return fail_at(c, v, p, by_time ? "expected a share of the run's time below 100%, e.g. '10%'"
                                            : "expected a share below 100%, e.g. '10%', or a whole number of requests");
        *frac = x;
        return 0;
    }
    if (by_time) return fail_at(c, v, p, "with by: time the window is cut by shares of the run's time: expected a share such as '10%'");
    return scn_get_long(c, m, path, key, 0, requests, count);
}

static int bind_measure(scn_ctx *c, const scn_node *m, const char *path, scn_workload *w)
{
    const scn_node *ms;
    char f[256];
    if (sub_map(c, m, path, "measure", MEASURE_KEYS, &ms, f, sizeof f)) return -1;
    if (!ms) return 0;
    int by = 0;
    if (scn_get_enum(c, ms, f, "by", MEASURE_BY_NAMES, &by)) return -1;
    w->measure_by_time = by == 1;
    if (measure_side(c, ms, f, "skip_first", w->requests, w->measure_by_time, &w->skip_first, &w->skip_first_frac) ||
        measure_side(c, ms, f, "skip_last", w->requests, w->measure_by_time, &w->skip_last, &w->skip_last_frac))
        return -1;
    if (w->measure_by_time) {
        /* The shares cut the run's span [first send, last completion]; they must leave some of it. */
        if (w->skip_first_frac + w->skip_last_frac >= 1)
            return fail_at(c, ms, f, "skip_first and skip_last together leave no time to measure");
        return 0;
    }
    char ff[256];
    const scn_node *last = scn_map_get(ms, "skip_last");
    if (last && w->arrival == SCN_ARRIVAL_TRACE)
        return fail_at(c, last, scn_path_join(ff, sizeof ff, f, "skip_last"),
                       "a trace's request count is not known in advance; use skip_first only (or by: time)");
    /* The window must keep at least one request (fractions are applied to the request count). */
    double kept = (double)w->requests - (double)w->skip_first - (double)w->skip_last -
                  floor(w->skip_first_frac * (double)w->requests) - floor(w->skip_last_frac * (double)w->requests);
    if (w->arrival != SCN_ARRIVAL_TRACE && kept < 1)
        return fail_at(c, ms, f, "skip_first and skip_last together leave no request to measure");
    return 0;
}

static int bind_workload(scn_ctx *c, const scn_node *root, scn_scenario *s)
{
    scn_workload *w = &s->workload;
    char p[256] = "workload", f[256];
    if (scn_require(c, root, "", "workload")) return -1;
    const scn_node *m = scn_map_get(root, "workload");
    if (scn_expect_map(c, m, p) || scn_check_keys(c, m, p, WORK_KEYS)) return -1;
    w->requests = 1000;
    w->turns = 1;
    if (scn_get_long(c, m, p, "requests", 1, 1000000000000L, &w->requests)) return -1;
    if (scn_require(c, m, p, "arrival")) return -1;
    const scn_node *a;
    if (sub_map(c, m, p, "arrival", ARRIVAL_KEYS, &a, f, sizeof f)) return -1;
    int k = 0;
    if (scn_get_enum(c, a, f, "process", SCN_ARRIVAL_NAMES, &k)) return -1;
    w->arrival = (scn_arrival_kind)k;
    if (w->arrival == SCN_ARRIVAL_TRACE) {
        if (scn_require(c, a, f, "trace") || scn_get_str(c, a, f, "trace", w->trace, sizeof w->trace)) return -1;
    } else if (w->arrival == SCN_ARRIVAL_CLOSED) {
        if (scn_require(c, a, f, "concurrency") || scn_get_int(c, a, f, "concurrency", 1, 10000000, &w->concurrency) ||
            scn_get_qty(c, a, f, "think_time", SCN_UNIT_TIME, true, &w->client_think_time))
            return -1;
    } else if (w->arrival == SCN_ARRIVAL_OFFLINE) {
        /* Every request is waiting at t = 0: handed to the engine in-process (LLM.generate,
         * trtllm-bench), or sent to its server at once (`vllm bench serve --request-rate inf`),
         * whose front end then prepares them one by one (docs/cost-model.md, "Front end"). */
        int via = 0;
        if (scn_get_enum(c, a, f, "via", VIA_NAMES, &via)) return -1;
        w->via_server = via == 1;
    } else if (scn_require(c, a, f, "rate") || scn_get_qty(c, a, f, "rate", SCN_UNIT_RATE, false, &w->rate)) {
        return -1;
    }
    /* Fields of another process are a mistake worth naming, not something to ignore. */
    /* (A leftover rate is tolerated, so `--set workload.arrival.process=closed` works on a
     * scenario written for poisson arrivals.) */
    if (w->arrival != SCN_ARRIVAL_OFFLINE && scn_map_get(a, "via")) {
        char ff[256], msg[160];
        snprintf(msg, sizeof msg, "'via' applies only to process offline (other processes send to the server), not %s",
                 SCN_ARRIVAL_NAMES[k]);
        return fail_at(c, scn_map_get(a, "via"), scn_path_join(ff, sizeof ff, f, "via"), msg);
    }
    static const char *const CLOSED_ONLY[] = {"concurrency", "think_time"};
    for (int i = 0; i < 2 && w->arrival != SCN_ARRIVAL_CLOSED; i++) {
        const scn_node *v = scn_map_get(a, CLOSED_ONLY[i]);
        char ff[256], msg[160];
        snprintf(msg, sizeof msg, "'%s' applies only to process closed, not %s", CLOSED_ONLY[i], SCN_ARRIVAL_NAMES[k]);
        if (v) return fail_at(c, v, scn_path_join(ff, sizeof ff, f, CLOSED_ONLY[i]), msg);
    }
    w->cv = 1.0;
    if (scn_get_qty(c, a, f, "cv", SCN_UNIT_FRACTION, false, &w->cv)) return -1;
    int mt = 0;
    if (scn_get_enum(c, m, p, "max_tokens", MAX_TOKENS_NAMES, &mt)) return -1;
    w->max_tokens_sent = mt == 1;
    if (w->arrival != SCN_ARRIVAL_TRACE) {
        if (scn_require(c, m, p, "prompt_tokens") || bind_dist(c, m, p, "prompt_tokens", &w->prompt) ||
            scn_require(c, m, p, "output_tokens") || bind_dist(c, m, p, "output_tokens", &w->output))
            return -1;
    }
    const scn_node *sp;
    if (sub_map(c, m, p, "shared_prefix", PREFIX_KEYS, &sp, f, sizeof f)) return -1;
    if (sp) {
        if (scn_require(c, sp, f, "groups") || scn_require(c, sp, f, "tokens") ||
            scn_get_int(c, sp, f, "groups", 1, 1000000, &w->prefix_groups) ||
            scn_get_int(c, sp, f, "tokens", 1, BIG, &w->prefix_tokens))
            return -1;
        w->prefix_share = 1.0;
        if (scn_get_qty(c, sp, f, "share", SCN_UNIT_FRACTION, true, &w->prefix_share)) return -1;
        char ff[256];
        if (w->prefix_share > 1)
            return fail_at(c, scn_map_get(sp, "share"), scn_path_join(ff, sizeof ff, f, "share"),
                           "must be a fraction in [0, 1]");
        const scn_node *pop = scn_map_get(sp, "popularity");
        if (pop) {
            scn_path_join(ff, sizeof ff, f, "popularity");
            double z;
            char tail;
            if (pop->kind == SCN_NODE_SCALAR && !strcmp(pop->text, "uniform")) w->prefix_zipf = 0;
            else if (pop->kind == SCN_NODE_SCALAR && sscanf(pop->text, "zipf %lf %c", &z, &tail) == 1 && z > 0 && isfinite(z))
                w->prefix_zipf = z;
            else
                return fail_at(c, pop, ff, "expected 'uniform' or 'zipf S' with S > 0 (e.g. 'zipf 1.1')");
        }
    }
    const scn_node *cv;
    if (sub_map(c, m, p, "conversation", CONV_KEYS, &cv, f, sizeof f)) return -1;
    if (cv && (scn_get_int(c, cv, f, "turns", 1, 10000, &w->turns) ||
               scn_get_qty(c, cv, f, "think_time", SCN_UNIT_TIME, true, &w->think_time)))
        return -1;
    return bind_measure(c, m, p, w);
}

/* ---- SLO: keys are <metric>_p<percentile>, values durations ---- */
static int bind_slo(scn_ctx *c, const scn_node *root, scn_scenario *s)
{
    const scn_node *m = scn_map_get(root, "slo");
    if (!m) return 0;
    if (scn_expect_map(c, m, "slo")) return -1;
    for (int i = 0; i < m->n; i++) {
        const char *key = m->keys[i]->text;
        char metric[16], tail, p[256];
        double pct;
        scn_path_join(p, sizeof p, "slo", key);
        int idx = -1;
        if (sscanf(key, "%15[a-z2]_p%lf%c", metric, &pct, &tail) == 2) {
            for (int j = 0; SCN_METRIC_NAMES[j]; j++) if (!strcmp(metric, SCN_METRIC_NAMES[j])) idx = j;
        }
        if (idx < 0 || !(pct > 0 && pct < 100))
            return fail_at(c, m->keys[i], p, "unknown SLO; expected <metric>_p<percentile> with metric one of "
                                             "ttft, tpot, itl, e2e (e.g. ttft_p99, tpot_p50)");
        if (s->slo.n == SCN_SLO_MAX) return fail_at(c, m->keys[i], p, "too many SLO terms");
        scn_slo_term *t = &s->slo.terms[s->slo.n++];
        t->metric = (scn_metric)idx;
        t->percentile = pct;
        if (scn_get_qty(c, m, "slo", key, SCN_UNIT_TIME, false, &t->limit)) return -1;
    }
    return 0;
}

/* ---- options ---- */
/* Calls item() on each entry of a list, or on a lone scalar as a list of one. */
typedef int (*item_fn)(scn_ctx *c, const scn_node *v, const char *path, int i, scn_options *o);

static int each_item(scn_ctx *c, const scn_node *m, const char *key, item_fn fn, int *count, scn_options *o)
{
    const scn_node *v = scn_map_get(m, key);
    if (!v) return 0;
    char p[256];
    scn_path_join(p, sizeof p, "options", key);
    int n = v->kind == SCN_NODE_SEQ ? v->n : 1;
    if (n == 0) return fail_at(c, v, p, "the list is empty; give at least one choice");
    if (n > SCN_OPT_MAX) return fail_at(c, v, p, "too many choices (at most 16)");
    for (int i = 0; i < n; i++) {
        char ip[280];
        snprintf(ip, sizeof ip, "%s[%d]", p, i);
        if (fn(c, v->kind == SCN_NODE_SEQ ? v->vals[i] : v, ip, i, o)) return -1;
    }
    *count = n;
    return 0;
}

static int it_layout(scn_ctx *c, const scn_node *v, const char *p, int i, scn_options *o)
{ int k; if (scn_parse_enum(c, v, p, SCN_LAYOUT_NAMES, &k)) return -1; o->layout[i] = (scn_layout)k; return 0; }
static int it_attn(scn_ctx *c, const scn_node *v, const char *p, int i, scn_options *o)
{ int k; if (scn_parse_enum(c, v, p, SCN_ATTN_NAMES, &k)) return -1; o->attention[i] = (scn_attention)k; return 0; }
static int it_sched(scn_ctx *c, const scn_node *v, const char *p, int i, scn_options *o)
{ int k; if (scn_parse_enum(c, v, p, SCN_SCHED_NAMES, &k)) return -1; o->scheduler[i] = (scn_scheduler)k; return 0; }
static int it_prefix(scn_ctx *c, const scn_node *v, const char *p, int i, scn_options *o)
{ return scn_parse_bool(c, v, p, &o->prefix_cache[i]); }
static int it_block(scn_ctx *c, const scn_node *v, const char *p, int i, scn_options *o)
{
    long x;
    if (scn_parse_int(c, v, p, 1, 65536, &x)) return -1;
    o->block_size[i] = (int)x;
    return 0;
}
static int it_dtype(scn_ctx *c, const scn_node *v, const char *p, int i, scn_options *o)
{
    if (v->kind == SCN_NODE_SCALAR && scn_dtype_parse(v->text, &o->kv_dtype[i]) == 0) return 0;
    int k;
    if (scn_parse_enum(c, v, p, SCN_DTYPE_NAMES, &k)) return -1;
    o->kv_dtype[i] = (scn_dtype)k;
    return 0;
}
/* Whole-number deployment lists share one reader, with the list chosen by path. */
static int it_count(scn_ctx *c, const scn_node *v, const char *p, int i, scn_options *o)
{
    long x;
    if (scn_parse_int(c, v, p, 1, 100000000, &x)) return -1;
    int *dst = strstr(p, "max_num_seqs") ? o->max_num_seqs : strstr(p, "max_num_batched_tokens") ? o->max_num_batched_tokens
             : strstr(p, "tensor_parallel") ? o->tensor_parallel : strstr(p, "replicas") ? o->replicas : o->kv_heads;
    dst[i] = (int)x;
    return 0;
}

static int it_offload(scn_ctx *c, const scn_node *v, const char *p, int i, scn_options *o)
{ int k; if (scn_parse_enum(c, v, p, SCN_OFFLOAD_NAMES, &k)) return -1; o->kv_offload[i] = (scn_offload)k; return 0; }
static int it_preempt(scn_ctx *c, const scn_node *v, const char *p, int i, scn_options *o)
{ int k; if (scn_parse_enum(c, v, p, SCN_PREEMPT_NAMES, &k)) return -1; o->preemption[i] = (scn_preemption)k; return 0; }

/* options.kv_offload_capacity and swap_space; then whether every hardware profile the scenario
 * may run on has the tiers its offload and preemption choices move KV to (docs/scenarios.md,
 * "options"). */
static int bind_offload(scn_ctx *c, const scn_node *m, scn_scenario *s)
{
    scn_options *o = &s->options;
    const scn_node *cap;
    char p[256];
    if (sub_map(c, m, "options", "kv_offload_capacity", OFFLOAD_CAP_KEYS, &cap, p, sizeof p) ||
        (cap && (scn_get_qty(c, cap, p, "cpu", SCN_UNIT_BYTES, false, &o->offload_cpu_bytes) ||
                 scn_get_qty(c, cap, p, "disk", SCN_UNIT_BYTES, false, &o->offload_disk_bytes) ||
                 scn_get_qty(c, cap, p, "remote", SCN_UNIT_BYTES, false, &o->offload_remote_bytes))) ||
        scn_get_qty(c, m, "options", "swap_space", SCN_UNIT_BYTES, false, &o->swap_space))
        return -1;
    bool cpu = false, disk = false, remote = false, swap = false;
    for (int i = 0; i < o->n_offload; i++) {
        cpu |= o->kv_offload[i] != SCN_OFFLOAD_OFF;
        disk |= scn_offload_disk(o->kv_offload[i]);
        remote |= scn_offload_remote(o->kv_offload[i]);
    }
    bool all_swap = o->n_preempt > 0, paged = false, preempting = false;
    for (int i = 0; i < o->n_preempt; i++) {
        swap |= o->preemption[i] == SCN_PREEMPT_SWAP;
        all_swap &= o->preemption[i] == SCN_PREEMPT_SWAP;
    }
    for (int i = 0; i < o->n_layout; i++) paged |= o->layout[i] == SCN_LAYOUT_PAGED;
    for (int i = 0; i < o->n_sched; i++) preempting |= o->scheduler[i] != SCN_SCHED_STATIC;
    /* Swap moves a sequence's blocks and happens only when a scheduler preempts: when every
     * preemption choice is swap, some layout and scheduler must allow it (sim/choice.c). */
    if (all_swap && (!paged || !preempting))
        return fail_at(c, scn_map_get(m, "preemption"), "options.preemption",
                       !paged ? "swap preemption moves a sequence's blocks, so it needs kv_layout paged among the options"
                              : "swap preemption needs a scheduler that preempts (continuous or chunked), not only static");
    /* Offload keeps the prefix cache's evicted blocks: with the cache off in every choice it
     * would do nothing, so say so here (a list with both is left to the planner's pairing). */
    bool prefix = false;
    for (int i = 0; i < o->n_prefix; i++) prefix |= o->prefix_cache[i];
    if (cpu && !prefix)
        return fail_at(c, scn_map_get(m, "kv_offload"), "options.kv_offload",
                       "KV offload keeps evicted prefix-cache blocks below the GPU, so it needs options.prefix_cache on");
    /* The scenario's hardware (or each listed in options.hardware), then a disaggregated
     * deployment's pools' own. */
    int n_hw = o->n_hardware ? o->n_hardware : 1;
    const scn_disagg *dg = &s->deployment.disagg;
    for (int h = 0; h < n_hw + (dg->on ? 2 : 0); h++) {
        const scn_hardware *hw = h >= n_hw ? (h == n_hw ? &dg->prefill.hardware : &dg->decode.hardware)
                                 : o->n_hardware ? &o->hardware[h] : &s->hardware;
        const char *key = NULL, *why = NULL;
        if ((cpu || swap) && !(hw->host.bandwidth > 0))
            key = cpu ? "kv_offload" : "preemption", why = "host memory (hardware.host: capacity, bandwidth, efficiency)";
        else if (cpu && !(hw->host.capacity > 0) && !(o->offload_cpu_bytes > 0))
            key = "kv_offload", why = "host memory capacity (hardware.host.capacity or options.kv_offload_capacity.cpu)";
        else if (disk && !(hw->nvme.bandwidth > 0))
            key = "kv_offload", why = "local NVMe drive (hardware.nvme: capacity, bandwidth, efficiency)";
        else if (disk && !(hw->nvme.capacity > 0) && !(o->offload_disk_bytes > 0))
            key = "kv_offload", why = "NVMe capacity (hardware.nvme.capacity or options.kv_offload_capacity.disk)";
        else if (remote && !(hw->remote.bandwidth > 0))
            key = "kv_offload", why = "remote store (hardware.remote: capacity, bandwidth, efficiency)";
        else if (remote && !(hw->remote.capacity > 0) && !(o->offload_remote_bytes > 0))
            key = "kv_offload", why = "remote store capacity (hardware.remote.capacity or options.kv_offload_capacity.remote)";
        if (!key) continue;
        char fp[64];
        snprintf(fp, sizeof fp, "options.%s", key);
        char msg[320];
        snprintf(msg, sizeof msg, "this choice moves KV off the GPU, but hardware profile %s gives no %s", hw->name, why);
        return fail_at(c, scn_map_get(m, key), fp, msg);
    }
    return 0;
}

/* A window entry is "off" or {sink: N, window: N}. */
static int it_window(scn_ctx *c, const scn_node *v, const char *p, int i, scn_options *o)
{
    o->sink[i] = o->window[i] = 0;
    if (v->kind == SCN_NODE_SCALAR && (!strcmp(v->text, "off") || !strcmp(v->text, "false"))) return 0;
    if (v->kind != SCN_NODE_MAP) return fail_at(c, v, p, "expected 'off' or {sink: N, window: N}");
    if (scn_check_keys(c, v, p, WINDOW_KEYS) || scn_require(c, v, p, "window") ||
        scn_get_int(c, v, p, "sink", 0, BIG, &o->sink[i]) || scn_get_int(c, v, p, "window", 1, BIG, &o->window[i]))
        return -1;
    return 0;
}

/* ---- options.speculative (docs/scenarios.md; defaults sourced in docs/sources.md) ---- */

/* First-position acceptance when the scenario states none: EAGLE's draft-token acceptance on
 * MT-bench (~0.8, Li et al. 2024); DeepSeek-V3's MTP second-token acceptance, lower end of
 * 85-90 % (DeepSeek-V3 report, 5.4.3); a separate draft model, 0.7, inside the 0.5-0.8 range
 * of Leviathan et al. 2023 (Table 3). n-gram acceptance is the workload's copy rate: no default. */
static double spec_default_accept(scn_spec_method m)
{
    return m == SCN_SPEC_EAGLE ? 0.8 : m == SCN_SPEC_MTP ? 0.85 : m == SCN_SPEC_DRAFT ? 0.7 : 0;
}

/* Position i is accepted (given the earlier ones were) with a x d^i. An EAGLE head drafts from
 * its own predicted features, so each later position compounds the error of the earlier ones:
 * without a stated decay, d = a, one parameter (a_i = a^(i+1); docs/cost-model.md, "Acceptance
 * per position"). A draft model and an n-gram lookup draft from real tokens: d = 1. A stated
 * decay overrides either. */
static double spec_decay_for(scn_spec_method m, double a, double stated)
{
    if (stated >= 0) return stated;
    return m == SCN_SPEC_EAGLE ? a : 1.0;
}

static void spec_fill(scn_spec *sp, double a, double stated_decay)
{
    double d = spec_decay_for(sp->method, a, stated_decay), r = a;
    for (int j = 0; j < sp->k; j++) { sp->accept[j] = r; r *= d; }
}

/* The first-position rate a whose per-position rates (spec_fill) give tau expected tokens per
 * verify step, by bisection: the expectation rises with a, from 1 at a = 0 to at most k + 1. */
static double spec_rate_for_mean(scn_spec *sp, double tau, double stated_decay)
{
    double lo = 0, hi = 1;
    for (int it = 0; it < 100; it++) {
        double a = 0.5 * (lo + hi), e = 1, p = 1;
        spec_fill(sp, a, stated_decay);
        for (int i = 0; i < sp->k; i++) { p *= sp->accept[i]; e += p; }
        if (e < tau) lo = a; else hi = a;
    }
    return 0.5 * (lo + hi);
}

static int it_spec(scn_ctx *c, const scn_node *v, const char *p, int i, scn_options *o)
{
    scn_spec *sp = &o->spec[i];
    memset(sp, 0, sizeof *sp);
    if (v->kind == SCN_NODE_SCALAR && (!strcmp(v->text, "off") || !strcmp(v->text, "false"))) return 0;
    if (v->kind != SCN_NODE_MAP)
        return fail_at(c, v, p, "expected 'off' or {method: draft|eagle|mtp|ngram, k: N, acceptance: ...}");
    int method = 0;
    if (scn_check_keys(c, v, p, SPEC_KEYS) || scn_require(c, v, p, "method") || scn_require(c, v, p, "k") ||
        scn_get_enum(c, v, p, "method", SCN_SPEC_NAMES, &method) || scn_get_int(c, v, p, "k", 1, SCN_SPEC_K_MAX, &sp->k))
        return -1;
    sp->method = (scn_spec_method)method;
    char fp[300];
    if (sp->method == SCN_SPEC_OFF) return fail_at(c, v, p, "method off takes no fields: write 'off'");
    const scn_node *model = scn_map_get(v, "model");
    if (sp->method == SCN_SPEC_DRAFT) {
        if (!model) return fail_at(c, v, p, "method draft needs model: the draft model's library name or mapping");
        scn_path_join(fp, sizeof fp, p, "model");
        if (scn_bind_model(c, model, fp, &sp->draft)) return -1;
    } else if (model) {
        scn_path_join(fp, sizeof fp, p, "model");
        return fail_at(c, model, fp, "only method draft takes a separate model (EAGLE and MTP heads come from the target)");
    }
    const scn_node *acc = scn_map_get(v, "acceptance"), *mean = scn_map_get(v, "mean_accepted");
    const scn_node *decay = scn_map_get(v, "decay");
    if (acc && mean) return fail_at(c, v, p, "give acceptance or mean_accepted, not both");
    double d = -1;
    if (decay) {
        scn_path_join(fp, sizeof fp, p, "decay");
        if (acc && acc->kind == SCN_NODE_SEQ)
            return fail_at(c, decay, fp, "a per-position acceptance list states every position: no decay with it");
        if (scn_get_qty(c, v, p, "decay", SCN_UNIT_FRACTION, true, &d)) return -1;
        if (!(d >= 0 && d <= 1)) return fail_at(c, decay, fp, "a decay per position lies between 0 and 1");
    }
    double a0 = spec_default_accept(sp->method);
    if (acc && acc->kind == SCN_NODE_SEQ) {
        scn_path_join(fp, sizeof fp, p, "acceptance");
        if (acc->n != sp->k) return fail_at(c, acc, fp, "a per-position acceptance list needs exactly k entries");
        for (int j = 0; j < acc->n; j++) {
            char msg[400];
            const scn_node *x = acc->vals[j];
            if (x->kind != SCN_NODE_SCALAR || scn_quantity_parse(x->text, SCN_UNIT_FRACTION, &sp->accept[j], msg, sizeof msg))
                return fail_at(c, x, fp, "expected a fraction between 0 and 1 (0.8 or 80%)");
            if (sp->accept[j] < 0 || sp->accept[j] > 1) return fail_at(c, x, fp, "an acceptance rate lies between 0 and 1");
        }
        return 0;
    }
    if (acc) {
        if (scn_get_qty(c, v, p, "acceptance", SCN_UNIT_FRACTION, true, &a0)) return -1;
        if (a0 > 1) { scn_path_join(fp, sizeof fp, p, "acceptance"); return fail_at(c, acc, fp, "an acceptance rate lies between 0 and 1"); }
    } else if (mean) {
        double tau = 0;
        char msg[400];
        scn_path_join(fp, sizeof fp, p, "mean_accepted");
        if (mean->kind != SCN_NODE_SCALAR || scn_quantity_parse(mean->text, SCN_UNIT_FRACTION, &tau, msg, sizeof msg) ||
            !(tau >= 1 && tau <= sp->k + 1))
            return fail_at(c, mean, fp, "expected the mean tokens a verify step emits, between 1 and k + 1");
        if (d >= 0 && d < 1 && tau > 1) {
            /* The most a decayed run can give is its value at a = 1. */
            scn_spec top = *sp;
            spec_fill(&top, 1.0, d);
            double e = 1, q = 1;
            for (int j = 0; j < top.k; j++) { q *= top.accept[j]; e += q; }
            if (tau > e + 1e-12) return fail_at(c, mean, fp, "no first-position rate reaches this mean with the stated decay");
        }
        a0 = spec_rate_for_mean(sp, tau, d);
    } else if (sp->method == SCN_SPEC_NGRAM) {
        return fail_at(c, v, p, "n-gram acceptance is how much the output copies the prompt: state acceptance or mean_accepted");
    }
    spec_fill(sp, a0, d);
    return 0;
}

/* options.speculative against the target model: method mtp needs the model's own prediction
 * modules (k at most their count), and a draft model must share the target's vocabulary (the
 * target verifies the draft's token ids). */
static int check_spec_target(scn_ctx *c, const scn_node *opts, const scn_scenario *s)
{
    const scn_node *l = scn_map_get(opts, "speculative");
    int n = !l ? 0 : l->kind == SCN_NODE_SEQ ? l->n : 1;
    for (int i = 0; i < n && i < s->options.n_spec; i++) {
        const scn_node *v = l->kind == SCN_NODE_SEQ ? l->vals[i] : l;
        const scn_spec *sp = &s->options.spec[i];
        char p[280], fp[300], msg[400];
        snprintf(p, sizeof p, "options.speculative[%d]", i);
        if (sp->method == SCN_SPEC_MTP && s->model.mtp_layers < 1) {
            snprintf(msg, sizeof msg, "method mtp needs a model with multi-token-prediction layers (mtp_layers; "
                     "DeepSeek-V3/R1 ship 1): %s declares none", s->model.name);
            return fail_at(c, scn_map_get(v, "method"), scn_path_join(fp, sizeof fp, p, "method"), msg);
        }
        if (sp->method == SCN_SPEC_MTP && sp->k > s->model.mtp_layers) {
            snprintf(msg, sizeof msg, "method mtp drafts one token per prediction module: k must be at most the "
                     "model's mtp_layers (%d)", s->model.mtp_layers);
            return fail_at(c, scn_map_get(v, "k"), scn_path_join(fp, sizeof fp, p, "k"), msg);
        }
        if (sp->method == SCN_SPEC_DRAFT && sp->draft.vocab != s->model.vocab) {
            snprintf(msg, sizeof msg, "the draft model's vocabulary (%d tokens, %s) differs from the target's (%d, %s): "
                     "the target verifies the draft's token ids, so they must share a tokenizer",
                     sp->draft.vocab, sp->draft.name, s->model.vocab, s->model.name);
            return fail_at(c, scn_map_get(v, "model"), scn_path_join(fp, sizeof fp, p, "model"), msg);
        }
    }
    return 0;
}

/* A weight format by name: bf16, fp16, fp8, fp8_block, int8 (W8A8), awq/int4, gptq, fp4. */
static int it_wformat(scn_ctx *c, const scn_node *v, const char *p, int i, scn_options *o)
{
    if (v->kind == SCN_NODE_SCALAR && scn_wformat_parse(v->text, &o->wformat[i]) == 0) return 0;
    return fail_at(c, v, p, "expected a weight format: bf16, fp16, fp8, fp8_block, int8, awq, int4, gptq or fp4");
}

/* An engine entry arrives resolved to a mapping by the loader. */
static int it_engine(scn_ctx *c, const scn_node *v, const char *p, int i, scn_options *o)
{
    return scn_bind_engine(c, v, p, &o->engine[i]);
}

/* Default scale layouts per KV dtype: docs/cost-model.md, "Quantised KV". */
static void default_quant(scn_options *o)
{
    for (int d = 0; d < SCN_DTYPE_COUNT; d++)
        o->quant[d] = (scn_quant){SCN_QUANT_PER_TENSOR, 0, SCN_DTYPE_FP32, false};
    o->quant[SCN_DTYPE_INT8] = (scn_quant){SCN_QUANT_PER_TOKEN_HEAD, 0, SCN_DTYPE_FP16, false};
    o->quant[SCN_DTYPE_INT4] = (scn_quant){SCN_QUANT_GROUP, 64, SCN_DTYPE_FP16, true};
    o->quant[SCN_DTYPE_FP4] = (scn_quant){SCN_QUANT_GROUP, 16, SCN_DTYPE_FP8, false};   /* NVFP4 */
}

static int bind_quant(scn_ctx *c, const scn_node *m, scn_options *o)
{
    const scn_node *q = scn_map_get(m, "kv_quant");
    if (!q) return 0;
    static const char *const QDT[] = {"fp8", "int8", "int4", NULL};
    static const scn_dtype QDV[] = {SCN_DTYPE_FP8, SCN_DTYPE_INT8, SCN_DTYPE_INT4};
    if (scn_expect_map(c, q, "options.kv_quant") || scn_check_keys(c, q, "options.kv_quant", QDT)) return -1;
    for (int i = 0; QDT[i]; i++) {
        const scn_node *e = scn_map_get(q, QDT[i]);
        if (!e) continue;
        char p[256];
        scn_path_join(p, sizeof p, "options.kv_quant", QDT[i]);
        if (scn_expect_map(c, e, p) || scn_check_keys(c, e, p, QUANT_KEYS)) return -1;
        scn_quant *t = &o->quant[QDV[i]];
        int g = (int)t->granularity;
        if (scn_get_enum(c, e, p, "granularity", SCN_QUANT_GRAN_NAMES, &g) ||
            scn_get_int(c, e, p, "group_size", 1, 65536, &t->group_size) ||
            scn_get_dtype(c, e, p, "scale_dtype", &t->scale_dtype) ||
            scn_get_bool(c, e, p, "zero_point", &t->zero_point))
            return -1;
        t->granularity = (scn_quant_gran)g;
        if (t->granularity == SCN_QUANT_GROUP && t->group_size == 0) t->group_size = 64;
    }
    return 0;
}

/* options.hardware: profiles the loader already resolved to mappings (scn_load.c). */
static int bind_hw_options(scn_ctx *c, const scn_node *m, scn_options *o)
{
    const scn_node *l = scn_map_get(m, "hardware");
    if (!l) return 0;
    int n = l->kind == SCN_NODE_SEQ ? l->n : 1;
    if (n < 1 || n > SCN_HW_OPT_MAX) return fail_at(c, l, "options.hardware", "expected 1 to 8 hardware profiles");
    for (int i = 0; i < n; i++) {
        char p[64];
        snprintf(p, sizeof p, "options.hardware[%d]", i);
        if (scn_bind_hardware(c, l->kind == SCN_NODE_SEQ ? l->vals[i] : l, p, &o->hardware[i])) return -1;
        for (int j = 0; j < i; j++)
            if (!strcmp(o->hardware[j].name, o->hardware[i].name))
                return fail_at(c, l->kind == SCN_NODE_SEQ ? l->vals[i] : l, p, "this hardware profile is listed twice");
    }
    o->n_hardware = n;
    return 0;
}

static int bind_options(scn_ctx *c, const scn_node *root, scn_scenario *s)
{
    scn_options *o = &s->options;
    o->n_layout = 1; o->layout[0] = SCN_LAYOUT_PAGED;
    o->n_block = 1; o->block_size[0] = 16;
    o->n_prefix = 1; o->prefix_cache[0] = false;
    o->n_dtype = 1; o->kv_dtype[0] = s->model.weight_dtype == SCN_DTYPE_FP16 ? SCN_DTYPE_FP16 : SCN_DTYPE_BF16;
    o->n_attention = 1; o->attention[0] = SCN_ATTN_FLASH;
    o->n_sched = 1; o->scheduler[0] = s->engine.chunked_prefill ? SCN_SCHED_CHUNKED : SCN_SCHED_CONTINUOUS;
    o->n_window = 1; o->sink[0] = o->window[0] = 0;
    o->n_offload = 1; o->kv_offload[0] = SCN_OFFLOAD_OFF;
    o->n_preempt = 1; o->preemption[0] = SCN_PREEMPT_RECOMPUTE;
    o->swap_space = 4.0 * 1073741824.0;   /* vLLM's swap_space default, 4 GiB per GPU (docs/sources.md) */
    default_quant(o);
    const scn_node *m = scn_map_get(root, "options");
    if (!m) return 0;
    if (scn_expect_map(c, m, "options") || scn_check_keys(c, m, "options", OPT_KEYS)) return -1;
    o->scheduler_given = scn_map_get(m, "scheduler") != NULL;
    return each_item(c, m, "kv_layout", it_layout, &o->n_layout, o) ||
           each_item(c, m, "block_size", it_block, &o->n_block, o) ||
           each_item(c, m, "prefix_cache", it_prefix, &o->n_prefix, o) ||
           each_item(c, m, "kv_dtype", it_dtype, &o->n_dtype, o) ||
           each_item(c, m, "attention", it_attn, &o->n_attention, o) ||
           each_item(c, m, "scheduler", it_sched, &o->n_sched, o) ||
           each_item(c, m, "window", it_window, &o->n_window, o) ||
           each_item(c, m, "max_num_seqs", it_count, &o->n_max_seqs, o) ||
           each_item(c, m, "max_num_batched_tokens", it_count, &o->n_budget, o) ||
           each_item(c, m, "tensor_parallel", it_count, &o->n_tp, o) ||
           each_item(c, m, "replicas", it_count, &o->n_replicas, o) ||
           each_item(c, m, "kv_heads", it_count, &o->n_kv_heads, o) ||
           each_item(c, m, "weight_dtype", it_wformat, &o->n_wformat, o) ||
           each_item(c, m, "engine", it_engine, &o->n_engine, o) ||
           each_item(c, m, "speculative", it_spec, &o->n_spec, o) || check_spec_target(c, m, s) ||
           each_item(c, m, "kv_offload", it_offload, &o->n_offload, o) ||
           each_item(c, m, "preemption", it_preempt, &o->n_preempt, o) ||
           bind_hw_options(c, m, o) || bind_quant(c, m, o) || bind_offload(c, m, s) ||
           scn_bind_disagg_option(c, m, o) ? -1 : 0;
}

/* quality.allow_*: marks what one item names as accepted; -1 for a name it does not know. */
static int allow_kv(const char *name, scn_quality *q)
{
    scn_dtype d;
    if (scn_dtype_parse(name, &d)) return -1;
    q->allow_kv_dtype[d] = true;
    return 0;
}

static int allow_weights(const char *name, scn_quality *q)
{
    scn_wformat f;
    if (scn_wformat_parse(name, &f)) return -1;
    q->allow_weight_quant[f.quant] = true;
    return 0;
}

/* Each item of quality.KEY (a list or one value), marked by `allow`, located when refused. */
static int quality_list(scn_ctx *c, const scn_node *m, const char *key, const char *expected,
                        int (*allow)(const char *, scn_quality *), scn_quality *q)
{
    const scn_node *l = scn_map_get(m, key);
    int n = !l ? 0 : l->kind == SCN_NODE_SEQ ? l->n : 1;
    for (int i = 0; i < n; i++) {
        const scn_node *v = l->kind == SCN_NODE_SEQ ? l->vals[i] : l;
        char ip[280];
        snprintf(ip, sizeof ip, "quality.%s[%d]", key, i);
        if (v->kind != SCN_NODE_SCALAR || allow(v->text, q)) return fail_at(c, v, ip, expected);
    }
    return 0;
}

static int bind_planning(scn_ctx *c, const scn_node *root, scn_scenario *s)
{
    int k = 0;
    if (scn_get_enum(c, root, "", "objective", SCN_OBJECTIVE_NAMES, &k)) return -1;
    s->objective = (scn_objective)k;
    char p[256];
    const scn_node *m;
    if (sub_map(c, root, "", "price", PRICE_KEYS, &m, p, sizeof p)) return -1;
    if (m) {
        const scn_node *v = scn_map_get(m, "usd_per_gpu_hour");
        if (scn_require(c, m, p, "usd_per_gpu_hour")) return -1;
        char *end;
        double x = v->kind == SCN_NODE_SCALAR ? strtod(v->text, &end) : -1;
        if (v->kind != SCN_NODE_SCALAR || end == v->text || *end || !(x > 0) || !isfinite(x))
            return fail_at(c, v, "price.usd_per_gpu_hour", "expected a price in US dollars per GPU-hour, e.g. 2.49");
        s->usd_per_gpu_hour = x;
    }
    /* Cost needs a price for every hardware candidate: the scenario's, or each profile's own. */
    bool priced = s->usd_per_gpu_hour > 0 || s->hardware.usd_per_gpu_hour > 0;
    for (int i = 0; i < s->options.n_hardware; i++)
        if (!(s->options.hardware[i].usd_per_gpu_hour > 0) && strcmp(s->options.hardware[i].name, s->hardware.name)) priced = false;
    if (s->objective == SCN_OBJ_COST && !priced)
        return fail_at(c, scn_map_get(root, "objective"), "objective",
                       "objective cost needs price.usd_per_gpu_hour (or a price in every hardware profile compared)");
    if (sub_map(c, root, "", "quality", QUALITY_KEYS, &m, p, sizeof p)) return -1;
    if (m) {
        if (quality_list(c, m, "allow_kv_dtype", "expected a KV dtype: fp16, bf16, fp8, int8 or int4", allow_kv,
                         &s->quality) ||
            quality_list(c, m, "allow_weight_dtype",
                         "expected a weight format: fp8, fp8_block, int8, awq, int4, gptq or fp4", allow_weights,
                         &s->quality))
            return -1;
        if (scn_get_bool(c, m, p, "allow_window", &s->quality.allow_window) ||
            scn_get_bool(c, m, p, "allow_gqa", &s->quality.allow_gqa))
            return -1;
    }
    for (int i = 0; i < s->options.n_tp; i++)
        if (s->model.heads % s->options.tensor_parallel[i])
            return fail_at(c, scn_map_get(scn_map_get(root, "options"), "tensor_parallel"), "options.tensor_parallel",
                           "every choice must divide the model's query heads");
    /* Each TP choice must hold the deployment's expert-parallel split, as the deployment's own
     * value must (bind_deployment): a candidate or a simulate run of it would otherwise shard the
     * experts over more ranks than its replica has GPUs. */
    const scn_deployment *d = &s->deployment;
    for (int i = 0; i < s->options.n_tp && d->expert_parallel > 1; i++)
        if ((s->options.tensor_parallel[i] * d->attention_dp) % d->expert_parallel)
            return fail_at(c, scn_map_get(scn_map_get(root, "options"), "tensor_parallel"), "options.tensor_parallel",
                           "every choice x attention_data_parallel must be a multiple of deployment.expert_parallel");
    /* A disaggregated deployment's pools set their own TP, replicas and hardware: a list of them
     * here would be priced (GPU count, price) but never run. */
    static const char *const POOL_SET[] = {"tensor_parallel", "replicas", "hardware"};
    const int pool_n[] = {s->options.n_tp, s->options.n_replicas, s->options.n_hardware};
    for (int i = 0; i < 3 && d->disagg.on; i++)
        if (pool_n[i] > 0) {
            char f[64];
            snprintf(f, sizeof f, "options.%s", POOL_SET[i]);
            return fail_at(c, scn_map_get(scn_map_get(root, "options"), POOL_SET[i]), f,
                           "a disaggregated deployment's pools set their own (deployment.disaggregation.prefill and "
                           ".decode), so this list would be priced but not run");
        }
    for (int i = 0; i < s->options.n_kv_heads; i++)
        if (s->model.heads % s->options.kv_heads[i] || s->model.kv_lora_rank)
            return fail_at(c, scn_map_get(scn_map_get(root, "options"), "kv_heads"), "options.kv_heads",
                           "a KV-head what-if must divide the query heads (and the model must not use MLA)");
    return 0;
}

/* Multi-step scheduling is an engine feature: vLLM's V0 engine had it from 0.6.0 (PR #7000)
 * until V0 was removed (PR #22138), V1 never (PR #12535), and no other engine the library
 * profiles has it, so an engine must say so (cpu.multi_step: the vllm-0.6, vllm-0.6.3, vllm-0.7
 * and vllm-0.7.1 profiles); every engine a run or a plan may use is checked. It runs on the
 * continuous (prefill-first) scheduler only: vLLM 0.6.0 refused chunked prefill with
 * --num-scheduler-steps > 1 (vLLM issue #8274), and a static batch has no scheduling decisions
 * to space out. */
static int check_multistep(scn_ctx *c, const scn_node *root, const scn_scenario *s)
{
    if (s->deployment.scheduler_steps <= 1) return 0;
    const scn_node *at = scn_map_get(scn_map_get(root, "deployment"), "scheduler_steps");
    for (int i = -1; i < s->options.n_engine; i++) {
        const scn_engine *e = i < 0 ? &s->engine : &s->options.engine[i];
        if (e->multi_step) continue;
        char msg[400], which[64];
        if (i < 0) snprintf(which, sizeof which, "the engine");
        else snprintf(which, sizeof which, "options.engine[%d]", i);
        snprintf(msg, sizeof msg,
                 "%s '%s' has no multi-step scheduling: only vLLM's V0 engine from 0.6.0 had it (engine vllm-0.6, "
                 "vllm-0.6.3, vllm-0.7 or vllm-0.7.1; a profile of its own says cpu.multi_step: true)",
                 which, e->name);
        return fail_at(c, at, "deployment.scheduler_steps", msg);
    }
    for (int i = 0; i < s->options.n_sched; i++)
        if (s->options.scheduler[i] != SCN_SCHED_CONTINUOUS)
            return fail_at(c, scn_map_get(scn_map_get(root, "deployment"), "scheduler_steps"),
                           "deployment.scheduler_steps",
                           "multi-step scheduling needs options.scheduler: continuous (the engine's default "
                           "here chunks prefills; vLLM 0.6 refused chunked prefill with multi-step)");
    return 0;
}

int scn_bind_scenario(scn_ctx *c, const scn_node *root, scn_scenario *s)
{
    if (scn_expect_map(c, root, "") || scn_check_keys(c, root, "", TOP_KEYS)) return -1;
    if (scn_require(c, root, "", "model") || scn_require(c, root, "", "hardware")) return -1;
    snprintf(s->source, sizeof s->source, "%s", root->file ? root->file : "");
    s->seed = 1;
    long seed = 1;
    if (scn_get_str(c, root, "", "name", s->name, sizeof s->name) ||
        scn_get_long(c, root, "", "seed", 0, 0x7fffffffffffffffL, &seed) ||
        scn_bind_model(c, scn_map_get(root, "model"), "model", &s->model) ||
        scn_bind_hardware(c, scn_map_get(root, "hardware"), "hardware", &s->hardware) ||
        bind_engine(c, root, s) || bind_deployment(c, root, s) || bind_workload(c, root, s) || bind_slo(c, root, s) ||
        bind_options(c, root, s) || bind_planning(c, root, s) || check_multistep(c, root, s))
        return -1;
    s->seed = (unsigned long long)seed;
    if (!s->name[0]) snprintf(s->name, sizeof s->name, "%s", "unnamed");
    return 0;
}
