/* engine.c: the discrete-event loop. Events are arrivals (from the arrival process, or a
 * conversation's next turn), step completions (one per replica) and time-series samples; they
 * fire in (time, push order), so a run is a pure function of the scenario, choice and seed. */
#include "engine.h"
#include "disagg.h"
#include "spec.h"
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

/* Reserved but unused tokens while a step runs: the space each scheduled sequence occupies
 * (live blocks, or its contiguous reservation) minus the KV it holds once the step is done. */
static void measure_fragmentation(sim_replica *rep)
{
    double unused = 0, reserved = 0;
    for (int i = 0; i < rep->batch.n; i++) {
        const sim_req *r = rep->breq[i];
        long space = sim_kv_seq_tokens(rep->kv, &r->kv);
        unused += (double)(space - sim_kv_held(rep->kv, &r->kv, r->computed + r->step_new));
        reserved += (double)space;
    }
    rep->frag_unused = unused;
    rep->frag_reserved = reserved;
}

/* Keeps e->used_now, the blocks referenced over all replicas, current after rep changed. */
static void refresh_used(sim_engine *e, sim_replica *rep)
{
    long r = sim_kv_referenced(rep->kv);
    e->used_now += r - rep->used_seen;
    rep->used_seen = r;
}

static void note_peak(sim_engine *e, sim_replica *rep)
{
    refresh_used(e, rep);
    if ((double)e->used_now > e->acc.used_peak) e->acc.used_peak = (double)e->used_now;
}

/* What fast_forward did: FF_PENDING, a step is formed and timed (push it); FF_CONTINUE, a step
 * completed inline and nothing is formed; FF_DECLINED, the step is the scheduler's as usual. */
enum { FF_ERROR = -1, FF_PENDING = 0, FF_CONTINUE = 1, FF_DECLINED = 2 };
static bool ff_eligible(const sim_engine *e, const sim_replica *rep);
static int fast_forward(sim_engine *e, sim_replica *rep, double *dt);

/* Starts the replica's next step if it is idle and has work. When the step begins a run of
 * decode steps, fast_forward may carry the replica through the run; it then either leaves the
 * run's last step pending (pushed here) or stops after completing a step, and the next one is
 * formed by the scheduler as usual. */
