/* request.h: a request inside the engine, and the lists a replica keeps them in (waiting,
 * running). Internal to sim/. */
#ifndef KVPLAN_SIM_REQUEST_H
#define KVPLAN_SIM_REQUEST_H

#include "heap.h"
#include "kv_manager.h"
#include "workload.h"

#include <stdbool.h>

enum { REQ_WAITING, REQ_RUNNING, REQ_DONE };

typedef struct sim_req sim_req;
struct sim_req {
    sim_event ev;            /* its arrival (first turn or follow-up) */
    sim_req_spec spec;
    sim_kv_seq kv;
    int replica;
    int state;               /* REQ_DONE: finished and its KV released */
    int total;               /* tokens known: prompt + generated */
    int computed;            /* positions whose KV is computed */
    int generated;           /* output tokens produced */
    int cached;              /* prompt tokens hit in the prefix cache at first admission */
    int preemptions;
    long swapped;            /* blocks of its KV in the host swap area (preemption: swap), else 0 */
    bool admitted_once;
    bool deferred;           /* routed, waiting for its replica's running step to end (enqueue) */
    bool ingress;            /* routed and counted, waiting for its replica's front end (admit) */
    bool fe_queued;          /* counted in its replica's fe_waiting until the front end reaches it */
    double t_sched, t_first, t_last;   /* s */
    int step_new;            /* tokens scheduled in the running step */
    int step_draft;          /* of which speculative drafts to verify (sim/spec.c) */
    int tail;                /* finished and recorded, but still in the batch for this many decode
                              * steps (multi-step run's end, overlap scheduler: sim/sched.c) */
    /* Outputs one step late (engine.async_output; docs/cost-model.md, "Engine profiles"): the
     * client sees the first and the last token this much after the step that made them ended. */
    double lag_first, lag_last;          /* s */
    bool first_seen;         /* its first token's delivery time is known */
    bool held;               /* on its replica's held list, waiting for the next step's end */
    bool held_fin;           /* finished: recorded when its last token is delivered */
    bool held_free;          /* finished and in no list (no tail steps, or its tail ended): freed
                              * once recorded */
    bool run_wait;           /* finished inside a multi-step run whose tokens are handed over at
                              * its end (engine.multi_step_stream false) */
    sim_req *prev, *next;    /* in the replica's waiting or running list */
};

/* A doubly linked list with head and tail: waiting is FIFO (preempted requests go back to the
 * front); running is in admission order (the newest, preempted first, at the tail). */
typedef struct { sim_req *head, *tail; long n; } sim_list;

void sim_list_push_back(sim_list *l, sim_req *r);
void sim_list_push_front(sim_list *l, sim_req *r);
void sim_list_remove(sim_list *l, sim_req *r);

#endif
