/* out.c: renders a report (out.h) as an aligned table, JSON (jansson, doubles exact) or CSV. */
#include "out.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char *s; double v; int is_str; } cell;

typedef struct {
    char *name, *title;
    int is_table, ncols;
    out_col *cols;          /* table columns, or one per kv entry */
    cell *cells;            /* kv: one per entry; table: rows * ncols */
    int n, cap;             /* cells used / allocated */
} section;

struct out_doc {
    section *s;
    int n, cap;
    char **notes;
    int n_notes;
};

static char *dupstr(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

out_doc *out_doc_init(void) { return calloc(1, sizeof(out_doc)); }

void out_doc_free(out_doc *d)
{
    if (!d) return;
    for (int i = 0; i < d->n; i++) {
        section *s = &d->s[i];
        for (int j = 0; j < s->n; j++) free(s->cells[j].s);
        if (!s->is_table)
            for (int j = 0; j < s->ncols; j++) { free((char *)s->cols[j].key); free((char *)s->cols[j].label); }
        free(s->cells); free(s->cols); free(s->name); free(s->title);
    }
    for (int i = 0; i < d->n_notes; i++) free(d->notes[i]);
    free(d->notes);
    free(d->s);
    free(d);
}

int out_format_parse(const char *s, out_format *f)
{
    if (!strcmp(s, "table")) *f = OUT_TABLE;
    else if (!strcmp(s, "json")) *f = OUT_JSON;
    else if (!strcmp(s, "csv")) *f = OUT_CSV;
    else return -1;
    return 0;
}

static section *new_section(out_doc *d, const char *name, const char *title, int is_table)
{
    if (d->n == d->cap) {
        int cap = d->cap ? d->cap * 2 : 8;
        section *ns = realloc(d->s, sizeof(section) * (size_t)cap);
        if (!ns) return NULL;
        d->s = ns; d->cap = cap;
    }
    section *s = &d->s[d->n++];
    memset(s, 0, sizeof *s);
    s->name = dupstr(name);
    s->title = dupstr(title);
    s->is_table = is_table;
    return s;
}

static int push_cell(section *s, cell c)
{
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 16;
        cell *nc = realloc(s->cells, sizeof(cell) * (size_t)cap);
        if (!nc) return -1;
        s->cells = nc; s->cap = cap;
    }
    s->cells[s->n++] = c;
    return 0;
}

int out_section(out_doc *d, const char *name, const char *title)
{
    return new_section(d, name, title, 0) ? 0 : -1;
}

static int kv_add(out_doc *d, const char *key, const char *label, out_kind kind, cell c)
{
    section *s = &d->s[d->n - 1];
    out_col *nc = realloc(s->cols, sizeof(out_col) * (size_t)(s->ncols + 1));
    if (!nc) return -1;
    s->cols = nc;
    s->cols[s->ncols++] = (out_col){dupstr(key), dupstr(label), kind};
    return push_cell(s, c);
}

int out_kv_str(out_doc *d, const char *key, const char *label, const char *v)
{
    return kv_add(d, key, label, OUT_STR, (cell){dupstr(v), 0, 1});
}

int out_kv_num(out_doc *d, const char *key, const char *label, double v, out_kind kind)
{
    return kv_add(d, key, label, kind, (cell){NULL, v, 0});
}

int out_table(out_doc *d, const char *name, const char *title, int ncols, const out_col *cols)
{
    section *s = new_section(d, name, title, 1);
    if (!s) return -1;
    s->cols = malloc(sizeof(out_col) * (size_t)ncols);
    if (!s->cols) return -1;
    memcpy(s->cols, cols, sizeof(out_col) * (size_t)ncols);
    s->ncols = ncols;
    return 0;
}

int out_cell_str(out_doc *d, const char *v) { return push_cell(&d->s[d->n - 1], (cell){dupstr(v), 0, 1}); }
int out_cell_num(out_doc *d, double v) { return push_cell(&d->s[d->n - 1], (cell){NULL, v, 0}); }

