/* test_frontend.c: the serving front end's share of time to first token (docs/cost-model.md,
 * "Engine profiles", "Front end") and the engine profile a published row's version selects
 * (docs/cost-model.md, "Engine profiles", "Engine versions"). Times are worked by hand: a clock where every step
 * takes one second makes a lone request's TTFT the front end plus one step; with the cost
 * model as the clock, the front end plus the prefill step kv_step_time prices. */
#include "tests.h"
#include "../sim/sim.h"
#include "../model/kv_model.h"
#include "../planner/plan_published.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct { double ttft, tpot, e2e; int n; } row1;

static int on_row(void *ud, const sim_request_row *r)
{
    row1 *x = ud;
    x->ttft = r->ttft; x->tpot = r->tpot; x->e2e = r->e2e;
    x->n++;
    return 0;
}

static scn_scenario s;

static const char *SCN = "model: llama-3-8b\nhardware: h100-sxm\nworkload:\n  arrival: {process: poisson, rate: 1/s}\n"
                         "  prompt_tokens: 10\n  output_tokens: 10\n";

/* One request of 1000 prompt tokens and 3 output tokens, arriving at an idle engine at 0. */
static void load_lone(const char *process)
{
    const char *trace = t_write("fe-trace.csv", "arrival_s,prompt_tokens,output_tokens\n0.0,1000,3\n");
    char text[1024];
    if (!strcmp(process, "trace"))
        snprintf(text, sizeof text,
                 "model: llama-3-8b\nhardware: h100-sxm\nengine: vllm\n"
                 "workload:\n  arrival: {process: trace, trace: '%s'}\n"
                 "options: {kv_layout: paged, block_size: 16, prefix_cache: off}\n", trace);
    else
        snprintf(text, sizeof text,
                 "model: llama-3-8b\nhardware: h100-sxm\nengine: vllm\n"
                 "workload:\n  requests: 1\n  arrival: {process: offline}\n"
                 "  prompt_tokens: 1000\n  output_tokens: 3\n"
                 "options: {kv_layout: paged, block_size: 16, prefix_cache: off}\n");
    scn_error e;
    ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s", e.msg);
}

static row1 run_lone(bool model_clock)
{
    sim_choice c = sim_choice_first(&s);
    sim_executor ex = t_one_second_executor();
    if (model_clock) ck_assert_int_eq(sim_executor_model(&s, &c, &ex), 0);
    row1 x = {0};
    sim_run_opts o = {.seed = 1, .on_request = on_row, .ud = &x};
    sim_metrics m;
    char err[512];
    int rc = sim_run(&s, &c, &ex, &o, &m, err, sizeof err);
    if (model_clock) ex.free(ex.ctx);
    ck_assert_msg(rc == SIM_OK, "%s", err);
    ck_assert_int_eq(x.n, 1);
    return x;
}

START_TEST(profiles_carry_the_tokeniser_rate)
{
    /* The bundled serving engines tokenise on the request path at 1.9 us per prompt token and
     * detokenise the first token in 0.26 ms (andyluo7/cpu-gpu-codesign-agentic-inference's
     * tokenizer benchmark). */
    const char *names[] = {"vllm", "sglang", "trtllm"};
    for (int i = 0; i < 3; i++) {
        char set[64];
        snprintf(set, sizeof set, "engine=%s", names[i]);
        const char *sets[] = {set};
        scn_error e;
        ck_assert_int_eq(t_load(SCN, sets, 1, &s, &e), SCN_OK);
        ck_assert_double_eq_tol(s.engine.frontend_token, 1.9e-6, 1e-18);
        ck_assert_double_eq_tol(s.engine.frontend_request, 0.26e-3, 1e-15);
    }
    /* kvplan's own backends and a bare decoder have no server in front. */
    const char *bare[] = {"engine=bare"};
    scn_error e;
    ck_assert_int_eq(t_load(SCN, bare, 1, &s, &e), SCN_OK);
    ck_assert(s.engine.frontend_token == 0 && s.engine.frontend_request == 0);
}
END_TEST

