/* plan.h: the planner: the scenario's option space as candidates, each simulated (in
 * parallel), filtered by the SLO, ranked by the objective, and explained from the cost model.
 * docs/planner.md describes the procedure. */
#ifndef KVPLAN_PLAN_H
#define KVPLAN_PLAN_H

#include "../loader/scn.h"
#include "../sim/sim.h"
#include "../model/kv_model.h"

typedef enum { PLAN_PENDING, PLAN_DONE, PLAN_SKIPPED } plan_status;

#define PLAN_SEEDS_MAX 32          /* --seeds accepts 1..PLAN_SEEDS_MAX */
#define PLAN_SEEDS_DEFAULT 3
/* A capacity trial: the scenario's requests, at most PLAN_CAPACITY_REQUESTS (enough for a queue
 * to show overload, few enough to search quickly) but at least PLAN_TRIAL_CYCLES times the
 * sequences the deployment runs at once (max_num_seqs x attention-DP ranks x replicas), so the
 * batch turns over several times and a queue can form whatever the rate (docs/planner.md,
 * "Trial length"); and the p99 admission wait beyond which the queue is taken to be growing.
 * The one definition `plan`, `capacity` and `sweep` share. */
#define PLAN_CAPACITY_REQUESTS 3000
#define PLAN_TRIAL_CYCLES 4
#define PLAN_MAX_QUEUE_P99 5.0     /* s */
/* A trial's arrivals span at least this many times PLAN_MAX_QUEUE_P99 (N >= span x rate x turns
 * requests): at a rate more than 8.4 % above capacity the queue's wait grows past PLAN_MAX_QUEUE_P99
 * before the arrivals end, so overload fails the trial however short the scenario is
 * (docs/planner.md, "Trial length": N >= W r / (0.99 e); k = 12 gives e = 8.4 %). */
#define PLAN_TRIAL_SPAN_WAITS 12
#define PLAN_CAPACITY_TOL 0.03     /* the rate search stops when its bracket is this narrow (relative) */
/* The search never goes above this many times its starting rate: a candidate that still keeps
 * up there is "unbounded within the searched range" (no capacity to rank or credit). */
#define PLAN_CAPACITY_RANGE 1024.0

/* A mean over seeds and its two-sided 95 % confidence interval (Student's t). n 1: lo = hi = mean. */
typedef struct {
    double mean, lo, hi;
    int n;
} plan_interval;
plan_interval plan_interval_of(const double *x, int n);
/* The same on a log scale, for quantities that are positive and vary by ratios (rates, tokens/s):
 * mean = the geometric mean, lo/hi = exp(mean of logs -/+ half-width), so both ends stay positive
 * and any monotone transform (such as $ per token = price / tokens/s) maps ends to ends. Every
 * x must be > 0; otherwise the arithmetic interval, its lower end clamped at 0. */
plan_interval plan_interval_log_of(const double *x, int n);
/* True when a capacity interval (plan_cand.rate) has no spread over seeds: every seed's search
 * stopped on the same rate (one seed, or seeds that agree within the search's resolution), so
 * lo = mean and [lo, hi] is only the resolution PLAN_CAPACITY_TOL, not seed-to-seed spread. */
bool plan_rate_at_resolution(plan_interval r);
/* True when the intervals do not overlap: the difference is measurable at this many seeds. */
bool plan_intervals_separate(plan_interval a, plan_interval b);
/* True for the objectives stored negated for ranking (p99 latency, cost): they are shown in
 * their natural unit, where lower is better. */
bool plan_lower_is_better(const scn_scenario *s);
/* "TTFT p99": the latency the p99_latency objective measures (the first SLO term's metric,
 * E2E without an SLO). */
const char *plan_latency_metric(const scn_scenario *s);