int out_note(out_doc *d, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char **nn = realloc(d->notes, sizeof(char *) * (size_t)(d->n_notes + 1));
    if (!nn) return -1;
    d->notes = nn;
    d->notes[d->n_notes++] = dupstr(buf);
    return 0;
}

/* ---- human values ---- */
static void scaled(char *buf, size_t n, double v, const char *const *units, double step, int nunits)
{
    int i = 0;
    double a = fabs(v);
    while (i + 1 < nunits && a >= step) { a /= step; v /= step; i++; }
    snprintf(buf, n, "%.2f %s", v, units[i]);
}

void out_format_value(char *buf, size_t n, double v, out_kind kind)
{
    static const char *const BYTES[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    static const char *const FLOPS[] = {"", "k", "M", "G", "T", "P", "E"};
    if (isnan(v)) { snprintf(buf, n, "-"); return; }
    if (isinf(v)) { snprintf(buf, n, v > 0 ? "inf" : "-inf"); return; }
    switch (kind) {
    case OUT_BYTES: scaled(buf, n, v, BYTES, 1024.0, 6); return;
    case OUT_FLOPS: {
        char tmp[64];
        scaled(tmp, sizeof tmp, v, FLOPS, 1000.0, 7);
        snprintf(buf, n, "%sFLOP", tmp);
        return;
    }
    case OUT_SECONDS:
        if (v == 0) snprintf(buf, n, "0");
        else if (fabs(v) < 1e-3) snprintf(buf, n, "%.2f us", v * 1e6);
        else if (fabs(v) < 1) snprintf(buf, n, "%.3f ms", v * 1e3);
        else snprintf(buf, n, "%.3f s", v);
        return;
    case OUT_COUNT: {
        static const char *const COUNT[] = {"", "k", "M", "B", "T"};
        if (fabs(v) < 1000) { snprintf(buf, n, "%.0f", v); return; }
        scaled(buf, n, v, COUNT, 1000.0, 5);
        return;
    }
    case OUT_FRAC: snprintf(buf, n, "%.1f %%", v * 100); return;
    case OUT_INT: snprintf(buf, n, "%.0f", v); return;
    case OUT_RATE: snprintf(buf, n, "%.2f /s", v); return;
    default: snprintf(buf, n, "%.4g", v); return;
    }
}

/* ---- table ---- */
static void print_table_view(const out_doc *d, FILE *fp)
{
    for (int i = 0; i < d->n; i++) {
        const section *s = &d->s[i];
        if (s->title[0]) fprintf(fp, "%s%s\n", i ? "\n" : "", s->title);
        if (!s->is_table) {
            int w = 0;
            for (int j = 0; j < s->ncols; j++) { int l = (int)strlen(s->cols[j].label); if (l > w) w = l; }
            for (int j = 0; j < s->ncols; j++) {
                char v[128];
                if (s->cells[j].is_str) snprintf(v, sizeof v, "%s", s->cells[j].s);
                else out_format_value(v, sizeof v, s->cells[j].v, s->cols[j].kind);
                fprintf(fp, "  %-*s  %s\n", w, s->cols[j].label, v);
            }
            continue;
        }
        int rows = s->ncols ? s->n / s->ncols : 0;
        int *w = calloc((size_t)s->ncols, sizeof(int));
        if (!w) return;
        char num[128];
        for (int c = 0; c < s->ncols; c++) w[c] = (int)strlen(s->cols[c].label);
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < s->ncols; c++) {
                const cell *x = &s->cells[r * s->ncols + c];
                const char *v = x->is_str ? x->s : (out_format_value(num, sizeof num, x->v, s->cols[c].kind), num);
                if ((int)strlen(v) > w[c]) w[c] = (int)strlen(v);
            }
        bool header = false;
        for (int c = 0; c < s->ncols; c++) header |= s->cols[c].label[0] != 0;
        if (header) {
            fprintf(fp, " ");
            for (int c = 0; c < s->ncols; c++)
                fprintf(fp, " %*s", s->cols[c].kind == OUT_STR && c < s->ncols - 1 ? -w[c] : c == s->ncols - 1 && s->cols[c].kind == OUT_STR ? 0 : w[c],
                        s->cols[c].label);
            fprintf(fp, "\n");
        }
        for (int r = 0; r < rows; r++) {
            fprintf(fp, " ");
            for (int c = 0; c < s->ncols; c++) {
                const cell *x = &s->cells[r * s->ncols + c];
                const char *v = x->is_str ? x->s : (out_format_value(num, sizeof num, x->v, s->cols[c].kind), num);
                /* The last column is not padded: long text would only add trailing blanks. */
                if (c == s->ncols - 1 && s->cols[c].kind == OUT_STR) fprintf(fp, " %s", v);
                else fprintf(fp, " %*s", s->cols[c].kind == OUT_STR ? -w[c] : w[c], v);
            }
            fprintf(fp, "\n");
        }
        free(w);
    }
    for (int i = 0; i < d->n_notes; i++) fprintf(fp, "%s%s\n", i ? "" : "\n", d->notes[i]);
}

