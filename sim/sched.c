/* sched.c: the scheduler, modelled on vLLM's.
 *
 * continuous (vLLM V0's default): if waiting requests fit, a step prefills them whole, FIFO,
 * within max_num_seqs and max_num_batched_tokens; otherwise it decodes every running sequence.
 * chunked (vLLM V1, Sarathi): each step first gives running sequences their next token or
 * prefill chunk, then admits waiting requests into what is left of the token budget.
 * static (FasterTransformer-style baseline): a fixed batch padded to its longest prompt and
 * longest output runs to completion before the next batch starts.
 * The engine may change whether prefill rows share a step with decode rows (engine.prefill_mix,
 * sim_sched_mixes): continuous and mixed (TensorRT-LLM's in-flight batching) decodes every running
 * sequence and adds whole prompts that fit what is left of the budget; chunked and separate
 * (SGLang) runs a step of prefill chunks whenever there are any, else a decode step.
 * Admission needs free blocks beyond a watermark; a running sequence that cannot grow preempts
 * the newest running sequence by recompute (its KV is dropped and it goes back to the front of
 * the queue), or itself when it is the newest. An engine with cpu.no_evict (TensorRT-LLM's
 * GUARANTEED_NO_EVICT) admits only what leaves every running request room to finish.
 * Multi-step (deployment.scheduler_steps N > 1, continuous only; vLLM 0.6's --num-scheduler-steps):
 * a decision that forms a decode step commits the running sequences to N decode steps; no
 * waiting request is admitted until the run ends (docs/simulator.md, "Multi-step scheduling").
 * Tail steps: a request that finishes is recorded at once but can stay in the batch, computing
 * a discarded token per step, holding its seat and KV: until its multi-step run ends, and for one
 * step under an overlap scheduler that launched the next step before its stop check
 * (engine.extra_decode_step, TensorRT-LLM). It then leaves through rep->gone. */
#include "sched.h"
#include "kv_tier.h"
#include "spec.h"
#include "../model/kv_blocks.h"
#include "../model/kv_offload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for `cap` entries in rep->gone (it only grows). */
static sim_req **gone_room(sim_replica *rep, int cap)
{
    if (cap <= rep->gone_cap) return rep->gone;
    if (cap < 2 * rep->gone_cap) cap = 2 * rep->gone_cap;
    sim_req **g = realloc(rep->gone, sizeof *g * (size_t)cap);
    if (!g) return NULL;
    rep->gone = g;
    rep->gone_cap = cap;
    return g;
}

static int batch_room(sim_replica *rep, int n)
{
    if (n <= rep->bcap) return 0;
    int cap = rep->bcap ? rep->bcap : 64;
    while (cap < n) cap *= 2;
    sim_batch_seq *s = realloc(rep->batch.seqs, sizeof *s * (size_t)cap);
    if (s) rep->batch.seqs = s;
    sim_req **b = realloc(rep->breq, sizeof *b * (size_t)cap);
    if (b) rep->breq = b;
    sim_req **f = realloc(rep->fin, sizeof *f * (size_t)cap);
    if (f) rep->fin = f;
    /* gone: requests whose tail steps ended (continuous and chunked; static batches size it) */
    sim_req **g = gone_room(rep, cap);
    if (!s || !b || !f || !g) return -1;
    rep->bcap = cap;
    return 0;
}

void sim_batch_seq_fill(sim_batch_seq *q, const sim_req *r, int new_tokens, int start, int context)
{
    q->req_id = r->spec.id;
    q->new_tokens = new_tokens;
    q->start = start;
    q->context = context;
    q->blocks = r->kv.blocks;
    q->n_blocks = r->kv.n_blocks;
    q->prefix_seed = r->spec.prefix_seed;
    q->body_seed = r->spec.body_seed;
    q->prefix_len = r->spec.prefix_len;
    q->draft = 0;
}

/* add_seq's rare way, kept out of line: a step forms hundreds of rows, and the error path's
 * call made each row save every register. */
static int add_seq_room(sim_sched *e, sim_replica *rep)
{
    if (!batch_room(rep, rep->batch.n + 1)) return 0;
    snprintf(e->err, e->nerr, "out of memory for a batch of %d sequences", rep->batch.n + 1);
    e->internal = 1;
    return -1;
}

static inline int add_seq(sim_sched *e, sim_replica *rep, sim_req *r, int new_tokens, int start, int context)
{
    if (rep->batch.n >= rep->bcap && add_seq_room(e, rep)) return -1;
    int i = rep->batch.n++;
    sim_batch_seq_fill(&rep->batch.seqs[i], r, new_tokens, start, context);
    rep->breq[i] = r;
    r->step_new = new_tokens;
    r->step_draft = 0;
    rep->batch.tokens += new_tokens;
    return 0;
}

static int fail(sim_sched *e, const char *fmt, long a, long b, long c)
{
    snprintf(e->err, e->nerr, fmt, a, b, c);
    return -1;
}