typedef struct {
    sim_choice c;
    int tp, replicas, max_num_seqs, max_batched, kv_heads;   /* kv_heads 0: the model's own */
    /* max_num_seqs, max_batched and the scheduler are an engine or hardware option's own
     * defaults (plan_enumerate), so they go with that option, not a dimension of their own. */
    bool derived_seqs, derived_budget, derived_sched;
    int hw;                    /* index into options.hardware; -1: the scenario's own hardware */
    char hw_name[SCN_NAME_MAX]; /* the hardware it runs on (named either way) */
    int wformat, engine;       /* indices into options.weight_dtype / options.engine; -1: the scenario's */
    char wformat_name[16], engine_name[64];   /* what the candidate runs with (named either way) */
    char spec_name[64];        /* speculative decoding ("eagle k=4 a=0.80"); empty when off */
    plan_status status;
    char why[240];             /* why it was skipped */
    bool risk_dtype, risk_window, risk_gqa;   /* options that change the model's outputs */
    bool risk_weights;         /* quantised weights the model does not ship with */
    bool allowed;              /* every risk it takes is accepted by the scenario's quality */
    sim_metrics m;             /* the first seed's run at the offered load (the table's columns) */
    /* Per seed k (seed = scenario seed + k): */
    int n_seeds;
    unsigned seed_done;        /* bit k: the offered-load run of seed k is in */
    unsigned cap_done;         /* bit k: the capacity search of seed k is in */
    unsigned seed_slo;         /* bit k: seed k met the SLO at the offered load */
    double seed_offered[PLAN_SEEDS_MAX];   /* objective at the offered load */
    double seed_rate[PLAN_SEEDS_MAX];      /* req/s: highest rate within the SLO (0: none) */
    double seed_tok[PLAN_SEEDS_MAX];       /* output tokens/s at that rate */
    double seed_batch[PLAN_SEEDS_MAX];     /* mean decode batch (sequences per step) at that rate; NaN if unknown */
    unsigned seed_unbounded;   /* bit k: seed k still kept up at the top of the searched range */
    bool search_capacity;      /* search each seed's highest rate within the SLO */
    unsigned seed_reused;      /* bit k: seed k came from a stored run */
    sim_metrics *seed_m;       /* n_seeds runs at the offered load (for storing); NULL when not kept */
    long sims;                 /* simulations this process ran for it */
    /* From plan_rank: */
    bool at_capacity;          /* objective judged at the highest rate within the SLO */
    plan_interval obj;         /* the objective over seeds (higher is better: latency, cost negated) */
    plan_interval offered;     /* the objective at the offered load over seeds */
    plan_interval rate;        /* highest rate within the SLO over seeds (NaN when not searched) */
    bool unbounded;            /* some seed kept up at every rate searched: no capacity to rank or credit */
    double batch_judged;       /* mean decode batch at the load the objective was judged at (capacity or offered);
                                * read it through plan_judged_batch */
    bool slo_met;              /* at the offered load, on most seeds */
    double objective;          /* = obj.mean */
    double latency_p99;        /* s: the Pareto front's latency axis (first seed, offered load) */
    double tok_per_gpu;        /* output tokens/s per GPU: the Pareto front's throughput axis */
    double gpus;
    double usd_per_gpu_hour;   /* the candidate's hardware price; 0 when none is known */
    double usd_per_mtok;       /* $ per million output tokens at the highest rate within the SLO */
    bool pareto;
    long run_id;               /* the first seed's stored run, when stored */
    bool reused;               /* every seed's metrics came from stored runs */
    bool bound_skipped;        /* skipped unsimulated: provably below the candidates kept (plan_set_bound) */
} plan_cand;

/* The candidate's objective interval in its natural unit ($/Mtok, seconds: lower is better for
 * those; plan_lower_is_better), lo <= hi. */
plan_interval plan_objective_shown(const scn_scenario *s, const plan_cand *c);