/* ---- JSON ---- */
static json_t *json_cell(const cell *c, out_kind kind)
{
    if (c->is_str) return json_string(c->s);
    if (isnan(c->v) || isinf(c->v)) return json_null();
    if ((kind == OUT_INT || kind == OUT_BYTES || kind == OUT_COUNT) && c->v == floor(c->v) && fabs(c->v) < 9e15)
        return json_integer((json_int_t)c->v);
    return json_real(c->v);
}

static int print_json(const out_doc *d, FILE *fp)
{
    json_t *root = json_object();
    for (int i = 0; root && i < d->n; i++) {
        const section *s = &d->s[i];
        json_t *v;
        if (!s->is_table) {
            v = json_object();
            for (int j = 0; v && j < s->ncols; j++) json_object_set_new(v, s->cols[j].key, json_cell(&s->cells[j], s->cols[j].kind));
        } else {
            v = json_array();
            int rows = s->ncols ? s->n / s->ncols : 0;
            for (int r = 0; v && r < rows; r++) {
                json_t *row = json_object();
                for (int c = 0; row && c < s->ncols; c++)
                    json_object_set_new(row, s->cols[c].key, json_cell(&s->cells[r * s->ncols + c], s->cols[c].kind));
                json_array_append_new(v, row);
            }
        }
        json_object_set_new(root, s->name, v);
    }
    if (root && d->n_notes) {
        json_t *notes = json_array();
        for (int i = 0; i < d->n_notes; i++) json_array_append_new(notes, json_string(d->notes[i]));
        json_object_set_new(root, "notes", notes);
    }
    int rc = root ? json_dumpf(root, fp, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) : -1;
    fputc('\n', fp);
    json_decref(root);
    return rc;
}

/* ---- CSV ---- */
static void csv_str(FILE *fp, const char *s)
{
    if (!strpbrk(s, ",\"\n")) { fputs(s, fp); return; }
    fputc('"', fp);
    for (; *s; s++) { if (*s == '"') fputc('"', fp); fputc(*s, fp); }
    fputc('"', fp);
}

static void print_csv(const out_doc *d, FILE *fp)
{
    for (int i = 0; i < d->n; i++) {
        const section *s = &d->s[i];
        if (!s->is_table) continue;
        for (int c = 0; c < s->ncols; c++) { if (c) fputc(',', fp); csv_str(fp, s->cols[c].key); }
        fputc('\n', fp);
        int rows = s->ncols ? s->n / s->ncols : 0;
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < s->ncols; c++) {
                const cell *x = &s->cells[r * s->ncols + c];
                if (c) fputc(',', fp);
                if (x->is_str) csv_str(fp, x->s);
                else if (!isfinite(x->v)) { /* empty field */ }
                else fprintf(fp, "%.17g", x->v);
            }
            fputc('\n', fp);
        }
        return;   /* the main table only */
    }
}

int out_doc_print(const out_doc *d, out_format f, FILE *fp)
{
    switch (f) {
    case OUT_JSON: return print_json(d, fp);
    case OUT_CSV: print_csv(d, fp); return 0;
    default: print_table_view(d, fp); return 0;
    }
}
