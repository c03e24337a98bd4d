/* kv_manager.h: the KV block manager.
 *
 * Paged: a pool of fixed-size blocks handed out one at a time as a sequence grows. Prefix
 * cache (vLLM-style): each full block is named by a hash chained from its parent's hash and its
 * tokens; only full blocks are shared; blocks carry reference counts; unreferenced cached blocks
 * stay reusable until evicted, least recently used first. Sink + window: a sequence keeps its
 * first `sink` tokens and its last `window`; blocks wholly outside both are freed.
 * Contiguous: each sequence reserves its worst-case length at admission (block size 1); with
 * sink + window it is a ring of sink + window slots, so a reservation of that size holds any
 * position and a window can only shrink what a sequence reserves.
 * A model with sliding-window layers (sim_kv_set_groups): when every layer is windowed, blocks
 * the model's window has passed are freed like the sink + window's (with no sink); when only
 * some are, the pool is counted in layer-blocks (the `blocks` of every layer given to init times
 * the layers), a block costs its full layers while any sequence or the prefix cache holds it and
 * its windowed layers until its sequence's window passes it (vLLM V1's hybrid KV cache manager:
 * docs/simulator.md, "KV block manager"). The windowed layers' part of a prefix-cache hit is
 * charged to each sequence that takes it. Contiguous: windowed layers keep a ring of the model
 * window. */
#ifndef KVPLAN_SIM_KV_MANAGER_H
#define KVPLAN_SIM_KV_MANAGER_H

#include <stdbool.h>
#include <stdint.h>

typedef struct sim_kv sim_kv;

/* Block tables no sequence holds, kept for reuse: a stack threaded through the tables
 * themselves (each at least 8 entries), so keeping one costs nothing. The engine recycles a
 * finished request without its table: tables then follow the sequences that hold KV (about the
 * running batch), not every request alive, so a long waiting queue touches no table memory
 * (splitwise at 6.45 req/s: 1.3 MB less, 330 page faults fewer). */
typedef struct { void *top; } sim_kv_tables;

/* A sequence's KV state; zero-initialise, then set the token streams. */
typedef struct {
    int32_t *blocks;        /* logical block j -> block id, or -1 once dropped by the window */
    int n_blocks, cap;
    sim_kv_tables *spare;   /* where a sequence with no table takes one first (NULL: allocate) */
    long reserved;          /* contiguous: tokens reserved */
    long room;              /* positions [0, room) have space: blocks * block_size, or reserved */
    int hashed;             /* leading logical blocks whose chain hash is known */
    uint64_t chain;         /* hash of block hashed - 1 */
    int held_from;          /* first position still held outside the sink (window) */
    int dropped;            /* blocks the window has freed (their table entries are -1) */
    int slid;               /* model window: leading blocks whose windowed layers are freed */
    int wlive;              /* model window, two groups: blocks whose windowed layers are held */
    /* token streams (sim_token_id) */
    uint64_t prefix_seed, body_seed;
    int prefix_len;
    /* The block-size twin report (kv_twin.h): it holds its prefix group's whole chain (as of
     * the chain's generation twin_gen); its commits have passed its prefix. */
    int twin_gen;
    bool twin_holds, twin_past;
} sim_kv_seq;

sim_kv *sim_kv_init(long blocks, int block_size, bool paged, bool prefix_cache, int sink, int window);
void sim_kv_free(sim_kv *kv);
/* Declares the model's layer groups before anything is allocated: `full` layers keep every
 * position, `win` layers the last `window` (kv_groups_of, after init's pool of blocks of every
 * layer). No call, or win 0: one group. */
void sim_kv_set_groups(sim_kv *kv, int full, int win, int window);
/* Whether a model window frees KV as sequences grow (the fast-forward does not model it). */
bool sim_kv_windowed(const sim_kv *kv);
/* Whether the model window frees KV only when a commit reaches a block boundary (the window is
 * whole blocks; contiguous frees nothing) and in a way the order of sequences' commits and
 * releases within a step cannot change (layer-block counts, or no prefix cache): then a
 * fast-forward that commits each sequence as a block fills is exact. True with no window. */
