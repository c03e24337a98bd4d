/* test_kv_manager.c: the block manager's sharing, reference counting, eviction order and
 * windowing, traced by hand on pools of a few blocks; and the ids handed out, against a plain
 * stack of every block. */
#include "tests.h"
#include "../sim/kv_manager.h"
#include "../sim/rng.h"
#include "../sim/sim.h"

#include <string.h>

static sim_kv_seq seq(uint64_t prefix_seed, int prefix_len, uint64_t body_seed)
{
    sim_kv_seq q;
    memset(&q, 0, sizeof q);
    q.prefix_seed = prefix_seed;
    q.prefix_len = prefix_len;
    q.body_seed = body_seed;
    return q;
}

START_TEST(paged_allocates_on_demand)
{
    sim_kv *kv = sim_kv_init(10, 16, true, false, 0, 0);
    sim_kv_seq a = seq(1, 0, 2);
    ck_assert_int_eq(sim_kv_needed(kv, &a, 17), 2);
    ck_assert_int_eq(sim_kv_grow(kv, &a, 17), 0);
    ck_assert_int_eq(sim_kv_referenced(kv), 2);
    ck_assert_int_eq(sim_kv_grow(kv, &a, 32), 0);          /* still 2 blocks */
    ck_assert_int_eq(sim_kv_referenced(kv), 2);
    ck_assert_int_eq(sim_kv_grow(kv, &a, 161), -1);        /* 11 blocks: more than the pool */
    ck_assert_int_eq(sim_kv_referenced(kv), 2);            /* nothing allocated on failure */
    sim_kv_release(kv, &a); sim_kv_seq_free(&a);
    ck_assert_int_eq(sim_kv_available(kv), 10);
    sim_kv_free(kv);
}
END_TEST

START_TEST(prefix_cache_shares_full_blocks_only)
{
    sim_kv *kv = sim_kv_init(20, 16, true, true, 0, 0);
    /* Two sequences share a 40-token prefix (2 full blocks + 8 tokens) and differ after it. */
    sim_kv_seq a = seq(7, 40, 100), b = seq(7, 40, 200);
    ck_assert_int_eq(sim_kv_match_prefix(kv, &a, 60, true, NULL), 0);   /* cold */
    ck_assert_int_eq(sim_kv_grow(kv, &a, 60), 0);
    sim_kv_commit(kv, &a, 60);                                          /* 3 full blocks registered */
    ck_assert_int_eq(sim_kv_cached(kv), 3);
    long from_free;
    ck_assert_int_eq(sim_kv_match_prefix(kv, &b, 60, false, &from_free), 32);   /* block 3 holds a's own tokens */
    ck_assert_int_eq(from_free, 0);                                     /* a still holds them */
    ck_assert_int_eq(sim_kv_match_prefix(kv, &b, 60, true, NULL), 32);
    ck_assert_int_eq(sim_kv_referenced(kv), 4);                         /* 2 shared + a's other 2 */
    ck_assert_int_eq(sim_kv_grow(kv, &b, 60), 0);
    ck_assert_int_eq(sim_kv_referenced(kv), 6);
    ck_assert_int_eq(b.blocks[0], a.blocks[0]);
    ck_assert_int_eq(b.blocks[1], a.blocks[1]);
    ck_assert_int_ne(b.blocks[2], a.blocks[2]);
    /* Releasing a keeps the shared blocks referenced by b. */
    sim_kv_release(kv, &a); sim_kv_seq_free(&a);
    ck_assert_int_eq(sim_kv_referenced(kv), 4);
    /* A prompt that is exactly the cached blocks still computes its last token. */
    sim_kv_seq c = seq(7, 40, 300);
    ck_assert_int_eq(sim_kv_match_prefix(kv, &c, 32, false, NULL), 16);
    sim_kv_release(kv, &b); sim_kv_seq_free(&b);
    sim_kv_free(kv);
}
END_TEST

/* Block hashes inside a prefix stream are memoised per stream (kv_manager.c, chain_hash): a hit
 * must not depend on whether the hash came from the memo or was computed, on streams that share
 * a memo slot (600 streams > its 256 slots), or on one seed used with other prefix lengths. */
