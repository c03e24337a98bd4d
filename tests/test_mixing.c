/* test_mixing.c: whether prefill rows share a step with decode rows (scn_engine.prefill_mix;
 * docs/simulator.md, "Mixed and separate prefill steps"). TensorRT-LLM's in-flight batching puts
 * whole prompts into the running sequences' step; SGLang runs its prefill (extend) batches apart
 * from decode batches even when it chunks; vLLM mixes when it chunks (V1) and prefills alone when
 * it does not (V0). Every time here is worked by hand on a clock where each step takes one second,
 * from a small trace, and each step's rows are recorded and checked one by one. */
#include "tests.h"
#include "../sim/sim.h"
#include "../model/kv_model.h"

#include <stdio.h>
#include <string.h>

#define MAXR 8
#define MAXS 32

typedef struct { double ttft[MAXR], e2e[MAXR]; int n; } rows;

static int on_row(void *ud, const sim_request_row *r)
{
    rows *x = ud;
    if (r->id >= 0 && r->id < MAXR) { x->ttft[r->id] = r->ttft; x->e2e[r->id] = r->e2e; }
    x->n++;
    return 0;
}

/* A one-second clock that records, per step, each row's request id and new tokens. */
typedef struct { int n; int rows[MAXS]; long id[MAXS][4]; int tok[MAXS][4]; } steps;

static int record(void *ctx, const sim_batch *b, double *seconds, char *err, size_t n)
{
    (void)err; (void)n;
    steps *st = ctx;
    if (st->n < MAXS) {
        st->rows[st->n] = b->n;
        for (int i = 0; i < b->n && i < 4; i++) { st->id[st->n][i] = b->seqs[i].req_id; st->tok[st->n][i] = b->seqs[i].new_tokens; }
    }
    st->n++;
    *seconds = 1.0;
    return 0;
}

static long pool = 1000;   /* blocks per replica the recording executor reports */

static long many_blocks(void *ctx, int replica)
{
    (void)ctx; (void)replica;
    return pool;
}

static scn_scenario s;

/* Runs TRACE under an engine with no front end and no CPU terms; `engine` is the inline
 * profile's chunked_prefill mapping, `budget` the deployment's token budget. */
static void run(const char *trace, const char *chunk, int budget, const char *sched, rows *x, steps *st)
{
    const char *path = t_write("mix-trace.csv", trace);
    char text[1024];
    snprintf(text, sizeof text,
             "model: llama-3-8b\nhardware: h100-sxm\n"
             "engine: {name: t, chunked_prefill: %s}\n"
             "deployment: {max_num_batched_tokens: %d}\n"
             "workload:\n  arrival: {process: trace, trace: '%s'}\n"
             "options: {kv_layout: paged, block_size: 16, prefix_cache: off, scheduler: %s}\n",
             chunk, budget, path, sched);
    scn_error e;
    ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s", e.msg);
    sim_choice c = sim_choice_first(&s);
    memset(st, 0, sizeof *st);
    sim_executor ex = {.name = "record", .run = record, .kv_blocks = many_blocks, .ctx = st};
    memset(x, 0, sizeof *x);
    sim_run_opts o = {.seed = 1, .on_request = on_row, .ud = x, .per_step = true};
    sim_metrics m;
    char err[512];
    ck_assert_msg(sim_run(&s, &c, &ex, &o, &m, err, sizeof err) == SIM_OK, "%s", err);
}

/* Step k (0-based) holds exactly these rows: (request id, new tokens) pairs, in order. */
static void step_is(const steps *st, int k, int n, const long *id, const int *tok)
{
    ck_assert_msg(k < st->n, "only %d steps", st->n);
    ck_assert_msg(st->rows[k] == n, "step %d has %d rows, not %d", k, st->rows[k], n);
    for (int i = 0; i < n; i++) {
        ck_assert_msg(st->id[k][i] == id[i], "step %d row %d: request %ld, not %ld", k, i, st->id[k][i], id[i]);
        ck_assert_msg(st->tok[k][i] == tok[i], "step %d row %d: %d tokens, not %d", k, i, st->tok[k][i], tok[i]);
    }
}

