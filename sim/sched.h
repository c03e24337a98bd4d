/* sched.h: the scheduler's view of a replica and the calls the event loop makes into it.
 * The scheduler never calls back into the engine: a finished step leaves the requests it
 * completed in the replica (fin, gone) and the engine records and frees them. Internal to sim/. */
#ifndef KVPLAN_SIM_SCHED_H
#define KVPLAN_SIM_SCHED_H

#include "heap.h"
#include "kv_manager.h"
#include "metrics.h"
#include "request.h"
#include "sim.h"

/* What the scheduler reads and writes besides a replica. */
typedef struct {
    const scn_scenario *s;
    sim_choice c;
    sim_acc *acc;            /* counters the scheduler adds to (preemptions, prompt tokens, ITL) */
    double now;              /* s: the engine's clock, set before each call */
    char *err;
    size_t nerr;
    int internal;            /* the last failure was the machine's (out of memory), not the input's */
    double itl_v;            /* s: a run of equal inter-token gaps not yet recorded */
    long itl_n;
    unsigned long long seed; /* the run's seed: speculative acceptance draws (sim/spec.c) */
    double xfer_s;           /* s: KV transfers (tier reloads, swaps) the step being formed waits
                              * for, at full length (sim_sched_wait_s says what the step adds) */
    double reload_s[3];      /* s: the part of xfer_s that is prefix reloads, by kv_tier_id */
    double block_bytes;      /* KV bytes of one block on one GPU (0 until first needed) */
    const sim_req *tried;    /* the waiting head whose admission attempt failed as the first of
                              * the step last formed (NULL: none did), and the budget it had:
                              * the fast-forward watches from there (engine.c) */
    long tried_budget;
    /* SGLang's admission reservation (engine adm_reserve): the step being formed's reservation,
     * in tokens, of what it admitted (each whole prompt's or last chunk's clipped output), and the
     * decoding requests' clipped remaining output, summed once a step (run_known). */
    double round_res;
    long run_left;
    bool run_known;
    bool tails;              /* the caller frees finished requests by state (REQ_DONE) and frees
                              * rep->gone, so a finished request may stay in the batch for tail
                              * steps (sim/engine.c sets it; sim/disagg.c does not) */
} sim_sched;

typedef struct {
    sim_event ev;            /* its step's completion */
    sim_event kick_ev;       /* "schedule when this instant's arrivals are in" */
    int id;
    sim_kv *kv;
    long watermark;          /* blocks kept free at admission */
    sim_list waiting, running;
    bool busy;
    long outstanding;        /* requests routed here and not finished */
    bool hold_done;          /* a finished request keeps its KV for the caller to release (a prefill
                              * instance holds it until the hand-off: sim/disagg.c) */
    int ms_left;             /* multi-step scheduling: decode steps left in the run the last
                              * scheduling decision started (0: the next step is a decision) */
    double ntr;              /* SGLang's new_token_ratio (engine adm_reserve), when ntr_live; else
                              * the engine's adm_init (at start and after idle) */
    bool ntr_live;
    long used_seen;          /* blocks referenced when the engine last counted this replica */
    double last_t;           /* s: time integrals are accumulated up to here */
    double frag_unused, frag_reserved;   /* tokens, as of the last scheduled step */
    /* the running step */
    sim_batch batch;
    sim_req **breq;
    int bcap;
    /* what the last finished step produced, for the engine: requests that completed (those in
     * state REQ_DONE no longer hold KV and are the engine's to free), and static-batch members
     * released at their batch's end (already recorded; the engine frees them) */
    sim_req **fin, **gone;
    int n_fin, n_gone, gone_cap;
    /* outputs one step late (engine.async_output): requests whose first or last token waits for
     * the next step's end to reach the client (sim/engine.c, hold and deliver) */
    sim_req **held;
    int n_held, held_cap;
    /* the front end (one server process per replica) prepares one request at a time: free from
     * this time on (sim/engine.c, admit; docs/cost-model.md, "Front end") */
    double fe_free;          /* s */
    long fe_waiting;         /* requests routed here that wait for the front end */
    /* static batching: the batch in flight and its padded shape */
    sim_req **sb;
    int sb_n, sb_cap, sb_prompt, sb_output, sb_done;
} sim_replica;

/* Seconds the step just formed waits for its KV transfers, given step_s, the executor's time for
 * it: swaps in full; tier reloads in full, or only what the step's compute does not hide when
 * the engine loads layer by layer (scn_engine.kv_layerwise; docs/cost-model.md, "Layerwise
 * reload overlap"). Adds the reload seconds it charges to each tier's counter. */
double sim_sched_wait_s(sim_sched *e, double step_s);

/* Fills one batch row for request r: its new tokens from position `start` over `context` held
 * tokens, its block table and its token-id seeds. Every place that forms a batch uses it. */
void sim_batch_seq_fill(sim_batch_seq *q, const sim_req *r, int new_tokens, int start, int context);

/* Whether prefill rows share a step with decode rows under this choice and engine: the engine's
 * prefill_mix, or the scheduler's own rule (chunked mixes, continuous prefills alone). */
bool sim_sched_mixes(const sim_sched *q);

/* Builds the next step for a replica (scheduling, allocation, preemption) into rep->batch;
 * returns the number of sequences scheduled (0: nothing to do), or -1 on a fatal problem. */
int sim_sched_step(sim_sched *q, sim_replica *rep);
/* The continuous scheduler's first choice on its own: a prefill step of the waiting requests
 * that can be admitted (into rep->batch; the running sequences are not touched), or 0 when none
 * can, in which case sim_sched_step would form a decode step; -1 on a fatal problem. The
 * engine's fast-forward (engine.c) uses it while it holds the running sequences' state. */
int sim_sched_prefill(sim_sched *q, sim_replica *rep);
/* A mixed step's other rows while the engine's fast-forward holds the running sequences before
 * `from` as decode rows (engine.c), in two calls, as sim_sched_step forms them after those rows:
 * sim_sched_chunks gives the running sequences from `from` on (prefilling ones) their next
 * chunks within `budget` (growing, preempting the newest as sim_sched_step does), into
 * rep->batch (these rows only), and returns what is left of the budget (-1: a fatal problem);
 * sim_sched_fill then admits waiting requests into what is left (0, or -1), noting e->tried. */
long sim_sched_chunks(sim_sched *q, sim_replica *rep, sim_req *from, long budget);
int sim_sched_fill(sim_sched *q, sim_replica *rep, long budget);
/* SGLang's new_token_ratio on rep (engine adm_reserve), and its fall at a decode step:
 * max(ratio - (adm_init - adm_min) / adm_decay_steps, adm_min). The scheduler and the
 * fast-forward's decode steps both take it from here, so the two agree to the bit. */
double sim_sched_ratio(const sim_sched *q, const sim_replica *rep);
void sim_sched_decay(const sim_sched *q, sim_replica *rep);
/* Applies a finished step: tokens produced, KV commits, completions (into rep->fin/gone). */
int sim_sched_finish(sim_sched *q, sim_replica *rep);
/* Frees the scheduler's buffers of a replica (not its requests). */
void sim_sched_replica_free(sim_replica *rep);

#endif