START_TEST(prefix_hashes_do_not_depend_on_the_memo)
{
    enum { STREAMS = 600 };
    sim_kv *kv = sim_kv_init(4 * STREAMS + 64, 16, true, true, 0, 0);
    static sim_kv_seq held[STREAMS];
    for (int i = 0; i < STREAMS; i++) {      /* each registers 2 prefix blocks and 1 body block */
        held[i] = seq(1000 + (uint64_t)i, 32, 5000 + (uint64_t)i);
        ck_assert_int_eq(sim_kv_match_prefix(kv, &held[i], 48, true, NULL), 0);
        ck_assert_int_eq(sim_kv_grow(kv, &held[i], 48), 0);
        sim_kv_commit(kv, &held[i], 48);
    }
    ck_assert_int_eq(sim_kv_cached(kv), 3 * STREAMS);
    for (int i = 0; i < STREAMS; i++) {      /* every stream's two prefix blocks, whatever the memo kept */
        sim_kv_seq q = seq(1000 + (uint64_t)i, 32, 9000);
        ck_assert_int_eq(sim_kv_match_prefix(kv, &q, 48, false, NULL), 32);
    }
    /* The same tokens as a body stream: ids depend on (seed, position) only, so stream 1000's
     * prefix is also the first 32 tokens of a request whose body seed is 1000, and its body
     * block (seed 5000 from position 32) is not. */
    sim_kv_seq body = seq(0, 0, 1000);
    ck_assert_int_eq(sim_kv_match_prefix(kv, &body, 48, false, NULL), 32);
    /* Seed 1000 with a 16-token prefix: block 1 comes from the body stream, so only block 0 hits,
     * and afterwards the 32-token prefix still hits in full. */
    sim_kv_seq shorter = seq(1000, 16, 9001);
    ck_assert_int_eq(sim_kv_match_prefix(kv, &shorter, 48, false, NULL), 16);
    sim_kv_seq again = seq(1000, 32, 9002);
    ck_assert_int_eq(sim_kv_match_prefix(kv, &again, 48, false, NULL), 32);
    /* A prefix that is the first stream's and then the body stream 5000: all three blocks. */
    sim_kv_seq whole = seq(1000, 32, 5000);
    ck_assert_int_eq(sim_kv_match_prefix(kv, &whole, 49, false, NULL), 48);
    for (int i = 0; i < STREAMS; i++) { sim_kv_release(kv, &held[i]); sim_kv_seq_free(&held[i]); }
    sim_kv_free(kv);
}
END_TEST

/* A request counted again while it waits starts from its last walk's hits that are still
 * registered (kv_manager.c, still_cached). Its counts must be a fresh walk's, by hand and against
 * a fresh request of the same streams, as the cache around it changes: a block past its walk
 * registered (the walk goes on), its hits referenced by another sequence (none is free), and
 * one of them evicted (the walk ends before it). */
