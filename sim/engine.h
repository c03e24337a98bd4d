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

typedef struct {
    const scn_scenario *s;
    sim_choice c;
    sim_executor *ex;
    const sim_run_opts *o;
    sim_sched sched;
    sim_heap heap;
    sim_workload *wl;
    sim_replica *rep;
    int n_rep;
    long rr;                 /* round-robin cursor */
    sim_event arrival_ev;    /* the next arrival from the process */
    sim_req_spec next_spec;  /* the request that event will deliver */
    sim_event sample_ev;
    sim_acc acc;
    long total, done, alive, peak_alive;
    double now;              /* s */
    char *err;
    size_t nerr;
    int internal;            /* the failure was the executor's or the machine's, not the input's */
} sim_engine;

#endif
