/* heap.h: the event core's priority queue: an intrusive binary min-heap ordered by
 * (time, class, sequence number), so events at equal times fire in the order they were pushed
 * (the libuv timer heap's rule) and a run with a fixed seed is bit-identical. The class lets an
 * event wait for everything else at its instant: the scheduler runs after every arrival at that
 * time has been queued, as a real engine's loop drains its input before scheduling. */
#ifndef KVPLAN_SIM_HEAP_H
#define KVPLAN_SIM_HEAP_H

#include <stddef.h>
#include <stdint.h>

/* Embed one in any struct that can be scheduled; `idx` is its slot, -1 when not queued. */
typedef struct {
    double t;        /* s */
    int prio;        /* class: lower fires first among equal times */
    uint64_t seq;    /* push order, the last tie-breaker */
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
static inline sim_event *sim_heap_peek(const sim_heap *h) { return h->n ? h->v[0] : NULL; }
/* Removes a queued event wherever it is. */
void sim_heap_remove(sim_heap *h, sim_event *e);

#endif