START_TEST(a_waiting_request_counted_again_matches_a_fresh_walk)
{
    sim_kv *kv = sim_kv_init(8, 16, true, true, 0, 0);
    sim_kv_seq a = seq(7, 64, 70);
    ck_assert_int_eq(sim_kv_grow(kv, &a, 64), 0);
    sim_kv_commit(kv, &a, 64);                   /* stream 7's four prefix blocks cached */
    sim_kv_release(kv, &a); sim_kv_seq_free(&a);
    sim_kv_seq q = seq(7, 64, 71);               /* waits with a 100-token prompt: 6 blocks to walk */
    long free1, free2;
    ck_assert_int_eq(sim_kv_match_prefix(kv, &q, 100, false, &free1), 64);
    ck_assert_int_eq(free1, 4);
    /* b shares q's body stream: it takes the four and registers block 4 (tokens 64-79). */
    sim_kv_seq b = seq(7, 64, 71);
    ck_assert_int_eq(sim_kv_match_prefix(kv, &b, 80, true, NULL), 64);
    ck_assert_int_eq(sim_kv_grow(kv, &b, 80), 0);
    sim_kv_commit(kv, &b, 80);
    ck_assert_int_eq(sim_kv_match_prefix(kv, &q, 100, false, &free1), 80);
    ck_assert_int_eq(free1, 0);                  /* b holds all five */
    sim_kv_seq fresh = seq(7, 64, 71);
    ck_assert_int_eq(sim_kv_match_prefix(kv, &fresh, 100, false, &free2), 80);
    ck_assert_int_eq(free2, 0);
    /* b leaves (five cached, three never used); d takes four blocks, evicting one cached. */
    sim_kv_release(kv, &b); sim_kv_seq_free(&b);
    ck_assert_int_eq(sim_kv_match_prefix(kv, &q, 100, false, &free1), 80);
    ck_assert_int_eq(free1, 5);
    sim_kv_seq d = seq(99, 0, 98);
    ck_assert_int_eq(sim_kv_grow(kv, &d, 64), 0);
    ck_assert_int_eq(sim_kv_cached(kv), 4);
    int hit = sim_kv_match_prefix(kv, &q, 100, false, &free1);
    sim_kv_seq fresh2 = seq(7, 64, 71);
    ck_assert_int_eq(sim_kv_match_prefix(kv, &fresh2, 100, false, &free2), hit);
    ck_assert_int_eq(free1, free2);
    ck_assert_int_lt(hit, 80);
    ck_assert_int_eq(free1, hit / 16);           /* what is left of the walk is unreferenced */
    sim_kv_release(kv, &d); sim_kv_seq_free(&d);
    sim_kv_free(kv);
}
END_TEST

START_TEST(unreferenced_cached_blocks_are_evicted_lru)
{
    sim_kv *kv = sim_kv_init(4, 16, true, true, 0, 0);
    sim_kv_seq a = seq(1, 32, 11), b = seq(2, 32, 12);
    sim_kv_grow(kv, &a, 32); sim_kv_commit(kv, &a, 32); sim_kv_release(kv, &a); sim_kv_seq_free(&a);   /* a's 2 blocks cached */
    sim_kv_grow(kv, &b, 32); sim_kv_commit(kv, &b, 32); sim_kv_release(kv, &b); sim_kv_seq_free(&b);   /* b's 2 blocks cached */
    ck_assert_int_eq(sim_kv_cached(kv), 4);
    ck_assert_int_eq(sim_kv_available(kv), 4);   /* cached but unreferenced blocks are reusable */
    /* A new sequence needing 2 blocks evicts the least recently used: a's. */
    sim_kv_seq c = seq(3, 0, 13);
    ck_assert_int_eq(sim_kv_grow(kv, &c, 32), 0);
    ck_assert_int_eq(sim_kv_cached(kv), 2);
    sim_kv_seq a2 = seq(1, 32, 14), b2 = seq(2, 32, 15);
    ck_assert_int_eq(sim_kv_match_prefix(kv, &a2, 40, false, NULL), 0);    /* a's blocks are gone */
    long from_free;
    ck_assert_int_eq(sim_kv_match_prefix(kv, &b2, 40, false, &from_free), 32);  /* b's survive */
    ck_assert_int_eq(from_free, 2);
    sim_kv_release(kv, &c); sim_kv_seq_free(&c);
    sim_kv_free(kv);
}
END_TEST

START_TEST(window_frees_blocks_behind_it)
{
    /* sink 4 + window 60, block 16: blocks wholly outside [0, 4) and the last 60 are freed. */
    sim_kv *kv = sim_kv_init(100, 16, true, false, 4, 60);
    sim_kv_seq a = seq(0, 0, 5);
    for (int t = 1; t <= 1000; t++) {
        ck_assert_int_eq(sim_kv_grow(kv, &a, t), 0);
        sim_kv_commit(kv, &a, t);
        /* sink block + the blocks overlapping the last 60 tokens (at most 5) + the block in progress */
        ck_assert_msg(sim_kv_referenced(kv) <= 1 + 5 + 1, "t=%d holds %ld blocks", t, sim_kv_referenced(kv));
    }
    ck_assert_int_eq(sim_kv_held(kv, &a, 1000), 64);
    ck_assert_int_eq(sim_kv_held(kv, &a, 50), 50);
    sim_kv_release(kv, &a); sim_kv_seq_free(&a);
    ck_assert_int_eq(sim_kv_available(kv), 100);
    sim_kv_free(kv);
}
END_TEST