/* A (100 prompt tokens, 3 out) at 0; B (50, 2) at 0.5, while A's prefill runs. */
static const char *TWO = "arrival_s,prompt_tokens,output_tokens\n0.0,100,3\n0.5,50,2\n";

START_TEST(inflight_batching_mixes_whole_prompts)
{
    /* Mixed, not chunked (TensorRT-LLM): step [0,1) prefills A; step [1,2) decodes A and
     * prefills B whole in the same step, so B's first token is out at 2 (TTFT 1.5) with A's
     * second; step [2,3) decodes both: A's third token and B's second, both done at 3. */
    rows x;
    steps st;
    run(TWO, "{enabled: false, mixed: true}", 8192, "continuous", &x, &st);
    ck_assert_int_eq(x.n, 2);
    ck_assert_int_eq(st.n, 3);
    step_is(&st, 0, 1, (long[]){0}, (int[]){100});
    step_is(&st, 1, 2, (long[]){0, 1}, (int[]){1, 50});
    step_is(&st, 2, 2, (long[]){0, 1}, (int[]){1, 1});
    ck_assert_double_eq_tol(x.ttft[0], 1.0, 1e-12);
    ck_assert_double_eq_tol(x.e2e[0], 3.0, 1e-12);
    ck_assert_double_eq_tol(x.ttft[1], 1.5, 1e-12);
    ck_assert_double_eq_tol(x.e2e[1], 2.5, 1e-12);
}
END_TEST

START_TEST(prefill_first_stalls_the_decodes)
{
    /* The same trace under vLLM V0's rule (not chunked, not mixed): step [1,2) prefills B alone
     * and A waits; [2,3) decodes both (B done at 3); [3,4) decodes A alone (done at 4). B's
     * TTFT is the same 1.5; A's end moves from 3 to 4. The profile's default rule for the
     * continuous scheduler is this one. */
    rows x;
    steps st;
    for (int k = 0; k < 2; k++) {
        run(TWO, k ? "{enabled: false}" : "{enabled: false, mixed: false}", 8192, "continuous", &x, &st);
        ck_assert_int_eq(st.n, 4);
        step_is(&st, 1, 1, (long[]){1}, (int[]){50});
        step_is(&st, 2, 2, (long[]){0, 1}, (int[]){1, 1});
        step_is(&st, 3, 1, (long[]){0}, (int[]){1});
        ck_assert_double_eq_tol(x.ttft[1], 1.5, 1e-12);
        ck_assert_double_eq_tol(x.e2e[1], 2.5, 1e-12);
        ck_assert_double_eq_tol(x.e2e[0], 4.0, 1e-12);
    }
}
END_TEST

/* A (100, 3) at 0, B (10, 2) at 2.5, with a 64-token budget: A's prompt takes two chunks. */
static const char *LATE = "arrival_s,prompt_tokens,output_tokens\n0.0,100,3\n2.5,10,2\n";

START_TEST(separate_chunked_prefill_steps)
{
    /* Chunked and separate (SGLang): [0,1) A's first 64 tokens; [1,2) its last 36 (first token
     * at 2); [2,3) decodes A (second token at 3); B arrived at 2.5, so [3,4) prefills B alone
     * while A waits (B's first token at 4: TTFT 1.5); [4,5) decodes both, and both are done at
     * 5: A's E2E is 5, B's 2.5. */
    rows x;
    steps st;
    run(LATE, "{enabled: true, mixed: false}", 64, "chunked", &x, &st);
    ck_assert_int_eq(st.n, 5);
    step_is(&st, 0, 1, (long[]){0}, (int[]){64});
    step_is(&st, 1, 1, (long[]){0}, (int[]){36});
    step_is(&st, 2, 1, (long[]){0}, (int[]){1});
    step_is(&st, 3, 1, (long[]){1}, (int[]){10});
    step_is(&st, 4, 2, (long[]){0, 1}, (int[]){1, 1});
    ck_assert_double_eq_tol(x.ttft[0], 2.0, 1e-12);
    ck_assert_double_eq_tol(x.e2e[0], 5.0, 1e-12);
    ck_assert_double_eq_tol(x.ttft[1], 1.5, 1e-12);
    ck_assert_double_eq_tol(x.e2e[1], 2.5, 1e-12);
}
END_TEST

