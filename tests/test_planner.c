/* test_planner.c: the planner's recommendations for the four archetypes (pinned), quality
 * gating, skipped candidates, the Pareto front against brute force, capacity searches, rules
 * of thumb, and sharded plans merging to the same answer. */
#include "tests.h"
#include "../planner/plan.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static scn_scenario s;
static plan_result r;
static char lines[24][PLAN_LINE];
static int nl;

static void plan(const char *file, const char *const *sets, int n)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", getenv("KVPLAN_LIBRARY"), file);
    scn_error e;
    scn_status st = scn_scenario_load(path, sets, n, &s, &e);
    char msg[1500];
    scn_error_format(&e, msg, sizeof msg);
    ck_assert_msg(st == SCN_OK, "%s", msg);
    ck_assert_int_eq(plan_enumerate(&s, &r), 0);
    char err[512];
    ck_assert_int_eq(plan_evaluate(&s, &r, 2, 0, 1, NULL, NULL, err, sizeof err), 0);
    plan_rank(&s, &r);
    nl = plan_explain(&s, &r, lines, 24);
}

static bool said(const char *what)
{
    for (int i = 0; i < nl; i++) if (strstr(lines[i], what)) return true;
    return false;
}

static const plan_cand *best(void)
{
    ck_assert_int_ge(r.best, 0);
    return &r.c[r.best];
}

START_TEST(archetype_chat_with_a_shared_prompt)
{
    plan("archetypes/chat-shared-prompt.yaml", NULL, 0);
    const plan_cand *b = best();
    /* A 3000-token system prompt shared by 95 % of requests: the prefix cache is what makes the
     * TTFT SLO reachable; paging is what makes prefix caching possible; fp8 is not accepted. */
    ck_assert_int_eq(b->c.layout, SCN_LAYOUT_PAGED);
    ck_assert(b->c.prefix_cache);
    ck_assert_int_eq(b->c.kv_dtype, SCN_DTYPE_BF16);
    ck_assert(b->slo_met);
    ck_assert(said("prefix caching on instead of prefix caching off"));
    ck_assert(said("What binds: memory bandwidth binds in decode"));
    plan_result_free(&r);
}
END_TEST

START_TEST(archetype_high_concurrency_api)
{
    plan("archetypes/high-concurrency-api.yaml", NULL, 0);
    const plan_cand *b = best();
    /* Throughput first with fp8 accepted: fp8 KV, a large batch limit, chunked prefill. */
    ck_assert_int_eq(b->c.layout, SCN_LAYOUT_PAGED);
    ck_assert_int_eq(b->c.kv_dtype, SCN_DTYPE_FP8);
    ck_assert_int_eq(b->max_num_seqs, 512);
    ck_assert_int_eq(b->c.scheduler, SCN_SCHED_CHUNKED);
    ck_assert(b->slo_met && b->risk_dtype && b->allowed);
    ck_assert(said("max_num_seqs 512 instead of max_num_seqs 128"));
    plan_result_free(&r);
}
END_TEST

START_TEST(archetype_long_documents)
{
    plan("archetypes/long-document.yaml", NULL, 0);
    const plan_cand *b = best();
    /* 16k-30k token prompts: prefill is compute-bound, the cache is not the limit, the window
     * and fp8 are not accepted, and a second GPU halves goodput per GPU. */
    ck_assert_int_eq(b->c.kv_dtype, SCN_DTYPE_BF16);
    ck_assert_int_eq(b->c.window, 0);
    ck_assert_int_eq(b->tp, 1);
    ck_assert(b->slo_met);
    ck_assert(said("prefill is compute-bound"));
    ck_assert(b->m.kv_util_peak < 0.9);
    plan_result_free(&r);
}
END_TEST

START_TEST(archetype_memory_constrained_edge_gpu)
{
    plan("archetypes/edge-gpu.yaml", NULL, 0);
    const plan_cand *b = best();
    /* An 8B model leaves about 4 GiB of a 24 GB card for KV: quantised KV (accepted) and paging
     * make the SLO; no bf16 candidate meets it. */
    ck_assert_int_eq(b->c.layout, SCN_LAYOUT_PAGED);
    ck_assert(b->c.kv_dtype == SCN_DTYPE_FP8 || b->c.kv_dtype == SCN_DTYPE_INT8);
    ck_assert(b->slo_met);
    for (int i = 0; i < r.n; i++)
        if (r.c[i].status == PLAN_DONE && r.c[i].c.kv_dtype == SCN_DTYPE_BF16) ck_assert(!r.c[i].slo_met);
    plan_result_free(&r);
}
END_TEST