START_TEST(contiguous_reserves_up_front)
{
    sim_kv *kv = sim_kv_init(1000, 16, false, false, 0, 0);   /* 1000 token slots */
    sim_kv_seq a = seq(0, 0, 1), b = seq(0, 0, 2);
    ck_assert_int_eq(sim_kv_reserve(kv, &a, 600), 0);
    ck_assert_int_eq(sim_kv_reserve(kv, &b, 600), -1);
    ck_assert_int_eq(sim_kv_grow(kv, &a, 500), 0);           /* within its reservation */
    ck_assert_int_eq(sim_kv_referenced(kv), 600);
    sim_kv_release(kv, &a); sim_kv_seq_free(&a);
    ck_assert_int_eq(sim_kv_reserve(kv, &b, 600), 0);
    sim_kv_release(kv, &b); sim_kv_seq_free(&b);
    sim_kv_free(kv);
}
END_TEST

/* Blocks are handed out in runs (sim_kv_grow) but in the order of the simplest model of a
 * pool: one stack of every free id, 0 on top at the start; a grow pops one id per block, a
 * release pushes the sequence's blocks newest first, a truncate its tail newest first. A
 * random mix of grows, truncates and releases over a few sequences must give each sequence
 * exactly the ids that stack gives, and fail (changing nothing) when the stack runs short. */
START_TEST(block_ids_follow_one_stack_of_every_block)
{
    enum { N = 300, SEQS = 6, BS = 4 };
    sim_kv *kv = sim_kv_init(N, BS, true, false, 0, 0);
    sim_kv_seq q[SEQS];
    int ref[SEQS][N], nref[SEQS] = {0}, tokens[SEQS] = {0};
    int stack[N], top = N;
    for (int i = 0; i < N; i++) stack[i] = N - 1 - i;
    for (int s = 0; s < SEQS; s++) q[s] = seq(1, 0, (uint64_t)s + 7);
    sim_rng r;
    sim_rng_seed(&r, 42);
    int fails = 0;
    for (int step = 0; step < 4000; step++) {
        int s = (int)(sim_rng_next(&r) % SEQS), op = (int)(sim_rng_next(&r) % 10);
        if (op < 7) {   /* grow by 1 to 120 tokens */
            int upto = tokens[s] + 1 + (int)(sim_rng_next(&r) % 120);
            int want = (upto + BS - 1) / BS - nref[s];
            int rc = sim_kv_grow(kv, &q[s], upto);
            if (want > top) { ck_assert_int_eq(rc, -1); fails++; }
            else {
                ck_assert_int_eq(rc, 0);
                for (int k = 0; k < want; k++) ref[s][nref[s]++] = stack[--top];
                tokens[s] = upto;
            }
        } else if (op < 8) {   /* truncate to half */
            int upto = tokens[s] / 2, keep = (upto + BS - 1) / BS;
            sim_kv_truncate(kv, &q[s], upto);
            while (nref[s] > keep) stack[top++] = ref[s][--nref[s]];
            tokens[s] = upto;
        } else {
            sim_kv_release(kv, &q[s]);
            while (nref[s] > 0) stack[top++] = ref[s][--nref[s]];
            tokens[s] = 0;
        }
        ck_assert_int_eq(q[s].n_blocks, nref[s]);
        for (int k = 0; k < nref[s]; k++) ck_assert_int_eq(q[s].blocks[k], ref[s][k]);
        ck_assert_int_eq(sim_kv_available(kv), top);
    }
    ck_assert_int_gt(fails, 10);   /* the pool ran short often enough to test failing */
    for (int s = 0; s < SEQS; s++) { sim_kv_release(kv, &q[s]); sim_kv_seq_free(&q[s]); }
    ck_assert_int_eq(sim_kv_available(kv), N);
    sim_kv_free(kv);
}
END_TEST

