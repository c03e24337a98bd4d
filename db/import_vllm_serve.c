/* import_vllm_serve.c: the result JSON of the current `vllm bench serve --save-result`
 * (recognised by its endpoint_type key): the latency statistics benchmark_serving.py always
 * wrote, plus the traffic setting (request_rate, burstiness, max_concurrency, num_prompts).
 * Written from vLLM's documentation of the benchmark CLI and its result fields. */
#include "import_formats.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int need(json_t *root, const char *key, const char *label, double *out, char *err, size_t n)
{
    json_t *v = json_object_get(root, key);
    if (!json_is_number(v) || !(json_number_value(v) >= 0)) {
        snprintf(err, n, "%s: %s: %s", label, key, v ? "expected a number >= 0" : "missing: not a complete bench serve result");
        return -1;
    }
    *out = json_number_value(v);
    return 0;
}

int db_import_vllm_serve(json_t *root, const char *label, db_import *o, char *err, size_t n)
{
    double completed, duration, ttft;
    if (need(root, "completed", label, &completed, err, n) || need(root, "duration", label, &duration, err, n) ||
        need(root, "mean_ttft_ms", label, &ttft, err, n))
        return -1;
    if (!(duration > 0) || !(completed >= 1)) {
        snprintf(err, n, "%s: %s: must be > 0", label, duration > 0 ? "completed" : "duration");
        return -1;
    }
    o->format = "vllm-bench-serve";
    db_import_put(o, "requests", completed, SIM_UNIT_COUNT);
    db_import_put(o, "duration_s", duration, SIM_UNIT_SECONDS);
    static const char *const RATES[][2] = {{"request_throughput", "throughput_req_per_s"},
                                           {"output_throughput", "output_tok_per_s"},
                                           {"request_goodput", "goodput_req_per_s"}};
    for (int i = 0; i < 3; i++) {
        json_t *v = json_object_get(root, RATES[i][0]);
        if (json_is_number(v)) db_import_put(o, RATES[i][1], json_number_value(v), SIM_UNIT_RATE);
    }
    static const char *const Q[][2] = {{"ttft", "ttft"}, {"tpot", "tpot"}, {"itl", "itl"}, {"e2el", "e2e"}};
    if (db_import_ms_stats(root, Q, 4, label, o, err, n)) return -1;
    double in = 0, out = 0;
    json_t *ti = json_object_get(root, "total_input_tokens"), *to = json_object_get(root, "total_output_tokens");
    if (json_is_number(ti)) {
        in = json_number_value(ti);
        db_import_put(o, "input_tok_per_s", in / duration, SIM_UNIT_RATE);
        db_import_put(o, "setting_input_tokens_mean", in / completed, SIM_UNIT_NUMBER);
    }
    if (json_is_number(to)) { out = json_number_value(to); db_import_put(o, "setting_output_tokens_mean", out / completed, SIM_UNIT_NUMBER); }
    /* The traffic: --max-concurrency caps requests in flight (a closed loop when the rate is
     * infinite); --request-rate "inf" with no cap sends every prompt at once. */
    json_t *np = json_object_get(root, "num_prompts"), *mc = json_object_get(root, "max_concurrency");
    json_t *rr = json_object_get(root, "request_rate"), *bu = json_object_get(root, "burstiness");
    if (json_is_number(np)) db_import_put(o, "setting_prompts", json_number_value(np), SIM_UNIT_COUNT);
    if (mc && !json_is_null(mc)) {
        if (!json_is_integer(mc) || json_integer_value(mc) < 1) {
            snprintf(err, n, "%s: max_concurrency: expected a whole number >= 1 or null", label);
            return -1;
        }
        db_import_put(o, "setting_concurrency", (double)json_integer_value(mc), SIM_UNIT_COUNT);
    }
    bool inf = json_is_string(rr) && !strcmp(json_string_value(rr), "inf");
    if (rr && !inf && !(json_is_number(rr) && json_number_value(rr) > 0)) {
        snprintf(err, n, "%s: request_rate: expected a number > 0 or \"inf\"", label);
        return -1;
    }
    if (rr && !inf) db_import_put(o, "setting_request_rate_per_s", json_number_value(rr), SIM_UNIT_RATE);
    if (inf && (!mc || json_is_null(mc))) db_import_put(o, "setting_offline", 1, SIM_UNIT_COUNT);
    if (json_is_number(bu)) db_import_put(o, "setting_burstiness", json_number_value(bu), SIM_UNIT_NUMBER);
    return 0;
}
