/* kv_manager.c: paged and contiguous KV allocation with a prefix cache (see kv_manager.h). */
#include "kv_manager.h"
#include "kv_tier.h"
#include "kv_twin.h"
#include "rng.h"
#include "sim.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define CHAIN_ROOT 0x6b76706c616e0001ULL   /* the parent hash of a sequence's first block */
#define PM_SLOTS 1024                       /* prefix streams whose block hashes are memoised (a power of 2) */
#define PM_PROBE 8                          /* slots a seed may take, from its home slot on */

struct sim_kv {
    long n;                 /* blocks */
    int bs;
    bool paged, prefix;
    int sink, window;
    /* Bookkeeping is allocated lazily: only blocks [0, fresh) have ever been handed out, and
     * the per-block arrays cover [0, arr) with arr >= fresh, doubling as needed. A pool of a
     * million blocks that serves five short requests costs a few kilobytes. */
    long fresh;             /* blocks handed out at least once; [fresh, n) are free and untouched */
    long arr;               /* entries in the per-block arrays */
    /* Per-block prefix-cache state (with the prefix cache only; without it nothing is shared: a
     * held block has exactly one holder): one record per block, so that a block's commit, hit,
     * release or eviction touches one cache line, not one in each of five arrays. */
    struct kv_block {
        uint64_t hash;      /* registered hash (valid when reg) */
        int32_t refs;       /* reference count */
        int32_t prev, next; /* LRU links of an unreferenced cached block, oldest at head */
        uint8_t reg;        /* registered in the cache map */
        uint8_t watched;    /* one of the watched request's prefix hits (sim_kv_watch) */
    } *blk;
    int32_t *free_stack;    /* blocks returned and never cached, last returned on top; it grows
                             * down from the end, [arr - n_free, arr), top first, so that a
                             * released table and a popped run are each one forward copy */
    long n_free;
    int32_t lru_head, lru_tail;     /* unreferenced cached blocks (kv_block prev, next) */
    long n_lru;
    long n_referenced, n_cached;
    /* open-addressing map: hash -> block, at most half full; a slot's hash and block side by
     * side, so a probe touches one cache line (the map outgrows the caches at small blocks) */
    struct kv_slot { uint64_t key; int32_t val; } *map;   /* val -1 = empty */
    long mask;
    long reserved;          /* contiguous: tokens reserved */
    /* Sliding-window layers (sim_kv_set_groups). */
    int gfull, gwin, mwin;  /* layers that keep every position, windowed layers, their window */
    bool units;             /* two groups (paged) or any model window (contiguous): count layer-blocks */
    long n_pool;            /* blocks of every layer the pool was given (sim_kv_total) */
    long cap_units;         /* the pool in layer-blocks (contiguous: layer-tokens) */
    long win_live;          /* paged: blocks whose windowed layers some sequence holds */
    long res_units;         /* contiguous: layer-tokens reserved */
    sim_kv_tiers *tiers;    /* offload tiers and swap area below the pool (kv_tier.h), or NULL */
    int32_t *m_blk;         /* match scratch: GPU block of hit j, or -1 - tier */
    uint64_t *m_hash;       /* its chain hash */
    int m_cap;
    /* A counting match (take false) leaves its walk in the scratch; the taking match that
     * admission runs next for the same sequence reuses it when neither the map nor the tiers
     * changed in between (ver counts their changes): the same walk, without repeating its
     * lookups, which were half of rag-offload's time. */
    unsigned long ver;
    const sim_kv_seq *mq;   /* the sequence the scratch was walked for, NULL: none */
    uint64_t mseed[2];      /* its prefix and body streams */
    int mprompt, mn;        /* its prompt tokens, and the hits walked */
    long mplen;             /* its prefix length (with the seeds, its token stream) */
    unsigned long mver;
    /* Chain hashes of blocks that lie wholly inside a shared token stream's prefix: they depend
     * only on (prefix seed, block index), yet every request of a prefix group or conversation
     * hashed all of them on each match (several per request while it waits) and commit; this
     * memo hashes each once. Direct-mapped on the seed; a collision just recomputes. */
    struct kv_prefix_memo { uint64_t seed; uint64_t *h; int n, cap; bool used; } *pm;   /* [PM_SLOTS], on first use */
    struct kv_prefix_memo *pm_last;   /* the slot last used: a walk hashes one stream's blocks in a row */
    /* The block-size twin report (kv_twin.h): its tracker or NULL, the blocks allocated so far
     * and the most referenced at once. */
    sim_kv_twin *twin;
    long n_alloc, ref_peak;
    /* A waiting request's prefix walk, watched for the engine's fast-forward (sim_kv_watch): the
     * hit blocks (flagged `watched`), the hash of the first block the walk missed, and what has
     * happened since that could change the walk (SIM_KV_WATCH_* bits). */
    int32_t *w_blk;
    int w_n, w_cap;
    bool w_has_missing;
    uint64_t w_missing;
    int w_fired;
};

static inline void note_ref(sim_kv *kv)
{
    if (kv->n_referenced > kv->ref_peak) kv->ref_peak = kv->n_referenced;
}

static void *grow_array(void *p, size_t elem, long old_n, long new_n)
{
    char *q = realloc(p, elem * (size_t)new_n);
    if (q) memset(q + elem * (size_t)old_n, 0, elem * (size_t)(new_n - old_n));
    return q;
}

/* Makes the per-block arrays cover block b; -1 on out of memory. */
static int cover(sim_kv *kv, long b)
{
    if (b < kv->arr) return 0;
    long n = kv->arr ? kv->arr : 256;
    while (n <= b) n *= 2;
    if (n > kv->n) n = kv->n;
    int32_t *fs = grow_array(kv->free_stack, sizeof *fs, kv->arr, n);
    if (fs) kv->free_stack = fs;
    if (!fs) return -1;
    if (kv->prefix) {
        struct kv_block *blk = grow_array(kv->blk, sizeof *blk, kv->arr, n);
        if (!blk) return -1;
        kv->blk = blk;
    }
    /* The free stack sits at the arrays' end: move it to the new end. */
    if (kv->n_free) memmove(kv->free_stack + n - kv->n_free, kv->free_stack + kv->arr - kv->n_free, sizeof(int32_t) * (size_t)kv->n_free);
    kv->arr = n;
    return 0;
}

static inline void free_push(sim_kv *kv, int32_t b)
{
    kv->free_stack[kv->arr - ++kv->n_free] = b;
}

static int map_init(sim_kv *kv, long cap)
{
    kv->map = malloc((size_t)cap * sizeof *kv->map);
    if (!kv->map) return -1;
    for (long i = 0; i < cap; i++) kv->map[i].val = -1;
    kv->mask = cap - 1;
    return 0;
}

sim_kv *sim_kv_init(long blocks, int block_size, bool paged, bool prefix_cache, int sink, int window)
{
    sim_kv *kv = calloc(1, sizeof *kv);
    if (!kv) return NULL;
    kv->n = blocks;
    kv->n_pool = blocks;
    kv->bs = paged ? block_size : 1;
    kv->paged = paged;
    kv->prefix = paged && prefix_cache;
    kv->sink = sink;
    kv->window = window;
    kv->lru_head = kv->lru_tail = -1;
    if (kv->prefix && map_init(kv, 64)) { sim_kv_free(kv); return NULL; }
    return kv;
}