/* KV bytes of one block on one GPU, computed once. */
static double block_bytes(sim_sched *e)
{
    if (e->block_bytes <= 0) {
        kv_cache_cfg cfg = kv_cache_cfg_make(e->s, e->c.kv_dtype, e->c.sink, e->c.window);
        e->block_bytes = kv_offload_bytes_per_rank(e->s, &cfg, e->c.block_size);
    }
    return e->block_bytes;
}

/* Seconds `blocks` blocks take to cross tier k's link (docs/simulator.md, "KV offload tiers"):
 * the step waits for all of it unless reloads are layerwise (sim_sched_wait_s). */
static double tier_seconds(sim_sched *e, kv_tier_id k, double blocks)
{
    return blocks > 0 ? kv_tier_transfer_s(&e->s->hardware, k, blocks * block_bytes(e)) : 0;
}

/* Charges the reloads an admission's prefix match made from the tiers; `first` when it is the
 * request's first admission (hit rates count those only, like the prefix hit rate). */
static void charge_reloads(sim_sched *e, sim_replica *rep, bool first)
{
    sim_kv_tiers *tiers = sim_kv_tiers_of(rep->kv);
    if (!tiers) return;   /* nothing was reloaded */
    long got[KV_TIER_COUNT];
    sim_kv_tiers_drain(tiers, got);
    for (int k = 0; k < KV_TIER_COUNT; k++) {
        if (!got[k]) continue;
        double t = tier_seconds(e, (kv_tier_id)k, (double)got[k]);
        e->xfer_s += t;
        e->reload_s[k] += t;
        if (first) e->acc->tier_hit_tokens[k] += got[k] * (long)sim_kv_block_size(rep->kv);
    }
}

double sim_sched_wait_s(sim_sched *e, double step_s)
{
    double reload = 0;
    for (int k = 0; k < KV_TIER_COUNT; k++) reload += e->reload_s[k];
    if (!(reload > 0)) return e->xfer_s;
    double exposed = e->s->engine.kv_layerwise ? kv_layerwise_exposed_s(reload, step_s, e->s->model.layers) : reload;
    /* Each tier is charged its share of what the step waits for. */
    for (int k = 0; k < KV_TIER_COUNT; k++) e->acc->tier_xfer_s[k] += e->reload_s[k] * (exposed / reload);
    return e->xfer_s - reload + exposed;
}

/* A finished request's tail steps are over: it leaves the batch and frees its KV; the engine,
 * which recorded it when it finished, frees it from rep->gone. */
static void retire(sim_replica *rep, sim_req *r)
{
    r->tail = 0;
    sim_list_remove(&rep->running, r);
    sim_kv_release(rep->kv, &r->kv);
    r->state = REQ_DONE;
    rep->gone[rep->n_gone++] = r;
}

static void preempt(sim_sched *e, sim_replica *rep, sim_req *r)
{
    /* A request in its tail steps has nothing left to compute: it is dropped, not requeued. */
    if (r->tail > 0) { retire(rep, r); return; }
    /* Swap: the blocks go to the host swap area and the sequence keeps its progress; when the
     * area is full it falls back to recompute (vLLM V0 refused such a swap). */
    long n = e->c.preemption == SCN_PREEMPT_SWAP ? sim_kv_swap_out(rep->kv, &r->kv) : -1;
    if (n >= 0) {
        double t = tier_seconds(e, KV_TIER_CPU, (double)n);
        r->swapped = n;
        e->xfer_s += t;
        e->acc->swap_xfer_s += t;
        e->acc->swap_blocks += (double)n;
        e->acc->swaps++;
        r->preemptions++;
        e->acc->preemptions++;
        r->state = REQ_WAITING;
        sim_list_remove(&rep->running, r);
        sim_list_push_front(&rep->waiting, r);
        return;
    }
    sim_kv_release(rep->kv, &r->kv);
    r->computed = 0;
    r->state = REQ_WAITING;
    r->preemptions++;
    e->acc->preemptions++;
    sim_list_remove(&rep->running, r);
    sim_list_push_front(&rep->waiting, r);
}

/* What a contiguous allocator reserves: the model's one rule (kv_contiguous_reserve), which
 * `kvplan memory` and the planner's capacity search use too. */
static long contiguous_reservation(const sim_sched *e, const sim_req *r)
{
    kv_cache_cfg cfg = {.dtype = e->c.kv_dtype, .sink = e->c.sink, .window = e->c.window};
    return kv_contiguous_reserve(e->s, &cfg, r->spec.prompt, r->spec.output, r->total);
}

/* Grows r to hold positions [0, upto), preempting the newest running sequences as needed.
 * Returns 1 if r was itself preempted, 0 if it grew, -1 on a fatal problem. */
