/* import_genai.c: genai-perf's profile_export_genai_perf.json and aiperf's
 * profile_export_aiperf.json: one object per metric ({"unit": ..., "avg": ..., "p50": ...}) and
 * the run's configuration under input_config. Written from the tools' public documentation of
 * the export (aiperf docs/tutorials/working-with-profile-exports.md). */
#include "import_formats.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Seconds per unit of a latency object; 0 for a unit that is not a time. */
static double time_unit(const char *u)
{
    if (!strcmp(u, "ms")) return 1e-3;
    if (!strcmp(u, "us")) return 1e-6;
    if (!strcmp(u, "ns")) return 1e-9;
    if (!strcmp(u, "s") || !strcmp(u, "sec")) return 1;
    return 0;
}

/* The number at key of obj: 0 found, 1 absent or null, -1 present but not a number. */
static int num(json_t *obj, const char *key, double *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return 1;
    if (!json_is_number(v)) return -1;
    *out = json_number_value(v);
    return 0;
}

static int bad(char *err, size_t n, const char *label, const char *path, const char *msg)
{
    snprintf(err, n, "%s: %s: %s", label, path, msg);
    return -1;
}

/* A latency metric: every statistic kvplan keeps, converted to seconds. */
static int latency(json_t *root, const char *key, const char *out, const char *label, db_import *o, char *err, size_t n)
{
    json_t *m = json_object_get(root, key);
    if (!m || json_is_null(m)) return 0;
    if (!json_is_object(m)) return bad(err, n, label, key, "expected an object with unit and statistics");
    json_t *u = json_object_get(m, "unit");
    double scale = json_is_string(u) ? time_unit(json_string_value(u)) : 0;
    char path[96];
    snprintf(path, sizeof path, "%s.unit", key);
    if (!scale) return bad(err, n, label, path, "expected a time unit (ms, us, ns, s)");
    static const char *const STAT[][2] = {{"avg", "mean"}, {"p50", "p50"}, {"p90", "p90"}, {"p95", "p95"}, {"p99", "p99"}};
    for (int i = 0; i < 5; i++) {
        double v;
        int r = num(m, STAT[i][0], &v);
        snprintf(path, sizeof path, "%s.%s", key, STAT[i][0]);
        if (r < 0 || (r == 0 && !(v >= 0))) return bad(err, n, label, path, "expected a number >= 0");
        if (r) continue;
        char name[48];
        snprintf(name, sizeof name, "%s_%s_s", out, STAT[i][1]);
        db_import_put(o, name, v * scale, SIM_UNIT_SECONDS);
    }
    return 0;
}

/* The average of a {"unit", "avg"} object; 1 when absent. */
static int avg_of(json_t *root, const char *key, const char *label, double *out, char *err, size_t n)
{
    json_t *m = json_object_get(root, key);
    if (!m || json_is_null(m)) return 1;
    char path[96];
    snprintf(path, sizeof path, "%s.avg", key);
    if (!json_is_object(m) || num(m, "avg", out) != 0 || !(*out >= 0)) {
        bad(err, n, label, path, "expected a number >= 0");
        return -1;
    }
    return 0;
}

/* concurrency and request_rate from wherever the tool's version keeps them. */
static void setting(json_t *cfg, db_import *o)
{
    json_t *places[] = {json_object_get(cfg, "loadgen"), cfg,
                        json_object_get(json_object_get(cfg, "perf_analyzer"), "stimulus")};
    for (int i = 0; i < 3; i++) {
        if (!json_is_object(places[i])) continue;
        double c, r;
        if (num(places[i], "concurrency", &c) == 0 && c >= 1) { db_import_put(o, "setting_concurrency", c, SIM_UNIT_COUNT); break; }
        if (num(places[i], "request_rate", &r) == 0 && r > 0) { db_import_put(o, "setting_request_rate_per_s", r, SIM_UNIT_RATE); break; }
    }
}

int db_import_genai(json_t *root, const char *label, db_import *o, char *err, size_t n)
{
    double rps;
    int r = avg_of(root, "request_throughput", label, &rps, err, n);
    if (r) { if (r > 0) bad(err, n, label, "request_throughput", "missing"); return -1; }
    if (!json_object_get(root, "time_to_first_token") && !json_object_get(root, "request_latency"))
        return bad(err, n, label, "time_to_first_token", "missing (and no request_latency either): not a profile export");
    json_t *cfg = json_object_get(root, "input_config");
    o->format = json_is_object(json_object_get(cfg, "loadgen")) || json_object_get(root, "benchmark_duration") ? "aiperf" : "genai-perf";
    double v;
    if ((r = avg_of(root, "request_count", label, &v, err, n)) < 0) return -1;
    if (r == 0) db_import_put(o, "requests", v, SIM_UNIT_COUNT);
    if ((r = avg_of(root, "benchmark_duration", label, &v, err, n)) < 0) return -1;
    if (r == 0) db_import_put(o, "duration_s", v, SIM_UNIT_SECONDS);
    db_import_put(o, "throughput_req_per_s", rps, SIM_UNIT_RATE);
    if ((r = avg_of(root, "output_token_throughput", label, &v, err, n)) < 0) return -1;
    if (r == 0) db_import_put(o, "output_tok_per_s", v, SIM_UNIT_RATE);
    /* inter_token_latency is per request (latency - TTFT) / (output - 1): kvplan's TPOT. */
    if (latency(root, "time_to_first_token", "ttft", label, o, err, n) ||
        latency(root, "inter_token_latency", "tpot", label, o, err, n) ||
        latency(root, "request_latency", "e2e", label, o, err, n))
        return -1;
    if ((r = avg_of(root, "input_sequence_length", label, &v, err, n)) < 0) return -1;
    if (r == 0) {
        db_import_put(o, "setting_input_tokens_mean", v, SIM_UNIT_NUMBER);
        db_import_put(o, "input_tok_per_s", v * rps, SIM_UNIT_RATE);
    }
    if ((r = avg_of(root, "output_sequence_length", label, &v, err, n)) < 0) return -1;
    if (r == 0) db_import_put(o, "setting_output_tokens_mean", v, SIM_UNIT_NUMBER);
    if (json_is_object(cfg)) setting(cfg, o);
    return 0;
}
