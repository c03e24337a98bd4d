/* sim.h: the serving engine's public interface: one option choice, the executor the engine
 * asks for step times, and the metrics a run produces.
 *
 * The engine never knows whether time is predicted or measured: it hands each step's batch to
 * an executor and advances its clock by the seconds the executor returns ("one engine, two
 * clocks", DESIGN.md). sim_executor_model() predicts with the cost model; backends measure. */
#ifndef KVPLAN_SIM_H
#define KVPLAN_SIM_H

#include "../loader/scn.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* One point of the option space. */
typedef struct {
    scn_layout layout;
    int block_size;          /* tokens per block (paged) */
    bool prefix_cache;
    scn_dtype kv_dtype;
    scn_attention attention;
    scn_scheduler scheduler;
    int sink, window;        /* StreamingLLM; window 0 = off */
    int spec;                /* index into options.spec (speculative decoding); 0 with no list = off */
    scn_offload kv_offload;  /* tiers evicted prefix blocks spill into (docs/simulator.md) */
    scn_preemption preemption;
} sim_choice;

/* The first value of every option list. */
sim_choice sim_choice_first(const scn_scenario *s);
/* Checks a choice is runnable (e.g. prefix caching needs paging); fills why and returns -1 if not. */
int sim_choice_check(const sim_choice *c, char *why, size_t n);
/* "paged/16 prefix=on bf16 flash continuous window=off", then " offload=cpu" and
 * " preempt=swap" when those are not off and recompute */
void sim_choice_describe(const sim_choice *c, char *buf, size_t n);

/* ---- The executor interface ---- */
/* One sequence's part in a step: `new_tokens` at positions [start, start + new_tokens), on top
 * of `context` tokens whose KV is held (context < start when a window dropped old tokens). */
typedef struct {
    long req_id;
    int new_tokens;
    int start;              /* position of the first new token */
    int context;            /* tokens whose KV is held before this step */
    const int32_t *blocks;  /* block table: block ids holding the sequence's KV, oldest first */
    int n_blocks;
    /* Token ids: positions below prefix_len come from the shared prefix's stream, the rest
     * from the request's (or its conversation's) own stream; see sim_seq_token(). */
    uint64_t prefix_seed, body_seed;
    int prefix_len;
    int draft;              /* speculative decoding: draft tokens verified in this row (new_tokens =
                             * draft + 1); 0 for plain decode and prefill (sim/spec.c) */
} sim_batch_seq;

typedef struct {
    int n;
    sim_batch_seq *seqs;
    long tokens;            /* sum of new_tokens */
    int replica;            /* whose KV pool the block tables index */
} sim_batch;

/* A table of function pointers plus a context (ggml backend style). `run` is required; the
 * others may be NULL. */
typedef struct {
    const char *name;
    void *ctx;
    /* Executes one step and reports its duration in seconds; -1 with a message on failure. */
    int (*run)(void *ctx, const sim_batch *b, double *seconds, char *err, size_t n);
    /* The KV pool the executor holds for one replica, in blocks (contiguous: tokens); <= 0
     * when it holds none. The engine sizes each replica's block manager with it. */
    long (*kv_blocks)(void *ctx, int replica);
    void (*free)(void *ctx);
    /* Optional (a predicting clock): the seconds of a step in which each of n sequences computes
     * one token, at positions that sum to sum_start, exactly as `run` would report them; 1 when
     * it cannot answer from that summary. The engine then advances whole runs of such steps
     * without forming each batch (docs/simulator.md, "Fast-forward"). */
    int (*decode_time)(void *ctx, long n, long sum_start, double *seconds);
    /* Optional, with key_cap (a predicting clock whose layers cap the keys they attend, a
     * sliding window): the same from keys[k], the sum over the n rows of min(position + 1,
     * key_cap[k]) for layer kind k (0 global, 1 sliding; key_cap 0: no cap); 1 when it cannot
     * answer. */
    int (*decode_time_keys)(void *ctx, long n, const long keys[2], double *seconds);
    long key_cap[2];
    /* Optional: the seconds of a step in which each of n sequences computes one token, at
     * positions starts[0 .. n-1] in batch order, exactly as `run` would report them for that
     * batch; 1 when it cannot answer (the engine then forms the batch and calls `run`). For the
     * decode steps decode_time declines (rows that split the keys differently). */
    int (*decode_time_rows)(void *ctx, int n, const int *starts, double *seconds);
    /* Optional: the seconds of a mixed step whose first n rows each compute one token (decode
     * rows, at positions that sum to sum_start, no layer capping their keys) and whose other rows
     * are b's (prefill chunks, prompts), exactly as `run` would report them for all the rows in
     * that order; 1 when it cannot answer (the engine then forms the whole batch and calls
     * `run`). The fast-forward's mixed steps (docs/simulator.md, "Fast-forward"). */
    int (*mixed_time)(void *ctx, long n, long sum_start, const sim_batch *b, double *seconds);
    /* True for a real device: every step must run on it, and its pools are fixed (an
     * override of the block count must agree with them). False for the cost model's clock. */
    bool measured;
} sim_executor;