START_TEST(frontend_fields_bind_and_errors_are_located)
{
    scn_error e;
    const char *ok[] = {"engine={name: x, frontend: {request: 2 ms, per_prompt_token: 5 us}}"};
    ck_assert_int_eq(t_load(SCN, ok, 1, &s, &e), SCN_OK);
    ck_assert_double_eq_tol(s.engine.frontend_request, 2e-3, 1e-15);
    ck_assert_double_eq_tol(s.engine.frontend_token, 5e-6, 1e-18);
    /* 2 ms + 300 x 5 us = 3.5 ms for a served request, by hand. */
    ck_assert_double_eq_tol(kv_frontend_seconds(&s, 300), 3.5e-3, 1e-15);
    const char *bad1[] = {"engine={name: x, frontend: {per_token: 5 us}}"};
    ck_assert_int_eq(t_load(SCN, bad1, 1, &s, &e), SCN_E_DATA);
    ck_assert_str_eq(e.path, "engine.frontend.per_token");
    const char *bad2[] = {"engine={name: x, frontend: {request: 2}}"};
    ck_assert_int_eq(t_load(SCN, bad2, 1, &s, &e), SCN_E_DATA);
    ck_assert_str_eq(e.path, "engine.frontend.request");
    const char *bad3[] = {"engine={name: x, frontend: {request: -1 ms}}"};
    ck_assert_int_eq(t_load(SCN, bad3, 1, &s, &e), SCN_E_DATA);
    ck_assert_str_eq(e.path, "engine.frontend.request");
}
END_TEST

START_TEST(mla_cache_field_binds_and_errors_are_located)
{
    scn_error e;
    const char *ok[] = {"engine={name: x, mla: {cache: expanded}}"};
    ck_assert_int_eq(t_load(SCN, ok, 1, &s, &e), SCN_OK);
    ck_assert(s.engine.mla_expanded);
    const char *lat[] = {"engine={name: x, mla: {cache: latent}}"};
    ck_assert_int_eq(t_load(SCN, lat, 1, &s, &e), SCN_OK);
    ck_assert(!s.engine.mla_expanded);
    const char *bad1[] = {"engine={name: x, mla: {cache: decompressed}}"};
    ck_assert_int_eq(t_load(SCN, bad1, 1, &s, &e), SCN_E_DATA);
    ck_assert_str_eq(e.path, "engine.mla.cache");
    const char *bad2[] = {"engine={name: x, mla: {layout: latent}}"};
    ck_assert_int_eq(t_load(SCN, bad2, 1, &s, &e), SCN_E_DATA);
    ck_assert_str_eq(e.path, "engine.mla.layout");
    const char *bad3[] = {"engine={name: x, mla: expanded}"};
    ck_assert_int_eq(t_load(SCN, bad3, 1, &s, &e), SCN_E_DATA);
    ck_assert_str_eq(e.path, "engine.mla");
}
END_TEST

START_TEST(lone_request_ttft_is_frontend_plus_one_step)
{
    load_lone("trace");
    s.engine.frontend_request = 2e-3;   /* round figures, so the sum is plain */
    s.engine.frontend_token = 10e-6;
    /* Front end: 2 ms + 1000 x 10 us = 12 ms; the prefill step takes 1 s, each decode 1 s. */
    row1 x = run_lone(false);
    ck_assert_double_eq_tol(x.ttft, 1.012, 1e-12);
    ck_assert_double_eq_tol(x.e2e, 3.012, 1e-12);
    ck_assert_double_eq_tol(x.tpot, 1.0, 1e-12);   /* every token is delayed alike: gaps unchanged */
    /* Offline: the prompts reach the engine in-process, so no front end. */
    load_lone("offline");
    s.engine.frontend_request = 2e-3;
    s.engine.frontend_token = 10e-6;
    ck_assert_double_eq(kv_frontend_seconds(&s, 1000), 0);
    x = run_lone(false);
    ck_assert_double_eq_tol(x.ttft, 1.0, 1e-12);
}
END_TEST

START_TEST(lone_request_ttft_with_the_model_clock)
{
    /* TTFT of a lone request at an idle engine = front end + the prefill step of its whole
     * prompt (1000 tokens fit the 8192-token budget: one step), priced by kv_step_time. */
    load_lone("trace");
    sim_choice c = sim_choice_first(&s);
    kv_cache_cfg cc = kv_cache_cfg_make(&s, c.kv_dtype, c.sink, c.window);
    kv_seq_work w = {1000, 0};
    double prefill = kv_step_time(&s, &cc, c.attention, &w, 1).seconds;
    row1 x = run_lone(true);
    ck_assert_double_eq_tol(x.ttft, 0.26e-3 + 1000 * 1.9e-6 + prefill, 1e-12 * x.ttft);
}
END_TEST

