/* plan_published.c: the published-measurements harness (see plan_published.h). */
#include "plan_published.h"
#include "plan_reader.h"
#include "plan_trtbench.h"
#include "../model/kv_model.h"
#include "../sim/sim.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The KV block the harness's scenarios use: vLLM's default; SGLang's radix cache pages by one token,
 * which the harness does not model (docs/cost-model.md, "Chat endpoints"). */
#define PUB_BLOCK_TOKENS 16

static const char *const COLUMNS[] = {"id", "gpu", "gpus", "tp", "model", "engine", "engine_version", "weight_dtype",
                                      "kv_dtype", "mode", "load", "input_tokens", "output_tokens", "metric", "value",
                                      "unit", "source", "notes", "engine_args"};
enum { N_COLUMNS = (int)(sizeof COLUMNS / sizeof COLUMNS[0]) };
enum { C_ID, C_GPU, C_GPUS, C_TP, C_MODEL, C_ENGINE, C_ENGINE_VERSION, C_WEIGHT, C_KV, C_MODE, C_LOAD, C_INPUT,
       C_OUTPUT, C_METRIC, C_VALUE, C_UNIT, C_SOURCE, C_NOTES, C_ENGINE_ARGS };
/* engine_args is optional (empty when absent): the launch flags the source states that change
 * the prediction (ARG_FLAGS below); any other flag is an error, so that a flag is never silently
 * ignored. */

const char *const PUB_MODE_NAMES[] = {"closed", "poisson", "offline", "batch", "capacity", NULL};

/* What a metric is, and the units it may be given in. */
typedef enum { U_TIME, U_TOKENS_RATE, U_REQ_RATE, U_TOKENS } unit_kind;
typedef struct { const char *name; pub_class cls; unit_kind unit; } metric_def;
static const metric_def METRICS[] = {
    {"ttft_mean_ms", PUB_CLASS_TTFT, U_TIME},       {"ttft_p50_ms", PUB_CLASS_TTFT, U_TIME},
    {"ttft_p99_ms", PUB_CLASS_TTFT, U_TIME},        {"tpot_mean_ms", PUB_CLASS_TPOT, U_TIME},
    {"tpot_p50_ms", PUB_CLASS_TPOT, U_TIME},        {"itl_mean_ms", PUB_CLASS_TPOT, U_TIME},
    {"step_ms", PUB_CLASS_TPOT, U_TIME},            {"e2e_mean_ms", PUB_CLASS_E2E, U_TIME},
    {"output_tok_s", PUB_CLASS_THROUGHPUT, U_TOKENS_RATE}, {"total_tok_s", PUB_CLASS_THROUGHPUT, U_TOKENS_RATE},
    {"req_s", PUB_CLASS_THROUGHPUT, U_REQ_RATE},    {"kv_tokens", PUB_CLASS_CAPACITY, U_TOKENS},
};
enum { N_METRICS = (int)(sizeof METRICS / sizeof METRICS[0]) };

static const char *const UNITS[][4] = {
    [U_TIME] = {"ms", "s", NULL, NULL},
    [U_TOKENS_RATE] = {"tok/s", "tok/s/gpu", "tok/s per 8-GPU node"},
    [U_REQ_RATE] = {"req/s", "req/s/gpu", NULL, NULL},
    [U_TOKENS] = {"tokens", NULL, NULL, NULL},
};

const char *pub_class_name(pub_class c)
{
    static const char *const N[] = {"TTFT", "TPOT/ITL", "throughput", "capacity", "E2E", "all"};
    return c <= PUB_CLASS_COUNT ? N[c] : "?";
}

static const metric_def *metric_of(const char *name)
{
    for (int i = 0; i < N_METRICS; i++) if (!strcmp(METRICS[i].name, name)) return &METRICS[i];
    return NULL;
}

/* ---- Reading ---- */


static int copy_field(plan_reader *rd, const char *v, int col, const char *field, char *dst, size_t cap, bool required)
{
    if (required && !*v) return plan_reader_bad(rd, col, field, "is empty");
    if (strlen(v) >= cap) return plan_reader_bad(rd, col, field, "longer than %zu characters", cap - 1);
    snprintf(dst, cap, "%s", v);
    return 0;
}

static int whole(plan_reader *rd, const char *v, int col, const char *field, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi) {
        return plan_reader_bad(rd, col, field, "expected a whole number in %ld..%ld, found '%.40s'", lo, hi, v);
    }
    *out = x;
    return 0;
}

static int positive(plan_reader *rd, const char *v, int col, const char *field, double *out)
{
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !(x > 0) || !isfinite(x)) return plan_reader_bad(rd, col, field, "expected a number > 0, found '%.40s'", v);
    *out = x;
    return 0;
}

/* A token count (whole, >= lo; an output of 0 marks a prefill-only measurement) or a dataset
 * name (lower-case letters, digits, '-', '_'), optionally followed by ':MEAN' when the row's source
 * states its own mean length (its total tokens over its requests): the dataset's law is then used
 * with that mean (docs/validation.md "Dataset lengths"); capacity rows may leave it empty or '-'. */
static int tokens_field(plan_reader *rd, const char *v, int col, const char *field, char *dst, bool dash_ok, long lo)
{
    if (dash_ok && (!strcmp(v, "-") || !*v)) { snprintf(dst, 32, "-"); return 0; }
    if (isdigit((unsigned char)v[0])) {
        long x;
        if (whole(rd, v, col, field, lo, 10000000, &x)) return -1;
    } else {
        bool ok = islower((unsigned char)v[0]);
        const char *p = v;
        for (; ok && *p && *p != ':'; p++) ok = islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '-' || *p == '_';
        if (!ok) return plan_reader_bad(rd, col, field, "expected a whole token count or a dataset name such as sharegpt, found '%.40s'", v);
        if (*p == ':') {
            char *end;
            double m = strtod(p + 1, &end);
            if (end == p + 1 || *end || !(m >= 1) || !isfinite(m))
                return plan_reader_bad(rd, col, field, "expected a mean length of at least 1 token after ':', as in sharegpt:232.6, found '%.40s'", v);
        }
    }
    return copy_field(rd, v, col, field, dst, 32, true);
}

/* The launch flags the harness reads from `engine_args` (docs/validation.md, "The file"). Each
 * takes a whole number in [lo, hi], except the switches --attention-dp and --via-server and the
 * fraction --kv-fraction. --via-server and --num-prompts are the client's side of the launch: an
 * offline row's prompts were sent to a server all at once (a serving client at request rate inf),
 * so they pass its front end; a closed or Poisson run sent exactly N requests and its client
 * reported over all of them (docs/validation.md, "A finite run as the client ran it").
 * --trtllm-bench-build: the engine was built by `trtllm-bench build --dataset`, whose heuristic
 * sets its max batch size and max num tokens (plan_trtbench.c) where the row states neither.
 * --uniform-lengths R: the client drew each prompt and output length uniform in whole tokens over
 * [floor(R L), L] for the row's L, as InferenceX's bench_serving does with --random-range-ratio R
 * (sample_random_requests: np.random.randint(int(L * R), L + 1)); newer vLLM clients read that
 * flag as [L (1 - R), L (1 + R)], so the row names the law, not the client's flag.
 * --intra-node-comm: a gpt-fast row run with ENABLE_INTRA_NODE_COMM=1, whose tensor-parallel
 * all-reduces are PyTorch's intra-node kernels instead of NCCL (the bare-intranode profile).
 * --chat-endpoint: the client sent each prompt as one user message to the server's chat endpoint
 * (`vllm bench serve --backend openai-chat`), so the server prefilled the model's chat format
 * around it, tokens the client does not count (docs/cost-model.md, "Chat endpoints"). */
