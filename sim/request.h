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
    double t_sched, t_first, t_last;   /* s */
    int step_new;            /* tokens scheduled in the running step */
    int step_draft;          /* of which speculative drafts to verify (sim/spec.c) */
    int tail;                /* finished and recorded, but still in the batch for this many decode
                              * steps (multi-step run's end, overlap scheduler: sim/sched.c) */
    sim_req *prev, *next;    /* in the replica's waiting or running list */
};

/* A doubly linked list with head and tail: waiting is FIFO (preempted requests go back to the
 * front); running is in admission order (the newest, preempted first, at the tail). */
typedef struct { sim_req *head, *tail; long n; } sim_list;

void sim_list_push_back(sim_list *l, sim_req *r);
void sim_list_push_front(sim_list *l, sim_req *r);
void sim_list_remove(sim_list *l, sim_req *r);

#endif