START_TEST(version_selects_the_engine_profile)
{
    /* vLLM before 0.6 ran V0 with its CPU-bound loop: the vllm-v0 profile. 0.6 and later, an
     * unstated version, or one that is not a number keep the current profile. Both versioned
     * profiles exist in the library. */
    char out[64];
    ck_assert_str_eq(pub_engine_profile("vllm", "0.5.3", out, sizeof out), "vllm-v0");
    ck_assert_str_eq(pub_engine_profile("vllm", "main 2024-08 (~0.5.4)", out, sizeof out), "vllm-v0");
    ck_assert_str_eq(pub_engine_profile("vllm", "0.4", out, sizeof out), "vllm-v0");
    /* vLLM PR #2863 (in 0.3.1) moved the profiler's baseline to the memory free at start-up. */
    ck_assert_str_eq(pub_engine_profile("vllm", "PR #2031 branch (Dec 2023, ~0.2.4)", out, sizeof out), "vllm-0.2");
    ck_assert_str_eq(pub_engine_profile("vllm", "0.3.0", out, sizeof out), "vllm-0.2");
    ck_assert_str_eq(pub_engine_profile("vllm", "0.3.1", out, sizeof out), "vllm-v0");
    /* 0.6.0 to 0.7.0 cached MLA expanded (vllm-0.7: vllm plus that), and their default V0
     * engine handed outputs over one step late (vllm-0.6: vllm-0.7 plus that; a row marked V1
     * keeps vllm-0.7); 0.7.1 on, the latent, with MLA's absorbed products materialised until
     * 0.8.0 (vllm-0.7.1). */
    ck_assert_str_eq(pub_engine_profile("vllm", "0.6.0", out, sizeof out), "vllm-0.6");
    ck_assert_str_eq(pub_engine_profile("vllm", "0.6", out, sizeof out), "vllm-0.6");
    ck_assert_str_eq(pub_engine_profile("vllm", "0.6.2", out, sizeof out), "vllm-0.6");
    /* From 0.6.3 multi-step runs streamed each step by default (vllm-0.6.3). */
    ck_assert_str_eq(pub_engine_profile("vllm", "0.6.3.post1", out, sizeof out), "vllm-0.6.3");
    ck_assert_str_eq(pub_engine_profile("vllm", "0.7.0", out, sizeof out), "vllm-0.6.3");
    ck_assert_str_eq(pub_engine_profile("vllm", "0.7.1", out, sizeof out), "vllm-0.7.1");
    ck_assert_str_eq(pub_engine_profile("vllm", "0.7", out, sizeof out), "vllm-0.7.1");
    ck_assert_str_eq(pub_engine_profile("vllm", "0.7.3", out, sizeof out), "vllm-0.7.1");
    ck_assert_str_eq(pub_engine_profile("vllm", "0.8.0", out, sizeof out), "vllm");
    ck_assert_str_eq(pub_engine_profile("vllm", "0.11.0", out, sizeof out), "vllm");
    ck_assert_str_eq(pub_engine_profile("vllm", "0.7.0 (V1)", out, sizeof out), "vllm-0.7");
    ck_assert_str_eq(pub_engine_profile("vllm", "1.0", out, sizeof out), "vllm");
    ck_assert_str_eq(pub_engine_profile("vllm", "unstated", out, sizeof out), "vllm");
    /* SGLang before 0.4 ran without the overlap scheduler: sglang-v0.3. */
    ck_assert_str_eq(pub_engine_profile("sglang", "0.3.0", out, sizeof out), "sglang-v0.3");
    ck_assert_str_eq(pub_engine_profile("sglang", "0.3", out, sizeof out), "sglang-v0.3");
    ck_assert_str_eq(pub_engine_profile("sglang", "0.4.0", out, sizeof out), "sglang");
    ck_assert_str_eq(pub_engine_profile("sglang", "0.5.3.post3", out, sizeof out), "sglang");
    /* TensorRT-LLM before 1.0: the TensorRT engine backend, no overlap scheduler; 0.5 and 0.6
     * decoded with the masked MHA kernel and built with legacy scripts whose all-reduce was NCCL
     * (trtllm-v0.6). */
    ck_assert_str_eq(pub_engine_profile("trtllm", "0.5", out, sizeof out), "trtllm-v0.6");
    ck_assert_str_eq(pub_engine_profile("trtllm", "0.6.1", out, sizeof out), "trtllm-v0.6");
    ck_assert_str_eq(pub_engine_profile("trtllm", "0.7.1", out, sizeof out), "trtllm-v0");
    ck_assert_str_eq(pub_engine_profile("trtllm", "0.14.0", out, sizeof out), "trtllm-v0");
    ck_assert_str_eq(pub_engine_profile("trtllm", "0.17", out, sizeof out), "trtllm-v0");
    ck_assert_str_eq(pub_engine_profile("trtllm", "1.0.0", out, sizeof out), "trtllm");
    ck_assert_str_eq(pub_engine_profile("trtllm", "1.2.0rc1", out, sizeof out), "trtllm");
    ck_assert_str_eq(pub_engine_profile("trtllm", "unstated (MLPerf Inference v4.1 NVIDIA submission)", out, sizeof out),
                     "trtllm");
    ck_assert_str_eq(pub_engine_profile("gpt-fast", "", out, sizeof out), "bare");
}
END_TEST

