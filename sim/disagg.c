/* disagg.c: the prefill/decode disaggregation coordinator (disagg.h).
 *
 * Two pools of replicas share one event clock. A request is routed to a prefill replica, whose
 * scheduler computes its prompt and its first token as a one-token request; the prefill replica
 * keeps the KV (sim_replica.hold_done) until it is handed off. The request is then routed to a
 * decode replica and waits in that replica's hand-off queue (FIFO) until the decode replica has
 * blocks for its whole current sequence and a seat under max_num_seqs, and both ends of the link
 * are free; the transfer then takes the exposed time of kv_transfer_time (model/kv_transfer.h).
 * When it lands, the prefill blocks are released, the first token is delivered (TTFT includes
 * the hand-off) and the request joins the decode replica's running list as a decoding sequence;
 * from there the ordinary scheduler decodes it, preempting by recompute if blocks run out.
 * docs/simulator.md, "Disaggregation", gives the rules and what real systems do.
 *
 * The loop mirrors engine.c's (events fire in (time, class, push order), kicks wait for every
 * event at their instant) without engine.c's fast-forward: each step is formed by the scheduler. */
#include "disagg.h"
#include "heap.h"
#include "kv_tier.h"
#include "metrics.h"
#include "sched.h"
#include "workload.h"
#include "../model/kv_blocks.h"
#include "../model/kv_transfer.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONTAINER(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

enum { DV_ARRIVAL, DV_TURN, DV_STEP, DV_KICK, DV_XFER, DV_SAMPLE };
enum { POOL_PREFILL, POOL_DECODE };

/* A request inside the coordinator: the scheduler's request plus its hand-off state. */
typedef struct {
    sim_req r;               /* r.ev: its arrival, then its transfer's completion */
    int output;              /* tokens the client asked for (the prefill pool's copy asks for 1) */
    int prefill, decode;     /* replica indices within each pool; decode -1 until routed */
    sim_kv_seq dkv;          /* the decode replica's blocks while the transfer runs */
    double t_ready;          /* s: prefill finished, KV waiting to be handed off */
    double t_xfer;           /* s: hand-off started */
    double bytes;            /* the hand-off's bytes */
} dreq;

typedef struct {
    scn_scenario s;          /* the scenario as this pool sees it */
    sim_executor ex;
    bool has_ex;
    sim_sched sched;
    sim_replica *rep;
    int n;
    long rr;
    long blocks;             /* per replica */
    bool *link_busy;         /* per replica: its end of a transfer is in use */
    sim_list *xq;            /* decode: per replica, prefilled requests waiting for a hand-off */
    int *incoming;           /* decode: transfers landing on the replica */
    double busy;             /* replica-seconds spent in steps */
    long steps, batch_sum, batch_max;   /* this pool's steps and the sequences in them */
    double used_integral, used_peak;   /* block-seconds referenced, blocks referenced at once */
    long used_now;
    long *used_seen;
    double *last_t;
} pool;

typedef struct {
    const scn_scenario *s;   /* the whole scenario (disaggregation on) */
    sim_choice c;
    kv_cache_cfg cfg;
    const sim_run_opts *o;
    pool p[2];
    sim_heap heap;
    sim_workload *wl;
    sim_event arrival_ev, sample_ev;
    sim_req_spec next_spec;
    sim_acc acc;
    sim_hist h_xfer, h_wait;
    double bytes;
    dreq *free_list;
    long total, done, alive, peak_alive, max_waiting;
    double now, t0;
    char *err;
    size_t nerr;
    int internal;
} coord;

void sim_disagg_pool_scenario(const scn_scenario *s, int which, scn_scenario *out)
{
    const scn_pool *pl = which == POOL_PREFILL ? &s->deployment.disagg.prefill : &s->deployment.disagg.decode;
    *out = *s;
    out->hardware = pl->hardware;
    out->deployment.tensor_parallel = pl->tensor_parallel;
    out->deployment.replicas = pl->replicas;
    out->deployment.disagg.on = false;
    /* The planner's hardware and parallelism lists describe the colocated deployment. */
    out->options.n_hardware = out->options.n_tp = out->options.n_replicas = 0;
}

