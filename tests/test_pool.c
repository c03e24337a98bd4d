/* test_pool.c: the executor owns its KV pools. The engine takes each replica's block count from
 * the executor; the CPU backend holds one pool per replica; the same scenario run with the
 * cost model's clock and with the CPU backend schedules the very same batches (only the clock
 * differs); and with two replicas no request ever reads KV another request wrote. */
#include "tests.h"
#include "../backend/be_session.h"
#include "../backend/cpu/cpu_backend.h"
#include "../model/kv_blocks.h"
#include "../sim/sim.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Six requests that all arrive at t = 0 (a trace), so the batch stream cannot depend on the clock. */
static const char *trace_scenario(void)
{
    const char *trace = t_write("pool-trace.csv", "arrival_s,prompt_tokens,output_tokens\n"
                                                  "0,70,12\n0,33,20\n0,90,7\n0,18,25\n0,64,9\n0,41,16\n");
    static char text[1024];
    snprintf(text, sizeof text,
             "model: tiny-cpu\nhardware: cpu-local\n"
             "deployment: {gpu_memory_utilization: 0.25, max_num_seqs: 4, max_num_batched_tokens: 160}\n"
             "workload: {arrival: {process: trace, trace: %s}}\n"
             "options: {kv_layout: [paged], block_size: [16], prefix_cache: [off], kv_dtype: [fp32]}\n", trace);
    return text;
}

/* ---- a recording executor around another ---- */
typedef struct {
    sim_executor *inner;
    long *log;               /* the batch stream, flattened */
    long n, cap;
    /* last writer per KV slot, keyed by the slot's real address in the backend's pool */
    const be_session *bs;
    uintptr_t *keys;
    long *writer;
    long mask, bad_reads, reads;
} recorder;

static void put(recorder *r, long v)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 4096;
        r->log = realloc(r->log, sizeof *r->log * (size_t)r->cap);
        ck_assert(r->log != NULL);
    }
    r->log[r->n++] = v;
}

static long *slot_of(recorder *r, uintptr_t key)
{
    for (long i = (long)((key * 0x9e3779b97f4a7c15ULL) >> 40) & r->mask;; i = (i + 1) & r->mask) {
        if (r->keys[i] == key) return &r->writer[i];
        if (!r->keys[i]) { r->keys[i] = key; r->writer[i] = -1; return &r->writer[i]; }
    }
}

static uintptr_t slot_key(recorder *r, int replica, long block, long slot)
{
    const be_cpu_ctx *c = r->bs->ctxs[replica];
    const char *a = be_cpu_block_addr(c, block);
    ck_assert_msg(a != NULL, "block %ld outside replica %d's pool", block, replica);
    return (uintptr_t)a * 64 + (uintptr_t)slot + 1;
}

static int rec_run(void *ctx, const sim_batch *b, double *seconds, char *err, size_t n)
{
    recorder *r = ctx;
    put(r, -1);
    put(r, b->replica);
    put(r, b->n);
    for (int i = 0; i < b->n; i++) {
        const sim_batch_seq *q = &b->seqs[i];
        put(r, q->req_id); put(r, q->new_tokens); put(r, q->start); put(r, q->context); put(r, q->n_blocks);
        for (int j = 0; j < q->n_blocks; j++) put(r, q->blocks[j]);
        if (!r->bs) continue;
        /* Every position up to the last new one is read by attention; the new ones are written first. */
        const long bs = r->bs->block_size;
        for (long p = q->start; p < q->start + q->new_tokens; p++)
            *slot_of(r, slot_key(r, b->replica, q->blocks[p / bs], p % bs)) = q->req_id;
        for (long p = 0; p < q->start + q->new_tokens; p++) {
            if (q->blocks[p / bs] < 0) continue;
            r->reads++;
            if (*slot_of(r, slot_key(r, b->replica, q->blocks[p / bs], p % bs)) != q->req_id) r->bad_reads++;
        }
    }
    return r->inner->run(r->inner->ctx, b, seconds, err, n);
}

static long rec_blocks(void *ctx, int replica)
{
    recorder *r = ctx;
    return r->inner->kv_blocks(r->inner->ctx, replica);
}

