/* cmd_report.c: `kvplan report SCENARIO`: from the database, one offline HTML page with
 * Vega-Lite charts (the throughput-latency Pareto front, the memory breakdown, KV use over time,
 * predicted against measured), or the same data as JSON or CSV. The chart libraries are
 * installed by `make setup` (npm) and inlined, so the page needs no network. */
#include "cli_run.h"
#include "../model/kv_model.h"
#include "../planner/plan.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    const scn_scenario *s;
    db *d;
    json_t *pareto, *timeseries, *validation;
    json_t *runs;            /* every run: id, kind, options, metrics, as read */
} gather;

static int sample_into(void *ud, const sim_sample *x)
{
    json_t **ctx = ud;   /* [0] = array, [1] = label */
    json_array_append_new(ctx[0], json_pack("{s:O, s:f, s:f, s:I}", "run", ctx[1], "t_s", x->t, "kv_used", x->kv_used,
                                            "queue", (json_int_t)x->waiting));
    return 0;
}

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static int each_run(void *ud, const db_run_info *r)
{
    gather *g = ud;
    sim_metrics m;
    memset(&m, 0, sizeof m);
    for (int q = 0; q < SIM_Q_COUNT; q++) m.q[q].p99 = m.q[q].p50 = m.q[q].mean = NAN;
    char err[256];
    if (db_run_sim_metrics(g->d, r->id, &m, err, sizeof err) != DB_OK) return 1;
    json_t *opts = json_loads(r->options, 0, NULL);
    json_int_t tp = g->s->deployment.tensor_parallel, reps = g->s->deployment.replicas;
    if (opts) {
        json_t *v;
        if ((v = json_object_get(opts, "tensor_parallel")) && json_is_integer(v)) tp = json_integer_value(v);
        if ((v = json_object_get(opts, "replicas")) && json_is_integer(v)) reps = json_integer_value(v);
    }
    double gpus = (double)(tp * reps);
    double lat = plan_percentile(&m, g->s->slo.n ? g->s->slo.terms[0].metric : SCN_METRIC_E2E, 99);
    char label[48];
    snprintf(label, sizeof label, "run %ld (%s)", r->id, r->kind);
    json_array_append_new(g->runs, json_pack("{s:I, s:s, s:s, s:s, s:I, s:f, s:o, s:o, s:o, s:o, s:o, s:o, s:b}",
                                             "run", (json_int_t)r->id, "label", label, "kind", r->kind, "options", r->options,
                                             "seed", (json_int_t)r->seed, "gpus", gpus,
                                             "out_tok_per_gpu", num(m.output_tok_per_s / gpus), "latency_p99_s", num(lat),
                                             "ttft_p50_s", num(m.q[SIM_Q_TTFT].p50), "ttft_p99_s", num(m.q[SIM_Q_TTFT].p99),
                                             "tpot_mean_s", num(m.q[SIM_Q_TPOT].mean), "throughput_req_per_s", num(m.req_per_s),
                                             "slo_met", plan_slo_met(g->s, &m)));
    json_t *lab = json_string(label);
    json_t *ctx[2] = {g->timeseries, lab};
    db_run_timeseries(g->d, r->id, sample_into, ctx, err, sizeof err);
    json_decref(lab);
    json_decref(opts);
    return 0;
}

/* The Pareto front over predicted runs, and predicted/measured pairs (same options and seed). */
static void derive(gather *g)
{
    size_t n = json_array_size(g->runs);
    for (size_t i = 0; i < n; i++) {
        json_t *a = json_array_get(g->runs, i);
        if (strcmp(json_string_value(json_object_get(a, "kind")), "predicted")) continue;
        double ta = json_number_value(json_object_get(a, "out_tok_per_gpu")), la = json_number_value(json_object_get(a, "latency_p99_s"));
        bool front = json_is_number(json_object_get(a, "latency_p99_s"));
        for (size_t j = 0; j < n && front; j++) {
            json_t *b = json_array_get(g->runs, j);
            if (j == i || strcmp(json_string_value(json_object_get(b, "kind")), "predicted")) continue;
            double tb = json_number_value(json_object_get(b, "out_tok_per_gpu")), lb = json_number_value(json_object_get(b, "latency_p99_s"));
            if (tb >= ta && lb <= la && (tb > ta || lb < la)) front = false;
        }
        json_t *p = json_deep_copy(a);
        json_object_set_new(p, "pareto", json_boolean(front));
        json_array_append_new(g->pareto, p);
        for (size_t j = 0; j < n; j++) {
            json_t *b = json_array_get(g->runs, j);
            if (strcmp(json_string_value(json_object_get(b, "kind")), "measured") ||
                strcmp(json_string_value(json_object_get(b, "options")), json_string_value(json_object_get(a, "options"))) ||
                json_integer_value(json_object_get(b, "seed")) != json_integer_value(json_object_get(a, "seed")))
                continue;
            static const char *const M[] = {"throughput_req_per_s", "ttft_p50_s", "ttft_p99_s", "tpot_mean_s"};
            char pair[64];
            snprintf(pair, sizeof pair, "runs %lld/%lld", (long long)json_integer_value(json_object_get(a, "run")),
                     (long long)json_integer_value(json_object_get(b, "run")));
            for (int k = 0; k < 4; k++) {
                double pv = json_number_value(json_object_get(a, M[k])), mv = json_number_value(json_object_get(b, M[k]));
                json_array_append_new(g->validation, json_pack("{s:s, s:s, s:o, s:o, s:o}", "pair", pair, "metric", M[k],
                                                               "predicted", num(pv), "measured", num(mv),
                                                               "error", num(mv != 0 ? pv / mv - 1 : NAN)));
            }
        }
    }
}

