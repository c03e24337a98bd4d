/* kv_twin.c: the block-size twin report (kv_twin.h; the proof is in docs/planner.md,
 * "Block-size twins").
 *
 * World B is this run; world b a run of the same scenario whose only difference is its block
 * size b and so its pool of N_b blocks (watermark N_b / 100). Suppose both have made the same
 * decisions so far (induction over the run's events). Then both have admitted the same requests
 * with the same prefix hits (in tokens, multiples of both sizes), and every sequence i alive has
 * asked its pool for the same positions x_i. What can still differ:
 *
 * 1. An allocation or admission that waits for blocks in one world and not the other. World B
 *    never waits (else the tracker turns off: nothing is shared). In world b a sequence holds
 *    ceil(x_i / b) blocks, of which its hit h_i / b are the prefix chain's, shared; its others
 *    were allocated to it alone. So b R_b <= sum (x_i - h_i + b - 1) + sum over prefix groups of
 *    the chain tokens held, while B R_B >= sum (x_i - h_i) (its own blocks are distinct). With M
 *    = max_num_seqs (at most that many sequences hold KV) and P = the sum over groups of the
 *    longest prefix extent committed: b R_b <= B R_B + M (b - 1) + P. Every admission or growth
 *    in world b succeeds when its referenced count after it plus the watermark fits the pool, so
 *    B peak(R_B) + M (b - 1) + P <= b (N_b - N_b / 100) rules out waiting (sim_kv_twin_same),
 *    and ceil(max_model_len / b) <= N_b - N_b / 100 the "never fits" refusal.
 *
 * 2. A prefix hit. Only whole blocks of a group's shared prefix stream can hit (a block with a
 *    request's own tokens has a hash no other request makes; conversations, whose turns share a
 *    stream, are declined). A chain block j is registered when some sequence first commits past
 *    (j + 1) b, and stays until evicted. E, the longest prefix extent any sequence of the group
 *    has committed, is the same in both worlds. If no chain block was evicted, the walk finds
 *    F_b = b floor(min(E, prefix, prompt - 1) / b) tokens. World B's hit is observed; it must be
 *    F_B (else world B evicted part of a chain: the tracker turns off), and each twin's F_b must
 *    equal it. Then the chain must still be there in world b:
 *    - while a running sequence holds the whole chain (a hit of all of it, or the sequence that
 *      registered all of it), no block of it can be evicted (holders, nh);
 *    - when the last holder releases it (time s), its blocks go to the LRU list's tail, behind
 *      every other unreferenced block (a release frees newest first). Evicting one then takes
 *      every block unreferenced at s, at least N_b - R_b(s) - F_b / b of them, to be allocated or
 *      re-hit first. Up to time t world b allocates at most (B (A + S) + b S) / b blocks, A the
 *      blocks world B allocated since s and S = M + admissions since s (a sequence whose
 *      extent grows by d between two moments takes at most d / b + 1 blocks in world b, and d
 *      <= B (its allocations in world B + 1), or d <= B x its allocations for one admitted
 *      since, whose hit blocks come free), and re-hits at most the hit tokens since s over b. So
 *      the chain is whole at t when B (A + S) + b S + hits + F_b + B R_B(s) + M (b - 1) + P
 *      < b N_b (present()). Otherwise that twin is declined.
 *    When E grows, the sequence that commits past it holds the new part; if it also held the
 *    whole old chain (or there was none) it is the only holder of the new one; else the chain is
 *    held jointly and the bound restarts now if the old part was held, or the group is lost for
 *    every twin (a later hit of it declines them).
 *
 * 3. Nothing else: the cost model prices a step from its rows' tokens and positions alone, not
 *    block tables (sim/exec_model.c), and the scheduler's other limits (max_num_seqs, the token
 *    budget) do not count blocks. */
#include "kv_twin.h"
#include "../model/kv_spec.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t seed;           /* the group's prefix stream */
    bool used;
    long E;                  /* the longest prefix extent committed (tokens) */
    int gen;                 /* bumped whenever E grows: holders of older chains no longer count */
    long nh;                 /* running sequences holding the whole current chain */
    unsigned lost;           /* twins for which the chain may be gone */
    bool snap;               /* a snapshot is set (the chain was whole when the last holder left) */
    long s_alloc, s_takes, s_hits, s_ref;   /* counters at that moment */
} twin_group;

