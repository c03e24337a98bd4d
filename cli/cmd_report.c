/* cmd_report.c: `kvplan report SCENARIO`: from the database, one offline HTML page with
 * Vega-Lite charts (the throughput-latency Pareto front, load curves, the memory breakdown, KV
 * use over time, predicted against measured), or the same data as JSON or CSV. The data comes
 * from planner/plan_report.c, the pairs from verify's vf_pair_runs. The chart libraries are
 * installed by `make setup` (npm) and inlined, so the page needs no network. */
#include "cli_run.h"
#include "../model/kv_model.h"
#include "../planner/plan_report.h"
#include "../verify/vf.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- predicted against measured: verify pairs the runs, this lays the pairs out ---- */
typedef struct {
    json_t *runs, *validation;
} pairing;

static json_t *num_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static void on_pair(void *ud, int i, int j)
{
    pairing *p = ud;
    json_t *a = json_array_get(p->runs, (size_t)i), *b = json_array_get(p->runs, (size_t)j);
    static const char *const M[] = {"throughput_req_per_s", "ttft_p50_s", "ttft_p99_s", "tpot_mean_s"};
    char pair[64];
    snprintf(pair, sizeof pair, "runs %lld/%lld", (long long)json_integer_value(json_object_get(a, "run")),
             (long long)json_integer_value(json_object_get(b, "run")));
    for (int k = 0; k < 4; k++) {
        json_t *pv = json_object_get(a, M[k]), *mv = json_object_get(b, M[k]);
        double x = json_is_number(pv) ? json_number_value(pv) : NAN, y = json_is_number(mv) ? json_number_value(mv) : NAN;
        json_array_append_new(p->validation, json_pack("{s:s, s:s, s:o, s:o, s:o}", "pair", pair, "metric", M[k], "predicted",
                                                       num_or_null(x), "measured", num_or_null(y), "error",
                                                       num_or_null(vf_error(x, y))));
    }
}