/* Memory per GPU for each tensor-parallel choice: where the device memory goes. */
static json_t *memory_rows(const scn_scenario *s)
{
    json_t *rows = json_array();
    int n = s->options.n_tp ? s->options.n_tp : 1;
    for (int i = 0; i < n; i++) {
        scn_scenario t = *s;
        t.deployment.tensor_parallel = s->options.n_tp ? s->options.tensor_parallel[i] : s->deployment.tensor_parallel;
        kv_cache_cfg c = kv_cache_cfg_make(&t, s->options.kv_dtype[0], 0, 0);
        kv_capacity k = kv_capacity_compute(&t, &c, s->options.block_size[0], 0);
        char tp[32];
        snprintf(tp, sizeof tp, "tp=%d", t.deployment.tensor_parallel);
        double parts[5] = {k.weights, k.activation, k.runtime, k.kv_budget > 0 ? k.kv_budget : 0, k.device_memory - k.usable};
        static const char *const NAMES[] = {"weights", "activation peak", "runtime", "KV cache", "held back (1 - utilization)"};
        for (int p = 0; p < 5; p++)
            json_array_append_new(rows, json_pack("{s:s, s:s, s:i, s:f}", "deployment", tp, "part", NAMES[p], "order", p, "gib",
                                                  parts[p] / 1073741824.0));
    }
    return rows;
}

/* ---- HTML ---- */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n > 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    if (b) b[n] = 0;
    fclose(f);
    return b;
}

/* Writes a library as a script element; "</script" inside it is escaped so it cannot end the element. */
static int script(FILE *f, const char *js)
{
    fputs("<script>", f);
    for (const char *p = js; *p; p++) {
        if (p[0] == '<' && p[1] == '/' && !strncasecmp(p + 2, "script", 6)) { fputs("<\\/", f); p++; continue; }
        fputc(*p, f);
    }
    return fputs("</script>\n", f) < 0 ? -1 : 0;
}

