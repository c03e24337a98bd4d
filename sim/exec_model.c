/* exec_model.c: the predicting executor: a step takes the time the cost model says. */
#include "sim.h"
#include "../model/kv_blocks.h"
#include "../model/kv_moe_parallel.h"
#include "../model/kv_spec.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define SHAPE_MAX 4097   /* batch sizes 0..4096 have a cached shape (about 1 KB each) */
#define ROW_DENSE_MAX (1L << 17)   /* one-row steps at start 0 memoised by index up to this many new tokens (1 MiB) */
#define ROW_SLOTS 4096     /* the other one-row steps' memo: direct-mapped, 16 bytes a slot (64 KiB) */

typedef struct {
    const scn_scenario *s;
    kv_cache_cfg cfg;
    scn_attention attn;
    kv_seq_work *work;       /* cap rows, then cap rows of kv_spec scratch */
    int *drafts;             /* cap: speculative drafts verified per row */
    int *starts;             /* cap: a decode batch's positions (decode_by_sums) */
    int cap;
    long blocks;             /* the cost model's pool per replica */
    kv_step_cost *shape;     /* [n]: kv_step_shape of a plain decode step of n sequences, n <= max_num_seqs */
    kv_decode_plan *plan;    /* [n]: the same, prepared for kv_decode_plan_seconds */
    signed char *shaped;     /* [n]: 0 shape[n] not computed; 1 computed, each row splits once; 2 computed, splits vary */
    double *split_cap;       /* [n]: kv_decode_split_cap(s, n), with shape[n] (a step of rows that split prices it) */
    int n_shape;             /* entries in shape and shaped */
    /* The seconds of one-row steps that are not plain decode (a prompt's prefill, or a chunk of
     * one), memoised by (new tokens, start): kv_step_time is a pure function of the scenario,
     * the cache configuration, the attention kind and the rows, and such a step's one row is
     * (new tokens, start). Prompt lengths repeat (chat, 1M requests: 600k one-row prefill steps
     * over about 8,000 lengths; sums of several seldom do, so steps of more rows are priced whole),
     * and a hit returns the doubles the first pricing did: no shape copied, nothing recomputed.
     * Start 0 (no prefix hit, a first chunk) is indexed by new tokens; the rest direct-mapped.
     * Both are allocated zeroed on first use and fault in only the pages written: a short run
     * pays a few pages, and the memory stays bounded however long the run. 0 marks an empty
     * entry (a step that takes no time is never stored, only recomputed). */
    double *row0;            /* [new tokens], start 0; n_row0 entries */
    long n_row0;
    struct row_memo { int32_t tokens, start; double seconds; } *rows;   /* [ROW_SLOTS]; tokens 0: empty */
    /* The shapes of mixed steps (kv_step_shape): without verify rows a step's shape depends only
     * on its new tokens T and rows n (no row computes nothing, so T == n only when every row is
     * one token: the decode shape). Direct-mapped by (T, n), allocated on first use. */
    struct mixed_shape { long tokens; int n; kv_step_cost shape; } *mixed;
    bool sums;               /* decode steps from sums over their rows (kv_step_complete_decode) */
    bool sums_uncapped;      /* sums, and no layer caps its keys: decode_time can answer */
    double max_keys;         /* the bound on Σ keys under which those sums are exact */
    long kcap[2];            /* keys a layer of each kind (global, sliding) holds at most; 0: no cap */
    bool kind[2];            /* the model has layers of that kind */
    const scn_spec *sp;      /* speculative decoding, or NULL */
    scn_scenario *ps;        /* the proposer's scenario (NULL for n-gram or off) */
    bool moe;                /* expert / attention-DP parallel: kv_moe_step_time prices the step */
    kv_moe_ctx *mx;          /* with moe: its per-scenario context, or NULL (kv_moe_step_time) */
} model_ctx;

/* The shape of a plain decode step of n sequences, computed on first use; NULL when n is beyond
 * the table. *uniform: every row's split-KV count is 1 (the SMs are shared by more work items
 * than there are SMs), so the splits' sum is n. */
static const kv_step_cost *decode_shape(model_ctx *m, int n, bool *uniform)
{
    if (n < 1 || n >= m->n_shape) return NULL;
    if (!m->shaped[n]) {
        for (int i = 0; i < n; i++) m->work[i] = (kv_seq_work){1, 0};
        kv_step_shape(m->s, NULL, m->work, n, &m->shape[n]);
        kv_decode_plan_make(&m->shape[n], m->s, &m->cfg, n, &m->plan[n]);
        m->split_cap[n] = kv_decode_split_cap(m->s, n);
        m->shaped[n] = m->split_cap[n] <= 1 ? 1 : 2;
    }
    *uniform = m->shaped[n] == 1;
    return &m->shape[n];
}