static int grow_or_preempt(sim_sched *e, sim_replica *rep, sim_req *r, int upto)
{
    if (upto <= r->kv.room) return 0;
    while (sim_kv_grow(rep->kv, &r->kv, upto) != 0) {
        sim_req *victim = rep->running.tail;
        if (victim == r) {
            /* Alone and still short of blocks: it can never fit, unless finished requests hold
             * blocks the scheduler does not see (hold_done), which it waits for, preempted. */
            long want_blocks = sim_kv_needed(rep->kv, &r->kv, upto) + r->kv.n_blocks;
            if (rep->running.n == 1 && (!rep->hold_done || want_blocks > sim_kv_total(rep->kv)))
                return fail(e, "request %ld needs %ld blocks, more than the %ld the KV cache holds",
                            r->spec.id, want_blocks, sim_kv_total(rep->kv));
            preempt(e, rep, r);
            return 1;
        }
        preempt(e, rep, victim);
    }
    return 0;
}

/* A whole (unchunked) prompt of `want` tokens that exceeds what is left of the step's budget
 * waits for a later step (TensorRT-LLM's MicroBatchScheduler stops adding context requests at
 * the first that does not fit max_num_tokens less the tokens already in the batch), unless it is
 * longer than the whole budget: it can then only ever run as its step's only prompt, so it runs
 * when `first` (no prompt in the step yet; an engine that does not chunk cannot be given a
 * token limit below its longest prompt). docs/simulator.md, "Mixed and separate prefill steps". */
static bool over_whole_budget(const sim_sched *e, long want, bool first)
{
    return first && want > e->s->deployment.max_num_batched_tokens;
}

/* Resumes a swapped-out sequence: new blocks for everything it had computed and its next
 * tokens, and the swap-in charged to the step. Returns the tokens scheduled, 0 if it does not
 * fit now. */
static long resume_swapped(sim_sched *e, sim_replica *rep, sim_req *r, long budget, bool chunked, bool first)
{
    sim_kv *kv = rep->kv;
    long want = r->total - r->computed;
    if (want > budget) {
        if (chunked) want = budget;
        else if (!over_whole_budget(e, want, first)) return 0;
    }
    if (want <= 0) return 0;
    long upto = r->computed + want;
    if (sim_kv_needed(kv, &r->kv, (int)upto) + rep->watermark > sim_kv_available(kv)) return 0;
    if (sim_kv_grow(kv, &r->kv, (int)upto)) { sim_kv_release(kv, &r->kv); return 0; }
    sim_kv_tiers_swap_in(sim_kv_tiers_of(kv), r->swapped);
    double t = tier_seconds(e, KV_TIER_CPU, (double)r->swapped);
    e->xfer_s += t;
    e->acc->swap_xfer_s += t;
    e->acc->swap_blocks += (double)r->swapped;
    r->swapped = 0;
    r->state = REQ_RUNNING;
    sim_list_remove(&rep->waiting, r);
    sim_list_push_back(&rep->running, r);
    if (add_seq(e, rep, r, (int)want, r->computed, sim_kv_held(kv, &r->kv, r->computed))) return -1;
    return want;
}

/* A window that frees whole blocks caps what a sequence holds (TensorRT-LLM's
 * getRemainingBlocksToCompletion counts min(prompt + max new tokens, attention window) tokens):
 * a decoding sequence holds at most `cap` blocks (sim_kv_window_blocks), and one still prefilling
 * takes its next chunk's blocks on top before that chunk's commit frees the passed ones. So
 * what it still needs is the lesser of every position's block and that peak less what it holds. */
static long windowed_need(const sim_sched *e, const sim_kv *kv, const sim_req *q, long need, long cap)
{
    if (cap < 0) return need;
    long bs = sim_kv_block_size(kv), left = (long)q->spec.prompt - q->computed, peak = cap;
    if (left > 0) {
        long chunk = left < e->s->deployment.max_num_batched_tokens || e->c.scheduler != SCN_SCHED_CHUNKED
                         ? left : e->s->deployment.max_num_batched_tokens;
        peak += (chunk + bs - 1) / bs + 1;
    }
    long held = sim_kv_seq_tokens(kv, &q->kv) / bs, w = peak > held ? peak - held : 0;
    return w < need ? w : need;
}

/* Guaranteed no-evict admission (engine cpu.no_evict; TensorRT-LLM's default capacity policy,
 * GUARANTEED_NO_EVICT): a request is admitted only if the free blocks cover, besides its own
 * blocks to completion (prompt + output), the blocks every running request still needs to reach
 * its own full length, so no admitted request is ever preempted. The blocks the running
 * requests still need, summed once per admission attempt (docs/cost-model.md, "Engine
 * profiles", "Admission"). */
static long blocks_to_completion(const sim_sched *e, const sim_kv *kv, const sim_replica *rep)
{
    long sum = 0, cap = sim_kv_window_blocks(kv);
    for (const sim_req *q = rep->running.head; q; q = q->next)
        sum += windowed_need(e, kv, q, sim_kv_needed(kv, &q->kv, q->spec.prompt + q->spec.output), cap);
    return sum;
}

/* A running request that still has prompt (or, after a recompute preemption, earlier output)
 * to compute before its next token: not yet any token out, or more than one position left. */
static bool prefilling(const sim_req *r)
{
    return r->generated == 0 || r->total - r->computed > 1;
}

