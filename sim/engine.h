/* engine.h: the event loop's state (engine.c). The scheduler (sched.h) works on one replica
 * at a time and never calls back into the engine. Internal to sim/. */
#ifndef KVPLAN_SIM_ENGINE_H
#define KVPLAN_SIM_ENGINE_H

#include "heap.h"
#include "metrics.h"
#include "sched.h"
#include "sim.h"
#include "workload.h"

enum { EV_ARRIVAL, EV_TURN, EV_STEP, EV_SAMPLE, EV_KICK, EV_DEFER, EV_INGRESS };

#define SIM_FF_RING 64        /* completion chains: a step scans the slots finishing 64k steps on (a power of two) */

/* A replica's fast-forward run (engine.c): the running sequences it holds, one slot each in
 * batch (running) order, and the run's state. While a run is active the slots, not the requests,
 * hold the sequences' positions, token counts and last-token times. Arrays grow to the most
 * slots a run has held. */
typedef struct {
    int cap, n;              /* slots allocated, slots in use (finished ones included until compacted) */
    sim_req **req;           /* the slot's request */
    long *c0;                /* its position at the start of step k is c0 + k */
    long *g0;                /* tokens it has generated once step k completes: g0 + k */
    long *first;             /* the first step of the run it takes part in */
    long *cross;             /* the step at whose forming it needs its next block */
    long *fin_at;            /* the step in which it emits its last token */
    int *fnext;              /* chains of slots by fin_at modulo SIM_FF_RING, in slot order */
    int fhead[SIM_FF_RING], ftail[SIM_FF_RING];
    int *next;               /* chains of slots by cross modulo the block size, in slot order */
    int *head, *tail;        /* chain ends, one per residue */
    int *cnt;                /* live slots per residue: a bound on the blocks a step's forming needs */
    int n_head;
    unsigned char *dead;     /* the slot's request completed */
    sim_kv_seq **grow;       /* scratch: the sequences a step's forming grows by a block */
    int *pos;                /* scratch: the live slots' positions, for the executor's decode_time_rows */
    int n_dead;
    bool active;             /* a run holds the replica's running sequences */
    bool pending;            /* its step K is in flight (the replica's EV_STEP is the run's) */
    bool suspended;          /* a prefill step of the scheduler's runs between two of its steps */
    long K;                  /* the step formed or in flight: steps 0 .. K - 1 have completed */
    int res;                 /* K modulo the block size (1 contiguous), kept as K advances: no division a step */
    double T, dt;            /* s: step K's start and duration */
    double t_last;           /* s: step K - 1's end, the last token of every slot with first < K */
    int fresh;               /* slots [fresh, n) have first == K (their last token is their own) */
    int alive, measured, measured_fresh;   /* live slots; those whose gaps are recorded; of them, fresh */
    int fins;                /* slots that completed in the last completed step */
    long base;               /* Σ c0 over live slots: their positions at step k sum to base + alive * k */
    long unused, reserved;   /* tokens: the fragmentation terms of step K */
    long limit;              /* contiguous: the first step some slot needs a larger reservation (-1: none) */
    bool windowed;           /* the model's window frees KV as the slots grow (committed at block fills) */
    bool freed;              /* windowed: the last completed step's commits made KV available */
    /* A request waiting for a free seat with the prefix cache on: its admission can change
     * only with its prefix match (the KV it would need only grows scarcer between completions),
     * so the run watches the match (sim_kv_watch) instead of retrying every step. */
    bool watching;           /* this run watches (prefix cache on, no offload tiers, no model window) */
    bool wfire;              /* the next step must attempt admission (or hand back) regardless */
    const sim_req *whead;    /* the waiting head the watch is of */
    /* Keys capped by a window (the executor's key_cap) for layer kind capk (-1: none, or the
     * run prices its steps otherwise): slot i attends min(c0 + k + 1, C) of them at step k,
     * all C from step capat = C - 1 - c0 on. Uncapped live slots: cu of them, Σ c0 = cB. */
    int capk;
    long capC, cu, cB, cap_k;  /* cap_k: the last step whose cappings are applied */
    long *capat;
    unsigned char *capped;
    int *cnext;              /* chains of uncapped slots by capat modulo SIM_FF_RING, in slot order */
    int chead[SIM_FF_RING], ctail[SIM_FF_RING];
    sim_batch batch;         /* the live slots' batch, for an executor that times steps from it */
    /* Mixed steps (a scheduler that puts prefill rows in the decode step: sim_sched_mixes): the
     * slots are the first `alive` running sequences and decode first; the running sequences after
     * them (prefilling ones) and admitted prompts are the scheduler's rows, formed after the
     * slots' growth (sim_sched_chunks, sim_sched_fill) into rep->batch and applied after the
     * slots' completion (sim_sched_finish). */
    bool mixes;              /* the run carries mixed steps */
    bool mixed;              /* step K has the scheduler's rows in rep->batch */
    bool stale;              /* something an admission depends on may have changed since the last
                              * failed attempt (of whead, with wbudget of the step's budget left) */
    long wbudget;
    sim_batch mbatch;        /* a mixed step's whole batch, for an executor that times it so */
    int mcap;
} sim_ff;

typedef struct {
    const scn_scenario *s;
    sim_choice c;
    sim_executor *ex;
    const sim_run_opts *o;
    sim_sched sched;
    sim_heap heap;
    sim_workload *wl;
    sim_replica *rep;
    sim_ff *ff;              /* one per replica */
    int n_rep;
    long rr;                 /* round-robin cursor */
    long max_waiting;        /* per replica: arrivals beyond this many waiting are rejected */
    sim_event arrival_ev;    /* the next arrival from the process */
    sim_req_spec next_spec;  /* the request that event will deliver */
    sim_event sample_ev;
    sim_acc acc;
    sim_req *pool;           /* finished requests for reuse, linked through next, without tables */
    sim_kv_tables tables;    /* their block tables, for the next admissions (kv_manager.h) */
    long total, done, alive, peak_alive;
    long used_now;           /* blocks referenced over all replicas, as of each replica's last change */
    bool tiered;             /* some replica has KV offload tiers or a swap area (sim_kv_account) */
    double now;              /* s */
    char *err;
    size_t nerr;
    int internal;            /* the failure was the executor's or the machine's, not the input's */
    sim_ff_counts ffc;       /* what the fast-forward did (sim_run_opts.ff_counts) */
} sim_engine;

#endif
