/* engine.h: the engine's internal state, shared by the event loop (engine.c) and the
 * scheduler (sched.c). Internal to sim/. */
#ifndef KVPLAN_SIM_ENGINE_H
#define KVPLAN_SIM_ENGINE_H

#include "heap.h"
#include "kv_manager.h"
#include "metrics.h"
#include "sim.h"
#include "workload.h"

enum { EV_ARRIVAL, EV_TURN, EV_STEP, EV_SAMPLE, EV_KICK };
enum { REQ_WAITING, REQ_RUNNING, REQ_DONE };

typedef struct sim_req sim_req;
struct sim_req {
    sim_event ev;            /* its arrival (first turn or follow-up) */
    sim_req_spec spec;
    sim_kv_seq kv;
    int replica;
    int state;
    int total;               /* tokens known: prompt + generated */
    int computed;            /* positions whose KV is computed */
    int generated;           /* output tokens produced */
    int cached;              /* prompt tokens hit in the prefix cache at first admission */
    int preemptions;
    bool admitted_once;
    double t_sched, t_first, t_last;
    int step_new;            /* tokens scheduled in the running step */
    sim_req *prev, *next;    /* in the replica's waiting or running list */
};

/* A doubly linked list with head and tail: waiting is FIFO (preempted requests go back to the
 * front); running is in admission order (the newest, preempted first, at the tail). */
typedef struct { sim_req *head, *tail; long n; } sim_list;

void sim_list_push_back(sim_list *l, sim_req *r);
void sim_list_push_front(sim_list *l, sim_req *r);
void sim_list_remove(sim_list *l, sim_req *r);

typedef struct {
    sim_event ev;            /* its step's completion */
    sim_event kick_ev;       /* "schedule when this instant's arrivals are in" */
    int id;
    sim_kv *kv;
    sim_list waiting, running;
    bool busy;
    long outstanding;        /* requests routed here and not finished */
    double last_t;           /* time integrals are accumulated up to here */
    double frag_unused, frag_reserved;   /* tokens, as of the last scheduled step */
    /* the running step */
    sim_batch batch;
    sim_req **breq;
    int bcap;
    /* static batching: the batch in flight and its padded shape */
    sim_req **sb;
    int sb_n, sb_cap, sb_prompt, sb_output, sb_done;
} sim_replica;

typedef struct {
    const scn_scenario *s;
    sim_choice c;
    sim_executor *ex;
    const sim_run_opts *o;
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
    long watermark;          /* blocks kept free at admission */
    double now;
    char *err;
    size_t nerr;
    int failed;
    int internal;            /* the failure was the executor's or the machine's, not the input's */
} sim_engine;

/* Builds the next step for a replica (scheduling, allocation, preemption) into rep->batch;
 * returns the number of sequences scheduled (0: nothing to do), or -1 on a fatal problem. */
int sim_sched_step(sim_engine *e, sim_replica *rep);
/* Applies a finished step: tokens produced, completions, KV commits. */
int sim_sched_finish(sim_engine *e, sim_replica *rep);
/* Records a finished request (metrics, sinks, its conversation's next turn); the caller frees it. */
int sim_engine_complete(sim_engine *e, sim_replica *rep, sim_req *r);
/* Adds time integrals (KV use, fragmentation) for a replica up to now. */
void sim_engine_account(sim_engine *e, sim_replica *rep);

#endif