bool sim_kv_slides_at_fills(const sim_kv *kv);

long sim_kv_total(const sim_kv *kv);        /* blocks of every layer (contiguous: tokens) */
int sim_kv_block_size(const sim_kv *kv);
long sim_kv_available(const sim_kv *kv);    /* free + evictable cached blocks (two groups: new
                                             * blocks of both groups that fit) */
long sim_kv_referenced(const sim_kv *kv);   /* blocks some sequence holds (two groups: layer-blocks
                                             * held / layers, rounded up) */
long sim_kv_cached(const sim_kv *kv);       /* blocks registered in the prefix cache */

/* The longest run of cached full blocks that starts the prompt, leaving at least the last
 * prompt token to compute; returns the tokens hit. With take, the sequence takes references on
 * those blocks; without, nothing changes and *from_free counts the hit blocks that are
 * currently unreferenced (admitting would take them out of the available pool). With offload
 * tiers (sim_kv_set_tiers), a block missing on the GPU but held by a tier is part of the run
 * too: taking it reloads it into a new block (counted in from_free, as it takes one from the
 * pool); sim_kv_tiers_drain tells how many came from each tier. */
int sim_kv_match_prefix(sim_kv *kv, sim_kv_seq *q, int prompt, bool take, long *from_free);
/* Blocks needed to hold positions [0, upto). */
long sim_kv_needed(const sim_kv *kv, const sim_kv_seq *q, int upto);
/* Paged: the most blocks a decoding sequence ever holds when a window frees whole blocks (the
 * cache's sink + window, or the model window with every layer windowed): ceil(sink / bs) +
 * ceil(window / bs) + 1 (a window straddles one block more than it fills); -1 when nothing
 * frees whole blocks (no window, contiguous, or full layers beside windowed ones). */
long sim_kv_window_blocks(const sim_kv *kv);
/* Makes room for positions [0, upto): 0, or -1 with nothing allocated. */
int sim_kv_grow(sim_kv *kv, sim_kv_seq *q, int upto);
/* Makes the sequence's block table hold `blocks` entries without reallocating as it grows (a
 * hint: -1 on out of memory, nothing changed, and growth reallocates as usual). */
int sim_kv_table_room(sim_kv_seq *q, long blocks);
/* Moves the sequence's table (if any; its KV released) onto the stack: q holds none after. */
void sim_kv_tables_put(sim_kv_tables *t, sim_kv_seq *q);
void sim_kv_tables_free(sim_kv_tables *t);
/* sim_kv_grow(kv, q, room + 1): room for the next position past the sequence's room. */
int sim_kv_grow_block(sim_kv *kv, sim_kv_seq *q);
/* sim_kv_grow_block on each of the n sequences in order (the same blocks, the same ids); returns
 * the room they gained in all, or -1 on failure (the ones before it grown). One call for a
 * fast-forwarded step's block crossings. */
long sim_kv_grow_blocks(sim_kv *kv, sim_kv_seq *const *q, int n);
/* Contiguous: reserves `tokens` for the sequence's lifetime; -1 if they are not free. */
int sim_kv_reserve(sim_kv *kv, sim_kv_seq *q, long tokens);
/* After positions [0, computed) hold KV: registers newly full blocks in the prefix cache and
 * frees blocks the window has passed. */
void sim_kv_commit(sim_kv *kv, sim_kv_seq *q, int computed);
/* Tokens of KV space the sequence occupies: its live blocks times the block size, or its
 * contiguous reservation. */
long sim_kv_seq_tokens(const sim_kv *kv, const sim_kv_seq *q);
/* Tokens whose KV the sequence holds, given `computed` positions (window applied). */
int sim_kv_held(const sim_kv *kv, const sim_kv_seq *q, int computed);
/* Fragmentation terms of a sequence once positions [0, computed) hold KV: *space, the KV space
 * it occupies, and *held, the part of it its layers keep (docs/simulator.md, "Fragmentation").
 * One layer kind: tokens (sim_kv_seq_tokens, sim_kv_held). Every layer windowed, paged: tokens,
 * held capped by the model window. Otherwise with a model window: layer-tokens, each layer
 * kind's space (live blocks, blocks its windowed layers hold, or the reservation and its ring)
 * and kept positions times its layer count. held <= space whenever the sequence's positions
 * [0, computed) have room. */
