/* heap.h: the event core's priority queue: an intrusive binary min-heap ordered by
 * (time, sequence number), so events at equal times fire in the order they were pushed and a
 * run with a fixed seed is bit-identical (the libuv timer heap's rule). */
#ifndef KVPLAN_SIM_HEAP_H
#define KVPLAN_SIM_HEAP_H

#include <stdint.h>

/* Embed one in any struct that can be scheduled; `idx` is its slot, -1 when not queued. */
typedef struct {
    double t;        /* s */
    uint64_t seq;    /* push order, the tie-breaker */
    int idx;
    int kind;        /* what the owner means by this event */
} sim_event;

typedef struct {
    sim_event **v;
    int n, cap;
    uint64_t next_seq;
} sim_heap;

void sim_heap_init(sim_heap *h);
void sim_heap_free(sim_heap *h);
/* Queues e at time t; -1 on out of memory. e must not be queued already. */
int sim_heap_push(sim_heap *h, sim_event *e, double t);
/* Removes and returns the earliest event, or NULL when empty. */
sim_event *sim_heap_pop(sim_heap *h);
sim_event *sim_heap_peek(const sim_heap *h);
/* Removes a queued event wherever it is. */
void sim_heap_remove(sim_heap *h, sim_event *e);

#endif