/* ---- SGLang's admission reservation (engine adm_reserve; docs/cost-model.md, "Engine
 * profiles", "Admission") ----
 * PrefillAdder admits a request only while its extend tokens, its own output (clipped) and a page
 * fit in rem_total_tokens: the free and evictable KV less new_token_ratio x every decoding
 * request's remaining output (clipped) and less what this round already admitted (extends, which
 * the simulator has allocated already, and whole prompts' clipped outputs). max_new_tokens is the
 * request's own output length: benchmark clients send the dataset's output length as max_tokens. */

/* min(max_new_tokens - generated, CLIP_MAX_NEW_TOKENS), never below 0. */
static long clipped_left(const sim_sched *e, const sim_req *r)
{
    long left = (long)r->spec.output - r->generated, clip = e->s->engine.adm_clip;
    return left < 0 ? 0 : left < clip ? left : clip;
}

double sim_sched_ratio(const sim_sched *e, const sim_replica *rep)
{
    return rep->ntr_live ? rep->ntr : e->s->engine.adm_init;
}

void sim_sched_decay(const sim_sched *e, sim_replica *rep)
{
    const scn_engine *g = &e->s->engine;
    double x = sim_sched_ratio(e, rep) - (g->adm_init - g->adm_min) / g->adm_decay_steps;
    rep->ntr = x > g->adm_min ? x : g->adm_min;
    rep->ntr_live = true;
}

/* The decoding requests' clipped remaining output, summed once a step: the running batch of
 * SGLang's PrefillAdder holds only requests past their prefill (a prompt still being chunked
 * is its chunked_req, which it does not count). */
static long running_left(sim_sched *e, const sim_replica *rep)
{
    if (!e->run_known) {
        long sum = 0;
        for (const sim_req *q = rep->running.head; q; q = q->next)
            if (!prefilling(q)) sum += clipped_left(e, q);
        e->run_left = sum;
        e->run_known = true;
    }
    return e->run_left;
}

/* Whether the reservation refuses r now: its whole `extend` (not the chunk it would run), its
 * clipped output and a page. With nothing running it never refuses: the engine would wait for
 * ever for a request larger than its whole pool (the fill rule's checks still apply). */
static bool reservation_refuses(sim_sched *e, const sim_replica *rep, const sim_req *r, long extend, long from_free)
{
    if (!rep->running.n) return false;
    long bs = sim_kv_block_size(rep->kv);
    double rem = (double)((sim_kv_available(rep->kv) - from_free) * bs) -
                 (double)running_left(e, rep) * sim_sched_ratio(e, rep) - e->round_res;
    return (double)(extend + clipped_left(e, r) + bs) >= rem;
}

/* After a step is formed: idle resets the ratio (self_check_during_idle); a decode step lowers
 * it, or, when it preempted (SGLang retracts before a decode batch runs), sets it from the
 * survivors' progress: min(1, (Σ generated + retract_steps x n) / (Σ max_new_tokens + 1)). A
 * step with a prefill row (an extend batch) leaves it. `decode`: the step is known to have none
 * (separate steps: the running sequences' decode step). */
static void ratio_after_step(sim_sched *e, sim_replica *rep, long preempted_before, bool decode)
{
    if (rep->batch.n == 0) { rep->ntr_live = false; return; }
    for (int i = 0; !decode && i < rep->batch.n; i++)   /* a mixed step: decode if no row prefills */
        if (prefilling(rep->breq[i])) return;
    if (e->acc->preemptions == preempted_before) { sim_sched_decay(e, rep); return; }
    double gen = 0, out = 0;
    for (int i = 0; i < rep->batch.n; i++) {
        gen += rep->breq[i]->generated;
        out += rep->breq[i]->spec.output;
    }
    double x = (gen + (double)e->s->engine.adm_retract_steps * rep->batch.n) / (out + 1);
    rep->ntr = x < 1 ? x : 1;
    rep->ntr_live = true;
}

/* Tries to admit the head of the waiting list with at most `budget` new tokens. Returns the
 * tokens scheduled, 0 if it does not fit now, -1 if it can never fit. `first`: no prompt is in
 * the step yet, so a whole prompt longer than the budget may run (an engine that does not chunk
 * cannot be given a token limit below its longest prompt). */