static const struct { const char *flag; long lo, hi; } ARG_FLAGS[] = {
    {"--num-scheduler-steps", 1, 1024}, {"--ep", 1, 1024}, {"--max-batch-size", 1, 1000000},
    {"--max-num-tokens", 1, 10000000}, {"--attention-dp", 0, 0}, {"--kv-fraction", 0, 0},
    {"--max-model-len", 1, 100000000}, {"--via-server", 0, 0}, {"--num-prompts", 1, 10000000},
    {"--trtllm-bench-build", 0, 0}, {"--uniform-lengths", 0, 0}, {"--intra-node-comm", 0, 0},
    {"--chat-endpoint", 0, 0}};

static int engine_args(plan_reader *rd, const char *v, int col, pub_row *r)
{
    r->scheduler_steps = 1;
    char buf[256];
    if (strlen(v) >= sizeof buf) return plan_reader_bad(rd, col, "engine_args", "longer than %zu characters", sizeof buf - 1);
    snprintf(buf, sizeof buf, "%s", v);
    char *save = NULL;
    for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        size_t f = 0, nf = sizeof ARG_FLAGS / sizeof ARG_FLAGS[0];
        while (f < nf && strcmp(t, ARG_FLAGS[f].flag)) f++;
        if (f == nf)
            return plan_reader_bad(rd, col, "engine_args", "unknown flag '%.40s' (read: --num-scheduler-steps N, --ep N, "
                       "--attention-dp, --max-batch-size N, --max-num-tokens N, --kv-fraction F, --max-model-len N, --via-server, "
                       "--num-prompts N, --trtllm-bench-build, --uniform-lengths R, --intra-node-comm, --chat-endpoint)", t);
        if (!strcmp(t, "--attention-dp")) { r->attention_dp = true; continue; }
        if (!strcmp(t, "--trtllm-bench-build")) { r->bench_build = true; continue; }
        if (!strcmp(t, "--via-server")) { r->via_server = true; continue; }
        if (!strcmp(t, "--intra-node-comm")) { r->intra_node_comm = true; continue; }
        if (!strcmp(t, "--chat-endpoint")) { r->chat_endpoint = true; continue; }
        char *n = strtok_r(NULL, " ", &save);
        bool frac = !strcmp(t, "--kv-fraction") || !strcmp(t, "--uniform-lengths");
        if (!n) return plan_reader_bad(rd, col, "engine_args", "%s needs a %s", t, frac ? "fraction" : "number");
        if (!strcmp(t, "--uniform-lengths")) {
            char *end;
            double x = strtod(n, &end);
            if (*end || !(x > 0 && x < 1))
                return plan_reader_bad(rd, col, "engine_args", "--uniform-lengths: expected a fraction in (0, 1), found '%.40s'", n);
            r->uniform_lengths = x;
            continue;
        }
        if (!strcmp(t, "--kv-fraction")) {
            char *end;
            double x = strtod(n, &end);
            if (*end || !(x > 0 && x <= 1)) return plan_reader_bad(rd, col, "engine_args", "--kv-fraction: expected a fraction in (0, 1], found '%.40s'", n);
            r->kv_fraction = x;
            continue;
        }
        long x;
        if (whole(rd, n, col, "engine_args", ARG_FLAGS[f].lo, ARG_FLAGS[f].hi, &x)) return -1;
        int *dst = f == 0 ? &r->scheduler_steps : f == 1 ? &r->expert_parallel : f == 2 ? &r->max_batch_size
                 : f == 6 ? &r->max_model_len : f == 8 ? &r->num_prompts : &r->max_num_tokens;
        *dst = (int)x;
    }
    return 0;
}

static int parse_row(plan_reader *rd, char **f, const int *col, pub_row *r)
{
    memset(r, 0, sizeof *r);
    r->line = rd->line;
    long x;
    if (copy_field(rd, f[C_ID], col[C_ID], "id", r->id, sizeof r->id, true) ||
        copy_field(rd, f[C_GPU], col[C_GPU], "gpu", r->gpu, sizeof r->gpu, true) ||
        copy_field(rd, f[C_MODEL], col[C_MODEL], "model", r->model, sizeof r->model, true) ||
        copy_field(rd, f[C_ENGINE], col[C_ENGINE], "engine", r->engine, sizeof r->engine, true) ||
        copy_field(rd, f[C_ENGINE_VERSION], col[C_ENGINE_VERSION], "engine_version", r->engine_version,
                   sizeof r->engine_version, false) ||
        copy_field(rd, f[C_WEIGHT], col[C_WEIGHT], "weight_dtype", r->weight_dtype, sizeof r->weight_dtype, true) ||
        copy_field(rd, f[C_KV], col[C_KV], "kv_dtype", r->kv_dtype, sizeof r->kv_dtype, true) ||
        copy_field(rd, f[C_SOURCE], col[C_SOURCE], "source", r->source, sizeof r->source, true) ||
        copy_field(rd, f[C_NOTES], col[C_NOTES], "notes", r->notes, sizeof r->notes, false) ||
        engine_args(rd, f[C_ENGINE_ARGS], col[C_ENGINE_ARGS], r))
        return -1;
    if (r->intra_node_comm && strcmp(r->engine, "gpt-fast"))
        return plan_reader_bad(rd, col[C_ENGINE_ARGS], "engine_args",
                               "--intra-node-comm is gpt-fast's ENABLE_INTRA_NODE_COMM=1; this row's engine is '%.40s'", r->engine);
    if (whole(rd, f[C_GPUS], col[C_GPUS], "gpus", 1, 100000, &x)) return -1;
    r->gpus = (int)x;
    if (*f[C_TP]) {
        if (whole(rd, f[C_TP], col[C_TP], "tp", 1, 1024, &x)) return -1;
        r->tp = (int)x;
        if (r->gpus % r->tp) return plan_reader_bad(rd, col[C_TP], "tp", "must divide gpus (the rest are data-parallel replicas)");
    }
    int mode = -1;
    for (int i = 0; PUB_MODE_NAMES[i]; i++) if (!strcmp(f[C_MODE], PUB_MODE_NAMES[i])) mode = i;
    if (mode < 0) return plan_reader_bad(rd, col[C_MODE], "mode", "expected closed, poisson, offline, batch or capacity, found '%.40s'", f[C_MODE]);
    r->mode = (pub_mode)mode;
    if (r->via_server && r->mode != PUB_MODE_OFFLINE)
        return plan_reader_bad(rd, col[C_ENGINE_ARGS], "engine_args", "--via-server goes with mode offline (prompts sent to a server at once)");
    if (r->chat_endpoint && r->mode != PUB_MODE_CLOSED && r->mode != PUB_MODE_POISSON && r->mode != PUB_MODE_OFFLINE)
        return plan_reader_bad(rd, col[C_ENGINE_ARGS], "engine_args",
                               "--chat-endpoint goes with mode closed, poisson or offline (requests sent to a server)");
    if (r->num_prompts > 0 && r->mode != PUB_MODE_CLOSED && r->mode != PUB_MODE_POISSON)
        return plan_reader_bad(rd, col[C_ENGINE_ARGS], "engine_args",
                               "--num-prompts goes with mode closed or poisson (an offline row's load is its prompt count)");
    if (r->uniform_lengths > 0 && r->mode != PUB_MODE_CLOSED && r->mode != PUB_MODE_POISSON && r->mode != PUB_MODE_OFFLINE)
        return plan_reader_bad(rd, col[C_ENGINE_ARGS], "engine_args",
                               "--uniform-lengths goes with mode closed, poisson or offline (a served run's client draws the lengths)");
    if (r->mode == PUB_MODE_CAPACITY && (!strcmp(f[C_LOAD], "-") || !*f[C_LOAD])) r->load = 0;
    else if (r->mode == PUB_MODE_CAPACITY) {
        if (positive(rd, f[C_LOAD], col[C_LOAD], "load", &r->load)) return -1;
        if (r->load > 1) return plan_reader_bad(rd, col[C_LOAD], "load", "a capacity row's load is the memory fraction the engine was given (0 to 1)");
    } else if (r->mode == PUB_MODE_POISSON) {
        if (positive(rd, f[C_LOAD], col[C_LOAD], "load", &r->load)) return -1;
    } else {
        if (whole(rd, f[C_LOAD], col[C_LOAD], "load", 1, 10000000, &x)) return -1;
        r->load = (double)x;
    }
    bool cap = r->mode == PUB_MODE_CAPACITY;
    if (tokens_field(rd, f[C_INPUT], col[C_INPUT], "input_tokens", r->input, cap, 1) ||
        tokens_field(rd, f[C_OUTPUT], col[C_OUTPUT], "output_tokens", r->output, cap, 0))
        return -1;
    const metric_def *m = metric_of(f[C_METRIC]);
    if (!m) return plan_reader_bad(rd, col[C_METRIC], "metric", "unknown metric '%.40s' (docs/validation.md lists them)", f[C_METRIC]);
    snprintf(r->metric, sizeof r->metric, "%s", m->name);
    r->cls = m->cls;
    if (cap != (m->cls == PUB_CLASS_CAPACITY))
        return plan_reader_bad(rd, col[C_METRIC], "metric", "%s", cap ? "a capacity row measures kv_tokens" : "kv_tokens belongs to mode capacity");
    if (!strcmp(m->name, "step_ms") && r->mode != PUB_MODE_BATCH)
        return plan_reader_bad(rd, col[C_METRIC], "metric", "step_ms belongs to mode batch");
    if (positive(rd, f[C_VALUE], col[C_VALUE], "value", &r->value)) return -1;
    bool unit_ok = false;
    for (int i = 0; i < 4 && UNITS[m->unit][i]; i++) unit_ok |= !strcmp(f[C_UNIT], UNITS[m->unit][i]);
    if (!unit_ok) {
        char want[96] = "";
        for (int i = 0; i < 4 && UNITS[m->unit][i]; i++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s'%s'", i ? (i + 1 < 4 && UNITS[m->unit][i + 1] ? ", " : " or ") : "",
                     UNITS[m->unit][i]);
        return plan_reader_bad(rd, col[C_UNIT], "unit", "'%.40s' does not suit %s; expected %s", f[C_UNIT], m->name, want);
    }
    snprintf(r->unit, sizeof r->unit, "%s", f[C_UNIT]);
    return 0;
}

