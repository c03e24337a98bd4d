/* kv_tier.c: LRU sets of block hashes with fixed capacities, chained into a spill hierarchy
 * (see kv_tier.h). Each tier's arrays grow on demand up to its capacity, so a large host tier
 * that holds a few blocks costs a few kilobytes. */
#include "kv_tier.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    long cap;                /* blocks */
    long n;                  /* blocks held */
    long slots;              /* entries in the per-slot arrays (<= cap) */
    long fresh;              /* slots handed out at least once */
    uint64_t *hash;          /* per slot */
    int32_t *prev, *next;    /* LRU order, oldest at head */
    int32_t head, tail;
    int32_t *free_slots;     /* slots given back */
    long n_free;
    uint64_t *keys;          /* open addressing: hash -> slot, at most half full */
    int32_t *vals;           /* -1 = empty */
    long mask;
    sim_kv_tier_stats st;
    long pending;            /* reloads since the last drain */
} tier;

struct sim_kv_tiers {
    tier t[KV_TIER_COUNT];
    long swap_cap, swap_used;   /* blocks */
};

static int map_alloc(tier *x, long cap)
{
    uint64_t *k = malloc(sizeof *k * (size_t)cap);
    int32_t *v = malloc(sizeof *v * (size_t)cap);
    if (!k || !v) { free(k); free(v); return -1; }
    for (long i = 0; i < cap; i++) v[i] = -1;
    x->keys = k;
    x->vals = v;
    x->mask = cap - 1;
    return 0;
}

static long map_find(const tier *x, uint64_t h)
{
    for (long i = (long)(h & (uint64_t)x->mask);; i = (i + 1) & x->mask) {
        if (x->vals[i] < 0) return -1;
        if (x->keys[i] == h) return i;
    }
}

static void map_place(tier *x, uint64_t h, int32_t s)
{
    long i = (long)(h & (uint64_t)x->mask);
    while (x->vals[i] >= 0) i = (i + 1) & x->mask;
    x->keys[i] = h;
    x->vals[i] = s;
}

/* Deletes slot i of the map, moving later members of its probe run back into the hole. */
static void map_erase(tier *x, long i)
{
    x->vals[i] = -1;
    for (long j = (i + 1) & x->mask; x->vals[j] >= 0; j = (j + 1) & x->mask) {
        long home = (long)(x->keys[j] & (uint64_t)x->mask);
        bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (stays) continue;
        x->keys[i] = x->keys[j];
        x->vals[i] = x->vals[j];
        x->vals[j] = -1;
        i = j;
    }
}

/* Room in the map for one more entry: doubles it past half full. */
static int map_room(tier *x)
{
    if (2 * (x->n + 1) <= x->mask + 1) return 0;
    uint64_t *ok = x->keys;
    int32_t *ov = x->vals;
    long ocap = x->mask + 1;
    if (map_alloc(x, 2 * ocap)) { x->keys = ok; x->vals = ov; return -1; }
    for (long i = 0; i < ocap; i++)
        if (ov[i] >= 0) map_place(x, ok[i], ov[i]);
    free(ok);
    free(ov);
    return 0;
}

/* A free slot, growing the arrays up to the capacity; -1 on out of memory. */
static int32_t slot_get(tier *x)
{
    if (x->n_free) return x->free_slots[--x->n_free];
    if (x->fresh == x->slots) {
        long n = x->slots ? x->slots * 2 : 64;
        if (n > x->cap) n = x->cap;
        uint64_t *h = realloc(x->hash, sizeof *h * (size_t)n);
        if (h) x->hash = h;
        int32_t *p = realloc(x->prev, sizeof *p * (size_t)n);
        if (p) x->prev = p;
        int32_t *q = realloc(x->next, sizeof *q * (size_t)n);
        if (q) x->next = q;
        int32_t *f = realloc(x->free_slots, sizeof *f * (size_t)n);
        if (f) x->free_slots = f;
        if (!h || !p || !q || !f) return -1;
        x->slots = n;
    }
    return (int32_t)x->fresh++;
}

static void lru_cut(tier *x, int32_t s)
{
    int32_t p = x->prev[s], q = x->next[s];
    if (p >= 0) x->next[p] = q; else x->head = q;
    if (q >= 0) x->prev[q] = p; else x->tail = p;
}