typedef struct {
    plan_cand *c;
    int n;
    int *order;                /* candidate indices, best first */
    int best;                  /* recommended candidate, or -1 */
    int seeds;                 /* seeds per candidate (plan_set_seeds) */
    bool spec_gated;           /* plan_spec_gate passed over a speculative candidate ... */
    int spec_gated_cand;       /* ... this one, whose decode batch lay outside the ranges where it pays */
    bool risk_gated;           /* a KV dtype that changes outputs (fp8, int8 ...) was passed over ... */
    int risk_gated_cand;       /* ... this one, not measurably better than its twin without the risk */
    int bound_keep;            /* > 0: skip candidates provably below the bound_keep-th best (plan_set_bound) */
    unsigned prune_off;        /* PLAN_PRUNE_* refinements of the bound turned off (tests compare with and without) */
    long trials_reused;        /* plan_evaluate: trials a search took from an earlier search instead of simulating */
    int recut_searches;        /* plan_evaluate: stopped later seeds searched again with a second cutoff */
    long trials_shared;        /* plan_evaluate: trials a block-size twin's run stood for (not simulated) */
} plan_result;

/* The refinements of skipping by bound (docs/planner.md, "Speed"), each of which changes only
 * what a plan costs: trials kept per candidate and seed and reused by its later searches; stopped
 * later seeds searched again with the cutoff the other seeds' answers leave; the best's one-option
 * neighbours queued first. plan_set_prune_off turns some off (for tests). */
#define PLAN_PRUNE_MEMO 1u
#define PLAN_PRUNE_RECUT 2u
#define PLAN_PRUNE_NEIGHBOURS 4u
#define PLAN_PRUNE_TWINS 8u        /* trials shared between block-size twins */
void plan_set_prune_off(plan_result *r, unsigned bits);

typedef struct db db;

/* Every combination of the option lists (invalid ones marked skipped, with the reason), with
 * PLAN_SEEDS_DEFAULT seeds each. */
int plan_enumerate(const scn_scenario *s, plan_result *r);
/* Seeds per candidate, 1..PLAN_SEEDS_MAX (clamped); before plan_store_reuse and plan_evaluate. */
void plan_set_seeds(plan_result *r, int seeds);
/* Whether plan_evaluate searches each candidate's capacity (default: when the objective is
 * judged at capacity; `capacity` and `sweep` always want it). */
void plan_set_capacity(plan_result *r, bool on);
/* Lets plan_evaluate skip, without simulating, a candidate whose capacity search provably
 * returns less than the `keep`-th best objective among the allowed candidates already evaluated
 * within the SLO (plan_bound_below); 0 turns it off (the default). The best `keep` candidates,
 * and every candidate one option away from the recommendation (its gates and reasons compare
 * with them), are always simulated, so the ranking's first `keep` rows and the recommendation
 * are those of a plan that simulates everything (docs/planner.md, "Skipping candidates that
 * cannot win"). It applies to goodput per GPU judged at capacity, unsharded; with several seeds a
 * candidate is judged after its first seed. */
void plan_set_bound(plan_result *r, int keep);
/* True when candidates a and b differ in exactly one option dimension. */
bool plan_one_option_apart(const plan_cand *a, const plan_cand *b);
/* True when candidates a and b differ in option dimension `dim` (plan_enumerate's order). */
bool plan_option_differs(const plan_cand *a, const plan_cand *b, int dim);

/* The bound (plan_bound.c). A seed's request stream at unit rate, shared by the candidates. */
typedef struct plan_bound_stream plan_bound_stream;
plan_bound_stream *plan_bound_stream_init(const scn_scenario *s, unsigned long long seed, long n);
void plan_bound_stream_free(plan_bound_stream *b);
long plan_bound_stream_length(const plan_bound_stream *b);
/* 1 when candidate c's capacity search on the scenario's seed provably returns a rate below x
 * (arrivals/s; why says how), 0 when that cannot be shown, -1 when out of memory. *bp is the
 * stream (created or lengthened as needed; the caller frees it). */
/* The lower bound on one step's time (rows: each row's new tokens and context) that the proof
 * uses, at angle theta in [0, pi/2] (docs/planner.md, "A lower bound on a step"); for tests. */