void sim_kv_frag_terms(const sim_kv *kv, const sim_kv_seq *q, int computed, long *space, long *held);
/* sim_kv_frag_terms' *space alone (it does not depend on the positions computed). */
long sim_kv_frag_space(const sim_kv *kv, const sim_kv_seq *q);
/* With no sink + window of the cache's own, kept KV is linear in the layer kinds:
 * held(n) = *full * n + *win * min(n, *window) (the fast-forward sums it over its slots in O(1));
 * false with a sink + window. */
bool sim_kv_frag_linear(const sim_kv *kv, long *full, long *win, long *window);
/* Speculative decoding's rollback: frees the blocks wholly past position `upto` (the KV of
 * rejected draft tokens). Contiguous reservations are for the sequence's lifetime: no change. */
void sim_kv_truncate(sim_kv *kv, sim_kv_seq *q, int upto);
/* Drops every reference the sequence holds; its table's buffer stays for reuse. */
void sim_kv_release(sim_kv *kv, sim_kv_seq *q);
/* Frees a released sequence's table buffer. */
void sim_kv_seq_free(sim_kv_seq *q);

/* ---- Watching a waiting request's prefix (the engine's fast-forward, docs/simulator.md) ----
 * Admission of a waiting request depends on the prefix cache only through its match: the walk
 * of its cached blocks (which of them are referenced) and where it stops. Between admission
 * attempts that walk changes only when the hash of the first block it missed is registered, or
 * when one of its hit blocks is evicted (a hit block referenced by a running sequence stays
 * referenced until that sequence leaves). The watch flags exactly those two events. */
enum { SIM_KV_WATCH_COMMIT = 1, SIM_KV_WATCH_EVICT = 2 };
/* Watches the match of sequence q (waiting, `prompt` tokens) as it is now: its hits and the
 * hash of the first block it misses; clears what was fired. 0, or -1 when it cannot watch
 * (no prefix cache, offload tiers or a model window, out of memory): the caller then assumes
 * the match may change at any time. */
int sim_kv_watch(sim_kv *kv, const sim_kv_seq *q, int prompt);
/* Stops watching (clears the flags). */
void sim_kv_unwatch(sim_kv *kv);
/* What happened since sim_kv_watch: SIM_KV_WATCH_COMMIT, the missed block's hash was
 * registered; SIM_KV_WATCH_EVICT, a hit block was evicted; 0, the match is as it was. */
int sim_kv_watch_fired(const sim_kv *kv);

/* ---- Offload tiers and swap (kv_tier.h) ---- */
typedef struct sim_kv_tiers sim_kv_tiers;
/* Hands the manager its tiers (it frees them): evicted prefix-cache blocks spill into them and
 * prefix matches reach into them. */
void sim_kv_set_tiers(sim_kv *kv, sim_kv_tiers *t);
sim_kv_tiers *sim_kv_tiers_of(const sim_kv *kv);
/* Swap preemption: copies the sequence's live blocks to the host swap area and releases them;
 * returns the blocks copied, or -1 (nothing changed) when the swap area cannot hold them. */
long sim_kv_swap_out(sim_kv *kv, sim_kv_seq *q);
/* Adds dt seconds of the tiers' current occupancy to their integrals. */
void sim_kv_account(sim_kv *kv, double dt);

/* ---- The block-size twin report (kv_twin.h) ---- */
struct sim_kv_twin;
/* Hands the manager a twin tracker (it frees it). */
void sim_kv_set_twin(sim_kv *kv, struct sim_kv_twin *t);
/* An admission waited for blocks (sched.c): the run's decisions depended on its block count. */
void sim_kv_note_blocked(sim_kv *kv);
/* The twins whose runs make the same decisions as this pool's (sim_kv_twin_same); 0 without a
 * tracker. */
unsigned sim_kv_twin_result(const sim_kv *kv);

#endif