START_TEST(versioned_profiles_load)
{
    /* vllm-v0: V0's serial 4 ms per step (vLLM RFC #6854), captures to 256, no chunked prefill. */
    scn_error e;
    const char *v0[] = {"engine=vllm-v0"};
    ck_assert_int_eq(t_load(SCN, v0, 1, &s, &e), SCN_OK);
    ck_assert_str_eq(s.engine.name, "vllm-v0");
    ck_assert(!s.engine.async_scheduling && !s.engine.chunked_prefill);
    ck_assert_double_eq_tol(s.hardware.step_overhead, 4e-3, 1e-15);
    ck_assert_int_eq(s.engine.graph_sizes[s.engine.n_graph_sizes - 1], 256);
    ck_assert_int_eq(s.options.scheduler[0], SCN_SCHED_CONTINUOUS);   /* prefill-first */
    /* sglang-v0.3: the current SGLang profile with the CPU serial (no overlap scheduler). */
    const char *g3[] = {"engine=sglang-v0.3"};
    ck_assert_int_eq(t_load(SCN, g3, 1, &s, &e), SCN_OK);
    ck_assert_str_eq(s.engine.name, "sglang-v0.3");
    ck_assert(!s.engine.async_scheduling);
    scn_engine v3 = s.engine;
    const char *g4[] = {"engine=sglang"};
    ck_assert_int_eq(t_load(SCN, g4, 1, &s, &e), SCN_OK);
    ck_assert(s.engine.async_scheduling);
    ck_assert(v3.step_cpu == s.engine.step_cpu && v3.n_graph_sizes == s.engine.n_graph_sizes &&
              v3.max_num_batched_tokens == s.engine.max_num_batched_tokens && v3.attn_kernel == s.engine.attn_kernel);
    /* trtllm-v0: the current TensorRT-LLM profile without the overlap scheduler, and without
     * CUDA graphs (the engine backend's cuda_graph_mode, trtllm-bench's cuda_graphs and
     * gptSessionBenchmark's --enable_cuda_graph are all off unless asked for); the kernel
     * boundary keeps its 3 us. */
    const char *t0[] = {"engine=trtllm-v0"};
    ck_assert_int_eq(t_load(SCN, t0, 1, &s, &e), SCN_OK);
    ck_assert(!s.engine.async_scheduling && !s.engine.extra_decode_step);
    ck_assert(!s.engine.cuda_graphs);
    ck_assert_double_eq_tol(s.engine.graph_kernel, 3e-6, 1e-15);
    {
        /* A batch-1 decode step then launches its kernels eagerly: no graph, no graph launch. */
        sim_choice c = sim_choice_first(&s);
        kv_cache_cfg cc = kv_cache_cfg_make(&s, c.kv_dtype, c.sink, c.window);
        kv_seq_work w = {1, 300};
        kv_step_cost r = kv_step_time(&s, &cc, c.attention, &w, 1);
        ck_assert(!r.graph);
        ck_assert_double_eq_tol(r.op[KV_OP_STEP].seconds, r.cpu_seconds, 1e-15);
    }
    scn_engine t0e = s.engine;
    const char *t1[] = {"engine=trtllm"};
    ck_assert_int_eq(t_load(SCN, t1, 1, &s, &e), SCN_OK);
    ck_assert(s.engine.async_scheduling && s.engine.extra_decode_step);
    ck_assert(s.engine.cuda_graphs && s.engine.n_graph_sizes > 0);
    ck_assert(t0e.step_cpu == s.engine.step_cpu && t0e.graph_kernel == s.engine.graph_kernel &&
              t0e.chunked_prefill == s.engine.chunked_prefill && t0e.mem_budget == s.engine.mem_budget);
    /* trtllm-v0.6: trtllm-v0 with the masked MHA decode kernel and NCCL all-reduces (the legacy
     * build scripts' default) and the session's whole-free-memory cache (its fraction,
     * test_capacity.c), every other field the same. */
    const char *t6[] = {"engine=trtllm-v0.6"};
    ck_assert_int_eq(t_load(SCN, t6, 1, &s, &e), SCN_OK);
    ck_assert_str_eq(s.engine.name, "trtllm-v0.6");
    ck_assert(s.engine.attn_kernel == SCN_AK_MMHA && t0e.attn_kernel == SCN_AK_TRTLLM);
    ck_assert(s.engine.allreduce == SCN_AR_NCCL && t0e.allreduce == SCN_AR_CUSTOM);
    const scn_engine *a = &s.engine, *b = &t0e;
    ck_assert(a->step_cpu == b->step_cpu && a->seq_cpu == b->seq_cpu && a->async_scheduling == b->async_scheduling &&
              a->extra_decode_step == b->extra_decode_step && a->kernel_launch == b->kernel_launch &&
              a->cuda_graphs == b->cuda_graphs && a->n_graph_sizes == b->n_graph_sizes &&
              a->graph_launch == b->graph_launch && a->graph_kernel == b->graph_kernel &&
              a->chunked_prefill == b->chunked_prefill && a->max_num_batched_tokens == b->max_num_batched_tokens &&
              a->prefill_mix == b->prefill_mix && a->oneshot_max == b->oneshot_max &&
              a->custom_max == b->custom_max && a->mem_budget == b->mem_budget && a->weight_only == b->weight_only &&
              a->frontend_request == b->frontend_request && a->frontend_token == b->frontend_token);
}
END_TEST

