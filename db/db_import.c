/* db_import.c: parsers for vLLM benchmark results (JSON, through jansson) and Prometheus text
 * exposition (line by line, with PCRE2). Formats written from their public documentation. */
#define PCRE2_CODE_UNIT_WIDTH 8
#define _XOPEN_SOURCE 700
#include "db_import.h"
#include "import_formats.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pcre2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put(db_import *o, const char *name, double v, sim_unit unit)
{
    if (o->n == DB_IMPORT_MAX || !isfinite(v)) return;
    snprintf(o->names[o->n], sizeof o->names[0], "%s", name);
    o->m[o->n] = (sim_metric_kv){o->names[o->n], v, unit};
    o->n++;
}

/* ---- vLLM benchmark_serving --save-result JSON ---- */
static bool is_bench_field(const char *key)
{
    static const char *const PLAIN[] = {"completed", "duration", "request_throughput", "total_input_tokens",
                                        "output_throughput", "request_goodput", NULL};
    for (int i = 0; PLAIN[i]; i++) if (!strcmp(key, PLAIN[i])) return true;
    size_t l = strlen(key);
    return l > 3 && !strcmp(key + l - 3, "_ms");
}

static int parse_bench(json_t *root, const char *label, db_import *o, char *err, size_t n)
{
    static const char *const REQUIRED[] = {"completed", "duration", "mean_ttft_ms", NULL};
    for (int i = 0; REQUIRED[i]; i++)
        if (!json_is_number(json_object_get(root, REQUIRED[i]))) {
            snprintf(err, n, "%s: not a vLLM benchmark_serving result: '%s' is missing or not a number", label, REQUIRED[i]);
            return -1;
        }
    /* Every field kvplan reads is a count, a duration, a rate or a latency: never negative. */
    const char *fk;
    json_t *fv;
    json_object_foreach(root, fk, fv) {
        if (json_is_number(fv) && is_bench_field(fk) && !(json_number_value(fv) >= 0)) {
            snprintf(err, n, "%s: '%s' must be >= 0, found %g", label, fk, json_number_value(fv));
            return -1;
        }
    }
    o->format = "vllm-benchmark";
    double duration = json_number_value(json_object_get(root, "duration"));
    if (!(duration > 0)) { snprintf(err, n, "%s: 'duration' must be > 0", label); return -1; }
    put(o, "requests", json_number_value(json_object_get(root, "completed")), SIM_UNIT_COUNT);
    put(o, "duration_s", duration, SIM_UNIT_SECONDS);
    json_t *v;
    if ((v = json_object_get(root, "request_throughput")) && json_is_number(v)) put(o, "throughput_req_per_s", json_number_value(v), SIM_UNIT_RATE);
    if ((v = json_object_get(root, "total_input_tokens")) && json_is_number(v)) put(o, "input_tok_per_s", json_number_value(v) / duration, SIM_UNIT_RATE);
    if ((v = json_object_get(root, "output_throughput")) && json_is_number(v)) put(o, "output_tok_per_s", json_number_value(v), SIM_UNIT_RATE);
    if ((v = json_object_get(root, "request_goodput")) && json_is_number(v)) put(o, "goodput_req_per_s", json_number_value(v), SIM_UNIT_RATE);
    /* Latencies in ms: mean, median and whichever percentiles the benchmark was asked for. */
    static const char *const SRC[] = {"ttft", "tpot", "itl", "e2el"}, *const DST[] = {"ttft", "tpot", "itl", "e2e"};
    static const char *const STAT[][2] = {{"mean", "mean"}, {"median", "p50"}, {"p50", "p50"}, {"p90", "p90"},
                                          {"p95", "p95"}, {"p99", "p99"}};
    for (int q = 0; q < 4; q++)
        for (int k = 0; k < 6; k++) {
            char key[48], name[48];
            snprintf(key, sizeof key, "%s_%s_ms", STAT[k][0], SRC[q]);
            v = json_object_get(root, key);
            if (!v) continue;
            if (!json_is_number(v)) { snprintf(err, n, "%s: '%s' must be a number", label, key); return -1; }
            snprintf(name, sizeof name, "%s_%s_s", DST[q], STAT[k][1]);
            put(o, name, json_number_value(v) / 1000.0, SIM_UNIT_SECONDS);
        }
    return 0;
}

/* ---- Prometheus text ---- */
#define MAX_HIST 8
#define MAX_BUCKETS 64
typedef struct {
    const char *name, *out;                 /* vLLM histogram, kvplan prefix */
    double le[MAX_BUCKETS], count[MAX_BUCKETS];
    int nb;
    double sum, total;
    int has_sum, has_count;
} hist;

