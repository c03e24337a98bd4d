/* test_published.c: the validate-published harness on tests/data/published-sample.tsv (made-up
 * test values): parsing, located errors for broken rows, skips with reasons, predictions checked
 * against the cost model called directly and a capacity worked by hand, and the summary
 * arithmetic on a table whose errors are set by hand. */
#include "tests.h"
#include "../model/kv_model.h"
#include "../planner/plan_published.h"
#include "../planner/plan_trtbench.h"
#include "../sim/sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char sample[1024];

static const char *sample_path(void)
{
    snprintf(sample, sizeof sample, "%s/data/published-sample.tsv", getenv("KVPLAN_TESTS"));
    return sample;
}

static pub_row *find(pub_table *t, const char *id)
{
    for (int i = 0; i < t->n; i++) if (!strcmp(t->rows[i].id, id)) return &t->rows[i];
    ck_abort_msg("row %s not found", id);
    return NULL;
}

static const char *datasets_dir(void)
{
    static char d[1024];
    snprintf(d, sizeof d, "%s/data/datasets", getenv("KVPLAN_TESTS"));
    return d;
}

static void predict_all(pub_table *t)
{
    char err[512];
    for (int i = 0; i < t->n; i++) ck_assert_msg(pub_row_predict(&t->rows[i], datasets_dir(), err, sizeof err) == 0, "%s", err);
}