void sim_kv_free(sim_kv *kv)
{
    if (!kv) return;
    free(kv->blk); free(kv->free_stack); free(kv->map);
    sim_kv_tiers_free(kv->tiers);
    sim_kv_twin_free(kv->twin);
    free(kv->m_blk); free(kv->m_hash); free(kv->w_blk);
    for (int i = 0; kv->pm && i < PM_SLOTS; i++) free(kv->pm[i].h);
    free(kv->pm);
    free(kv);
}

void sim_kv_set_groups(sim_kv *kv, int full, int win, int window)
{
    if (win <= 0 || window <= 0 || full < 0) return;
    kv->gfull = full;
    kv->gwin = win;
    kv->mwin = window;
    long layers = (long)full + win;
    /* Layer-blocks: the pool of n blocks of every layer. Paged with every layer windowed needs
     * none: a block is then wholly freed when the window passes it. */
    kv->units = !kv->paged || full > 0;
    if (!kv->units) return;
    kv->cap_units = kv->n_pool <= LONG_MAX / layers ? kv->n_pool * layers : LONG_MAX;
    /* Block ids: as many as fit when no block holds its windowed layers. */
    if (kv->paged) {
        long ids = kv->cap_units / full;
        kv->n = ids < INT32_MAX ? ids : INT32_MAX;
    }
}

bool sim_kv_windowed(const sim_kv *kv) { return kv->gwin > 0; }

bool sim_kv_slides_at_fills(const sim_kv *kv)
{
    if (kv->gwin <= 0 || !kv->paged) return true;   /* contiguous: commits free nothing */
    if (kv->mwin % kv->bs) return false;
    /* Every layer windowed: passed blocks return to the pool, in an order against other
     * sequences' releases that only the prefix cache's LRU could tell. */
    return kv->units || !kv->prefix;
}

/* Layer-tokens a contiguous reservation of `tokens` takes: full layers hold them all, windowed
 * layers a ring of the model window. */
static long ring_units(const sim_kv *kv, long tokens)
{
    long w = tokens < kv->mwin ? tokens : kv->mwin;
    return (long)kv->gfull * tokens + (long)kv->gwin * w;
}

/* Layer-blocks in use (paged, two groups): every block an id is held for, referenced or cached,
 * on the full layers; the windowed layers of blocks still in their sequence's window. */
static long units_used(const sim_kv *kv, bool with_cached)
{
    long ids = kv->n_referenced + (with_cached ? kv->n_lru : 0);
    return (long)kv->gfull * ids + (long)kv->gwin * kv->win_live;
}

long sim_kv_total(const sim_kv *kv) { return kv->n_pool; }
int sim_kv_block_size(const sim_kv *kv) { return kv->bs; }
long sim_kv_available(const sim_kv *kv)
{
    long layers = (long)kv->gfull + kv->gwin;
    if (!kv->paged) {
        if (!kv->units) return kv->n - kv->reserved;
        long left = kv->cap_units - kv->res_units;
        return left > 0 ? left / layers : 0;   /* a token takes at most every layer */
    }
    long ids = kv->n_free + (kv->n - kv->fresh) + kv->n_lru;
    if (!kv->units) return ids;
    long left = kv->cap_units - units_used(kv, false);   /* cached blocks can be evicted */
    long fit = left > 0 ? left / layers : 0;
    return fit < ids ? fit : ids;
}
long sim_kv_referenced(const sim_kv *kv)
{
    if (!kv->units) return kv->paged ? kv->n_referenced : kv->reserved;
    long layers = (long)kv->gfull + kv->gwin;
    long u = kv->paged ? units_used(kv, false) : kv->res_units;
    return (u + layers - 1) / layers;
}
long sim_kv_cached(const sim_kv *kv) { return kv->n_cached; }

/* ---- the hash map ---- */
static long map_find(const sim_kv *kv, uint64_t h)
{
    for (long i = (long)(h & (uint64_t)kv->mask);; i = (i + 1) & kv->mask) {
        if (kv->map[i].val < 0) return -1;
        if (kv->map[i].key == h) return i;
    }
}

static void map_insert(sim_kv *kv, uint64_t h, int32_t b)
{
    kv->ver++;
    long i = (long)(h & (uint64_t)kv->mask);
    while (kv->map[i].val >= 0) i = (i + 1) & kv->mask;
    kv->map[i].key = h;
    kv->map[i].val = b;
}

/* A block hash just registered: the watched request's first missing block, if it is that one
 * (sim_kv_watch). Both insertion paths, map_put and map_put_new, call it. */
static inline void note_registered(sim_kv *kv, uint64_t h)
{
    if (kv->w_has_missing && h == kv->w_missing) kv->w_fired |= SIM_KV_WATCH_COMMIT;
}

/* Registers h -> b, doubling the table first if it would pass half full; -1 on out of memory
 * (the block then simply stays unregistered). */
static int map_put(sim_kv *kv, uint64_t h, int32_t b)
{
    if (2 * (kv->n_cached + 1) > kv->mask + 1) {
        struct kv_slot *om = kv->map;
        long ocap = kv->mask + 1;
        if (map_init(kv, 2 * ocap)) {
            free(kv->map);
            kv->map = om; kv->mask = ocap - 1;
            return -1;
        }
        for (long i = 0; i < ocap; i++)
            if (om[i].val >= 0) map_insert(kv, om[i].key, om[i].val);
        free(om);
    }
    map_insert(kv, h, b);
    note_registered(kv, h);
    return 0;
}

/* map_put of a hash not yet registered, in one probe: 1 (nothing changed) when h is already
 * there, else map_put's answer. The empty slot that ends the search is where map_insert would
 * put h unless the table doubles first. */
static int map_put_new(sim_kv *kv, uint64_t h, int32_t b)
{
    long i = (long)(h & (uint64_t)kv->mask);
    for (; kv->map[i].val >= 0; i = (i + 1) & kv->mask)
        if (kv->map[i].key == h) return 1;
    if (2 * (kv->n_cached + 1) > kv->mask + 1) return map_put(kv, h, b);
    kv->ver++;
    note_registered(kv, h);
    kv->map[i].key = h;
    kv->map[i].val = b;
    return 0;
}

/* Deletes slot i, shifting later entries of the probe run back (no tombstones). */
static void map_del(sim_kv *kv, long i)
{
    kv->ver++;
    kv->map[i].val = -1;
    for (long j = (i + 1) & kv->mask; kv->map[j].val >= 0; j = (j + 1) & kv->mask) {
        long home = (long)(kv->map[j].key & (uint64_t)kv->mask);
        /* Move j into the hole if its home is not in (i, j] cyclically: if home is no nearer
         * to j, going forward, than the hole is. */
        if (((j - home) & kv->mask) >= ((j - i) & kv->mask)) {
            kv->map[i].key = kv->map[j].key;
            kv->map[i].val = kv->map[j].val;
            kv->map[j].val = -1;
            i = j;
        }
    }
}

/* ---- LRU of unreferenced cached blocks ---- */
static void lru_unlink(sim_kv *kv, int32_t b)
{
    int32_t p = kv->blk[b].prev, n = kv->blk[b].next;
    if (p >= 0) kv->blk[p].next = n; else kv->lru_head = n;
    if (n >= 0) kv->blk[n].prev = p; else kv->lru_tail = p;
    kv->n_lru--;
}