static const char *const HIST_NAMES[][2] = {
    {"vllm:time_to_first_token_seconds", "ttft"}, {"vllm:time_per_output_token_seconds", "tpot"},
    {"vllm:inter_token_latency_seconds", "itl"},  {"vllm:e2e_request_latency_seconds", "e2e"},
    {"vllm:request_queue_time_seconds", "queue"},
};

/* Adds a series' bucket to the histogram (series differing in other labels are summed). */
static int add_bucket(hist *h, double le, double c)
{
    for (int i = 0; i < h->nb; i++) if (h->le[i] == le) { h->count[i] += c; return 0; }
    if (h->nb == MAX_BUCKETS) return -1;
    int i = h->nb++;
    while (i > 0 && h->le[i - 1] > le) { h->le[i] = h->le[i - 1]; h->count[i] = h->count[i - 1]; i--; }
    h->le[i] = le;
    h->count[i] = c;
    return 0;
}

/* histogram_quantile's rule: linear within the bucket holding rank q * total. */
static double quantile(const hist *h, double q)
{
    double rank = q * h->total;
    for (int i = 0; i < h->nb; i++) {
        if (h->count[i] >= rank) {
            if (isinf(h->le[i])) return i > 0 ? h->le[i - 1] : NAN;
            double lo = i > 0 ? h->le[i - 1] : 0, clo = i > 0 ? h->count[i - 1] : 0;
            double width = h->count[i] - clo;
            return width > 0 ? lo + (h->le[i] - lo) * (rank - clo) / width : h->le[i];
        }
    }
    return NAN;
}

static const char *const FRACTIONS[] = {"vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc",
                                        "vllm:gpu_prefix_cache_hit_rate", NULL};
static const char *const COUNTERS[] = {"vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits",
                                       "vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries",
                                       "vllm:num_preemptions_total", "vllm:request_success_total",
                                       "vllm:prompt_tokens_total", "vllm:generation_tokens_total", NULL};

static bool in_list(const char *name, const char *const *list)
{
    for (; *list; list++) if (!strcmp(name, *list)) return true;
    return false;
}

static bool is_fraction(const char *name) { return in_list(name, FRACTIONS); }

/* True for the series kvplan reads: the fractions, the counters, the histograms' parts. */
static bool is_known(const char *name, const hist *h, int nh)
{
    if (in_list(name, FRACTIONS) || in_list(name, COUNTERS)) return true;
    for (int i = 0; i < nh; i++) {
        size_t bl = strlen(h[i].name);
        if (!strncmp(name, h[i].name, bl) &&
            (!strcmp(name + bl, "_bucket") || !strcmp(name + bl, "_sum") || !strcmp(name + bl, "_count")))
            return true;
    }
    return false;
}

static pcre2_code *compile(const char *pat)
{
    int code;
    PCRE2_SIZE off;
    return pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, 0, &code, &off, NULL);
}