START_TEST(sample_parses)
{
    pub_table t;
    char err[512];
    ck_assert_msg(pub_table_read(sample_path(), &t, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(t.n, 17);
    ck_assert_int_eq(find(&t, "t-tp-unstated")->tp, 0);
    ck_assert(find(&t, "t-cap-frac")->load == 0.5);
    ck_assert_str_eq(find(&t, "t-cap-frac")->input, "-");
    ck_assert_str_eq(find(&t, "t-prefill")->output, "0");
    pub_row *r = find(&t, "t-offline");
    ck_assert_int_eq(r->line, 9);
    ck_assert_int_eq(r->gpus, 2);
    ck_assert_int_eq(r->tp, 1);
    ck_assert_int_eq(r->mode, PUB_MODE_OFFLINE);
    ck_assert(r->load == 50);
    ck_assert_str_eq(r->input, "300");
    ck_assert_str_eq(r->unit, "tok/s/gpu");
    ck_assert_int_eq(r->cls, PUB_CLASS_THROUGHPUT);
    ck_assert(r->value == 10000);
    ck_assert_str_eq(find(&t, "t-skip-dataset")->input, "no-such-set");
    ck_assert_int_eq(find(&t, "t-closed")->cls, PUB_CLASS_TTFT);
    pub_table_free(&t);
}
END_TEST

START_TEST(capacity_row_by_hand)
{
    pub_table t;
    char err[512];
    ck_assert(pub_table_read(sample_path(), &t, err, sizeof err) == 0);
    predict_all(&t);
    pub_row *r = find(&t, "t-capacity");
    ck_assert_int_eq(r->status, PUB_PREDICTED);
    /* Llama-3-8B bf16 KV: 2 (K, V) x 32 layers x 8 KV heads x 128 dims x 2 bytes = 128 KiB per
     * token; paged in blocks of 16 tokens over the budget the capacity model leaves. */
    scn_scenario s;
    t_library("llama-3-8b", "h100-sxm", &s);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    double budget = kv_capacity_compute(&s, &c, 16, 0).kv_budget;
    double expect = floor(budget / (16 * 2.0 * 32 * 8 * 128 * 2)) * 16;
    ck_assert_msg(r->predicted == expect, "predicted %.17g, by hand %.17g", r->predicted, expect);
    ck_assert(fabs(r->error - (expect / 400000 - 1)) < 1e-12);
    /* The same with the published AWQ checkpoint: the weight format comes from the row. */
    pub_row *q = find(&t, "t-awq-capacity");
    ck_assert_msg(q->status == PUB_PREDICTED, "%s", q->why);
    scn_wformat awq;
    ck_assert_int_eq(scn_wformat_parse("awq", &awq), 0);
    kv_model_set_wformat(&s.model, &awq);
    c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    double budget_awq = kv_capacity_compute(&s, &c, 16, 0).kv_budget;
    ck_assert(budget_awq > budget);
    ck_assert(q->predicted == floor(budget_awq / (16 * 2.0 * 32 * 8 * 128 * 2)) * 16);
    pub_table_free(&t);
}
END_TEST

START_TEST(batch_rows_are_the_cost_model)
{
    pub_table t;
    char err[512];
    ck_assert(pub_table_read(sample_path(), &t, err, sizeof err) == 0);
    predict_all(&t);
    scn_scenario s;
    t_library("llama-3-8b", "h100-sxm", &s);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    /* Batch 1, 128 in, 32 out: TPOT is the mean of the 31 decode steps at context 128..158. */
    double sum = 0;
    for (int k = 1; k < 32; k++) {
        kv_seq_work w = {1, 128 + k - 1};
        sum += kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1).seconds;
    }
    pub_row *r = find(&t, "t-batch");
    ck_assert_int_eq(r->status, PUB_PREDICTED);
    ck_assert_msg(fabs(r->predicted - sum / 31 * 1000) < 1e-9, "predicted %.12g ms, expected %.12g", r->predicted,
                  sum / 31 * 1000);
    /* Batch 8, 256 in, 64 out, two replicas: 2 x 8 x 64 tokens over one prefill and 63 decodes. */
    kv_seq_work w[8];
    for (int i = 0; i < 8; i++) w[i] = (kv_seq_work){256, 0};
    double e2e = kv_step_time(&s, &c, SCN_ATTN_FLASH, w, 8).seconds;
    for (int k = 1; k < 64; k++) {
        for (int i = 0; i < 8; i++) w[i] = (kv_seq_work){1, 256 + k - 1};
        e2e += kv_step_time(&s, &c, SCN_ATTN_FLASH, w, 8).seconds;
    }
    r = find(&t, "t-batch-tput");
    ck_assert(fabs(r->predicted / (2 * 8 * 64 / e2e) - 1) < 1e-12);
    pub_table_free(&t);
}
END_TEST

START_TEST(published_conventions)
{
    /* The conventions of validation/published.tsv: a memory fraction on capacity rows, an
     * unstated KV dtype as the model's own, prefill-only batches, per-node units, gpt-fast as
     * the bare engine, int4 with a group size, and skips for what the source left unstated. */
    pub_table t;
    char err[512];
    ck_assert(pub_table_read(sample_path(), &t, err, sizeof err) == 0);
    predict_all(&t);
    scn_scenario s;
    t_library("llama-3-8b", "h100-sxm", &s);
    s.deployment.gpu_memory_utilization = 0.5;
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    pub_row *r = find(&t, "t-cap-frac");
    ck_assert_msg(r->status == PUB_PREDICTED && strstr(r->why, "KV dtype unstated"), "%s", r->why);
    ck_assert(r->predicted == floor(kv_capacity_compute(&s, &c, 16, 0).kv_budget / (16 * 2.0 * 32 * 8 * 128 * 2)) * 16);
    ck_assert(r->predicted < find(&t, "t-capacity")->predicted);
    /* 8 replicas each doing one prefill of 4 x 1024 tokens under SGLang's profile, per 8-GPU
     * node (the 8 GPUs are one node): 8 x 4096 tokens / the prefill step. */
    char path[600];
    snprintf(path, sizeof path, "%s/chat.yaml", getenv("KVPLAN_LIBRARY"));
    const char *sets[] = {"model=llama-3-8b", "hardware=h100-sxm", "engine=sglang"};
    scn_error e;
    ck_assert_int_eq(scn_scenario_load(path, sets, 3, &s, &e), SCN_OK);
    c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w[4];
    for (int i = 0; i < 4; i++) w[i] = (kv_seq_work){1024, 0};
    double prefill = kv_step_time(&s, &c, SCN_ATTN_FLASH, w, 4).seconds;
    r = find(&t, "t-prefill");
    ck_assert_msg(r->status == PUB_PREDICTED && strstr(r->why, "engine profile: sglang"), "%s", r->why);
    ck_assert_msg(fabs(r->predicted / (8 * 4096 / prefill) - 1) < 1e-12, "%.9g vs %.9g", r->predicted, 8 * 4096 / prefill);
    r = find(&t, "t-gptfast");
    ck_assert_msg(r->status == PUB_PREDICTED && strstr(r->why, "engine profile: bare"), "%s", r->why);
    ck_assert_int_eq(find(&t, "t-tp-unstated")->status, PUB_SKIPPED);
    ck_assert(strstr(find(&t, "t-tp-unstated")->why, "tensor-parallel"));
    ck_assert_int_eq(find(&t, "t-unstated-w")->status, PUB_SKIPPED);
    ck_assert(strstr(find(&t, "t-unstated-w")->why, "not stated"));
    pub_table_free(&t);
}
END_TEST

START_TEST(served_rows_and_skips)
{
    pub_table t;
    char err[512];
    ck_assert(pub_table_read(sample_path(), &t, err, sizeof err) == 0);
    predict_all(&t);
    static const char *const served[] = {"t-closed", "t-poisson", "t-offline"};
    for (int i = 0; i < 3; i++) {
        pub_row *r = find(&t, served[i]);
        ck_assert_msg(r->status == PUB_PREDICTED && isfinite(r->predicted) && r->predicted > 0, "%s: %s", r->id, r->why);
        ck_assert(fabs(r->error - (r->predicted / r->value - 1)) < 1e-12);
    }
    ck_assert_int_eq(find(&t, "t-skip-model")->status, PUB_SKIPPED);
    ck_assert(strstr(find(&t, "t-skip-model")->why, "model 'no-such-model' is not in the library"));
    ck_assert(strstr(find(&t, "t-skip-gpu")->why, "hardware 'b999'"));
    ck_assert(strstr(find(&t, "t-skip-dataset")->why, "dataset 'no-such-set'"));
    /* Lengths from a dataset file beside the table: fixed 256 and 64, so exactly t-closed. */
    pub_row *ds = find(&t, "t-dataset");
    ck_assert_msg(ds->status == PUB_PREDICTED, "%s", ds->why);
    ck_assert(ds->predicted == find(&t, "t-closed")->predicted);
    ck_assert_int_eq(find(&t, "t-halfset")->status, PUB_SKIPPED);
    ck_assert(strstr(find(&t, "t-halfset")->why, "halfset.yaml has no output_tokens"));
    pub_summary sum[PUB_CLASS_COUNT + 1];
    pub_table_summarise(&t, sum);
    ck_assert_int_eq(sum[PUB_CLASS_COUNT].rows, 11);
    ck_assert_int_eq(sum[PUB_CLASS_COUNT].skipped, 6);
    ck_assert_int_eq(sum[PUB_CLASS_TPOT].skipped, 4);
    pub_table_free(&t);
}
END_TEST

START_TEST(summary_arithmetic)
{
    /* Errors set by hand: TTFT -5 %, +15 %, -30 % and one failed row; throughput +8 %. */
    pub_row rows[6];
    memset(rows, 0, sizeof rows);
    double e[] = {-0.05, 0.15, -0.30, NAN, 0.08, NAN};
    pub_class c[] = {PUB_CLASS_TTFT, PUB_CLASS_TTFT, PUB_CLASS_TTFT, PUB_CLASS_TTFT, PUB_CLASS_THROUGHPUT,
                     PUB_CLASS_CAPACITY};
    pub_status st[] = {PUB_PREDICTED, PUB_PREDICTED, PUB_PREDICTED, PUB_FAILED, PUB_PREDICTED, PUB_SKIPPED};
    for (int i = 0; i < 6; i++) { rows[i].error = e[i]; rows[i].cls = c[i]; rows[i].status = st[i]; }
    pub_table t = {6, rows};
    pub_summary s[PUB_CLASS_COUNT + 1];
    pub_table_summarise(&t, s);
    ck_assert_int_eq(s[PUB_CLASS_TTFT].rows, 4);
    ck_assert_int_eq(s[PUB_CLASS_TTFT].failed, 1);
    ck_assert_int_eq(s[PUB_CLASS_TTFT].within10, 1);
    ck_assert_int_eq(s[PUB_CLASS_TTFT].within20, 2);
    ck_assert(fabs(s[PUB_CLASS_TTFT].median_abs - 0.15) < 1e-15);
    ck_assert_int_eq(s[PUB_CLASS_CAPACITY].rows, 0);
    ck_assert_int_eq(s[PUB_CLASS_CAPACITY].skipped, 1);
    ck_assert(isnan(s[PUB_CLASS_CAPACITY].median_abs));
    /* All: |errors| 0.05, 0.08, 0.15, 0.30: median (0.08 + 0.15) / 2. */
    ck_assert_int_eq(s[PUB_CLASS_COUNT].rows, 5);
    ck_assert(fabs(s[PUB_CLASS_COUNT].median_abs - 0.115) < 1e-15);
}
END_TEST

#define HEAD "id\tgpu\tgpus\ttp\tmodel\tengine\tengine_version\tweight_dtype\tkv_dtype\tmode\tload\tinput_tokens\t" \
             "output_tokens\tmetric\tvalue\tunit\tsource\tnotes\n"
#define ROW_A "a\th100-sxm\t1\t1\tllama-3-8b\tvllm\tx\tbf16\tauto\t"

/* A chat row's scenario written by hand: 40 prompts of `prompt` tokens sent offline through the
 * server behind one shared `prefix`-token chat prefix, 20 output tokens each, the engine caching
 * prefixes in 16-token blocks; run as the harness runs it. */
static void chat_run_by_hand(const char *name, const char *model, const char *gpu, int tp, int prompt, int prefix,
                             sim_metrics *m)
{
    static scn_scenario hs;
    scn_error e;
    char y[800], err[512];
    snprintf(y, sizeof y,
             "name: published-%s\nmodel: %s\nhardware: %s\nengine: vllm\n"
             "deployment: {tensor_parallel: %d, replicas: 1}\n"
             "workload:\n  requests: 40\n  arrival: {process: offline, via: server}\n"
             "  prompt_tokens: %d\n  output_tokens: 20\n"
             "  shared_prefix: {groups: 1, tokens: %d, share: 1}\n"
             "options: {kv_layout: paged, block_size: 16, prefix_cache: on}\n",
             name, model, gpu, tp, prompt, prefix);
    ck_assert_int_eq(t_load(y, NULL, 0, &hs, &e), SCN_OK);
    sim_choice ch = sim_choice_first(&hs);
    ck_assert_msg(sim_run_predicted(&hs, &ch, m, err, sizeof err) == SIM_OK, "%s", err);
}

static void broken(const char *text, const char *expect)
{
    const char *p = t_write("broken.tsv", text);
    pub_table t;
    char err[512];
    ck_assert_int_eq(pub_table_read(p, &t, err, sizeof err), -1);
    char want[600];
    snprintf(want, sizeof want, "%s:%s", p, expect);
    ck_assert_msg(strstr(err, want), "got '%s', expected '%s'", err, want);
}

START_TEST(broken_rows_are_located)
{
    broken("# a comment\n" HEAD ROW_A "closed\t8\t128\t128\ttpot_mean_ms\t10\ttok/s\tsrc\t\n",
           "3:77: unit: 'tok/s' does not suit tpot_mean_ms; expected 'ms' or 's'");
    broken(HEAD ROW_A "closed\t8\t128\t128\ttpot_mean_ms\t10\tms\tsrc\n", "2:1: row: expected 18 tab-separated fields, found 17");
    broken(HEAD ROW_A "open\t8\t128\t128\ttpot_mean_ms\t10\tms\tsrc\t\n", "2:44: mode: expected closed, poisson");
    broken(HEAD ROW_A "closed\t2.5\t128\t128\ttpot_mean_ms\t10\tms\tsrc\t\n", "2:51: load: expected a whole number");
    broken(HEAD ROW_A "closed\t8\t128\t128\tttft_p90_ms\t10\tms\tsrc\t\n", "2:61: metric: unknown metric 'ttft_p90_ms'");
    broken(HEAD ROW_A "closed\t8\t128\t128\ttpot_mean_ms\t-3\tms\tsrc\t\n", "2:74: value: expected a number > 0");
    broken(HEAD ROW_A "closed\t8\t128\t128\ttpot_mean_ms\t10\tms\t\t\n", "2:80: source: is empty");
    broken(HEAD ROW_A "closed\t8\t128\t128\tkv_tokens\t10\ttokens\tsrc\t\n", "2:61: metric: kv_tokens belongs to mode capacity");
    broken(HEAD ROW_A "closed\t8\tShare GPT\t128\ttpot_mean_ms\t10\tms\tsrc\t\n", "2:53: input_tokens: expected a whole token count");
    broken(HEAD "a\th100-sxm\t3\t2\tllama-3-8b\tvllm\tx\tbf16\tauto\tclosed\t8\t1\t1\treq_s\t1\treq/s\ts\t\n", "2:14: tp: must divide gpus");
    broken(HEAD ROW_A "closed\t8\t128\t128\treq_s\t1\treq/s\ts\t\n" ROW_A "closed\t8\t128\t128\treq_s\t1\treq/s\ts\t\n",
           "3:1: id: 'a' is already used on line 2");
    /* engine_args (optional column): only --num-scheduler-steps N is read; anything else is refused. */
#define HEAD_ARGS "id\tgpu\tgpus\ttp\tmodel\tengine\tengine_version\tweight_dtype\tkv_dtype\tmode\tload\tinput_tokens\t" \
                  "output_tokens\tmetric\tvalue\tunit\tsource\tnotes\tengine_args\n"
    broken(HEAD_ARGS ROW_A "closed\t8\t128\t128\treq_s\t1\treq/s\ts\t\t--enable-chunked-prefill\n",
           "2:78: engine_args: unknown flag '--enable-chunked-prefill'");
    broken(HEAD_ARGS ROW_A "closed\t8\t128\t128\treq_s\t1\treq/s\ts\t\t--num-scheduler-steps 0\n",
           "2:78: engine_args: expected a whole number in 1..1024");
    {
        const char *p = t_write("args.tsv", HEAD_ARGS ROW_A "closed\t8\t128\t128\treq_s\t1\treq/s\ts\t\t--num-scheduler-steps 10\n"
                                            "b\th100-sxm\t1\t1\tllama-3-8b\tvllm\tx\tbf16\tauto\tclosed\t8\t128\t128\treq_s\t1\treq/s\ts\t\t\n");
        pub_table ta;
        char e2[512];
        ck_assert_msg(pub_table_read(p, &ta, e2, sizeof e2) == 0, "%s", e2);
        ck_assert_int_eq(ta.rows[0].scheduler_steps, 10);
        ck_assert_int_eq(ta.rows[1].scheduler_steps, 1);
        pub_table_free(&ta);
    }
    broken("id\tgpu\tgpus\n", "1:1: header: missing column 'tp'");
    broken("id\tgpu\tgpus\ttpp\n", "1:13: header: unknown column 'tpp'");
    pub_table t;
    char err[512];
    ck_assert_int_eq(pub_table_read("/nonexistent/published.tsv", &t, err, sizeof err), -2);
}
END_TEST

/* A dataset name with ':MEAN' (the row's own stated mean length) takes the dataset's law with that
 * mean: a fixed length becomes the rounded mean (so 'testset:300' must predict exactly what 300
 * does); a law's `mean:` is replaced and its bounds kept (so 'expset:100' must predict exactly
 * what a dataset file stating mean 100 with the same bounds does); a law without a mean cannot
 * take one (skipped with the reason); a malformed mean is a located read error. */
START_TEST(dataset_mean_from_row)
{
    broken(HEAD ROW_A "closed\t8\ttestset:abc\t128\ttpot_mean_ms\t10\tms\tsrc\t\n",
           "2:53: input_tokens: expected a mean length of at least 1 token after ':'");
    broken(HEAD ROW_A "closed\t8\ttestset:0.5\t128\ttpot_mean_ms\t10\tms\tsrc\t\n", "2:53: input_tokens: expected a mean");
    t_write("expset.yaml", "prompt_tokens: {dist: exponential, mean: 227, min: 4, max: 1024}\n"
                           "output_tokens: {dist: exponential, mean: 197, min: 4, max: 2044}\n");
    t_write("exp100.yaml", "prompt_tokens: {dist: exponential, mean: 100, min: 4, max: 1024}\n"
                           "output_tokens: {dist: exponential, mean: 50, min: 4, max: 2044}\n");
    t_write("uniset.yaml", "prompt_tokens: {dist: uniform, min: 100, max: 200}\noutput_tokens: 10\n");
    const char *p = t_write("means.tsv", HEAD
        "fix\th100-sxm\t1\t1\tllama-3-8b\tsglang\tx\tbf16\tauto\tclosed\t4\t300\t80\tttft_mean_ms\t30\tms\ts\t\n"
        "fixds\th100-sxm\t1\t1\tllama-3-8b\tsglang\tx\tbf16\tauto\tclosed\t4\ttestset:300.2\ttestset:79.6\tttft_mean_ms\t30\tms\ts\t\n"
        "exp\th100-sxm\t1\t1\tllama-3-8b\tsglang\tx\tbf16\tauto\tclosed\t4\texp100\texp100\tttft_mean_ms\t30\tms\ts\t\n"
        "expm\th100-sxm\t1\t1\tllama-3-8b\tsglang\tx\tbf16\tauto\tclosed\t4\texpset:100\texpset:50\tttft_mean_ms\t30\tms\ts\t\n"
        "expd\th100-sxm\t1\t1\tllama-3-8b\tsglang\tx\tbf16\tauto\tclosed\t4\texpset\texpset\tttft_mean_ms\t30\tms\ts\t\n"
        "uni\th100-sxm\t1\t1\tllama-3-8b\tsglang\tx\tbf16\tauto\tclosed\t4\tuniset:150\tuniset\tttft_mean_ms\t30\tms\ts\t\n");
    /* The datasets folder: where t_write put the files. */
    char dir[512];
    snprintf(dir, sizeof dir, "%s", p);
    *strrchr(dir, '/') = 0;
    /* testset.yaml lives in tests/data/datasets: copy its two lines here. */
    t_write("testset.yaml", "prompt_tokens: 256\noutput_tokens: 64\n");
    pub_table t;
    char err[512];
    ck_assert_msg(pub_table_read(p, &t, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(find(&t, "expm")->input, "expset:100");
    for (int i = 0; i < t.n; i++) ck_assert_msg(pub_row_predict(&t.rows[i], dir, err, sizeof err) == 0, "%s", err);
    const char *ok[] = {"fix", "fixds", "exp", "expm", "expd"};
    for (int i = 0; i < 5; i++) ck_assert_msg(find(&t, ok[i])->status == PUB_PREDICTED, "%s: %s", ok[i], find(&t, ok[i])->why);
    ck_assert(find(&t, "fixds")->predicted == find(&t, "fix")->predicted);
    ck_assert(find(&t, "expm")->predicted == find(&t, "exp")->predicted);
    ck_assert(find(&t, "expd")->predicted != find(&t, "exp")->predicted);
    ck_assert_int_eq(find(&t, "uni")->status, PUB_SKIPPED);
    ck_assert_msg(strstr(find(&t, "uni")->why, "uniset.yaml: its prompt_tokens has no mean to set to the row's 150"), "%s",
                  find(&t, "uni")->why);
    pub_table_free(&t);
}
END_TEST

START_TEST(parallel_layout_flags)
{
    /* engine_args' layout and limit flags, through capacity rows worked against the capacity
     * model on the same deployment set by hand: attention DP 2 x EP 2 of an MoE model holds one
     * DP rank's pool with the routed experts sharded over both GPUs; --kv-fraction is the
     * memory fraction of a row that gives none as its load; --max-batch-size and
     * --max-num-tokens size the engine's activation peak. A static batch under DP/EP is skipped. */
    const char *p = t_write("layout.tsv", HEAD_ARGS
        "d\th100-sxm\t2\t2\tqwen3-30b-a3b\tvllm\tx\tbf16\tauto\tcapacity\t0.9\t-\t-\tkv_tokens\t1\ttokens\ts\t\t--attention-dp --ep 2\n"
        "f\th100-sxm\t1\t1\tllama-3-8b\tvllm\tx\tbf16\tauto\tcapacity\t\t-\t-\tkv_tokens\t1\ttokens\ts\t\t"
        "--kv-fraction 0.5 --max-batch-size 64 --max-num-tokens 2048\n"
        "b\th100-sxm\t2\t2\tqwen3-30b-a3b\tvllm\tx\tbf16\tauto\tbatch\t4\t128\t8\toutput_tok_s\t1\ttok/s\ts\t\t--ep 2\n");
    pub_table t;
    char err[512];
    ck_assert_msg(pub_table_read(p, &t, err, sizeof err) == 0, "%s", err);
    ck_assert(t.rows[0].attention_dp && t.rows[0].expert_parallel == 2);
    ck_assert(t.rows[1].kv_fraction == 0.5 && t.rows[1].max_batch_size == 64 && t.rows[1].max_num_tokens == 2048);
    predict_all(&t);

    scn_scenario s;
    t_library("qwen3-30b-a3b", "h100-sxm", &s);
    s.deployment.tensor_parallel = 1;
    s.deployment.attention_dp = 2;
    s.deployment.expert_parallel = 2;
    s.deployment.gpu_memory_utilization = 0.9;
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    double want = (double)kv_capacity_compute(&s, &c, 16, 0).capacity_blocks * 16;
    pub_row *r = &t.rows[0];
    ck_assert_msg(r->status == PUB_PREDICTED && strstr(r->why, "attention DP 2, EP 2"), "%s", r->why);
    ck_assert_msg(r->predicted == want, "%.0f vs %.0f", r->predicted, want);
    /* And it is not the plain TP-2 figure the row gave before the flags were read. */
    s.deployment.tensor_parallel = 2;
    s.deployment.attention_dp = s.deployment.expert_parallel = 1;
    c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    ck_assert(r->predicted != (double)kv_capacity_compute(&s, &c, 16, 0).capacity_blocks * 16);

    t_library("llama-3-8b", "h100-sxm", &s);
    s.deployment.gpu_memory_utilization = 0.5;
    s.deployment.max_num_seqs = 64;
    s.deployment.max_num_batched_tokens = 2048;
    c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    r = &t.rows[1];
    ck_assert_msg(r->status == PUB_PREDICTED, "%s", r->why);
    ck_assert_msg(r->predicted == (double)kv_capacity_compute(&s, &c, 16, 0).capacity_blocks * 16, "%.0f", r->predicted);
    ck_assert_int_eq(t.rows[2].status, PUB_SKIPPED);
    ck_assert(strstr(t.rows[2].why, "attention DP or EP"));
    pub_table_free(&t);

    broken(HEAD_ARGS ROW_A "closed\t8\t128\t128\treq_s\t1\treq/s\ts\t\t--ep\n", "2:78: engine_args: --ep needs a number");
    broken(HEAD_ARGS ROW_A "closed\t8\t128\t128\treq_s\t1\treq/s\ts\t\t--kv-fraction 1.5\n",
           "2:78: engine_args: --kv-fraction: expected a fraction in (0, 1], found '1.5'");
}
END_TEST

/* --via-server (engine_args) says an offline row's prompts went to a server at once, so they
 * pass its front end (`via: server`); the notes' wording no longer decides it. Three offline rows
 * alike but for that: the flagged one waits for the front end (its mean TTFT is longer), the one
 * whose notes say "request rate inf" without the flag predicts what the plain row does. */
START_TEST(via_server_flag)
{
    const char *p = t_write("via.tsv", HEAD_ARGS
        "v\th100-sxm\t1\t1\tllama-3-8b\tvllm\tx\tbf16\tauto\toffline\t200\t300\t50\tttft_mean_ms\t1\tms\ts\t\t--via-server\n"
        "n\th100-sxm\t1\t1\tllama-3-8b\tvllm\tx\tbf16\tauto\toffline\t200\t300\t50\tttft_mean_ms\t1\tms\ts\trequest rate inf\t\n"
        "p\th100-sxm\t1\t1\tllama-3-8b\tvllm\tx\tbf16\tauto\toffline\t200\t300\t50\tttft_mean_ms\t1\tms\ts\t\t\n");
    pub_table t;
    char err[512];
    ck_assert_msg(pub_table_read(p, &t, err, sizeof err) == 0, "%s", err);
    ck_assert(t.rows[0].via_server && !t.rows[1].via_server && !t.rows[2].via_server);
    predict_all(&t);
    for (int i = 0; i < 3; i++) ck_assert_msg(t.rows[i].status == PUB_PREDICTED, "%s", t.rows[i].why);
    ck_assert_msg(t.rows[0].predicted > t.rows[2].predicted, "%g vs %g", t.rows[0].predicted, t.rows[2].predicted);
    ck_assert(t.rows[1].predicted == t.rows[2].predicted);
    pub_table_free(&t);
    broken(HEAD_ARGS ROW_A "closed\t8\t128\t128\treq_s\t1\treq/s\ts\t\t--via-server\n",
           "2:78: engine_args: --via-server goes with mode offline (prompts sent to a server at once)");
}
END_TEST

/* --intra-node-comm (engine_args): a gpt-fast row run with ENABLE_INTRA_NODE_COMM=1 takes the
 * bare-intranode profile, whose all-reduce at batch 1 is a one-shot kernel; the same row without
 * the flag keeps `bare` and NCCL. By hand, Llama-2-7B at TP 8 all-reduces one token's hidden state,
 * 4096 x 2 B = 8 KiB, twice a layer (64 a step): NCCL's ring pays 2 (p - 1) = 14 latency terms
 * where the one-shot kernel pays one, so the flagged row predicts more tokens per second. The
 * flag names gpt-fast's switch, so it is refused on another engine's row. */
START_TEST(intra_node_comm_flag)
{
    const char *p = t_write("inc.tsv", HEAD_ARGS
        "i\ta100-80g\t8\t8\tllama-2-7b\tgpt-fast\tx\tbf16\tbf16\tbatch\t1\t6\t200\toutput_tok_s\t1\ttok/s\ts\t\t--intra-node-comm\n"
        "n\ta100-80g\t8\t8\tllama-2-7b\tgpt-fast\tx\tbf16\tbf16\tbatch\t1\t6\t200\toutput_tok_s\t1\ttok/s\ts\t\t\n");
    pub_table t;
    char err[512];
    ck_assert_msg(pub_table_read(p, &t, err, sizeof err) == 0, "%s", err);
    ck_assert(t.rows[0].intra_node_comm && !t.rows[1].intra_node_comm);
    predict_all(&t);
    for (int i = 0; i < 2; i++) ck_assert_msg(t.rows[i].status == PUB_PREDICTED, "%s", t.rows[i].why);
    ck_assert_msg(strstr(t.rows[0].why, "engine profile: bare-intranode"), "%s", t.rows[0].why);
    ck_assert_msg(strstr(t.rows[1].why, "engine profile: bare") && !strstr(t.rows[1].why, "intranode"), "%s", t.rows[1].why);
    ck_assert_msg(t.rows[0].predicted > t.rows[1].predicted, "%g vs %g", t.rows[0].predicted, t.rows[1].predicted);
    pub_table_free(&t);
    broken(HEAD_ARGS ROW_A "closed\t8\t128\t128\treq_s\t1\treq/s\ts\t\t--intra-node-comm\n",
           "2:78: engine_args: --intra-node-comm is gpt-fast's ENABLE_INTRA_NODE_COMM=1; this row's engine is 'vllm'");
}
END_TEST

/* --num-prompts N (engine_args): the client sent exactly N requests and reported over all of
 * them, so the harness simulates that run, with no steady-state window. By hand, a closed loop of
 * four vLLM clients and four prompts of 300 tokens, one output token each: all four are sent at
 * t = 0 and the API server prepares them one after another, t_f = 0.26 ms + 300 x 1.9 us =
 * 0.83 ms each, so the scheduler sees A at 0 and B, C, D at 0.83, 1.66 and 2.49 ms, all inside
 * A's prefill step (about 10 ms, step1 = one 300-token prefill). B, C and D join the next step
 * together (step2 = three 300-token prefills). A client's TTFT is its own front end, its wait for
 * the server (the earlier requests' front ends), the wait for the engine and its step(s), which
 * for B, C and D sums to t_f + step1 + step2, and for A to t_f + step1:
 *     mean TTFT = t_f + step1 + (3/4)·step2.
 * The same row without the flag is a steady-state run of the harness's 200 requests (each
 * client's next request finds three others decoding or finished), which is not this value. */
START_TEST(num_prompts_flag)
{
    const char *p = t_write("np.tsv", HEAD_ARGS
        "f\th100-sxm\t1\t1\tllama-3-8b\tvllm\tx\tbf16\tauto\tclosed\t4\t300\t1\tttft_mean_ms\t1\tms\ts\t\t--num-prompts 4\n"
        "s\th100-sxm\t1\t1\tllama-3-8b\tvllm\tx\tbf16\tauto\tclosed\t4\t300\t1\tttft_mean_ms\t1\tms\ts\t\t\n");
    pub_table t;
    char err[512];
    ck_assert_msg(pub_table_read(p, &t, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(t.rows[0].num_prompts, 4);
    ck_assert_int_eq(t.rows[1].num_prompts, 0);
    predict_all(&t);
    for (int i = 0; i < 2; i++) ck_assert_msg(t.rows[i].status == PUB_PREDICTED, "%s", t.rows[i].why);
    scn_scenario s;
    t_library_engine("llama-3-8b", "h100-sxm", "vllm", &s);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w[3] = {{300, 0}, {300, 0}, {300, 0}};
    double step1 = kv_step_time(&s, &c, SCN_ATTN_FLASH, w, 1).seconds;
    double step2 = kv_step_time(&s, &c, SCN_ATTN_FLASH, w, 3).seconds;
    double tf = 0.26e-3 + 300 * 1.9e-6;
    ck_assert_msg(fabs(kv_frontend_seconds(&s, 300) - tf) < 1e-12, "front end %.9g s", kv_frontend_seconds(&s, 300));
    ck_assert(3 * tf < step1);   /* B, C and D reach the scheduler during A's step */
    double want = (tf + step1 + 0.75 * step2) * 1000;
    ck_assert_msg(fabs(t.rows[0].predicted / want - 1) < 1e-6, "predicted %.9g ms, by hand %.9g", t.rows[0].predicted, want);
    ck_assert_msg(fabs(t.rows[1].predicted / want - 1) > 0.05, "steady state %.9g ms, finite run %.9g", t.rows[1].predicted,
                  want);
    pub_table_free(&t);
    broken(HEAD_ARGS ROW_A "offline\t8\t128\t128\treq_s\t1\treq/s\ts\t\t--num-prompts 8\n",
           "2:79: engine_args: --num-prompts goes with mode closed or poisson (an offline row's load is its prompt count)");
    broken(HEAD_ARGS ROW_A "closed\t8\t128\t128\treq_s\t1\treq/s\ts\t\t--num-prompts\n", "2:78: engine_args: --num-prompts needs a number");
    broken(HEAD_ARGS ROW_A "closed\t8\t128\t128\treq_s\t1\treq/s\ts\t\t--num-prompts 0\n", "2:78: engine_args");
}
END_TEST

/* --uniform-lengths R (engine_args): the client drew each length uniform in whole tokens over
 * [floor(R L), L] (InferenceX's bench_serving, --random-range-ratio R). The row with R = 0.5,
 * prompt 300 and output 101 predicts what the simulator gives for the scenario written by hand
 * with prompt {uniform, 150, 300} and output {uniform, 50, 101} (floor(0.5 x 101) = 50), and not
 * what the fixed lengths give. */
START_TEST(uniform_lengths_flag)
{
    const char *p = t_write("ul.tsv", HEAD_ARGS
        "u\th100-sxm\t1\t1\tllama-3-8b\tvllm\tx\tbf16\tauto\tclosed\t4\t300\t101\toutput_tok_s\t1\ttok/s\ts\t\t--num-prompts 40 --uniform-lengths 0.5\n"
        "f\th100-sxm\t1\t1\tllama-3-8b\tvllm\tx\tbf16\tauto\tclosed\t4\t300\t101\toutput_tok_s\t1\ttok/s\ts\t\t--num-prompts 40\n");
    pub_table t;
    char err[512];
    ck_assert_msg(pub_table_read(p, &t, err, sizeof err) == 0, "%s", err);
    ck_assert(t.rows[0].uniform_lengths == 0.5 && t.rows[1].uniform_lengths == 0);
    predict_all(&t);
    for (int i = 0; i < 2; i++) ck_assert_msg(t.rows[i].status == PUB_PREDICTED, "%s", t.rows[i].why);
    scn_scenario s;
    scn_error e;
    ck_assert_int_eq(t_load("name: published-u\nmodel: llama-3-8b\nhardware: h100-sxm\nengine: vllm\n"
                            "deployment: {tensor_parallel: 1, replicas: 1}\n"
                            "workload:\n  requests: 40\n  arrival: {process: closed, concurrency: 4}\n"
                            "  prompt_tokens: {dist: uniform, min: 150, max: 300}\n"
                            "  output_tokens: {dist: uniform, min: 50, max: 101}\n"
                            "options: {kv_layout: paged, block_size: 16}\n", NULL, 0, &s, &e), SCN_OK);
    sim_choice ch = sim_choice_first(&s);
    sim_metrics m;
    ck_assert_int_eq(sim_run_predicted(&s, &ch, &m, err, sizeof err), SIM_OK);
    ck_assert_msg(fabs(t.rows[0].predicted / m.output_tok_per_s - 1) < 1e-9, "row %.9g, by hand %.9g", t.rows[0].predicted,
                  m.output_tok_per_s);
    ck_assert(fabs(t.rows[1].predicted / t.rows[0].predicted - 1) > 1e-3);
    pub_table_free(&t);
    broken(HEAD_ARGS ROW_A "closed\t8\t128\t128\treq_s\t1\treq/s\ts\t\t--uniform-lengths 1\n",
           "2:78: engine_args: --uniform-lengths: expected a fraction in (0, 1), found '1'");
    broken(HEAD_ARGS ROW_A "batch\t8\t128\t128\treq_s\t1\treq/s\ts\t\t--uniform-lengths 0.8\n",
           "2:77: engine_args: --uniform-lengths goes with mode closed, poisson or offline");
}
END_TEST

START_TEST(cli_end_to_end)
{
    static char out[65536], errs[4096];
    char args[1200];
    snprintf(args, sizeof args, "validate-published '%s' --format csv", sample_path());
    ck_assert_int_eq(t_run(args, out, sizeof out, errs, sizeof errs), 0);
    ck_assert_msg(strstr(out, "t-capacity") && strstr(out, "t-skip-dataset") && strstr(out, "skipped"), "%s", out);
    const char *p = t_write("broken.tsv", HEAD ROW_A "closed\t8\t128\t128\ttpot_mean_ms\tten\tms\tsrc\t\n");
    snprintf(args, sizeof args, "validate-published '%s'", p);
    ck_assert_int_eq(t_run(args, out, sizeof out, errs, sizeof errs), 65);
    ck_assert_msg(strstr(errs, ":2:74: value:"), "%s", errs);
    ck_assert_int_eq(t_run("validate-published /nonexistent.tsv", out, sizeof out, errs, sizeof errs), 66);
    ck_assert_int_eq(t_run("validate-published", out, sizeof out, errs, sizeof errs), 64);
}
END_TEST

/* --max-model-len N: the deployment's max_model_len, which under vLLM V0 sets whether prefill
 * chunks and the profile run's tokens (docs/cost-model.md, "vLLM V0 batch defaults"). A V0 0.6.0
 * capacity row of Llama-3.1-8B at 4096: not chunked, 4096 tokens a step and 256 sequences in the
 * profile run, worked on the same deployment set by hand; without the flag the model's own
 * 131072 makes V0 chunk at 512 tokens, a smaller peak and a larger cache. */
START_TEST(max_model_len_flag)
{
    const char *p = t_write("mml.tsv", HEAD_ARGS
        "m\ta100-80g\t1\t1\tllama-3.1-8b\tvllm\t0.6.0\tbf16\tauto\tcapacity\t0.9\t-\t-\tkv_tokens\t1\ttokens\ts\t\t--max-model-len 4096\n"
        "n\ta100-80g\t1\t1\tllama-3.1-8b\tvllm\t0.6.0\tbf16\tauto\tcapacity\t0.9\t-\t-\tkv_tokens\t1\ttokens\ts\t\t\n");
    pub_table t;
    char err[512];
    ck_assert_msg(pub_table_read(p, &t, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(t.rows[0].max_model_len, 4096);
    ck_assert_int_eq(t.rows[1].max_model_len, 0);
    predict_all(&t);
    scn_scenario s;
    t_library_engine("llama-3.1-8b", "a100-80g", "vllm-0.6", &s);
    s.deployment.max_model_len = 4096;
    s.deployment.max_num_batched_tokens = 4096;
    s.deployment.max_num_seqs = 256;
    s.deployment.gpu_memory_utilization = 0.9;
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    double want = (double)kv_capacity_compute(&s, &c, 16, 0).capacity_blocks * 16;
    ck_assert_msg(t.rows[0].status == PUB_PREDICTED && t.rows[0].predicted == want, "%s %.0f vs %.0f", t.rows[0].why,
                  t.rows[0].predicted, want);
    ck_assert_msg(t.rows[1].predicted > t.rows[0].predicted, "%.0f %.0f", t.rows[1].predicted, t.rows[0].predicted);
    pub_table_free(&t);
    broken(HEAD_ARGS ROW_A "closed\t8\t128\t128\treq_s\t1\treq/s\ts\t\t--max-model-len\n",
           "2:78: engine_args: --max-model-len needs a number");
    broken(HEAD_ARGS ROW_A "closed\t8\t128\t128\treq_s\t1\treq/s\ts\t\t--max-model-len 0\n", "2:78: engine_args");
}
END_TEST

START_TEST(vllm_rows_run_their_versions_batch_limits)
{
    /* vLLM before 0.8.0 ran V0, 256 sequences on any GPU (the V0 profiles' batch_defaults); the
     * current profile's are V1's (1024 on an H100). 300 prompts sent at once: V1 runs them in one
     * batch, V0 in a batch of 256 and then the 44 left, so its run is longer and its throughput
     * lower. */
    const char *p = t_write("versions.tsv",
        HEAD "v1\th100-sxm\t1\t1\tllama-3-8b\tvllm\t0.11.0\tbf16\tauto\toffline\t300\t128\t32\ttotal_tok_s\t1\ttok/s\ts\t\n"
             "v0\th100-sxm\t1\t1\tllama-3-8b\tvllm\t0.6.0\tbf16\tauto\toffline\t300\t128\t32\ttotal_tok_s\t1\ttok/s\ts\t\n"
             "v0b\th100-sxm\t1\t1\tllama-3-8b\tvllm\tmain 2024-08 (~0.5.4)\tbf16\tauto\toffline\t300\t128\t32\ttotal_tok_s\t1\ttok/s\ts\t\n"
             "v1b\th100-sxm\t1\t1\tllama-3-8b\tvllm\t0.7.0 (V1)\tbf16\tauto\toffline\t300\t128\t32\ttotal_tok_s\t1\ttok/s\ts\t\n"
             "sg\th100-sxm\t1\t1\tllama-3-8b\tsglang\t0.3.0\tbf16\tauto\toffline\t300\t128\t32\ttotal_tok_s\t1\ttok/s\ts\t\n");
    pub_table t;
    char err[512];
    ck_assert_msg(pub_table_read(p, &t, err, sizeof err) == 0, "%s", err);
    predict_all(&t);
    static const char *const v0[] = {"v0", "v0b"}, *const v1[] = {"v1", "v1b", "sg"};
    static const char *const v0_profile[] = {"engine profile: vllm-0.6", "engine profile: vllm-v0"};
    static const char *const v1_profile[] = {"engine profile: vllm", "engine profile: vllm-0.7", "engine profile: sglang"};
    for (int i = 0; i < 2; i++) ck_assert_msg(strstr(find(&t, v0[i])->why, v0_profile[i]), "%s", find(&t, v0[i])->why);
    for (int i = 0; i < 3; i++) ck_assert_msg(strstr(find(&t, v1[i])->why, v1_profile[i]), "%s", find(&t, v1[i])->why);
    for (int i = 0; i < 5; i++) ck_assert_msg(t.rows[i].status == PUB_PREDICTED, "%s: %s", t.rows[i].id, t.rows[i].why);
    ck_assert(find(&t, "v0")->predicted < find(&t, "v1")->predicted);
    /* Before 0.6 the row also runs the vllm-v0 profile, whose V0 loop adds a serial 4 ms a step
     * (docs/cost-model.md, "Engine versions"): slower still than 0.6.0's. */
    ck_assert_msg(strstr(find(&t, "v0b")->why, "engine profile: vllm-v0"), "%s", find(&t, "v0b")->why);
    ck_assert(find(&t, "v0b")->predicted < find(&t, "v0")->predicted);
    ck_assert(find(&t, "v1")->predicted == find(&t, "v1b")->predicted);
    pub_table_free(&t);
}
END_TEST

/* The rows of validation/published.tsv whose lengths come from their sources' own figures
 * (issue 10): each translation checked against the source by hand. */
static pub_table *published_table(pub_table *t)
{
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/../validation/published.tsv", getenv("KVPLAN_TESTS"));
    ck_assert_msg(pub_table_read(path, t, err, sizeof err) == 0, "%s", err);
    return t;
}

/* A row's weight format `mxfp4` is gpt-oss's own checkpoint layout (e2m1 values, one e8m0 scale
 * per 32, experts only), so the row predicts what the library model alone predicts, vLLM's
 * Marlin padding included; `fp4` is NVFP4 (fp8 scale per 16), a different format that replaced
 * the model's. By hand (docs/cost-model.md, "MXFP4 experts as engines store them"): vLLM at TP 1
 * holds 70 673 795 712 B of weights for gpt-oss-120b, the checkpoint 65 168 968 320 B. */
START_TEST(mxfp4_rows_keep_the_models_layout)
{
    const char *tsv = t_write("mxfp4.tsv",
        "id\tgpu\tgpus\ttp\tmodel\tengine\tengine_version\tweight_dtype\tkv_dtype\tmode\tload\tinput_tokens\toutput_tokens\tmetric\tvalue\tunit\tsource\tnotes\n"
        "t-mx\th100-sxm\t1\t1\tgpt-oss-120b\tvllm\t0.10.2\tmxfp4\tauto\tcapacity\t-\t-\t-\tkv_tokens\t40000\ttokens\tmade-up test value\t\n"
        "t-nv\th100-sxm\t1\t1\tgpt-oss-120b\tvllm\t0.10.2\tfp4\tauto\tcapacity\t-\t-\t-\tkv_tokens\t40000\ttokens\tmade-up test value\t\n");
    pub_table t;
    char err[512];
    ck_assert_msg(pub_table_read(tsv, &t, err, sizeof err) == 0, "%s", err);
    predict_all(&t);
    scn_scenario s;
    t_library_engine("gpt-oss-120b", "h100-sxm", "vllm", &s);
    ck_assert_int_eq(s.model.weight_quant, SCN_WQ_MXFP4);
    double w = kv_weights_compute(&s.model, 1).bytes_per_rank + kv_weights_engine_extra(&s);
    ck_assert_msg(fabs(w - 70673795712.0) < 1e6, "weights %.17g B", w);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    double own = (double)kv_capacity_compute(&s, &c, 16, 0).capacity_blocks * 16;
    pub_row *mx = find(&t, "t-mx");
    ck_assert_msg(mx->status == PUB_PREDICTED, "%s", mx->why);
    ck_assert_msg(mx->predicted == own, "mxfp4 row %.17g, library model %.17g", mx->predicted, own);
    /* NVFP4 carries no Marlin repack and 1/16 B of scale a weight: another capacity. */
    pub_row *nv = find(&t, "t-nv");
    ck_assert_msg(nv->status == PUB_PREDICTED, "%s", nv->why);
    ck_assert(nv->predicted != own);
    pub_table_free(&t);
}
END_TEST

/* Every row whose note says its client was `vllm bench serve --backend openai-chat` carries
 * --chat-endpoint, and every --chat-endpoint row says so (chat10: gsq8, gsq32 and gsdsr1 ran the
 * chat client but carried no flag). Of the 180 such rows (gsq8 36, gsq32 45, gsdsr1 54, gsoss
 * 45), each model now has a chat_template, so each note also says what the server added. */
START_TEST(chat_client_rows_carry_the_flag)
{
    pub_table t;
    published_table(&t);
    int n = 0;
    for (int i = 0; i < t.n; i++) {
        pub_row *r = &t.rows[i];
        bool chat = strstr(r->notes, "--backend openai-chat") != NULL;
        ck_assert_msg(chat == r->chat_endpoint, "%s: note %s openai-chat, flag %s", r->id, chat ? "says" : "lacks",
                      r->chat_endpoint ? "set" : "unset");
        if (chat) {
            n++;
            ck_assert_msg(strstr(r->notes, "; --chat-endpoint: the client's `--backend openai-chat"), "%s", r->id);
        }
    }
    ck_assert_int_eq(n, 36 + 45 + 54 + 45);
    pub_table_free(&t);
}
END_TEST

START_TEST(source_lengths_of_published_rows)
{
    pub_table t;
    published_table(&t);
    /* gpt-fast (README @d2c5d82): the prompt "Hello, my name is" is BOS plus 5 pieces under the
     * Llama-2 tokenizer, the ids pytorch/pytorch's gpt_fast benchmark hard-codes for it; the
     * generation length is generate.py's --max_new_tokens default, 200, every run to the end. */
    static const int ids[] = {1, 15043, 29892, 590, 1024, 338};
    const long prompt = (long)(sizeof ids / sizeof ids[0]), gen = 200;
    for (int k = 1; k <= 10; k++) {
        char id[16];
        snprintf(id, sizeof id, "gfast-%02d", k);
        pub_row *r = find(&t, id);
        ck_assert_int_eq(atol(r->input), prompt);
        ck_assert_int_eq(atol(r->output), gen);
        ck_assert_int_eq(r->mode, PUB_MODE_BATCH);
        ck_assert(r->load == 1);
        ck_assert_int_eq(r->gpus, r->tp);     /* one stream over all the row's GPUs */
        ck_assert_str_eq(r->engine, "gpt-fast");
    }
    /* Its tokens/s is 200 generated tokens over one generate() call: the prompt's prefill and
     * 199 decode steps, batch 1, on the bare engine class (gfast-01: Llama-2-7B bf16, one A100). */
    char err[512];
    pub_row *r = find(&t, "gfast-01");
    ck_assert(pub_row_predict(r, NULL, err, sizeof err) == 0);
    ck_assert_msg(r->status == PUB_PREDICTED && strstr(r->why, "engine profile: bare"), "%s", r->why);
    char path[600];
    snprintf(path, sizeof path, "%s/chat.yaml", getenv("KVPLAN_LIBRARY"));
    const char *sets[] = {"model=llama-2-7b", "hardware=a100-80g", "engine=bare"};
    scn_scenario *s = malloc(sizeof *s);
    ck_assert_ptr_nonnull(s);
    scn_error e;
    ck_assert_int_eq(scn_scenario_load(path, sets, 3, s, &e), SCN_OK);
    sim_choice c = sim_choice_first(s);
    kv_cache_cfg cfg = kv_cache_cfg_make(s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w = {prompt, 0};
    double time = kv_step_time(s, &cfg, c.attention, &w, 1).seconds;
    for (long k = 1; k < gen; k++) {
        w = (kv_seq_work){1, prompt + k - 1};
        time += kv_step_time(s, &cfg, c.attention, &w, 1).seconds;
    }
    ck_assert_msg(fabs(r->predicted / (gen / time) - 1) < 1e-12, "%.9g vs %.9g", r->predicted, gen / time);
    free(s);
    /* SGLang issue 1362: 1000 requests, 224442 input and 190594 output tokens in total, at 16
     * req/s on 8 x H100 (TP 8), sglang.bench_serving's default ShareGPT sample: the ShareGPT law
     * at those means, 224442 / 1000 = 224.4 and 190594 / 1000 = 190.6; Meta's FP8 checkpoint
     * (llama-3.1-405b-fp8) at the launch line's --mem-frac 0.87. */
    for (int k = 1; k <= 4; k++) {
        char id[16];
        snprintf(id, sizeof id, "sg1362-%02d", k);
        r = find(&t, id);
        ck_assert_str_eq(r->input, "sharegpt:224.4");
        ck_assert_str_eq(r->output, "sharegpt:190.6");
        ck_assert_str_eq(r->model, "llama-3.1-405b-fp8");
        ck_assert(r->kv_fraction == 0.87);
        ck_assert_int_eq(r->mode, PUB_MODE_POISSON);
        ck_assert(r->load == 16);
        ck_assert_int_eq(r->tp, 8);
        ck_assert_str_eq(r->engine, "sglang");
    }
    /* vLLM issue 12568: random dataset, 1024 input each, 119550 generated over 1000 requests. */
    for (int k = 1; k <= 3; k++) {
        char id[16];
        snprintf(id, sizeof id, "v1ds-%02d", k);
        r = find(&t, id);
        ck_assert_int_eq(atol(r->input), 1024000 / 1000);
        ck_assert_int_eq(atol(r->output), lround(119550 / 1000.0));
        ck_assert(r->load == 4);
        ck_assert_str_eq(r->engine, "vllm");
    }
    /* MLPerf v4.1: the datasets' input means are not stated in the sources read, so the rows
     * name their own dataset, have no bundled lengths and are skipped with that reason. */
    static const char *const mlp[] = {"mlp41-01", "mlp41-07"}, *const set[] = {"mlperf-llama2-openorca", "mlperf-mixtral-15k"};
    for (int i = 0; i < 2; i++) {
        r = find(&t, mlp[i]);
        ck_assert_str_eq(r->input, set[i]);
        ck_assert(pub_row_predict(r, NULL, err, sizeof err) == 0);
        ck_assert_int_eq(r->status, PUB_SKIPPED);
        char want[96];
        snprintf(want, sizeof want, "dataset '%s'", set[i]);
        ck_assert_msg(strstr(r->why, want), "%s", r->why);
    }
    pub_table_free(&t);
}
END_TEST

/* trtllm-bench's build heuristic (tensorrt_llm/bench/build/tuning.py finetune_setting), its
 * rounding worked by hand: 238.2 requests of 128 + 2048 tokens round up to 256 sequences and
 * 238.2 x (1 + 128/2048) = 253 tokens to the 2048 floor; 261.3 crosses 256 and rounds to 128s
 * (384); 5000 requests cap at 4096 (to 256s: 4096) and 4096 x 2 = 8192 tokens round to 1024s;
 * 300 requests of 2048 + 128: 384 sequences and 300 x 17 = 5100 tokens to 512s (5120); 23 long
 * requests: the 64-sequence floor and the 2048-token floor. */
START_TEST(trtllm_bench_rounding)
{
    static const struct { double req, isl, osl; int bs, tok; } c[] = {
        {238.2, 128, 2048, 256, 2048}, {261.3, 128, 2048, 384, 2048}, {5000, 128, 128, 4096, 8192},
        {300, 2048, 128, 384, 5120}, {23, 20000, 2000, 64, 2048}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        plan_trtbench_limits l = plan_trtbench_finetune(c[i].req, c[i].isl, c[i].osl, 1);
        ck_assert_msg(l.max_batch_size == c[i].bs && l.max_num_tokens == c[i].tok, "case %zu: %d %d", i, l.max_batch_size,
                      l.max_num_tokens);
    }
}
END_TEST

/* The heuristic on a library scenario, worked by hand: Llama-3-8B (8.03e9 parameters) in fp16 on
 * one A100-80GB (81920 MiB = 80 GiB): the engine is 8.03e9 x 2 B = 14.96 GiB, the KV estimate
 * 0.95 x (80 - 14.96) = 61.79 GiB at 2 x 32 layers x 8 heads x 128 x 2 B = 128 KiB a token:
 * 506,000 tokens, 1977 requests of 128 + 128 (2048 sequences to 256s; 3954 tokens to 4096) or 23
 * of 20000 + 2000 (the floors: 64 and 2048). The harness's flag puts them in the row and runs the
 * row chunked; a row whose lengths are a dataset is skipped with the reason. */
START_TEST(trtllm_bench_build_flag)
{
    scn_scenario s;
    t_library("llama-3-8b", "a100-80g", &s);
    plan_trtbench_limits l;
    ck_assert_int_eq(plan_trtbench_limits_compute(&s, 128, 128, 2, 2, &l), 0);
    ck_assert_msg(fabs(l.kv_requests - 1977) < 20, "%g", l.kv_requests);
    ck_assert_int_eq(l.max_batch_size, 2048);
    ck_assert_int_eq(l.max_num_tokens, 4096);
    ck_assert_int_eq(plan_trtbench_limits_compute(&s, 20000, 2000, 2, 2, &l), 0);
    ck_assert_int_eq(l.max_batch_size, 64);
    ck_assert_int_eq(l.max_num_tokens, 2048);
    const char *p = t_write("bench.tsv", HEAD_ARGS
        "b\ta100-80g\t1\t1\tllama-3-8b\ttrtllm\t0.17\tfp16\tfp16\toffline\t100\t128\t128\toutput_tok_s\t1\ttok/s\ts\t\t--trtllm-bench-build\n"
        "d\ta100-80g\t1\t1\tllama-3-8b\ttrtllm\t0.17\tfp16\tfp16\toffline\t100\tsharegpt\tsharegpt\toutput_tok_s\t1\ttok/s\ts\t\t--trtllm-bench-build\n");
    pub_table t;
    char err[512];
    ck_assert_msg(pub_table_read(p, &t, err, sizeof err) == 0, "%s", err);
    ck_assert(t.rows[0].bench_build && t.rows[0].max_batch_size == 0);
    predict_all(&t);
    ck_assert_msg(t.rows[0].status == PUB_PREDICTED, "%s", t.rows[0].why);
    ck_assert_int_eq(t.rows[0].max_batch_size, 2048);
    ck_assert_int_eq(t.rows[0].max_num_tokens, 4096);
    ck_assert_int_eq(t.rows[1].status, PUB_SKIPPED);
    ck_assert_msg(strstr(t.rows[1].why, "whole input and output token counts"), "%s", t.rows[1].why);
    pub_table_free(&t);
}
END_TEST

/* --chat-endpoint (engine_args): the client sent each prompt as one user message to the chat
 * endpoint, so the server prefilled the model's chat format around it. gpt-oss-120b's harmony
 * format, counted with the o200k_harmony tokenizer (scenarios/models/gpt-oss-120b.yaml):
 * system message 3 specials + "system" 1 + 57 text = 61, empty developer message 3 + 1 = 4,
 * "<|start|>user<|message|>" 3, so 61 + 4 + 3 = 68 tokens before the text; "<|end|>" 1 +
 * "<|start|>assistant" 2 = 3 after it. The row (40 prompts of 200 tokens, 20 out, vLLM V1, which
 * caches prefixes by default) predicts what the simulator gives for the scenario written by
 * hand: prompts of 200 + 3 tokens behind one shared 68-token prefix, prefix caching on, with the
 * client's total tok/s counting 200 a prompt, i.e. the run's total less 71 x its req/s. A Llama
 * row (no chat format derived) predicts what it does without the flag; a V0 profile (vllm-0.6.3
 * for 0.7.0: no prefix caching by default) leaves the prefix uncached. */
START_TEST(chat_endpoint_flag)
{
    const char *p = t_write("chat.tsv", HEAD_ARGS
        "c\th100-sxm\t2\t2\tgpt-oss-120b\tvllm\t0.10.2\tmxfp4\tbf16\toffline\t40\t200\t20\ttotal_tok_s\t1\ttok/s\ts\t\t--via-server --chat-endpoint\n"
        "l\th100-sxm\t1\t1\tllama-3-8b\tvllm\tx\tbf16\tauto\toffline\t40\t200\t20\ttotal_tok_s\t1\ttok/s\ts\t\t--via-server --chat-endpoint\n"
        "m\th100-sxm\t1\t1\tllama-3-8b\tvllm\tx\tbf16\tauto\toffline\t40\t200\t20\ttotal_tok_s\t1\ttok/s\ts\t\t--via-server\n"
        "v\th100-sxm\t2\t2\tgpt-oss-120b\tvllm\t0.7.0\tmxfp4\tbf16\toffline\t40\t200\t20\ttotal_tok_s\t1\ttok/s\ts\t\t--via-server --chat-endpoint\n");
    pub_table t;
    char err[512];
    ck_assert_msg(pub_table_read(p, &t, err, sizeof err) == 0, "%s", err);
    ck_assert(t.rows[0].chat_endpoint && t.rows[1].chat_endpoint && !t.rows[2].chat_endpoint);
    predict_all(&t);
    for (int i = 0; i < 4; i++) ck_assert_msg(t.rows[i].status == PUB_PREDICTED, "%s: %s", t.rows[i].id, t.rows[i].why);
    ck_assert_int_eq(t.rows[0].chat_prefix, 61 + 4 + 3);
    ck_assert_int_eq(t.rows[0].chat_suffix, 1 + 2);
    ck_assert(t.rows[0].chat_cached && !t.rows[3].chat_cached);
    ck_assert_int_eq(t.rows[1].chat_prefix + t.rows[1].chat_suffix, 0);
    ck_assert(t.rows[1].predicted == t.rows[2].predicted);
    /* The note says what the flag added, and says so when it added nothing. */
    ck_assert_msg(strstr(t.rows[0].why, "chat format: 68 + 3 tokens a prompt, 64 of the prefix's 68 cached (whole 16-token blocks)"), "%s", t.rows[0].why);
    ck_assert_msg(strstr(t.rows[3].why, "chat format: 68 + 3 tokens a prompt, the prefix computed each time"), "%s",
                  t.rows[3].why);
    ck_assert_msg(strstr(t.rows[1].why, "--chat-endpoint: the model has no chat_template, nothing added"), "%s", t.rows[1].why);
    ck_assert_msg(!strstr(t.rows[2].why, "chat"), "%s", t.rows[2].why);
    scn_scenario s;
    scn_error e;
    sim_metrics m;
    chat_run_by_hand("c", "gpt-oss-120b", "h100-sxm", 2, 203, 68, &m);
    double want = m.input_tok_per_s + m.output_tok_per_s - 71 * m.req_per_s;
    ck_assert_msg(fabs(t.rows[0].predicted / want - 1) < 1e-9, "row %.9g, by hand %.9g", t.rows[0].predicted, want);
    /* the client's prompts: 40 x 200 tokens over the run */
    ck_assert_msg(fabs((m.input_tok_per_s - 71 * m.req_per_s) / (200 * m.req_per_s) - 1) < 1e-9, "client input %.9g tok/s",
                  m.input_tok_per_s - 71 * m.req_per_s);
    pub_table_free(&t);
    /* Qwen3 and DeepSeek-R1-0528, counted by hand from their tokenizer_config.json templates
     * (scenarios/models/qwen3-8b.yaml, deepseek-r1.yaml). Qwen3, one user message with
     * add_generation_prompt and thinking on (the default, which appends nothing):
     * "<|im_start|>" 1 + "user" 1 + "\n" 1 = 3 before the text; "<|im_end|>" 1 + "\n" 1 +
     * "<|im_start|>" 1 + "assistant" 1 + "\n" 1 = 5 after it (ids 151644 872 198 | 151645 198
     * 151644 77091 198). DeepSeek-R1-0528: BOS 1 + "<｜User｜>" 1 = 2 before; "<｜Assistant｜>" 1
     * after (no "<think>\n" in 0528's template). */
    p = t_write("chat2.tsv", HEAD_ARGS
        "q8\th100-sxm\t1\t1\tqwen3-8b\tvllm\t0.11.0\tbf16\tbf16\toffline\t40\t200\t20\ttotal_tok_s\t1\ttok/s\ts\t\t--via-server --chat-endpoint\n"
        "q32\th100-sxm\t1\t1\tqwen3-32b\tsglang\t0.5.4\tbf16\tbf16\toffline\t40\t200\t20\ttotal_tok_s\t1\ttok/s\ts\t\t--via-server --chat-endpoint\n"
        "d\th200\t8\t8\tdeepseek-r1\tvllm\t0.11.0\tfp8\tauto\toffline\t40\t200\t20\ttotal_tok_s\t1\ttok/s\ts\t\t--via-server --chat-endpoint\n");
    ck_assert_msg(pub_table_read(p, &t, err, sizeof err) == 0, "%s", err);
    predict_all(&t);
    for (int i = 0; i < 3; i++) ck_assert_msg(t.rows[i].status == PUB_PREDICTED, "%s: %s", t.rows[i].id, t.rows[i].why);
    ck_assert_int_eq(t.rows[0].chat_prefix, 1 + 1 + 1);
    ck_assert_int_eq(t.rows[0].chat_suffix, 1 + 1 + 1 + 1 + 1);
    ck_assert_int_eq(t.rows[1].chat_prefix, 3);
    ck_assert_int_eq(t.rows[1].chat_suffix, 5);
    ck_assert_int_eq(t.rows[2].chat_prefix, 1 + 1);
    ck_assert_int_eq(t.rows[2].chat_suffix, 1);
    ck_assert_msg(strstr(t.rows[0].why, "chat format: 3 + 5 tokens a prompt, the prefix computed each time (shorter than one cached block)"), "%s", t.rows[0].why);
    ck_assert_msg(strstr(t.rows[1].why, "chat format: 3 + 5 tokens a prompt"), "%s", t.rows[1].why);
    ck_assert_msg(strstr(t.rows[2].why, "chat format: 2 + 1 tokens a prompt (1 a BOS the client's count holds), the prefix computed each time (shorter than one cached block)"), "%s", t.rows[2].why);
    /* The Qwen3-8B row is the scenario written by hand: prompts of 200 + 5 tokens behind one
     * shared 3-token prefix, the client's total counting 200 a prompt (the run's less 8 x req/s). */
    chat_run_by_hand("q8", "qwen3-8b", "h100-sxm", 1, 205, 3, &m);
    want = m.input_tok_per_s + m.output_tok_per_s - 8 * m.req_per_s;
    ck_assert_msg(fabs(t.rows[0].predicted / want - 1) < 1e-9, "row %.9g, by hand %.9g", t.rows[0].predicted, want);
    /* DeepSeek-R1's prefix starts with the BOS its tokenizer adds to any text, which the
     * client's 200 already holds: the server prefills 2 + (200 - 1) + 1 = 202 tokens, the prompt
     * law stays at 200 behind the 2-token shared prefix, and the client's total is the run's less
     * 2 x req/s (not 3). */
    ck_assert_int_eq(t.rows[2].chat_bos, 1);
    ck_assert_msg(strstr(t.rows[2].why, "2 + 1 tokens a prompt (1 a BOS the client's count holds)"), "%s", t.rows[2].why);
    chat_run_by_hand("d", "deepseek-r1", "h200", 8, 200, 2, &m);
    want = m.input_tok_per_s + m.output_tok_per_s - 2 * m.req_per_s;
    ck_assert_msg(fabs(t.rows[2].predicted / want - 1) < 1e-9, "row %.9g, by hand %.9g", t.rows[2].predicted, want);
    pub_table_free(&t);
    broken(HEAD_ARGS ROW_A "batch\t8\t128\t128\treq_s\t1\treq/s\ts\t\t--chat-endpoint\n",
           "2:77: engine_args: --chat-endpoint goes with mode closed, poisson or offline");
    /* the model file's chat_template is checked like any field */
    ck_assert_int_ne(t_load("name: x\nmodel: {extends: gpt-oss-120b, chat_template: {prefix: 68, sufix: 3}}\nhardware: h100-sxm\n"
                            "workload: {requests: 1, arrival: {process: offline}, prompt_tokens: 10, output_tokens: 1}\n",
                            NULL, 0, &s, &e), SCN_OK);
    ck_assert_msg(strstr(e.path, "chat_template"), "%s", e.path);
    /* a BOS is one of the prefix's tokens: more of them than the prefix holds is refused, located */
    ck_assert_int_ne(t_load("name: x\nmodel: {extends: gpt-oss-120b, chat_template: {prefix: 1, suffix: 3, bos: 2}}\n"
                            "hardware: h100-sxm\n"
                            "workload: {requests: 1, arrival: {process: offline}, prompt_tokens: 10, output_tokens: 1}\n",
                            NULL, 0, &s, &e), SCN_OK);
    ck_assert_msg(strstr(e.path, "chat_template.bos") && strstr(e.msg, "at most prefix"), "%s: %s", e.path, e.msg);
    ck_assert_int_gt(e.line, 0);
    /* A model that extends deepseek-r1 and sets its prefix below the library's bos: the error is
     * at the prefix the scenario wrote, with both counts, not at the bundled file's bos, which
     * the user did not write (review11: it read "models/deepseek-r1.yaml:47:44: ...bos: bos
     * counts tokens of the prefix: at most prefix"). */
    ck_assert_int_ne(t_load("name: x\nmodel: {extends: deepseek-r1, chat_template: {prefix: 0, suffix: 0}}\n"
                            "hardware: h200\ndeployment: {tensor_parallel: 8}\n"
                            "workload: {requests: 1, arrival: {process: offline}, prompt_tokens: 10, output_tokens: 1}\n",
                            NULL, 0, &s, &e), SCN_OK);
    ck_assert_msg(strstr(e.path, "chat_template.prefix") && !strstr(e.file, "deepseek-r1.yaml") && e.line == 2 &&
                      strstr(e.msg, "prefix 0") && strstr(e.msg, "bos 1"),
                  "%s:%d:%d: %s: %s", e.file, e.line, e.col, e.path, e.msg);
    /* bos written beside the inherited prefix stays at bos, with both counts. */
    ck_assert_int_ne(t_load("name: x\nmodel: {extends: deepseek-r1, chat_template: {bos: 3}}\n"
                            "hardware: h200\ndeployment: {tensor_parallel: 8}\n"
                            "workload: {requests: 1, arrival: {process: offline}, prompt_tokens: 10, output_tokens: 1}\n",
                            NULL, 0, &s, &e), SCN_OK);
    ck_assert_msg(strstr(e.path, "chat_template.bos") && !strstr(e.file, "deepseek-r1.yaml") && e.line == 2 &&
                      strstr(e.msg, "bos 3") && strstr(e.msg, "prefix 2") && strstr(e.msg, "at most prefix"),
                  "%s:%d:%d: %s: %s", e.file, e.line, e.col, e.path, e.msg);
}
END_TEST

Suite *suite_published(void)
{
    Suite *su = suite_create("published");
    TCase *tc = tcase_create("harness");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, sample_parses);
    tcase_add_test(tc, capacity_row_by_hand);
    tcase_add_test(tc, batch_rows_are_the_cost_model);
    tcase_add_test(tc, served_rows_and_skips);
    tcase_add_test(tc, published_conventions);
    tcase_add_test(tc, summary_arithmetic);
    tcase_add_test(tc, vllm_rows_run_their_versions_batch_limits);
    tcase_add_test(tc, max_model_len_flag);
    tcase_add_test(tc, broken_rows_are_located);
    tcase_add_test(tc, dataset_mean_from_row);
    tcase_add_test(tc, parallel_layout_flags);
    tcase_add_test(tc, cli_end_to_end);
    tcase_add_test(tc, source_lengths_of_published_rows);
    tcase_add_test(tc, chat_client_rows_carry_the_flag);
    tcase_add_test(tc, mxfp4_rows_keep_the_models_layout);
    tcase_add_test(tc, via_server_flag);
    tcase_add_test(tc, intra_node_comm_flag);
    tcase_add_test(tc, num_prompts_flag);
    tcase_add_test(tc, uniform_lengths_flag);
    tcase_add_test(tc, trtllm_bench_rounding);
    tcase_add_test(tc, trtllm_bench_build_flag);
    tcase_add_test(tc, chat_endpoint_flag);
    suite_add_tcase(su, tc);
    return su;
}