/* Spare block tables: a released sequence's table goes onto the stack and the next sequence
 * with none takes it (the same buffer, its capacity kept), whether it grows by admission's
 * sizing or block by block; the blocks it then holds are its own. */
START_TEST(spare_tables_are_reused)
{
    sim_kv *kv = sim_kv_init(40, 16, true, false, 0, 0);
    sim_kv_tables spare = {NULL};
    sim_kv_seq a = seq(1, 0, 2), b = seq(1, 0, 3), c = seq(1, 0, 4);
    a.spare = b.spare = c.spare = &spare;
    ck_assert_int_eq(sim_kv_table_room(&a, 20), 0);   /* no spare: allocated, a power of two */
    ck_assert_int_eq(a.cap, 32);
    ck_assert_int_eq(sim_kv_grow(kv, &a, 100), 0);    /* 7 blocks */
    int32_t *table = a.blocks;
    sim_kv_release(kv, &a);
    sim_kv_tables_put(&spare, &a);
    ck_assert_ptr_null(a.blocks);
    ck_assert_int_eq(a.cap, 0);
    ck_assert_int_eq(sim_kv_available(kv), 40);
    ck_assert_int_eq(sim_kv_table_room(&b, 10), 0);   /* takes a's table */
    ck_assert_ptr_eq(b.blocks, table);
    ck_assert_int_eq(b.cap, 32);
    ck_assert_ptr_null(spare.top);
    ck_assert_int_eq(sim_kv_grow(kv, &b, 33), 0);
    ck_assert_int_eq(b.n_blocks, 3);
    ck_assert_int_eq(sim_kv_referenced(kv), 3);
    sim_kv_release(kv, &b);
    sim_kv_tables_put(&spare, &b);
    ck_assert_int_eq(sim_kv_grow(kv, &c, 16), 0);     /* growth without sizing takes it too */
    ck_assert_ptr_eq(c.blocks, table);
    ck_assert_int_eq(c.n_blocks, 1);
    ck_assert_int_eq(sim_kv_table_room(&c, 100), 0);  /* and grows it, keeping the block */
    ck_assert_int_eq(c.cap, 128);
    ck_assert_int_eq(c.n_blocks, 1);
    ck_assert_int_eq(sim_kv_referenced(kv), 1);
    sim_kv_release(kv, &c);
    sim_kv_tables_put(&spare, &c);
    sim_kv_tables_put(&spare, &a);                    /* none held: nothing to keep */
    ck_assert_ptr_nonnull(spare.top);
    sim_kv_tables_free(&spare);
    ck_assert_ptr_null(spare.top);
    sim_kv_free(kv);
}
END_TEST

/* Growing a step's crossings in one call hands out the blocks sim_kv_grow_block hands out one
 * by one, in order: the same ids, the same rooms, the same counts, whether a sequence takes the
 * free stack's top or its table must grow, or no block was ever freed (fresh ids). */
