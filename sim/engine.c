/* engine.c: the discrete-event loop. Events are arrivals (from the arrival process, or a
 * conversation's next turn), step completions (one per replica) and time-series samples; they
 * fire in (time, push order), so a run is a pure function of the scenario, choice and seed. */
#include "engine.h"
#include "../model/kv_blocks.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONTAINER(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

static void account(sim_engine *e, sim_replica *rep)
{
    double dt = e->now - rep->last_t;
    rep->last_t = e->now;
    if (dt <= 0) return;
    e->acc.used_integral += dt * (double)sim_kv_referenced(rep->kv);
    e->acc.frag_unused += dt * rep->frag_unused;
    e->acc.frag_reserved += dt * rep->frag_reserved;
}

/* Reserved but unused tokens while a step runs: the unfilled tail of each scheduled sequence's
 * last block (paged), or everything reserved beyond what it holds (contiguous). */
static void measure_fragmentation(sim_engine *e, sim_replica *rep)
{
    double unused = 0, reserved = 0;
    bool paged = e->c.layout == SCN_LAYOUT_PAGED;
    for (int i = 0; i < rep->batch.n; i++) {
        const sim_req *r = rep->breq[i];
        long upto = r->computed + r->step_new;
        if (paged) {
            unused += (double)(r->kv.room - upto);
            reserved += (double)r->kv.room;
        } else {
            unused += (double)(r->kv.reserved - upto);
            reserved += (double)r->kv.reserved;
        }
    }
    rep->frag_unused = unused;
    rep->frag_reserved = reserved;
}

static void note_peak(sim_engine *e)
{
    double used = 0;
    for (int i = 0; i < e->n_rep; i++) used += (double)sim_kv_referenced(e->rep[i].kv);
    if (used > e->acc.used_peak) e->acc.used_peak = used;
}

/* Starts the replica's next step if it is idle and has work. */
static int kick(sim_engine *e, sim_replica *rep)
{
    if (rep->busy) return 0;
    account(e, rep);
    e->sched.now = e->now;
    int n = sim_sched_step(&e->sched, rep);
    if (n < 0) { e->internal = e->sched.internal; return -1; }
    if (n == 0) {
        if (rep->waiting.n && !rep->running.n) {
            snprintf(e->err, e->nerr, "request %ld cannot be admitted even into an empty replica",
                     rep->waiting.head->spec.id);
            return -1;
        }
        return 0;
    }
    note_peak(e);
    measure_fragmentation(e, rep);
    double dt = 0;
    char msg[256] = "";
    if (e->ex->run(e->ex->ctx, &rep->batch, &dt, msg, sizeof msg) || !(dt >= 0) || !isfinite(dt)) {
        snprintf(e->err, e->nerr, "executor %s failed: %s", e->ex->name, msg[0] ? msg : "bad step time");
        e->internal = 1;
        return -1;
    }
    rep->busy = true;
    e->acc.steps++;
    e->acc.batch_sum += n;
    if (n > e->acc.batch_max) e->acc.batch_max = n;
    rep->ev.kind = EV_STEP;
    return sim_heap_push(&e->heap, &rep->ev, e->now + dt);
}

static int route(sim_engine *e, const sim_req_spec *s)
{
    if (e->n_rep == 1) return 0;
    scn_router how = e->s->deployment.router;
    if (how == SCN_ROUTER_ROUND_ROBIN) return (int)(e->rr++ % e->n_rep);
    long key = s->conversation >= 0 ? s->conversation : s->prefix_group;
    if (how == SCN_ROUTER_PREFIX_AFFINITY && key >= 0) return (int)(key % e->n_rep);
    int best = 0;
    for (int i = 1; i < e->n_rep; i++)
        if (e->rep[i].outstanding < e->rep[best].outstanding) best = i;
    return best;
}

static sim_req *new_req(sim_engine *e, const sim_req_spec *spec)
{
    sim_req *r = calloc(1, sizeof *r);
    if (!r) { snprintf(e->err, e->nerr, "out of memory"); e->internal = 1; return NULL; }
    r->spec = *spec;
    r->total = spec->prompt;
    r->ev.idx = -1;
    r->kv.prefix_seed = spec->prefix_seed;
    r->kv.body_seed = spec->body_seed;
    r->kv.prefix_len = spec->prefix_len;
    if (++e->alive > e->peak_alive) e->peak_alive = e->alive;
    return r;
}

static int enqueue(sim_engine *e, sim_req *r)
{
    r->replica = route(e, &r->spec);
    sim_replica *rep = &e->rep[r->replica];
    rep->outstanding++;
    r->state = REQ_WAITING;
    sim_list_push_back(&rep->waiting, r);
    if (rep->busy || rep->kick_ev.idx >= 0) return 0;
    rep->kick_ev.kind = EV_KICK;
    rep->kick_ev.prio = 1;
    return sim_heap_push(&e->heap, &rep->kick_ev, e->now);
}

