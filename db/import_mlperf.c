/* import_mlperf.c: MLPerf Inference LoadGen's mlperf_log_summary.txt: "Key : value" lines in
 * sections (results, additional stats, test parameters). Latencies are in ns; Server runs
 * report completed samples and tokens per second, TTFT and TPOT; Offline runs report samples
 * (and tokens) per second. Written from LoadGen's documented summary format. */
#include "import_formats.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* kvplan's name for a LoadGen key (lower-cased, spaces collapsed), with the factor to SI. */
typedef struct { const char *key, *name; double scale; sim_unit unit; } mapping;
static const mapping MAP[] = {
    {"completed samples per second", "throughput_req_per_s", 1, SIM_UNIT_RATE},
    {"samples per second", "throughput_req_per_s", 1, SIM_UNIT_RATE},
    {"completed tokens per second", "output_tok_per_s", 1, SIM_UNIT_RATE},
    {"tokens per second", "output_tok_per_s", 1, SIM_UNIT_RATE},
    {"mean latency (ns)", "e2e_mean_s", 1e-9, SIM_UNIT_SECONDS},
    {"50.00 percentile latency (ns)", "e2e_p50_s", 1e-9, SIM_UNIT_SECONDS},
    {"90.00 percentile latency (ns)", "e2e_p90_s", 1e-9, SIM_UNIT_SECONDS},
    {"95.00 percentile latency (ns)", "e2e_p95_s", 1e-9, SIM_UNIT_SECONDS},
    {"99.00 percentile latency (ns)", "e2e_p99_s", 1e-9, SIM_UNIT_SECONDS},
    {"mean first token latency (ns)", "ttft_mean_s", 1e-9, SIM_UNIT_SECONDS},
    {"50.00 percentile first token latency (ns)", "ttft_p50_s", 1e-9, SIM_UNIT_SECONDS},
    {"90.00 percentile first token latency (ns)", "ttft_p90_s", 1e-9, SIM_UNIT_SECONDS},
    {"95.00 percentile first token latency (ns)", "ttft_p95_s", 1e-9, SIM_UNIT_SECONDS},
    {"99.00 percentile first token latency (ns)", "ttft_p99_s", 1e-9, SIM_UNIT_SECONDS},
    {"mean time per output token (ns)", "tpot_mean_s", 1e-9, SIM_UNIT_SECONDS},
    {"mean time to output token (ns)", "tpot_mean_s", 1e-9, SIM_UNIT_SECONDS},
    {"50.00 percentile time to output token (ns)", "tpot_p50_s", 1e-9, SIM_UNIT_SECONDS},
    {"90.00 percentile time to output token (ns)", "tpot_p90_s", 1e-9, SIM_UNIT_SECONDS},
    {"95.00 percentile time to output token (ns)", "tpot_p95_s", 1e-9, SIM_UNIT_SECONDS},
    {"99.00 percentile time to output token (ns)", "tpot_p99_s", 1e-9, SIM_UNIT_SECONDS},
    {"target_qps", "setting_request_rate_per_s", 1, SIM_UNIT_RATE},
    {"samples_per_query", "setting_prompts", 1, SIM_UNIT_COUNT},
};
enum { N_MAP = (int)(sizeof MAP / sizeof MAP[0]) };

/* Lower-cases and collapses runs of blanks; trims both ends. */
static void normalise(const char *s, size_t len, char *out, size_t cap)
{
    size_t k = 0;
    bool blank = false;
    for (size_t i = 0; i < len && k + 1 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (isspace(c)) { blank = k > 0; continue; }
        if (blank) { out[k++] = ' '; blank = false; if (k + 1 >= cap) break; }
        out[k++] = (char)tolower(c);
    }
    out[k] = 0;
}