static sim_executor wrap(recorder *r, sim_executor *inner, const be_session *bs)
{
    memset(r, 0, sizeof *r);
    r->inner = inner;
    r->bs = bs;
    r->mask = (1 << 16) - 1;
    r->keys = calloc((size_t)r->mask + 1, sizeof *r->keys);
    r->writer = calloc((size_t)r->mask + 1, sizeof *r->writer);
    ck_assert(r->keys && r->writer);
    return (sim_executor){.name = "recorder", .ctx = r, .run = rec_run, .kv_blocks = rec_blocks,
                          .measured = inner->measured};
}

static void unwrap(recorder *r) { free(r->log); free(r->keys); free(r->writer); }

static void load(const char *text, const char *const *sets, int n, scn_scenario *s)
{
    scn_error e;
    ck_assert_int_eq(t_load(text, sets, n, s, &e), SCN_OK);
}

START_TEST(model_clock_and_cpu_backend_schedule_the_same_batches)
{
    static scn_scenario s;
    load(trace_scenario(), NULL, 0, &s);
    sim_choice c = sim_choice_first(&s);
    /* A pool of 14 blocks (224 tokens) for 6 requests of up to 97 tokens: admission waits and
     * running sequences get preempted, so the stream exercises the KV manager. */
    const long blocks = 14;
    char err[512];
    be_session bs;
    ck_assert_int_eq(be_session_open_blocks(&bs, "cpu", &s, &c, blocks, err, sizeof err), BE_OK);
    ck_assert_int_eq(bs.blocks, blocks);
    sim_executor model;
    ck_assert_int_eq(sim_executor_model(&s, &c, &model), 0);
    recorder rm, rb;
    sim_executor em = wrap(&rm, &model, NULL), eb = wrap(&rb, &bs.ex, NULL);
    sim_run_opts om = {.seed = 1, .kv_blocks_override = blocks}, ob = {.seed = 1};
    sim_metrics mm, mb;
    ck_assert_msg(sim_run(&s, &c, &em, &om, &mm, err, sizeof err) == SIM_OK, "%s", err);
    ck_assert_msg(sim_run(&s, &c, &eb, &ob, &mb, err, sizeof err) == SIM_OK, "%s", err);
    ck_assert_int_eq(mm.requests, 6);
    ck_assert_int_eq(mb.kv_blocks, blocks);   /* the engine took the backend's pool */
    ck_assert_msg(mm.preemptions > 0, "the pool should force preemptions");
    ck_assert_int_eq(mm.preemptions, mb.preemptions);
    ck_assert_int_eq(rm.n, rb.n);
    for (long i = 0; i < rm.n; i++) ck_assert_msg(rm.log[i] == rb.log[i], "batch streams differ at word %ld", i);
    unwrap(&rm); unwrap(&rb);
    model.free(model.ctx);
    be_session_close(&bs);
}
END_TEST

START_TEST(two_replicas_never_read_each_others_kv)
{
    static scn_scenario s;
    const char *sets[] = {"deployment.replicas=2", "deployment.router=round_robin"};
    load(trace_scenario(), sets, 2, &s);
    sim_choice c = sim_choice_first(&s);
    char err[512];
    be_session bs;
    ck_assert_int_eq(be_session_open_blocks(&bs, "cpu", &s, &c, 24, err, sizeof err), BE_OK);
    ck_assert_int_eq(bs.replicas, 2);
    /* Each replica's pool is its own memory. */
    ck_assert_ptr_ne(be_cpu_block_addr(bs.ctxs[0], 0), be_cpu_block_addr(bs.ctxs[1], 0));
    recorder r;
    sim_executor ex = wrap(&r, &bs.ex, &bs);
    sim_run_opts o = {.seed = 1};
    sim_metrics m;
    ck_assert_msg(sim_run(&s, &c, &ex, &o, &m, err, sizeof err) == SIM_OK, "%s", err);
    ck_assert_int_eq(m.requests, 6);
    ck_assert_int_eq(m.kv_blocks, 24);
    ck_assert(r.reads > 500);
    ck_assert_int_eq(r.bad_reads, 0);
    /* Both replicas ran: round robin sends requests 0, 2, 4 to one and 1, 3, 5 to the other. */
    int seen[2] = {0, 0};
    for (long i = 0; i + 1 < r.n; i++) if (r.log[i] == -1) seen[r.log[i + 1]] = 1;
    ck_assert(seen[0] && seen[1]);
    unwrap(&r);
    be_session_close(&bs);
}
END_TEST

