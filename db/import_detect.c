/* import_detect.c: recognises the benchmark-client formats of import_formats.h by their
 * content (never by file name) and hands the text to the matching parser. */
#include "import_formats.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void db_import_put(db_import *o, const char *name, double v, sim_unit unit)
{
    if (o->n == DB_IMPORT_MAX || !isfinite(v)) return;
    snprintf(o->names[o->n], sizeof o->names[0], "%s", name);
    o->m[o->n] = (sim_metric_kv){o->names[o->n], v, unit};
    o->n++;
}

int db_import_ms_stats(json_t *root, const char *const q[][2], int nq, const char *label, db_import *o,
                       char *err, size_t n)
{
    static const char *const STAT[][2] = {{"mean", "mean"}, {"median", "p50"}, {"p50", "p50"}, {"p90", "p90"},
                                          {"p95", "p95"}, {"p99", "p99"}};
    for (int i = 0; i < nq; i++)
        for (int k = 0; k < 6; k++) {
            char key[64], name[48];
            snprintf(key, sizeof key, "%s_%s_ms", STAT[k][0], q[i][0]);
            json_t *v = json_object_get(root, key);
            if (!v || json_is_null(v)) continue;
            if (!json_is_number(v) || !(json_number_value(v) >= 0)) {
                snprintf(err, n, "%s: %s: expected a number of milliseconds >= 0", label, key);
                return -1;
            }
            snprintf(name, sizeof name, "%s_%s_s", q[i][1], STAT[k][1]);
            db_import_put(o, name, json_number_value(v) / 1000.0, SIM_UNIT_SECONDS);
        }
    return 0;
}

int db_import_detect_more(const char *text, const char *label, db_import *o, char *err, size_t n)
{
    const char *s = text;
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') s++;
    if (strstr(text, "MLPerf Results Summary")) return db_import_mlperf(text, label, o, err, n);
    if (*s != '{') return 1;
    json_error_t je;
    json_t *root = json_loads(text, 0, &je);
    if (!root) {
        /* Several objects, one per line, or Python's bare Infinity, make SGLang's output no
         * strict JSON: its latency keys say whose it is. */
        bool mine = strstr(text, "\"mean_e2e_latency_ms\"") || strstr(text, "\"median_e2e_latency_ms\"");
        return mine ? db_import_sglang(text, label, o, err, n) : 1;
    }
    int rc = 1;
    json_t *rt = json_object_get(root, "request_throughput");
    if (json_is_object(root) && json_is_object(rt)) rc = db_import_genai(root, label, o, err, n);
    else if (json_is_object(root) && db_import_is_sglang(root)) rc = db_import_sglang(text, label, o, err, n);
    else if (json_is_object(root) && json_object_get(root, "endpoint_type")) rc = db_import_vllm_serve(root, label, o, err, n);
    json_decref(root);
    return rc;
}