START_TEST(grow_blocks_is_grow_block_in_order)
{
    enum { S = 6 };
    sim_kv *one = sim_kv_init(128, 16, true, false, 0, 0), *all = sim_kv_init(128, 16, true, false, 0, 0);
    sim_kv_seq a[S], b[S];
    for (int i = 0; i < S; i++) { a[i] = seq(1, 0, 10 + (uint64_t)i); b[i] = seq(1, 0, 10 + (uint64_t)i); }
    /* Uneven starts and table sizes: some tables are full when they cross. */
    for (int i = 0; i < S; i++) {
        int len = 16 * (1 + i % 3);
        if (i % 2) { sim_kv_table_room(&a[i], 8); sim_kv_table_room(&b[i], 8); }
        ck_assert_int_eq(sim_kv_grow(one, &a[i], len), 0);
        ck_assert_int_eq(sim_kv_grow(all, &b[i], len), 0);
    }
    sim_kv_release(one, &a[2]); sim_kv_release(all, &b[2]);   /* a few ids back on the free stacks */
    for (int round = 0; round < 12; round++) {   /* tables of 8 fill and reallocate */
        sim_kv_seq *grow[S];
        int n = 0;
        long want = 0;
        for (int i = 0; i < S; i++) {
            if (i == 2 || (round + i) % 3 == 0) continue;   /* some cross this step, in slot order */
            long room0 = a[i].room;
            ck_assert_int_eq(sim_kv_grow_block(one, &a[i]), 0);
            want += a[i].room - room0;
            grow[n++] = &b[i];
        }
        ck_assert_int_eq(sim_kv_grow_blocks(all, grow, n), want);
        for (int i = 0; i < S; i++) {
            ck_assert_int_eq(a[i].n_blocks, b[i].n_blocks);
            ck_assert_int_eq(a[i].room, b[i].room);
            for (int j = 0; j < a[i].n_blocks; j++) ck_assert_int_eq(a[i].blocks[j], b[i].blocks[j]);
        }
        ck_assert_int_eq(sim_kv_referenced(one), sim_kv_referenced(all));
        ck_assert_int_eq(sim_kv_available(one), sim_kv_available(all));
    }
    ck_assert_int_eq(b[0].cap, 16);   /* a table of 8 filled and grew on the way */
    ck_assert_int_gt(b[0].n_blocks, 8);
    for (int i = 0; i < S; i++) {
        sim_kv_release(one, &a[i]); sim_kv_seq_free(&a[i]);
        sim_kv_release(all, &b[i]); sim_kv_seq_free(&b[i]);
    }
    sim_kv_free(one);
    sim_kv_free(all);
}
END_TEST

/* Prefix matching against a reference that compares token ids one by one (sim_token_id): block
 * j of a prompt hits when some committed sequence holds its first j + 1 blocks with the same ids.
 * The manager names a block's tokens by their streams and positions (kv_manager.c, block_hash),
 * never by the ids, so this checks that naming: few seeds, prefix ends inside blocks and on their
 * edges, a seed that is one request's prefix stream and another's body stream, prompts whose last
 * token cuts the walk. The pool never evicts. */
static uint32_t ref_token(const sim_kv_seq *q, long pos)
{
    return sim_token_id(pos < q->prefix_len ? q->prefix_seed : q->body_seed, pos);
}

static int ref_hit(const sim_kv_seq *held, const int *committed, int n, const sim_kv_seq *q, int prompt, int bs)
{
    int max_blocks = (prompt - 1) / bs, j = 0;
    for (; j < max_blocks; j++) {
        bool found = false;
        for (int i = 0; i < n && !found; i++) {
            if (committed[i] / bs <= j) continue;
            found = true;
            for (long p = 0; p < (long)(j + 1) * bs && found; p++) found = ref_token(&held[i], p) == ref_token(q, p);
        }
        if (!found) break;
    }
    return j * bs;
}

START_TEST(prefix_match_equals_a_token_by_token_reference)
{
    enum { HELD = 40, QUERIES = 400 };
    static const int lens[] = {0, 3, 8, 12, 16, 20, 24, 31, 32};
    for (int bs = 4; bs <= 16; bs *= 2) {
        sim_kv *kv = sim_kv_init(HELD * 64, bs, true, true, 0, 0);
        static sim_kv_seq held[HELD];
        int committed[HELD];
        uint64_t r = 12345 + (uint64_t)bs;
        for (int i = 0; i < HELD; i++) {
            r = sim_mix64(r);
            held[i] = seq(1 + r % 3, lens[(r >> 8) % 9], 1 + (r >> 16) % 4);
            committed[i] = 8 + (int)((r >> 24) % 56);
            ck_assert_int_eq(sim_kv_grow(kv, &held[i], committed[i]), 0);
            sim_kv_commit(kv, &held[i], committed[i]);
        }
        int hits = 0, partial = 0;
        for (int k = 0; k < QUERIES; k++) {
            r = sim_mix64(r);
            sim_kv_seq q = seq(1 + r % 3, lens[(r >> 8) % 9], 1 + (r >> 16) % 5);
            int prompt = 1 + (int)((r >> 24) % 70);
            int want = ref_hit(held, committed, HELD, &q, prompt, bs);
            ck_assert_int_eq(sim_kv_match_prefix(kv, &q, prompt, false, NULL), want);
            ck_assert_int_eq(sim_kv_match_prefix(kv, &q, prompt, true, NULL), want);
            hits += want > 0;
            partial += want > 0 && want < (prompt - 1) / bs * bs;
            sim_kv_release(kv, &q); sim_kv_seq_free(&q);
        }
        ck_assert_int_gt(hits, QUERIES / 10);       /* the cases exercise both hits and misses */
        ck_assert_int_gt(partial, QUERIES / 20);
        ck_assert_int_lt(hits, QUERIES);
        for (int i = 0; i < HELD; i++) { sim_kv_release(kv, &held[i]); sim_kv_seq_free(&held[i]); }
        sim_kv_free(kv);
    }
}
END_TEST