double plan_bound_step_floor(const scn_scenario *s, const plan_cand *c, const kv_seq_work *rows, int n, double theta);
int plan_bound_below(const scn_scenario *s, const plan_cand *c, plan_bound_stream **bp, double x, char *why,
                     size_t nwhy);
/* The same for a search on `seed` that starts at `start` with first stride `step` (> 1), knowing
 * a trial at `known` (0: none): a later seed's search from the first seed's answer. */
int plan_bound_below_search(const scn_scenario *s, const plan_cand *c, unsigned long long seed, double start,
                            double step, double known, plan_bound_stream **bp, double x, char *why, size_t nwhy);
/* 1 when a later seed's search (on `seed`, from the first seed's answer, which must itself lie
 * below x, or from a lower rate) provably returns less than x, whatever the first seed's answer
 * was (docs/planner.md, "Several seeds"). */
int plan_bound_below_later(const scn_scenario *s, const plan_cand *c, unsigned long long seed, plan_bound_stream **bp,
                           double x, char *why, size_t nwhy);

/* Marks candidates whose accuracy risks the scenario does not accept as skipped (for commands
 * that never show them: `capacity`, `sweep`), so they are not simulated. */
void plan_skip_disallowed(plan_result *r);
/* True when the scenario's objective is judged at capacity (throughput, goodput, cost on an
 * open-loop rate; p99 latency and traces stay at the offered load). */
bool plan_objective_at_capacity(const scn_scenario *s);
/* The price per GPU-hour of a candidate's hardware: the scenario's price.usd_per_gpu_hour for
 * its own hardware when given, else the hardware profile's; 0 when neither. */
double plan_price(const scn_scenario *s, const plan_cand *c);
/* The candidate's hardware name. */
const char *plan_hardware_name(const scn_scenario *s, const plan_cand *c);
void plan_result_free(plan_result *r);
/* The scenario as one candidate runs it (deployment choices and what-ifs applied). */
void plan_apply(const scn_scenario *s, const plan_cand *c, scn_scenario *out);
/* The scenario as its first candidate runs it (the first value of every option list: deployment
 * values, hardware, weight format, engine, and what that engine derives), into out, with its KV
 * choice in ch (may be NULL): what `simulate`, `run`, `cost` and `memory` run. 0; 1 when the engine's defaults
 * rule that candidate out (why says so); -1 out of memory. */
int plan_first(const scn_scenario *s, scn_scenario *out, sim_choice *ch, char *why, size_t n);
/* "paged/16 prefix=on fp8 flash continuous window=off tp=1 x1 seqs=256 budget=8192" */
void plan_describe(const plan_cand *c, char *buf, size_t n);
/* The candidate's options as canonical JSON, the key a stored run is found by (caller frees). */
char *plan_options_json(const scn_scenario *s, const plan_cand *c);

/* Simulates every pending candidate whose index i satisfies i % shard_n == shard_i, on
 * `threads` threads. progress(ud, done, total) may be NULL. */
int plan_evaluate(const scn_scenario *s, plan_result *r, int threads, int shard_i, int shard_n,
                  void (*progress)(void *ud, long done, long total), void *ud, char *err, size_t n);
/* Simulates one candidate over its seeds at the offered load and, when the objective is judged
 * at capacity, searches each seed's highest rate within the SLO (seeds already in, from stored
 * runs, are kept): PLAN_DONE, or PLAN_SKIPPED when it cannot run; -1 on failure. */
int plan_evaluate_one(const scn_scenario *s, plan_cand *c, char *err, size_t n);
/* Records seed k's run at the offered load (from a simulation or a stored run). */
void plan_record_offered(const scn_scenario *s, plan_cand *c, int k, const sim_metrics *m);
/* The mean decode batch at the load a candidate's objective was judged at: the capacity trials'
 * (mean over seeds) when judged at capacity, else the first seed's offered-load run. */