/* Splits at tabs in place; records each field's 1-based column. Returns the field count. */
static int split(char *line, char **f, int *col, int max)
{
    int k = 0;
    char *p = line;
    for (;;) {
        if (k < max) { f[k] = p; col[k] = (int)(p - line) + 1; }
        k++;
        char *t = strchr(p, '\t');
        if (!t) break;
        *t = 0;
        p = t + 1;
    }
    return k;
}

int pub_table_read(const char *path, pub_table *t, char *err, size_t n)
{
    memset(t, 0, sizeof *t);
    FILE *fp = fopen(path, "r");
    if (!fp) { snprintf(err, n, "%s: cannot open: %s", path, strerror(errno)); return -2; }
    plan_reader rd = {path, 0, err, n};
    int map[N_COLUMNS];   /* file column of each known column */
    bool header = false;
    int cap = 0, rc = -1, file_cols = 0;
    char line[16384];
    while (fgets(line, sizeof line, fp)) {
        rd.line++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') { plan_reader_bad(&rd, 1, "line", "longer than %zu characters", sizeof line - 2); goto out; }
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        const char *s = line;
        while (*s == ' ') s++;
        if (!*s || *s == '#') continue;
        char *f[64];
        int col[64];
        int k = split(line, f, col, 64);
        if (!header) {
            if (k > 64) { plan_reader_bad(&rd, 1, "header", "more than 64 columns"); goto out; }
            for (int c = 0; c < N_COLUMNS; c++) map[c] = -1;
            for (int i = 0; i < k; i++) {
                int c = 0;
                while (c < N_COLUMNS && strcmp(f[i], COLUMNS[c])) c++;
                if (c == N_COLUMNS) { plan_reader_bad(&rd, col[i], "header", "unknown column '%.40s'", f[i]); goto out; }
                if (map[c] >= 0) { plan_reader_bad(&rd, col[i], "header", "column '%.40s' appears twice", f[i]); goto out; }
                map[c] = i;
            }
            for (int c = 0; c < N_COLUMNS; c++)
                if (map[c] < 0 && c != C_ENGINE_ARGS) { plan_reader_bad(&rd, 1, "header", "missing column '%s'", COLUMNS[c]); goto out; }
            file_cols = k;
            header = true;
            continue;
        }
        if (k != file_cols) {
            plan_reader_bad(&rd, 1, "row", "expected %d tab-separated fields, found %d", file_cols, k);
            goto out;
        }
        char *g[N_COLUMNS];
        int gc[N_COLUMNS];
        char empty[1] = "";   /* an optional column the file lacks */
        for (int c = 0; c < N_COLUMNS; c++) {
            g[c] = map[c] >= 0 ? f[map[c]] : empty;
            gc[c] = map[c] >= 0 ? col[map[c]] : 0;
        }
        if (t->n == cap) {
            cap = cap ? cap * 2 : 64;
            pub_row *nr = realloc(t->rows, sizeof *nr * (size_t)cap);
            if (!nr) { snprintf(err, n, "out of memory"); goto out; }
            t->rows = nr;
        }
        if (parse_row(&rd, g, gc, &t->rows[t->n])) goto out;
        for (int i = 0; i < t->n; i++)
            if (!strcmp(t->rows[i].id, t->rows[t->n].id)) {
                plan_reader_bad(&rd, gc[C_ID], "id", "'%.60s' is already used on line %ld", t->rows[i].id, t->rows[i].line);
                goto out;
            }
        t->n++;
    }
    if (ferror(fp)) { snprintf(err, n, "%s: read error", path); rc = -2; goto out; }
    if (!header) { snprintf(err, n, "%s: no header line (expected the columns %s, %s, ...)", path, COLUMNS[0], COLUMNS[1]); goto out; }
    rc = 0;
out:
    fclose(fp);
    if (rc) pub_table_free(t);
    return rc;
}

void pub_table_free(pub_table *t)
{
    if (!t) return;
    free(t->rows);
    t->rows = NULL;
    t->n = 0;
}

/* ---- Predicting ---- */

/* The library folder, into the caller's buffer. */
static const char *library(char *dir, size_t n)
{
    scn_library_dir(dir, n);
    return dir;
}