/* Eviction against a plain LRU list of (stream, block) names: one sequence at a time takes its
 * hits, grows, commits its full blocks and releases them (newest first) into a pool of 64 blocks
 * that 24 streams overflow, so nearly every new block evicts one and the cache's map deletes
 * entries all the time (kv_manager.c, map_del). Hits, and what stays cached, must be the
 * list's. */
START_TEST(eviction_matches_a_plain_lru_list)
{
    enum { POOL = 64, BS = 4, ROUNDS = 3000 };
    sim_kv *kv = sim_kv_init(POOL, BS, true, true, 0, 0);
    struct { uint64_t seed; int j; } lru[POOL];   /* oldest first */
    int n_lru = 0, hits = 0, evictions = 0;
    uint64_t r = 99;
    for (int k = 0; k < ROUNDS; k++) {
        r = sim_mix64(r);
        uint64_t seed = 1 + r % 24;
        int m = 1 + (int)((r >> 8) % 6);            /* full blocks; the prompt is one token more */
        /* Reference: the longest run of this stream's leading blocks in the list, taken out of it. */
        int want = 0;
        for (bool found = true; found && want < m;) {
            found = false;
            for (int i = 0; i < n_lru && !found; i++) found = lru[i].seed == seed && lru[i].j == want;
            if (found) want++;
        }
        for (int i = 0; i < n_lru;) {
            if (lru[i].seed == seed && lru[i].j < want) { memmove(&lru[i], &lru[i + 1], sizeof lru[0] * (size_t)(n_lru - i - 1)); n_lru--; }
            else i++;
        }
        /* m + 1 blocks in all; the ones beyond the hit come from free blocks, then the list's head. */
        int free_blocks = POOL - n_lru - want, need = m + 1 - want;
        int evict = need > free_blocks ? need - free_blocks : 0;
        memmove(&lru[0], &lru[evict], sizeof lru[0] * (size_t)(n_lru - evict));
        n_lru -= evict;
        evictions += evict;
        sim_kv_seq q = seq(0, 0, seed);
        ck_assert_int_eq(sim_kv_match_prefix(kv, &q, m * BS + 1, true, NULL), want * BS);
        ck_assert_int_eq(sim_kv_grow(kv, &q, m * BS + 1), 0);
        sim_kv_commit(kv, &q, m * BS + 1);
        sim_kv_release(kv, &q); sim_kv_seq_free(&q);
        for (int j = m - 1; j >= 0; j--) { lru[n_lru].seed = seed; lru[n_lru].j = j; n_lru++; }   /* newest first */
        ck_assert_int_eq(sim_kv_cached(kv), n_lru);
        hits += want > 0;
    }
    ck_assert_int_gt(hits, ROUNDS / 10);        /* both hits and evictions happen throughout */
    ck_assert_int_gt(evictions, ROUNDS / 2);
    sim_kv_free(kv);
}
END_TEST

/* The watch of a waiting request's prefix match (the fast-forward's, sim_kv_watch), traced by
 * hand: A's four blocks of one stream are cached and released (LRU: A3, A2, A1, A0, A3 the
 * oldest, as a sequence's tail leaves before its head); W waits with a 30-token prompt of the
 * same stream: hits A0-A3, first miss block 4. Another sequence taking blocks that are already
 * registered, or untouched blocks, fires nothing; taking one block past the untouched ones
 * evicts A3 and fires EVICT. Watched again (hits A0-A2,
 * first miss block 3), C of the same stream fills blocks 2 and 3: block 2 is registered
 * already (nothing), block 3 is W's first miss: COMMIT. */