START_TEST(quality_settings_gate_risky_options)
{
    /* The chat scenario does not accept fp8: even when fp8 scores higher it is not recommended. */
    plan("chat.yaml", NULL, 0);
    ck_assert_int_eq(best()->c.kv_dtype, SCN_DTYPE_BF16);
    int flagged = 0;
    for (int i = 0; i < r.n; i++) if (r.c[i].c.kv_dtype == SCN_DTYPE_FP8) { ck_assert(r.c[i].risk_dtype && !r.c[i].allowed); flagged++; }
    ck_assert_int_gt(flagged, 0);
    plan_result_free(&r);
    const char *accept[] = {"quality={allow_kv_dtype: [fp8]}", "objective=throughput"};
    plan("chat.yaml", accept, 2);
    ck_assert_int_eq(best()->c.kv_dtype, SCN_DTYPE_FP8);   /* accepted, and fp8 moves fewer bytes per decode */
    plan_result_free(&r);
}
END_TEST

START_TEST(unfit_candidates_are_skipped_with_reasons)
{
    const char *sets[] = {"model=llama-3-70b", "options.tensor_parallel=[1, 2, 4]", "options.kv_dtype=bf16",
                          "options.prefix_cache=on", "options.kv_layout=paged", "workload.requests=300"};
    plan("chat.yaml", sets, 6);
    int skipped = 0, done = 0;
    for (int i = 0; i < r.n; i++) {
        if (r.c[i].tp == 1) { ck_assert_int_eq(r.c[i].status, PLAN_SKIPPED); ck_assert_msg(strstr(r.c[i].why, "does not fit"), "%s", r.c[i].why); skipped++; }
        else { ck_assert_int_eq(r.c[i].status, PLAN_DONE); done++; }
    }
    ck_assert_int_eq(skipped, 1);
    ck_assert_int_eq(done, 2);
    plan_result_free(&r);
}
END_TEST

START_TEST(pareto_front_by_brute_force)
{
    const char *sets[] = {"options.max_num_seqs=[32, 64, 256]", "workload.requests=1500", "quality={allow_kv_dtype: [fp8]}"};
    plan("chat.yaml", sets, 3);
    int front = 0;
    for (int i = 0; i < r.n; i++) {
        const plan_cand *a = &r.c[i];
        if (a->status != PLAN_DONE) continue;
        bool dominated = false;
        for (int j = 0; j < r.n; j++) {
            const plan_cand *b = &r.c[j];
            if (j == i || b->status != PLAN_DONE) continue;
            double ta = a->m.output_tok_per_s / a->gpus, tb = b->m.output_tok_per_s / b->gpus;
            if (tb >= ta && b->latency_p99 <= a->latency_p99 && (tb > ta || b->latency_p99 < a->latency_p99)) dominated = true;
        }
        ck_assert_msg(a->pareto == !dominated, "candidate %d", i);
        front += a->pareto;
    }
    ck_assert_int_ge(front, 1);
    plan_result_free(&r);
}
END_TEST

START_TEST(capacity_searches)
{
    const char *sets[] = {"options.kv_layout=paged", "options.kv_dtype=bf16"};
    plan("chat.yaml", sets, 2);
    const plan_cand *on = NULL, *off = NULL;
    for (int i = 0; i < r.n; i++) { if (r.c[i].c.prefix_cache) on = &r.c[i]; else off = &r.c[i]; }
    ck_assert(on && off);
    double ron = plan_max_rate(&s, on, 5), roff = plan_max_rate(&s, off, 5);
    ck_assert_msg(ron > roff && roff > 0, "prefix on %.3g, off %.3g", ron, roff);
    /* Serving 4x the single-GPU rate needs about 4 replicas (routing costs a little). */
    int reps = plan_min_replicas(&s, on, 4 * ron, 32);
    ck_assert_msg(reps >= 4 && reps <= 6, "%d replicas for %.3g req/s", reps, 4 * ron);
    /* Max context at 64-way concurrency: 64 sequences of it fit the budget; one more token does not. */
    long ctx = plan_max_context(&s, on, 64);
    ck_assert_int_gt(ctx, 1000);
    plan_result_free(&r);
}
END_TEST