static void lru_push(sim_kv *kv, int32_t b)
{
    kv->blk[b].prev = kv->lru_tail;
    kv->blk[b].next = -1;
    if (kv->lru_tail >= 0) kv->blk[kv->lru_tail].next = b; else kv->lru_head = b;
    kv->lru_tail = b;
    kv->n_lru++;
}

/* Takes the least recently used cached block out of the cache. */
static int32_t evict_lru(sim_kv *kv)
{
    int32_t b = kv->lru_head;
    /* Evictions come in runs down the LRU (a prefill's blocks): the blocks next in line are
     * fetched ahead, the one after next and the next one's map slot, so the misses of one
     * eviction overlap the work of the one before (each is a random access into a pool-sized
     * array; they were two thirds of an eviction's cycles). Nothing changes but timing. */
    int32_t n = kv->blk[b].next;
    if (n >= 0) {
        int32_t nn = kv->blk[n].next;
        if (nn >= 0) __builtin_prefetch(&kv->blk[nn]);
        __builtin_prefetch(&kv->map[kv->blk[n].hash & (uint64_t)kv->mask]);
    }
    kv->ver++;   /* the tiers change too */
    if (kv->blk[b].watched) kv->w_fired |= SIM_KV_WATCH_EVICT;
    lru_unlink(kv, b);
    long slot = map_find(kv, kv->blk[b].hash);
    if (slot >= 0) map_del(kv, slot);
    kv->blk[b].reg = 0;
    kv->n_cached--;
    if (kv->tiers) sim_kv_tiers_spill(kv->tiers, kv->blk[b].hash);   /* it moves down instead of vanishing */
    return b;
}

static int32_t alloc_block(sim_kv *kv)
{
    int32_t b;
    if (kv->units) {
        /* A new block takes every layer: evict cached blocks until that fits. */
        long cost = (long)kv->gfull + kv->gwin;
        while (units_used(kv, true) + cost > kv->cap_units && kv->n_lru) free_push(kv, evict_lru(kv));
        if (units_used(kv, true) + cost > kv->cap_units) return -1;
    }
    /* Returned blocks first (last returned first), then untouched ones lowest id first, then
     * the least recently used cached block: the order a stack of every block would give. */
    if (kv->n_free) {
        b = kv->free_stack[kv->arr - kv->n_free--];
    } else if (kv->fresh < kv->n) {
        if (cover(kv, kv->fresh)) return -2;
        b = (int32_t)kv->fresh++;
    } else if (kv->n_lru) {
        b = evict_lru(kv);                   /* evict the least recently used cached block */
    } else {
        return -1;
    }
    if (kv->prefix) kv->blk[b].refs = 1;
    kv->n_referenced++;
    kv->n_alloc++;
    note_ref(kv);
    return b;
}

static inline void unref(sim_kv *kv, int32_t b)
{
    if (kv->prefix && --kv->blk[b].refs > 0) return;
    kv->n_referenced--;
    if (kv->prefix && kv->blk[b].reg) lru_push(kv, b);
    else free_push(kv, b);
}

/* A spare table's first bytes hold the next spare and its capacity (the table is at least 8
 * entries, 32 bytes). */
typedef struct { void *next; int cap; } spare_head;

void sim_kv_tables_put(sim_kv_tables *t, sim_kv_seq *q)
{
    if (!q->blocks) return;
    spare_head h = {t->top, q->cap};
    memcpy(q->blocks, &h, sizeof h);
    t->top = q->blocks;
    q->blocks = NULL;
    q->cap = q->n_blocks = 0;
}

void sim_kv_tables_free(sim_kv_tables *t)
{
    while (t->top) {
        spare_head h;
        memcpy(&h, t->top, sizeof h);
        free(t->top);
        t->top = h.next;
    }
}

/* Gives a sequence with no table the spare stack's top, if there is one. */
static void take_spare(sim_kv_seq *q)
{
    sim_kv_tables *t = q->spare;
    if (q->blocks || !t || !t->top) return;
    spare_head h;
    memcpy(&h, t->top, sizeof h);
    q->blocks = t->top;
    q->cap = h.cap;
    t->top = h.next;
}

static int push_block_grow(sim_kv_seq *q, int32_t b)
{
    if (q->n_blocks == q->cap && !q->blocks) take_spare(q);
    if (q->n_blocks == q->cap) {
        int cap = q->cap ? q->cap * 2 : 8;
        int32_t *nb = realloc(q->blocks, sizeof *nb * (size_t)cap);
        if (!nb) return -1;
        q->blocks = nb;
        q->cap = cap;
    }
    q->blocks[q->n_blocks++] = b;
    return 0;
}

/* A block onto the table: a prefix hit pushes hundreds, into a table admission sized already. */
static inline int push_block(sim_kv_seq *q, int32_t b)
{
    if (q->n_blocks >= q->cap) return push_block_grow(q, b);
    q->blocks[q->n_blocks++] = b;
    return 0;
}

/* Tokens a contiguous sequence keeps for `positions` positions: a ring of sink + window. */
static long ring_held(const sim_kv *kv, long positions)
{
    if (kv->window > 0 && positions > (long)kv->sink + kv->window) positions = (long)kv->sink + kv->window;
    if (kv->gwin > 0 && kv->gfull == 0 && positions > kv->mwin) positions = kv->mwin;   /* every layer windowed */
    return positions;
}

/* The windowed layers' hold on block j ends (paged, two groups). */
static void drop_window_part(sim_kv *kv, sim_kv_seq *q, int j)
{
    if (kv->units && j >= q->slid && q->blocks[j] >= 0) { q->wlive--; kv->win_live--; }
}

/* Frees the windowed layers of blocks the model window has passed once positions [0, computed)
 * hold KV: block j once (j + 1) * block_size <= computed - window. With every layer windowed the
 * block itself goes. */
static void slide_model_window(sim_kv *kv, sim_kv_seq *q, int computed)
{
    if (kv->gwin <= 0) return;
    long past = (long)computed - kv->mwin;
    int to = past > 0 ? (int)(past / kv->bs) : 0;
    if (to > q->n_blocks) to = q->n_blocks;
    for (int j = q->slid; j < to; j++) {
        if (q->blocks[j] < 0) continue;
        if (kv->units) { q->wlive--; kv->win_live--; }
        else { unref(kv, q->blocks[j]); q->blocks[j] = -1; q->dropped++; }
    }
    if (to > q->slid) q->slid = to;
}

static void set_room(const sim_kv *kv, sim_kv_seq *q)
{
    if (kv->paged) q->room = (long)q->n_blocks * kv->bs;
    else if (kv->window > 0 && q->reserved >= (long)kv->sink + kv->window) q->room = INT_MAX;   /* the ring holds any position */
    else if (kv->gwin > 0 && kv->gfull == 0 && q->reserved >= kv->mwin) q->room = INT_MAX;
    else q->room = q->reserved;
}