START_TEST(cost_prints_the_front_end)
{
    /* `kvplan cost --prefill 467`: t_frontend = 0.26 ms + 467 x 1.9 us = 1.1473 ms, and with no
     * decode batch a lone request's TTFT = that + the step. */
    const char *yaml = t_write("fe-cost.yaml", "model: llama-3-8b\nhardware: h100-sxm\nengine: sglang\n"
                                               "workload:\n  arrival: {process: poisson, rate: 1/s}\n"
                                               "  prompt_tokens: 467\n  output_tokens: 10\n");
    char args[600], out[16384], err[2048];
    snprintf(args, sizeof args, "cost %s --batch 0 --prefill 467 --format json", yaml);
    ck_assert_msg(t_run(args, out, sizeof out, err, sizeof err) == 0, "%s", err);
    const char *f = strstr(out, "\"frontend_seconds\":"), *t = strstr(out, "\"ttft_lone_seconds\":"),
               *st = strstr(out, "\"step_seconds\":");
    ck_assert_msg(f && t && st, "%s", out);
    double fe = strtod(f + strlen("\"frontend_seconds\":"), NULL);
    double lone = strtod(t + strlen("\"ttft_lone_seconds\":"), NULL);
    double step = strtod(st + strlen("\"step_seconds\":"), NULL);
    ck_assert_double_eq_tol(fe, 0.26e-3 + 467 * 1.9e-6, 1e-9);
    ck_assert_double_eq_tol(lone, fe + step, 1e-9);
}
END_TEST

