/* engine.c: the discrete-event loop. Events are arrivals (from the arrival process, or a
 * conversation's next turn), step completions (one per replica) and time-series samples; they
 * fire in (time, push order), so a run is a pure function of the scenario, choice and seed. */
#include "engine.h"
#include "kv_tier.h"
#include "kv_twin.h"
#include "disagg.h"
#include "spec.h"
#include "../model/kv_blocks.h"
#include "../model/kv_spec.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONTAINER(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

static inline void account(sim_engine *e, sim_replica *rep)
{
    double dt = e->now - rep->last_t;
    rep->last_t = e->now;
    if (dt <= 0) return;
    if (e->tiered) sim_kv_account(rep->kv, dt);   /* the tiers' occupancy (nothing to do without them) */
    e->acc.used_integral += dt * (double)sim_kv_referenced(rep->kv);
    e->acc.frag_unused += dt * rep->frag_unused;
    e->acc.frag_reserved += dt * rep->frag_reserved;
}

/* account() where the blocks referenced are known to be rep->used_seen: a fast-forward step
 * ending inline (ff_go), whose KV last changed when the step was formed, after which note_peak
 * read the count. The same sums in the same order. */
static inline void account_seen(sim_engine *e, sim_replica *rep)
{
    double dt = e->now - rep->last_t;
    rep->last_t = e->now;
    if (dt <= 0) return;
    if (e->tiered) sim_kv_account(rep->kv, dt);
    e->acc.used_integral += dt * (double)rep->used_seen;
    e->acc.frag_unused += dt * rep->frag_unused;
    e->acc.frag_reserved += dt * rep->frag_reserved;
}

/* Reserved but unused KV while a step runs: the space each scheduled sequence occupies (live
 * blocks, or its contiguous reservation) minus the KV its layers keep once the step is done,
 * per layer kind with a model window (sim_kv_frag_terms). */