/* A block's hash: a digest of its tokens mixed with the parent's hash through splitmix64's
 * finaliser. Token ids are synthetic, a fixed function of (stream seed, position) (sim/token.h),
 * so a block's tokens are named exactly by the runs of positions it takes from each stream: the
 * digest mixes (seed, first position) of each run, and where the block straddles the prefix's end,
 * that end too. Two blocks with equal tokens (in blocks of this pool's size) then have equal
 * digests, also when two streams share a seed; anything else collides with probability about
 * 2^-64, as digesting every token id would (only equality matters: the map and the tiers look
 * hashes up, never order them). It costs the same for any block size: digesting each token id
 * was three quarters of a prefix-cached run's cost at block size 8 (docs/simulator.md,
 * "Prefix cache"). */
static inline uint64_t run_digest(uint64_t seed, long first)
{
    return sim_mix64(seed) + (uint64_t)first;   /* the parent's mix below scatters it */
}

static uint64_t block_hash(const sim_kv *kv, const sim_kv_seq *q, uint64_t parent, int j)
{
    long p = (long)j * kv->bs, end = p + kv->bs;
    uint64_t d;
    if (end <= q->prefix_len || q->prefix_seed == q->body_seed) d = run_digest(q->prefix_seed, p);
    else if (p >= q->prefix_len) d = run_digest(q->body_seed, p);
    else   /* prefix tokens [p, prefix_len), then body tokens [prefix_len, end) */
        d = sim_mix64(run_digest(q->prefix_seed, p) ^ run_digest(q->body_seed, q->prefix_len));
    return sim_mix64(parent ^ d);
}

/* The memo slot of a prefix stream, claimed when it has none. Open addressing over PM_PROBE
 * slots from the seed's home: hundreds of popular prefix groups (rag-offload's 400 documents)
 * then each keep a slot; when all are taken by other seeds the home slot is reused. A slot once
 * used stays used, so a seed is in at most one slot and the probe finds it there. */
static struct kv_prefix_memo *prefix_memo(sim_kv *kv, uint64_t seed)
{
    long home = (long)((seed * 0x9e3779b97f4a7c15ULL) >> 54);
    struct kv_prefix_memo *e = NULL;
    for (long i = 0; i < PM_PROBE && !e; i++) {
        struct kv_prefix_memo *x = &kv->pm[(home + i) & (PM_SLOTS - 1)];
        if (!x->used || x->seed == seed) e = x;
    }
    if (!e) e = &kv->pm[home];
    if (!e->used || e->seed != seed) { e->used = true; e->seed = seed; e->n = 0; }
    return e;
}

/* block_hash through the prefix memo (struct sim_kv): a block wholly inside the prefix stream
 * whose parent is the memo's own chain is looked up, or appended when it is the next one. The
 * parent check keeps it exact whatever chain a caller passes. */
static uint64_t chain_hash_memo(sim_kv *kv, const sim_kv_seq *q, uint64_t parent, int j)
{
    if ((long)(j + 1) * kv->bs > q->prefix_len) return block_hash(kv, q, parent, j);
    /* The table is allocated when a prefix block is first hashed: a pool that never sees one
     * (most replicas of a 10,000-replica run) costs nothing. */
    if (!kv->pm && !(kv->pm = calloc(PM_SLOTS, sizeof *kv->pm))) return block_hash(kv, q, parent, j);
    /* The last slot, when it is still this stream's, is the one the probe would find. */
    struct kv_prefix_memo *e = kv->pm_last;
    if (!e || !e->used || e->seed != q->prefix_seed) {
        e = prefix_memo(kv, q->prefix_seed);
        kv->pm_last = e;
    }
    if (j > e->n || parent != (j ? e->h[j - 1] : CHAIN_ROOT)) return block_hash(kv, q, parent, j);
    if (j < e->n) return e->h[j];
    uint64_t hj = block_hash(kv, q, parent, j);
    if (e->n == e->cap) {
        int cap = e->cap ? 2 * e->cap : 64;
        uint64_t *nh = realloc(e->h, sizeof *nh * (size_t)cap);
        if (!nh) return hj;   /* out of memory: the memo just stops growing */
        e->h = nh;
        e->cap = cap;
    }
    e->h[e->n++] = hj;
    return hj;
}

/* chain_hash_memo's commonest answer inline: the next block of a walk down the stream the memo
 * slot last used holds, already memoised (a prefix hit's every block). The same checks, so the
 * same hash. */
static inline uint64_t chain_hash(sim_kv *kv, const sim_kv_seq *q, uint64_t parent, int j)
{
    if ((long)(j + 1) * kv->bs > q->prefix_len) return block_hash(kv, q, parent, j);   /* not memoised */
    const struct kv_prefix_memo *e = kv->pm_last;
    if (e && j < e->n && e->used && e->seed == q->prefix_seed && parent == (j ? e->h[j - 1] : CHAIN_ROOT))
        return e->h[j];
    return chain_hash_memo(kv, q, parent, j);
}

/* How far chain_hash's inline answer holds from block `from` on, given the parent hash of
 * block `from` (the walk's last hash): its memo slot's blocks up to the prefix's last whole
 * block, when the slot chain_hash last used is this stream's and holds that parent. Each block
 * in the run is then memoised, inside the prefix and chained from the one before (the memo
 * appends a block only after its parent), so chain_hash would return run[j]: a prefix hit
 * walks hundreds of blocks without its checks. 0 when there is no such run; *run is the memo's
 * array, valid until chain_hash next appends. */
static int memo_run(const sim_kv *kv, const sim_kv_seq *q, int from, uint64_t parent, const uint64_t **run)
{
    const struct kv_prefix_memo *e = kv->pm_last;
    if (!e || !e->used || e->seed != q->prefix_seed || from > e->n || from < 1 || e->h[from - 1] != parent) return 0;
    long whole = q->prefix_len / kv->bs;
    *run = e->h;
    return e->n < whole ? e->n : (int)whole;
}

/* Takes the block with hash h out of tier tk into a new GPU block, registered in the prefix
 * cache and held by q; -1 (nothing changed) when no block can be had. */
static int reload(sim_kv *kv, sim_kv_seq *q, int tk, uint64_t h)
{
    if (sim_kv_available(kv) < 1) return -1;
    int32_t b = alloc_block(kv);
    if (b < 0) return -1;
    /* Making room may have evicted a GPU block into the tiers and pushed h further down. */
    tk = sim_kv_tiers_find(kv->tiers, h);
    if (tk < 0 || push_block(q, b)) { unref(kv, b); return -1; }
    kv->ver++;
    sim_kv_tiers_take(kv->tiers, tk, h);
    if (map_put(kv, h, b) == 0) {
        kv->blk[b].hash = h;
        kv->blk[b].reg = 1;
        kv->n_cached++;
    }
    if (kv->units) { q->wlive++; kv->win_live++; }
    return 0;
}

/* Taking a match that reaches into the tiers, in two passes: first every hit block already on
 * the GPU is pinned (so reloading the others cannot evict them), then the blocks are pushed in
 * order, the tiers' copies reloaded into new blocks. A reload that cannot be had ends the hit
 * there, and the pins past it are dropped. Admission's count (from_free) is then exact. */
static int scratch_room(sim_kv *kv, int max_blocks)
{
    if (max_blocks <= kv->m_cap) return 0;
    int cap = max_blocks + 64;
    int32_t *b = realloc(kv->m_blk, sizeof *b * (size_t)cap);
    if (b) kv->m_blk = b;
    uint64_t *hh = realloc(kv->m_hash, sizeof *hh * (size_t)cap);
    if (hh) kv->m_hash = hh;
    if (!b || !hh) return -1;
    kv->m_cap = cap;
    return 0;
}