double plan_judged_batch(const plan_cand *c);
/* Scores, SLO checks, ranks, marks the Pareto front, and picks the recommendation. */
void plan_rank(const scn_scenario *s, plan_result *r);
/* The value of an SLO metric at a percentile from a run's summary. */
double plan_percentile(const sim_metrics *m, scn_metric metric, double pct);
/* True when the metrics meet every SLO term. */
bool plan_slo_met(const scn_scenario *s, const sim_metrics *m);

/* The recommendation's reasons, as sentences: which cost binds and by how much, how far each
 * chosen option moved the objective, what the runner-up gives up. Returns the count. */
#define PLAN_LINE 1024
#define PLAN_DIMS 18               /* option dimensions (plan_enumerate's order) */
int plan_explain(const scn_scenario *s, const plan_result *r, char lines[][PLAN_LINE], int max);

/* How candidate a compares with b on the objective, absolute figures first, credited only when
 * the seeds' 95 % intervals separate ("no measurable difference at this load" otherwise). */
void plan_compare_text(const scn_scenario *s, const plan_cand *a, const plan_cand *b, char *buf, size_t n);

/* Load curves (plan_curve.c): latency percentiles and goodput against offered rate. */
typedef struct {
    int cand;                  /* index into the plan's candidates */
    double rate;               /* req/s offered */
    sim_metrics m;             /* the capacity-trial run at that rate (scenario seed) */
    bool slo_met;              /* the SLO holds and the queue stays bounded */
} plan_curve_point;
/* `points` rates evenly spaced up to `max_rate` (0: 1.5 x the highest capacity among the
 * candidates, else 2 x the offered rate) into rates[]; returns the count. */
int plan_curve_rates(const scn_scenario *s, const plan_result *r, const int *cands, int n_cands, double max_rate,
                     int points, double *rates);
/* Simulates candidate `cand` at each rate (capacity-trial size, the scenario's seed) into out[]. */
int plan_curve(const scn_scenario *s, const plan_result *r, int cand, const double *rates, int n, plan_curve_point *out,
               char *err, size_t nerr);

/* Plan storage (plan_store.c). */
/* The stored predicted run of this candidate's choice on this scenario and seed: its id, 0 when
 * there is none, -1 on a database error. Runs from `simulate` of the same choice count. */
long plan_store_find(db *d, const scn_scenario *s, const plan_cand *c, unsigned long long seed);
/* Fills pending candidates' seeds from stored runs (a candidate every seed of which is stored
 * becomes done without simulating). Returns the number of seeds reused. */
long plan_store_reuse(db *d, const scn_scenario *s, plan_result *r);
/* Stores every simulated seed of every done candidate as a predicted run (the capacity found,
 * when searched, as the metrics capacity_req_per_s and capacity_out_tok_per_s). 0, or a
 * db_status with the message in err. */
int plan_store_save(db *d, const scn_scenario *s, plan_result *r, const char *started, char *err, size_t n);

/* Stores load-curve points as predicted runs of the scenario at each rate (the metric
 * sweep_rate_req_per_s marks them for `report`). 0, or a db_status with the message in err. */
int plan_store_curve(db *d, const scn_scenario *s, const plan_result *r, const plan_curve_point *p, int n,
                     const char *started, char *err, size_t nerr);

/* Speculative decoding (plan_spec.c). The candidate's first crossover batch: speculation beats
 * plain decode per token below it (kv_spec_win_ranges at the workload's mean decode context, up
 * to the candidate's max_num_seqs; it may pay again above it); -1 when the candidate does not
 * speculate. */
int plan_spec_crossover(const scn_scenario *s, const plan_cand *c);
/* Recommends speculation only where it pays: when the best candidate speculates at a mean decode
 * batch outside the ranges where it wins, the same candidate without speculation (when it ran
 * and is allowed) is recommended instead, and r->spec_gated records the one passed over. */