static bool in_library(const char *kind, const char *name)
{
    char dir[1024], p[1200];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s/%s.yaml", library(dir, sizeof dir), kind, name);
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The first "MAJOR.MINOR" in a version text ("0.5.3", "main 2024-08 (~0.5.4)"); 0 when none
 * or when the text says the version is unstated. */
static int version_of(const char *v, int *major, int *minor)
{
    if (!strncmp(v, "unstated", 8)) return 0;   /* "unstated (MLPerf Inference v4.1 ...)" names no engine version */
    for (const char *p = v; *p; p++) {
        if (!isdigit((unsigned char)*p) || (p > v && isdigit((unsigned char)p[-1]))) continue;
        char *end;
        long a = strtol(p, &end, 10);
        if (*end != '.' || !isdigit((unsigned char)end[1])) continue;
        long b = strtol(end + 1, NULL, 10);
        *major = (int)a;
        *minor = (int)b;
        return 1;
    }
    return 0;
}

/* The patch number after the first "MAJOR.MINOR" of a version text ("0.7.0 (V1)" -> 0); -1
 * when none is written ("0.7"). */
static int patch_of(const char *v)
{
    for (const char *p = v; *p; p++) {
        if (!isdigit((unsigned char)*p) || (p > v && isdigit((unsigned char)p[-1]))) continue;
        char *end;
        strtol(p, &end, 10);
        if (*end != '.' || !isdigit((unsigned char)end[1])) continue;
        strtol(end + 1, &end, 10);
        return *end == '.' && isdigit((unsigned char)end[1]) ? (int)strtol(end + 1, NULL, 10) : -1;
    }
    return -1;
}

const char *pub_engine_profile(const char *engine, const char *version, char *out, size_t n)
{
    int major, minor;
    if (!strcmp(engine, "gpt-fast")) snprintf(out, n, "bare");
    else if (!strcmp(engine, "vllm") && version_of(version, &major, &minor) && major == 0 &&
             (minor < 3 || (minor == 3 && patch_of(version) == 0)))
        snprintf(out, n, "vllm-0.2");   /* total - free profiling, to 0.3.0 (vllm-0.2.yaml) */
    else if (!strcmp(engine, "vllm") && version_of(version, &major, &minor) && major == 0 && minor < 6)
        snprintf(out, n, "vllm-v0");
    else if (!strcmp(engine, "vllm") && version_of(version, &major, &minor) && major == 0 &&
             (minor == 6 || (minor == 7 && patch_of(version) == 0)))
        /* MLA cached expanded until 0.7.1 (vllm-0.7.yaml); V0, the default engine, also handed
         * outputs over one step late, and a multi-step run's at its end until 0.6.3
         * (vllm-0.6.yaml, vllm-0.6.3.yaml) */
        snprintf(out, n, strstr(version, "V1") ? "vllm-0.7" : minor == 6 && patch_of(version) < 3 ? "vllm-0.6" : "vllm-0.6.3");
    else if (!strcmp(engine, "vllm") && version_of(version, &major, &minor) && major == 0 && minor == 7)
        snprintf(out, n, "vllm-0.7.1"); /* MLA's absorbed products materialised to 0.7.3 (vllm-0.7.1.yaml) */
    else if (!strcmp(engine, "sglang") && version_of(version, &major, &minor) && major == 0 && minor < 4)
        snprintf(out, n, "sglang-v0.3");
    else if (!strcmp(engine, "sglang") && version_of(version, &major, &minor) && major == 0 && minor == 5 &&
             patch_of(version) >= 4 && patch_of(version) <= 6)
        snprintf(out, n, "sglang-0.5.4"); /* mem_fraction_static from a reserve (sglang-0.5.4.yaml) */
    else if (!strcmp(engine, "trtllm") && version_of(version, &major, &minor) && major == 0)
        snprintf(out, n, minor <= 6 ? "trtllm-v0.6" : "trtllm-v0");
    else snprintf(out, n, "%s", engine);
    return out;
}

/* The library's engine profile for a row (pub_engine_profile; buf holds 32 bytes). */
static const char *engine_of(const pub_row *r, char *buf)
{
    if (r->intra_node_comm) return snprintf(buf, 32, "bare-intranode"), buf;
    return pub_engine_profile(r->engine, r->engine_version, buf, 32);
}

static void skip(pub_row *r, pub_status st, const char *why)
{
    r->status = st;
    snprintf(r->why, sizeof r->why, "%.600s", why);
}

/* "fp8_e4m3" and friends name the fp8 KV cache; "auto" is the model's own dtype. */
/* A published weight format: the library's names, plus "int4-awq" (AWQ) and "int4-gN"
 * (4-bit groups of N, gpt-fast style). */
static int weight_format(const char *name, scn_wformat *f)
{
    if (!strcmp(name, "int4-awq")) return scn_wformat_parse("awq", f);
    int g;
    char tail;
    if (sscanf(name, "int4-g%d%c", &g, &tail) == 1 && g > 0) {
        if (scn_wformat_parse("int4", f)) return -1;
        f->group_size = g;
        return 0;
    }
    return scn_wformat_parse(name, f);
}

static int dtype_of(const char *name, scn_dtype *d)
{
    if (!strncmp(name, "fp8", 3)) { *d = SCN_DTYPE_FP8; return 0; }
    return scn_dtype_parse(name, d);
}

/* Requests simulated for a served load: enough for a steady window, bounded in time. */
static long requests_for(const pub_row *r)
{
    /* A finite run the client ran with a stated request count: that many, all measured. */
    if (r->num_prompts > 0) return r->num_prompts;
    double x = r->mode == PUB_MODE_CLOSED ? 10 * r->load : r->mode == PUB_MODE_POISSON ? 120 * r->load : r->load;
    if (r->mode == PUB_MODE_OFFLINE) return (long)x;
    return x < 200 ? 200 : x > 4000 ? 4000 : (long)x;
}

/* The scenario for a row, as YAML. The library supplies the model, hardware and (when one is
 * bundled) the engine profile; everything else is the benchmark's setting. */
/* Where a dataset's lengths come from: a one-line `prompt_tokens:` and `output_tokens:` in
 * DIR/NAME.yaml. 0 with the values (the text after the colon) when found; 1 when no file. */
static int dataset_lengths(const char *dir, const char *name, char *prompt, char *output, size_t cap, char *used,
                           size_t nused)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s.yaml", dir, name);
    FILE *f = fopen(path, "r");
    if (!f) return 1;
    snprintf(used, nused, "%s", path);
    prompt[0] = output[0] = 0;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        char *dst = !strncmp(line, "prompt_tokens:", 14) ? prompt : !strncmp(line, "output_tokens:", 14) ? output : NULL;
        if (!dst) continue;
        const char *v = line + 14;
        while (*v == ' ') v++;
        snprintf(dst, cap, "%.500s", v);
    }
    fclose(f);
    return 0;
}

/* A dataset's length value (a whole number, or a flow mapping with a `mean:`) with its mean
 * replaced by the row's: a fixed length becomes the rounded mean; a law keeps its kind and bounds
 * and takes the new mean (its spread then follows from the law, e.g. the exponential's rate is
 * solved again). 0 when written; 1 when the value has no mean to replace (uniform, empirical). */
static int with_mean(const char *v, double mean, char *dst, size_t cap)
{
    if (isdigit((unsigned char)v[0])) {
        snprintf(dst, cap, "%ld", lround(mean));
        return 0;
    }
    const char *m = strstr(v, "mean:");
    if (!m) return 1;
    const char *rest = m + 5;
    while (*rest == ' ') rest++;
    while (*rest && *rest != ',' && *rest != '}') rest++;
    snprintf(dst, cap, "%.*smean: %.17g%s", (int)(m - v), v, mean, rest);
    return 0;
}

/* The prompt and output lengths of a row as scenario values: its whole numbers, or its
 * dataset's distributions. 1 with the reason when a dataset has no lengths to give. */