START_TEST(rules_of_thumb_have_verdicts)
{
    const char *sets[] = {"workload.requests=800"};
    plan("chat.yaml", sets, 1);
    plan_rule rules[8];
    int n = plan_rules(&s, &r, rules, 8);
    ck_assert_int_eq(n, 4);
    for (int i = 0; i < n; i++)
        ck_assert_msg(!strcmp(rules[i].verdict, "holds") || !strcmp(rules[i].verdict, "fails") || !strcmp(rules[i].verdict, "n/a"),
                      "%s: %s", rules[i].rule, rules[i].verdict);
    ck_assert_str_eq(rules[3].verdict, "n/a");   /* llama-3-8b groups 4 query heads per KV head */
    ck_assert_msg(strstr(rules[3].evidence, "75.0 %"), "%s", rules[3].evidence);
    plan_result_free(&r);
    const char *seventy[] = {"model=llama-2-70b", "deployment.tensor_parallel=4", "workload.requests=400", "options.kv_dtype=bf16"};
    plan("chat.yaml", seventy, 4);
    n = plan_rules(&s, &r, rules, 8);
    ck_assert_str_eq(rules[3].verdict, "holds");   /* 64 query heads on 8 KV heads */
    ck_assert_msg(strstr(rules[3].evidence, "87.5 %"), "%s", rules[3].evidence);
    plan_result_free(&r);
}
END_TEST

static char out[1 << 17], err[1 << 14];

START_TEST(sharded_plans_merge_to_the_same_answer)
{
    char a[600], b[600], m[600], args[3000];
    snprintf(a, sizeof a, "%s", t_write("shard-a.db", "")); unlink(a);
    snprintf(b, sizeof b, "%s", t_write("shard-b.db", "")); unlink(b);
    snprintf(m, sizeof m, "%s", t_write("merged.db", "")); unlink(m);
    const char *sc = "scenarios/chat.yaml --set workload.requests=600 --no-rules";
    char sc_path[800];
    snprintf(sc_path, sizeof sc_path, "%s/../%s", getenv("KVPLAN_LIBRARY"), sc);
    snprintf(args, sizeof args, "plan %s --shard 0/2 --db %s", sc_path, a);
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 0);
    snprintf(args, sizeof args, "plan %s --shard 1/2 --db %s", sc_path, b);
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 0);
    snprintf(args, sizeof args, "merge %s %s %s --format csv", m, a, b);
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 0);
    snprintf(args, sizeof args, "plan %s --db %s --format json", sc_path, m);
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 0);
    json_t *merged = json_loads(out, 0, NULL);
    ck_assert_ptr_nonnull(merged);
    json_t *info = json_object_get(merged, "plan");
    ck_assert_int_eq(json_integer_value(json_object_get(info, "reused")), json_integer_value(json_object_get(info, "evaluated")));
    snprintf(args, sizeof args, "plan %s --no-db --format json", sc_path);
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 0);
    json_t *direct = json_loads(out, 0, NULL);
    ck_assert_ptr_nonnull(direct);
    json_t *c1 = json_array_get(json_object_get(merged, "candidates"), 0), *c2 = json_array_get(json_object_get(direct, "candidates"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(c1, "options")), json_string_value(json_object_get(c2, "options")));
    ck_assert(json_real_value(json_object_get(c1, "objective")) == json_real_value(json_object_get(c2, "objective")));
    json_decref(merged);
    json_decref(direct);
    /* Merging the same shard again copies nothing. */
    snprintf(args, sizeof args, "merge %s %s --format csv", m, a);
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 0);
    ck_assert_msg(strstr(out, ",0\n"), "%s", out);
}
END_TEST

Suite *suite_planner(void)
{
    Suite *su = suite_create("planner");
    TCase *tc = tcase_create("plan");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, archetype_chat_with_a_shared_prompt);
    tcase_add_test(tc, archetype_high_concurrency_api);
    tcase_add_test(tc, archetype_long_documents);
    tcase_add_test(tc, archetype_memory_constrained_edge_gpu);
    tcase_add_test(tc, quality_settings_gate_risky_options);
    tcase_add_test(tc, unfit_candidates_are_skipped_with_reasons);
    tcase_add_test(tc, pareto_front_by_brute_force);
    tcase_add_test(tc, capacity_searches);
    tcase_add_test(tc, rules_of_thumb_have_verdicts);
    tcase_add_test(tc, sharded_plans_merge_to_the_same_answer);
    suite_add_tcase(su, tc);
    return su;
}