static int parse_prom(const char *text, const char *label, db_import *o, char *err, size_t n)
{
    pcre2_code *line_re = compile("^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\\{([^}]*)\\})?[ \\t]+(\\S+)(?:[ \\t]+-?[0-9]+)?[ \\t]*$");
    pcre2_code *le_re = compile("(?:^|,)\\s*le=\"([^\"]*)\"");
    pcre2_match_data *md = line_re ? pcre2_match_data_create_from_pattern(line_re, NULL) : NULL;
    pcre2_match_data *md2 = le_re ? pcre2_match_data_create_from_pattern(le_re, NULL) : NULL;
    int nh = (int)(sizeof HIST_NAMES / sizeof HIST_NAMES[0]);
    hist *H = calloc((size_t)nh, sizeof *H);   /* per call: the parser keeps no state between calls */
    for (int i = 0; H && i < nh; i++) { H[i].name = HIST_NAMES[i][0]; H[i].out = HIST_NAMES[i][1]; }
    double kv_usage = NAN, hit_rate = NAN, hits = 0, queries = 0, preempt = NAN, success = NAN, prompt = NAN, gen = NAN;
    int rc = -1, seen_vllm = 0;
    if (!md || !md2 || !H) { snprintf(err, n, "internal: out of memory or patterns failed to compile"); goto out; }
    long ln = 0;
    for (const char *p = text; *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        ln++;
        char line[2048];
        if (len >= sizeof line) { snprintf(err, n, "%s:%ld: line longer than %zu characters", label, ln, sizeof line - 1); goto out; }
        memcpy(line, p, len);
        line[len] = 0;
        /* Advance before trimming: a last line "...\r" without "\n" must still be consumed. */
        p = eol ? eol + 1 : p + len;
        if (len && line[len - 1] == '\r') line[--len] = 0;
        const char *s = line;
        while (*s == ' ' || *s == '\t') s++;
        if (!*s || *s == '#') continue;
        if (pcre2_match(line_re, (PCRE2_SPTR)s, PCRE2_ZERO_TERMINATED, 0, 0, md, NULL) < 4) {
            snprintf(err, n, "%s:%ld: not a Prometheus sample line (expected 'name{labels} value'): %.60s", label, ln, s);
            goto out;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        char name[256] = "", labels[1024] = "", value[64] = "";
        snprintf(name, sizeof name, "%.*s", (int)(ov[3] - ov[2]), s + ov[2]);
        if (ov[4] != PCRE2_UNSET) snprintf(labels, sizeof labels, "%.*s", (int)(ov[5] - ov[4]), s + ov[4]);
        snprintf(value, sizeof value, "%.*s", (int)(ov[7] - ov[6]), s + ov[6]);
        char *end;
        double v = strtod(value, &end);
        if (end == value || *end) { snprintf(err, n, "%s:%ld: '%s' is not a number", label, ln, value); goto out; }
        bool known = is_known(name, H, nh);
        /* Every sample kvplan reads is a count, a sum of seconds or a fraction: finite and not
         * negative. (Other series may hold anything; they are skipped.) */
        if (known && (!isfinite(v) || v < 0)) {
            snprintf(err, n, "%s:%ld: %s: '%s' must be a finite number >= 0", label, ln, name, value);
            goto out;
        }
        if (!strncmp(name, "vllm:", 5)) seen_vllm = 1;
        for (int i = 0; i < nh; i++) {
            size_t bl = strlen(H[i].name);
            if (strncmp(name, H[i].name, bl)) continue;
            const char *suffix = name + bl;
            if (!strcmp(suffix, "_bucket")) {
                if (pcre2_match(le_re, (PCRE2_SPTR)labels, PCRE2_ZERO_TERMINATED, 0, 0, md2, NULL) < 2) {
                    snprintf(err, n, "%s:%ld: a histogram bucket without an le label", label, ln);
                    goto out;
                }
                PCRE2_SIZE *o2 = pcre2_get_ovector_pointer(md2);
                char les[64];
                snprintf(les, sizeof les, "%.*s", (int)(o2[3] - o2[2]), labels + o2[2]);
                double le = strtod(les, &end);
                if (end == les || *end || isnan(le) || le < 0) {
                    snprintf(err, n, "%s:%ld: le=\"%s\" is not a bucket bound (a number >= 0 or +Inf)", label, ln, les);
                    goto out;
                }
                if (add_bucket(&H[i], le, v)) { snprintf(err, n, "%s:%ld: more than %d buckets", label, ln, MAX_BUCKETS); goto out; }
            } else if (!strcmp(suffix, "_sum")) { H[i].sum += v; H[i].has_sum = 1; }
            else if (!strcmp(suffix, "_count")) { H[i].total += v; H[i].has_count = 1; }
        }
        if (is_fraction(name) && v > 1) {
            snprintf(err, n, "%s:%ld: %s: '%s' is a fraction and must be at most 1", label, ln, name, value);
            goto out;
        }
        if (!strcmp(name, "vllm:gpu_cache_usage_perc") || !strcmp(name, "vllm:kv_cache_usage_perc")) kv_usage = isnan(kv_usage) ? v : fmax(kv_usage, v);
        else if (!strcmp(name, "vllm:gpu_prefix_cache_hit_rate")) hit_rate = v;
        else if (!strcmp(name, "vllm:prefix_cache_hits_total") || !strcmp(name, "vllm:prefix_cache_hits")) hits += v;
        else if (!strcmp(name, "vllm:prefix_cache_queries_total") || !strcmp(name, "vllm:prefix_cache_queries")) queries += v;
        else if (!strcmp(name, "vllm:num_preemptions_total")) preempt = isnan(preempt) ? v : preempt + v;
        else if (!strcmp(name, "vllm:request_success_total")) success = isnan(success) ? v : success + v;
        else if (!strcmp(name, "vllm:prompt_tokens_total")) prompt = isnan(prompt) ? v : prompt + v;
        else if (!strcmp(name, "vllm:generation_tokens_total")) gen = isnan(gen) ? v : gen + v;
    }
    if (!seen_vllm) { snprintf(err, n, "%s: no vllm: metrics found; is this a vLLM /metrics scrape?", label); goto out; }
    o->format = "prometheus";
    if (!isnan(success)) put(o, "requests", success, SIM_UNIT_COUNT);
    for (int i = 0; i < nh; i++) {
        hist *h = &H[i];
        if (!h->nb && !h->has_count) continue;
        /* A scrape cut short loses the +Inf bucket or the count: refuse rather than guess. */
        if (!h->nb || !isinf(h->le[h->nb - 1]) || !h->has_count || !h->has_sum) {
            snprintf(err, n, "%s: histogram %s is truncated (needs its buckets up to le=\"+Inf\", _sum and _count)", label, h->name);
            goto out;
        }
        for (int b = 1; b < h->nb; b++)
            if (h->count[b] < h->count[b - 1]) {
                snprintf(err, n, "%s: histogram %s: cumulative counts decrease at le=\"%g\"", label, h->name, h->le[b]);
                goto out;
            }
        if (h->count[h->nb - 1] != h->total) {
            snprintf(err, n, "%s: histogram %s: the +Inf bucket (%g) differs from _count (%g)", label, h->name,
                     h->count[h->nb - 1], h->total);
            goto out;
        }
        if (h->total <= 0) continue;
        char nm[48];
        snprintf(nm, sizeof nm, "%s_mean_s", h->out); put(o, nm, h->sum / h->total, SIM_UNIT_SECONDS);
        snprintf(nm, sizeof nm, "%s_p50_s", h->out); put(o, nm, quantile(h, 0.50), SIM_UNIT_SECONDS);
        snprintf(nm, sizeof nm, "%s_p90_s", h->out); put(o, nm, quantile(h, 0.90), SIM_UNIT_SECONDS);
        snprintf(nm, sizeof nm, "%s_p99_s", h->out); put(o, nm, quantile(h, 0.99), SIM_UNIT_SECONDS);
    }
    if (!isnan(kv_usage)) put(o, "kv_util_at_scrape", kv_usage, SIM_UNIT_FRACTION);
    if (!isnan(hit_rate)) put(o, "prefix_hit_rate", hit_rate, SIM_UNIT_FRACTION);
    else if (queries > 0) put(o, "prefix_hit_rate", hits / queries, SIM_UNIT_FRACTION);
    if (!isnan(preempt)) put(o, "preemptions", preempt, SIM_UNIT_COUNT);
    if (!isnan(prompt)) put(o, "input_tokens", prompt, SIM_UNIT_COUNT);
    if (!isnan(gen)) put(o, "output_tokens", gen, SIM_UNIT_COUNT);
    rc = 0;
out:
    free(H);
    pcre2_match_data_free(md);
    pcre2_match_data_free(md2);
    pcre2_code_free(line_re);
    pcre2_code_free(le_re);
    return rc;
}

/* Every accepted measurement is a finite, non-negative quantity (latencies, rates, counts,
 * fractions): whichever parser read it, a file that says otherwise is refused by name. */
static int check_values(const char *label, db_import *o, char *err, size_t n)
{
    for (int i = 0; i < o->n; i++)
        if (!isfinite(o->m[i].value) || o->m[i].value < 0) {
            snprintf(err, n, "%s: %s: %g is not a measurement (expected a finite value >= 0)", label,
                     o->m[i].name ? o->m[i].name : "?", o->m[i].value);
            o->n = 0;
            return -1;
        }
    return 0;
}

static int import_any(const char *text, const char *label, db_import *o, char *err, size_t n);

int db_import_text(const char *text, const char *label, db_import *o, char *err, size_t n)
{
    int rc = import_any(text, label, o, err, n);
    return rc == 0 ? check_values(label, o, err, n) : rc;
}

static int import_any(const char *text, const char *label, db_import *o, char *err, size_t n)
{
    memset(o, 0, sizeof *o);
    /* The benchmark-client formats (import_formats.h) are recognised first. */
    int more = db_import_detect_more(text, label, o, err, n);
    if (more <= 0) return more;
    const char *s = text;
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') s++;
    if (*s == '{') {
        json_error_t je;
        json_t *root = json_loads(text, 0, &je);
        if (!root) {
            snprintf(err, n, "%s:%d:%d: malformed JSON: %s", label, je.line, je.column, je.text);
            return -1;
        }
        int rc = json_is_object(root) ? parse_bench(root, label, o, err, n) : -1;
        json_decref(root);
        return rc;
    }
    if (!*s) { snprintf(err, n, "%s: empty file", label); return -1; }
    return parse_prom(text, label, o, err, n);
}

int db_import_file(const char *path, db_import *o, char *err, size_t n)
{
    FILE *f = fopen(path, "rb");
    if (!f) { snprintf(err, n, "%s: cannot open: %s", path, strerror(errno)); return -2; }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (len + 1 == cap) {
            if (cap > ((size_t)256 << 20)) { free(buf); buf = NULL; break; }
            char *nb = realloc(buf, cap *= 2);
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) { free(buf); snprintf(err, n, "%s: cannot read (%s)", path, bad ? "read error" : "too large"); return -2; }
    buf[len] = 0;
    /* Text formats hold no NUL byte; one would silently end the text early. */
    const char *nul = memchr(buf, 0, len);
    if (nul) {
        snprintf(err, n, "%s: byte %zu is NUL: not a text file (or a damaged one)", path, (size_t)(nul - buf) + 1);
        free(buf);
        return -1;
    }
    int rc = db_import_text(buf, path, o, err, n);
    free(buf);
    return rc;
}