/* Pulls the next request from the arrival process and schedules its arrival. */
static int next_arrival(sim_engine *e)
{
    int rc = sim_workload_next(e->wl, &e->next_spec, e->err, e->nerr);
    if (rc < 0) return -1;
    if (rc > 0) return 0;
    e->arrival_ev.kind = EV_ARRIVAL;
    return sim_heap_push(&e->heap, &e->arrival_ev, e->next_spec.arrival);
}

/* Records a finished request: metrics, sinks, progress, and its conversation's next turn.
 * Every completion passes here, so this is the place for per-completion hooks. */
static int complete(sim_engine *e, sim_replica *rep, sim_req *r)
{
    sim_request_row row = {
        .id = r->spec.id, .replica = rep->id, .arrival = r->spec.arrival,
        .queue = r->t_sched - r->spec.arrival, .ttft = r->t_first - r->spec.arrival,
        .tpot = r->spec.output > 1 ? (r->t_last - r->t_first) / (r->spec.output - 1) : 0,
        .e2e = r->t_last - r->spec.arrival, .prompt = r->spec.prompt, .output = r->spec.output,
        .cached = r->cached, .preemptions = r->preemptions, .conversation = r->spec.conversation,
        .turn = r->spec.turn,
    };
    if (r->spec.measured) sim_acc_request(&e->acc, &e->s->slo, &row);
    rep->outstanding--;
    e->done++;
    if (e->o->on_request && e->o->on_request(e->o->ud, &row)) {
        snprintf(e->err, e->nerr, "writing the per-request output failed");
        return -1;
    }
    if (e->o->on_progress && (e->done % 1024 == 0)) e->o->on_progress(e->o->ud, e->done, e->total);
    sim_req_spec next;
    if (sim_workload_next_turn(e->wl, &r->spec, e->now, &next) == 0) {
        sim_req *t = new_req(e, &next);
        if (!t) return -1;
        t->ev.kind = EV_TURN;
        if (sim_heap_push(&e->heap, &t->ev, next.arrival)) return -1;
    }
    e->total = sim_workload_total(e->wl);
    return 0;
}

static void free_req(sim_engine *e, sim_req *r)
{
    free(r->kv.blocks);
    free(r);
    e->alive--;
}

/* A step has ended on rep: the scheduler applies it, then the engine records what completed. */
static int finish_step(sim_engine *e, sim_replica *rep)
{
    e->sched.now = e->now;
    if (sim_sched_finish(&e->sched, rep)) return -1;
    int rc = 0;
    for (int i = 0; i < rep->n_fin; i++) {
        sim_req *r = rep->fin[i];
        if (!rc) rc = complete(e, rep, r);   /* after a failure, only free what is no longer listed */
        if (r->state == REQ_DONE) free_req(e, r);
    }
    for (int i = 0; i < rep->n_gone; i++) free_req(e, rep->gone[i]);
    rep->n_fin = rep->n_gone = 0;
    return rc;
}

static int sample(sim_engine *e)
{
    sim_sample s = {.t = e->now};
    double used = 0, total = 0;
    for (int i = 0; i < e->n_rep; i++) {
        used += (double)sim_kv_referenced(e->rep[i].kv);
        total += (double)sim_kv_total(e->rep[i].kv);
        s.waiting += e->rep[i].waiting.n;
        s.running += e->rep[i].running.n;
    }
    s.kv_used = total > 0 ? used / total : 0;
    if (e->o->on_sample && e->o->on_sample(e->o->ud, &s)) {
        snprintf(e->err, e->nerr, "writing the time series failed");
        return -1;
    }
    if (e->heap.n == 0) return 0;   /* nothing else will happen */
    return sim_heap_push(&e->heap, &e->sample_ev, e->now + e->o->sample_interval);
}

static int loop(sim_engine *e)
{
    sim_event *ev;
    while ((ev = sim_heap_pop(&e->heap))) {
        e->now = ev->t;
        int rc = 0;
        switch (ev->kind) {
        case EV_ARRIVAL: {
            sim_req *r = new_req(e, &e->next_spec);
            rc = !r || enqueue(e, r) || next_arrival(e);
            break;
        }
        case EV_TURN:
            rc = enqueue(e, CONTAINER(ev, sim_req, ev));
            break;
        case EV_STEP: {
            sim_replica *rep = CONTAINER(ev, sim_replica, ev);
            rep->busy = false;
            account(e, rep);
            rep->frag_unused = rep->frag_reserved = 0;
            rc = finish_step(e, rep) || kick(e, rep);
            break;
        }
        case EV_SAMPLE:
            rc = sample(e);
            break;
        case EV_KICK:
            rc = kick(e, CONTAINER(ev, sim_replica, kick_ev));
            break;
        }
        if (rc) return -1;
    }
    return 0;
}

/* The KV pool of replica i, in blocks (contiguous: tokens). The executor owns the pool: a
 * measuring executor reports what it really allocated, and an override must agree with it;
 * the predicting executor reports the cost model's count, which an override replaces. */