static const char *SPECS =
    "const specs = {\n"
    " pareto: {$schema: 'https://vega.github.io/schema/vega-lite/v5.json', title: 'Throughput against p99 latency (predicted runs)',\n"
    "   width: 520, height: 300, data: {values: DATA.pareto}, mark: {type: 'point', filled: true, size: 80},\n"
    "   encoding: {x: {field: 'latency_p99_s', type: 'quantitative', title: 'p99 latency (s)', scale: {type: 'log'}},\n"
    "     y: {field: 'out_tok_per_gpu', type: 'quantitative', title: 'output tokens/s per GPU'},\n"
    "     color: {field: 'pareto', type: 'nominal', title: 'Pareto front'}, shape: {field: 'slo_met', type: 'nominal', title: 'SLO met'},\n"
    "     tooltip: [{field: 'options'}, {field: 'run'}, {field: 'latency_p99_s'}, {field: 'out_tok_per_gpu'}]}},\n"
    " memory: {$schema: 'https://vega.github.io/schema/vega-lite/v5.json', title: 'Memory per GPU (cost model)', width: 520, height: 240,\n"
    "   data: {values: DATA.memory}, mark: 'bar', encoding: {y: {field: 'deployment', type: 'nominal', title: null},\n"
    "     x: {field: 'gib', type: 'quantitative', title: 'GiB', stack: 'zero'}, color: {field: 'part', type: 'nominal', title: null},\n"
    "     order: {field: 'order'}, tooltip: [{field: 'part'}, {field: 'gib', format: '.2f'}]}},\n"
    " kv: {$schema: 'https://vega.github.io/schema/vega-lite/v5.json', title: 'KV cache use over time', width: 520, height: 240,\n"
    "   data: {values: DATA.timeseries}, mark: 'line', encoding: {x: {field: 't_s', type: 'quantitative', title: 'time (s)'},\n"
    "     y: {field: 'kv_used', type: 'quantitative', title: 'blocks in use', axis: {format: '%'}},\n"
    "     color: {field: 'run', type: 'nominal', title: null}}},\n"
    " validation: {$schema: 'https://vega.github.io/schema/vega-lite/v5.json', title: 'Prediction error (predicted / measured - 1)',\n"
    "   width: 520, height: 240, data: {values: DATA.validation}, mark: 'bar',\n"
    "   encoding: {x: {field: 'metric', type: 'nominal', title: null, axis: {labelAngle: 0}}, xOffset: {field: 'pair'},\n"
    "     y: {field: 'error', type: 'quantitative', title: 'error', axis: {format: '%'}},\n"
    "     color: {field: 'pair', type: 'nominal', title: null},\n"
    "     tooltip: [{field: 'pair'}, {field: 'metric'}, {field: 'predicted'}, {field: 'measured'}, {field: 'error', format: '.1%'}]}}\n"
    "};\n"
    "let drawn = 0;\n"
    "for (const [id, spec] of Object.entries(specs)) {\n"
    "  if (spec.data.values.length === 0) { document.getElementById(id + '-note').textContent = 'No data for this chart in the database yet.'; }\n"
    "  vegaEmbed('#' + id, spec, {renderer: 'svg', actions: false}).then(() => {\n"
    "    drawn++; document.body.setAttribute('data-charts-drawn', String(drawn));\n"
    "  }).catch(e => { document.getElementById(id + '-note').textContent = 'chart failed: ' + e; });\n"
    "}\n";