static int row_lengths(const pub_row *r, const char *datasets, char *prompt, char *output, size_t cap, char *why,
                       size_t nwhy)
{
    const char *names[2] = {r->input, r->output};
    char *dst[2] = {prompt, output};
    for (int i = 0; i < 2; i++) {
        if (isdigit((unsigned char)names[i][0])) {
            /* A prefill-only measurement (output 0) is served as a request for one token. */
            long len = atol(names[i]);
            long lo = (long)(r->uniform_lengths * (double)len);   /* Python's int(): toward zero */
            if (r->uniform_lengths > 0 && len > 1)
                snprintf(dst[i], cap, "{dist: uniform, min: %ld, max: %ld}", lo > 1 ? lo : 1, len);
            else snprintf(dst[i], cap, "%s", i == 1 && !strcmp(names[i], "0") ? "1" : names[i]);
            continue;
        }
        char p[512], o[512], used[1300];
        char lib[1100], dir[1024], name[32];
        snprintf(name, sizeof name, "%s", names[i]);
        char *colon = strchr(name, ':');
        if (colon) *colon = 0;
        snprintf(lib, sizeof lib, "%s/datasets", library(dir, sizeof dir));
        if ((!datasets || dataset_lengths(datasets, name, p, o, sizeof p, used, sizeof used)) &&
            dataset_lengths(lib, name, p, o, sizeof p, used, sizeof used)) {
            snprintf(why, nwhy, "no bundled length distribution for dataset '%s'", name);
            return 1;
        }
        const char *v = i ? o : p;
        if (!*v) {
            snprintf(why, nwhy, "%.300s has no %s", used, i ? "output_tokens" : "prompt_tokens");
            return 1;
        }
        if (colon ? with_mean(v, strtod(colon + 1, NULL), dst[i], cap) : (snprintf(dst[i], cap, "%s", v), 0)) {
            snprintf(why, nwhy, "%.300s: its %s has no mean to set to the row's %s", used,
                     i ? "output_tokens" : "prompt_tokens", colon + 1);
            return 1;
        }
    }
    return 0;
}

static void scenario_text(const pub_row *r, const char *prompt, const char *output, char *buf, size_t n)
{
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "name: published-%s\n", r->id);
    k += (size_t)snprintf(buf + k, n - k, "model: %s\n", r->model);
    k += (size_t)snprintf(buf + k, n - k, "hardware: %s\n", r->gpu);
    char eng[32];
    if (in_library("engines", engine_of(r, eng))) k += (size_t)snprintf(buf + k, n - k, "engine: %s\n", eng);
    /* Attention data parallelism runs attention on whole sequences per GPU of the tp group
     * (attention TP 1, tp DP ranks), the experts over the group (docs/cost-model.md, "Expert
     * parallelism and attention data parallelism"). */
    if (r->attention_dp)
        k += (size_t)snprintf(buf + k, n - k, "deployment: {tensor_parallel: 1, attention_data_parallel: %d, replicas: %d",
                              r->tp, r->gpus / r->tp);
    else
        k += (size_t)snprintf(buf + k, n - k, "deployment: {tensor_parallel: %d, replicas: %d", r->tp, r->gpus / r->tp);
    if (r->expert_parallel > 1) k += (size_t)snprintf(buf + k, n - k, ", expert_parallel: %d", r->expert_parallel);
    if (r->max_batch_size > 0) k += (size_t)snprintf(buf + k, n - k, ", max_num_seqs: %d", r->max_batch_size);
    if (r->max_num_tokens > 0) k += (size_t)snprintf(buf + k, n - k, ", max_num_batched_tokens: %d", r->max_num_tokens);
    if (r->max_model_len > 0) k += (size_t)snprintf(buf + k, n - k, ", max_model_len: %d", r->max_model_len);
    if (r->mode == PUB_MODE_CAPACITY && r->load > 0)
        k += (size_t)snprintf(buf + k, n - k, ", gpu_memory_utilization: %.17g", r->load);
    else if (r->kv_fraction > 0)
        k += (size_t)snprintf(buf + k, n - k, ", gpu_memory_utilization: %.17g", r->kv_fraction);
    if (r->scheduler_steps > 1) k += (size_t)snprintf(buf + k, n - k, ", scheduler_steps: %d", r->scheduler_steps);
    k += (size_t)snprintf(buf + k, n - k, "}\n");
    k += (size_t)snprintf(buf + k, n - k, "workload:\n  requests: %ld\n", requests_for(r));
    switch (r->mode) {
    /* Without a stated count the run stands for the engine's steady state: the middle 80 % of
     * enough requests. With one (--num-prompts) it is the client's run itself: its clients report
     * the mean and percentiles over every request, ramp-up and drain included, and throughput
     * over the whole run (docs/validation.md, "A finite run as the client ran it").
     * A closed loop's steady window is cut by time: its clients can run in synchronised rounds
     * (equal lengths, a full batch), and a window cut by request number then counts its first
     * and last round whole for part of their requests (docs/simulator.md, "Measurement window by
     * time"); Poisson sends are not synchronised, and keep the window by request number. */
    case PUB_MODE_CLOSED:
        k += (size_t)snprintf(buf + k, n - k, "  arrival: {process: closed, concurrency: %ld}\n%s", (long)r->load,
                              r->num_prompts > 0 ? "" : "  measure: {by: time, skip_first: 10%, skip_last: 10%}\n");
        break;
    case PUB_MODE_POISSON:
        k += (size_t)snprintf(buf + k, n - k, "  arrival: {process: poisson, rate: %.17g/s}\n%s", r->load,
                              r->num_prompts > 0 ? "" : "  measure: {skip_first: 10%, skip_last: 10%}\n");
        break;
    default:
        /* Prompts sent to a server all at once by a serving client (request rate inf, the row's
         * --via-server) pass its front end one by one; in-process runs do not (docs/cost-model.md,
         * "Front end"). */
        k += (size_t)snprintf(buf + k, n - k, "  arrival: {process: offline%s}\n", r->via_server ? ", via: server" : "");
        break;
    }
    /* Every row's client asks for its output length as max_tokens (vllm bench serve, SGLang's
     * bench_serving, genai-perf, trtllm-bench, MLPerf's harnesses), so a request whose prompt +
     * max_tokens exceeds max_model_len is refused, not cut (docs/simulator.md, "Workload"). */
    k += (size_t)snprintf(buf + k, n - k, "  prompt_tokens: %s\n  output_tokens: %s\n  max_tokens: output\n", prompt,
                          output);
    /* A chat endpoint's format: the part before the message's text is the same for every
     * request, a shared prefix the engine caches when it caches prefixes by default; the prompt
     * law was shifted by the part after it (chat_prompt). */
    if (r->chat_prefix > 0)
        k += (size_t)snprintf(buf + k, n - k, "  shared_prefix: {groups: 1, tokens: %d, share: 1}\n", r->chat_prefix);
    /* Multi-step runs on the prefill-first scheduler: vLLM 0.6.0 refused chunked prefill with
     * --num-scheduler-steps > 1 (vLLM issue #8274). */
    /* trtllm-bench's runtime chunks context (ExecutorSettingsConfig.chunking, on by default:
     * context_chunking_policy FIRST_COME_FIRST_SERVED). */
    snprintf(buf + k, n - k, "options: {kv_layout: paged, block_size: %d%s%s%s%s}\n", PUB_BLOCK_TOKENS,
             r->chat_prefix > 0 && r->chat_cached ? ", prefix_cache: on" : "",
             strcmp(r->kv_dtype, "auto") ? ", kv_dtype: " : "", strcmp(r->kv_dtype, "auto") ? r->kv_dtype : "",
             r->scheduler_steps > 1 ? ", scheduler: continuous" : r->bench_build ? ", scheduler: chunked" : "");
}