/* The predicting executor: kv_step_time() of the cost model for this scenario and choice; its
 * pool is the cost model's block count (kv_pool_size) for every replica. */
int sim_executor_model(const scn_scenario *s, const sim_choice *c, sim_executor *out);
/* The pool that executor reports for every replica (its kv_blocks), without making it. */
long sim_executor_model_blocks(const scn_scenario *s, const sim_choice *c);

/* ---- Metrics ---- */
typedef enum { SIM_Q_TTFT, SIM_Q_TPOT, SIM_Q_ITL, SIM_Q_E2E, SIM_Q_QUEUE, SIM_Q_COUNT } sim_quantity;
const char *sim_quantity_name(sim_quantity q);

typedef struct {
    long count;
    double mean, p50, p90, p95, p99, max;   /* s */
} sim_summary;

typedef struct {
    long requests;             /* completed */
    double duration;           /* s, first arrival to last completion */
    double req_per_s, input_tok_per_s, output_tok_per_s;
    double goodput;            /* requests/s meeting every SLO term's limit */
    double slo_attainment;     /* fraction of requests meeting every SLO term's limit */
    sim_summary q[SIM_Q_COUNT];
    double kv_util_mean, kv_util_peak;   /* referenced blocks / total blocks, time-weighted */
    double frag_mean;          /* reserved-but-unused / reserved tokens, time-weighted */
    double prefix_hit_rate;    /* prompt tokens served from the prefix cache / prompt tokens */
    long preemptions;
    long rejected;             /* arrivals turned away: by a full waiting queue, or too_long */
    long too_long;             /* of rejected: prompts with no room for one output token within
                                * max_model_len, which engines refuse (sim/workload.c, fit) */
    long rejected_run;         /* every arrival turned away over the whole run, in the measurement
                                * window or not (rejected counts the window's) */
    long unsent;               /* conversation turns never sent, over the whole run: the conversation
                                * outgrew max_model_len, or one of its turns was rejected */
    double batch_mean;         /* sequences per step */
    long batch_max;
    long steps;
    long kv_blocks;            /* per replica */
    long kv_tokens;            /* capacity per replica in tokens */
    long events;               /* events processed (a speed figure) */
    long peak_in_flight;       /* requests alive at once (memory) */
    /* KV offload tiers (docs/simulator.md, "KV offload tiers"), summed over replicas; index
     * kv_tier_id (0 cpu, 1 disk, 2 remote). */
    double tier_hit_rate[3];   /* prompt tokens reloaded from the tier / prompt tokens */
    double tier_bytes[3];      /* bytes moved through its link, both directions, all GPUs */
    double tier_xfer_s[3];     /* s of reloads charged to steps */
    double tier_occupancy[3];  /* blocks held / capacity, time-weighted */
    long swaps;                /* preemptions by swap (the rest recomputed) */
    double swap_bytes;         /* bytes swapped out and in, all GPUs */
    double swap_xfer_s;        /* s of swap-outs and swap-ins charged to steps */
    /* Prefill/decode disaggregation (sim/disagg.c); all zero for a colocated run, whose
     * listing leaves them out. kv_util_*, kv_blocks and kv_tokens are then the decode pool's. */
    long prefill_replicas, decode_replicas;
    double transfer_bytes;     /* KV handed from prefill to decode instances, all requests */
    double transfer_mean, transfer_p99;     /* s: a hand-off's exposed time */
    double transfer_wait_mean, transfer_wait_p99, transfer_wait_max;   /* s: prefill done to hand-off start */
    double prefill_busy, decode_busy;       /* fraction of instance-time running a step */
    double prefill_kv_util_mean;            /* referenced / total blocks of the prefill pool */
    double prefill_batch_mean, decode_batch_mean;   /* sequences per step of each pool */
    long decode_batch_max, decode_max_num_seqs;      /* the decode pool's largest batch and its cap */
} sim_metrics;

/* The metrics as (name, value) pairs, names carrying their unit ("ttft_p99_s"): the order and
 * names the database and every output format use. Returns the count written (at most max). */
typedef enum { SIM_UNIT_COUNT, SIM_UNIT_SECONDS, SIM_UNIT_RATE, SIM_UNIT_FRACTION, SIM_UNIT_NUMBER } sim_unit;
typedef struct { const char *name; double value; sim_unit unit; } sim_metric_kv;
#define SIM_METRICS_MAX 96
int sim_metrics_list(const sim_metrics *m, sim_metric_kv *out, int max);
/* Sets the field a listed name stands for; -1 for an unknown name. */
int sim_metrics_set(sim_metrics *m, const char *name, double v);
/* The window's arrivals (served + rejected) and the share of them turned away (NAN with none):
 * what a client counts as failed requests; the planner's tables and reasons print it. */
double sim_arrivals(const sim_metrics *m);
double sim_rejected_share(const sim_metrics *m);

/* Per-request record handed to the optional sink as each request completes. */
typedef struct {
    long id;
    int replica;
    double arrival, queue, ttft, tpot, e2e;   /* s */
    int prompt, output, cached;               /* tokens */
    int preemptions;
    long conversation;                        /* -1 for single-turn requests */
    int turn;
} sim_request_row;