START_TEST(mixed_chunked_prefill_steps)
{
    /* Chunked and mixed (vLLM V1, the profile default when chunking): the same until B comes;
     * [3,4) decodes A's last token with B's prefill, so A ends at 4 and B's first token is out
     * at 4; [4,5) decodes B (done at 5). */
    rows x;
    steps st;
    for (int k = 0; k < 2; k++) {
        run(LATE, k ? "{enabled: true}" : "{enabled: true, mixed: true}", 64, "chunked", &x, &st);
        ck_assert_int_eq(st.n, 5);
        step_is(&st, 3, 2, (long[]){0, 1}, (int[]){1, 10});
        step_is(&st, 4, 1, (long[]){1}, (int[]){1});
        ck_assert_double_eq_tol(x.e2e[0], 4.0, 1e-12);
        ck_assert_double_eq_tol(x.ttft[1], 1.5, 1e-12);
        ck_assert_double_eq_tol(x.e2e[1], 2.5, 1e-12);
    }
}
END_TEST

START_TEST(separate_chunks_continue_before_decodes)
{
    /* A (10, 4) at 0 decodes; B (100, 1) arrives at 0.5. Separate and chunked at 64: [1,2) is
     * B's first chunk only (A waits), [2,3) B's last 36 tokens (B's only token at 3: TTFT 2.5),
     * then A decodes alone in [3,4), [4,5) and [5,6): its tokens at 1, 4, 5 and 6. */
    rows x;
    steps st;
    run("arrival_s,prompt_tokens,output_tokens\n0.0,10,4\n0.5,100,1\n", "{enabled: true, mixed: false}", 64, "chunked", &x,
        &st);
    ck_assert_int_eq(st.n, 6);
    step_is(&st, 1, 1, (long[]){1}, (int[]){64});
    step_is(&st, 2, 1, (long[]){1}, (int[]){36});
    step_is(&st, 3, 1, (long[]){0}, (int[]){1});
    ck_assert_double_eq_tol(x.ttft[1], 2.5, 1e-12);
    ck_assert_double_eq_tol(x.e2e[0], 6.0, 1e-12);
}
END_TEST

START_TEST(a_chunked_prefill_short_of_blocks_waits_for_the_decodes)
{
    /* Separate and chunked at 32 tokens, a pool of 8 blocks of 16 (no watermark below 100
     * blocks). A (32, 10) at 0, B (100, 1) at 0.5. [0,1) A's prefill (2 blocks); [1,2), [2,3),
     * [3,4) B's chunks to 96 tokens (6 blocks: the pool is full). [4,5): B's last chunk needs a
     * 7th block, so B waits and A decodes, and A's 33rd position needs a 3rd block: the newest
     * sequence, B, is preempted (recompute). [5,6) B again from 0 (32), [6,7) to 64; [7,8) B
     * would need 2 more blocks with 1 free: it waits, and A decodes alone from then on, its
     * tokens at 1, 5, 8, 9, ..., 15 (done, 3 blocks back). [15,16) B to 96, [16,17) B's last 4
     * tokens and its one token: TTFT 16.5, 17 steps. Taking the blocks from A instead would
     * restart B forever while A never decoded. */
    rows x;
    steps st;
    pool = 8;
    run("arrival_s,prompt_tokens,output_tokens\n0.0,32,10\n0.5,100,1\n", "{enabled: true, mixed: false}", 32, "chunked",
        &x, &st);
    pool = 1000;
    ck_assert_int_eq(x.n, 2);
    ck_assert_int_eq(st.n, 17);
    step_is(&st, 3, 1, (long[]){1}, (int[]){32});
    step_is(&st, 4, 1, (long[]){0}, (int[]){1});
    step_is(&st, 5, 1, (long[]){1}, (int[]){32});
    step_is(&st, 7, 1, (long[]){0}, (int[]){1});
    step_is(&st, 15, 1, (long[]){1}, (int[]){32});
    step_is(&st, 16, 1, (long[]){1}, (int[]){4});
    ck_assert_double_eq_tol(x.e2e[0], 15.0, 1e-12);
    ck_assert_double_eq_tol(x.ttft[1], 16.5, 1e-12);
}
END_TEST