/* The hits a counting match of q (this prompt) left in the scratch, when the map and the tiers
 * are as it saw them (they decide the walk): the same walk again would find the same blocks.
 * -1 when there is none to reuse. Consumed by the call. */
static int reusable_walk(sim_kv *kv, const sim_kv_seq *q, int prompt)
{
    bool same = kv->mq == q && kv->mver == kv->ver && kv->mprompt == prompt && kv->mseed[0] == q->prefix_seed &&
                kv->mseed[1] == q->body_seed && kv->mplen == q->prefix_len;
    kv->mq = NULL;
    return same ? kv->mn : -1;
}

/* A request waiting for room is counted at every step it is tried, and the map changes between
 * (every filled block is registered), so the last count's walk cannot simply be reused; but the
 * blocks it found are still this prompt's hits while each is still registered under the hash it
 * was found by (a registered block is the map's entry for its hash, and a hash is only ever
 * unregistered by evicting its block). Returns how many of the last count of q's hits lead the
 * walk still, counting the free ones among them into *from_free (as the walk would); the walk
 * goes on from there. 0 when the scratch holds another walk, or with tiers (whose contents swaps
 * and reloads change under the map). */
static int still_cached(const sim_kv *kv, const sim_kv_seq *q, int prompt, long *from_free)
{
    if (kv->tiers || kv->mq != q || kv->mprompt != prompt || kv->mseed[0] != q->prefix_seed ||
        kv->mseed[1] != q->body_seed || kv->mplen != q->prefix_len)
        return 0;
    int j = 0;
    for (; j < kv->mn; j++) {
        int32_t b = kv->m_blk[j];
        if (!kv->blk[b].reg || kv->blk[b].hash != kv->m_hash[j]) break;
        if (kv->blk[b].refs == 0 && from_free) (*from_free)++;
    }
    return j;
}

static int take_with_tiers(sim_kv *kv, sim_kv_seq *q, int max_blocks, int walked)
{
    if (scratch_room(kv, max_blocks)) return 0;
    uint64_t h = CHAIN_ROOT;
    int n = 0;
    /* The counting match's walk, when reusable: its pins only (they change neither map nor tiers). */
    for (; n < walked; n++) {
        int32_t b = kv->m_blk[n];
        if (b >= 0) {
            if (kv->blk[b].refs == 0) { lru_unlink(kv, b); kv->n_referenced++; }
            kv->blk[b].refs++;
        }
    }
    for (; walked < 0 && n < max_blocks; n++) {
        uint64_t hj = chain_hash(kv, q, h, n);
        long slot = map_find(kv, hj);
        int32_t b = slot >= 0 ? kv->map[slot].val : -1;
        int tk = slot < 0 ? sim_kv_tiers_find(kv->tiers, hj) : -1;
        if (slot < 0 && tk < 0) break;
        if (b >= 0) {
            if (kv->blk[b].refs == 0) { lru_unlink(kv, b); kv->n_referenced++; }
            kv->blk[b].refs++;
        }
        kv->m_blk[n] = b >= 0 ? b : -1 - tk;
        kv->m_hash[n] = hj;
        h = hj;
    }
    int j = 0;
    for (; j < n; j++) {
        int32_t b = kv->m_blk[j];
        if (b < 0) {
            if (reload(kv, q, -1 - b, kv->m_hash[j])) break;
            continue;
        }
        if (push_block(q, b)) break;
        if (kv->units) { q->wlive++; kv->win_live++; }
    }
    for (int k = j; k < n; k++)
        if (kv->m_blk[k] >= 0) unref(kv, kv->m_blk[k]);   /* pins past where the hit ended */
    q->hashed = j;
    q->chain = j ? kv->m_hash[j - 1] : CHAIN_ROOT;
    slide_model_window(kv, q, j * kv->bs);
    set_room(kv, q);
    return j * kv->bs;
}

static int match_prefix(sim_kv *kv, sim_kv_seq *q, int prompt, bool take, long *from_free)
{
    if (from_free) *from_free = 0;
    if (!kv->prefix || q->n_blocks) return 0;
    int walked = take ? reusable_walk(kv, q, prompt) : -1;
    if (take && kv->tiers && sim_kv_tiers_offload(kv->tiers)) return take_with_tiers(kv, q, (prompt - 1) / kv->bs, walked);
    int max_blocks = (prompt - 1) / kv->bs;   /* the last prompt token is always computed */
    /* Counting: the walk is kept for the taking match that follows (reusable_walk). */
    bool keep = !take && scratch_room(kv, max_blocks) == 0;
    if (take && walked >= 0) {
        /* The counting walk's blocks, all on the GPU (a tier's hit would reload: walk again). */
        bool gpu = true;
        for (int j = 0; kv->tiers && j < walked && gpu; j++) gpu = kv->m_blk[j] >= 0;   /* without tiers, every hit is */
        if (gpu) {
            int j = 0;
            if (walked > 0 && !kv->units && q->cap - q->n_blocks >= walked) {
                /* The common case, its tests hoisted: the table has room for every hit (admission
                 * sized it), one layer group. The same pins, pushes and unlinks in order. Not for
                 * no hit: a table not yet allocated is NULL, and NULL + 0 is undefined in C. */
                struct kv_block *blk = kv->blk;
                int32_t *dst = q->blocks + q->n_blocks;
                const int32_t *mb = kv->m_blk;
                long pinned = 0;
                for (; j < walked; j++) {
                    int32_t b = mb[j];
                    if (blk[b].refs == 0) { lru_unlink(kv, b); pinned++; }
                    blk[b].refs++;
                    dst[j] = b;
                }
                kv->n_referenced += pinned;
                q->n_blocks += walked;
            }
            for (; j < walked; j++) {
                int32_t b = kv->m_blk[j];
                if (kv->blk[b].refs == 0) { lru_unlink(kv, b); kv->n_referenced++; }
                kv->blk[b].refs++;
                if (push_block(q, b)) { unref(kv, b); break; }
                if (kv->units) { q->wlive++; kv->win_live++; }
            }
            q->hashed = j;
            q->chain = j ? kv->m_hash[j - 1] : CHAIN_ROOT;
            slide_model_window(kv, q, j * kv->bs);
            set_room(kv, q);
            return j * kv->bs;
        }
    }
    uint64_t h = CHAIN_ROOT;
    int j = keep ? still_cached(kv, q, prompt, from_free) : 0;
    if (j) h = kv->m_hash[j - 1];
    const uint64_t *run = NULL;   /* the memo's hashes, valid for blocks [j, run_end) of this walk */
    int run_end = 0;
    if (keep && !kv->tiers) {
        /* The counting walk without tiers (admission's every count): the loop below for that
         * case alone, its invariant tests hoisted and the map's probe inline, the same blocks,
         * hashes and count. */
        const struct kv_slot *map = kv->map;
        const struct kv_block *blk = kv->blk;
        const uint64_t mask = (uint64_t)kv->mask;
        int32_t *mb = kv->m_blk;
        uint64_t *mh = kv->m_hash;
        long nf = 0;
        for (; j < max_blocks; j++) {
            uint64_t hj;
            if (j < run_end) {
                hj = run[j];
            } else {
                hj = chain_hash(kv, q, h, j);
                run_end = memo_run(kv, q, j + 1, hj, &run);
            }
            uint64_t i = hj & mask;
            while (map[i].val >= 0 && map[i].key != hj) i = (i + 1) & mask;
            int32_t b = map[i].val;
            if (b < 0) break;   /* not on the GPU, and no tier to look in */
            mb[j] = b;
            mh[j] = hj;
            nf += blk[b].refs == 0;
            h = hj;
        }
        if (from_free) *from_free += nf;
    }
    for (; !(keep && !kv->tiers) && j < max_blocks; j++) {
        uint64_t hj;
        if (j < run_end) {
            hj = run[j];
        } else {
            hj = chain_hash(kv, q, h, j);
            run_end = memo_run(kv, q, j + 1, hj, &run);
        }
        long slot = map_find(kv, hj);
        if (slot < 0) {
            /* Not on the GPU: a lower tier's copy is reloaded into a new block (kv_tier.h). */
            int tk = kv->tiers ? sim_kv_tiers_find(kv->tiers, hj) : -1;
            if (tk < 0) break;
            if (from_free) (*from_free)++;
            if (take && reload(kv, q, tk, hj)) break;
            if (keep) { kv->m_blk[j] = -1 - tk; kv->m_hash[j] = hj; }
            h = hj;
            continue;
        }
        int32_t b = kv->map[slot].val;
        if (keep) { kv->m_blk[j] = b; kv->m_hash[j] = hj; }
        if (kv->blk[b].refs == 0 && from_free) (*from_free)++;
        if (take) {
            if (kv->blk[b].refs == 0) { lru_unlink(kv, b); kv->n_referenced++; }
            kv->blk[b].refs++;
            if (push_block(q, b)) { unref(kv, b); break; }
            if (kv->units) { q->wlive++; kv->win_live++; }
        }
        h = hj;
    }
    if (take) { q->hashed = j; q->chain = h; slide_model_window(kv, q, j * kv->bs); set_room(kv, q); }
    if (keep) {
        kv->mq = q;
        kv->mseed[0] = q->prefix_seed;
        kv->mseed[1] = q->body_seed;
        kv->mprompt = prompt;
        kv->mplen = q->prefix_len;
        kv->mn = j;
        kv->mver = kv->ver;
    }
    return j * kv->bs;
}