/* The memo's entry for a one-row step of `tokens` new tokens from position `start` (see
 * model_ctx), allocated on first use; NULL when it cannot be had (the caller prices the step). */
static double *row_slot(model_ctx *m, long tokens, long start)
{
    if (tokens < 1 || start < 0 || tokens > INT32_MAX || start > INT32_MAX) return NULL;
    if (start == 0 && tokens < m->n_row0) {
        if (!m->row0 && !(m->row0 = calloc((size_t)m->n_row0, sizeof *m->row0))) m->n_row0 = 0;
        return m->row0 ? &m->row0[tokens] : NULL;
    }
    if (!m->rows && !(m->rows = calloc(ROW_SLOTS, sizeof *m->rows))) return NULL;
    uint64_t h = ((uint64_t)tokens * 0x9e3779b97f4a7c15ULL) ^ ((uint64_t)start * 0xc2b2ae3d27d4eb4fULL);
    struct row_memo *e = &m->rows[(h >> 40) & (ROW_SLOTS - 1)];
    if (e->tokens != (int32_t)tokens || e->start != (int32_t)start) *e = (struct row_memo){(int32_t)tokens, (int32_t)start, 0};
    return &e->seconds;
}

static int grow(model_ctx *m, int n)
{
    if (n <= m->cap) return 0;
    int cap = m->cap ? m->cap : 64;
    while (cap < n) cap *= 2;
    kv_seq_work *w = realloc(m->work, sizeof *w * (size_t)cap * 2);
    if (w) m->work = w;
    int *d = realloc(m->drafts, sizeof *d * (size_t)cap);
    if (d) m->drafts = d;
    int *st = realloc(m->starts, sizeof *st * (size_t)cap);
    if (st) m->starts = st;
    if (!w || !d || !st) return -1;
    m->cap = cap;
    return 0;
}

/* A decode step of n sequences from (n, Σ positions) alone: when no layer caps its keys and every
 * row splits once, the sums are keys = Σ positions + n and splits = n per layer kind. */
static int model_decode_time(void *ctx, long n, long sum_start, double *seconds)
{
    model_ctx *m = ctx;
    if (!m->sums_uncapped || n < 1 || n >= m->n_shape || (double)(sum_start + n) > m->max_keys) return 1;
    if (m->shaped[n] != 1) {   /* not yet shaped (grow first: the shape is priced on m->work), or rows split */
        bool uniform;
        if (m->shaped[n] == 2 || grow(m, (int)n) || !decode_shape(m, (int)n, &uniform) || !uniform) return 1;
    }
    double keys = (double)(sum_start + n);
    kv_decode_sums d = {{m->kind[0] ? keys : 0, m->kind[1] ? keys : 0}, {m->kind[0] ? (double)n : 0, m->kind[1] ? (double)n : 0}};
    *seconds = kv_decode_plan_seconds(&m->plan[n], &d);
    return 0;
}

/* The same from the rows' key sums per layer kind, when a kind caps its keys: what
 * decode_by_sums computes over the rows when every row splits once. */
static int model_decode_time_keys(void *ctx, long n, const long keys[2], double *seconds)
{
    model_ctx *m = ctx;
    if (!m->sums || n < 1 || n >= m->n_shape) return 1;
    if (m->shaped[n] != 1) {
        bool uniform;
        if (m->shaped[n] == 2 || grow(m, (int)n) || !decode_shape(m, (int)n, &uniform) || !uniform) return 1;
    }
    kv_decode_sums d = {{0, 0}, {0, 0}};
    for (int k = 0; k < 2; k++) {
        if (!m->kind[k]) continue;
        d.keys[k] = (double)keys[k];
        d.splits[k] = (double)n;
        if (d.keys[k] > m->max_keys) return 1;
    }
    *seconds = kv_decode_plan_seconds(&m->plan[n], &d);
    return 0;
}

/* A plain decode step from its rows' sums (one pass, no per-row cost model): n rows at
 * positions start[], in batch order. */