static pool *pool_of(coord *k, const sim_replica *rep)
{
    for (int i = 0; i < 2; i++)
        if (rep >= k->p[i].rep && rep < k->p[i].rep + k->p[i].n) return &k->p[i];
    return NULL;
}

/* Time integral of referenced blocks, per pool. */
static void account(coord *k, pool *P, sim_replica *rep)
{
    double dt = k->now - P->last_t[rep->id];
    P->last_t[rep->id] = k->now;
    if (dt > 0) sim_kv_account(rep->kv, dt);
    if (dt > 0) P->used_integral += dt * (double)sim_kv_referenced(rep->kv);
}

static void refresh_used(pool *P, sim_replica *rep)
{
    long r = sim_kv_referenced(rep->kv);
    P->used_now += r - P->used_seen[rep->id];
    P->used_seen[rep->id] = r;
    if ((double)P->used_now > P->used_peak) P->used_peak = (double)P->used_now;
}

/* The routing policies of engine.c's route(), over one pool. */
static int route(coord *k, pool *P, const sim_req_spec *s)
{
    if (P->n == 1) return 0;
    scn_router how = k->s->deployment.router;
    if (how == SCN_ROUTER_ROUND_ROBIN) return (int)(P->rr++ % P->n);
    long key = s->conversation >= 0 ? s->conversation : s->prefix_group;
    if (how == SCN_ROUTER_PREFIX_AFFINITY && key >= 0) return (int)(key % P->n);
    int best = 0;
    for (int i = 1; i < P->n; i++)
        if (P->rep[i].outstanding < P->rep[best].outstanding) best = i;
    return best;
}

static dreq *new_req(coord *k, const sim_req_spec *spec)
{
    dreq *q = k->free_list;
    if (q) {
        k->free_list = (dreq *)q->r.next;
        sim_kv_seq a = q->r.kv, b = q->dkv;
        memset(q, 0, sizeof *q);
        q->r.kv.blocks = a.blocks; q->r.kv.cap = a.cap;
        q->dkv.blocks = b.blocks; q->dkv.cap = b.cap;
    } else if (!(q = calloc(1, sizeof *q))) {
        snprintf(k->err, k->nerr, "out of memory");
        k->internal = 1;
        return NULL;
    }
    q->r.spec = *spec;
    q->output = spec->output;
    q->r.spec.output = 1;   /* the prefill instance stops after the first token */
    q->r.total = spec->prompt;
    q->r.ev.idx = -1;
    q->r.kv.prefix_seed = q->dkv.prefix_seed = spec->prefix_seed;
    q->r.kv.body_seed = q->dkv.body_seed = spec->body_seed;
    q->r.kv.prefix_len = q->dkv.prefix_len = spec->prefix_len;
    q->decode = -1;
    if (++k->alive > k->peak_alive) k->peak_alive = k->alive;
    return q;
}

static void free_req(coord *k, dreq *q)
{
    q->r.next = (sim_req *)k->free_list;
    k->free_list = q;
    k->alive--;
}

static void free_all(dreq *q)
{
    free(q->r.kv.blocks);
    free(q->dkv.blocks);
    free(q);
}

/* Schedules the replica's next step after every event at this instant (engine.c's EV_KICK). */
static int poke(coord *k, sim_replica *rep)
{
    if (rep->busy || rep->kick_ev.idx >= 0) return 0;
    rep->kick_ev.kind = DV_KICK;
    rep->kick_ev.prio = 1;
    return sim_heap_push(&k->heap, &rep->kick_ev, k->now);
}