int sim_kv_match_prefix(sim_kv *kv, sim_kv_seq *q, int prompt, bool take, long *from_free)
{
    bool fresh = q->n_blocks == 0;   /* else there is no match to make */
    int hit = match_prefix(kv, q, prompt, take, from_free);
    if (take) note_ref(kv);   /* hit blocks taken out of the LRU count as referenced */
    if (kv->twin && kv->prefix && fresh)
        sim_kv_twin_match(kv->twin, q, prompt, hit, take, kv->n_alloc);
    return hit;
}

long sim_kv_needed(const sim_kv *kv, const sim_kv_seq *q, int upto)
{
    if (!kv->paged) {
        long held = ring_held(kv, upto);
        return held > q->reserved ? held - q->reserved : 0;
    }
    long want = ((long)upto + kv->bs - 1) / kv->bs - q->n_blocks;
    return want > 0 ? want : 0;
}

long sim_kv_window_blocks(const sim_kv *kv)
{
    if (!kv->paged) return -1;
    long cap = -1, bs = kv->bs;
    /* After commit(n) a window keeps blocks floor((n - window) / bs) .. ceil(n / bs) - 1, and
     * growing to n + 1 before the commit adds none beyond ceil(window / bs) + 1 of them. */
    if (kv->window > 0) cap = (kv->sink + bs - 1) / bs + (kv->window + bs - 1) / bs + 1;
    if (kv->gwin > 0 && !kv->units) {
        long m = (kv->mwin + bs - 1) / bs + 1;
        if (cap < 0 || m < cap) cap = m;
    }
    return cap;
}

/* sim_kv_grow's common case (paged, one layer group, need <= available): the `need` blocks
 * alloc_block would hand out one by one, in the same order, taken in runs (a prefill takes
 * dozens; one at a time it was a fifth of a splitwise run). The free stack's top run is
 * popped, then untouched ids counted up, then, only if those run out, cached blocks evicted
 * oldest first. Out of memory changes nothing. */
static int grow_run(sim_kv *kv, sim_kv_seq *q, long need)
{
    long want = (long)q->n_blocks + need;
    if (want > q->cap) take_spare(q);
    if (want > q->cap) {
        long cap = q->cap ? q->cap : 8;
        while (cap < want) cap *= 2;
        if (cap > INT_MAX) return -1;
        int32_t *nb = realloc(q->blocks, sizeof *nb * (size_t)cap);
        if (!nb) return -1;
        q->blocks = nb;
        q->cap = (int)cap;
    }
    long pop = need < kv->n_free ? need : kv->n_free;
    long fresh = need - pop < kv->n - kv->fresh ? need - pop : kv->n - kv->fresh;
    if (fresh > 0 && cover(kv, kv->fresh + fresh - 1)) return -1;
    int32_t *dst = q->blocks + q->n_blocks;
    if (pop) memcpy(dst, kv->free_stack + kv->arr - kv->n_free, sizeof *dst * (size_t)pop);   /* top first */
    kv->n_free -= pop;
    for (long i = 0; i < fresh; i++) dst[pop + i] = (int32_t)(kv->fresh + i);
    kv->fresh += fresh;
    for (long i = pop + fresh; i < need; i++) dst[i] = evict_lru(kv);   /* available counted them */
    if (kv->prefix)
        for (long i = 0; i < need; i++) kv->blk[dst[i]].refs = 1;
    kv->n_referenced += need;
    kv->n_alloc += need;
    note_ref(kv);
    q->n_blocks = (int)want;
    set_room(kv, q);
    return 0;
}

/* One block from the free stack onto a sequence's table (paged, one layer group, table room
 * checked by the caller): grow_run's first choice without its bookkeeping. */
static inline void take_free_block(sim_kv *kv, sim_kv_seq *q)
{
    int32_t b = kv->free_stack[kv->arr - kv->n_free--];
    q->blocks[q->n_blocks++] = b;
    if (kv->prefix) kv->blk[b].refs = 1;
    kv->n_referenced++;
    kv->n_alloc++;
    note_ref(kv);
    q->room += kv->bs;   /* set_room: n_blocks * bs */
}

int sim_kv_grow(sim_kv *kv, sim_kv_seq *q, int upto)
{
    if (upto <= q->room) return 0;   /* the common case: room left */
    /* The next most common: a decoding sequence crossing into one more block while the free
     * stack has one (paged, one layer group): grow_run's first choice, without its bookkeeping. */
    if (kv->paged && !kv->units && kv->n_free && upto <= q->room + kv->bs && q->n_blocks < q->cap) {
        take_free_block(kv, q);
        return 0;
    }
    long need = sim_kv_needed(kv, q, upto);
    if (!need) return 0;
    if (!kv->paged) return sim_kv_reserve(kv, q, ring_held(kv, upto));
    if (need > sim_kv_available(kv)) { sim_kv_twin_blocked(kv->twin); return -1; }
    if (!kv->units) {
        if (grow_run(kv, q, need)) { sim_kv_twin_blocked(kv->twin); return -1; }
        return 0;
    }
    for (long i = 0; i < need; i++) {
        int32_t b = alloc_block(kv);
        if (b < 0 || push_block(q, b)) { if (b >= 0) unref(kv, b); set_room(kv, q); return -1; }
        if (kv->units) { q->wlive++; kv->win_live++; }
    }
    set_room(kv, q);
    return 0;
}