static bool decode_by_sums(model_ctx *m, int n, const int *start, double *seconds)
{
    bool uniform;
    const kv_step_cost *sh = decode_shape(m, n, &uniform);
    if (!sh) return false;
    double split_cap = uniform ? 1 : m->split_cap[n];
    kv_decode_sums d = {{0, 0}, {0, 0}};
    for (int k = 0; k < 2; k++) {
        if (!m->kind[k]) continue;
        long cap = m->kcap[k];
        long keys = 0;
        double splits = 0;
        for (int i = 0; i < n; i++) {
            long held = start[i] + 1;
            if (cap > 0 && held > cap) held = cap;
            keys += held;
            if (!uniform) splits += kv_decode_split((double)held, split_cap);
        }
        d.keys[k] = (double)keys;
        d.splits[k] = uniform ? (double)n : splits;
        if (d.keys[k] > m->max_keys) return false;
    }
    *seconds = kv_decode_plan_seconds(&m->plan[sh - m->shape], &d);
    return true;
}

/* model_run's price of a plain decode batch at positions starts[] when it takes decode_by_sums
 * (the same call on the same positions); 1 otherwise. */
static int model_decode_time_rows(void *ctx, int n, const int *starts, double *seconds)
{
    model_ctx *m = ctx;
    if (m->sp || m->moe || !m->sums || grow(m, n)) return 1;
    return decode_by_sums(m, n, starts, seconds) ? 0 : 1;
}

#define MIXED_SLOTS 256

/* The shape of a step of n rows computing T new tokens (T > n), from the memo (computed into it
 * on a miss from m->work's rows, whose first nd are set to decode rows then); NULL when the memo
 * cannot be had. */
static const kv_step_cost *mixed_shape(model_ctx *m, long T, int n, long nd)
{
    if (!m->mixed && !(m->mixed = calloc(MIXED_SLOTS, sizeof *m->mixed))) return NULL;
    uint64_t h = ((uint64_t)T * 0x9e3779b97f4a7c15ULL) ^ ((uint64_t)n * 0xc2b2ae3d27d4eb4fULL);
    struct mixed_shape *e = &m->mixed[(h >> 40) & (MIXED_SLOTS - 1)];
    if (e->tokens != T || e->n != n) {
        for (long i = 0; i < nd; i++) m->work[i] = (kv_seq_work){1, 0};   /* the shape reads new tokens only */
        kv_step_shape(m->s, NULL, m->work, n, &e->shape);
        e->tokens = T;
        e->n = n;
    }
    return &e->shape;
}

/* A mixed step: nd decode rows first, at positions summing to sum_start, then b's rows; priced
 * as model_run prices the whole batch (kv_step_time: its shape, then attention row by row), with
 * the decode rows' attention from their sums (kv_step_complete_led), which is exact when
 * kv_decode_sums_exact holds (m->sums) and each of them splits once. */
static int model_mixed_time(void *ctx, long nd, long sum_start, const sim_batch *b, double *seconds)
{
    model_ctx *m = ctx;
    if (!m->sums_uncapped || nd < 1 || nd >= m->n_shape || b->n < 1 || (double)(sum_start + nd) > m->max_keys) return 1;
    int n = (int)nd + b->n;
    if (grow(m, n)) return 1;
    long T = nd;
    int decoding = (int)nd;
    kv_seq_work *rows = m->work + nd;   /* m->work: nd decode rows, then b's */
    for (int i = 0; i < b->n; i++) {
        rows[i] = (kv_seq_work){b->seqs[i].new_tokens, b->seqs[i].start};
        T += b->seqs[i].new_tokens;
        decoding += b->seqs[i].new_tokens == 1;
    }
    double split_cap = decoding < m->n_shape && m->shaped[decoding] ? m->split_cap[decoding] : kv_decode_split_cap(m->s, decoding);
    if (split_cap > 1) return 1;   /* decode rows would split their keys */
    const kv_step_cost *sh;
    if (T == n) {   /* every row one token: the decode shape (a graph may replay it) */
        bool uniform;
        if (!(sh = decode_shape(m, n, &uniform))) return 1;
        for (int i = 0; i < b->n; i++) rows[i] = (kv_seq_work){b->seqs[i].new_tokens, b->seqs[i].start};   /* decode_shape wrote its own */
    } else if (!(sh = mixed_shape(m, T, n, nd)))
        return 1;
    double keys = (double)(sum_start + nd);
    kv_decode_lead lead = {(int)nd, {keys, keys}};
    *seconds = kv_step_complete_led(sh, m->s, &m->cfg, m->attn, &lead, rows, b->n).seconds;
    return 0;
}

/* An expert-parallel step of b's rows (in m->work): the step model's price of the rank's rows,
 * from the cached shape when the step is plain decode, then the experts and collectives from the
 * MoE context; kv_moe_step_time's doubles either way. */