void plan_spec_gate(const scn_scenario *s, plan_result *r);
/* The sentence explaining where speculation pays and where it loses; 0 when no candidate
 * speculates. */
int plan_spec_explain(const scn_scenario *s, const plan_result *r, char *line, size_t n);
/* The sentence on expert parallelism and attention DP (plan_moe.c): one DP rank's step split
 * into attention, the busiest expert rank and the all-to-all; 0 when the recommendation uses
 * neither. */
int plan_moe_explain(const scn_scenario *s, const plan_result *r, char *line, size_t n);

/* Rules of thumb tested against this scenario's own numbers (plan_rules.c). */
typedef struct {
    char rule[160];
    char verdict[16];          /* "holds", "fails", "n/a" */
    char evidence[PLAN_LINE];
} plan_rule;
int plan_rules(const scn_scenario *s, const plan_result *r, plan_rule *out, int max);
/* KV offload only where it pays (plan_rules.c): when the recommendation offloads and the same
 * candidate without offload is not measurably worse, that one is recommended instead. */
void plan_offload_gate(const scn_scenario *s, plan_result *r);
/* The sentence on KV offload (plan_rules.c): what the recommendation's offload (or its absence)
 * does against the same candidate with the other choice, and what the host tier served; 0 when
 * offload was not an option. */
int plan_offload_explain(const scn_scenario *s, const plan_result *r, char *line, size_t n);

/* Swap preemption only where it pays: when the best candidate swaps and the same candidate
 * recomputing is not measurably worse (95 % intervals over seeds), recommend that one. */
void plan_swap_gate(const scn_scenario *s, plan_result *r);

/* A line on swap against recompute for the recommendation, naming which engines swap; 0 when
 * the plan did not compare them. */
int plan_swap_explain(const scn_scenario *s, const plan_result *r, char *line, size_t n);

/* Where a plan's simulations go (plan_trace.c): with KVPLAN_PLAN_TRACE=FILE each simulation the
 * planner runs appends a line to FILE (candidate, seed, phase, rate, requests, verdict, stopped
 * early, thread CPU seconds). plan_trace_context labels the calling thread's next simulations. */
bool plan_trace_on(void);
void plan_trace_context(int cand, int seed, const char *phase);   /* cand < 0: keep the thread's */
void plan_trace_note(int cand, const char *what);                  /* a candidate's end (status) */
double plan_trace_clock(void);
void plan_trace_sim(double rate, long requests, int verdict, bool stopped, double t0);

/* Capacity (plan_capacity.c). */
typedef struct {
    double rate;               /* req/s: the highest rate that kept up within the SLO; 0 if none */
    double out_tok_per_s;      /* output tokens/s at that rate in steady state (rate x tokens per arrival) */
    double lowest;             /* req/s: the lowest rate tried (when rate is 0: it missed down to here) */
    bool unbounded;            /* it kept up at the top of the searched range (`rate`): a lower bound only */
    bool cut;                  /* plan_capacity_search_below stopped: the answer is at most cut_at (rate: a lower bound) */
    double cut_at;             /* req/s: below the cutoff; the whole search's answer is at most this */
    int sims;                  /* simulations run */
    sim_metrics m;             /* the run at `rate` (zeroed when none) */
} plan_capacity_result;

/* The requests of a capacity trial of scenario `t` (as a candidate runs it, replicas set). */
/* `ch`: the candidate's cache choice, which bounds the sequences run at once by what the KV
 * cache holds (NULL: max_num_seqs alone). */
long plan_trial_requests(const scn_scenario *t, const sim_choice *ch);
/* The same in two parts: the rate-independent floor (the scenario's requests capped at
 * PLAN_CAPACITY_REQUESTS, at least PLAN_TRIAL_CYCLES x plan_trial_concurrency), and the trial
 * size at `rate` arrivals/s of `turns`-turn conversations given that floor (the span floor). */
