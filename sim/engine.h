/* engine.h: the event loop's state (engine.c). The scheduler (sched.h) works on one replica
 * at a time and never calls back into the engine. Internal to sim/. */
#ifndef KVPLAN_SIM_ENGINE_H
#define KVPLAN_SIM_ENGINE_H

#include "heap.h"
#include "metrics.h"
#include "sched.h"
#include "sim.h"
#include "workload.h"

enum { EV_ARRIVAL, EV_TURN, EV_STEP, EV_SAMPLE, EV_KICK };

#define SIM_FF_RING 64        /* completion chains: a step scans the slots finishing 64k steps on */

/* Per-replica scratch of the fast-forward (engine.c), sized to the largest batch so far. */
typedef struct {
    int cap;
    long *c0;                /* computed positions when the run began, per batch slot */
    long *cross;             /* step (from the run's start) at which the slot needs its next block */
    long *fin_at;            /* step in which the slot emits its last token */
    int *fnext;              /* chains of slots by fin_at modulo SIM_FF_RING, in batch order */
    int fhead[SIM_FF_RING];
    int *next;               /* chains of slots by cross modulo the block size */
    int *head;               /* chain heads, one per residue */
    int n_head;
    unsigned char *dead;     /* the slot's request completed during the run */
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
    sim_req *pool;           /* finished requests for reuse, linked through next */
    long total, done, alive, peak_alive;
    long used_now;           /* blocks referenced over all replicas, as of each replica's last change */
    double now;              /* s */
    char *err;
    size_t nerr;
    int internal;            /* the failure was the executor's or the machine's, not the input's */
} sim_engine;

#endif