static void measure_fragmentation(sim_replica *rep)
{
    double unused = 0, reserved = 0;
    for (int i = 0; i < rep->batch.n; i++) {
        const sim_req *r = rep->breq[i];
        long space, held;
        sim_kv_frag_terms(rep->kv, &r->kv, r->computed + r->step_new, &space, &held);
        unused += (double)(space - held);
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

/* What the fast-forward did: FF_BUSY, the replica is busy with a step it pushed (its own, or the
 * scheduler's prefill while the run is suspended); FF_CONTINUE, the run handed its sequences back
 * (or has none left) and the scheduler forms the next step; FF_DECLINED, the step just formed is
 * the scheduler's as usual; FF_RUN (internal), the run's next step is formed and timed. */
enum { FF_ERROR = -1, FF_BUSY = 0, FF_CONTINUE = 1, FF_DECLINED = 2, FF_RUN = 3 };
static bool ff_eligible(const sim_engine *e, const sim_replica *rep);
static int ff_begin(sim_engine *e, sim_replica *rep);
static int ff_resume(sim_engine *e, sim_replica *rep);

static int deliver(sim_engine *e, sim_replica *rep, double t);

/* Whether the client sees tokens later than the step that made them ended: outputs one step
 * late (engine.async_output), or a multi-step run's tokens handed over at its end
 * (engine.multi_step_stream false). sim/engine.c holds them (hold_outputs) until then. */
static bool outputs_held(const sim_engine *e)
{
    return e->s->engine.async_output || (e->s->deployment.scheduler_steps > 1 && !e->s->engine.multi_step_stream);
}

static int push_step(sim_engine *e, sim_replica *rep, double t)
{
    rep->busy = true;
    rep->ev.kind = EV_STEP;
    return sim_heap_push(&e->heap, &rep->ev, t);
}

/* Runs the executor on batch b; its failure is the executor's fault (internal). */
static int exec_run(sim_engine *e, const sim_batch *b, double *dt)
{
    char msg[256];
    msg[0] = 0;   /* not zero-filled: a step is too cheap for that */
    if (e->ex->run(e->ex->ctx, b, dt, msg, sizeof msg)) {
        snprintf(e->err, e->nerr, "executor %s failed: %s", e->ex->name, msg[0] ? msg : "bad step time");
        e->internal = 1;
        return -1;
    }
    return 0;
}

/* Checks a step of n sequences priced at *dt, adds what it waits for its KV and counts it. A step
 * that takes no finite time comes from the inputs (a bandwidth or compute rate too small to move
 * the model), not from a fault: a data error. */
static int step_counted(sim_engine *e, int n, double *dt)
{
    if (!(*dt >= 0) || !isfinite(*dt)) {
        snprintf(e->err, e->nerr, "a step of %d sequences takes %g s under executor %s: check the hardware's "
                 "bandwidth and compute figures", n, *dt, e->ex->name);
        return -1;
    }
    *dt += sim_sched_wait_s(&e->sched, *dt);   /* KV the step waits for: tier reloads, swaps (sched.c) */
    e->acc.steps++;
    e->acc.batch_sum += n;
    if (n > e->acc.batch_max) e->acc.batch_max = n;
    return 0;
}

/* Times the step of n sequences the scheduler formed in rep->batch and pushes its end. */
static int start_formed(sim_engine *e, sim_replica *rep, int n)
{
    measure_fragmentation(rep);
    double dt = 0;
    if (exec_run(e, &rep->batch, &dt) || step_counted(e, n, &dt)) return -1;
    /* Outputs one step late: what the last step made reaches the client as this one ends. */
    if (rep->n_held && deliver(e, rep, e->now + dt)) return -1;
    return push_step(e, rep, e->now + dt);
}

/* Starts the replica's next step if it is idle and has work. While a fast-forward run holds the
 * running sequences (suspended for a prefill step), the run decides; otherwise the scheduler
 * forms the step, and when it opens a run of decode steps the fast-forward takes it. */
static int kick(sim_engine *e, sim_replica *rep)
{
    for (;;) {
        if (rep->busy) return 0;
        account(e, rep);
        e->sched.now = e->now;
        if (e->ff[rep->id].active) {
            int rc = ff_resume(e, rep);
            if (rc == FF_ERROR) return -1;
            if (rc == FF_CONTINUE) continue;   /* handed back: the scheduler's turn */
            return 0;
        }
        int n = sim_sched_step(&e->sched, rep);
        if (n < 0) { e->internal = e->sched.internal; return -1; }
        if (n == 0) {
            /* No next step: held outputs go out now (vLLM drains its output queue when no
             * request is left unfinished), and no run is left to wait for. */
            for (int i = 0; i < rep->n_held; i++) rep->held[i]->run_wait = false;
            if (rep->n_held && deliver(e, rep, e->now)) return -1;
            refresh_used(e, rep);
            if (rep->waiting.n && !rep->running.n) {
                snprintf(e->err, e->nerr, "request %ld cannot be admitted even into an empty replica",
                         rep->waiting.head->spec.id);
                return -1;
            }
            return 0;
        }
        note_peak(e, rep);
        /* Held outputs need each step's end as its own event (start_formed delivers them),
         * which a fast-forward run does not give: the scheduler forms every step. */
        int ff = !outputs_held(e) && ff_eligible(e, rep) ? ff_begin(e, rep) : FF_DECLINED;
        if (ff == FF_ERROR) return -1;
        if (ff == FF_CONTINUE) continue;
        if (ff == FF_BUSY) return 0;
        return start_formed(e, rep, n);
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

/* Requests are recycled through a free list (at most the peak in flight), and their block
 * tables through the engine's spare stack, which admission takes from (sim_kv_table_room): a
 * steady run allocates nothing per request, and only requests that hold KV hold a table. */
static sim_req *new_req(sim_engine *e, const sim_req_spec *spec)
{
    sim_req *r = e->pool;
    if (r) {
        e->pool = r->next;
        memset(r, 0, sizeof *r);
    } else if (!(r = calloc(1, sizeof *r))) {
        snprintf(e->err, e->nerr, "out of memory");
        e->internal = 1;
        return NULL;
    }
    r->spec = *spec;
    r->total = spec->prompt;
    r->ev.idx = -1;
    r->kv.spare = &e->tables;
    r->kv.prefix_seed = spec->prefix_seed;
    r->kv.body_seed = spec->body_seed;
    r->kv.prefix_len = spec->prefix_len;
    if (++e->alive > e->peak_alive) e->peak_alive = e->alive;
    return r;
}

static void free_req(sim_engine *e, sim_req *r);

/* A request refused on arrival, because the waiting queue is full (enqueue, admit) or its prompt
 * leaves no room for one output token within max_model_len (too_long; sim/workload.c, fit), is
 * counted in rejected: every arrival stays either served or rejected (requests + rejected =
 * arrivals, both counted in the same measurement window: sim_acc_reject), and SLO attainment,
 * whose denominator is both, counts it as a miss, as the client sees an error. The client learns at once and, in a closed loop, sends its next request after
 * its think time (sim_workload_next_rejected), as benchmark clients do after a failed request, so
 * it is not left waiting for a reply that never comes; a conversation's later turns are never
 * sent, and the run's total shrinks by them. */
static int refuse(sim_engine *e, sim_req *r, const sim_replica *rep)
{
    sim_acc_reject(&e->acc, r->spec.measured, r->spec.too_long, e->now);
    e->done++;
    sim_req_spec next;
    bool more = sim_workload_next_rejected(e->wl, &r->spec, e->now, &next) == 0;
    free_req(e, r);
    e->total = sim_workload_total(e->wl);
    if (!more) return 0;
    sim_req *t = new_req(e, &next);
    if (!t) return -1;
    t->ev.kind = EV_TURN;
    /* Turned away by rep's full queue (rep non-NULL), the client hears of it, and sends again,
     * no sooner than rep's scheduler next runs: engines read new requests and turn them away
     * between their steps (SGLang's scheduler loop), and the answer and the next request each
     * cross the network. Sent sooner (think time 0), it would find the same full queue at the same
     * instant, again and again, until the run's requests were spent at that instant. So it comes
     * no sooner than the end of rep's running step (after that step's event, pushed earlier), or,
     * rep idle, after its pending kick at this instant (class 2), or, with neither, when its front
     * end's backlog is cleared (fe_free). */
    if (rep) {
        double t_next = e->now;
        int prio = 2;
        if (rep->busy) t_next = rep->ev.t, prio = 0;
        else if (rep->kick_ev.idx < 0 && rep->fe_free > e->now) t_next = rep->fe_free, prio = 0;
        if (next.arrival <= t_next) {
            next.arrival = t->spec.arrival = t_next;
            t->ev.prio = prio;
        }
    }
    return sim_heap_push(&e->heap, &t->ev, next.arrival);
}

/* Queues an arrived request on its replica, or rejects it when that replica's waiting queue
 * is full (an overloaded server answers "busy" rather than queueing without bound): it is
 * counted, not served, and its client goes on (refuse). */
static int enqueue(sim_engine *e, sim_req *r)
{
    bool counted = r->deferred || r->ingress;   /* routed, and its replica counts it */
    if (!counted) r->replica = route(e, &r->spec);
    sim_replica *rep = &e->rep[r->replica];
    if (r->fe_queued) { rep->fe_waiting--; r->fe_queued = false; }   /* the front end reached it */
    /* An engine that schedules one step ahead (async_scheduling: SGLang's and TensorRT-LLM's
     * overlap schedulers, vLLM's --async-scheduling) formed step i+1's batch when step i started,
     * so a request arriving during step i first reaches the scheduler as step i ends, after step
     * i+1 was formed: it joins step i+2 (docs/cost-model.md, "Engine profiles"). Pushed after the
     * step's end, at its time, the deferred arrival fires after it. */
    if (e->s->engine.async_scheduling && rep->busy && !r->deferred) {
        if (!counted) rep->outstanding++;   /* routed here: the router counts it while it waits */
        r->deferred = true;
        r->ingress = false;
        r->ev.kind = EV_DEFER;
        return sim_heap_push(&e->heap, &r->ev, rep->ev.t);
    }
    r->deferred = r->ingress = false;
    if (rep->waiting.n >= e->max_waiting) {
        if (counted) rep->outstanding--;
        return refuse(e, r, rep);
    }
    if (!counted) rep->outstanding++;
    r->state = REQ_WAITING;
    sim_list_push_back(&rep->waiting, r);
    if (rep->busy || rep->kick_ev.idx >= 0) return 0;
    rep->kick_ev.kind = EV_KICK;
    rep->kick_ev.prio = 1;
    return sim_heap_push(&e->heap, &rep->kick_ev, e->now);
}

/* A sent request reaches its replica's scheduler through the front end: one server process
 * (vLLM's API server, SGLang's TokenizerManager, trtllm-serve) prepares requests one at a time,
 * kv_frontend_seconds() each (docs/cost-model.md, "Front end"). The client's TTFT and E2E
 * carry that time (sim_req_row); what the queue adds is the wait for the requests before it,
 * so the scheduler sees the request when the server turns to it. A request that finds the
 * server free reaches the scheduler at once, as before; one that arrives in a burst waits. */
static int admit(sim_engine *e, sim_req *r)
{
    if (r->spec.too_long) return refuse(e, r, NULL);   /* as engines refuse it, before any replica */
    double fe = kv_frontend_seconds(e->s, r->spec.prompt);
    if (!(fe > 0)) return enqueue(e, r);
    r->replica = route(e, &r->spec);
    sim_replica *rep = &e->rep[r->replica];
    double start = rep->fe_free > e->now ? rep->fe_free : e->now;
    if (start > e->now && rep->waiting.n + rep->fe_waiting >= e->max_waiting) {
        /* The waiting bound covers the front end's queue too: an overloaded server answers
         * "busy" (enqueue) whether the backlog is before or behind its tokeniser. */
        return refuse(e, r, rep);
    }
    rep->fe_free = start + fe;
    rep->outstanding++;   /* routed here: the router counts it while it waits */
    r->ingress = true;
    if (start <= e->now) return enqueue(e, r);
    rep->fe_waiting++;
    r->fe_queued = true;
    r->ev.kind = EV_INGRESS;
    return sim_heap_push(&e->heap, &r->ev, start);
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
    double fe = sim_req_row(e->s, r, rep->id, r->spec.output, &row);
    if (r->spec.measured) sim_acc_request(&e->acc, &e->s->slo, &row);
    rep->outstanding--;
    e->done++;
    if (e->o->on_request && e->o->on_request(e->o->ud, &row)) {
        snprintf(e->err, e->nerr, "writing the per-request output failed");
        return -1;
    }
    if (e->o->on_progress && (e->done % 1024 == 0)) e->o->on_progress(e->o->ud, e->done, e->total);
    sim_req_spec next;
    /* The client has the last token fe after the engine delivered it (lag_last after it was
     * made, outputs one step late): its next send follows then. */
    if (sim_workload_next_turn(e->wl, &r->spec, r->t_last + r->lag_last + fe, &next) == 0) {
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
    sim_kv_tables_put(&e->tables, &r->kv);   /* its KV is released: no blocks in the table */
    r->next = e->pool;
    e->pool = r;
    e->alive--;
}

/* Puts r on rep's held list (once). Returns -1 when out of memory. */
static int hold(sim_engine *e, sim_replica *rep, sim_req *r)
{
    if (r->held) return 0;
    if (rep->n_held == rep->held_cap) {
        int cap = rep->held_cap ? 2 * rep->held_cap : 64;
        sim_req **h = realloc(rep->held, sizeof *h * (size_t)cap);
        if (!h) { snprintf(e->err, e->nerr, "out of memory"); e->internal = 1; return -1; }
        rep->held = h;
        rep->held_cap = cap;
    }
    rep->held[rep->n_held++] = r;
    r->held = true;
    return 0;
}

/* Held outputs (docs/cost-model.md, "Engine profiles", "Output one step late"). With
 * engine.async_output, vLLM V0's asynchronous output processor turns step i's sampled tokens
 * into responses while step i + 1 runs, and the engine hands them to the server when step i + 1
 * ends. With engine.multi_step_stream false, a multi-step run's tokens are handed over when the
 * run ends (and, asynchronously, one step later still). A step's first tokens and completions are
 * held here until then; the finished requests are recorded (and freed) only when their last
 * token is delivered. */
static int hold_outputs(sim_engine *e, sim_replica *rep)
{
    bool per_run = e->s->deployment.scheduler_steps > 1 && !e->s->engine.multi_step_stream;
    for (int i = 0; i < rep->batch.n; i++) {
        sim_req *r = rep->breq[i];
        if (r->generated > 0 && !r->first_seen && hold(e, rep, r)) return -1;
    }
    for (int i = 0; i < rep->n_fin; i++) {
        sim_req *r = rep->fin[i];
        r->held_fin = true;
        r->held_free = r->state == REQ_DONE;   /* else in tail steps: freed through rep->gone */
        r->run_wait = per_run && rep->ms_left > 0;   /* the run goes on after this step */
        if (hold(e, rep, r)) return -1;
    }
    /* The run ended with this step (a prefill step is no run): its tokens may go. */
    if (per_run && rep->ms_left == 0)
        for (int i = 0; i < rep->n_held; i++) rep->held[i]->run_wait = false;
    return 0;
}

/* The held outputs reach the client at t (when their hand-over's step ends, or at once when no
 * step follows): first tokens get their lag, finished requests are recorded. Those still waiting
 * for their run's end stay held. */
static int deliver(sim_engine *e, sim_replica *rep, double t)
{
    int rc = 0, n = rep->n_held, kept = 0;
    rep->n_held = 0;
    for (int i = 0; i < n; i++) {
        sim_req *r = rep->held[i];
        if (r->run_wait) { rep->held[kept++] = r; continue; }
        r->held = false;
        if (!r->first_seen) {
            r->lag_first = t - r->t_first;
            r->first_seen = true;
        }
        if (!r->held_fin) continue;
        r->lag_last = t - r->t_last;
        if (!rc) rc = complete(e, rep, r);
        if (r->held_free) free_req(e, r);
    }
    rep->n_held = kept;
    return rc;
}

/* A step has ended on rep: the scheduler applies it, then the engine records what completed. */
static int finish_step(sim_engine *e, sim_replica *rep)
{
    e->sched.now = e->now;
    if (sim_sched_finish(&e->sched, rep)) return -1;
    int rc = 0;
    if (outputs_held(e)) {
        if (hold_outputs(e, rep)) return -1;
        rep->n_fin = 0;
        /* Without the asynchronous processor what may go goes at this step's end. */
        if (!e->s->engine.async_output && rep->n_held && deliver(e, rep, e->now)) return -1;
    }
    for (int i = 0; i < rep->n_fin; i++) {
        sim_req *r = rep->fin[i];
        if (!rc) rc = complete(e, rep, r);   /* after a failure, only free what is no longer listed */
        if (r->state == REQ_DONE) free_req(e, r);
    }
    for (int i = 0; i < rep->n_gone; i++) {
        sim_req *r = rep->gone[i];
        if (r->held) r->held_free = true;   /* its tail ended before its delivery: freed then */
        else free_req(e, r);
    }
    rep->n_fin = rep->n_gone = 0;
    refresh_used(e, rep);
    return rc;
}

/* ---- Fast-forward over runs of decode steps ----
 *
 * Between events that change a replica's batch (an arrival, a prefill, a completion while
 * requests wait, a block that cannot be had, a preemption), every step decodes one token for the
 * same sequences and differs from the last only by their positions. A run carries the replica
 * through such steps without forming each batch: the executor times each step from (sequences,
 * sum of positions); block boundaries, prefix-cache registrations, completions and the metrics'
 * integrals are applied step by step in the order the scheduler would apply them; the sequences'
 * own state lives in the run's slots and is written back only when the run hands them to the
 * scheduler. A step that ends after another event is pushed as the replica's EV_STEP and
 * completed by the run when it fires. Under the continuous scheduler a prefill step does not touch
 * the running sequences, so the run stays active across it (suspended) and takes the prefilled
 * requests in as new slots when decoding resumes: a step costs O(1) in the batch size but for the
 * sequences it changes. The results are bit-identical to forming every step (test `fastfwd`);
 * docs/simulator.md, "Fast-forward", lists the conditions. */

static int ff_room(sim_ff *f, int n, int bs)
{
    if (n <= f->cap && bs <= f->n_head) return 0;
    if (n > f->cap) {
        int cap = f->cap ? f->cap : 64;
        while (cap < n) cap *= 2;
        sim_req **rq = realloc(f->req, sizeof *rq * (size_t)cap);
        if (rq) f->req = rq;
        long **ls[] = {&f->c0, &f->g0, &f->first, &f->cross, &f->fin_at, &f->capat};
        bool ok = rq != NULL;
        for (size_t k = 0; k < sizeof ls / sizeof ls[0]; k++) {
            long *p = realloc(*ls[k], sizeof *p * (size_t)cap);
            if (p) *ls[k] = p; else ok = false;
        }
        int *fn = realloc(f->fnext, sizeof *fn * (size_t)cap);
        if (fn) f->fnext = fn;
        int *nx = realloc(f->next, sizeof *nx * (size_t)cap);
        if (nx) f->next = nx;
        unsigned char *dd = realloc(f->dead, (size_t)cap);
        if (dd) f->dead = dd;
        unsigned char *cp = realloc(f->capped, (size_t)cap);
        if (cp) f->capped = cp;
        int *cn = realloc(f->cnext, sizeof *cn * (size_t)cap);
        if (cn) f->cnext = cn;
        sim_batch_seq *bq = realloc(f->batch.seqs, sizeof *bq * (size_t)cap);
        if (bq) f->batch.seqs = bq;
        sim_kv_seq **gr = realloc(f->grow, sizeof *gr * (size_t)cap);
        if (gr) f->grow = gr;
        int *ps = realloc(f->pos, sizeof *ps * (size_t)cap);
        if (ps) f->pos = ps;
        if (!ok || !fn || !nx || !dd || !cp || !cn || !bq || !gr || !ps) return -1;
        f->cap = cap;
    }
    if (bs > f->n_head) {
        int *hd = realloc(f->head, sizeof *hd * (size_t)bs);
        if (hd) f->head = hd;
        int *tl = realloc(f->tail, sizeof *tl * (size_t)bs);
        if (tl) f->tail = tl;
        int *ct = realloc(f->cnt, sizeof *ct * (size_t)bs);
        if (ct) f->cnt = ct;
        if (!hd || !tl || !ct) return -1;
        f->n_head = bs;
    }
    return 0;
}

static void ff_free(sim_ff *f)
{
    free(f->req); free(f->c0); free(f->g0); free(f->first); free(f->cross); free(f->fin_at);
    free(f->fnext); free(f->next); free(f->head); free(f->tail); free(f->cnt); free(f->dead); free(f->batch.seqs);
    free(f->capat); free(f->capped); free(f->cnext); free(f->grow); free(f->pos); free(f->mbatch.seqs);
}

/* Links slot i at the end of its block-boundary chain (paged) and its completion chain. */
static void ff_link(sim_ff *f, int i, int bs, bool paged)
{
    if (paged) {
        int h = (int)(f->cross[i] % bs);
        f->next[i] = -1;
        if (f->tail[h] >= 0) f->next[f->tail[h]] = i; else f->head[h] = i;
        f->tail[h] = i;
        f->cnt[h]++;
    }
    int r = (int)(f->fin_at[i] & (SIM_FF_RING - 1));
    f->fnext[i] = -1;
    if (f->ftail[r] >= 0) f->fnext[f->ftail[r]] = i; else f->fhead[r] = i;
    f->ftail[r] = i;
    if (f->capk >= 0 && !f->capped[i]) {
        int c = (int)(f->capat[i] & (SIM_FF_RING - 1));
        f->cnext[i] = -1;
        if (f->ctail[c] >= 0) f->cnext[f->ctail[c]] = i; else f->chead[c] = i;
        f->ctail[c] = i;
    }
}

static void ff_unlink_all(sim_ff *f, int bs)
{
    for (int b = 0; b < bs; b++) f->head[b] = f->tail[b] = -1, f->cnt[b] = 0;
    for (int b = 0; b < SIM_FF_RING; b++) f->fhead[b] = f->ftail[b] = -1;
    for (int b = 0; b < SIM_FF_RING; b++) f->chead[b] = f->ctail[b] = -1;
}

/* Whether request r, decoding with its last token out, can join the run as a slot: it must not
 * need more than one new block before its next token (paged) or be at its last token. */
static bool ff_can_join(const sim_engine *e, const sim_req *r)
{
    long jstar = r->kv.room - r->computed;
    return r->computed + 1 == r->total && r->generated >= 1 && r->generated < r->spec.output && jstar >= 0 &&
           (e->c.layout != SCN_LAYOUT_PAGED || jstar <= e->c.block_size);
}

/* Adds request r as the run's next slot, taking part from step K on (not yet formed). */
static void ff_join(sim_engine *e, sim_replica *rep, sim_ff *f, sim_req *r)
{
    const bool paged = e->c.layout == SCN_LAYOUT_PAGED;
    const long K = f->K;
    int i = f->n++;
    f->req[i] = r;
    f->c0[i] = r->computed - K;
    f->g0[i] = r->generated - K + 1;
    f->first[i] = K;
    f->cross[i] = K + (r->kv.room - r->computed);   /* forming step k needs position c0 + k held */
    f->fin_at[i] = K + (r->spec.output - r->generated - 1);
    f->dead[i] = 0;
    f->base += f->c0[i];
    long space = sim_kv_frag_space(rep->kv, &r->kv);   /* room, less blocks a window freed */
    f->unused += space - r->computed;   /* before its token of step K (windowed: ff_frag_windowed) */
    f->reserved += space;
    f->alive++;
    f->measured += r->spec.measured;
    f->measured_fresh += r->spec.measured;
    if (!paged && f->cross[i] <= f->fin_at[i] && (f->limit < 0 || f->cross[i] < f->limit)) f->limit = f->cross[i];
    if (f->capk >= 0) {   /* capped from step capat on; already at K when it joins past the window */
        f->capat[i] = f->capC - 1 - f->c0[i];
        f->capped[i] = f->capat[i] <= K;
        if (!f->capped[i]) { f->cu++; f->cB += f->c0[i]; }
    }
    ff_link(f, i, paged ? e->c.block_size : 1, paged);
}

/* Drops finished slots, keeping order (called between steps, when no slot is fresh). */
static void ff_compact(sim_engine *e, sim_ff *f)
{
    const bool paged = e->c.layout == SCN_LAYOUT_PAGED;
    const int bs = paged ? e->c.block_size : 1;
    ff_unlink_all(f, bs);
    f->limit = -1;
    int w = 0, fresh = f->n;
    for (int i = 0; i < f->n; i++) {
        if (i == f->fresh) fresh = w;
        if (f->dead[i]) continue;
        f->req[w] = f->req[i]; f->c0[w] = f->c0[i]; f->g0[w] = f->g0[i]; f->first[w] = f->first[i];
        f->cross[w] = f->cross[i]; f->fin_at[w] = f->fin_at[i]; f->dead[w] = 0;
        f->capat[w] = f->capat[i]; f->capped[w] = f->capped[i];
        if (!paged && f->cross[w] <= f->fin_at[w] && (f->limit < 0 || f->cross[w] < f->limit)) f->limit = f->cross[w];
        ff_link(f, w, bs, paged);
        w++;
    }
    f->fresh = fresh == f->n ? w : fresh;
    f->n = w;
    f->n_dead = 0;
}

/* Writes the run back into its requests (steps 0 .. K - 1 completed, nothing formed) and hands
 * the running sequences to the scheduler. */
static int ff_hand_back(sim_engine *e, sim_replica *rep, sim_ff *f)
{
    for (int i = 0; i < f->n; i++) {
        if (f->dead[i]) continue;
        sim_req *r = f->req[i];
        r->computed = (int)(f->c0[i] + f->K);
        r->generated = (int)(f->g0[i] + f->K - 1);
        r->total = r->computed + 1;
        if (f->first[i] < f->K) r->t_last = f->t_last;
    }
    f->active = f->pending = f->suspended = false;
    refresh_used(e, rep);
    return FF_CONTINUE;
}

/* ---- A request waiting for a free seat, with the prefix cache on ----
 *
 * Its admission (sched.c, admit) asks whether the blocks it needs beyond its prefix hits, plus
 * the hits nobody references (taking them shrinks the pool), plus the watermark fit in the
 * available blocks (and, under no-evict admission, the running sequences' blocks to completion
 * on top). Between completions and admissions, inside a run, every term but the match only
 * moves against it: available blocks fall by one per block a sequence takes, which is also
 * what the running sequences' blocks to completion fall by; the seats, the step budget (every
 * running row decodes one token) and its prompt are fixed. The match (how many blocks hit,
 * which of them are referenced) changes only when the hash of the first block it missed is
 * registered, or when one of its hit blocks is evicted (a hit that a running sequence holds
 * stays held until it leaves): sim_kv_watch flags exactly those. So after a failed attempt the
 * run watches the match and attempts again (continuous) or hands the step to the scheduler
 * (mixed steps) only when it fired, besides arrivals and completions. Offload tiers (their
 * contents move under the map) and model windows (which free blocks as sequences grow, and
 * whose caps bend the no-evict sums) are not watched: the run then attempts every step. */

static bool ff_watchable(const sim_engine *e, const sim_replica *rep)
{
    return e->c.prefix_cache && !sim_kv_windowed(rep->kv) && !sim_kv_tiers_of(rep->kv);
}

/* An admission attempt of the waiting head has just failed, and nothing it saw has changed
 * since: watch its match from here. */
static void ff_watch(sim_replica *rep, sim_ff *f)
{
    f->whead = rep->waiting.head;
    f->wfire = f->whead && sim_kv_watch(rep->kv, &f->whead->kv, f->whead->total) != 0;
}

/* With a request waiting for a free seat and the prefix cache on: whether an admission attempt
 * could succeed now (the match changed, another request heads the queue, or nothing is
 * watched). */
static inline bool ff_may_admit(sim_engine *e, const sim_replica *rep, const sim_ff *f)
{
    if (!f->watching || f->wfire || rep->waiting.head != f->whead) return true;
    int why = sim_kv_watch_fired(rep->kv);
    if (!why) {
        e->ffc.watched++;
        return false;
    }
    if (why & SIM_KV_WATCH_COMMIT) e->ffc.fired_commit++;
    else e->ffc.fired_evict++;
    return true;
}

/* Whether the step just formed on rep opens a run the fast-forward can carry. */
static bool ff_eligible(const sim_engine *e, const sim_replica *rep)
{
    if (e->o->per_step || e->ex->measured) return false;
    if (sim_spec_of(e->s, &e->c)) return false;   /* each speculative step draws its own acceptance (sim/spec.c) */
    /* Multi-step runs gate admissions, and finished requests' tail steps (multi-step, the overlap
     * scheduler's extra step) are applied by the scheduler alone (sim/sched.c). */
    if (e->s->deployment.scheduler_steps > 1 || e->s->engine.extra_decode_step) return false;
    if (e->sched.xfer_s > 0) return false;        /* this step waits for a reload or swap-in */
    if (e->c.scheduler == SCN_SCHED_STATIC || e->c.window > 0) return false;
    /* A model window frees KV as sequences grow: the run commits at block fills, exact when
     * that is where the window moves (sim/kv_manager.h). */
    if (sim_kv_windowed(rep->kv) && !sim_kv_slides_at_fills(rep->kv)) return false;
    /* Every running sequence decodes in the step; or, with mixed steps, the step's first rows
     * decode (ff_begin: the first running sequences) and the scheduler's rows follow. */
    if (rep->batch.n < 1 || (rep->batch.n != rep->running.n && !sim_sched_mixes(&e->sched))) return false;
    /* SGLang's admission reservation (engine adm_reserve) shrinks every decode step (the ratio
     * falls, each running request's remaining output with it), so a refused request may be
     * admitted after any step: the scheduler forms every step while a request waits, or while
     * any running sequence is not one of the run's decode rows. */
    if (e->s->engine.adm_reserve && (rep->waiting.n || rep->batch.n != rep->running.n)) return false;
    /* Separate chunked prefill steps (SGLang): a waiting request may be admitted by its first
     * chunk at the next step, with no completion first (one preempted by this very step, whose
     * release left room for a chunk); the scheduler forms those steps. */
    if (rep->waiting.n && e->c.scheduler == SCN_SCHED_CHUNKED && !sim_sched_mixes(&e->sched)) return false;
    /* Something waits for a seat: its admission keeps failing while blocks only get scarcer,
     * unless its prefix match changes, which the run watches where the manager can (ff_watch). */
    if (rep->waiting.n && e->c.prefix_cache && rep->running.n < e->s->deployment.max_num_seqs && !ff_watchable(e, rep))
        return false;
    return true;
}

/* Step K's time into f->dt, from the executor's decode summary, or else from its batch: the one
 * the scheduler formed in rep->batch (`formed`), or the live slots' (in the run's own buffer).
 * Returns -1 on failure. */
static int ff_time_batch(sim_engine *e, sim_replica *rep, sim_ff *f, bool formed, double *dt);

/* Slots whose keys reach the cap at step K count it from then on (once a step). */
static inline void ff_cap_advance(sim_ff *f)
{
    const long K = f->K;
    if (K <= f->cap_k) return;
    for (int i = f->chead[K & (SIM_FF_RING - 1)]; i >= 0; i = f->cnext[i])
        if (!f->dead[i] && !f->capped[i] && f->capat[i] == K) {
            f->capped[i] = 1;
            f->cu--;
            f->cB -= f->c0[i];
        }
    f->cap_k = K;
}

static int ff_time_mixed(sim_engine *e, sim_replica *rep, sim_ff *f);

static inline int ff_time(sim_engine *e, sim_replica *rep, sim_ff *f, bool formed)
{
    if (f->mixed) return ff_time_mixed(e, rep, f);
    double dt = 0;
    int by_batch = 1;
    if (f->capk < 0) {
        if (e->ex->decode_time) by_batch = e->ex->decode_time(e->ex->ctx, f->alive, f->base + (long)f->alive * f->K, &dt);
    } else {
        const long K = f->K;
        ff_cap_advance(f);
        long keys[2], all = f->base + (long)f->alive * (K + 1);   /* Σ (position + 1) */
        keys[f->capk] = f->cB + f->cu * (K + 1) + (f->alive - f->cu) * f->capC;
        keys[1 - f->capk] = all;
        by_batch = e->ex->decode_time_keys(e->ex->ctx, f->alive, keys, &dt);
    }
    if (by_batch && ff_time_batch(e, rep, f, formed, &dt)) return -1;
    if (!(dt >= 0) || !isfinite(dt)) {   /* the inputs' fault, as in start_formed */
        snprintf(e->err, e->nerr, "a step of %d sequences takes %g s under executor %s: check the hardware's "
                 "bandwidth and compute figures", f->alive, dt, e->ex->name);
        return -1;
    }
    /* With mixed steps, a step whose scheduler rows all left (a row that could not grow swapped
     * itself out: sim_sched_chunks) keeps only the slots' rows, yet waits for the swap-out its
     * forming charged, as start_formed's step does; sim_sched_chunks zeroed the transfers when
     * this step began forming. */
    if (f->mixes && e->sched.xfer_s > 0) dt += sim_sched_wait_s(&e->sched, dt);
    f->dt = dt;
    e->acc.steps++;
    e->acc.batch_sum += f->alive;
    if (f->alive > e->acc.batch_max) e->acc.batch_max = f->alive;
    return 0;
}

/* The run's live slots as decode rows at step K, in slot order, into dst; returns how many. */
static int ff_fill_slots(const sim_replica *rep, const sim_ff *f, sim_batch_seq *dst)
{
    int w = 0;
    for (int i = 0; i < f->n; i++) {
        if (f->dead[i]) continue;
        const sim_req *r = f->req[i];
        int start = (int)(f->c0[i] + f->K);
        sim_batch_seq_fill(&dst[w++], r, 1, start, sim_kv_held(rep->kv, &r->kv, start));
    }
    return w;
}

/* ff_time's other way: the executor prices the batch (kept apart so that the common way stays
 * small). */
static int ff_time_batch(sim_engine *e, sim_replica *rep, sim_ff *f, bool formed, double *dt)
{
    sim_batch *b = &rep->batch;
    if (!formed && e->ex->decode_time_rows) {   /* the positions alone, when the executor prices from them */
        int w = 0;
        for (int i = 0; i < f->n; i++)
            if (!f->dead[i]) f->pos[w++] = (int)(f->c0[i] + f->K);
        if (e->ex->decode_time_rows(e->ex->ctx, w, f->pos, dt) == 0) return 0;
    }
    if (!formed) {
        b = &f->batch;
        int w = ff_fill_slots(rep, f, b->seqs);
        b->replica = rep->id;
        b->n = w;
        b->tokens = w;
    }
    return exec_run(e, b, dt);
}

/* Step K when it is mixed: the slots' decode rows first, then the scheduler's rows in rep->batch,
 * timed as start_formed times a formed step (the executor's mixed_time from the slots' sums,
 * else the whole batch; then what the step waits for its KV transfers). */
static int ff_time_mixed(sim_engine *e, sim_replica *rep, sim_ff *f)
{
    const sim_batch *rows = &rep->batch;
    const int n = f->alive + rows->n;
    double dt = 0;
    int by_batch = 1;
    if (f->capk >= 0) ff_cap_advance(f);   /* once a step, as ff_time */
    else if (e->ex->mixed_time) by_batch = e->ex->mixed_time(e->ex->ctx, f->alive, f->base + (long)f->alive * f->K, rows, &dt);
    if (!by_batch) e->ffc.mixed_priced++;
    else {
        sim_batch *b = &f->mbatch;
        if (n > f->mcap) {
            int cap = f->mcap ? f->mcap : 64;
            while (cap < n) cap *= 2;
            sim_batch_seq *q = realloc(b->seqs, sizeof *q * (size_t)cap);
            if (!q) {
                snprintf(e->err, e->nerr, "out of memory");
                e->internal = 1;
                return -1;
            }
            b->seqs = q;
            f->mcap = cap;
        }
        int w = ff_fill_slots(rep, f, b->seqs);
        memcpy(b->seqs + w, rows->seqs, sizeof *b->seqs * (size_t)rows->n);
        b->replica = rep->id;
        b->n = n;
        b->tokens = w + rows->tokens;
        if (exec_run(e, b, &dt)) return -1;
    }
    if (step_counted(e, n, &dt)) return -1;
    f->dt = dt;
    return 0;
}

/* The fragmentation terms of the scheduler's rows in rep->batch (measure_fragmentation's, which
 * a step's slots have in f->unused and f->reserved): integers, so the sums are the same in any
 * order. */
static void ff_rows_frag(const sim_replica *rep, long *unused, long *reserved)
{
    long u = 0, v = 0;
    for (int i = 0; i < rep->batch.n; i++) {
        const sim_req *r = rep->breq[i];
        long space, held;
        sim_kv_frag_terms(rep->kv, &r->kv, r->computed + r->step_new, &space, &held);
        u += space - held;
        v += space;
    }
    *unused = u;
    *reserved = v;
}

/* The fresh slots' gaps since their own last tokens, in slot order. Slots that joined together
 * mostly share their last token's time (a run begins with every sequence of the step before),
 * so equal gaps in a row go in as one sim_hist_add_n: n additions of one, exactly. */
static void ff_fresh_gaps(sim_hist *itl, const sim_ff *f, double tend)
{
    double v = 0;
    long n = 0;
    for (int i = f->fresh; i < f->n; i++) {
        if (f->dead[i] || !f->req[i]->spec.measured) continue;
        double g = tend - f->req[i]->t_last;
        if (n && g != v) { sim_hist_add_n(itl, v, n); n = 0; }
        v = g;
        n++;
    }
    sim_hist_add_n(itl, v, n);   /* nothing when n is 0 */
}

/* A mixed step's scheduler rows, after its slots completed (they come after them in the batch):
 * sim_sched_finish applies them (commits, first tokens, completions), then the completed are
 * recorded, as finish_step does. A completion, or KV a commit gave back (a model window), may
 * let a waiting request in. */
static int ff_finish_rows(sim_engine *e, sim_replica *rep, sim_ff *f)
{
    f->mixed = false;
    long avail0 = sim_kv_available(rep->kv);
    e->sched.now = e->now;
    if (sim_sched_finish(&e->sched, rep)) { e->internal = e->sched.internal; return -1; }
    int rc = 0;
    for (int i = 0; i < rep->n_fin; i++) {
        sim_req *r = rep->fin[i];
        if (!rc) rc = complete(e, rep, r);
        if (r->state == REQ_DONE) free_req(e, r);
    }
    for (int i = 0; i < rep->n_gone; i++) free_req(e, rep->gone[i]);
    if (rep->n_fin || rep->n_gone || sim_kv_available(rep->kv) > avail0) f->stale = true;
    rep->n_fin = rep->n_gone = 0;
    rep->batch.n = 0;
    rep->batch.tokens = 0;
    return rc;
}

/* Step K completes now (e->now, its end; the time integrals are already taken): gaps, blocks that
 * filled, completions; then K advances. */
static inline int ff_complete(sim_engine *e, sim_replica *rep, sim_ff *f)
{
    const bool paged = e->c.layout == SCN_LAYOUT_PAGED;
    const int bs = paged ? e->c.block_size : 1;
    const long K = f->K;
    const double tend = e->now;
    sim_hist *itl = &e->acc.h[SIM_Q_ITL];
    /* Gaps since each sequence's last token: one value for every slot that took part in step
     * K - 1, each fresh slot's own otherwise (the histogram's sum is exact, so order is free). */
    sim_hist_add_n(itl, tend - f->t_last, f->measured - f->measured_fresh);
    if (f->fresh < f->n) ff_fresh_gaps(itl, f, tend);
    f->fresh = f->n;
    f->measured_fresh = 0;
    /* Blocks that just filled join the prefix cache, and a model window (whose width is whole
     * blocks, ff_eligible) passes blocks only as a block fills: commits in slot order, before any
     * release, as the scheduler's. A window that frees whole blocks shrinks the space a slot
     * occupies. */
    f->freed = false;
    long avail0 = f->windowed ? sim_kv_available(rep->kv) : 0;
    if (paged && (e->c.prefix_cache || f->windowed))
        for (int i = f->head[f->res + 1 == bs ? 0 : f->res + 1]; i >= 0; i = f->next[i]) {
            if (f->dead[i] || f->cross[i] != K + 1) continue;
            sim_kv_seq *q = &f->req[i]->kv;
            long space = f->windowed ? sim_kv_frag_space(rep->kv, q) : 0;
            sim_kv_commit(rep->kv, q, (int)(f->c0[i] + K + 1));
            if (f->windowed) {
                long freed = space - sim_kv_frag_space(rep->kv, q);
                f->unused -= freed;
                f->reserved -= freed;
            }
        }
    /* Blocks the window gave back may admit a waiting request (ff_next tries). */
    if (f->windowed && sim_kv_available(rep->kv) > avail0) f->freed = true;
    /* Completions, in slot order: the request leaves with its KV, then is recorded. */
    const int fr = (int)(K & (SIM_FF_RING - 1));
    int fins = 0;
    for (int i = f->fhead[fr]; i >= 0; i = f->fnext[i]) {
        if (f->dead[i] || f->fin_at[i] != K) continue;
        sim_req *r = f->req[i];
        r->computed = (int)(f->c0[i] + K + 1);
        r->total = r->computed + 1;
        r->generated = r->spec.output;
        r->t_last = tend;
        long space = sim_kv_frag_space(rep->kv, &r->kv);
        f->unused -= space - r->computed;   /* what it counted in step K */
        f->reserved -= space;
        sim_list_remove(&rep->running, r);
        sim_kv_release(rep->kv, &r->kv);
        r->state = REQ_DONE;
        f->dead[i] = 1;
        f->n_dead++;
        if (paged) f->cnt[f->cross[i] % bs]--;
        f->alive--;
        f->measured -= r->spec.measured;
        f->base -= f->c0[i];
        if (f->capk >= 0 && !f->capped[i]) { f->cu--; f->cB -= f->c0[i]; }
        fins++;
    }
    f->fins = fins;
    f->t_last = tend;
    f->K = K + 1;
    f->res = f->res + 1 == bs ? 0 : f->res + 1;
    int rc = 0;
    for (int i = fins ? f->fhead[fr] : -1; i >= 0; i = f->fnext[i]) {
        if (!f->dead[i] || f->fin_at[i] != K) continue;
        sim_req *r = f->req[i];
        if (!rc) rc = complete(e, rep, r);
        free_req(e, r);
    }
    if (f->mixed && !rc) rc = ff_finish_rows(e, rep, f);
    return rc;
}

/* A model window: each slot's kept KV, once step K is done, is full * (c0 + K + 1) + win *
 * min(c0 + K + 1, W) (sim_kv_frag_linear); f->reserved already follows its space. When the
 * executor's key cap is that window, the capped-keys count gives Σ min(c0 + K + 1, W) in O(1);
 * otherwise the live slots are summed as measure_fragmentation does (integers: the same sums). */
static void ff_frag_windowed(sim_replica *rep, sim_ff *f)
{
    long full, win, W;
    const long K = f->K;
    if (sim_kv_frag_linear(rep->kv, &full, &win, &W) && f->capk >= 0 && f->capC == W) {
        ff_cap_advance(f);
        long all = f->base + (long)f->alive * (K + 1);
        long windowed = f->cB + f->cu * (K + 1) + (f->alive - f->cu) * W;
        f->unused = f->reserved - (full * all + win * windowed);
        return;
    }
    long unused = 0;
    for (int i = 0; i < f->n; i++) {
        if (f->dead[i]) continue;
        long space, held;
        sim_kv_frag_terms(rep->kv, &f->req[i]->kv, (int)(f->c0[i] + K + 1), &space, &held);
        unused += space - held;
    }
    f->unused = unused;
}

/* The live slots that need a block at step K's forming (f->cnt bounds it). */
static long ff_need(const sim_ff *f, long K)
{
    long need = 0;
    for (int i = f->head[f->res]; i >= 0; i = f->next[i])
        if (!f->dead[i] && f->cross[i] == K) need++;
    return need;
}

/* With mixed steps: whether the step being formed, with `budget` tokens left after its rows,
 * attempts to admit the waiting head. The scheduler attempts whenever a request waits, a seat is
 * free and budget is left; the run skips an attempt that must fail as the last one did: the same
 * head with the same budget (more admits a longer chunk, less may let a whole prompt that needed
 * the step's first place wait), and nothing it depends on changed since (f->stale: a completion,
 * an event, KV given back, an admission; seats and blocks otherwise only get scarcer; and the
 * head's prefix match, which the run watches: ff_may_admit). */
static inline bool ff_attempt(sim_engine *e, const sim_replica *rep, sim_ff *f, long budget)
{
    if (!rep->waiting.head || budget <= 0 || rep->running.n >= e->s->deployment.max_num_seqs) return false;
    if (f->stale || rep->waiting.head != f->whead || budget != f->wbudget) return true;
    return e->c.prefix_cache && ff_may_admit(e, rep, f);
}

/* After the slots of step K grew: the scheduler's rows of the step, as sim_sched_step forms them
 * after the slots' (which are the first running sequences): the next chunks of the running
 * sequences after them, then admissions into the budget left. f->mixed when there are any. A
 * failed attempt is watched from here. */
static int ff_mixed(sim_engine *e, sim_replica *rep, sim_ff *f)
{
    long budget = e->s->deployment.max_num_batched_tokens - f->alive;
    sim_req *from = NULL;
    long after = rep->running.n - f->alive;
    if (after > 0 && budget > 0) {
        from = rep->running.tail;
        for (long k = 1; k < after; k++) from = from->prev;
    }
    e->sched.now = e->now;
    long left = sim_sched_chunks(&e->sched, rep, from, budget > 0 ? budget : 0);
    if (left < 0) { e->internal = e->sched.internal; return -1; }
    if (ff_attempt(e, rep, f, left)) {
        if (sim_sched_fill(&e->sched, rep, left)) { e->internal = e->sched.internal; return -1; }
        f->stale = e->sched.tried == NULL;   /* admitted (the next head is tried next), or not the step's first */
        if (!f->stale) {
            f->whead = e->sched.tried;
            f->wbudget = e->sched.tried_budget;
            if (f->watching) ff_watch(rep, f);
        }
    }
    f->mixed = rep->batch.n > 0;
    if (f->mixed) e->ffc.mixed++;
    return 0;
}

/* Forms step K over the live slots: one block for each slot at a boundary, in slot (running)
 * order, as the scheduler grows; then times it. Hands back when a block cannot be had, a
 * contiguous reservation must grow, or the batch is needed and too large. */
static inline int ff_form(sim_engine *e, sim_replica *rep, sim_ff *f)
{
    const bool paged = e->c.layout == SCN_LAYOUT_PAGED;
    const int bs = paged ? e->c.block_size : 1;
    const long K = f->K;
    if (f->n_dead > 32 && f->n_dead > f->alive) ff_compact(e, f);
    if (!paged && f->limit >= 0 && K >= f->limit) return ff_hand_back(e, rep, f);
    /* More sequences than the step's token budget: the scheduler gives rows to the oldest only. */
    if (f->alive > e->s->deployment.max_num_batched_tokens) return ff_hand_back(e, rep, f);
    /* The live slots of this residue bound the blocks needed; count exactly only when the bound
     * is more than is free. */
    long need = paged ? f->cnt[f->res] : 0;
    if (need && need > sim_kv_available(rep->kv)) {
        need = ff_need(f, K);
        if (need > sim_kv_available(rep->kv)) return ff_hand_back(e, rep, f);
    }
    e->ffc.steps++;
    /* A decode step: new_token_ratio falls as the scheduler's decode steps lower it (sched.c;
     * no scheduler rows join a run under the reservation: ff_next). */
    if (e->s->engine.adm_reserve) sim_sched_decay(&e->sched, rep);
    if (need && !f->windowed) {
        /* A block of every layer: the tokens it adds to each sequence's room (whole numbers, so
         * the order of the sums is free). The crossing slots in slot order, grown in one call. */
        sim_req *const *req = f->req;
        const int *next = f->next;
        const unsigned char *dead = f->dead;
        long *cross = f->cross;
        sim_kv_seq **grow = f->grow;
        int ng = 0;
        for (int i = f->head[f->res]; i >= 0; i = next[i]) {
            if (dead[i] || cross[i] != K) continue;
            grow[ng++] = &req[i]->kv;   /* position c0 + K = its room */
            cross[i] = K + bs;
        }
        long more = sim_kv_grow_blocks(rep->kv, grow, ng);
        if (more < 0) {
            snprintf(e->err, e->nerr, "out of memory");
            e->internal = 1;
            return FF_ERROR;
        }
        f->unused += more;
        f->reserved += more;
    } else if (need) {
        for (int i = f->head[f->res]; i >= 0; i = f->next[i]) {
            if (f->dead[i] || f->cross[i] != K) continue;
            sim_req *r = f->req[i];
            long space0 = sim_kv_frag_space(rep->kv, &r->kv);
            if (sim_kv_grow_block(rep->kv, &r->kv)) {
                snprintf(e->err, e->nerr, "out of memory");
                e->internal = 1;
                return FF_ERROR;
            }
            /* A block of every layer but the windowed layers' blocks the window passed. */
            long more = sim_kv_frag_space(rep->kv, &r->kv) - space0;
            f->unused += more;
            f->reserved += more;
            f->cross[i] += bs;
        }
    }
    f->unused -= f->alive;   /* every sequence fills one more slot */
    if (f->windowed) ff_frag_windowed(rep, f);
    f->T = e->now;
    long ru = 0, rr = 0;
    if (f->mixes) {
        if (ff_mixed(e, rep, f)) return FF_ERROR;
        if (f->mixed) ff_rows_frag(rep, &ru, &rr);
    }
    note_peak(e, rep);
    rep->frag_unused = (double)(f->unused + ru);
    rep->frag_reserved = (double)(f->reserved + rr);
    return ff_time(e, rep, f, false) ? FF_ERROR : FF_RUN;
}

/* Admits waiting requests in a prefill step while the run stays suspended: FF_BUSY once the
 * step is started, FF_RUN when nothing could be admitted (the run goes on), FF_ERROR. */
static int ff_prefill(sim_engine *e, sim_replica *rep, sim_ff *f)
{
    int n = sim_sched_prefill(&e->sched, rep);
    if (n < 0) { e->internal = e->sched.internal; return FF_ERROR; }
    if (n == 0) return FF_RUN;
    f->suspended = true;
    note_peak(e, rep);
    return start_formed(e, rep, n) ? FF_ERROR : FF_BUSY;
}

/* After step K - 1 completed (now): what the scheduler would do next. Under the continuous
 * scheduler a prefill step of waiting requests comes first, with the run suspended; otherwise
 * the run forms its next decode step. `event`: the step ended as an event (others happened since
 * the last admission attempt); inline, an attempt can only succeed after a completion or, with
 * prefix caching and free seats, a change in the waiting head's prefix match (ff_may_admit). */
static int ff_join_after(sim_engine *e, sim_replica *rep, sim_ff *f);

static inline int ff_next(sim_engine *e, sim_replica *rep, sim_ff *f, bool event)
{
    if (f->alive == 0) {
        f->active = false;
        refresh_used(e, rep);
        return FF_CONTINUE;
    }
    /* Under the admission reservation, a waiting request or a running one that is not a slot
     * (ff_eligible) goes to the scheduler. */
    if (e->s->engine.adm_reserve && (rep->waiting.n || rep->running.n > f->alive)) return ff_hand_back(e, rep, f);
    if (f->mixes) {   /* the step's admissions are the mixed step's (ff_mixed) */
        if (event || f->fins || f->freed) f->stale = true;
        if (rep->running.n > f->alive && ff_join_after(e, rep, f)) return FF_ERROR;
        return ff_form(e, rep, f);
    }
    if (rep->waiting.n && (event || f->fins || f->freed ||
                           (e->c.prefix_cache && rep->running.n < e->s->deployment.max_num_seqs && ff_may_admit(e, rep, f)))) {
        if (e->c.scheduler != SCN_SCHED_CONTINUOUS || sim_sched_mixes(&e->sched)) return ff_hand_back(e, rep, f);
        e->sched.now = e->now;
        int rc = ff_prefill(e, rep, f);
        if (rc != FF_RUN) return rc;
        if (f->watching) ff_watch(rep, f);
    }
    return ff_form(e, rep, f);
}

/* With mixed steps: the running sequences right after the slots that now decode (their prompts
 * done in the scheduler's rows) join as slots, in running order, while they can (ff_can_join);
 * the rest stay the scheduler's rows, so the slots stay the first running sequences. */
static int ff_join_after(sim_engine *e, sim_replica *rep, sim_ff *f)
{
    long after = rep->running.n - f->alive;
    sim_req *from = rep->running.tail;
    for (long k = 1; k < after; k++) from = from->prev;
    int joiners = 0;
    for (sim_req *q = from; q && ff_can_join(e, q); q = q->next) joiners++;
    if (!joiners) return 0;
    if (f->n_dead > 32 && f->n_dead > f->alive) ff_compact(e, f);
    if (ff_room(f, f->n + joiners, e->c.layout == SCN_LAYOUT_PAGED ? e->c.block_size : 1)) {
        snprintf(e->err, e->nerr, "out of memory");
        e->internal = 1;
        return -1;
    }
    sim_req *q = from;
    for (int k = 0; k < joiners; k++, q = q->next) ff_join(e, rep, f, q);
    return 0;
}

/* Carries the run from its formed and timed step K: completes steps inline while nothing else
 * happens first, else pushes step K's end as the replica's EV_STEP. */
static int ff_go(sim_engine *e, sim_replica *rep, sim_ff *f)
{
    for (;;) {
        double tend = f->T + f->dt;
        const sim_event *top = sim_heap_peek(&e->heap);
        if (top && top->t <= tend) {   /* something else happens first */
            f->pending = true;
            return push_step(e, rep, tend) ? FF_ERROR : FF_BUSY;
        }
        /* Step K completes at tend, as its EV_STEP would. */
        e->heap.next_seq++;
        e->now = tend;
        account_seen(e, rep);
        rep->frag_unused = rep->frag_reserved = 0;
        if (ff_complete(e, rep, f)) return FF_ERROR;
        int rc = ff_next(e, rep, f, false);
        if (rc != FF_RUN) return rc;
    }
}

/* The run's pending step ended as an event. */
static int ff_step_event(sim_engine *e, sim_replica *rep)
{
    sim_ff *f = &e->ff[rep->id];
    f->pending = false;
    if (ff_complete(e, rep, f)) return -1;
    int rc = ff_next(e, rep, f, true);
    if (rc == FF_RUN) rc = ff_go(e, rep, f);
    if (rc == FF_ERROR) return -1;
    return rc == FF_CONTINUE ? kick(e, rep) : 0;
}

/* The scheduler's prefill step ended while the run was suspended (the replica is idle): another
 * prefill when more can be admitted, else the run resumes with the prefilled requests (the
 * running list's newest, after the run's live slots) as new slots. */
static int ff_resume(sim_engine *e, sim_replica *rep)
{
    sim_ff *f = &e->ff[rep->id];
    f->suspended = false;
    if (rep->waiting.n) {
        int rc = ff_prefill(e, rep, f);
        if (rc != FF_RUN) return rc;
        if (f->watching) ff_watch(rep, f);
    }
    long joiners = rep->running.n - f->alive;
    sim_req *r = rep->running.tail;
    for (long k = 1; k < joiners && r; k++) r = r->prev;
    for (sim_req *q = joiners > 0 ? r : NULL; q; q = q->next)
        if (!ff_can_join(e, q)) return ff_hand_back(e, rep, f);
    if (f->n_dead > 32 && f->n_dead > f->alive) ff_compact(e, f);
    if (ff_room(f, f->n + (int)(joiners > 0 ? joiners : 0), e->c.layout == SCN_LAYOUT_PAGED ? e->c.block_size : 1)) {
        snprintf(e->err, e->nerr, "out of memory");
        e->internal = 1;
        return FF_ERROR;
    }
    for (sim_req *q = joiners > 0 ? r : NULL; q; q = q->next) ff_join(e, rep, f, q);
    int rc = ff_form(e, rep, f);
    return rc == FF_RUN ? ff_go(e, rep, f) : rc;
}

/* Step 0 of a run when the scheduler formed it mixed: timed as start_formed times it, over the
 * whole batch; then rep->batch keeps only the scheduler's rows (after the first nd). */
static int ff_begin_mixed(sim_engine *e, sim_replica *rep, sim_ff *f, int nd)
{
    sim_batch *b = &rep->batch;
    const int n0 = b->n;
    double dt = 0;
    if (exec_run(e, b, &dt) || step_counted(e, n0, &dt)) return -1;
    f->dt = dt;
    if (f->capk >= 0) ff_cap_advance(f);
    memmove(b->seqs, b->seqs + nd, sizeof *b->seqs * (size_t)(n0 - nd));
    memmove(rep->breq, rep->breq + nd, sizeof *rep->breq * (size_t)(n0 - nd));
    b->n = n0 - nd;
    b->tokens -= nd;
    f->mixed = true;
    return 0;
}

/* Takes the decode step the scheduler just formed on rep (not yet timed) as step 0 of a run; or,
 * with mixed steps, a step whose first rows decode (the first running sequences: they become the
 * slots) and whose other rows are the scheduler's. */
static int ff_begin(sim_engine *e, sim_replica *rep)
{
    const bool paged = e->c.layout == SCN_LAYOUT_PAGED;
    const int bs = paged ? e->c.block_size : 1;
    const int n0 = rep->batch.n;
    const bool mixes = sim_sched_mixes(&e->sched);
    sim_ff *f = &e->ff[rep->id];
    int nd = 0;
    for (; nd < n0; nd++) {
        const sim_req *r = rep->breq[nd];
        long jstar = r->kv.room - r->computed;   /* grown for this step already */
        if (r->step_new != 1 || !ff_can_join(e, r) || jstar < 1) break;
    }
    if (nd == 0 || (nd < n0 && !mixes)) return FF_DECLINED;
    if (ff_room(f, nd, bs)) { snprintf(e->err, e->nerr, "out of memory"); e->internal = 1; return FF_ERROR; }
    ff_unlink_all(f, bs);
    f->n = f->n_dead = f->fresh = 0;
    f->K = 0;
    f->res = 0;
    f->alive = f->measured = f->measured_fresh = 0;
    f->base = f->unused = f->reserved = 0;
    f->limit = -1;
    f->windowed = sim_kv_windowed(rep->kv);
    /* Exactly one layer kind capping its keys, and the executor prices from key sums. */
    const long *kc = e->ex->key_cap;
    f->capk = !e->ex->decode_time_keys || (kc[0] > 0) == (kc[1] > 0) ? -1 : kc[0] > 0 ? 0 : 1;
    f->capC = f->capk >= 0 ? kc[f->capk] : 0;
    f->cu = f->cB = 0;
    f->cap_k = -1;
    f->t_last = e->now;
    /* A mixed step attempted admission after its growth: when the head's attempt failed as the
     * step's first (sim_sched.tried), the run watches from what it saw, with the budget it had;
     * otherwise (it admitted, or no attempt was made) the run attempts at its next step with
     * budget. A prefill step was attempted before this step's growth: the run attempts again
     * after this step. */
    f->watching = ff_watchable(e, rep);
    f->mixes = mixes;
    f->mixed = false;
    f->stale = true;
    f->wfire = true;
    f->whead = NULL;
    if (mixes && e->sched.tried) {
        f->stale = false;
        f->whead = e->sched.tried;
        f->wbudget = e->sched.tried_budget;
        if (f->watching) ff_watch(rep, f);
    }
    e->ffc.runs++;
    for (int i = 0; i < nd; i++) ff_join(e, rep, f, rep->breq[i]);
    f->unused -= nd;   /* step 0 is formed: each holds its new token */
    if (f->windowed) ff_frag_windowed(rep, f);
    f->T = e->now;
    long ru = 0, rr = 0;
    if (nd < n0) {
        if (ff_begin_mixed(e, rep, f, nd)) return FF_ERROR;
        ff_rows_frag(rep, &ru, &rr);
    }
    rep->frag_unused = (double)(f->unused + ru);
    rep->frag_reserved = (double)(f->reserved + rr);
    if (!f->mixed && ff_time(e, rep, f, true)) return FF_ERROR;
    f->active = true;
    f->pending = f->suspended = false;
    return ff_go(e, rep, f);
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
            rc = !r || admit(e, r) || next_arrival(e);
            break;
        }
        case EV_TURN:
            ev->prio = 0;   /* a retry's class (refuse) holds only for its send */
            rc = admit(e, CONTAINER(ev, sim_req, ev));
            break;
        case EV_DEFER:
        case EV_INGRESS:
            rc = enqueue(e, CONTAINER(ev, sim_req, ev));
            break;
        case EV_STEP: {
            sim_replica *rep = CONTAINER(ev, sim_replica, ev);
            rep->busy = false;
            account(e, rep);
            rep->frag_unused = rep->frag_reserved = 0;
            rc = e->ff[rep->id].pending ? ff_step_event(e, rep) : finish_step(e, rep) || kick(e, rep);
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
    /* Led by the field a user would change, so the caller can locate it (scn_locate.h): the
     * tensor-parallel size divides the weights (memory's advice names it too). */
    double left = kv_spec_pool_size(s, &cfg, c->layout == SCN_LAYOUT_PAGED, c->block_size, kv_spec_get(s, c->spec)).kv_budget;
    /* What is missing, never a negative size (as `kvplan memory` says it). */
    /* A tensor_parallel list's first value is what ran (plan_first): the error is located there. */
    snprintf(err, n, "%s: the model does not fit at tensor_parallel %d on %s: weights (a speculative "
             "proposer's included), activations and runtime %s %.2f GiB %s",
             s->options.n_tp > 0 ? "options.tensor_parallel" : "deployment.tensor_parallel", s->deployment.tensor_parallel,
             s->hardware.name, left < 0 ? "need" : "leave", fabs(left) / 1073741824.0,
             left < 0 ? "more than the memory the engine may use, leaving none for the KV cache"
                      : "for the KV cache, less than one block");
    return -1;
}

/* The tier and swap metrics over every replica's tiers; -1 on out of memory. */
static int tiers_report(const sim_engine *e, sim_metrics *m)
{
    sim_kv **kvs = malloc(sizeof *kvs * (size_t)e->n_rep);
    if (!kvs) return -1;
    for (int i = 0; i < e->n_rep; i++) kvs[i] = e->rep[i].kv;
    sim_kv_tier_sum sum;
    memset(&sum, 0, sizeof sum);
    sim_kv_tiers_add(&sum, kvs, e->n_rep, e->s, &e->c);
    free(kvs);
    kv_cache_cfg cfg = kv_cache_cfg_make(e->s, e->c.kv_dtype, e->c.sink, e->c.window);
    sim_kv_tiers_metrics(&e->acc, &sum, kv_offload_bytes_per_rank(e->s, &cfg, e->c.block_size),
                         e->s->deployment.tensor_parallel, m);
    return 0;
}

long sim_max_waiting(const scn_scenario *s, const sim_run_opts *o, long units)
{
    if (units < 1) units = 1;
    if ((!o || o->max_waiting <= 0) && s->deployment.max_queued_requests > 0)
        return s->deployment.max_queued_requests;
    long cap = o && o->max_waiting > 0 ? o->max_waiting : SIM_MAX_WAITING;
    return cap / units > 0 ? cap / units : 1;
}

int sim_run(const scn_scenario *s, const sim_choice *c, sim_executor *ex, const sim_run_opts *o,
            sim_metrics *m, char *err, size_t n)
{
    memset(m, 0, sizeof *m);
    if (o->twins) o->twins->same = 0;
    /* Prefill and decode on separate pools: the coordinator runs both (sim/disagg.c). */
    if (s->deployment.disagg.on) return sim_disagg_run(s, c, ex, o, m, err, n);
    if (sim_choice_check(c, err, n)) return SIM_E_DATA;
    sim_engine e;
    memset(&e, 0, sizeof e);
    e.s = s; e.c = *c; e.ex = ex; e.o = o; e.err = err; e.nerr = n;
    e.sched = (sim_sched){.s = s, .c = *c, .acc = &e.acc, .err = err, .nerr = n, .seed = o->seed, .tails = true};
    e.arrival_ev.idx = e.sample_ev.idx = -1;
    e.sample_ev.kind = EV_SAMPLE;
    sim_heap_init(&e.heap);
    int rc = SIM_E_INTERNAL;
    long blocks = 0, blocks_all = 0;
    if (sim_acc_init(&e.acc, &s->workload)) { snprintf(err, n, "out of memory"); goto out; }
    /* Each attention-DP rank holds its own sequences and KV pool (model/kv_moe_parallel.h). */
    e.n_rep = s->deployment.replicas * (s->deployment.attention_dp > 1 ? s->deployment.attention_dp : 1);
    e.max_waiting = sim_max_waiting(s, o, e.n_rep);
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
        if (sim_kv_tiers_attach(rep->kv, s, c)) {
            snprintf(err, n, "out of memory for the KV offload tiers");
            goto out;
        }
        if (sim_kv_tiers_of(rep->kv)) e.tiered = true;
        if (sim_twin_attach(rep->kv, s, c, ex, o)) { snprintf(err, n, "out of memory"); goto out; }
    }
    int noinput = 0;
    e.wl = sim_workload_init(s, o->seed, &noinput, err, n);
    if (!e.wl) { rc = noinput ? SIM_E_NOINPUT : SIM_E_DATA; goto out; }
    e.total = sim_workload_total(e.wl);
    rc = SIM_E_DATA;   /* from here a failure is a bad trace line or a request that cannot fit */
    if (next_arrival(&e)) goto out;
    if (o->sample_interval > 0 && sim_heap_push(&e.heap, &e.sample_ev, 0)) goto out;
    rc = loop(&e) ? (e.internal ? SIM_E_INTERNAL : SIM_E_DATA) : SIM_OK;
    if (o->ff_counts) *o->ff_counts = e.ffc;
    if (rc == SIM_OK) {
        for (int i = 0; i < e.n_rep; i++) account(&e, &e.rep[i]);
        /* used_integral and the peak cover all replicas: utilisation is over all their blocks. */
        if (sim_acc_finish(&e.acc, blocks_all, m)) {
            snprintf(err, n, "out of memory keeping the completions of a window cut by time");
            rc = SIM_E_INTERNAL;
            goto out;
        }
        m->kv_blocks = blocks;
        m->kv_tokens = c->layout == SCN_LAYOUT_PAGED ? blocks * c->block_size : blocks;
        m->unsent = sim_workload_unsent(e.wl);
        if ((c->kv_offload != SCN_OFFLOAD_OFF || c->preemption == SCN_PREEMPT_SWAP) && tiers_report(&e, m)) {
            snprintf(err, n, "out of memory");
            rc = SIM_E_INTERNAL;
            goto out;
        }
        m->events = (long)e.heap.next_seq;
        m->peak_in_flight = e.peak_alive;
        if (o->on_progress) o->on_progress(o->ud, e.done, e.done);
    }
out:
    if (o->twins) {   /* the block-size twin report: the same on every replica */
        unsigned same = e.rep && e.n_rep > 0 ? ~0u : 0;
        for (int i = 0; e.rep && i < e.n_rep; i++) same &= e.rep[i].kv ? sim_kv_twin_result(e.rep[i].kv) : 0;
        o->twins->same = same & (o->twins->n >= 32 ? ~0u : (1u << o->twins->n) - 1);
    }
    for (int i = 0; e.rep && i < e.n_rep; i++) {
        sim_replica *rep = &e.rep[i];
        /* Held and finished, in no list (first: the lists below free the others). */
        for (int j = 0; j < rep->n_held; j++)
            if (rep->held[j]->held_free) { free(rep->held[j]->kv.blocks); free(rep->held[j]); }
        for (sim_list *l = &rep->waiting; l; l = l == &rep->waiting ? &rep->running : NULL)
            while (l->head) { sim_req *r = l->head; sim_list_remove(l, r); free(r->kv.blocks); free(r); }
        for (int j = 0; j < rep->n_gone; j++) { free(rep->gone[j]->kv.blocks); free(rep->gone[j]); }   /* retired tails */
        sim_kv_free(rep->kv);
        sim_sched_replica_free(rep);
        if (e.ff) ff_free(&e.ff[i]);
    }
    free(e.ff);
    /* Follow-up turns and deferred arrivals still queued (only after a failure) own their
     * requests. */
    sim_event *ev;
    while ((ev = sim_heap_pop(&e.heap)))
        if (ev->kind == EV_TURN || ev->kind == EV_DEFER || ev->kind == EV_INGRESS) {
            sim_req *r = CONTAINER(ev, sim_req, ev);
            free(r->kv.blocks);
            free(r);
        }
    while (e.pool) { sim_req *r = e.pool; e.pool = r->next; free(r->kv.blocks); free(r); }
    sim_kv_tables_free(&e.tables);
    free(e.rep);
    sim_heap_free(&e.heap);
    sim_workload_free(e.wl);
    sim_acc_free(&e.acc);
    return rc;
}