static int kick(sim_engine *e, sim_replica *rep)
{
    for (;;) {
        if (rep->busy) return 0;
        account(e, rep);
        e->sched.now = e->now;
        int n = sim_sched_step(&e->sched, rep);
        if (n < 0) { e->internal = e->sched.internal; return -1; }
        if (n == 0) {
            refresh_used(e, rep);
            if (rep->waiting.n && !rep->running.n) {
                snprintf(e->err, e->nerr, "request %ld cannot be admitted even into an empty replica",
                         rep->waiting.head->spec.id);
                return -1;
            }
            return 0;
        }
        note_peak(e, rep);
        double dt = 0;
        int ff = ff_eligible(e, rep) ? fast_forward(e, rep, &dt) : FF_DECLINED;
        if (ff == FF_ERROR) return -1;
        if (ff == FF_CONTINUE) continue;   /* a step completed inline and the next is the scheduler's */
        if (ff == FF_DECLINED) {
            measure_fragmentation(rep);
            char msg[256] = "";
            if (e->ex->run(e->ex->ctx, &rep->batch, &dt, msg, sizeof msg)) {
                snprintf(e->err, e->nerr, "executor %s failed: %s", e->ex->name, msg[0] ? msg : "bad step time");
                e->internal = 1;
                return -1;
            }
            /* A step that takes no finite time comes from the inputs (a bandwidth or compute
             * rate too small to move the model), not from a fault: a data error. */
            if (!(dt >= 0) || !isfinite(dt)) {
                snprintf(e->err, e->nerr, "a step of %d sequences takes %g s under executor %s: check the hardware's "
                         "bandwidth and compute figures", n, dt, e->ex->name);
                return -1;
            }
            e->acc.steps++;
            e->acc.batch_sum += n;
            if (n > e->acc.batch_max) e->acc.batch_max = n;
        }
        rep->busy = true;
        rep->ev.kind = EV_STEP;
        return sim_heap_push(&e->heap, &rep->ev, e->now + dt);
    }
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

/* Requests are recycled through a free list (at most the peak in flight), each keeping its
 * block table's buffer, so a steady run allocates nothing per request. */
static sim_req *new_req(sim_engine *e, const sim_req_spec *spec)
{
    sim_req *r = e->pool;
    if (r) {
        e->pool = r->next;
        sim_kv_seq keep = r->kv;
        memset(r, 0, sizeof *r);
        r->kv.blocks = keep.blocks;
        r->kv.cap = keep.cap;
    } else if (!(r = calloc(1, sizeof *r))) {
        snprintf(e->err, e->nerr, "out of memory");
        e->internal = 1;
        return NULL;
    }
    r->spec = *spec;
    r->total = spec->prompt;
    r->ev.idx = -1;
    r->kv.prefix_seed = spec->prefix_seed;
    r->kv.body_seed = spec->body_seed;
    r->kv.prefix_len = spec->prefix_len;
    if (++e->alive > e->peak_alive) e->peak_alive = e->alive;
    return r;
}

static void free_req(sim_engine *e, sim_req *r);

/* Queues an arrived request on its replica, or rejects it when that replica's waiting queue
 * is full (an overloaded server answers "busy" rather than queueing without bound): it is
 * counted, not served, and its conversation sends no further turns. */
static int enqueue(sim_engine *e, sim_req *r)
{
    r->replica = route(e, &r->spec);
    sim_replica *rep = &e->rep[r->replica];
    if (rep->waiting.n >= e->max_waiting) {
        e->acc.rejected++;
        e->done++;
        free_req(e, r);
        return 0;
    }
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
    sim_request_row row;
    memset(&row, 0, sizeof row);   /* padding too: sinks may compare or hash whole rows */
    row.id = r->spec.id;
    row.replica = rep->id;
    row.arrival = r->spec.arrival;
    row.queue = r->t_sched - r->spec.arrival;
    row.ttft = r->t_first - r->spec.arrival;
    row.tpot = r->spec.output > 1 ? (r->t_last - r->t_first) / (r->spec.output - 1) : 0;
    row.e2e = r->t_last - r->spec.arrival;
    row.prompt = r->spec.prompt;
    row.output = r->spec.output;
    row.cached = r->cached;
    row.preemptions = r->preemptions;
    row.conversation = r->spec.conversation;
    row.turn = r->spec.turn;
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
    r->next = e->pool;
    e->pool = r;
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
    refresh_used(e, rep);
    return rc;
}

/* ---- Fast-forward over runs of decode steps ----
 *
 * Between events that change a replica's batch (an arrival, a prefill, a completion while
 * requests wait, a block that cannot be had, a preemption, a sample), every step decodes one
 * token for the same sequences and differs from the last only by their positions. The run is
 * advanced here without forming each batch: the executor times each step from (sequences,
 * sum of positions); the block boundaries, prefix-cache registrations, completions (when
 * nothing waits) and the metrics' integrals are applied step by step in the order the scheduler
 * would apply them, and everything else per sequence once at the run's end. The results are
 * bit-identical to forming every step (a test runs both over the archetypes and random
 * scenarios); docs/simulator.md, "Fast-forward", lists the conditions. */

static int ff_room(sim_ff *f, int n, int bs)
{
    if (n <= f->cap && bs <= f->n_head) return 0;
    int cap = f->cap > n ? f->cap : n;
    long *c0 = realloc(f->c0, sizeof *c0 * (size_t)cap);
    if (c0) f->c0 = c0;
    long *cr = realloc(f->cross, sizeof *cr * (size_t)cap);
    if (cr) f->cross = cr;
    long *fa = realloc(f->fin_at, sizeof *fa * (size_t)cap);
    if (fa) f->fin_at = fa;
    int *fn = realloc(f->fnext, sizeof *fn * (size_t)cap);
    if (fn) f->fnext = fn;
    int *nx = realloc(f->next, sizeof *nx * (size_t)cap);
    if (nx) f->next = nx;
    unsigned char *dd = realloc(f->dead, (size_t)cap);
    if (dd) f->dead = dd;
    if (!c0 || !cr || !fa || !fn || !nx || !dd) return -1;
    f->cap = cap;
    if (bs > f->n_head) {
        int *hd = realloc(f->head, sizeof *hd * (size_t)bs);
        if (!hd) return -1;
        f->head = hd;
        f->n_head = bs;
    }
    return 0;
}

static void ff_free(sim_ff *f)
{
    free(f->c0); free(f->cross); free(f->fin_at); free(f->fnext); free(f->next); free(f->head); free(f->dead);
}

/* Whether the step just formed on rep opens a run the fast-forward can carry. */
static bool ff_eligible(const sim_engine *e, const sim_replica *rep)
{
    if (e->o->per_step || e->ex->measured) return false;
    if (sim_spec_of(e->s, &e->c)) return false;   /* each speculative step draws its own acceptance (sim/spec.c) */
    if (e->c.scheduler == SCN_SCHED_STATIC || e->c.window > 0 || sim_kv_windowed(rep->kv)) return false;
    if (rep->batch.n < 1 || rep->batch.n != rep->running.n) return false;
    /* Something waits for a seat: its admission keeps failing while blocks only get scarcer,
     * unless new prefix-cache entries could shorten its prompt. */
    if (rep->waiting.n && e->c.prefix_cache && rep->running.n < e->s->deployment.max_num_seqs) return false;
    return true;
}

/* Takes the step just formed on rep (not yet timed) and carries the run it opens: see the enum
 * above for what it returns. On FF_PENDING the formed step's time is in *dt, e->now is its start,
 * and the fragmentation and step counters are set as the scheduler's path would set them. */
static int fast_forward(sim_engine *e, sim_replica *rep, double *dt)
{
    const bool paged = e->c.layout == SCN_LAYOUT_PAGED;
    const int bs = paged ? e->c.block_size : 1;
    const int n0 = rep->batch.n;
    sim_ff *f = &e->ff[rep->id];
    if (ff_room(f, n0, bs)) { snprintf(e->err, e->nerr, "out of memory"); e->internal = 1; return FF_ERROR; }
    /* One pass: eligibility, the run's state, and what step 0 needs (positions, fragmentation).
     * Chains are built back to front, so each lists its slots in batch order. */
    long limit = -1;   /* contiguous: the first step that would need a larger reservation */
    long base = 0, unused = 0, reserved = 0;
    for (int b = 0; b < bs; b++) f->head[b] = -1;
    for (int b = 0; b < SIM_FF_RING; b++) f->fhead[b] = -1;
    for (int i = n0 - 1; i >= 0; i--) {
        const sim_req *r = rep->breq[i];
        long jstar = r->kv.room - r->computed;   /* steps until the next block boundary */
        if (r->step_new != 1 || r->computed + 1 != r->total || r->generated < 1 || jstar < 1 || (paged && jstar > bs))
            return FF_DECLINED;
        f->c0[i] = r->computed;
        f->cross[i] = jstar;
        f->fin_at[i] = r->spec.output - r->generated - 1;
        int fr = (int)(f->fin_at[i] % SIM_FF_RING);
        f->fnext[i] = f->fhead[fr];
        f->fhead[fr] = i;
        f->dead[i] = 0;
        base += r->computed;
        unused += r->kv.room - (r->computed + 1);
        reserved += r->kv.room;
        if (paged) {
            int h = (int)(jstar % bs);
            f->next[i] = f->head[h];
            f->head[h] = i;
        } else if (jstar <= f->fin_at[i] && (limit < 0 || jstar < limit)) {
            limit = jstar;
        }
    }
    /* Step 0, as the scheduler's path would time and count it: from the executor's decode
     * summary when it has one for this step, else from the batch itself. */
    bool by_batch = !e->ex->decode_time || e->ex->decode_time(e->ex->ctx, n0, base, dt);
    char msg[256] = "";
    if (by_batch && e->ex->run(e->ex->ctx, &rep->batch, dt, msg, sizeof msg)) {
        snprintf(e->err, e->nerr, "executor %s failed: %s", e->ex->name, msg[0] ? msg : "bad step time");
        e->internal = 1;
        return FF_ERROR;
    }
    if (!(*dt >= 0) || !isfinite(*dt)) {
        snprintf(e->err, e->nerr, "executor %s failed: bad step time", e->ex->name);
        e->internal = 1;
        return FF_ERROR;
    }
    rep->frag_unused = (double)unused;
    rep->frag_reserved = (double)reserved;
    e->acc.steps++;
    e->acc.batch_sum += n0;
    if (n0 > e->acc.batch_max) e->acc.batch_max = n0;
    const sim_event *first = sim_heap_peek(&e->heap);
    if (first && first->t <= e->now + *dt) return FF_PENDING;   /* not even this step completes alone */
    int alive = n0, measured = 0;   /* measured: alive sequences whose gaps are recorded */
    for (int i = 0; i < n0; i++) measured += rep->breq[i]->spec.measured;
    long J = 0;             /* the pending step */
    double T = e->now;      /* its start */
    sim_hist *itl = &e->acc.h[SIM_Q_ITL];
    int ret = 0;
    for (;;) {
        double tend = T + *dt;
        const sim_event *top = sim_heap_peek(&e->heap);
        if (top && top->t <= tend) break;   /* something else happens first */
        const int fr = (int)(J % SIM_FF_RING);
        int fins = 0;
        for (int i = f->fhead[fr]; i >= 0; i = f->fnext[i]) fins += f->fin_at[i] == J;
        if (fins && (rep->waiting.n || fins == alive)) break;
        /* Step J completes at tend, as its EV_STEP would. */
        e->heap.next_seq++;
        e->now = tend;
        account(e, rep);
        rep->frag_unused = rep->frag_reserved = 0;
        if (J == 0) {
            /* Gaps since each sequence's last token, in batch order, recorded in runs of equals. */
            for (int i = 0; i < n0;) {
                if (!rep->breq[i]->spec.measured) { i++; continue; }
                double v = tend - rep->breq[i]->t_last;
                int k = i + 1, run = 1;
                for (; k < n0; k++) {
                    if (!rep->breq[k]->spec.measured) continue;
                    if (tend - rep->breq[k]->t_last != v) break;
                    run++;
                }
                sim_hist_add_n(itl, v, run);
                i = k;
            }
        } else {
            sim_hist_add_n(itl, tend - T, measured);
        }
        /* Blocks that just filled join the prefix cache (batch order), before any release. */
        if (paged && e->c.prefix_cache)
            for (int i = f->head[(J + 1) % bs]; i >= 0; i = f->next[i])
                if (!f->dead[i] && f->cross[i] == J + 1) sim_kv_commit(rep->kv, &rep->breq[i]->kv, (int)(f->c0[i] + J + 1));
        /* Completions, in batch order: the request leaves with its KV, then is recorded. */
        int rc = 0;
        for (int i = fins ? f->fhead[fr] : -1; i >= 0; i = f->fnext[i]) {
            if (f->fin_at[i] != J) continue;
            sim_req *r = rep->breq[i];
            r->computed = (int)(f->c0[i] + J + 1);
            r->total = r->computed + 1;
            r->generated = r->spec.output;
            r->t_last = tend;
            unused -= r->kv.room - r->computed;   /* what it counted in step J */
            reserved -= r->kv.room;
            sim_list_remove(&rep->running, r);
            sim_kv_release(rep->kv, &r->kv);
            r->state = REQ_DONE;
            f->dead[i] = 1;
            alive--;
            measured -= r->spec.measured;
            base -= f->c0[i];
        }
        for (int i = fins ? f->fhead[fr] : -1; i >= 0; i = f->fnext[i]) {
            if (f->fin_at[i] != J) continue;
            sim_req *r = rep->breq[i];
            if (!rc) rc = complete(e, rep, r);
            free_req(e, r);
        }
        if (rc) return FF_ERROR;
        /* Form step J + 1: one block for each sequence at a boundary, in running order. */
        long need = 0;
        if (paged)
            for (int i = f->head[(J + 1) % bs]; i >= 0; i = f->next[i])
                if (!f->dead[i] && f->cross[i] == J + 1) need++;
        if (need > sim_kv_available(rep->kv) || (!paged && limit >= 0 && J + 1 >= limit)) { ret = 1; J++; T = tend; break; }
        if (need) {
            /* Chains are in batch (running) order, the order the scheduler grows in. */
            for (int i = f->head[(J + 1) % bs]; i >= 0; i = f->next[i]) {
                if (f->dead[i] || f->cross[i] != J + 1) continue;
                sim_req *r = rep->breq[i];
                long room0 = r->kv.room;
                if (sim_kv_grow(rep->kv, &r->kv, (int)(f->c0[i] + J + 2))) { snprintf(e->err, e->nerr, "out of memory"); e->internal = 1; return FF_ERROR; }
                unused += r->kv.room - room0;
                reserved += r->kv.room - room0;
                f->cross[i] += bs;
            }
        }
        unused -= alive;   /* every sequence fills one more slot */
        J++;
        T = tend;
        note_peak(e, rep);
        rep->frag_unused = (double)unused;
        rep->frag_reserved = (double)reserved;
        double ndt = 0;
        /* The step's time from the executor's decode summary, or (when it has none for this
         * step, e.g. a batch small enough that split-KV counts differ per sequence) from the
         * batch of step J: the live sequences in batch order, one position on. */
        by_batch = !e->ex->decode_time || e->ex->decode_time(e->ex->ctx, alive, base + (long)alive * J, &ndt);
        if (by_batch) {
            int w = 0;
            for (int i = 0; i < n0; i++) {
                if (f->dead[i]) continue;
                const sim_req *r = rep->breq[i];
                int start = (int)(f->c0[i] + J);
                sim_batch_seq_fill(&rep->batch.seqs[w++], r, 1, start, sim_kv_held(rep->kv, &r->kv, start));
            }
            rep->batch.n = w;
            rep->batch.tokens = w;
        }
        if (by_batch && e->ex->run(e->ex->ctx, &rep->batch, &ndt, msg, sizeof msg)) {
            snprintf(e->err, e->nerr, "executor %s failed: %s", e->ex->name, msg[0] ? msg : "no decode time");
            e->internal = 1;
            return FF_ERROR;
        }
        if (!(ndt >= 0) || !isfinite(ndt)) {   /* the inputs' fault, as in kick */
            snprintf(e->err, e->nerr, "a step of %d sequences takes %g s under executor %s: check the hardware's "
                     "bandwidth and compute figures", alive, ndt, e->ex->name);
            return FF_ERROR;
        }
        *dt = ndt;
        e->acc.steps++;
        e->acc.batch_sum += alive;
        if (alive > e->acc.batch_max) e->acc.batch_max = alive;
    }
    /* Write the run back into the requests and (when a step is pending) the batch. With ret 1,
     * step J - 1 completed at T and nothing is formed; with ret 0, step J is formed. */
    if (J == 0) return 0;   /* nothing was carried: the batch stands as formed */
    refresh_used(e, rep);
    const long done_steps = J;   /* steps 0 .. J - 1 completed inline */
    int w = 0;
    for (int i = 0; i < n0; i++) {
        if (f->dead[i]) continue;
        sim_req *r = rep->breq[i];
        r->generated += (int)done_steps;
        r->computed = (int)(f->c0[i] + done_steps);
        r->total = r->computed + 1;
        r->t_last = T;
        if (ret) continue;
        r->step_new = 1;
        rep->breq[w] = r;
        sim_batch_seq_fill(&rep->batch.seqs[w], r, 1, r->computed, sim_kv_held(rep->kv, &r->kv, r->computed));
        w++;
    }
    if (!ret) {
        rep->batch.n = w;
        rep->batch.tokens = w;
    }
    e->now = T;
    return ret;
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
    /* Prefill and decode on separate pools: the coordinator runs both (sim/disagg.c). */
    if (s->deployment.disagg.on) return sim_disagg_run(s, c, ex, o, m, err, n);
    if (sim_choice_check(c, err, n)) return SIM_E_DATA;
    sim_engine e;
    memset(&e, 0, sizeof e);
    e.s = s; e.c = *c; e.ex = ex; e.o = o; e.err = err; e.nerr = n;
    e.sched = (sim_sched){.s = s, .c = *c, .acc = &e.acc, .err = err, .nerr = n, .seed = o->seed};
    e.arrival_ev.idx = e.sample_ev.idx = -1;
    e.sample_ev.kind = EV_SAMPLE;
    sim_heap_init(&e.heap);
    int rc = SIM_E_INTERNAL;
    long blocks = 0, blocks_all = 0;
    if (sim_acc_init(&e.acc)) { snprintf(err, n, "out of memory"); goto out; }
    /* Each attention-DP rank holds its own sequences and KV pool (model/kv_moe_parallel.h). */
    e.n_rep = s->deployment.replicas * (s->deployment.attention_dp > 1 ? s->deployment.attention_dp : 1);
    long cap = o->max_waiting > 0 ? o->max_waiting : SIM_MAX_WAITING;
    e.max_waiting = cap / e.n_rep > 0 ? cap / e.n_rep : 1;
    e.rep = calloc((size_t)e.n_rep, sizeof *e.rep);
    e.ff = calloc((size_t)e.n_rep, sizeof *e.ff);
    if (!e.rep || !e.ff) { snprintf(err, n, "out of memory"); goto out; }
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
        /* Sliding-window layers keep only their window (model/kv_blocks.h, kv_groups_of). */
        const scn_model *md = &s->model;
        if (md->sliding_window > 0 && md->sliding_layers > 0) {
            int win = md->sliding_layers < md->layers ? md->sliding_layers : md->layers;
            sim_kv_set_groups(rep->kv, md->layers - win, win, md->sliding_window);
        }
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
        if (e.ff) ff_free(&e.ff[i]);
    }
    free(e.ff);
    /* Follow-up turns still queued (only after a failure) own their requests. */
    sim_event *ev;
    while ((ev = sim_heap_pop(&e.heap)))
        if (ev->kind == EV_TURN) { sim_req *r = CONTAINER(ev, sim_req, ev); free(r->kv.blocks); free(r); }
    while (e.pool) { sim_req *r = e.pool; e.pool = r->next; free(r->kv.blocks); free(r); }
    free(e.rep);
    sim_heap_free(&e.heap);
    sim_workload_free(e.wl);
    sim_acc_free(&e.acc);
    return rc;
}