static void lru_append(tier *x, int32_t s)
{
    x->prev[s] = x->tail;
    x->next[s] = -1;
    if (x->tail >= 0) x->next[x->tail] = s; else x->head = s;
    x->tail = s;
}

/* Removes slot s (found at map index i) from the tier. */
static void drop_slot(tier *x, int32_t s, long i)
{
    lru_cut(x, s);
    map_erase(x, i);
    x->free_slots[x->n_free++] = s;
    x->n--;
}

sim_kv_tiers *sim_kv_tiers_init(long cpu_blocks, long disk_blocks, long remote_blocks, long swap_blocks)
{
    sim_kv_tiers *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    long caps[KV_TIER_COUNT] = {cpu_blocks, disk_blocks, remote_blocks};
    for (int k = 0; k < KV_TIER_COUNT; k++) {
        tier *x = &t->t[k];
        x->cap = caps[k] > 0 ? (caps[k] < INT32_MAX ? caps[k] : INT32_MAX - 1) : 0;
        x->st.capacity = x->cap;
        x->head = x->tail = -1;
        if (x->cap && map_alloc(x, 64)) { sim_kv_tiers_free(t); return NULL; }
    }
    t->swap_cap = swap_blocks > 0 ? swap_blocks : 0;
    return t;
}

void sim_kv_tiers_free(sim_kv_tiers *t)
{
    if (!t) return;
    for (int k = 0; k < KV_TIER_COUNT; k++) {
        tier *x = &t->t[k];
        free(x->hash); free(x->prev); free(x->next); free(x->free_slots); free(x->keys); free(x->vals);
    }
    free(t);
}

bool sim_kv_tiers_offload(const sim_kv_tiers *t) { return t && t->t[KV_TIER_CPU].cap > 0; }

/* Puts h into tier k as its most recent block; a full tier first passes its oldest block on to
 * the next tier below k that has a capacity (or drops it when there is none: cpu+remote skips
 * the disk). Out of memory: the block is dropped, as a full last tier would drop it. */
static void put(sim_kv_tiers *t, int k, uint64_t h)
{
    while (k < KV_TIER_COUNT && t->t[k].cap == 0) k++;
    if (k >= KV_TIER_COUNT) return;
    tier *x = &t->t[k];
    if (x->n == x->cap) {
        int32_t old = x->head;
        uint64_t oh = x->hash[old];
        drop_slot(x, old, map_find(x, oh));
        x->st.dropped++;
        put(t, k + 1, oh);
    }
    if (map_room(x)) return;
    int32_t s = slot_get(x);
    if (s < 0) return;
    x->hash[s] = h;
    lru_append(x, s);
    map_place(x, h, s);
    x->n++;
    x->st.spilled++;
}

void sim_kv_tiers_spill(sim_kv_tiers *t, uint64_t h)
{
    /* A block can only be in one place: a stale copy below (it was reloaded, evicted again) goes. */
    int k = sim_kv_tiers_find(t, h);
    if (k >= 0) {
        tier *x = &t->t[k];
        long i = map_find(x, h);
        drop_slot(x, x->vals[i], i);
    }
    put(t, KV_TIER_CPU, h);
}

int sim_kv_tiers_find(const sim_kv_tiers *t, uint64_t h)
{
    for (int k = 0; k < KV_TIER_COUNT; k++)
        if (t->t[k].n && map_find(&t->t[k], h) >= 0) return k;
    return -1;
}

void sim_kv_tiers_take(sim_kv_tiers *t, int k, uint64_t h)
{
    tier *x = &t->t[k];
    long i = map_find(x, h);
    if (i < 0) return;
    drop_slot(x, x->vals[i], i);
    x->st.reloaded++;
    x->pending++;
}

void sim_kv_tiers_drain(sim_kv_tiers *t, long out[KV_TIER_COUNT])
{
    if (!t) {   /* no tiers (every admission asks) */
        for (int k = 0; k < KV_TIER_COUNT; k++) out[k] = 0;
        return;
    }
    for (int k = 0; k < KV_TIER_COUNT; k++) {
        out[k] = t->t[k].pending;
        t->t[k].pending = 0;
    }
}

