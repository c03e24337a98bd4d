/* plan.h: the planner: the scenario's option space as candidates, each simulated (in
 * parallel), filtered by the SLO, ranked by the objective, and explained from the cost model.
 * docs/planner.md describes the procedure. */
#ifndef KVPLAN_PLAN_H
#define KVPLAN_PLAN_H

#include "../loader/scn.h"
#include "../sim/sim.h"

typedef enum { PLAN_PENDING, PLAN_DONE, PLAN_SKIPPED } plan_status;

typedef struct {
    sim_choice c;
    int tp, replicas, max_num_seqs, max_batched, kv_heads;   /* kv_heads 0: the model's own */
    int wformat, engine;       /* indices into options.weight_dtype / options.engine; -1: the scenario's */
    char wformat_name[16], engine_name[64];   /* what the candidate runs with (named either way) */
    plan_status status;
    char why[240];             /* why it was skipped */
    bool risk_dtype, risk_window, risk_gqa;   /* options that change the model's outputs */
    bool risk_weights;         /* quantised weights the model does not ship with */
    bool allowed;              /* every risk it takes is accepted by the scenario's quality */
    sim_metrics m;
    bool slo_met;
    double objective;          /* higher is better (latency and cost are negated) */
    double latency_p99;        /* s: the Pareto front's latency axis */
    double gpus;
    bool pareto;
    long run_id;               /* when stored */
    bool reused;               /* metrics came from a stored run */
} plan_cand;

typedef struct {
    plan_cand *c;
    int n;
    int *order;                /* candidate indices, best first */
    int best;                  /* recommended candidate, or -1 */
} plan_result;

/* Every combination of the option lists (invalid ones marked skipped, with the reason). */
int plan_enumerate(const scn_scenario *s, plan_result *r);
void plan_result_free(plan_result *r);
/* The scenario as one candidate runs it (deployment choices and what-ifs applied). */
void plan_apply(const scn_scenario *s, const plan_cand *c, scn_scenario *out);
/* "paged/16 prefix=on fp8 flash continuous window=off tp=1 x1 seqs=256 budget=8192" */
void plan_describe(const plan_cand *c, char *buf, size_t n);
/* The candidate's options as canonical JSON, the key a stored run is found by (caller frees). */
char *plan_options_json(const plan_cand *c);

/* Simulates every pending candidate whose index i satisfies i % shard_n == shard_i, on
 * `threads` threads. progress(ud, done, total) may be NULL. */
int plan_evaluate(const scn_scenario *s, plan_result *r, int threads, int shard_i, int shard_n,
                  void (*progress)(void *ud, long done, long total), void *ud, char *err, size_t n);
/* Simulates one candidate: PLAN_DONE, or PLAN_SKIPPED when it cannot run; -1 on failure. */
int plan_evaluate_one(const scn_scenario *s, plan_cand *c, char *err, size_t n);
/* Scores, SLO checks, ranks, marks the Pareto front, and picks the recommendation. */
void plan_rank(const scn_scenario *s, plan_result *r);
/* The value of an SLO metric at a percentile from a run's summary. */
double plan_percentile(const sim_metrics *m, scn_metric metric, double pct);
/* True when the metrics meet every SLO term. */
bool plan_slo_met(const scn_scenario *s, const sim_metrics *m);

/* The recommendation's reasons, as sentences: which cost binds and by how much, how far each
 * chosen option moved the objective, what the runner-up gives up. Returns the count. */
#define PLAN_LINE 480
int plan_explain(const scn_scenario *s, const plan_result *r, char lines[][PLAN_LINE], int max);

/* Rules of thumb tested against this scenario's own numbers (plan_rules.c). */
typedef struct {
    char rule[160];
    char verdict[16];          /* "holds", "fails", "n/a" */
    char evidence[PLAN_LINE];
} plan_rule;
int plan_rules(const scn_scenario *s, const plan_result *r, plan_rule *out, int max);

/* Capacity (plan_capacity.c). */
/* The highest arrival rate (req/s) the candidate sustains within the SLO; 0 if none. */
double plan_max_rate(const scn_scenario *s, const plan_cand *c, int iterations);
/* The fewest replicas (at the candidate's tp) that serve `rate` within the SLO; 0 if none up to max. */
int plan_min_replicas(const scn_scenario *s, const plan_cand *c, double rate, int max);
/* The longest context (tokens) a sequence may hold when `concurrency` of them share the cache. */
long plan_max_context(const scn_scenario *s, const plan_cand *c, long concurrency);

#endif