static int kick(coord *k, pool *P, sim_replica *rep)
{
    if (rep->busy) return 0;
    account(k, P, rep);
    P->sched.now = k->now;
    int n = sim_sched_step(&P->sched, rep);
    if (n < 0) { k->internal = P->sched.internal; return -1; }
    refresh_used(P, rep);
    if (n == 0) {
        /* A prefill replica may wait for its held KV to be handed off; an empty one cannot. */
        if (rep->waiting.n && !rep->running.n && sim_kv_referenced(rep->kv) == 0) {
            snprintf(k->err, k->nerr, "request %ld cannot be admitted even into an empty %s replica",
                     rep->waiting.head->spec.id, P == &k->p[POOL_PREFILL] ? "prefill" : "decode");
            return -1;
        }
        return 0;
    }
    double dt = 0;
    char msg[256] = "";
    if (P->ex.run(P->ex.ctx, &rep->batch, &dt, msg, sizeof msg)) {
        snprintf(k->err, k->nerr, "executor %s failed: %s", P->ex.name, msg[0] ? msg : "bad step time");
        k->internal = 1;
        return -1;
    }
    if (!(dt >= 0) || !isfinite(dt)) {
        snprintf(k->err, k->nerr, "a step of %d sequences takes %g s under executor %s: check the hardware's "
                 "bandwidth and compute figures", n, dt, P->ex.name);
        return -1;
    }
    dt += sim_sched_wait_s(&P->sched, dt);   /* tier reloads and swaps the step waits for (sched.c) */
    k->acc.steps++;
    k->acc.batch_sum += n;
    if (n > k->acc.batch_max) k->acc.batch_max = n;
    P->steps++;
    P->batch_sum += n;
    if (n > P->batch_max) P->batch_max = n;
    P->busy += dt;
    rep->busy = true;
    rep->ev.kind = DV_STEP;
    return sim_heap_push(&k->heap, &rep->ev, k->now + dt);
}

/* Records a finished request (engine.c's complete()). */
static int complete(coord *k, int replica, dreq *q)
{
    sim_req *r = &q->r;
    sim_request_row row;
    double fe = sim_req_row(k->s, r, replica, q->output, &row);   /* as engine.c's complete() */
    if (r->spec.measured) sim_acc_request(&k->acc, &k->s->slo, &row);
    k->done++;
    if (k->o->on_request && k->o->on_request(k->o->ud, &row)) {
        snprintf(k->err, k->nerr, "writing the per-request output failed");
        return -1;
    }
    if (k->o->on_progress && (k->done % 1024 == 0)) k->o->on_progress(k->o->ud, k->done, k->total);
    sim_req_spec prev = r->spec, next;
    prev.output = q->output;
    if (sim_workload_next_turn(k->wl, &prev, k->now + fe, &next) == 0) {   /* as engine.c */
        dreq *t = new_req(k, &next);
        if (!t) return -1;
        t->r.ev.kind = DV_TURN;
        if (sim_heap_push(&k->heap, &t->r.ev, next.arrival)) return -1;
    }
    k->total = sim_workload_total(k->wl);
    return 0;
}

/* Starts the hand-offs at the head of decode replica d's queue that can start now. */
static int try_handoff(coord *k, int d)
{
    pool *D = &k->p[POOL_DECODE], *P = &k->p[POOL_PREFILL];
    sim_replica *rep = &D->rep[d];
    const bool paged = k->c.layout == SCN_LAYOUT_PAGED;
    sim_req *h;
    while ((h = D->xq[d].head)) {
        dreq *q = CONTAINER(h, dreq, r);
        if (D->link_busy[d] || P->link_busy[q->prefill]) return 0;
        if (rep->running.n + D->incoming[d] >= k->s->deployment.max_num_seqs) return 0;
        /* Blocks for the whole sequence so far: the prompt's KV and the first token's slot. */
        int upto = q->r.spec.prompt + 1;
        if (paged) {
            if (sim_kv_needed(rep->kv, &q->dkv, upto) + rep->watermark > sim_kv_available(rep->kv)) return 0;
            if (sim_kv_grow(rep->kv, &q->dkv, upto)) return 0;
        } else {
            long res = kv_contiguous_reserve(&D->s, &k->cfg, q->r.spec.prompt, q->output, upto);
            if (sim_kv_reserve(rep->kv, &q->dkv, res)) return 0;
        }
        refresh_used(D, rep);
        sim_list_remove(&D->xq[d], h);
        /* Layer-by-layer sending hides behind the prefill only when nothing held it back. */
        bool overlap = k->now <= q->t_ready;
        kv_transfer_cost x = kv_transfer_time(k->s, &k->cfg, q->r.spec.prompt, q->t_ready - q->r.t_sched, overlap);
        q->t_xfer = k->now;
        q->bytes = x.bytes;
        D->link_busy[d] = P->link_busy[q->prefill] = true;
        D->incoming[d]++;
        q->r.ev.kind = DV_XFER;
        q->r.ev.prio = 0;
        if (sim_heap_push(&k->heap, &q->r.ev, k->now + x.exposed)) return -1;
    }
    return 0;
}