struct sim_kv_twin {
    int B;                   /* this run's block size */
    int n;
    int bs[SIM_TWINS_MAX];
    long N[SIM_TWINS_MAX];   /* each twin's pool, blocks */
    long M;                  /* max_num_seqs: sequences holding KV at once */
    long max_len;            /* max_model_len */
    unsigned alive;          /* twins not yet shown (or feared) to differ */
    bool off;                /* world B waited for blocks or lost a chain: nothing is claimed */
    long takes, hits;        /* admissions that took a prefix match, and the tokens they hit */
    long P;                  /* sum of the groups' extents */
    twin_group *g;           /* open addressing on the seed, at most half full */
    long g_cap, g_n;
};

sim_kv_twin *sim_kv_twin_new(int bs, int n, const int *twin_bs, const long *twin_blocks, long max_seqs, long max_len)
{
    sim_kv_twin *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->B = bs;
    t->M = max_seqs > 0 ? max_seqs : 1;
    t->max_len = max_len;
    for (int i = 0; i < n && i < SIM_TWINS_MAX; i++) {
        t->bs[t->n] = twin_bs[i];
        t->N[t->n] = twin_blocks[i];
        if (twin_bs[i] >= 1 && twin_blocks[i] > 0) t->alive |= 1u << t->n;
        t->n++;
    }
    return t;
}

void sim_kv_twin_free(sim_kv_twin *t)
{
    if (!t) return;
    free(t->g);
    free(t);
}

void sim_kv_twin_blocked(sim_kv_twin *t)
{
    if (t) t->off = true;
}

static long group_home(const sim_kv_twin *t, uint64_t seed)
{
    return (long)((seed * 0x9e3779b97f4a7c15ULL) >> 20) & (t->g_cap - 1);
}

static twin_group *group_find(const sim_kv_twin *t, uint64_t seed)
{
    if (!t->g_cap) return NULL;
    for (long i = group_home(t, seed);; i = (i + 1) & (t->g_cap - 1)) {
        if (!t->g[i].used) return NULL;
        if (t->g[i].seed == seed) return &t->g[i];
    }
}

/* The group of `seed`, created (E 0) when new; NULL on out of memory (the tracker is then off). */
static twin_group *group_get(sim_kv_twin *t, uint64_t seed)
{
    twin_group *x = group_find(t, seed);
    if (x) return x;
    if (2 * (t->g_n + 1) > t->g_cap) {
        long cap = t->g_cap ? 2 * t->g_cap : 16;
        twin_group *ng = calloc((size_t)cap, sizeof *ng), *old = t->g;
        if (!ng) { t->off = true; return NULL; }
        long ocap = t->g_cap;
        t->g = ng;
        t->g_cap = cap;
        for (long i = 0; i < ocap; i++) {
            if (!old[i].used) continue;
            long j = group_home(t, old[i].seed);
            while (t->g[j].used) j = (j + 1) & (cap - 1);
            t->g[j] = old[i];
        }
        free(old);
    }
    long j = group_home(t, seed);
    while (t->g[j].used) j = (j + 1) & (t->g_cap - 1);
    t->g[j] = (twin_group){.seed = seed, .used = true};
    t->g_n++;
    return &t->g[j];
}

/* Whether twin i's copy of group g's chain (fb tokens of it needed) is certainly whole now,
 * with no holder since the snapshot (point 2 of the proof above). */
static bool present(const sim_kv_twin *t, const twin_group *g, int i, long fb, long alloc)
{
    if (!g->snap || (g->lost >> i) & 1) return false;
    long b = t->bs[i], B = t->B;
    long S = t->M + (t->takes - g->s_takes);
    long need = B * ((alloc - g->s_alloc) + S) + b * S + (t->hits - g->s_hits) + fb + B * g->s_ref + t->M * (b - 1) + t->P;
    return need < b * t->N[i];
}

static long floor_to(long x, long b) { return x / b * b; }

void sim_kv_twin_match(sim_kv_twin *t, sim_kv_seq *q, int prompt, int hit, bool take, long alloc)
{
    if (!t || t->off || !t->alive) return;
    long plen = q->prefix_len;
    if (plen <= 0) {   /* only a shared prefix can hit (kv_twin.c, point 2) */
        if (hit != 0) t->off = true;
        if (take) t->takes++;
        return;
    }
    twin_group *g = group_find(t, q->prefix_seed);
    long E = g ? g->E : 0, X = E;
    if (X > plen) X = plen;
    if (X > (long)prompt - 1) X = (long)prompt - 1;
    if (X < 0) X = 0;
    if (hit != floor_to(X, t->B)) { t->off = true; return; }   /* world B lost part of a chain */
    for (int i = 0; i < t->n; i++) {
        if (!((t->alive >> i) & 1)) continue;
        long fb = floor_to(X, t->bs[i]);
        if (fb != hit || (fb > 0 && g->nh == 0 && !present(t, g, i, fb, alloc))) t->alive &= ~(1u << i);
    }
    if (!take) return;
    t->takes++;
    t->hits += hit;
    /* It holds the whole chain when its hit is all of it, in every world. */
    if (g && hit > 0 && X == E) {
        q->twin_holds = true;
        q->twin_gen = g->gen;
        g->nh++;
    }
}