static double moe_time(model_ctx *m, const sim_batch *b, bool decode)
{
    if (!m->mx) return kv_moe_step_time(m->s, &m->cfg, m->attn, m->work, b->n).seconds;
    bool uniform;
    const kv_step_cost *sh = decode && b->n < m->n_shape ? decode_shape(m, b->n, &uniform) : NULL;
    kv_step_cost base;
    if (sh) {
        for (int i = 0; i < b->n; i++) m->work[i] = (kv_seq_work){b->seqs[i].new_tokens, b->seqs[i].start};   /* decode_shape wrote its own */
        base = kv_step_complete(sh, m->s, &m->cfg, m->attn, m->work, NULL, b->n);
    } else
        base = kv_step_time(m->s, &m->cfg, m->attn, m->work, b->n);
    return kv_moe_step_of(m->mx, &base, m->work, NULL, b->n).seconds;
}

static int model_run(void *ctx, const sim_batch *b, double *seconds, char *err, size_t n)
{
    model_ctx *m = ctx;
    if (grow(m, b->n)) { snprintf(err, n, "out of memory"); return -1; }
    int d = 0;
    while (d < b->n && b->seqs[d].new_tokens == 1) d++;
    /* A plain decode step: only attention depends on the contexts, through sums over the rows
     * (model/kv_roofline.c, kv_step_complete_decode), and the rest of the step is priced once
     * per batch size; the result is kv_step_time's doubles, whichever path a step takes. */
    if (d == b->n && !m->sp && !m->moe && m->sums) {
        for (int i = 0; i < b->n; i++) m->starts[i] = b->seqs[i].start;
        if (decode_by_sums(m, b->n, m->starts, seconds)) return 0;
    }
    /* The cost model caps the attended context itself (sliding windows, sink + window), so it
     * takes each sequence's position count, not the tokens still held. */
    for (int i = 0; i < b->n; i++) {
        m->work[i] = (kv_seq_work){b->seqs[i].new_tokens, b->seqs[i].start};
        m->drafts[i] = b->seqs[i].draft;
    }
    if (d == b->n && !m->sp && !m->moe && b->n < m->n_shape) {
        /* A plain decode step whose sums would not be exact: the cached shape plus attention
         * over the rows, still kv_step_time's doubles. */
        bool uniform;
        const kv_step_cost *sh = decode_shape(m, b->n, &uniform);
        for (int i = 0; i < b->n; i++) m->work[i] = (kv_seq_work){b->seqs[i].new_tokens, b->seqs[i].start};
        *seconds = kv_step_complete(sh, m->s, &m->cfg, m->attn, m->work, NULL, b->n).seconds;
    } else if (m->sp)   /* speculative decoding: verify plus the proposer's passes (model/kv_spec.c) */
        *seconds = kv_spec_step_time(m->s, m->ps, m->sp, &m->cfg, m->attn, m->work, m->drafts, b->n,
                                     m->work + m->cap).seconds;
    else if (m->moe)   /* one attention-DP rank, experts over EP ranks */
        *seconds = moe_time(m, b, d == b->n);
    else if (b->n == 1) {   /* a one-row prefill step: memoised (model_ctx) */
        double *memo = row_slot(m, m->work[0].new_tokens, m->work[0].context);
        if (memo && *memo > 0) { *seconds = *memo; return 0; }
        *seconds = kv_step_time(m->s, &m->cfg, m->attn, m->work, 1).seconds;
        if (memo && *seconds > 0) *memo = *seconds;
    } else
        *seconds = kv_step_time(m->s, &m->cfg, m->attn, m->work, b->n).seconds;
    return 0;
}

static long model_blocks(void *ctx, int replica)
{
    (void)replica;
    return ((model_ctx *)ctx)->blocks;
}

static void model_free(void *ctx)
{
    model_ctx *m = ctx;
    if (!m) return;
    free(m->work);
    free(m->drafts);
    free(m->starts);
    free(m->shape);
    free(m->shaped);
    free(m->split_cap);
    free(m->plan);
    free(m->row0);
    free(m->rows);
    free(m->mixed);
    free(m->ps);
    kv_moe_ctx_free(m->mx);
    free(m);
}

long sim_executor_model_blocks(const scn_scenario *s, const sim_choice *c)
{
    kv_cache_cfg cfg = kv_cache_cfg_make(s, c->kv_dtype, c->sink, c->window);
    const scn_spec *sp = kv_spec_get(s, c->spec);
    bool paged = c->layout == SCN_LAYOUT_PAGED;
    if (!sp && kv_moe_parallel_on(s))   /* per attention-DP rank, experts sharded */
        return kv_moe_pool_size(s, &cfg, paged, c->block_size).blocks;
    return kv_spec_pool_size(s, &cfg, paged, c->block_size, sp).blocks;
}