static int try_all_handoffs(coord *k)
{
    for (int d = 0; d < k->p[POOL_DECODE].n; d++)
        if (try_handoff(k, d)) return -1;
    return 0;
}

/* A prefill finished: a one-token request is done; otherwise it queues for a hand-off. */
static int prefilled(coord *k, sim_replica *rep, dreq *q)
{
    pool *P = &k->p[POOL_PREFILL], *D = &k->p[POOL_DECODE];
    if (q->output <= 1) {   /* no decode needed: the prefill's token is the reply */
        sim_kv_release(rep->kv, &q->r.kv);
        rep->outstanding--;
        int rc = complete(k, rep->id, q);
        free_req(k, q);
        return rc;
    }
    (void)P;
    q->t_ready = k->now;
    q->decode = route(k, D, &q->r.spec);
    /* A hand-off that no decode instance can ever take is the input's fault, reported now
     * rather than left waiting. */
    sim_replica *drep = &D->rep[q->decode];
    int upto = q->r.spec.prompt + 1;
    long need = k->c.layout == SCN_LAYOUT_PAGED ? sim_kv_needed(drep->kv, &q->dkv, upto)
                                                : kv_contiguous_reserve(&D->s, &k->cfg, q->r.spec.prompt, q->output, upto);
    if (need > sim_kv_total(drep->kv) - drep->watermark) {
        /* Led by the field responsible, so the caller can locate it in the file (scn_locate.h). */
        snprintf(k->err, k->nerr, "deployment.disaggregation.decode: request %ld's KV needs %ld %s on a decode instance, "
                 "more than the %ld it holds",
                 q->r.spec.id, need, k->c.layout == SCN_LAYOUT_PAGED ? "blocks" : "tokens",
                 sim_kv_total(drep->kv) - drep->watermark);
        sim_kv_release(rep->kv, &q->r.kv);
        free_req(k, q);
        return -1;
    }
    D->rep[q->decode].outstanding++;
    sim_list_push_back(&D->xq[q->decode], &q->r);
    return 0;
}

/* A hand-off landed: the prefill replica lets the KV go; the decode replica runs the request. */
static int landed(coord *k, dreq *q)
{
    pool *P = &k->p[POOL_PREFILL], *D = &k->p[POOL_DECODE];
    sim_replica *prep = &P->rep[q->prefill], *drep = &D->rep[q->decode];
    account(k, P, prep);
    account(k, D, drep);
    sim_req *r = &q->r;
    sim_kv_release(prep->kv, &r->kv);
    prep->outstanding--;
    refresh_used(P, prep);
    sim_kv_seq held = r->kv;   /* released; its buffer is kept for reuse */
    r->kv = q->dkv;
    q->dkv = held;
    q->dkv.n_blocks = 0;
    sim_kv_commit(drep->kv, &r->kv, r->spec.prompt);
    P->link_busy[q->prefill] = D->link_busy[q->decode] = false;
    D->incoming[q->decode]--;
    double xfer = k->now - q->t_xfer, wait = q->t_xfer - q->t_ready;
    sim_hist_add(&k->h_xfer, xfer);
    sim_hist_add(&k->h_wait, wait);
    k->bytes += q->bytes;
    /* The client's first token arrives with the hand-off. */
    r->spec.output = q->output;
    r->computed = r->spec.prompt;
    r->total = r->spec.prompt + 1;
    r->generated = 1;
    r->t_first = r->t_last = k->now;
    r->state = REQ_RUNNING;
    r->replica = q->decode;
    r->step_new = r->step_draft = 0;
    sim_list_push_back(&drep->running, r);
    refresh_used(D, drep);
    return poke(k, prep) || poke(k, drep) || try_all_handoffs(k);
}