int sim_kv_table_room(sim_kv_seq *q, long blocks)
{
    if (blocks <= q->cap) return 0;
    take_spare(q);
    if (blocks <= q->cap) return 0;
    long cap = 16;   /* powers of two: a recycled table seldom needs to grow again */
    while (cap < blocks) cap *= 2;
    if (cap > INT_MAX) return -1;
    int32_t *nb = realloc(q->blocks, sizeof *nb * (size_t)cap);
    if (!nb) return -1;
    q->blocks = nb;
    q->cap = (int)cap;
    return 0;
}

int sim_kv_grow_block(sim_kv *kv, sim_kv_seq *q)
{
    /* Kept apart from sim_kv_grow, whose general case needs many registers saved, so that this
     * one (a fast-forwarded decode step crossing into a block) costs a few instructions. */
    if (!kv->paged || kv->units || !kv->n_free || q->n_blocks >= q->cap) return sim_kv_grow(kv, q, (int)q->room + 1);
    take_free_block(kv, q);
    return 0;
}

long sim_kv_grow_blocks(sim_kv *kv, sim_kv_seq *const *qs, int n)
{
    long more = 0;
    for (int i = 0; i < n;) {
        if (kv->paged && !kv->units) {
            /* take_free_block for each sequence in a row whose table has room, while the free
             * stack lasts: its top run in order, the counts written back once. */
            const int32_t *top = kv->free_stack + kv->arr - kv->n_free;
            struct kv_block *blk = kv->prefix ? kv->blk : NULL;
            const long bs = kv->bs, avail = kv->n_free;
            long taken = 0;
            for (; i < n && taken < avail; i++, taken++) {
                sim_kv_seq *q = qs[i];
                if (q->n_blocks >= q->cap) break;
                int32_t b = top[taken];
                q->blocks[q->n_blocks++] = b;
                if (blk) blk[b].refs = 1;
                q->room += bs;
            }
            kv->n_free -= taken;
            kv->n_referenced += taken;
            kv->n_alloc += taken;
            note_ref(kv);
            more += taken * bs;
            if (i == n) break;
        }
        sim_kv_seq *q = qs[i++];   /* the general case: sim_kv_grow_block */
        long room0 = q->room;
        if (sim_kv_grow_block(kv, q)) return -1;
        more += q->room - room0;
    }
    return more;
}

int sim_kv_reserve(sim_kv *kv, sim_kv_seq *q, long tokens)
{
    long extra = tokens - q->reserved;
    if (extra <= 0) return 0;
    if (kv->units) {
        long more = ring_units(kv, tokens) - ring_units(kv, q->reserved);
        if (more > kv->cap_units - kv->res_units) return -1;
        kv->res_units += more;
    } else if (extra > kv->n - kv->reserved) {
        return -1;
    }
    kv->reserved += extra;
    q->reserved = tokens;
    set_room(kv, q);
    return 0;
}

/* Registers the blocks [hashed, computed / block size) that commit filled (sim_kv_commit). */
static void register_filled(sim_kv *kv, sim_kv_seq *q, int full)
{
    if (q->hashed == 0) q->chain = CHAIN_ROOT;
    int end = full < q->n_blocks ? full : q->n_blocks;
    uint64_t hn = q->hashed < end ? chain_hash(kv, q, q->chain, q->hashed) : 0;
    for (int j = q->hashed; j < end; j++) {
        /* The next block's hash one step ahead (the chain needs only this one's), its map slot
         * fetched while this one registers: a random access each (timing only). */
        uint64_t hj = hn;
        if (j + 1 < end) {
            hn = chain_hash(kv, q, hj, j + 1);
            __builtin_prefetch(&kv->map[hn & (uint64_t)kv->mask]);
        }
        int32_t b = q->blocks[j];
        /* A block already known under another id stays private to this sequence. */
        if (b >= 0 && !kv->blk[b].reg && map_put_new(kv, hj, b) == 0) {
            kv->blk[b].hash = hj;
            kv->blk[b].reg = 1;
            kv->n_cached++;
        }
        q->chain = hj;
        q->hashed = j + 1;
    }
}

void sim_kv_commit(sim_kv *kv, sim_kv_seq *q, int computed)
{
    if (!kv->paged) return;
    /* The twin report follows commits inside a shared prefix only (kv_twin.c). */
    if (kv->twin && !q->twin_past && q->prefix_len > 0 && kv->prefix)
        sim_kv_twin_commit(kv->twin, q, computed, kv->n_alloc, kv->n_referenced);
    /* Most commits (a decode step's token) fill no block: nothing to hash. */
    if (kv->prefix && computed / kv->bs > q->hashed) register_filled(kv, q, computed / kv->bs);
    if (kv->window > 0) {
        int sink_blocks = (kv->sink + kv->bs - 1) / kv->bs;
        int keep_from = computed - kv->window;          /* first position the window still needs */
        for (int j = sink_blocks; j < q->n_blocks && (j + 1) * kv->bs <= keep_from; j++) {
            if (q->blocks[j] >= 0) { drop_window_part(kv, q, j); unref(kv, q->blocks[j]); q->blocks[j] = -1; q->dropped++; }
        }
        if (keep_from > q->held_from) q->held_from = keep_from;
    }
    slide_model_window(kv, q, computed);
}

long sim_kv_seq_tokens(const sim_kv *kv, const sim_kv_seq *q)
{
    return kv->paged ? (long)(q->n_blocks - q->dropped) * kv->bs : q->reserved;
}

int sim_kv_held(const sim_kv *kv, const sim_kv_seq *q, int computed)
{
    (void)q;
    if (kv->window <= 0 || computed <= kv->sink + kv->window) return computed;
    return kv->sink + kv->window;
}

/* Positions of [0, computed) a windowed layer keeps: the last `mwin`, less any the cache's own
 * sink + window drops (it keeps [0, sink) and the last `window`). */
static long held_windowed(const sim_kv *kv, long computed)
{
    long lo = computed > kv->mwin ? computed - kv->mwin : 0;
    if (kv->window <= 0 || computed <= (long)kv->sink + kv->window) return computed - lo;
    long tail_lo = computed - kv->window > lo ? computed - kv->window : lo;
    long sink_hi = kv->sink < tail_lo ? kv->sink : tail_lo;
    return (computed - tail_lo) + (sink_hi > lo ? sink_hi - lo : 0);
}

long sim_kv_frag_space(const sim_kv *kv, const sim_kv_seq *q)
{
    if (!kv->units) return sim_kv_seq_tokens(kv, q);   /* one layer kind, or paged all windowed */
    long full_space, win_space;
    if (kv->paged) {
        full_space = (long)(q->n_blocks - q->dropped) * kv->bs;
        win_space = (long)q->wlive * kv->bs;
    } else {                                           /* ring_units: the windowed layers' ring */
        full_space = q->reserved;
        win_space = q->reserved < kv->mwin ? q->reserved : kv->mwin;
    }
    return (long)kv->gfull * full_space + (long)kv->gwin * win_space;
}