static long pool_blocks(const scn_scenario *s, const sim_choice *c, const sim_executor *ex, const sim_run_opts *o,
                        int i, char *err, size_t n)
{
    long got = ex->kv_blocks ? ex->kv_blocks(ex->ctx, i) : 0;
    if (ex->measured) {
        if (got <= 0) {
            snprintf(err, n, "executor %s holds no KV pool for replica %d", ex->name, i);
            return -1;
        }
        if (o->kv_blocks_override > 0 && o->kv_blocks_override != got) {
            snprintf(err, n, "executor %s allocated %ld KV blocks for replica %d, not the %ld asked for", ex->name, got, i,
                     o->kv_blocks_override);
            return -1;
        }
        return got;
    }
    if (o->kv_blocks_override > 0) return o->kv_blocks_override;
    if (got > 0) return got;
    kv_cache_cfg cfg = kv_cache_cfg_make(s, c->kv_dtype, c->sink, c->window);
    snprintf(err, n, "the model does not fit: weights, activations and runtime leave %.2f GiB for the KV cache",
             kv_pool_size(s, &cfg, c->layout == SCN_LAYOUT_PAGED, c->block_size).kv_budget / 1073741824.0);
    return -1;
}

int sim_run(const scn_scenario *s, const sim_choice *c, sim_executor *ex, const sim_run_opts *o,
            sim_metrics *m, char *err, size_t n)
{
    memset(m, 0, sizeof *m);
    if (sim_choice_check(c, err, n)) return SIM_E_DATA;
    sim_engine e;
    memset(&e, 0, sizeof e);
    e.s = s; e.c = *c; e.ex = ex; e.o = o; e.err = err; e.nerr = n;
    e.sched = (sim_sched){.s = s, .c = *c, .acc = &e.acc, .err = err, .nerr = n};
    e.arrival_ev.idx = e.sample_ev.idx = -1;
    e.sample_ev.kind = EV_SAMPLE;
    sim_heap_init(&e.heap);
    int rc = SIM_E_INTERNAL;
    long blocks = 0, blocks_all = 0;
    if (sim_acc_init(&e.acc)) { snprintf(err, n, "out of memory"); goto out; }
    e.n_rep = s->deployment.replicas;
    e.rep = calloc((size_t)e.n_rep, sizeof *e.rep);
    if (!e.rep) { snprintf(err, n, "out of memory"); goto out; }
    for (int i = 0; i < e.n_rep; i++) {
        sim_replica *rep = &e.rep[i];
        rep->id = i;
        rep->ev.idx = -1;
        rep->kick_ev.idx = -1;
        rep->batch.replica = i;
        long b = pool_blocks(s, c, ex, o, i, err, n);
        if (b <= 0) { rc = ex->measured ? SIM_E_INTERNAL : SIM_E_DATA; goto out; }
        if (i == 0) blocks = b;
        blocks_all += b;
        /* vLLM keeps 1 % of blocks free at admission so running sequences can grow. */
        rep->watermark = c->layout == SCN_LAYOUT_PAGED ? b / 100 : 0;
        rep->kv = sim_kv_init(b, c->block_size, c->layout == SCN_LAYOUT_PAGED, c->prefix_cache, c->sink, c->window);
        if (!rep->kv) { snprintf(err, n, "out of memory for %ld KV blocks", b); goto out; }
    }
    int noinput = 0;
    e.wl = sim_workload_init(s, o->seed, &noinput, err, n);
    if (!e.wl) { rc = noinput ? SIM_E_NOINPUT : SIM_E_DATA; goto out; }
    e.total = sim_workload_total(e.wl);
    rc = SIM_E_DATA;   /* from here a failure is a bad trace line or a request that cannot fit */
    if (next_arrival(&e)) goto out;
    if (o->sample_interval > 0 && sim_heap_push(&e.heap, &e.sample_ev, 0)) goto out;
    rc = loop(&e) ? (e.internal ? SIM_E_INTERNAL : SIM_E_DATA) : SIM_OK;
    if (rc == SIM_OK) {
        for (int i = 0; i < e.n_rep; i++) account(&e, &e.rep[i]);
        /* used_integral and the peak cover all replicas: utilisation is over all their blocks. */
        sim_acc_finish(&e.acc, blocks_all, m);
        m->kv_blocks = blocks;
        m->kv_tokens = c->layout == SCN_LAYOUT_PAGED ? blocks * c->block_size : blocks;
        m->events = (long)e.heap.next_seq;
        m->peak_in_flight = e.peak_alive;
        if (o->on_progress) o->on_progress(o->ud, e.done, e.done);
    }
out:
    for (int i = 0; e.rep && i < e.n_rep; i++) {
        sim_replica *rep = &e.rep[i];
        for (sim_list *l = &rep->waiting; l; l = l == &rep->waiting ? &rep->running : NULL)
            while (l->head) { sim_req *r = l->head; sim_list_remove(l, r); free(r->kv.blocks); free(r); }
        sim_kv_free(rep->kv);
        sim_sched_replica_free(rep);
    }
    /* Follow-up turns still queued (only after a failure) own their requests. */
    sim_event *ev;
    while ((ev = sim_heap_pop(&e.heap)))
        if (ev->kind == EV_TURN) { sim_req *r = CONTAINER(ev, sim_req, ev); free(r); }
    free(e.rep);
    sim_heap_free(&e.heap);
    sim_workload_free(e.wl);
    sim_acc_free(&e.acc);
    return rc;
}