START_TEST(watch_fires_on_a_missed_block_and_an_evicted_hit)
{
    sim_kv *kv = sim_kv_init(20, 4, true, true, 0, 0);
    sim_kv_seq a = seq(5, 0, 9), w = seq(5, 0, 9), c = seq(5, 0, 9), d = seq(5, 0, 77);
    ck_assert_int_eq(sim_kv_grow(kv, &a, 16), 0);
    sim_kv_commit(kv, &a, 16);
    sim_kv_release(kv, &a);
    ck_assert_int_eq(sim_kv_match_prefix(kv, &w, 30, false, NULL), 16);
    ck_assert_int_eq(sim_kv_watch(kv, &w, 30), 0);
    ck_assert_int_eq(sim_kv_watch_fired(kv), 0);
    ck_assert_int_eq(sim_kv_grow(kv, &c, 8), 0);   /* two untouched blocks */
    sim_kv_commit(kv, &c, 8);                      /* blocks 0 and 1 are A's: C's stay private */
    ck_assert_int_eq(sim_kv_watch_fired(kv), 0);
    ck_assert_int_eq(sim_kv_available(kv), 18);    /* 14 untouched, A's 4 cached */
    ck_assert_int_eq(sim_kv_grow(kv, &d, 60), 0);  /* 15 blocks: the untouched, then A3 */
    ck_assert_int_eq(sim_kv_watch_fired(kv), SIM_KV_WATCH_EVICT);
    ck_assert_int_eq(sim_kv_match_prefix(kv, &w, 30, false, NULL), 12);
    ck_assert_int_eq(sim_kv_watch(kv, &w, 30), 0);  /* hits A0-A2 */
    ck_assert_int_eq(sim_kv_watch_fired(kv), 0);
    sim_kv_release(kv, &d);                        /* never committed: onto the free stack */
    ck_assert_int_eq(sim_kv_grow(kv, &c, 16), 0);
    ck_assert_int_eq(sim_kv_watch_fired(kv), 0);
    sim_kv_commit(kv, &c, 12);                     /* block 2: A2 holds its hash */
    ck_assert_int_eq(sim_kv_watch_fired(kv), 0);
    sim_kv_commit(kv, &c, 16);                     /* block 3: W's first miss */
    ck_assert_int_eq(sim_kv_watch_fired(kv), SIM_KV_WATCH_COMMIT);
    ck_assert_int_eq(sim_kv_match_prefix(kv, &w, 30, false, NULL), 16);
    sim_kv_unwatch(kv);
    ck_assert_int_eq(sim_kv_watch_fired(kv), 0);
    sim_kv_release(kv, &c);
    sim_kv_seq_free(&a); sim_kv_seq_free(&c); sim_kv_seq_free(&d); sim_kv_seq_free(&w);
    sim_kv_free(kv);
}
END_TEST

Suite *suite_kv_manager(void)
{
    Suite *su = suite_create("kv_manager");
    TCase *tc = tcase_create("blocks");
    tcase_add_test(tc, paged_allocates_on_demand);
    tcase_add_test(tc, prefix_cache_shares_full_blocks_only);
    tcase_add_test(tc, prefix_hashes_do_not_depend_on_the_memo);
    tcase_add_test(tc, prefix_match_equals_a_token_by_token_reference);
    tcase_add_test(tc, eviction_matches_a_plain_lru_list);
    tcase_add_test(tc, watch_fires_on_a_missed_block_and_an_evicted_hit);
    tcase_add_test(tc, a_waiting_request_counted_again_matches_a_fresh_walk);
    tcase_add_test(tc, unreferenced_cached_blocks_are_evicted_lru);
    tcase_add_test(tc, window_frees_blocks_behind_it);
    tcase_add_test(tc, contiguous_reserves_up_front);
    tcase_add_test(tc, block_ids_follow_one_stack_of_every_block);
    tcase_add_test(tc, spare_tables_are_reused);
    tcase_add_test(tc, grow_blocks_is_grow_block_in_order);
    suite_add_tcase(su, tc);
    return su;
}