START_TEST(whole_prompt_over_the_budget_runs_as_the_only_prompt)
{
    /* Mixed, not chunked, budget 64: A (10, 5) at 0; B (100, 1) and C (100, 1) at 0.5. A
     * prompt longer than the budget can only run as its step's one prompt (an engine that does
     * not chunk is given a token limit of at least its longest prompt), beside the decodes:
     * [1,2) A's decode and B (B done at 2: TTFT 1.5); [2,3) A's decode and C (TTFT 2.5). */
    rows x;
    steps st;
    run("arrival_s,prompt_tokens,output_tokens\n0.0,10,5\n0.5,100,1\n0.5,100,1\n", "{enabled: false, mixed: true}", 64,
        "continuous", &x, &st);
    step_is(&st, 1, 2, (long[]){0, 1}, (int[]){1, 100});
    step_is(&st, 2, 2, (long[]){0, 2}, (int[]){1, 100});
    ck_assert_double_eq_tol(x.ttft[1], 1.5, 1e-12);
    ck_assert_double_eq_tol(x.ttft[2], 2.5, 1e-12);
    ck_assert_double_eq_tol(x.e2e[0], 5.0, 1e-12);
}
END_TEST

START_TEST(whole_prompt_that_fits_the_budget_waits_for_room)
{
    /* Mixed, not chunked, budget 64: A (10, 5) at 0; B (64, 1) at 0.5. B fits the budget but
     * not what A's decode row leaves of it (63): TensorRT-LLM's scheduler stops adding context
     * requests at the first that does not fit (MicroBatchScheduler: batchNumTokens +
     * reqNumTokens > maxNumTokens breaks), so B waits while A decodes. [0,1) prefills A; [1,2)
     * .. [4,5) decode A (tokens at 2, 3, 4, 5: done at 5); [5,6) prefills B alone: its token at
     * 6, TTFT 5.5. No step holds more than the budget. */
    rows x;
    steps st;
    run("arrival_s,prompt_tokens,output_tokens\n0.0,10,5\n0.5,64,1\n", "{enabled: false, mixed: true}", 64,
        "continuous", &x, &st);
    ck_assert_int_eq(st.n, 6);
    step_is(&st, 0, 1, (long[]){0}, (int[]){10});
    for (int k = 1; k <= 4; k++) step_is(&st, k, 1, (long[]){0}, (int[]){1});
    step_is(&st, 5, 1, (long[]){1}, (int[]){64});
    ck_assert_double_eq_tol(x.ttft[1], 5.5, 1e-12);
    ck_assert_double_eq_tol(x.e2e[1], 5.5, 1e-12);
    ck_assert_double_eq_tol(x.e2e[0], 5.0, 1e-12);
}
END_TEST