int db_import_mlperf(const char *text, const char *label, db_import *o, char *err, size_t n)
{
    char scenario[32] = "", result[32] = "";
    double seen[N_MAP];
    for (int i = 0; i < N_MAP; i++) seen[i] = NAN;
    long ln = 0;
    for (const char *p = text; *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        const char *s = p;
        p = eol ? eol + 1 : p + len;
        ln++;
        const char *colon = memchr(s, ':', len);
        if (!colon) continue;   /* banners, section titles, notes */
        char key[128], val[128];
        normalise(s, (size_t)(colon - s), key, sizeof key);
        size_t vlen = len - (size_t)(colon + 1 - s);
        const char *vs = colon + 1;
        while (vlen && (*vs == ' ' || *vs == '\t')) { vs++; vlen--; }
        while (vlen && (vs[vlen - 1] == ' ' || vs[vlen - 1] == '\t' || vs[vlen - 1] == '\r')) vlen--;
        snprintf(val, sizeof val, "%.*s", (int)(vlen < sizeof val - 1 ? vlen : sizeof val - 1), vs);
        if (!strcmp(key, "scenario")) { snprintf(scenario, sizeof scenario, "%.31s", val); continue; }
        if (!strcmp(key, "result is")) { snprintf(result, sizeof result, "%.31s", val); continue; }
        for (int i = 0; i < N_MAP; i++) {
            if (strcmp(key, MAP[i].key)) continue;
            char *end;
            double v = strtod(val, &end);
            if (end == val || *end || !(v >= 0) || !isfinite(v)) {
                snprintf(err, n, "%s:%ld:%d: %.60s: expected a number >= 0, found '%.40s'", label, ln,
                         (int)(vs - s) + 1, key, val);
                return -1;
            }
            /* A key that repeats (LoadGen prints a second stats block for some runs) keeps its first value. */
            if (isnan(seen[i])) seen[i] = v * MAP[i].scale;
        }
    }
    if (!scenario[0]) { snprintf(err, n, "%s: no 'Scenario :' line: truncated, or not a LoadGen summary", label); return -1; }
    bool server = !strcmp(scenario, "Server"), offline = !strcmp(scenario, "Offline");
    if (!server && !offline) {
        snprintf(err, n, "%s: scenario '%s': only Server and Offline runs are imported", label, scenario);
        return -1;
    }
    if (!result[0]) { snprintf(err, n, "%s: no 'Result is :' line: the summary is truncated", label); return -1; }
    double rps = NAN;
    for (int i = 0; i < N_MAP; i++)
        if (!strcmp(MAP[i].name, "throughput_req_per_s") && !isnan(seen[i])) { rps = seen[i]; break; }
    if (isnan(rps) || !(rps > 0)) {
        snprintf(err, n, "%s: no '%s' line with a value > 0: the summary is truncated", label,
                 server ? "Completed samples per second" : "Samples per second");
        return -1;
    }
    memset(o, 0, sizeof *o);
    o->format = "mlperf-summary";
    bool put[N_MAP] = {false};
    for (int i = 0; i < N_MAP; i++) {
        if (isnan(seen[i])) continue;
        bool dup = false;
        for (int j = 0; j < i; j++) dup |= put[j] && !strcmp(MAP[j].name, MAP[i].name);
        if (dup) continue;
        /* Offline's target_qps is a hint to the harness, not an arrival rate. */
        if (offline && !strcmp(MAP[i].name, "setting_request_rate_per_s")) continue;
        if (server && !strcmp(MAP[i].name, "setting_prompts")) continue;
        db_import_put(o, MAP[i].name, seen[i], MAP[i].unit);
        put[i] = true;
    }
    if (offline) db_import_put(o, "setting_offline", 1, SIM_UNIT_COUNT);
    for (int i = 0; i < N_MAP; i++)
        if (!strcmp(MAP[i].name, "output_tok_per_s") && !isnan(seen[i])) {
            db_import_put(o, "setting_output_tokens_mean", seen[i] / rps, SIM_UNIT_NUMBER);
            break;
        }
    db_import_put(o, "mlperf_result_valid", !strcmp(result, "VALID") ? 1 : 0, SIM_UNIT_COUNT);
    return 0;
}