void sim_kv_frag_terms(const sim_kv *kv, const sim_kv_seq *q, int computed, long *space, long *held)
{
    *space = sim_kv_frag_space(kv, q);
    long all = sim_kv_held(kv, q, computed);   /* what a full-attention layer keeps */
    if (kv->gwin <= 0) *held = all;                                    /* one layer kind: tokens */
    else if (!kv->units) *held = held_windowed(kv, computed);          /* paged, all windowed */
    else *held = (long)kv->gfull * all + (long)kv->gwin * held_windowed(kv, computed);
}

bool sim_kv_frag_linear(const sim_kv *kv, long *full, long *win, long *window)
{
    if (kv->window > 0) return false;
    *full = kv->gwin <= 0 ? 1 : kv->units ? kv->gfull : 0;
    *win = kv->gwin <= 0 ? 0 : kv->units ? kv->gwin : 1;
    *window = kv->gwin <= 0 ? 0 : kv->mwin;
    return true;
}

void sim_kv_truncate(sim_kv *kv, sim_kv_seq *q, int upto)
{
    if (!kv->paged) return;
    int keep = (upto + kv->bs - 1) / kv->bs;
    if (keep < q->hashed) keep = q->hashed;   /* registered blocks hold committed tokens only */
    while (q->n_blocks > keep) {
        drop_window_part(kv, q, q->n_blocks - 1);
        int32_t b = q->blocks[--q->n_blocks];
        if (b >= 0) unref(kv, b);
    }
    if (q->slid > q->n_blocks) q->slid = q->n_blocks;
    set_room(kv, q);
}

void sim_kv_release(sim_kv *kv, sim_kv_seq *q)
{
    if (kv->paged) {
        /* Release newest first, so the LRU evicts a sequence's tail before its shared head. */
        if (kv->prefix) {
            for (int j = q->n_blocks - 1; j >= 0; j--)
                if (q->blocks[j] >= 0) unref(kv, q->blocks[j]);
        } else {
            /* unref's other case for the whole table: pushed newest first, the blocks lie on
             * the stack oldest on top, in table order: one copy (one pass past dropped ones). */
            long k = q->n_blocks;   /* a table with nothing dropped holds no -1 */
            if (q->dropped)
                for (int j = 0; j < q->n_blocks; j++) k -= q->blocks[j] < 0;
            int32_t *fs = kv->free_stack + kv->arr - kv->n_free - k;
            if (q->dropped == 0) {
                if (k) memcpy(fs, q->blocks, sizeof *fs * (size_t)k);   /* an empty table may have no buffer */
            } else {
                long w = 0;
                for (int j = 0; j < q->n_blocks; j++)
                    if (q->blocks[j] >= 0) fs[w++] = q->blocks[j];
            }
            kv->n_free += k;
            kv->n_referenced -= k;
        }
    } else {
        kv->reserved -= q->reserved;
        if (kv->units) kv->res_units -= ring_units(kv, q->reserved);
    }
    kv->win_live -= q->wlive;
    q->n_blocks = 0;   /* the table's buffer is kept for the sequence's next admission */
    q->dropped = 0;
    q->slid = 0;
    q->wlive = 0;
    q->reserved = 0;
    q->room = 0;
    q->hashed = 0;
    q->chain = 0;
    q->held_from = 0;
    if (kv->twin) sim_kv_twin_release(kv->twin, q, kv->n_alloc, kv->n_referenced);
}

void sim_kv_seq_free(sim_kv_seq *q)
{
    free(q->blocks);
    q->blocks = NULL;
    q->n_blocks = q->cap = 0;
}

void sim_kv_set_tiers(sim_kv *kv, sim_kv_tiers *t)
{
    sim_kv_tiers_free(kv->tiers);
    kv->tiers = t;
}

sim_kv_tiers *sim_kv_tiers_of(const sim_kv *kv) { return kv->tiers; }

long sim_kv_swap_out(sim_kv *kv, sim_kv_seq *q)
{
    if (!kv->paged) return -1;
    long n = (long)q->n_blocks - q->dropped;
    if (sim_kv_tiers_swap_out(kv->tiers, n)) return -1;
    sim_kv_release(kv, q);
    return n;
}

void sim_kv_account(sim_kv *kv, double dt)
{
    if (kv->tiers) sim_kv_tiers_account(kv->tiers, dt);
}

void sim_kv_set_twin(sim_kv *kv, sim_kv_twin *t)
{
    sim_kv_twin_free(kv->twin);
    kv->twin = t;
}

void sim_kv_note_blocked(sim_kv *kv) { sim_kv_twin_blocked(kv->twin); }

unsigned sim_kv_twin_result(const sim_kv *kv) { return sim_kv_twin_same(kv->twin, kv->ref_peak); }

/* ---- Watching a waiting request's prefix (the engine's fast-forward) ---- */

void sim_kv_unwatch(sim_kv *kv)
{
    for (int i = 0; i < kv->w_n; i++) kv->blk[kv->w_blk[i]].watched = 0;
    kv->w_n = 0;
    kv->w_has_missing = false;
    kv->w_fired = 0;
}

int sim_kv_watch(sim_kv *kv, const sim_kv_seq *q, int prompt)
{
    sim_kv_unwatch(kv);
    if (!kv->prefix || kv->tiers || kv->units) return -1;
    int max_blocks = (prompt - 1) / kv->bs;
    if (q->n_blocks || max_blocks <= 0) return 0;   /* a match finds nothing, whatever the map holds */
    /* The hits: the counting walk admission just made, when nothing changed since; else a
     * counting walk now (which changes nothing but the scratch, whose reuse is exact). */
    bool fresh = kv->mq == q && kv->mver == kv->ver && kv->mprompt == prompt && kv->mseed[0] == q->prefix_seed &&
                 kv->mseed[1] == q->body_seed && kv->mplen == q->prefix_len;
    if (!fresh) {
        sim_kv_match_prefix(kv, (sim_kv_seq *)q, prompt, false, NULL);
        if (kv->mq != q) return -1;   /* no scratch (out of memory) */
    }
    int n = kv->mn;
    if (n > kv->w_cap) {
        int cap = n + 64;
        int32_t *w = realloc(kv->w_blk, sizeof *w * (size_t)cap);
        if (!w) return -1;
        kv->w_blk = w;
        kv->w_cap = cap;
    }
    for (int j = 0; j < n; j++) {
        int32_t b = kv->m_blk[j];   /* on the GPU: no tiers */
        kv->blk[b].watched = 1;
        kv->w_blk[j] = b;
    }
    kv->w_n = n;
    /* The walk stopped at block n because its hash is not registered (or at the prompt's end). */
    if (n < max_blocks) {
        kv->w_missing = chain_hash(kv, q, n ? kv->m_hash[n - 1] : CHAIN_ROOT, n);
        kv->w_has_missing = true;
    }
    return 0;
}

int sim_kv_watch_fired(const sim_kv *kv) { return kv->w_fired; }