START_TEST(simulate_says_the_front_end)
{
    /* 20 served requests of 467 prompt tokens: 0.26 ms + 467 x 1.9 us = 1.147 ms, printed to
     * three digits; an offline run of the same requests has no front end and no note. */
    const char *yaml = t_write("fe-sim.yaml", "model: llama-3-8b\nhardware: h100-sxm\nengine: vllm\n"
                                              "workload:\n  requests: 20\n  arrival: {process: poisson, rate: 2/s}\n"
                                              "  prompt_tokens: 467\n  output_tokens: 8\n");
    char args[700], out[16384], err[2048];
    snprintf(args, sizeof args, "simulate %s --no-db", yaml);
    ck_assert_msg(t_run(args, out, sizeof out, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(strstr(out, "front end: 1.15 ms a request on average"), "%s", out);
    snprintf(args, sizeof args, "simulate %s --no-db --set workload.arrival.process=offline", yaml);
    ck_assert_msg(t_run(args, out, sizeof out, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(!strstr(out, "front end:"), "%s", out);
}
END_TEST

/* rows by request id for the two-request trace below */
typedef struct { double ttft[2]; int n; } row2;

static int on_row2(void *ud, const sim_request_row *r)
{
    row2 *x = ud;
    if (r->id >= 0 && r->id < 2) x->ttft[r->id] = r->ttft;
    x->n++;
    return 0;
}

START_TEST(v0_loop_detokenises_every_sequence)
{
    /* vLLM V0 up to 0.5.4 did per-sequence work serially with the GPU: detokenising each running
     * sequence's new token, 20 us a call (vLLM issue #5206), and allocating its Python objects,
     * 40 us (vLLM PR #7162: 1000/19.48 - 1000/24.32 s over 1000 x 256 sequence-steps), on top
     * of the RFC #6854 4 ms a step. A decode step of 256 sequences therefore carries
     * 4 ms + 256 x 60 us = 19.36 ms of CPU, all of it on the step's clock; one sequence
     * 4.06 ms. The current profile keeps 0.5 ms + 5 us a sequence (V1 detokenises in its
     * API-server process, off the engine loop). */
    static const struct { const char *engine; int n; double cpu; } cases[] = {
        {"vllm-v0", 256, 4e-3 + 256 * 60e-6}, {"vllm-v0", 1, 4e-3 + 60e-6}, {"vllm", 256, 0.5e-3 + 256 * 5e-6}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char set[64];
        snprintf(set, sizeof set, "engine=%s", cases[i].engine);
        const char *sets[] = {set};
        scn_error e;
        ck_assert_msg(t_load(SCN, sets, 1, &s, &e) == SCN_OK, "%s", e.msg);
        sim_choice c = sim_choice_first(&s);
        kv_cache_cfg cc = kv_cache_cfg_make(&s, c.kv_dtype, c.sink, c.window);
        kv_seq_work *w = malloc(sizeof *w * (size_t)cases[i].n);
        ck_assert_ptr_nonnull(w);
        for (int k = 0; k < cases[i].n; k++) w[k] = (kv_seq_work){1, 300};
        kv_step_cost r = kv_step_time(&s, &cc, c.attention, w, cases[i].n);
        free(w);
        ck_assert_msg(fabs(r.cpu_seconds - cases[i].cpu) <= 1e-12, "%s at %d: cpu %.9g s, want %.9g s",
                      cases[i].engine, cases[i].n, r.cpu_seconds, cases[i].cpu);
        /* Serial: the whole CPU term is on the step's clock, after the GPU's time; a decode of
         * 256 sequences at 300 tokens runs as a captured graph, so the graph's launch joins it. */
        double graph = r.graph ? s.engine.graph_launch : 0;
        ck_assert_double_eq_tol(r.op[KV_OP_STEP].seconds, cases[i].cpu + graph, 1e-12);
        ck_assert_double_eq_tol(r.seconds, r.gpu_seconds + cases[i].cpu, 1e-12 + 1e-12 * r.seconds);
    }
}
END_TEST

START_TEST(one_step_ahead_scheduling_defers_arrivals)
{
    /* A arrives at 0 at an idle engine; B at 1.5 s, during A's second step (1 s to 2 s). Every
     * step takes 1 s. Serial scheduling forms the 2 s step after B arrived: B's prefill runs from
     * 2 s to 3 s, TTFT 1.5 s. An engine that schedules one step ahead formed the 2 s step when
     * the 1 s step started, without B: B's prefill runs from 3 s to 4 s, TTFT 2.5 s. A, arriving
     * at an idle engine, is not deferred: TTFT 1 s either way. */
    const char *trace = t_write("fe-two.csv", "arrival_s,prompt_tokens,output_tokens\n0.0,16,6\n1.5,16,3\n");
    char text[1024];
    snprintf(text, sizeof text,
             "model: llama-3-8b\nhardware: h100-sxm\nengine: sglang\n"
             "workload:\n  arrival: {process: trace, trace: '%s'}\n"
             "options: {kv_layout: paged, block_size: 16, prefix_cache: off}\n", trace);
    for (int async = 0; async < 2; async++) {
        scn_error e;
        ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s", e.msg);
        s.engine.async_scheduling = async;
        s.engine.frontend_request = s.engine.frontend_token = 0;   /* step counts only */
        sim_choice c = sim_choice_first(&s);
        sim_executor ex = t_one_second_executor();
        row2 x = {{0}, 0};
        sim_run_opts o = {.seed = 1, .on_request = on_row2, .ud = &x};
        sim_metrics m;
        char err[512];
        ck_assert_msg(sim_run(&s, &c, &ex, &o, &m, err, sizeof err) == SIM_OK, "%s", err);
        ck_assert_int_eq(x.n, 2);
        ck_assert_double_eq_tol(x.ttft[0], 1.0, 1e-12);
        ck_assert_double_eq_tol(x.ttft[1], async ? 2.5 : 1.5, 1e-12);
    }
}
END_TEST

typedef struct { int replica[4]; int n; } rowrep;

static int on_rowrep(void *ud, const sim_request_row *r)
{
    rowrep *x = ud;
    if (r->id >= 0 && r->id < 4) x->replica[r->id] = r->replica;
    x->n++;
    return 0;
}

START_TEST(deferred_arrivals_count_for_the_router)
{
    /* Two replicas, least-outstanding routing, an engine that schedules one step ahead, steps
     * of one second. A (0 s) goes to replica 0 and starts a step there; B (0.5 s) to the idle
     * replica 1; C (0.6 s) ties at one request each and goes to replica 0, busy, so it is
     * deferred; D (0.7 s) must see replica 0 holding A and C and go to replica 1. */
    const char *trace = t_write("fe-route.csv", "arrival_s,prompt_tokens,output_tokens\n0.0,16,4\n0.5,16,4\n"
                                                "0.6,16,4\n0.7,16,4\n");
    char text[1024];
    snprintf(text, sizeof text,
             "model: llama-3-8b\nhardware: h100-sxm\nengine: sglang\n"
             "deployment: {replicas: 2, router: least_outstanding}\n"
             "workload:\n  arrival: {process: trace, trace: '%s'}\n"
             "options: {kv_layout: paged, block_size: 16, prefix_cache: off}\n", trace);
    scn_error e;
    ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s", e.msg);
    ck_assert(s.engine.async_scheduling);
    sim_choice c = sim_choice_first(&s);
    sim_executor ex = t_one_second_executor();
    rowrep x = {{0}, 0};
    sim_run_opts o = {.seed = 1, .on_request = on_rowrep, .ud = &x};
    sim_metrics m;
    char err[512];
    ck_assert_msg(sim_run(&s, &c, &ex, &o, &m, err, sizeof err) == SIM_OK, "%s", err);
    ck_assert_int_eq(x.n, 4);
    ck_assert_int_eq(x.replica[0], 0);
    ck_assert_int_eq(x.replica[1], 1);
    ck_assert_int_eq(x.replica[2], 0);
    ck_assert_int_eq(x.replica[3], 1);
}
END_TEST


typedef struct { double ttft[3], e2e[3], tpot[3]; int n; } row3;

static int on_row3(void *ud, const sim_request_row *r)
{
    row3 *x = ud;
    if (r->id >= 0 && r->id < 3) { x->ttft[r->id] = r->ttft; x->e2e[r->id] = r->e2e; x->tpot[r->id] = r->tpot; }
    x->n++;
    return 0;
}

static row3 run_three(void)
{
    sim_choice c = sim_choice_first(&s);
    sim_executor ex = t_one_second_executor();
    row3 x = {{0}, {0}, {0}, 0};
    sim_run_opts o = {.seed = 1, .on_request = on_row3, .ud = &x};
    sim_metrics m;
    char err[512];
    ck_assert_msg(sim_run(&s, &c, &ex, &o, &m, err, sizeof err) == SIM_OK, "%s", err);
    ck_assert_int_eq(x.n, 3);
    return x;
}

START_TEST(burst_waits_for_the_front_end_in_turn)
{
    /* Three requests sent at 0 (prompts 10, 30, 10 tokens; 2 output tokens), a front end of
     * 0.1 s + 10 ms per prompt token: 0.2, 0.4 and 0.2 s each, one at a time. A reaches the
     * scheduler at 0 and is prefilled alone in step 0-1; B at 0.2 and C at 0.6 arrive during
     * that step. The profile has no chunked prefill, so step 1-2 prefills B and C alone and
     * step 2-3 decodes all three (every last token at 3). The client adds each request's own
     * front end: TTFT A 1 + 0.2, B 2 + 0.4, C 2 + 0.2; E2E 3 + the same; TPOT A 2 (its gap
     * spans B and C's prefill), B and C 1. Without the queue all three would be prefilled in
     * step 0-1 (TTFT 1 + their front end). */
    const char *trace = t_write("fe-burst.csv", "arrival_s,prompt_tokens,output_tokens\n0.0,10,2\n0.0,30,2\n0.0,10,2\n");
    char text[1024];
    snprintf(text, sizeof text,
             "model: llama-3-8b\nhardware: h100-sxm\nengine: {name: x, frontend: {request: 0.1 s, per_prompt_token: 10 ms}}\n"
             "workload:\n  arrival: {process: trace, trace: '%s'}\n"
             "options: {kv_layout: paged, block_size: 16, prefix_cache: off}\n", trace);
    scn_error e;
    ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s", e.msg);
    row3 x = run_three();
    ck_assert_double_eq_tol(x.ttft[0], 1.2, 1e-12);
    ck_assert_double_eq_tol(x.ttft[1], 2.4, 1e-12);
    ck_assert_double_eq_tol(x.ttft[2], 2.2, 1e-12);
    ck_assert_double_eq_tol(x.e2e[0], 3.2, 1e-12);
    ck_assert_double_eq_tol(x.e2e[1], 3.4, 1e-12);
    ck_assert_double_eq_tol(x.e2e[2], 3.2, 1e-12);
    ck_assert_double_eq_tol(x.tpot[0], 2.0, 1e-12);
    ck_assert_double_eq_tol(x.tpot[1], 1.0, 1e-12);
    ck_assert_double_eq_tol(x.tpot[2], 1.0, 1e-12);
}
END_TEST

START_TEST(offline_via_server_passes_the_front_end)
{
    /* Three 10-token prompts, all waiting at 0, front end 0.1 s + 10 ms per token = 0.2 s each.
     * Sent to the server (via: server): A reaches the scheduler at 0 (step 0-1 prefills it), B
     * at 0.2 and C at 0.4 (step 1-2): TTFT A 1.2, B and C 2.2. Handed over in-process (the
     * default): no front end, all three prefilled in step 0-1, TTFT 1. */
    const char *fmt = "model: llama-3-8b\nhardware: h100-sxm\nengine: {name: x, frontend: {request: 0.1 s, per_prompt_token: 10 ms}}\n"
                      "workload:\n  requests: 3\n  arrival: {process: offline%s}\n  prompt_tokens: 10\n  output_tokens: 2\n"
                      "options: {kv_layout: paged, block_size: 16, prefix_cache: off}\n";
    char text[1024];
    scn_error e;
    snprintf(text, sizeof text, fmt, ", via: server");
    ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s", e.msg);
    ck_assert(s.workload.via_server);
    ck_assert_double_eq_tol(kv_frontend_seconds(&s, 10), 0.2, 1e-15);
    row3 x = run_three();
    ck_assert_double_eq_tol(x.ttft[0], 1.2, 1e-12);
    ck_assert_double_eq_tol(x.ttft[1], 2.2, 1e-12);
    ck_assert_double_eq_tol(x.ttft[2], 2.2, 1e-12);
    snprintf(text, sizeof text, fmt, ", via: in-process");
    ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s", e.msg);
    ck_assert(!s.workload.via_server);
    x = run_three();
    for (int i = 0; i < 3; i++) ck_assert_double_eq_tol(x.ttft[i], 1.0, 1e-12);
    /* via belongs to offline; an unknown way is an error, located. */
    const char *bad1[] = {"workload.arrival.via=server"};
    ck_assert_int_eq(t_load(SCN, bad1, 1, &s, &e), SCN_E_DATA);
    ck_assert_str_eq(e.path, "workload.arrival.via");
    snprintf(text, sizeof text, fmt, ", via: pigeon");
    ck_assert_int_eq(t_load(text, NULL, 0, &s, &e), SCN_E_DATA);
    ck_assert_str_eq(e.path, "workload.arrival.via");
}
END_TEST


START_TEST(waiting_bound_covers_the_front_end_queue)
{
    /* Five requests sent together, a front end of 0.2 s each, a waiting bound of 2. The first
     * finds the server free and waits for the scheduler (1 waiting); the second queues at the
     * front end (1 + 1 = 2 now wait); the other three find the bound reached and are turned
     * away, as an overloaded server answers "busy". */
    const char *trace = t_write("fe-bound.csv", "arrival_s,prompt_tokens,output_tokens\n0,10,2\n0,10,2\n0,10,2\n0,10,2\n0,10,2\n");
    char text[1024];
    snprintf(text, sizeof text,
             "model: llama-3-8b\nhardware: h100-sxm\nengine: {name: x, frontend: {request: 0.2 s}}\n"
             "workload:\n  arrival: {process: trace, trace: '%s'}\n"
             "options: {kv_layout: paged, block_size: 16, prefix_cache: off}\n", trace);
    scn_error e;
    ck_assert_msg(t_load(text, NULL, 0, &s, &e) == SCN_OK, "%s", e.msg);
    sim_choice c = sim_choice_first(&s);
    sim_executor ex = t_one_second_executor();
    sim_run_opts o = {.seed = 1, .max_waiting = 2};
    sim_metrics m;
    char err[512];
    ck_assert_msg(sim_run(&s, &c, &ex, &o, &m, err, sizeof err) == SIM_OK, "%s", err);
    ck_assert_int_eq(m.requests, 2);
    ck_assert_int_eq(m.rejected, 3);
}
END_TEST

Suite *suite_frontend(void)
{
    Suite *su = suite_create("frontend");
    TCase *tc = tcase_create("frontend");
    tcase_add_test(tc, profiles_carry_the_tokeniser_rate);
    tcase_add_test(tc, frontend_fields_bind_and_errors_are_located);
    tcase_add_test(tc, mla_cache_field_binds_and_errors_are_located);
    tcase_add_test(tc, lone_request_ttft_is_frontend_plus_one_step);
    tcase_add_test(tc, lone_request_ttft_with_the_model_clock);
    tcase_add_test(tc, version_selects_the_engine_profile);
    tcase_add_test(tc, versioned_profiles_load);
    tcase_add_test(tc, v0_loop_detokenises_every_sequence);
    tcase_add_test(tc, one_step_ahead_scheduling_defers_arrivals);
    tcase_add_test(tc, cost_prints_the_front_end);
    tcase_add_test(tc, deferred_arrivals_count_for_the_router);
    tcase_add_test(tc, simulate_says_the_front_end);
    tcase_add_test(tc, burst_waits_for_the_front_end_in_turn);
    tcase_add_test(tc, offline_via_server_passes_the_front_end);
    tcase_add_test(tc, waiting_bound_covers_the_front_end_queue);
    suite_add_tcase(su, tc);
    return su;
}