static long admit(sim_sched *e, sim_replica *rep, sim_req *r, long budget, bool chunked, bool first)
{
    if (r->swapped) return resume_swapped(e, rep, r, budget, chunked, first);
    sim_kv *kv = rep->kv;
    bool paged = e->c.layout == SCN_LAYOUT_PAGED;
    long from_free = 0;
    bool pc = e->c.prefix_cache && paged;   /* else nothing can hit: no walk */
    int hit = pc ? sim_kv_match_prefix(kv, &r->kv, r->total, false, &from_free) : 0;
    long want = r->total - hit;
    if (want > budget) {
        if (chunked) want = budget;
        else if (!over_whole_budget(e, want, first)) return 0;
    }
    if (want <= 0) return 0;
    long upto = hit + want;
    if (paged) {
        long bs = sim_kv_block_size(kv);
        long need = (upto + bs - 1) / bs - hit / bs;
        long whole = ((long)r->total + bs) / bs;
        if (whole > sim_kv_total(kv) - rep->watermark)
            return fail(e, "request %ld needs %ld blocks, more than the %ld the KV cache holds", r->spec.id, whole,
                        sim_kv_total(kv) - rep->watermark);
        if (need + from_free + rep->watermark > sim_kv_available(kv)) { sim_kv_note_blocked(kv); return 0; }
        if (e->s->engine.no_evict) {
            long fin = ((long)r->spec.prompt + r->spec.output + bs - 1) / bs - hit / bs;
            /* Under a window: this step's blocks (need), then at most the window's cap, with a
             * later chunk's blocks on top while the prompt is still being prefilled. */
            long cap = sim_kv_window_blocks(kv);
            if (cap >= 0) {
                if (upto < r->spec.prompt) cap += (e->s->deployment.max_num_batched_tokens + bs - 1) / bs + 1;
                long w = need > cap ? need : cap;
                if (w < fin) fin = w;
            }
            /* A request that could never be admitted would wait for ever (the engine would hang
             * it too): refused, as a prompt larger than the cache is. */
            if (fin + from_free > sim_kv_total(kv) - rep->watermark)
                return fail(e, "request %ld needs %ld blocks to completion (no-evict admission), more than the %ld the "
                               "KV cache holds", r->spec.id, fin + from_free, sim_kv_total(kv) - rep->watermark);
            if (blocks_to_completion(e, kv, rep) + fin + from_free + rep->watermark > sim_kv_available(kv)) return 0;
        }
        /* SGLang's PrefillAdder.add_one_req gates a new request on its whole extend (the prompt,
         * and after a retraction its output so far, less prefix hits: before truncation to the
         * chunk) + its clipped output + a page, even when only a chunk of it runs now; the chunk
         * then takes its blocks and reserves no output until its last chunk (add_chunked_req). */
        if (e->s->engine.adm_reserve && reservation_refuses(e, rep, r, (long)r->total - hit, from_free)) return 0;
        /* The table for the whole request now, so that decoding never reallocates it (admitted
         * requests are bounded by the pool; waiting ones hold no table). */
        sim_kv_table_room(&r->kv, ((long)r->total + r->spec.output + bs - 1) / bs + 1);
        if (pc) sim_kv_match_prefix(kv, &r->kv, r->total, true, NULL);
        /* Reloaded blocks are in (and their transfer charged) whether or not the rest fits; they
         * count as the request's hits only when it is admitted. */
        if (sim_kv_grow(kv, &r->kv, (int)upto)) { charge_reloads(e, rep, false); sim_kv_release(kv, &r->kv); return 0; }
        charge_reloads(e, rep, !r->admitted_once);
    } else {
        long res = contiguous_reservation(e, r);
        if (res > sim_kv_total(kv))
            return fail(e, "request %ld needs %ld tokens reserved, more than the %ld the KV cache holds",
                        r->spec.id, res, sim_kv_total(kv));
        if (sim_kv_reserve(kv, &r->kv, res)) return 0;
    }
    if (!r->admitted_once) {
        r->admitted_once = true;
        r->cached = hit;
        r->t_sched = e->now;
        e->acc->prompt_tokens += r->spec.prompt;
        e->acc->hit_tokens += hit;
    }
    if (e->s->engine.adm_reserve && upto >= r->total) e->round_res += (double)clipped_left(e, r);
    r->computed = hit;
    r->state = REQ_RUNNING;
    sim_list_remove(&rep->waiting, r);
    sim_list_push_back(&rep->running, r);
    if (add_seq(e, rep, r, (int)want, hit, sim_kv_held(kv, &r->kv, hit))) return -1;
    return want;
}

