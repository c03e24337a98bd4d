/* list.c: the intrusive request lists of request.h. */
#include "request.h"

#include <stddef.h>

void sim_list_push_back(sim_list *l, sim_req *r)
{
    r->next = NULL;
    r->prev = l->tail;
    if (l->tail) l->tail->next = r; else l->head = r;
    l->tail = r;
    l->n++;
}

void sim_list_push_front(sim_list *l, sim_req *r)
{
    r->prev = NULL;
    r->next = l->head;
    if (l->head) l->head->prev = r; else l->tail = r;
    l->head = r;
    l->n++;
}

void sim_list_remove(sim_list *l, sim_req *r)
{
    if (r->prev) r->prev->next = r->next; else l->head = r->next;
    if (r->next) r->next->prev = r->prev; else l->tail = r->prev;
    r->prev = r->next = NULL;
    l->n--;
}