static int finish_step(coord *k, pool *P, sim_replica *rep)
{
    P->sched.now = k->now;
    if (sim_sched_finish(&P->sched, rep)) return -1;
    bool prefill = P == &k->p[POOL_PREFILL];
    int rc = 0;
    for (int i = 0; i < rep->n_fin; i++) {
        dreq *q = CONTAINER(rep->fin[i], dreq, r);
        if (rc) {   /* after a failure, only recycle what no list holds */
            if (prefill) sim_kv_release(rep->kv, &q->r.kv);
            free_req(k, q);
            continue;
        }
        if (prefill) {
            rc = prefilled(k, rep, q);
        } else {
            rep->outstanding--;
            rc = complete(k, k->p[POOL_PREFILL].n + rep->id, q);
            free_req(k, q);
        }
    }
    rep->n_fin = rep->n_gone = 0;
    refresh_used(P, rep);
    if (rc) return -1;
    /* Running sequences are scheduled before new hand-offs take blocks (vLLM's order). */
    if (kick(k, P, rep)) return -1;
    return try_all_handoffs(k);
}

static int next_arrival(coord *k)
{
    int rc = sim_workload_next(k->wl, &k->next_spec, k->err, k->nerr);
    if (rc < 0) return -1;
    if (rc > 0) return 0;
    k->arrival_ev.kind = DV_ARRIVAL;
    return sim_heap_push(&k->heap, &k->arrival_ev, k->next_spec.arrival);
}

/* A request refused on arrival (a full waiting queue on its prefill instance, or a prompt with no
 * room for one output token within max_model_len) is counted, its conversation's later turns are
 * never sent (the total shrinks by them), and its client sends its next request: as engine.c's
 * refuse. */
static int refuse(coord *k, dreq *q, const sim_replica *rep)
{
    sim_acc_reject(&k->acc, q->r.spec.measured, q->r.spec.too_long, k->now);
    k->done++;
    sim_req_spec next;
    bool more = sim_workload_next_rejected(k->wl, &q->r.spec, k->now, &next) == 0;
    free_req(k, q);
    k->total = sim_workload_total(k->wl);
    if (!more) return 0;
    dreq *t = new_req(k, &next);
    if (!t) return -1;
    t->r.ev.kind = DV_TURN;
    /* Turned away by prefill instance rep's full queue, the client sends again no sooner than
     * rep's scheduler next runs (engine.c's refuse): the end of its running step, or after its
     * pending kick at this instant (class 2); not at once, to find the same full queue again. */
    if (rep && (rep->busy || rep->kick_ev.idx >= 0)) {
        double t_next = rep->busy ? rep->ev.t : k->now;
        if (next.arrival <= t_next) {
            next.arrival = t->r.spec.arrival = t_next;
            t->r.ev.prio = rep->busy ? 0 : 2;
        }
    }
    return sim_heap_push(&k->heap, &t->r.ev, next.arrival);
}

static int enqueue(coord *k, dreq *q)
{
    if (q->r.spec.too_long) return refuse(k, q, NULL);
    pool *P = &k->p[POOL_PREFILL];
    if (k->t0 < 0) k->t0 = k->now;
    q->prefill = route(k, P, &q->r.spec);
    q->r.replica = q->prefill;
    sim_replica *rep = &P->rep[q->prefill];
    if (rep->waiting.n >= k->max_waiting) return refuse(k, q, rep);
    rep->outstanding++;
    q->r.state = REQ_WAITING;
    sim_list_push_back(&rep->waiting, &q->r);
    return poke(k, rep);
}

static int sample(coord *k)
{
    sim_sample x = {.t = k->now};
    double used = 0, total = 0;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < k->p[i].n; j++) {
            sim_replica *rep = &k->p[i].rep[j];
            used += (double)sim_kv_referenced(rep->kv);
            total += (double)sim_kv_total(rep->kv);
            x.waiting += rep->waiting.n + (i == POOL_DECODE ? k->p[i].xq[j].n : 0);
            x.running += rep->running.n;
        }
    x.kv_used = total > 0 ? used / total : 0;
    if (k->o->on_sample && k->o->on_sample(k->o->ud, &x)) {
        snprintf(k->err, k->nerr, "writing the time series failed");
        return -1;
    }
    if (k->heap.n == 0) return 0;
    return sim_heap_push(&k->heap, &k->sample_ev, k->now + k->o->sample_interval);
}