long plan_trial_base(const scn_scenario *t, const sim_choice *ch);
long plan_trial_requests_at(long base, double rate, int turns);
/* The quantile a summary percentile of an SLO term reads (p50, p90, p95, p99; 1 for the maximum),
 * and the relative margin above a limit beyond which a value lies in a histogram bucket wholly
 * above the limit's (docs/planner.md, "Stopping a failing trial early"). */
double plan_slo_quantile(double pct);
double plan_slo_margin(void);
/* The sequences trial `t` runs at once: min(max_num_seqs, the sequences of the workload's mean
 * prompt + output the KV cache holds) x DP ranks x replicas (max_num_seqs alone without `ch`). */
long plan_trial_concurrency(const scn_scenario *t, const sim_choice *ch);
/* The arrival process's unit: "conversations/s" when requests come in multi-turn conversations
 * (the rate counts first turns), else "req/s". */
const char *plan_rate_unit(const scn_scenario *s);
/* Simulates the candidate at `rate` with `replicas` and `seed` on a capacity trial
 * (plan_trial_requests): true when the queue stays bounded and the SLO holds. */
bool plan_sustains(const scn_scenario *s, const plan_cand *c, unsigned long long seed, double rate, int replicas,
                   sim_metrics *m);
/* plan_sustains, but a trial whose failure is already settled by the requests completed so far
 * stops there (docs/planner.md, "Stopping a failing trial early"): the same verdict, sooner.
 * *complete: m holds the whole trial's metrics (always when it keeps up). */
bool plan_sustains_early(const scn_scenario *s, const plan_cand *c, unsigned long long seed, double rate, int replicas,
                         sim_metrics *m, bool *complete);
/* The highest rate the candidate sustains: starts at `hint` (0: the cost model's saturation
 * rate, plan_capacity_hint), gallops up or down until the answer changes, the first stride
 * `step` (> 1) and each next one the previous squared (down at most to 1/256 of the lower of
 * hint and the scenario's rate, up at most to hint x PLAN_CAPACITY_RANGE, where it stops with
 * `unbounded`), then bisects (geometric mean) until the bracket is within `tol` (relative).
 * Its trials stop once their failure is settled (plan_sustains_early). `at_hint`, when not NULL, is an
 * already simulated trial at `hint` with this seed, reused instead of simulating it again. */
int plan_capacity_search(const scn_scenario *s, const plan_cand *c, unsigned long long seed, int replicas, double hint,
                         double step, double tol, const sim_metrics *at_hint, plan_capacity_result *out);
/* The same search from `start` (0: plan_capacity_hint) with one trial already known: `known`,
 * the metrics of a trial of this seed at `known_rate` (NULL: none), which bounds the bracket
 * from below or above without being simulated again. */
int plan_capacity_search_from(const scn_scenario *s, const plan_cand *c, unsigned long long seed, int replicas,
                              double start, double step, double tol, double known_rate, const sim_metrics *known,
                              plan_capacity_result *out);
/* plan_capacity_search_from, but it stops (with `cut`) once its trials show the answer below
 * `cutoff` (a trial at or below it failed, or the search's path can only end below it), which is
 * all a caller that only compares it with the cutoff needs; it tries first the trials that settle
 * that (docs/planner.md, "Seeking the cutoff"). When it does not stop, its answer is the whole
 * search's. */
int plan_capacity_search_below(const scn_scenario *s, const plan_cand *c, unsigned long long seed, int replicas,
                               double start, double step, double tol, double known_rate, const sim_metrics *known,
                               double cutoff, plan_capacity_result *out);
/* The trials run on one candidate and seed, kept so that a later search of the same candidate
 * and seed reuses them instead of simulating them again (trials are deterministic:
 * docs/planner.md, "Trials are run once"). One thread at a time. */
typedef struct plan_trials plan_trials;
plan_trials *plan_trials_new(void);
void plan_trials_free(plan_trials *t);
int plan_trials_count(const plan_trials *t);
long plan_trials_reused(const plan_trials *t);   /* trials a search took from it instead of simulating */
/* The trials block-size twins share (docs/planner.md, "Block-size twins"): candidates that
 * differ only in block size take each other's trials when the engine proves the runs the same
 * (sim_twin_report). One table per plan, shared by its threads (it locks). */