static json_t *validation_rows(json_t *runs)
{
    pairing p = {runs, json_array()};
    size_t n = json_array_size(runs);
    vf_run_ref *refs = calloc(n ? n : 1, sizeof *refs);
    if (!refs) return p.validation;
    for (size_t i = 0; i < n; i++) {
        json_t *r = json_array_get(runs, i);
        refs[i] = (vf_run_ref){(long)json_integer_value(json_object_get(r, "run")), json_string_value(json_object_get(r, "kind")),
                               json_string_value(json_object_get(r, "options")),
                               (unsigned long long)json_integer_value(json_object_get(r, "seed"))};
    }
    vf_pair_runs(refs, (int)n, on_pair, &p);
    free(refs);
    return p.validation;
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
    "const V = 'https://vega.github.io/schema/vega-lite/v5.json';\n"
    "const specs = {\n"
    " pareto: {$schema: V, title: 'Throughput against p99 latency (predicted runs; the Pareto front joined and enlarged)',\n"
    "   width: 520, height: 300, data: {values: DATA.pareto}, layer: [\n"
    "   {transform: [{filter: 'datum.pareto'}], mark: {type: 'line', color: '#d62728', strokeDash: [4, 3]},\n"
    "    encoding: {x: {field: 'latency_p99_s', type: 'quantitative', scale: {type: 'log'}}, y: {field: 'out_tok_per_gpu', type: 'quantitative'},\n"
    "      order: {field: 'latency_p99_s'}}},\n"
    "   {mark: {type: 'point', filled: true},\n"
    "    encoding: {x: {field: 'latency_p99_s', type: 'quantitative', title: 'p99 latency (s)', scale: {type: 'log'}},\n"
    "     y: {field: 'out_tok_per_gpu', type: 'quantitative', title: 'output tokens/s per GPU'},\n"
    "     size: {field: 'pareto', type: 'nominal', title: 'Pareto front', scale: {domain: [true, false], range: [160, 40]}},\n"
    "     color: {field: 'pareto', type: 'nominal', title: 'Pareto front', scale: {domain: [true, false], range: ['#d62728', '#9ecae9']}},\n"
    "     shape: {field: 'slo_met', type: 'nominal', title: 'SLO met'},\n"
    "     tooltip: [{field: 'options'}, {field: 'hardware'}, {field: 'run'}, {field: 'latency_p99_s'}, {field: 'out_tok_per_gpu'},\n"
    "      {field: 'disaggregation'}, {field: 'transfer_mean_s'}, {field: 'transfer_wait_p99_s'}]}}]},\n"
    " curves: {$schema: V, title: 'Latency and goodput against offered rate (kvplan sweep; red lines: the SLO)',\n"
    "   data: {values: DATA.curves}, facet: {row: {field: 'metric', type: 'nominal', title: null}},\n"
    "   resolve: {scale: {y: 'independent'}},\n"
    "   spec: {width: 520, height: 160, layer: [\n"
    "    {transform: [{filter: \"datum.kind === 'curve'\"}], mark: {type: 'line', point: true},\n"
    "     encoding: {x: {field: 'rate_req_per_s', type: 'quantitative', title: 'offered rate (req/s)'},\n"
    "      y: {field: 'value', type: 'quantitative', title: 's, or req/s for goodput'},\n"
    "      color: {field: 'label', type: 'nominal', title: null, legend: {orient: 'bottom', columns: 1, labelLimit: 600}},\n"
    "      tooltip: [{field: 'label'}, {field: 'options'}, {field: 'rate_req_per_s'}, {field: 'value'}]}},\n"
    "    {transform: [{filter: \"datum.kind === 'slo'\"}], mark: {type: 'rule', color: '#d62728', strokeWidth: 2},\n"
    "     encoding: {y: {field: 'value', type: 'quantitative'}}}]}},\n"
    " memory: {$schema: V, title: 'Memory per GPU (cost model)', width: 520, height: 240,\n"
    "   data: {values: DATA.memory}, mark: 'bar', encoding: {y: {field: 'deployment', type: 'nominal', title: null},\n"
    "     x: {field: 'gib', type: 'quantitative', title: 'GiB', stack: 'zero'}, color: {field: 'part', type: 'nominal', title: null},\n"
    "     order: {field: 'order'}, tooltip: [{field: 'part'}, {field: 'gib', format: '.2f'}]}},\n"
    " kv: {$schema: V, title: 'KV cache use over time', width: 520, height: 240,\n"
    "   data: {values: DATA.timeseries}, mark: 'line', encoding: {x: {field: 't_s', type: 'quantitative', title: 'time (s)'},\n"
    "     y: {field: 'kv_used', type: 'quantitative', title: 'blocks in use', axis: {format: '%'}},\n"
    "     color: {field: 'run', type: 'nominal', title: null}}},\n"
    " validation: {$schema: V, title: 'Prediction error (predicted / measured - 1)',\n"
    "   width: 520, height: 240, data: {values: DATA.validation}, mark: 'bar',\n"
    "   encoding: {x: {field: 'metric', type: 'nominal', title: null, axis: {labelAngle: 0}}, xOffset: {field: 'pair'},\n"
    "     y: {field: 'error', type: 'quantitative', title: 'error', axis: {format: '%'}},\n"
    "     color: {field: 'pair', type: 'nominal', title: null},\n"
    "     tooltip: [{field: 'pair'}, {field: 'metric'}, {field: 'predicted'}, {field: 'measured'}, {field: 'error', format: '.1%'}]}}\n"
    "};\n"
    /* KV offload tiers, only when some run used them (docs/simulator.md, "KV offload tiers"). */
    "if (DATA.offload.length) specs.offload = {$schema: V, title: 'Prompt tokens reloaded from each tier',\n"
    "   width: 520, height: 240, data: {values: DATA.offload}, mark: 'bar',\n"
    "   encoding: {x: {field: 'label', type: 'nominal', title: null, axis: {labelAngle: 0}}, xOffset: {field: 'tier'},\n"
    "     y: {field: 'hit_rate', type: 'quantitative', title: 'share of prompt tokens', axis: {format: '%'}},\n"
    "     color: {field: 'tier', type: 'nominal', title: null},\n"
    "     tooltip: [{field: 'options'}, {field: 'tier'}, {field: 'hit_rate', format: '.1%'}, {field: 'bytes', format: '.3s'},\n"
    "               {field: 'transfer_s', format: '.3f'}, {field: 'occupancy', format: '.1%'}]}};\n"
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
    static const char *const IDS[][2] = {{"pareto", "Throughput and latency"}, {"curves", "Load curves"},
                                         {"memory", "Where the memory goes"}, {"kv", "KV cache use"},
                                         {"validation", "Prediction against measurement"}};
    for (int i = 0; i < 5; i++)
        fprintf(f, "<h2>%s</h2><div id=\"%s\"></div><p class=\"note\" id=\"%s-note\"></p>\n", IDS[i][1], IDS[i][0], IDS[i][0]);
    if (json_array_size(json_object_get(data, "offload")))
        fputs("<h2>KV offload tiers</h2><div id=\"offload\"></div><p class=\"note\" id=\"offload-note\"></p>\n", f);
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

/* One row per tier (cpu, disk, swap, and remote where the run used it) of each run that offloaded KV or swapped: what the
 * database holds for it (docs/simulator.md, "KV offload tiers"). */
static json_t *offload_rows(json_t *runs)
{
    json_t *rows = json_array();
    static const char *const T[] = {"cpu", "disk", "swap", "remote"};
    for (size_t i = 0; i < json_array_size(runs); i++) {
        json_t *r = json_array_get(runs, i), *o = json_object_get(r, "offload");
        if (!o) continue;
        for (int k = 0; k < 4; k++) {
            if (k == 3 && !json_object_get(o, "remote_bytes")) break;
            char f[4][32];
            snprintf(f[0], sizeof f[0], "%s_hit_rate", T[k]);
            snprintf(f[1], sizeof f[1], "%s_bytes", T[k]);
            snprintf(f[2], sizeof f[2], "%s_transfer_s", T[k]);
            snprintf(f[3], sizeof f[3], "%s_occupancy", T[k]);
            json_t *v[4];
            for (int j = 0; j < 4; j++) {
                json_t *x = json_object_get(o, f[j]);
                v[j] = json_is_number(x) ? json_real(json_number_value(x)) : json_null();
            }
            json_array_append_new(rows, json_pack("{s:O, s:O, s:O, s:s, s:o, s:o, s:o, s:o}", "run", json_object_get(r, "run"),
                                                  "label", json_object_get(r, "label"), "options", json_object_get(r, "options"),
                                                  "tier", T[k], "hit_rate", v[0], "bytes", v[1], "transfer_s", v[2],
                                                  "occupancy", v[3]));
        }
    }
    return rows;
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
            if (cli_flag_missing_value(v)) return CLI_EX_USAGE;
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
        if (cli_flag_missing_value(v)) return CLI_EX_USAGE;
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
    db *d;
    const char *path;
    if ((rc = cli_open_db_read(db_flag, &d, &path))) return rc;
    char err[1024];
    db_status st;
    json_t *data = plan_report_data(d, &s, &st, err, sizeof err);
    db_close(d);
    if (!data) { fprintf(stderr, "kvplan: %s: %s\n", path, err); return cli_exit_for_db(st); }
    json_object_set_new(data, "validation", validation_rows(json_object_get(data, "runs")));
    json_object_set_new(data, "offload", offload_rows(json_object_get(data, "runs")));
    json_t *pareto = json_object_get(data, "pareto");
    if (html) {
        rc = write_html(out_path, assets, &s, data);
        if (rc == CLI_OK)
            printf("wrote %s: %zu predicted runs, %zu load-curve rows, %zu time-series samples, %zu predicted/measured "
                   "comparisons\n", out_path, json_array_size(pareto), json_array_size(json_object_get(data, "curves")),
                   json_array_size(json_object_get(data, "timeseries")), json_array_size(json_object_get(data, "validation")));
    } else if (c.format == OUT_JSON) {
        rc = json_dumpf(data, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) ? CLI_EX_INTERNAL : CLI_OK;
        putchar('\n');
    } else {
        out_doc *doc = out_doc_init();
        static const out_col cols[] = {{"run", "run", OUT_INT}, {"options", "options", OUT_STR}, {"gpus", "gpus", OUT_INT},
                                       {"out_tok_per_gpu", "out tok/s per GPU", OUT_NUM}, {"latency_p99_s", "p99", OUT_SECONDS},
                                       {"slo_met", "slo", OUT_STR}, {"pareto", "pareto", OUT_STR}};
        out_table(doc, "pareto", "", 7, cols);
        for (size_t i = 0; i < json_array_size(pareto); i++) {
            json_t *p = json_array_get(pareto, i);
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
    return rc;
}