static int loop(coord *k)
{
    sim_event *ev;
    while ((ev = sim_heap_pop(&k->heap))) {
        k->now = ev->t;
        int rc = 0;
        switch (ev->kind) {
        case DV_ARRIVAL: {
            dreq *q = new_req(k, &k->next_spec);
            rc = !q || enqueue(k, q) || next_arrival(k);
            break;
        }
        case DV_TURN:
            ev->prio = 0;   /* a retry's class (refuse) holds only for its send */
            rc = enqueue(k, CONTAINER(ev, dreq, r.ev));
            break;
        case DV_STEP: {
            sim_replica *rep = CONTAINER(ev, sim_replica, ev);
            pool *P = pool_of(k, rep);
            rep->busy = false;
            account(k, P, rep);
            rc = finish_step(k, P, rep);
            break;
        }
        case DV_KICK: {
            sim_replica *rep = CONTAINER(ev, sim_replica, kick_ev);
            rc = kick(k, pool_of(k, rep), rep);
            break;
        }
        case DV_XFER:
            rc = landed(k, CONTAINER(ev, dreq, r.ev));
            break;
        case DV_SAMPLE:
            rc = sample(k);
            break;
        }
        if (rc) return -1;
    }
    return 0;
}

/* Sizes a pool: its scenario, its executor and its replicas' block managers. */
static int pool_init(coord *k, int which, const sim_run_opts *o)
{
    pool *P = &k->p[which];
    sim_disagg_pool_scenario(k->s, which, &P->s);
    if (sim_executor_model(&P->s, &k->c, &P->ex)) { snprintf(k->err, k->nerr, "out of memory"); k->internal = 1; return -1; }
    P->has_ex = true;
    P->n = P->s.deployment.replicas;
    P->sched = (sim_sched){.s = &P->s, .c = k->c, .acc = &k->acc, .err = k->err, .nerr = k->nerr, .seed = o->seed};
    P->rep = calloc((size_t)P->n, sizeof *P->rep);
    P->link_busy = calloc((size_t)P->n, sizeof *P->link_busy);
    P->xq = calloc((size_t)P->n, sizeof *P->xq);
    P->incoming = calloc((size_t)P->n, sizeof *P->incoming);
    P->used_seen = calloc((size_t)P->n, sizeof *P->used_seen);
    P->last_t = calloc((size_t)P->n, sizeof *P->last_t);
    if (!P->rep || !P->link_busy || !P->xq || !P->incoming || !P->used_seen || !P->last_t) {
        snprintf(k->err, k->nerr, "out of memory");
        k->internal = 1;
        return -1;
    }
    long b = o->kv_blocks_override > 0 ? o->kv_blocks_override : P->ex.kv_blocks(P->ex.ctx, 0);
    if (b <= 0) {
        kv_pool p = kv_pool_size(&P->s, &k->cfg, k->c.layout == SCN_LAYOUT_PAGED, k->c.block_size);
        /* What is missing, never a negative size (as `kvplan memory` says it). */
        snprintf(k->err, k->nerr, "deployment.disaggregation.%s: the model does not fit the %s pool (%s, tensor_parallel "
                 "%d): weights, activations and runtime %s %.2f GiB %s",
                 which == POOL_PREFILL ? "prefill" : "decode", which == POOL_PREFILL ? "prefill" : "decode",
                 P->s.hardware.name, P->s.deployment.tensor_parallel, p.kv_budget < 0 ? "need" : "leave",
                 fabs(p.kv_budget) / 1073741824.0,
                 p.kv_budget < 0 ? "more than the memory the engine may use, leaving none for the KV cache"
                                 : "for the KV cache, less than one block");
        return -1;
    }
    P->blocks = b;
    for (int i = 0; i < P->n; i++) {
        sim_replica *rep = &P->rep[i];
        rep->id = i;
        rep->ev.idx = rep->kick_ev.idx = -1;
        rep->batch.replica = i;
        rep->hold_done = which == POOL_PREFILL;
        rep->watermark = k->c.layout == SCN_LAYOUT_PAGED ? b / 100 : 0;
        /* The same block manager sim_run gives a colocated replica (engine.c); per-replica KV
         * settings added there (memory tiers, so a decode pool may offload) belong here too,
         * read from this pool's scenario P->s (its hardware carries the pool's tiers). */
        rep->kv = sim_kv_init(b, k->c.block_size, k->c.layout == SCN_LAYOUT_PAGED, k->c.prefix_cache, k->c.sink,
                              k->c.window);
        if (!rep->kv || sim_kv_tiers_attach(rep->kv, &P->s, &k->c)) {   /* offload tiers (kv_tier.h) */
            snprintf(k->err, k->nerr, "out of memory for %ld KV blocks", b);
            k->internal = 1;
            return -1;
        }
        const scn_model *md = &k->s->model;
        if (md->sliding_window > 0 && md->sliding_layers > 0) {
            int win = md->sliding_layers < md->layers ? md->sliding_layers : md->layers;
            sim_kv_set_groups(rep->kv, md->layers - win, win, md->sliding_window);
        }
    }
    return 0;
}