/* With the cost model as the clock: A (100 prompt tokens, 50 out) at 0, B (300, 2) at half of
 * A's prefill step p. B waits for that step; then, mixed, it runs with A's first decode
 * (one row of 1 new token on 100 cached, B's 300 on none); separate, its prefill runs alone.
 * B's TTFT is p + that step - p/2 + the front end's 0.26 ms + 300 x 1.9 us, each step as
 * kv_step_time prices it. The mixed step is the longer, by A's decode row. */
static double ttft_b(const char *engine, bool mixed, double *expect)
{
    kv_seq_work a = {100, 0}, mix[2] = {{1, 100}, {300, 0}}, alone = {300, 0};
    char text[1024];
    snprintf(text, sizeof text,
             "model: llama-3-8b\nhardware: h100-sxm\nengine: %s\n"
             "workload:\n  requests: 1\n  arrival: {process: poisson, rate: 1/s}\n  prompt_tokens: 10\n  output_tokens: 10\n"
             "options: {kv_layout: paged, block_size: 16, prefix_cache: off}\n", engine);
    scn_error e;
    ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s", e.msg);
    sim_choice c = sim_choice_first(&s);
    kv_cache_cfg cc = kv_cache_cfg_make(&s, c.kv_dtype, c.sink, c.window);
    double p = kv_step_time(&s, &cc, c.attention, &a, 1).seconds;
    double step = mixed ? kv_step_time(&s, &cc, c.attention, mix, 2).seconds
                                             : kv_step_time(&s, &cc, c.attention, &alone, 1).seconds;
    *expect = p + step - p / 2 + 0.26e-3 + 300 * 1.9e-6;
    char trace[256];
    snprintf(trace, sizeof trace, "arrival_s,prompt_tokens,output_tokens\n0.0,100,50\n%.17g,300,2\n", p / 2);
    const char *path = t_write("mix-model.csv", trace);
    snprintf(text, sizeof text,
             "model: llama-3-8b\nhardware: h100-sxm\nengine: %s\n"
             "workload:\n  arrival: {process: trace, trace: '%s'}\n"
             "options: {kv_layout: paged, block_size: 16, prefix_cache: off}\n", engine, path);
    ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s", e.msg);
    c = sim_choice_first(&s);
    sim_executor ex;
    ck_assert_int_eq(sim_executor_model(&s, &c, &ex), 0);
    rows x;
    memset(&x, 0, sizeof x);
    sim_run_opts o = {.seed = 1, .on_request = on_row, .ud = &x};
    sim_metrics m;
    char err[512];
    int rc = sim_run(&s, &c, &ex, &o, &m, err, sizeof err);
    ex.free(ex.ctx);
    ck_assert_msg(rc == SIM_OK, "%s", err);
    ck_assert_int_eq(x.n, 2);
    return x.ttft[1];
}

START_TEST(mixed_step_ttft_with_the_model_clock)
{
    /* trtllm-v0 mixes (no overlap scheduler, so no deferral); vllm-v0 prefills alone. Both
     * carry the same front end. */
    double want_mixed, want_alone;
    double mixed = ttft_b("trtllm-v0", true, &want_mixed);
    double alone = ttft_b("vllm-v0", false, &want_alone);
    ck_assert_double_eq_tol(mixed, want_mixed, 1e-9 * want_mixed);
    ck_assert_double_eq_tol(alone, want_alone, 1e-9 * want_alone);
}
END_TEST