int sim_kv_tiers_swap_out(sim_kv_tiers *t, long n)
{
    if (!t || t->swap_used + n > t->swap_cap) return -1;
    t->swap_used += n;
    return 0;
}

void sim_kv_tiers_swap_in(sim_kv_tiers *t, long n)
{
    if (t) t->swap_used -= n;
}

long sim_kv_tiers_swap_used(const sim_kv_tiers *t) { return t ? t->swap_used : 0; }

void sim_kv_tiers_account(sim_kv_tiers *t, double dt)
{
    if (!t || dt <= 0) return;
    for (int k = 0; k < KV_TIER_COUNT; k++) t->t[k].st.occupancy += dt * (double)t->t[k].n;
}

sim_kv_tier_stats sim_kv_tiers_stats(const sim_kv_tiers *t, kv_tier_id k)
{
    sim_kv_tier_stats s = {0};
    if (!t) return s;
    s = t->t[k].st;
    s.used = t->t[k].n;
    return s;
}

static double block_bytes_of(const scn_scenario *s, const sim_choice *c)
{
    kv_cache_cfg cfg = kv_cache_cfg_make(s, c->kv_dtype, c->sink, c->window);
    return kv_offload_bytes_per_rank(s, &cfg, c->block_size);
}

static bool wants_tiers(const sim_choice *c)
{
    return c->kv_offload != SCN_OFFLOAD_OFF || c->preemption == SCN_PREEMPT_SWAP;
}

int sim_kv_tiers_attach(sim_kv *kv, const scn_scenario *s, const sim_choice *c)
{
    if (!wants_tiers(c)) return 0;
    double bb = block_bytes_of(s, c);
    double cpu = c->kv_offload != SCN_OFFLOAD_OFF ? kv_tier_capacity(s, KV_TIER_CPU) / bb : 0;
    double disk = scn_offload_disk(c->kv_offload) ? kv_tier_capacity(s, KV_TIER_DISK) / bb : 0;
    double remote = scn_offload_remote(c->kv_offload) ? kv_tier_capacity(s, KV_TIER_REMOTE) / bb : 0;
    double swap = c->preemption == SCN_PREEMPT_SWAP ? s->options.swap_space / bb : 0;
    sim_kv_tiers *t = sim_kv_tiers_init((long)fmin(cpu, 1e15), (long)fmin(disk, 1e15), (long)fmin(remote, 1e15),
                                        (long)fmin(swap, 1e15));
    if (!t) return -1;
    sim_kv_set_tiers(kv, t);
    return 0;
}

void sim_kv_tiers_add(sim_kv_tier_sum *sum, sim_kv *const *kvs, int n, const scn_scenario *s, const sim_choice *c)
{
    if (!wants_tiers(c)) return;
    double bb = block_bytes_of(s, c) * s->deployment.tensor_parallel;
    for (int i = 0; i < n; i++) {
        const sim_kv_tiers *t = sim_kv_tiers_of(kvs[i]);
        if (!t) continue;
        for (int k = 0; k < KV_TIER_COUNT; k++) {
            const sim_kv_tier_stats *st = &t->t[k].st;
            sum->bytes[k] += (double)(st->spilled + st->reloaded) * bb;
            sum->occ[k] += st->occupancy;
            sum->cap[k] += (double)st->capacity;
        }
    }
}

void sim_kv_tiers_metrics(const sim_acc *a, const sim_kv_tier_sum *sum, double block_bytes, int gpus, sim_metrics *m)
{
    for (int k = 0; k < KV_TIER_COUNT; k++) {
        m->tier_hit_rate[k] = a->prompt_tokens ? (double)a->tier_hit_tokens[k] / (double)a->prompt_tokens : 0;
        m->tier_bytes[k] = sum->bytes[k];
        m->tier_xfer_s[k] = a->tier_xfer_s[k];
        m->tier_occupancy[k] = m->duration > 0 && sum->cap[k] > 0 ? sum->occ[k] / (m->duration * sum->cap[k]) : 0;
    }
    m->swaps = a->swaps;
    m->swap_bytes = a->swap_blocks * block_bytes * gpus;
    m->swap_xfer_s = a->swap_xfer_s;
}