static void pool_free(pool *P)
{
    for (int i = 0; P->rep && i < P->n; i++) {
        sim_replica *rep = &P->rep[i];
        for (sim_list *l = &rep->waiting; l; l = l == &rep->waiting ? &rep->running : NULL)
            while (l->head) { sim_req *r = l->head; sim_list_remove(l, r); free_all(CONTAINER(r, dreq, r)); }
        if (P->xq)
            while (P->xq[i].head) { sim_req *r = P->xq[i].head; sim_list_remove(&P->xq[i], r); free_all(CONTAINER(r, dreq, r)); }
        sim_kv_free(rep->kv);
        sim_sched_replica_free(rep);
    }
    if (P->has_ex && P->ex.free) P->ex.free(P->ex.ctx);
    free(P->rep); free(P->link_busy); free(P->xq); free(P->incoming); free(P->used_seen); free(P->last_t);
}

int sim_disagg_run(const scn_scenario *s, const sim_choice *c, const sim_executor *ex, const sim_run_opts *o,
                   sim_metrics *m, char *err, size_t n)
{
    memset(m, 0, sizeof *m);
    if (ex && ex->measured) {
        snprintf(err, n, "disaggregation is predicted only: executor %s measures one pool", ex->name);
        return SIM_E_DATA;
    }
    if (c->scheduler == SCN_SCHED_STATIC) {
        snprintf(err, n, "disaggregation needs a continuous or chunked scheduler, not static batches");
        return SIM_E_DATA;
    }
    if (sim_choice_check(c, err, n)) return SIM_E_DATA;
    coord *k = calloc(1, sizeof *k);
    if (!k) { snprintf(err, n, "out of memory"); return SIM_E_INTERNAL; }
    k->s = s; k->c = *c; k->o = o; k->err = err; k->nerr = n; k->t0 = -1;
    k->cfg = kv_cache_cfg_make(s, c->kv_dtype, c->sink, c->window);
    k->arrival_ev.idx = k->sample_ev.idx = -1;
    k->sample_ev.kind = DV_SAMPLE;
    sim_heap_init(&k->heap);
    int rc = SIM_E_INTERNAL;
    if (sim_acc_init(&k->acc, &s->workload) || sim_hist_init(&k->h_xfer) || sim_hist_init(&k->h_wait)) {
        snprintf(err, n, "out of memory");
        goto out;
    }
    if (pool_init(k, POOL_PREFILL, o) || pool_init(k, POOL_DECODE, o)) { rc = k->internal ? SIM_E_INTERNAL : SIM_E_DATA; goto out; }
    k->max_waiting = sim_max_waiting(s, o, k->p[POOL_PREFILL].n);
    int noinput = 0;
    k->wl = sim_workload_init(s, o->seed, &noinput, err, n);
    if (!k->wl) { rc = noinput ? SIM_E_NOINPUT : SIM_E_DATA; goto out; }
    k->total = sim_workload_total(k->wl);
    rc = SIM_E_DATA;
    if (next_arrival(k)) goto out;
    if (o->sample_interval > 0 && sim_heap_push(&k->heap, &k->sample_ev, 0)) goto out;
    rc = loop(k) ? (k->internal ? SIM_E_INTERNAL : SIM_E_DATA) : SIM_OK;
    for (int d = 0; rc == SIM_OK && d < k->p[POOL_DECODE].n; d++)
        if (k->p[POOL_DECODE].xq[d].n) {
            snprintf(err, n, "%ld hand-offs never found room on decode instance %d", k->p[POOL_DECODE].xq[d].n, d);
            rc = SIM_E_DATA;
        }
    if (rc == SIM_OK && k->done < k->total) {
        snprintf(err, n, "%ld of %ld requests never finished: a hand-off can never find room in the decode pool",
                 k->total - k->done, k->total);
        rc = SIM_E_DATA;
    }
    if (rc == SIM_OK) {
        pool *P = &k->p[POOL_PREFILL], *D = &k->p[POOL_DECODE];
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < k->p[i].n; j++) account(k, &k->p[i], &k->p[i].rep[j]);
        /* The summary's KV figures are the decode pool's: its capacity limits the batch. */
        k->acc.used_integral = D->used_integral;
        k->acc.used_peak = D->used_peak;
        if (sim_acc_finish(&k->acc, D->blocks * D->n, m)) {
            snprintf(err, n, "out of memory keeping the completions of a window cut by time");
            rc = SIM_E_INTERNAL;
            goto out;
        }
        m->unsent = sim_workload_unsent(k->wl);
        sim_kv_tier_sum ts;   /* both pools' offload tiers (kv_tier.h) */
        memset(&ts, 0, sizeof ts);
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < k->p[i].n; j++) sim_kv_tiers_add(&ts, &k->p[i].rep[j].kv, 1, &k->p[i].s, &k->c);
        kv_cache_cfg dc = kv_cache_cfg_make(&D->s, c->kv_dtype, c->sink, c->window);
        sim_kv_tiers_metrics(&k->acc, &ts, kv_offload_bytes_per_rank(&D->s, &dc, c->block_size), D->s.deployment.tensor_parallel, m);
        m->kv_blocks = D->blocks;
        m->kv_tokens = c->layout == SCN_LAYOUT_PAGED ? D->blocks * c->block_size : D->blocks;
        m->events = (long)k->heap.next_seq;
        m->peak_in_flight = k->peak_alive;
        m->prefill_replicas = P->n;
        m->decode_replicas = D->n;
        m->transfer_bytes = k->bytes;
        m->transfer_mean = k->h_xfer.count ? sim_hist_sum(&k->h_xfer) / k->h_xfer.count : 0;
        m->transfer_p99 = k->h_xfer.count ? sim_hist_quantile(&k->h_xfer, 0.99) : 0;
        m->transfer_wait_mean = k->h_wait.count ? sim_hist_sum(&k->h_wait) / k->h_wait.count : 0;
        m->transfer_wait_p99 = k->h_wait.count ? sim_hist_quantile(&k->h_wait, 0.99) : 0;
        m->transfer_wait_max = k->h_wait.count ? k->h_wait.max : 0;
        double span = k->now - (k->t0 > 0 ? k->t0 : 0);
        m->prefill_busy = span > 0 ? P->busy / (span * P->n) : 0;
        m->decode_busy = span > 0 ? D->busy / (span * D->n) : 0;
        m->prefill_kv_util_mean = span > 0 ? P->used_integral / (span * (double)(P->blocks * P->n)) : 0;
        /* The batch per pool: the overall batch_mean mixes prefill and decode steps. */
        m->prefill_batch_mean = P->steps ? (double)P->batch_sum / P->steps : 0;
        m->decode_batch_mean = D->steps ? (double)D->batch_sum / D->steps : 0;
        m->decode_batch_max = D->batch_max;
        m->decode_max_num_seqs = D->s.deployment.max_num_seqs;
        if (o->on_progress) o->on_progress(o->ud, k->done, k->done);
    }
out:
    /* Drain the heap before the pools go: a trial stopped early (or an error) leaves step events
     * that live inside the pools' replicas, and popping one writes its heap index. */
    for (sim_event *ev; (ev = sim_heap_pop(&k->heap));)
        if (ev->kind == DV_TURN || ev->kind == DV_XFER) free_all(CONTAINER(ev, dreq, r.ev));
    pool_free(&k->p[POOL_PREFILL]);
    pool_free(&k->p[POOL_DECODE]);
    while (k->free_list) { dreq *q = k->free_list; k->free_list = (dreq *)q->r.next; free_all(q); }
    sim_heap_free(&k->heap);
    sim_workload_free(k->wl);
    sim_hist_free(&k->h_xfer);
    sim_hist_free(&k->h_wait);
    sim_acc_free(&k->acc);
    free(k);
    return rc;
}