static int step_static(sim_sched *e, sim_replica *rep)
{
    if (rep->sb_n == 0) {
        /* Form a batch: FIFO, while every member's padded reservation still fits. */
        int P = 0, O = 0, n = 0;
        long avail = sim_kv_available(rep->kv) - rep->watermark;
        long bs = e->c.layout == SCN_LAYOUT_PAGED ? sim_kv_block_size(rep->kv) : 1;
        for (sim_req *r = rep->waiting.head; r && n < e->s->deployment.max_num_seqs; r = r->next) {
            int p = r->total > P ? r->total : P, o = r->spec.output - r->generated > O ? r->spec.output - r->generated : O;
            long per = ((long)p + o + bs - 1) / bs;
            if (per * (n + 1) > avail) {
                if (n == 0) return fail(e, "request %ld needs %ld blocks, more than the %ld the KV cache holds",
                                        r->spec.id, per, avail);
                break;
            }
            P = p; O = o; n++;
        }
        if (n == 0) return 0;
        if (n > rep->sb_cap) {
            sim_req **nb = realloc(rep->sb, sizeof *nb * (size_t)n);
            if (nb) rep->sb = nb;
            sim_req **ng = gone_room(rep, n);
            if (!nb || !ng) { snprintf(e->err, e->nerr, "out of memory"); e->internal = 1; return -1; }
            rep->sb_cap = n;
        }
        rep->sb_n = n;
        rep->sb_prompt = P;
        rep->sb_output = O;
        rep->sb_done = 0;
        for (int i = 0; i < n; i++) {
            sim_req *r = rep->waiting.head;
            sim_list_remove(&rep->waiting, r);
            sim_list_push_back(&rep->running, r);
            r->state = REQ_RUNNING;
            if (sim_kv_grow(rep->kv, &r->kv, P + O)) return fail(e, "static batch of %ld did not fit (%ld + %ld)", n, P, O);
            if (!r->admitted_once) {
                r->admitted_once = true;
                r->t_sched = e->now;
                e->acc->prompt_tokens += r->spec.prompt;
            }
            rep->sb[i] = r;
        }
    }
    /* Step 0 prefills the padded prompt; step k > 0 decodes one padded token. */
    for (int i = 0; i < rep->sb_n; i++) {
        int start = rep->sb_done == 0 ? 0 : rep->sb_prompt + rep->sb_done - 1;
        if (add_seq(e, rep, rep->sb[i], rep->sb_done == 0 ? rep->sb_prompt : 1, start, start)) return -1;
    }
    return rep->batch.n;
}

int sim_sched_prefill(sim_sched *e, sim_replica *rep)
{
    rep->batch.n = 0;
    rep->batch.tokens = 0;
    e->round_res = 0;
    e->run_known = false;
    e->xfer_s = 0;   /* each step waits only for its own transfers */
    memset(e->reload_s, 0, sizeof e->reload_s);
    long budget = e->s->deployment.max_num_batched_tokens;
    while (rep->waiting.head && rep->running.n < e->s->deployment.max_num_seqs && budget > 0) {
        long got = admit(e, rep, rep->waiting.head, budget, false, rep->batch.n == 0);
        if (got < 0) return -1;
        if (got == 0) break;
        budget -= got;
    }
    return rep->batch.n;
}

/* Tails may be retired while a step forms or finishes: rep->gone must hold every running one. */
static int tails_room(sim_sched *e, sim_replica *rep)
{
    if (!e->tails || gone_room(rep, rep->n_gone + rep->running.n + 1)) return 0;
    snprintf(e->err, e->nerr, "out of memory");
    e->internal = 1;
    return -1;
}

bool sim_sched_mixes(const sim_sched *e)
{
    switch (e->s->engine.prefill_mix) {
    case SCN_PREFILL_MIX_ALWAYS: return true;
    case SCN_PREFILL_MIX_NEVER: return false;
    default: return e->c.scheduler == SCN_SCHED_CHUNKED;
    }
}

/* The separate chunked scheduler's prefill step (SGLang's extend batch): the next chunk of every
 * running request still prefilling, oldest first, then waiting requests split at what is left
 * of the token budget; no decode row. Returns the rows scheduled (0: a decode step instead).
 * A chunk takes only free blocks: a prefill that cannot grow waits, and nothing new is admitted
 * past it, so the decode steps that follow finish requests and free their blocks (taking them by
 * preemption would restart the newest prefill each step while no decode ever ran). Only when
 * nothing decodes does the oldest waiting prefill preempt the newest sequences to go on. */
static int prefill_chunks(sim_sched *e, sim_replica *rep, long budget)
{
    sim_req *stuck = NULL;
    bool decoding = false;
    for (sim_req *r = rep->running.head; r && budget > 0; r = r->next) {
        if (!prefilling(r)) { decoding = true; continue; }
        long want = r->total - r->computed;
        if (want > budget) want = budget;
        if (sim_kv_grow(rep->kv, &r->kv, r->computed + (int)want)) {
            if (!stuck) stuck = r;
            continue;
        }
        if (add_seq(e, rep, r, (int)want, r->computed, sim_kv_held(rep->kv, &r->kv, r->computed))) return -1;
        /* Its last chunk reserves its output for the rest of the round (add_chunked_req). */
        if (e->s->engine.adm_reserve && r->computed + want >= r->total) e->round_res += (double)clipped_left(e, r);
        budget -= want;
    }
    while (!stuck && rep->waiting.head && rep->running.n < e->s->deployment.max_num_seqs && budget > 0) {
        long got = admit(e, rep, rep->waiting.head, budget, true, false);
        if (got < 0) return -1;
        if (got == 0) break;
        budget -= got;
    }
    if (rep->batch.n || !stuck || decoding) return rep->batch.n;
    long want = stuck->total - stuck->computed;
    if (want > budget) want = budget;
    int rc = grow_or_preempt(e, rep, stuck, stuck->computed + (int)want);
    if (rc < 0) return -1;
    if (rc == 0 && add_seq(e, rep, stuck, (int)want, stuck->computed, sim_kv_held(rep->kv, &stuck->kv, stuck->computed)))
        return -1;
    return rep->batch.n;
}