static int write_html(const char *path, const char *assets, const scn_scenario *s, json_t *data)
{
    static const char *const LIBS[] = {"vega/build/vega.min.js", "vega-lite/build/vega-lite.min.js",
                                       "vega-embed/build/vega-embed.min.js"};
    FILE *f = fopen(path, "w");
    if (!f) { fprintf(stderr, "kvplan: cannot create %s: %s\n", path, strerror(errno)); return CLI_EX_CANTCREAT; }
    fprintf(f, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>kvplan report: %s</title>\n", s->name);
    fputs("<style>body{font-family:sans-serif;margin:2em;max-width:70em} h2{margin-top:2em} .note{color:#666}</style>\n", f);
    for (int i = 0; i < 3; i++) {
        char p[PATH_MAX + 64];
        snprintf(p, sizeof p, "%s/%s", assets, LIBS[i]);
        char *js = slurp(p);
        if (!js) { fclose(f); fprintf(stderr, "kvplan: cannot read %s\n", p); return CLI_EX_UNAVAILABLE; }
        script(f, js);
        free(js);
    }
    fprintf(f, "</head><body data-charts-drawn=\"0\">\n<h1>kvplan report: %s</h1>\n<p>%s on %s, generated by kvplan %s.</p>\n",
            s->name, s->model.name, s->hardware.name, KVPLAN_VERSION);
    static const char *const IDS[][2] = {{"pareto", "Throughput and latency"}, {"memory", "Where the memory goes"},
                                         {"kv", "KV cache use"}, {"validation", "Prediction against measurement"}};
    for (int i = 0; i < 4; i++)
        fprintf(f, "<h2>%s</h2><div id=\"%s\"></div><p class=\"note\" id=\"%s-note\"></p>\n", IDS[i][1], IDS[i][0], IDS[i][0]);
    char *js = json_dumps(data, JSON_COMPACT | JSON_REAL_PRECISION(10));
    fputs("<script>\nconst DATA = ", f);
    /* JSON is valid JavaScript; "</" is escaped so the data cannot end the script element. */
    for (const char *p = js ? js : "{}"; *p; p++) { if (p[0] == '<' && p[1] == '/') fputs("<\\", f); else fputc(*p, f); }
    fputs(";\n", f);
    fputs(SPECS, f);
    fputs("</script>\n</body></html>\n", f);
    free(js);
    if (fclose(f) != 0) { fprintf(stderr, "kvplan: writing %s failed: %s\n", path, strerror(errno)); return CLI_EX_CANTCREAT; }
    return CLI_OK;
}

int cmd_report(int argc, char **argv)
{
    cli_common c = {.format = OUT_TABLE};
    const char *db_flag = NULL, *out_path = "kvplan-report.html";
    int help = 0, html = 1;
    for (int i = 1; i < argc; i++) {
        const char *v;
        /* report's own --format: html (default), json or csv. */
        if ((v = cli_flag_value(argc, argv, &i, "--format"))) {
            if (cli_flag_missing_value()) return CLI_EX_USAGE;
            if (!strcmp(v, "html")) { html = 1; continue; }
            html = 0;
            if (out_format_parse(v, &c.format) || c.format == OUT_TABLE)
                return cli_usage_error("report", "--format takes html, json or csv, not %s", v);
            continue;
        }
        int r = cli_common_flag(&c, argc, argv, &i, &help);
        if (r < 0) return CLI_EX_USAGE;
        if (r) continue;
        if ((v = cli_flag_value(argc, argv, &i, "--db"))) db_flag = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--out"))) out_path = v;
        else if (cli_is_flag(argv[i])) return cli_usage_error("report", "unknown option '%s'", argv[i]);
        else if (!c.scenario) c.scenario = argv[i];
        else return cli_usage_error("report", "unexpected argument '%s'", argv[i]);
        if (cli_flag_missing_value()) return CLI_EX_USAGE;
    }
    if (help) { fputs(cli_usage_of("report"), stdout); return CLI_OK; }
    if (!c.scenario) return cli_usage_error("report", "missing SCENARIO");
    scn_scenario s;
    int rc = cli_load(&c, &s);
    if (rc) return rc;
    char assets[PATH_MAX];
    if (html && scn_assets_dir(assets, sizeof assets)) {
        fprintf(stderr, "kvplan: the chart libraries (vega, vega-lite, vega-embed) are not installed: run `make setup` "
                        "(npm ci in the source tree), or set KVPLAN_ASSETS to a node_modules folder\n");
        return CLI_EX_UNAVAILABLE;
    }
    cli_run_flags f = {.db_flag = db_flag};
    db *d;
    const char *path;
    if ((rc = cli_open_db(&f, &d, &path))) return rc;
    gather g = {.s = &s, .d = d, .pareto = json_array(), .timeseries = json_array(), .validation = json_array(),
                .runs = json_array()};
    char err[1024];
    db_status st = db_scenario_runs(d, &s, each_run, &g, err, sizeof err);
    db_close(d);
    if (st != DB_OK) { fprintf(stderr, "kvplan: %s: %s\n", path, err); rc = cli_exit_for_db(st); goto out; }
    derive(&g);
    json_t *data = json_pack("{s:O, s:o, s:O, s:O}", "pareto", g.pareto, "memory", memory_rows(&s), "timeseries", g.timeseries,
                             "validation", g.validation);
    if (html) {
        rc = write_html(out_path, assets, &s, data);
        if (rc == CLI_OK)
            printf("wrote %s: %zu predicted runs, %zu time-series samples, %zu predicted/measured comparisons\n", out_path,
                   json_array_size(g.pareto), json_array_size(g.timeseries), json_array_size(g.validation));
    } else if (c.format == OUT_JSON) {
        rc = json_dumpf(data, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) ? CLI_EX_INTERNAL : CLI_OK;
        putchar('\n');
    } else {
        out_doc *doc = out_doc_init();
        static const out_col cols[] = {{"run", "run", OUT_INT}, {"options", "options", OUT_STR}, {"gpus", "gpus", OUT_INT},
                                       {"out_tok_per_gpu", "out tok/s per GPU", OUT_NUM}, {"latency_p99_s", "p99", OUT_SECONDS},
                                       {"slo_met", "slo", OUT_STR}, {"pareto", "pareto", OUT_STR}};
        out_table(doc, "pareto", "", 7, cols);
        for (size_t i = 0; i < json_array_size(g.pareto); i++) {
            json_t *p = json_array_get(g.pareto, i);
            out_cell_num(doc, (double)json_integer_value(json_object_get(p, "run")));
            out_cell_str(doc, json_string_value(json_object_get(p, "options")));
            out_cell_num(doc, json_number_value(json_object_get(p, "gpus")));
            out_cell_num(doc, json_number_value(json_object_get(p, "out_tok_per_gpu")));
            out_cell_num(doc, json_is_number(json_object_get(p, "latency_p99_s")) ? json_number_value(json_object_get(p, "latency_p99_s")) : NAN);
            out_cell_str(doc, json_is_true(json_object_get(p, "slo_met")) ? "yes" : "no");
            out_cell_str(doc, json_is_true(json_object_get(p, "pareto")) ? "yes" : "no");
        }
        rc = cli_emit(doc, OUT_CSV);
        out_doc_free(doc);
    }
    json_decref(data);
out:
    json_decref(g.pareto);
    json_decref(g.timeseries);
    json_decref(g.validation);
    json_decref(g.runs);
    return rc;
}