typedef struct {
    double t;          /* s */
    double kv_used;    /* fraction of blocks referenced, over all replicas */
    long waiting, running;
} sim_sample;

/* The block-size twin report (docs/planner.md, "Block-size twins"): a run asked about other
 * block sizes says for which of them a run of the same scenario would make every scheduling
 * decision the same (the same steps, times and per-request figures; only the figures counted in
 * blocks differ: KV use, fragmentation, the pool's size). "Same" is proven, never guessed; runs
 * the proof does not cover answer 0. It holds for the part of the run done, also when a sink
 * ended it early. */
#define SIM_TWINS_MAX 8
typedef struct {
    int n;                           /* block sizes asked about */
    int block_size[SIM_TWINS_MAX];
    long blocks[SIM_TWINS_MAX];      /* the pool per replica a run at that size gets (the
                                        executor's kv_blocks for that choice) */
    unsigned same;                   /* out: bit i set when block_size[i]'s run is the same */
} sim_twin_report;

/* What the fast-forward did in a run (docs/simulator.md, "Fast-forward"): a test's and a
 * profile's figure, never part of the results. */
typedef struct {
    long runs;               /* runs begun */
    long steps;              /* steps the runs formed and timed without the scheduler */
    long watched;            /* of those, steps before which a request waited for a free seat with
                              * the prefix cache on and no admission attempt was needed: its
                              * prefix match was watched and had not changed */
    long fired_commit;       /* watches that ended because the first block the match missed was
                              * registered (a running sequence filled a block with its hash) */
    long fired_evict;        /* ... because one of its hit blocks was (or was about to be) evicted */
    long mixed;              /* of the steps, mixed ones: the run's decode rows with the scheduler's
                              * prefill chunks or admitted prompts (sim_sched_chunks) */
    long mixed_priced;       /* of those, priced by the executor's mixed_time (the rest by their batch) */
} sim_ff_counts;

typedef struct {
    unsigned long long seed;
    double sample_interval;                   /* s; 0 = no time series */
    int (*on_request)(void *ud, const sim_request_row *r);   /* may be NULL */
    int (*on_sample)(void *ud, const sim_sample *s);         /* may be NULL */
    void (*on_progress)(void *ud, long done, long total);    /* may be NULL */
    void *ud;
    long kv_blocks_override;                  /* >0: this many blocks per replica (a measuring
                                                 executor's pools must hold exactly this many) */
    long max_waiting;                         /* requests waiting across the engine (split evenly
                                                 over replicas) beyond which arrivals are
                                                 rejected and counted; 0: the scenario's
                                                 deployment.max_queued_requests per replica,
                                                 else SIM_MAX_WAITING (sim_max_waiting) */
    bool per_step;                            /* form every step through the scheduler (no
                                                 fast-forward); results are identical either way */
    sim_twin_report *twins;                   /* NULL, or the block sizes to report on (filled) */
    sim_ff_counts *ff_counts;                 /* optional: what the fast-forward did (filled at the end) */
} sim_run_opts;

/* The default bound on waiting requests: about 80 MiB of queued requests, far beyond any queue
 * a served workload builds, so only a run that is overloaded for good ever rejects. */
#define SIM_MAX_WAITING (1L << 18)

/* The waiting bound of each of `units` engine instances (replicas, attention-DP ranks, or a
 * disaggregated run's prefill instances): o->max_waiting split evenly over them when given (o
 * may be NULL); else the scenario's deployment.max_queued_requests, which engines apply per
 * instance (SGLang's scheduler, TensorRT-LLM's executor); else SIM_MAX_WAITING split evenly.
 * At least 1. The one place a scenario's bound becomes the simulator's (docs/simulator.md,
 * "Waiting queue bound"). */
long sim_max_waiting(const scn_scenario *s, const sim_run_opts *o, long units);

/* Failure classes of sim_run. */
enum { SIM_OK = 0, SIM_E_DATA = -1, SIM_E_NOINPUT = -2, SIM_E_INTERNAL = -3 };

/* Runs the scenario's workload through the engine under one choice. Returns SIM_OK, or a
 * failure class with the reason in err: SIM_E_DATA (a bad trace or length file, a request or
 * model that can never fit), SIM_E_NOINPUT (a workload file that cannot be read),
 * SIM_E_INTERNAL (executor failure, out of memory). */
int sim_run(const scn_scenario *s, const sim_choice *c, sim_executor *ex, const sim_run_opts *o,
            sim_metrics *m, char *err, size_t n);

/* The predicting run: sim_run with the cost model as clock, the scenario's seed and no sinks. */
int sim_run_predicted(const scn_scenario *s, const sim_choice *c, sim_metrics *m, char *err, size_t n);

/* Synthetic token ids: deterministic in (seed, stream, position), shared by every request that
 * shares the stream (a prefix group, a conversation). */
uint32_t sim_token_id(uint64_t stream_seed, long pos);

static inline uint32_t sim_seq_token(const sim_batch_seq *q, long pos)
{
    return pos < q->prefix_len ? sim_token_id(q->prefix_seed, pos) : sim_token_id(q->body_seed, pos);
}

#endif