/* Mixed steps: waiting requests fill what the running rows left of the budget, split at it when
 * chunked, whole otherwise (a prompt that does not fit waits, unless the step is empty). Notes
 * in e->tried the head whose attempt failed as the step's first (sched.h). */
static int fill_waiting(sim_sched *e, sim_replica *rep, long budget, bool chunked)
{
    for (bool first = true; rep->waiting.head && rep->running.n < e->s->deployment.max_num_seqs && budget > 0;
         first = false) {
        long got = admit(e, rep, rep->waiting.head, budget, chunked, first);
        if (got < 0) return -1;
        if (got == 0) {
            if (first) {
                e->tried = rep->waiting.head;
                e->tried_budget = budget;
            }
            break;
        }
        budget -= got;
    }
    return 0;
}

/* An empty step: no rows, no KV transfers to wait for, no failed admission noted. */
static void step_reset(sim_sched *e, sim_replica *rep)
{
    rep->batch.n = 0;
    rep->batch.tokens = 0;
    e->xfer_s = 0;
    memset(e->reload_s, 0, sizeof e->reload_s);
    e->tried = NULL;
    e->round_res = 0;
    e->run_known = false;
}

/* Running sequences from `from` on, oldest first, into the step while the budget lasts: the next
 * token, or (chunked) the next prefill chunk, plus a decoding sequence's drafts under speculative
 * decoding (sp; sim/spec.c). `separate`: prefilling sequences are left to prefill steps. *budget
 * is what is left after. Returns 0, or -1 on failure. */
static int take_running(sim_sched *e, sim_replica *rep, sim_req *from, long *left, bool chunked, bool separate,
                        const scn_spec *sp)
{
    long budget = *left;
    for (sim_req *r = from; r && budget > 0;) {
        if (separate && prefilling(r)) { r = r->next; continue; }   /* its chunks go in prefill steps */
        long want = r->total - r->computed;
        if (!chunked) want = 1;
        if (want > budget) want = budget;
        int drafts = sp && !r->tail && r->total - r->computed == 1 ? sim_spec_drafts(sp, r, budget) : 0;
        want += drafts;
        int rc = grow_or_preempt(e, rep, r, r->computed + (int)want);
        if (rc < 0) return -1;
        if (rc == 1) break;          /* r was the newest: nothing after it */
        if (add_seq(e, rep, r, (int)want, r->computed, sim_kv_held(rep->kv, &r->kv, r->computed))) return -1;
        if (drafts) { rep->batch.seqs[rep->batch.n - 1].draft = drafts; r->step_draft = drafts; }
        budget -= want;
        r = r->next;
    }
    *left = budget;
    return 0;
}

static int sched_step(sim_sched *e, sim_replica *rep, bool *decode);

int sim_sched_step(sim_sched *e, sim_replica *rep)
{
    long preempted = e->acc->preemptions;
    bool decode = false;
    int n = sched_step(e, rep, &decode);
    if (n >= 0 && e->s->engine.adm_reserve && e->c.scheduler != SCN_SCHED_STATIC)
        ratio_after_step(e, rep, preempted, decode);
    return n;
}

/* sim_sched_step's step; *decode: it is a separate decode step (no prefill row). */
static int sched_step(sim_sched *e, sim_replica *rep, bool *decode)
{
    step_reset(e, rep);
    if (tails_room(e, rep)) return -1;
    if (e->c.scheduler == SCN_SCHED_STATIC) return step_static(e, rep);
    const scn_deployment *d = &e->s->deployment;
    bool chunked = e->c.scheduler == SCN_SCHED_CHUNKED;
    /* Mixed: prefill rows join the decode rows' step (vLLM V1, TensorRT-LLM's in-flight
     * batching); separate: a step prefills or decodes (vLLM V0, SGLang). docs/simulator.md,
     * "Mixed and separate prefill steps". */
    bool mixed = sim_sched_mixes(e);
    long budget = d->max_num_batched_tokens;
    /* Multi-step: inside a decode run the step is formed without a decision (no admission); a
     * run ends early only when its sequences are all gone. */
    if (!rep->running.n) rep->ms_left = 0;
    bool in_run = d->scheduler_steps > 1 && rep->ms_left > 0;
    if (!chunked && !mixed && rep->waiting.n && !in_run) {
        /* A prefill step when any waiting request is admitted; the budget is untouched if none. */
        int n = sim_sched_prefill(e, rep);
        if (n) return n;
    }
    if (chunked && !mixed) {
        int n = prefill_chunks(e, rep, budget);
        if (n) return n;
    }
    /* Running sequences, oldest first: the next token, or (chunked, mixed) the next prefill chunk. */
    if (take_running(e, rep, rep->running.head, &budget, chunked, chunked && !mixed, sim_spec_of(e->s, &e->c))) return -1;
    *decode = !mixed;
    if (d->scheduler_steps > 1 && rep->batch.n) rep->ms_left = in_run ? rep->ms_left - 1 : d->scheduler_steps - 1;
    if (mixed && !in_run && fill_waiting(e, rep, budget, chunked)) return -1;
    return rep->batch.n;
}