/* The moment the chain is known whole with each of its blocks referenced or at the LRU tail. */
static void snapshot(const sim_kv_twin *t, twin_group *g, long alloc, long ref)
{
    g->snap = true;
    g->lost = 0;
    g->s_alloc = alloc;
    g->s_takes = t->takes;
    g->s_hits = t->hits;
    g->s_ref = ref;
}

void sim_kv_twin_commit(sim_kv_twin *t, sim_kv_seq *q, int computed, long alloc, long ref)
{
    if (!t || t->off || q->twin_past || q->prefix_len <= 0) return;
    long pe = computed < q->prefix_len ? computed : q->prefix_len;
    if (pe >= q->prefix_len) q->twin_past = true;   /* its later commits are past the prefix */
    twin_group *g = group_get(t, q->prefix_seed);
    if (!g || pe <= g->E) return;
    long E0 = g->E;
    bool whole = E0 == 0 || (q->twin_holds && q->twin_gen == g->gen);
    t->P += pe - E0;
    g->E = pe;
    g->gen++;
    if (whole) {   /* it holds the old chain and registered the new part: the only holder */
        g->nh = 1;
        q->twin_holds = true;
        q->twin_gen = g->gen;
        return;
    }
    /* Held jointly: the new part by q, the old part by its holders if there are any (every
     * chain block is referenced now: the bound starts here), else it may be gone already. */
    if (g->nh > 0) snapshot(t, g, alloc, ref);
    else { g->snap = false; g->lost = ~0u; }
    g->nh = 0;
    q->twin_holds = false;
}

void sim_kv_twin_release(sim_kv_twin *t, sim_kv_seq *q, long alloc, long ref)
{
    if (!t) return;
    if (q->twin_holds && !t->off) {
        twin_group *g = group_find(t, q->prefix_seed);
        if (g && q->twin_gen == g->gen && --g->nh == 0) {
            snapshot(t, g, alloc, ref);   /* the last holder left: the chain's blocks at the LRU tail */
        }
    }
    q->twin_holds = false;
    q->twin_past = false;
}

unsigned sim_kv_twin_same(const sim_kv_twin *t, long ref_peak)
{
    if (!t || t->off) return 0;
    unsigned same = 0;
    for (int i = 0; i < t->n; i++) {
        if (!((t->alive >> i) & 1)) continue;
        long b = t->bs[i], N = t->N[i], room = N - N / 100;
        bool fits = (long)t->B * ref_peak + t->M * (b - 1) + t->P <= b * room;
        bool longest = t->max_len > 0 && (t->max_len - 1) / b + 1 <= room;
        if (fits && longest) same |= 1u << i;
    }
    return same;
}

int sim_twin_attach(sim_kv *kv, const scn_scenario *s, const sim_choice *c, const sim_executor *ex,
                    const sim_run_opts *o)
{
    const sim_twin_report *r = o->twins;
    if (!r || r->n <= 0) return 0;
    /* What the proof covers (kv_twin.c): paged blocks with nothing but whole-sequence
     * growth and the prefix cache deciding their count; a pool the planner sizes. */
    if (ex->measured || o->kv_blocks_override > 0 || c->layout != SCN_LAYOUT_PAGED) return 0;
    if (c->scheduler == SCN_SCHED_STATIC || c->window > 0 || sim_kv_windowed(kv)) return 0;
    if (kv_spec_get(s, c->spec) || c->kv_offload != SCN_OFFLOAD_OFF || c->preemption == SCN_PREEMPT_SWAP) return 0;
    if (s->engine.no_evict || s->engine.adm_reserve || s->deployment.disagg.on) return 0;   /* counted in tokens */
    if (c->prefix_cache && s->workload.turns > 1) return 0;   /* a conversation's turns share their stream */
    if (s->deployment.max_model_len <= 0 || s->deployment.max_num_seqs <= 0) return 0;
    sim_kv_twin *t = sim_kv_twin_new(c->block_size, r->n < SIM_TWINS_MAX ? r->n : SIM_TWINS_MAX, r->block_size, r->blocks,
                                     s->deployment.max_num_seqs, s->deployment.max_model_len);
    if (!t) return -1;
    sim_kv_set_twin(kv, t);
    return 0;
}