START_TEST(the_engine_sizes_replicas_from_the_executor)
{
    static scn_scenario s;
    load(trace_scenario(), NULL, 0, &s);
    sim_choice c = sim_choice_first(&s);
    kv_cache_cfg cfg = kv_cache_cfg_make(&s, c.kv_dtype, c.sink, c.window);
    /* The model executor reports the one block count: the budget over 16 tokens of KV bytes. */
    kv_pool p = kv_pool_size(&s, &cfg, true, 16);
    kv_capacity k = kv_capacity_compute(&s, &cfg, 16, 0);
    ck_assert_int_eq(p.blocks, (long)(k.kv_budget / (16 * k.kv_bytes_per_token)));
    sim_executor ex;
    ck_assert_int_eq(sim_executor_model(&s, &c, &ex), 0);
    ck_assert_int_eq(ex.kv_blocks(ex.ctx, 0), p.blocks);
    ex.free(ex.ctx);
    /* A measuring executor's pool cannot be overridden by a different count. */
    char err[512];
    be_session bs;
    ck_assert_int_eq(be_session_open_blocks(&bs, "cpu", &s, &c, 20, err, sizeof err), BE_OK);
    sim_run_opts o = {.seed = 1, .kv_blocks_override = 30};
    sim_metrics m;
    ck_assert_int_eq(sim_run(&s, &c, &bs.ex, &o, &m, err, sizeof err), SIM_E_INTERNAL);
    ck_assert_msg(strstr(err, "allocated 20 KV blocks") != NULL, "%s", err);
    be_session_close(&bs);
}
END_TEST

START_TEST(backend_refuses_what_it_cannot_run_before_allocating)
{
    char out[4096], err[4096], cmd[1024];
    const char *lib = getenv("KVPLAN_LIBRARY");
    snprintf(cmd, sizeof cmd, "run %s/tiny-cpu.yaml --no-db --set deployment.tensor_parallel=2", lib);
    ck_assert_int_eq(t_run(cmd, out, sizeof out, err, sizeof err), 64);
    ck_assert_msg(strstr(err, "tensor_parallel 2") != NULL, "%s", err);
    /* Llama-2-7B in fp32 with an H100's pool: far more than a test machine is assumed to have
     * free (83 GiB); the check refuses before allocating. */
    snprintf(cmd, sizeof cmd, "run %s/tiny-cpu.yaml --no-db --set model=llama-2-7b --set hardware=h100-sxm "
             "--set deployment.gpu_memory_utilization=0.9 --set deployment.replicas=8", lib);
    ck_assert_int_eq(t_run(cmd, out, sizeof out, err, sizeof err), 69);
    ck_assert_msg(strstr(err, "GiB") && strstr(err, "available"), "%s", err);
    /* --blocks sizes the backend's pools. */
    snprintf(cmd, sizeof cmd, "run %s/tiny-cpu.yaml --no-db --format json --blocks 100 --set workload.requests=3", lib);
    ck_assert_int_eq(t_run(cmd, out, sizeof out, err, sizeof err), 0);
    ck_assert_msg(strstr(out, "\"kv_blocks\": 100") != NULL, "%s", out);
}
END_TEST

Suite *suite_pool(void)
{
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("pool");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, model_clock_and_cpu_backend_schedule_the_same_batches);
    tcase_add_test(tc, two_replicas_never_read_each_others_kv);
    tcase_add_test(tc, the_engine_sizes_replicas_from_the_executor);
    tcase_add_test(tc, backend_refuses_what_it_cannot_run_before_allocating);
    suite_add_tcase(s, tc);
    return s;
}
