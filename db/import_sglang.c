/* import_sglang.c: SGLang's `python -m sglang.bench_serving --output-file F` results: one JSON
 * object per line, appended run after run, with the traffic setting (request_rate,
 * max_concurrency), token totals and latency statistics in ms (mean/median/pNN of ttft, tpot,
 * itl and e2e_latency). Written from SGLang's bench_serving documentation and output. */
#include "import_formats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int db_import_is_sglang(json_t *obj)
{
    return json_is_object(obj) && (json_object_get(obj, "mean_e2e_latency_ms") || json_object_get(obj, "median_e2e_latency_ms"));
}

/* Python's json module writes an infinite request rate as the bare token Infinity (and NaN as
 * NaN), which strict JSON parsers refuse: outside strings they become "inf" and null. */
static char *strict_json(const char *line, size_t len)
{
    char *out = malloc(len * 2 + 1);
    if (!out) return NULL;
    size_t k = 0;
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        char c = line[i];
        if (in_str) {
            out[k++] = c;
            if (c == '\\' && i + 1 < len) out[k++] = line[++i];
            else if (c == '"') in_str = false;
        } else if (c == '"') {
            in_str = true;
            out[k++] = c;
        } else if (!strncmp(line + i, "Infinity", 8) && i + 8 <= len) {
            memcpy(out + k, "\"inf\"", 5);
            k += 5;
            i += 7;
        } else if (!strncmp(line + i, "NaN", 3) && i + 3 <= len) {
            memcpy(out + k, "null", 4);
            k += 4;
            i += 2;
        } else {
            out[k++] = c;
        }
    }
    out[k] = 0;
    return out;
}

static int record(json_t *r, const char *label, long ln, db_import *o, char *err, size_t n)
{
    char where[600];
    snprintf(where, sizeof where, "%s:%ld", label, ln);
    json_t *c = json_object_get(r, "completed"), *d = json_object_get(r, "duration");
    if (!json_is_number(c) || !json_is_number(d) || !(json_number_value(d) > 0) || !(json_number_value(c) >= 1)) {
        snprintf(err, n, "%s: %s: expected numbers > 0 for completed and duration", where, !json_is_number(c) ? "completed" : "duration");
        return -1;
    }
    memset(o, 0, sizeof *o);
    o->format = "sglang-bench";
    double completed = json_number_value(c), duration = json_number_value(d);
    db_import_put(o, "requests", completed, SIM_UNIT_COUNT);
    db_import_put(o, "duration_s", duration, SIM_UNIT_SECONDS);
    static const char *const RATES[][2] = {{"request_throughput", "throughput_req_per_s"},
                                           {"input_throughput", "input_tok_per_s"},
                                           {"output_throughput", "output_tok_per_s"}};
    for (int i = 0; i < 3; i++) {
        json_t *v = json_object_get(r, RATES[i][0]);
        if (json_is_number(v)) db_import_put(o, RATES[i][1], json_number_value(v), SIM_UNIT_RATE);
    }
    static const char *const Q[][2] = {{"ttft", "ttft"}, {"tpot", "tpot"}, {"itl", "itl"}, {"e2e_latency", "e2e"}};
    if (db_import_ms_stats(r, Q, 4, where, o, err, n)) return -1;
    json_t *ti = json_object_get(r, "total_input_tokens"), *to = json_object_get(r, "total_output_tokens");
    if (json_is_number(ti)) db_import_put(o, "setting_input_tokens_mean", json_number_value(ti) / completed, SIM_UNIT_NUMBER);
    if (json_is_number(to)) db_import_put(o, "setting_output_tokens_mean", json_number_value(to) / completed, SIM_UNIT_NUMBER);
    json_t *mc = json_object_get(r, "max_concurrency"), *rr = json_object_get(r, "request_rate");
    if (mc && !json_is_null(mc)) {
        if (!json_is_integer(mc) || json_integer_value(mc) < 1) {
            snprintf(err, n, "%s: max_concurrency: expected a whole number >= 1 or null", where);
            return -1;
        }
        db_import_put(o, "setting_concurrency", (double)json_integer_value(mc), SIM_UNIT_COUNT);
    }
    bool inf = json_is_string(rr) && !strcmp(json_string_value(rr), "inf");
    if (rr && !inf && !json_is_null(rr)) {
        if (!json_is_number(rr) || !(json_number_value(rr) > 0)) {
            snprintf(err, n, "%s: request_rate: expected a number > 0 or inf", where);
            return -1;
        }
        db_import_put(o, "setting_request_rate_per_s", json_number_value(rr), SIM_UNIT_RATE);
    }
    if (inf && (!mc || json_is_null(mc))) db_import_put(o, "setting_offline", 1, SIM_UNIT_COUNT);
    db_import_put(o, "setting_prompts", completed, SIM_UNIT_COUNT);
    return 0;
}

int db_import_sglang(const char *text, const char *label, db_import *o, char *err, size_t n)
{
    /* One object over several lines (a pretty-printed record) is one record. */
    char *whole = strict_json(text, strlen(text));
    if (!whole) { snprintf(err, n, "out of memory"); return -1; }
    json_error_t je;
    json_t *one = json_loads(whole, 0, &je);
    free(whole);
    if (one && strchr(text, '\n') && strchr(text, '\n')[strspn(strchr(text, '\n'), " \t\r\n")]) {
        int rc = json_is_object(one) && db_import_is_sglang(one) ? record(one, label, 1, o, err, n) : 1;
        json_decref(one);
        if (rc <= 0) return rc;
    } else {
        json_decref(one);
    }
    long ln = 0, records = 0;
    for (const char *p = text; *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        ln++;
        const char *s = p;
        p = eol ? eol + 1 : p + len;
        size_t k = 0;
        while (k < len && (s[k] == ' ' || s[k] == '\t' || s[k] == '\r')) k++;
        if (k == len) continue;
        char *line = strict_json(s, len);
        if (!line) { snprintf(err, n, "out of memory"); return -1; }
        json_t *r = json_loads(line, 0, &je);
        free(line);
        if (!r || !json_is_object(r)) {
            snprintf(err, n, "%s:%ld:%d: %s", label, ln, r ? 1 : je.column, r ? "expected one JSON object per line" : je.text);
            json_decref(r);
            return -1;
        }
        if (!db_import_is_sglang(r)) {
            snprintf(err, n, "%s:%ld:1: not an SGLang bench_serving result (no e2e latency statistics)", label, ln);
            json_decref(r);
            return -1;
        }
        /* Every record is checked; the last one (the latest run) is what is kept. */
        int rc = record(r, label, ln, o, err, n);
        json_decref(r);
        if (rc) return -1;
        records++;
    }
    if (!records) { snprintf(err, n, "%s: no result records", label); return -1; }
    return 0;
}