int sim_executor_model(const scn_scenario *s, const sim_choice *c, sim_executor *out)
{
    model_ctx *m = calloc(1, sizeof *m);
    if (!m) return -1;
    m->s = s;
    m->cfg = kv_cache_cfg_make(s, c->kv_dtype, c->sink, c->window);
    m->attn = c->attention;
    m->sp = kv_spec_get(s, c->spec);
    if (m->sp) {
        m->ps = malloc(sizeof *m->ps);
        if (!m->ps) { free(m); return -1; }
        if (!kv_spec_proposer_scenario(s, m->sp, m->ps)) { free(m->ps); m->ps = NULL; }
    }
    m->moe = !m->sp && kv_moe_parallel_on(s);
    m->mx = m->moe ? kv_moe_ctx_make(s) : NULL;   /* NULL (out of memory) falls back to kv_moe_step_time */
    m->blocks = sim_executor_model_blocks(s, c);
    /* The shape table is filled as batch sizes occur, so a run allocates nothing per step;
     * larger batches than it holds (a bound on its memory) take kv_step_time. */
    int ns = s->deployment.max_num_seqs > 0 ? s->deployment.max_num_seqs + 1 : 0;
    if (ns > SHAPE_MAX) ns = SHAPE_MAX;
    m->shape = ns ? malloc(sizeof *m->shape * (size_t)ns) : NULL;
    m->shaped = ns ? calloc((size_t)ns, sizeof *m->shaped) : NULL;
    m->plan = ns ? malloc(sizeof *m->plan * (size_t)ns) : NULL;
    m->split_cap = ns ? malloc(sizeof *m->split_cap * (size_t)ns) : NULL;
    if (ns && (!m->shape || !m->shaped || !m->plan || !m->split_cap)) {
        free(m->shape); free(m->shaped); free(m->plan); free(m->split_cap); free(m->ps); kv_moe_ctx_free(m->mx); free(m);
        return -1;
    }
    m->n_shape = ns;
    m->n_row0 = s->deployment.max_model_len > 0 ? s->deployment.max_model_len + 1L : 0;
    if (m->n_row0 > ROW_DENSE_MAX) m->n_row0 = ROW_DENSE_MAX;
    /* Decode steps from sums over their rows when every addition in them is exact for batches up
     * to the table's size and contexts up to max_model_len (kv_decode_sums_exact). */
    long ctx = s->deployment.max_model_len > 0 ? s->deployment.max_model_len : 0;
    m->sums = ns > 1 && ctx > 0 && kv_decode_sums_exact(s, &m->cfg, c->attention, ns - 1, ctx);
    m->max_keys = (double)(ns - 1) * ((double)ctx + 1);
    for (int k = 0; k < 2; k++) m->kcap[k] = kv_decode_cap(s, &m->cfg, k);
    m->sums_uncapped = m->sums && !m->kcap[0] && !m->kcap[1];
    m->kind[0] = s->model.layers - s->model.sliding_layers > 0;
    m->kind[1] = s->model.sliding_layers > 0;
    /* The O(1) decode time (and with it fast-forward without forming each batch) prices plain
     * decode steps only: not a speculative step's drafts and verify, nor an expert-parallel step. */
    *out = (sim_executor){.name = "model", .ctx = m, .run = model_run, .kv_blocks = model_blocks, .free = model_free,
                          .decode_time = m->sp || m->moe ? NULL : model_decode_time,
                          .decode_time_keys = m->sp || m->moe ? NULL : model_decode_time_keys,
                          .decode_time_rows = m->sp || m->moe ? NULL : model_decode_time_rows,
                          .mixed_time = m->sp || m->moe ? NULL : model_mixed_time,
                          .key_cap = {m->kcap[0], m->kcap[1]}};
    return 0;
}

int sim_run_predicted(const scn_scenario *s, const sim_choice *c, sim_metrics *m, char *err, size_t n)
{
    sim_executor ex;
    if (sim_executor_model(s, c, &ex)) { snprintf(err, n, "out of memory"); return SIM_E_INTERNAL; }
    sim_run_opts o = {.seed = s->seed};
    int rc = sim_run(s, c, &ex, &o, m, err, n);
    ex.free(ex.ctx);
    return rc;
}