START_TEST(profiles_say_how_they_batch)
{
    /* TensorRT-LLM mixes context and generation requests in one step (its in-flight batching
     * docs); SGLang's enable_mixed_chunk is off by default; vLLM follows its scheduler. */
    static const char *const names[] = {"trtllm", "trtllm-v0", "sglang", "sglang-v0.3", "vllm", "vllm-v0"};
    static const scn_prefill_mix want[] = {SCN_PREFILL_MIX_ALWAYS, SCN_PREFILL_MIX_ALWAYS, SCN_PREFILL_MIX_NEVER,
                                           SCN_PREFILL_MIX_NEVER, SCN_PREFILL_MIX_BY_SCHEDULER,
                                           SCN_PREFILL_MIX_BY_SCHEDULER};
    for (int i = 0; i < 6; i++) {
        char set[64], text[256];
        snprintf(set, sizeof set, "engine=%s", names[i]);
        const char *sets[] = {set};
        snprintf(text, sizeof text, "model: llama-3-8b\nhardware: h100-sxm\nworkload:\n  arrival: {process: poisson, "
                                    "rate: 1/s}\n  prompt_tokens: 10\n  output_tokens: 10\n");
        scn_error e;
        ck_assert_msg(t_load(text, sets, 1, &s, &e) == SCN_OK, "%s: %s", names[i], e.msg);
        ck_assert_msg(s.engine.prefill_mix == want[i], "%s: prefill_mix %d", names[i], (int)s.engine.prefill_mix);
    }
}
END_TEST

START_TEST(sglang_chunk_follows_gpu_memory)
{
    /* ServerArgs: chunked_prefill_size 2048 below 35 GiB, 8192 below 160 GiB, 16384 above. The
     * library's GPUs: RTX 4090 24 GB; L40S 46068 MiB, A100 80 GB, H200 143771 MiB; B200 180 GB
     * (167.6 GiB), MI300X 191.7 GiB. SGLang 0.3 had 8192 whatever the GPU. */
    static const char *const hw[] = {"rtx-4090", "l40s", "a100-80g", "h200", "b200", "mi300x"};
    static const int want[] = {2048, 8192, 8192, 8192, 16384, 16384};
    for (int i = 0; i < 6; i++)
        for (int v = 0; v < 2; v++) {
            char text[256];
            snprintf(text, sizeof text, "model: llama-3-8b\nhardware: %s\nengine: %s\nworkload:\n  arrival: {process: "
                                        "poisson, rate: 1/s}\n  prompt_tokens: 10\n  output_tokens: 10\n",
                     hw[i], v ? "sglang-v0.3" : "sglang");
            scn_error e;
            ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s: %s", hw[i], e.msg);
            ck_assert_msg(s.deployment.max_num_batched_tokens == (v ? 8192 : want[i]), "%s v%d: %d", hw[i], v,
                          s.deployment.max_num_batched_tokens);
            ck_assert_int_eq(s.deployment.max_num_seqs, 2048);
        }
}
END_TEST

START_TEST(mixed_field_errors_are_located)
{
    const char *bad[] = {"engine={name: x, chunked_prefill: {enabled: true, mixed: sometimes}}"};
    scn_error e;
    ck_assert_int_eq(t_load("model: llama-3-8b\nhardware: h100-sxm\nworkload:\n  arrival: {process: poisson, rate: 1/s}\n"
                            "  prompt_tokens: 10\n  output_tokens: 10\n",
                            bad, 1, &s, &e),
                     SCN_E_DATA);
    ck_assert_str_eq(e.path, "engine.chunked_prefill.mixed");
}
END_TEST

/* The fast-forward over decode runs (sim/engine.c) under both new rules gives the run that
 * forming every step gives: each metric bit for bit and each request's times. Poisson traffic
 * with spread lengths, a shared prefix and a pool small enough to preempt. */
typedef struct { double sum; long n; } tally;

static int on_tally(void *ud, const sim_request_row *r)
{
    tally *x = ud;
    x->sum += r->ttft * 3 + r->e2e * 7 + r->tpot * 11 + (double)r->id;
    x->n++;
    return 0;
}