typedef struct plan_twins plan_twins;
plan_twins *plan_twins_new(void);
void plan_twins_free(plan_twins *t);
long plan_twins_shared(const plan_twins *t);   /* trials taken from it instead of simulating */
/* The searches reading and filling `t` also read and fill the twin table `tw` (NULL: none). */
void plan_trials_share(plan_trials *t, plan_twins *tw);
/* plan_capacity_search_below reading and filling `trials` (NULL: none kept): the same answer,
 * fewer simulations when some of its trials were run before. */
int plan_capacity_search_memo(const scn_scenario *s, const plan_cand *c, unsigned long long seed, int replicas,
                              double start, double step, double tol, double known_rate, const sim_metrics *known,
                              double cutoff, plan_trials *trials, plan_capacity_result *out);
/* The gallop's first stride from the cost model's saturation rate (the rate search's start on a
 * candidate's first seed): the estimate lands within 0.75-1.35x of the simulated saturation on
 * most bundled scenarios (docs/simulator.md), so a quarter brackets most answers at once. Later
 * seeds start from the first seed's answer with a stride just under PLAN_CAPACITY_TOL, since
 * seeds move capacity by a few per cent. */
#define PLAN_CAPACITY_FIRST_STEP 1.25
#define PLAN_CAPACITY_SEED_STEP (1 + 0.999 * PLAN_CAPACITY_TOL)
/* Where a search starts: the cost model's saturation rate for the candidate (kv_saturation_rate,
 * docs/simulator.md), in the arrival process's unit; the scenario's rate when the model has no
 * estimate. */
double plan_capacity_hint(const scn_scenario *s, const plan_cand *c, int replicas);
/* The highest arrival rate (req/s) the candidate sustains within the SLO on the scenario's
 * seed; 0 if none; INFINITY when it keeps up at every rate searched; NaN for a trace.
 * `iterations` halvings of the initial doubling bracket. */
double plan_max_rate(const scn_scenario *s, const plan_cand *c, int iterations);
/* The fewest replicas (at the candidate's tp) that serve `rate` within the SLO; 0 if none up to max. */
int plan_min_replicas(const scn_scenario *s, const plan_cand *c, double rate, int max);
/* One row of `kvplan capacity`: a candidate's capacity over seeds, what it costs, the GPUs a
 * target rate needs, and the longest context at a concurrency. */
typedef struct {
    int cand;                  /* index into the plan's candidates */
    plan_interval rate;        /* req/s within the SLO, over seeds */
    bool unbounded;            /* some seed kept up at every rate searched (rate.lo is a lower bound) */
    double rate_per_gpu;
    double usd_per_mtok;       /* NaN without a price */
    int gpus_for_target;       /* tp x fewest replicas for the target; 0 when none up to max_replicas (or no target) */
    long max_context;          /* tokens */
} plan_capacity_row;
/* Fills up to `max` rows of an evaluated, ranked plan (capacity searched): the `top` best allowed
 * candidates, and the best of each other hardware profile. Returns the count. `progress` may be NULL. */
int plan_capacity_rows(const scn_scenario *s, const plan_result *r, int top, double target, int max_replicas,
                       long concurrency, plan_capacity_row *rows, int max,
                       void (*progress)(void *ud, long done, long total), void *ud);
/* The row needing the fewest GPUs for the target (ties: the cheaper, then the higher rate); -1 if none. */
int plan_capacity_fewest(const plan_capacity_row *rows, int n);

/* The longest context (tokens) a sequence may hold when `concurrency` of them share the cache,
 * capped at the deployment's max_model_len (no request may be longer). */
long plan_max_context(const scn_scenario *s, const plan_cand *c, long concurrency);

#endif
