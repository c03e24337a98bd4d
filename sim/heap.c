/* heap.c: binary min-heap of event pointers; each event records its slot so it can be removed. */
#include "heap.h"

#include <stdlib.h>

static int before(const sim_event *a, const sim_event *b)
{
    if (a->t != b->t) return a->t < b->t;
    if (a->prio != b->prio) return a->prio < b->prio;
    return a->seq < b->seq;
}

static void place(sim_heap *h, int i, sim_event *e) { h->v[i] = e; e->idx = i; }

static void up(sim_heap *h, int i)
{
    sim_event *e = h->v[i];
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!before(e, h->v[p])) break;
        place(h, i, h->v[p]);
        i = p;
    }
    place(h, i, e);
}

static void down(sim_heap *h, int i)
{
    sim_event *e = h->v[i];
    for (;;) {
        int c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && before(h->v[c + 1], h->v[c])) c++;
        if (!before(h->v[c], e)) break;
        place(h, i, h->v[c]);
        i = c;
    }
    place(h, i, e);
}

void sim_heap_init(sim_heap *h) { h->v = NULL; h->n = h->cap = 0; h->next_seq = 0; }
void sim_heap_free(sim_heap *h) { free(h->v); h->v = NULL; h->n = h->cap = 0; }

int sim_heap_push(sim_heap *h, sim_event *e, double t)
{
    if (h->n == h->cap) {
        int cap = h->cap ? h->cap * 2 : 64;
        sim_event **nv = realloc(h->v, sizeof *nv * (size_t)cap);
        if (!nv) return -1;
        h->v = nv; h->cap = cap;
    }
    e->t = t;
    e->seq = h->next_seq++;
    place(h, h->n++, e);
    up(h, h->n - 1);
    return 0;
}

sim_event *sim_heap_pop(sim_heap *h)
{
    if (!h->n) return NULL;
    sim_event *top = h->v[0];
    top->idx = -1;
    if (--h->n) { place(h, 0, h->v[h->n]); down(h, 0); }
    return top;
}

void sim_heap_remove(sim_heap *h, sim_event *e)
{
    int i = e->idx;
    if (i < 0) return;
    e->idx = -1;
    if (i == --h->n) return;
    place(h, i, h->v[h->n]);
    if (i > 0 && before(h->v[i], h->v[(i - 1) / 2])) up(h, i);
    else down(h, i);
}