long sim_sched_chunks(sim_sched *e, sim_replica *rep, sim_req *from, long budget)
{
    step_reset(e, rep);
    /* sim_sched_step's loop over the running sequences, from `from` on (a mixed run: no
     * speculative decoding, no separate prefill steps). */
    if (take_running(e, rep, from, &budget, e->c.scheduler == SCN_SCHED_CHUNKED, false, NULL)) return -1;
    return budget;
}

int sim_sched_fill(sim_sched *e, sim_replica *rep, long budget)
{
    return fill_waiting(e, rep, budget, e->c.scheduler == SCN_SCHED_CHUNKED);
}

/* A token comes out of r at the end of this step. */
/* ITL values are recorded in runs of equal values (every sequence that also produced a token
 * in the previous step has the same gap): sim_hist_add_n records a run exactly as one call per
 * value would. */
static void itl_flush(sim_sched *e)
{
    if (e->itl_n) sim_hist_add_n(&e->acc->h[SIM_Q_ITL], e->itl_v, e->itl_n);
    e->itl_n = 0;
}

static void emit(sim_sched *e, sim_req *r)
{
    r->generated++;
    if (r->generated == 1) {
            r->t_first = e->now;
    } else if (r->spec.measured) {   /* gaps of requests outside the measurement window are not recorded */
        double v = e->now - r->t_last;
        if (e->itl_n && v != e->itl_v) itl_flush(e);
        e->itl_v = v;
        e->itl_n++;
    }
    r->t_last = e->now;
}

static int finish_static(sim_sched *e, sim_replica *rep)
{
    rep->sb_done++;
    for (int i = 0; i < rep->sb_n; i++) {
        sim_req *r = rep->sb[i];
        if (r->generated < r->spec.output) {
            emit(e, r);
            r->total++;
            if (r->generated == r->spec.output) rep->fin[rep->n_fin++] = r;   /* recorded now, freed with the batch */
        }
    }
    itl_flush(e);
    if (rep->sb_done < rep->sb_output) return 0;
    /* The batch is over: every member releases its KV. */
    for (int i = 0; i < rep->sb_n; i++) {
        sim_req *r = rep->sb[i];
        sim_kv_release(rep->kv, &r->kv);
        sim_list_remove(&rep->running, r);
        rep->gone[rep->n_gone++] = r;
    }
    rep->sb_n = 0;
    return 0;
}

int sim_sched_finish(sim_sched *e, sim_replica *rep)
{
    /* rep->gone keeps what step formation retired (preempted tails) until the caller frees it */
    rep->n_fin = 0;
    if (e->c.scheduler == SCN_SCHED_STATIC) return finish_static(e, rep);
    if (tails_room(e, rep)) return -1;
    int ms = e->s->deployment.scheduler_steps > 1 ? rep->ms_left : 0;
    const scn_spec *sp = sim_spec_of(e->s, &e->c);
    for (int i = 0; i < rep->batch.n; i++) {
        sim_req *r = rep->breq[i];
        if (r->tail > 0) {   /* a discarded token: nothing comes out, nothing is cached */
            r->computed += r->step_new;
            r->total = r->computed + 1;
            if (--r->tail == 0) retire(rep, r);
            continue;
        }
        /* Speculative verify (sim/spec.c): the last token and the accepted drafts keep their
         * KV, the rejected drafts' KV is released, and accepted + 1 tokens come out. */
        int out = 1;
        if (r->step_draft) {
            out = 1 + sim_spec_accepted(sp, e->seed, r, r->step_draft);
            r->computed += out;
            sim_kv_commit(rep->kv, &r->kv, r->computed);
            sim_kv_truncate(rep->kv, &r->kv, r->computed);
        } else {
            r->computed += r->step_new;
            sim_kv_commit(rep->kv, &r->kv, r->computed);
        }
        if (r->computed < r->total) continue;   /* a prefill chunk with more to come */
        for (int t = 1; t < out; t++) { emit(e, r); r->total++; }
        emit(e, r);
        r->total++;
        if (r->generated == r->spec.output) {
            rep->fin[rep->n_fin++] = r;
            int tail = e->tails && !rep->hold_done ? (ms > (e->s->engine.extra_decode_step ? 1 : 0) ? ms : (e->s->engine.extra_decode_step ? 1 : 0)) : 0;
            if (tail > 0) { r->tail = tail; continue; }   /* recorded now; leaves after its tail */
            sim_list_remove(&rep->running, r);
            if (!rep->hold_done) sim_kv_release(rep->kv, &r->kv);
            r->state = REQ_DONE;
        }
    }
    itl_flush(e);
    return 0;
}

void sim_sched_replica_free(sim_replica *rep)
{
    free(rep->batch.seqs);
    free(rep->breq);
    free(rep->fin);
    free(rep->sb);
    free(rep->gone);
    free(rep->held);
}