START_TEST(fast_forward_agrees_under_both_rules)
{
    static const char *const engines[] = {"trtllm-v0", "sglang", "sglang-v0.3"};
    static const char *const sched[] = {"continuous", "chunked"};
    long preempted = 0;
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 2; k++)
            for (int prefix = 0; prefix < 4; prefix++) {
                char text[1024];
                snprintf(text, sizeof text,
                         "model: llama-3-8b\nhardware: a100-80g\nengine: %s\n"
                         "deployment: {max_num_seqs: 48, max_num_batched_tokens: 1024, max_model_len: 4096}\n"
                         "workload:\n  requests: 300\n  arrival: {process: poisson, rate: 12/s}\n"
                         "  prompt_tokens: {dist: lognormal, mean: 600, sigma: 0.8, max: 3000}\n"
                         "  output_tokens: {dist: lognormal, mean: 120, sigma: 0.8, max: 900}\n"
                         "  shared_prefix: {groups: 3, tokens: 256, share: 0.6}\n"
                         "options: {kv_layout: paged, block_size: 16, prefix_cache: %s, scheduler: %s}\n",
                         engines[i], prefix == 1 ? "on" : "off", sched[k]);
                scn_error e;
                ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s", e.msg);
                sim_choice c = sim_choice_first(&s);
                sim_metrics m[2];
                tally x[2];
                for (int per = 0; per < 2; per++) {
                    sim_executor ex;
                    ck_assert_int_eq(sim_executor_model(&s, &c, &ex), 0);
                    memset(&x[per], 0, sizeof x[per]);
                    /* prefix 2 and 3: pools of 400 and 600 blocks (6400 and 9600 tokens), so
                     * sequences are preempted, and a chunked prefill waits for blocks. */
                    sim_run_opts o = {.seed = 3, .on_request = on_tally, .ud = &x[per], .per_step = per == 1,
                                      .kv_blocks_override = prefix == 2 ? 400 : prefix == 3 ? 600 : 0};
                    char err[512];
                    int rc = sim_run(&s, &c, &ex, &o, &m[per], err, sizeof err);
                    ex.free(ex.ctx);
                    ck_assert_msg(rc == SIM_OK, "%s", err);
                }
                sim_metric_kv a[SIM_METRICS_MAX], b[SIM_METRICS_MAX];
                int n = sim_metrics_list(&m[0], a, SIM_METRICS_MAX);
                sim_metrics_list(&m[1], b, SIM_METRICS_MAX);
                for (int q = 0; q < n; q++)
                    ck_assert_msg(!memcmp(&a[q].value, &b[q].value, sizeof(double)), "%s %s prefix %d: %s %.17g / %.17g",
                                  engines[i], sched[k], prefix, a[q].name, a[q].value, b[q].value);
                ck_assert(x[0].n == x[1].n && !memcmp(&x[0].sum, &x[1].sum, sizeof(double)));
                ck_assert(m[0].requests > 0);
                preempted += m[0].preemptions;
            }
    ck_assert(preempted > 0);
}
END_TEST

Suite *suite_mixing(void)
{
    Suite *su = suite_create("mixing");
    TCase *tc = tcase_create("mixing");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, inflight_batching_mixes_whole_prompts);
    tcase_add_test(tc, prefill_first_stalls_the_decodes);
    tcase_add_test(tc, separate_chunked_prefill_steps);
    tcase_add_test(tc, mixed_chunked_prefill_steps);
    tcase_add_test(tc, separate_chunks_continue_before_decodes);
    tcase_add_test(tc, whole_prompt_over_the_budget_runs_as_the_only_prompt);
    tcase_add_test(tc, whole_prompt_that_fits_the_budget_waits_for_room);
    tcase_add_test(tc, a_chunked_prefill_short_of_blocks_waits_for_the_decodes);
    tcase_add_test(tc, mixed_step_ttft_with_the_model_clock);
    tcase_add_test(tc, profiles_say_how_they_batch);
    tcase_add_test(tc, sglang_chunk_follows_gpu_memory);
    tcase_add_test(tc, mixed_field_errors_are_located);
    tcase_add_test(tc, fast_forward_agrees_under_both_rules);
    suite_add_tcase(su, tc);
    return su;
}