/* Loads YAML text through the scenario loader (a private temporary file). 1: the loader
 * refused it (message in why); -1: internal. */
static int load_text(const char *text, scn_scenario *s, char *why, size_t nwhy, char *err, size_t n)
{
    const char *tmp = getenv("TMPDIR");
    char dir[512], file[600];
    snprintf(dir, sizeof dir, "%s/kvplan-pub-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) { snprintf(err, n, "%s: cannot create a temporary directory: %s", dir, strerror(errno)); return -1; }
    snprintf(file, sizeof file, "%s/row.yaml", dir);
    FILE *f = fopen(file, "w");
    int rc = -1;
    if (!f || fputs(text, f) < 0) { snprintf(err, n, "%s: cannot write: %s", file, strerror(errno)); if (f) fclose(f); goto out; }
    if (fclose(f)) { snprintf(err, n, "%s: cannot write: %s", file, strerror(errno)); goto out; }
    scn_error e;
    scn_status st = scn_scenario_load(file, NULL, 0, s, &e);
    if (st == SCN_E_INTERNAL) { snprintf(err, n, "loading a row's scenario: %s", e.msg); goto out; }
    rc = 0;
    if (st != SCN_OK) { snprintf(why, nwhy, "%.100s%s%.300s", e.path, e.path[0] ? ": " : "", e.msg); rc = 1; }
out:
    unlink(file);
    rmdir(dir);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* A static batch of B equal requests from the cost model: one prefill of the B prompts, then
 * O - 1 decode steps over B sequences at growing context (docs/validation.md). Values in s or
 * tokens/s, before unit conversion. */
static int predict_batch(const scn_scenario *s, const pub_row *r, double *out, char *why, size_t nwhy)
{
    int B = (int)r->load;
    long I = atol(r->input), O = atol(r->output);
    sim_choice c = sim_choice_first(s);
    kv_cache_cfg cfg = kv_cache_cfg_make(s, c.kv_dtype, 0, 0);
    long held = I + (O > 0 ? O : 1);
    kv_capacity cap = kv_capacity_compute(s, &cfg, c.block_size, (double)held);
    if (cap.capacity_tokens < (long)B * held) {
        snprintf(why, nwhy, "the model says %d sequences of %ld tokens do not fit (%ld KV tokens per replica)", B, held,
                 cap.capacity_tokens);
        return 1;
    }
    kv_seq_work *w = malloc(sizeof *w * (size_t)B);
    if (!w) return -1;
    if (O == 0) {
        /* Output 0: a step measurement at this batch: prefill of the B prompts (TTFT, E2E, total
         * and request throughput), or one decode step over B sequences holding I tokens each
         * (TPOT, ITL, step time, output throughput). */
        for (int i = 0; i < B; i++) w[i] = (kv_seq_work){I, 0};
        double prefill = kv_step_time(s, &cfg, c.attention, w, B).seconds;
        for (int i = 0; i < B; i++) w[i] = (kv_seq_work){1, I};
        double step = kv_step_time(s, &cfg, c.attention, w, B).seconds;
        free(w);
        const char *m = r->metric;
        *out = !strncmp(m, "ttft", 4) || !strcmp(m, "e2e_mean_ms") ? prefill
             : !strcmp(m, "total_tok_s") ? B * I / prefill : !strcmp(m, "req_s") ? B / prefill
             : !strcmp(m, "output_tok_s") ? B / step : step;
        if (r->cls == PUB_CLASS_THROUGHPUT) *out *= r->gpus / r->tp;
        return 0;
    }
    double *steps = O > 1 ? malloc(sizeof *steps * (size_t)(O - 1)) : NULL;
    if (O > 1 && !steps) { free(w); return -1; }
    for (int i = 0; i < B; i++) w[i] = (kv_seq_work){I, 0};
    double prefill = kv_step_time(s, &cfg, c.attention, w, B).seconds, decode = 0;
    for (long k = 1; k < O; k++) {
        for (int i = 0; i < B; i++) w[i] = (kv_seq_work){1, I + k - 1};
        steps[k - 1] = kv_step_time(s, &cfg, c.attention, w, B).seconds;
        decode += steps[k - 1];
    }
    double tpot = O > 1 ? decode / (double)(O - 1) : NAN, p50 = NAN;
    if (O > 1) { qsort(steps, (size_t)(O - 1), sizeof *steps, cmp_double); p50 = (O - 1) % 2 ? steps[(O - 1) / 2] : (steps[(O - 1) / 2 - 1] + steps[(O - 1) / 2]) / 2; }
    double e2e = prefill + decode;
    free(w);
    free(steps);
    const char *m = r->metric;
    *out = !strncmp(m, "ttft", 4) ? prefill : !strcmp(m, "tpot_mean_ms") || !strcmp(m, "itl_mean_ms") || !strcmp(m, "step_ms") ? tpot
         : !strcmp(m, "tpot_p50_ms") ? p50 : !strcmp(m, "e2e_mean_ms") ? e2e
         : !strcmp(m, "output_tok_s") ? B * O / e2e : !strcmp(m, "total_tok_s") ? B * (I + O) / e2e : B / e2e;
    /* A batch runs on one replica; data-parallel replicas multiply throughput. */
    if (r->cls == PUB_CLASS_THROUGHPUT) *out *= r->gpus / r->tp;
    return 0;
}

static double from_metrics(const sim_metrics *m, const char *name)
{
    if (!strcmp(name, "ttft_mean_ms")) return m->q[SIM_Q_TTFT].mean;
    if (!strcmp(name, "ttft_p50_ms")) return m->q[SIM_Q_TTFT].p50;
    if (!strcmp(name, "ttft_p99_ms")) return m->q[SIM_Q_TTFT].p99;
    if (!strcmp(name, "tpot_mean_ms")) return m->q[SIM_Q_TPOT].mean;
    if (!strcmp(name, "tpot_p50_ms")) return m->q[SIM_Q_TPOT].p50;
    if (!strcmp(name, "itl_mean_ms")) return m->q[SIM_Q_ITL].mean;
    if (!strcmp(name, "e2e_mean_ms")) return m->q[SIM_Q_E2E].mean;
    if (!strcmp(name, "output_tok_s")) return m->output_tok_per_s;
    if (!strcmp(name, "total_tok_s")) return m->input_tok_per_s + m->output_tok_per_s;
    if (!strcmp(name, "req_s")) return m->req_per_s;
    return NAN;
}

/* The batch limits of an engine built by `trtllm-bench build --dataset` (plan_trtbench.c) into
 * the row where it states none: an FP8 build stores weights and KV in one byte per element, any
 * other in two. 1: the row's lengths are a dataset, not whole numbers; -1: the heuristic refuses. */
static int bench_limits(pub_row *r, const scn_scenario *s, const scn_wformat *wf)
{
    if (!isdigit((unsigned char)r->input[0]) || !isdigit((unsigned char)r->output[0])) return 1;
    double isl = atof(r->input), osl = atof(r->output);
    if (osl < 1) osl = 1;
    plan_trtbench_limits l;
    if (plan_trtbench_limits_compute(s, isl, osl, wf->dtype == SCN_DTYPE_FP8 ? 1 : 2, !strcmp(r->kv_dtype, "fp8") ? 1 : 2, &l))
        return -1;
    if (r->max_batch_size == 0) r->max_batch_size = l.max_batch_size;
    if (r->max_num_tokens == 0) r->max_num_tokens = l.max_num_tokens;
    return 0;
}

/* A prompt length value moved up by `add` tokens: a whole number, or a flow mapping whose law is
 * the same shape shifted (fixed, uniform, normal, and the truncated exponential, whose rate the
 * simulator solves from the mean's distance to min: mean, min, max and value all move, and an
 * unstated min, 1 by default, is written). Lognormal and empirical laws do not shift within
 * their family: 1. */
static int chat_prompt(const char *v, int add, char *dst, size_t cap)
{
    if (isdigit((unsigned char)v[0])) { snprintf(dst, cap, "%ld", atol(v) + add); return 0; }
    const char *open = strchr(v, '{'), *close = strrchr(v, '}');
    if (!open || !close || close < open) return 1;
    char body[512];
    snprintf(body, sizeof body, "%.*s", (int)(close - open - 1), open + 1);
    size_t k = (size_t)snprintf(dst, cap, "{");
    bool has_min = false, shiftable = false, first = true;
    char *save = NULL;
    for (char *kv = strtok_r(body, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        while (*kv == ' ') kv++;
        char *colon = strchr(kv, ':');
        if (!colon) return 1;
        char key[32];
        snprintf(key, sizeof key, "%.*s", (int)(colon - kv), kv);
        const char *val = colon + 1;
        while (*val == ' ') val++;
        if (!strcmp(key, "dist"))
            shiftable = !strncmp(val, "fixed", 5) || !strncmp(val, "uniform", 7) || !strncmp(val, "normal", 6) ||
                        !strncmp(val, "exponential", 11);
        bool moves = !strcmp(key, "mean") || !strcmp(key, "min") || !strcmp(key, "max") || !strcmp(key, "value");
        if (!strcmp(key, "min")) has_min = true;
        if (moves) k += (size_t)snprintf(dst + k, cap > k ? cap - k : 0, "%s%s: %.17g", first ? "" : ", ", key, strtod(val, NULL) + add);
        else k += (size_t)snprintf(dst + k, cap > k ? cap - k : 0, "%s%s: %s", first ? "" : ", ", key, val);
        first = false;
    }
    if (!shiftable) return 1;
    /* A law without a minimum starts at one token; a downward shift keeps it there. */
    if (!has_min) k += (size_t)snprintf(dst + k, cap > k ? cap - k : 0, ", min: %d", 1 + (add > 0 ? add : 0));
    snprintf(dst + k, cap > k ? cap - k : 0, "}");
    return k >= cap;
}

/* The row's scenario loaded into `s` (the caller's, on the heap) and predicted. */
static int predict_scenario(pub_row *r, scn_scenario *s, const char *prompt, const char *output, const scn_wformat *wf,
                            bool kv_unstated, char *why, size_t nwhy, char *err, size_t n)
{
    char text[2048];
    scenario_text(r, prompt, output, text, sizeof text);
    int lr = load_text(text, s, why, nwhy, err, n);
    if (lr < 0) return -1;
    if (!lr && r->bench_build) {
        int br = bench_limits(r, s, wf);
        if (br) { skip(r, PUB_SKIPPED, br > 0 ? "--trtllm-bench-build needs whole input and output token counts (the heuristic takes the dataset's means)"
                                             : "trtllm-bench's build heuristic refuses the row (the weights exceed the GPUs' memory, or no request fits)");
                  return 0; }
        scenario_text(r, prompt, output, text, sizeof text);
        lr = load_text(text, s, why, nwhy, err, n);
        if (lr < 0) return -1;
    }
    /* A chat endpoint: the model's chat format around each prompt, once the model is known. */
    if (!lr && r->chat_endpoint && (s->model.chat_prefix > 0 || s->model.chat_suffix > 0)) {
        char shifted[600];
        /* The prefix is the shared prefix; the prompt law moves by the suffix, less a BOS the
         * client's count of the prompt already holds (it is the prefix's first token). */
        if (chat_prompt(prompt, s->model.chat_suffix - s->model.chat_bos, shifted, sizeof shifted)) {
            skip(r, PUB_SKIPPED, "--chat-endpoint: the prompt law does not shift by the chat format's tokens (a lognormal or empirical law)");
            return 0;
        }
        r->chat_prefix = s->model.chat_prefix;
        r->chat_suffix = s->model.chat_suffix;
        r->chat_bos = s->model.chat_bos;
        r->chat_cached = s->engine.prefix_caching;
        scenario_text(r, shifted, output, text, sizeof text);
        lr = load_text(text, s, why, nwhy, err, n);
        if (lr < 0) return -1;
    }
    if (lr) {
        char w2[640];
        snprintf(w2, sizeof w2, "the library cannot express it: %.560s", why);
        skip(r, PUB_SKIPPED, w2);
        return 0;
    }
    /* The checkpoint as published: a quantised format replaces the model's; a 16-bit one keeps
     * the model's own (bf16 and fp16 cost the same). */
    /* "fp8" on a model whose own checkpoint is fp8 is that checkpoint, in its own scaling layout
     * (DeepSeek-V3/R1's 128 x 128 blocks): the model's format stays. */
    bool own_fp8 = wf->dtype == SCN_DTYPE_FP8 && wf->quant == SCN_WQ_PER_TENSOR && s->model.weight_dtype == SCN_DTYPE_FP8;
    if (!own_fp8 && (wf->quant != SCN_WQ_NONE || scn_dtype_bytes(wf->dtype) != 2)) kv_model_set_wformat(&s->model, wf);
    double v = NAN;
    if (r->mode == PUB_MODE_CAPACITY) {
        sim_choice c = sim_choice_first(s);
        kv_cache_cfg cfg = kv_cache_cfg_make(s, c.kv_dtype, 0, 0);
        long tok = kv_capacity_compute(s, &cfg, c.block_size, 0).capacity_blocks * c.block_size;
        if (tok <= 0) { skip(r, PUB_FAILED, "the model says the weights leave no room for a KV cache"); return 0; }
        v = (double)tok;
    } else if (r->mode == PUB_MODE_BATCH) {
        int br = predict_batch(s, r, &v, why, nwhy);
        if (br < 0) { snprintf(err, n, "out of memory"); return -1; }
        if (br) { skip(r, PUB_FAILED, why); return 0; }
    } else {
        sim_choice c = sim_choice_first(s);
        sim_metrics m;
        char msg[512];
        int rc = sim_run_predicted(s, &c, &m, msg, sizeof msg);
        if (rc == SIM_E_INTERNAL) { snprintf(err, n, "row %s: %s", r->id, msg); return -1; }
        if (rc != SIM_OK) {
            snprintf(why, nwhy, "the simulation failed: %.200s", msg);
            skip(r, PUB_FAILED, why);
            return 0;
        }
        v = from_metrics(&m, r->metric);
        /* The client counts the prompts it sent, not the chat format the server added. */
        if (!strcmp(r->metric, "total_tok_s")) v -= (r->chat_prefix + r->chat_suffix - r->chat_bos) * m.req_per_s;
    }
    /* Units: seconds to ms; per-GPU rates divide by every GPU of the deployment. */
    if (!strcmp(r->unit, "ms")) v *= 1000;
    if (strstr(r->unit, "/gpu")) v /= r->gpus;
    if (strstr(r->unit, "per 8-GPU node")) v /= r->gpus / 8.0;
    if (!isfinite(v)) { skip(r, PUB_FAILED, "the run produced no value for this metric"); return 0; }
    r->predicted = v;
    r->error = (v - r->value) / r->value;
    size_t k = 0;
    char eng[32];
    if (in_library("engines", engine_of(r, eng))) k = (size_t)snprintf(r->why, sizeof r->why, "engine profile: %s", s->engine.name);
    else k = (size_t)snprintf(r->why, sizeof r->why, "engine '%s' is not in the library: the default profile (%s) was used",
                              r->engine, s->engine.name[0] ? s->engine.name : "none");
    if (r->scheduler_steps > 1 && k < sizeof r->why)
        k += (size_t)snprintf(r->why + k, sizeof r->why - k, "; %d scheduler steps, continuous scheduler", r->scheduler_steps);
    if ((r->attention_dp || r->expert_parallel > 1) && k < sizeof r->why)
        k += (size_t)snprintf(r->why + k, sizeof r->why - k, "; attention DP %d, EP %d", r->attention_dp ? r->tp : 1,
                              r->expert_parallel > 1 ? r->expert_parallel : 1);
    if (r->bench_build && k < sizeof r->why)
        k += (size_t)snprintf(r->why + k, sizeof r->why - k, "; trtllm-bench build: %d sequences, %d tokens, chunked",
                              r->max_batch_size, r->max_num_tokens);
    /* What --chat-endpoint added, or that it added nothing: a model without a chat_template
     * gets no chat format (not derived), which the row should say rather than look priced. */
    if (r->chat_endpoint && k < sizeof r->why) {
        /* A prefix cache keeps whole blocks only (docs/cost-model.md, "Chat endpoints"), so the
         * note says how much of the format a hit saves, and that a format shorter than a block
         * saves nothing. */
        int kept = r->chat_prefix / PUB_BLOCK_TOKENS * PUB_BLOCK_TOKENS;
        char bos[64] = "";
        if (r->chat_bos > 0) snprintf(bos, sizeof bos, " (%d a BOS the client's count holds)", r->chat_bos);
        if (r->chat_prefix + r->chat_suffix > 0 && r->chat_cached && kept > 0)
            k += (size_t)snprintf(r->why + k, sizeof r->why - k,
                                  "; chat format: %d + %d tokens a prompt%s, %d of the prefix's %d cached (whole %d-token blocks)",
                                  r->chat_prefix, r->chat_suffix, bos, kept, r->chat_prefix, PUB_BLOCK_TOKENS);
        else if (r->chat_prefix + r->chat_suffix > 0)
            k += (size_t)snprintf(r->why + k, sizeof r->why - k, "; chat format: %d + %d tokens a prompt%s, the prefix computed each time%s",
                                  r->chat_prefix, r->chat_suffix, bos,
                                  r->chat_cached ? " (shorter than one cached block)" : "");
        else
            k += (size_t)snprintf(r->why + k, sizeof r->why - k, "; --chat-endpoint: the model has no chat_template, nothing added");
    }
    if (kv_unstated && k < sizeof r->why)
        snprintf(r->why + k, sizeof r->why - k, "; KV dtype unstated: the model's own (the engines' default)");
    return 0;
}

int pub_row_predict(pub_row *r, const char *datasets, char *err, size_t n)
{
    r->status = PUB_PREDICTED;
    r->predicted = r->error = NAN;
    r->why[0] = 0;
    char why[600], dir[1024];
    if (!in_library("models", r->model)) {
        snprintf(why, sizeof why, "model '%s' is not in the library (%.400s/models)", r->model, library(dir, sizeof dir));
        skip(r, PUB_SKIPPED, why);
        return 0;
    }
    if (!in_library("hardware", r->gpu)) {
        snprintf(why, sizeof why, "hardware '%s' is not in the library (%.400s/hardware)", r->gpu, library(dir, sizeof dir));
        skip(r, PUB_SKIPPED, why);
        return 0;
    }
    if (r->tp == 0) {
        skip(r, PUB_SKIPPED, "the source does not state the tensor-parallel size");
        return 0;
    }
    bool tokens = isdigit((unsigned char)r->input[0]) && isdigit((unsigned char)r->output[0]);
    char prompt[512] = "1", output[512] = "1";
    if (r->mode != PUB_MODE_CAPACITY && row_lengths(r, datasets, prompt, output, sizeof prompt, why, sizeof why)) {
        skip(r, PUB_SKIPPED, why);
        return 0;
    }
    if (r->mode == PUB_MODE_BATCH && (r->attention_dp || r->expert_parallel > 1)) {
        skip(r, PUB_SKIPPED, "a static batch under attention DP or EP is not modelled by the harness (the cost model's batch path is one replica's TP step)");
        return 0;
    }
    if (r->mode == PUB_MODE_BATCH && !tokens) {
        skip(r, PUB_SKIPPED, "a static batch needs whole token counts, not a dataset");
        return 0;
    }
    scn_wformat wf;
    scn_dtype kd;
    if (weight_format(r->weight_dtype, &wf)) {
        snprintf(why, sizeof why, "weight format '%s' is %s", r->weight_dtype,
                 strcmp(r->weight_dtype, "unstated") ? "not one the library can cost" : "not stated by the source");
        skip(r, PUB_SKIPPED, why);
        return 0;
    }
    /* An unstated KV dtype is the engines' documented default: the model's own. */
    bool kv_unstated = !strcmp(r->kv_dtype, "unstated");
    if (kv_unstated) snprintf(r->kv_dtype, sizeof r->kv_dtype, "auto");
    if (strcmp(r->kv_dtype, "auto") && dtype_of(r->kv_dtype, &kd)) {
        snprintf(why, sizeof why, "KV cache dtype '%s' is not one the library can cost", r->kv_dtype);
        skip(r, PUB_SKIPPED, why);
        return 0;
    }
    if (strncmp(r->kv_dtype, "fp8", 3) == 0) snprintf(r->kv_dtype, sizeof r->kv_dtype, "fp8");
    if (r->mode == PUB_MODE_OFFLINE && r->load > 1000000) {
        skip(r, PUB_SKIPPED, "more than a million offline prompts");
        return 0;
    }
    scn_scenario *s = malloc(sizeof *s);
    if (!s) { snprintf(err, n, "out of memory"); return -1; }
    int rc = predict_scenario(r, s, prompt, output, &wf, kv_unstated, why, sizeof why, err, n);
    free(s);
    return rc;
}

void pub_table_summarise(const pub_table *t, pub_summary out[PUB_CLASS_COUNT + 1])
{
    double *abs_err = malloc(sizeof *abs_err * (size_t)(t->n > 0 ? t->n : 1));
    for (int c = 0; c <= PUB_CLASS_COUNT; c++) {
        pub_summary *s = &out[c];
        memset(s, 0, sizeof *s);
        int k = 0;
        for (int i = 0; i < t->n; i++) {
            const pub_row *r = &t->rows[i];
            if (c < PUB_CLASS_COUNT && r->cls != (pub_class)c) continue;
            if (r->status == PUB_SKIPPED) { s->skipped++; continue; }
            s->rows++;
            if (r->status == PUB_FAILED) { s->failed++; continue; }
            s->predicted++;
            double a = fabs(r->error);
            if (a <= 0.10) s->within10++;
            if (a <= 0.20) s->within20++;
            if (abs_err) abs_err[k++] = a;
        }
        s->median_abs = NAN;
        if (k > 0) {
            qsort(abs_err, (size_t)k, sizeof *abs_err, cmp_double);
            s->median_abs = k % 2 ? abs_err[k / 2] : (abs_err[k / 2 - 1] + abs_err[k / 2]) / 2;
        }
    }
    free(abs_err);
}
