/* scn_tree.c: builds a position-aware node tree from libyaml's event stream.
 *
 * The event API (not the document API) is used because it reports every node's start mark,
 * which is what lets every later error say file:line:col. Anchors and aliases are honoured by
 * sharing the anchored node. */
#include "scn_tree.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* ---- arena ---- */
typedef struct chunk { struct chunk *next; size_t used, size; max_align_t data[]; } chunk;

struct scn_doc { chunk *head; };

scn_doc *scn_doc_init(void) { return calloc(1, sizeof(scn_doc)); }

void scn_doc_free(scn_doc *d)
{
    if (!d) return;
    for (chunk *c = d->head, *nx; c; c = nx) { nx = c->next; free(c); }
    free(d);
}

void *scn_doc_alloc(scn_doc *d, size_t n)
{
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    if (!d->head || d->head->size - d->head->used < n) {
        size_t sz = n > 65536 ? n : 65536;
        chunk *c = malloc(sizeof(chunk) + sz);
        if (!c) return NULL;
        c->next = d->head; c->used = 0; c->size = sz; d->head = c;
    }
    void *p = (char *)d->head->data + d->head->used;
    d->head->used += n;
    memset(p, 0, n);
    return p;
}

const char *scn_doc_strdup(scn_doc *d, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = scn_doc_alloc(d, n);
    if (p) memcpy(p, s, n);
    return p;
}

/* ---- nodes ---- */
scn_node *scn_node_new(scn_doc *d, scn_node_kind kind, const char *file, int line, int col)
{
    scn_node *nd = scn_doc_alloc(d, sizeof *nd);
    if (!nd) return NULL;
    nd->kind = kind; nd->file = file; nd->line = line; nd->col = col;
    return nd;
}

int scn_node_append(scn_doc *d, scn_node *p, scn_node *key, scn_node *val)
{
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 8;
        scn_node **nk = scn_doc_alloc(d, sizeof(scn_node *) * (size_t)cap);
        scn_node **nv = scn_doc_alloc(d, sizeof(scn_node *) * (size_t)cap);
        if (!nk || !nv) return -1;
        if (p->n) { memcpy(nk, p->keys, sizeof(scn_node *) * (size_t)p->n);
                    memcpy(nv, p->vals, sizeof(scn_node *) * (size_t)p->n); }
        p->keys = nk; p->vals = nv; p->cap = cap;
    }
    p->keys[p->n] = key;
    p->vals[p->n] = val;
    p->n++;
    return 0;
}

int scn_map_index(const scn_node *m, const char *key)
{
    if (!m || m->kind != SCN_NODE_MAP) return -1;
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->keys[i]->text, key) == 0) return i;
    return -1;
}

scn_node *scn_map_get(const scn_node *m, const char *key)
{
    int i = scn_map_index(m, key);
    return i < 0 ? NULL : m->vals[i];
}

int scn_map_set(scn_doc *d, scn_node *m, const char *key, scn_node *val)
{
    int i = scn_map_index(m, key);
    if (i >= 0) { m->vals[i] = val; return 0; }
    scn_node *k = scn_node_new(d, SCN_NODE_SCALAR, val->file, val->line, val->col);
    if (!k || !(k->text = scn_doc_strdup(d, key))) return -1;
    return scn_node_append(d, m, k, val);
}

void scn_map_remove(scn_node *m, const char *key)
{
    int i = scn_map_index(m, key);
    if (i < 0) return;
    memmove(m->keys + i, m->keys + i + 1, sizeof(scn_node *) * (size_t)(m->n - i - 1));
    memmove(m->vals + i, m->vals + i + 1, sizeof(scn_node *) * (size_t)(m->n - i - 1));
    m->n--;
}

scn_node *scn_node_merge(scn_doc *d, scn_node *base, const scn_node *ov)
{
    if (base->kind != SCN_NODE_MAP || ov->kind != SCN_NODE_MAP) return (scn_node *)ov;
    for (int i = 0; i < ov->n; i++) {
        scn_node *b = scn_map_get(base, ov->keys[i]->text);
        scn_node *v = b ? scn_node_merge(d, b, ov->vals[i]) : ov->vals[i];
        int j = scn_map_index(base, ov->keys[i]->text);
        if (j >= 0) { base->vals[j] = v; base->keys[j] = ov->keys[i]; }
        else if (scn_node_append(d, base, ov->keys[i], v)) return NULL;
    }
    return base;
}

/* ---- errors ---- */
scn_status scn_fail(scn_error *err, scn_status st, const scn_node *at, const char *path,
                    const char *fmt, ...)
{
    err->status = st;
    snprintf(err->file, sizeof err->file, "%s", at && at->file ? at->file : "");
    err->line = at ? at->line : 0;
    err->col = at ? at->col : 0;
    snprintf(err->path, sizeof err->path, "%s", path ? path : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return st;
}

void scn_error_format(const scn_error *e, char *buf, size_t n)
{
    char where[600] = "";
    if (e->file[0] && e->line > 0) snprintf(where, sizeof where, "%s:%d:%d: ", e->file, e->line, e->col);
    else if (e->file[0]) snprintf(where, sizeof where, "%s: ", e->file);
    snprintf(buf, n, "%s%s%s%s", where, e->path, e->path[0] ? ": " : "", e->msg);
}

/* ---- parsing ---- */
typedef struct { const char *name; scn_node *node; } anchor;

typedef struct {
    scn_doc *doc;
    yaml_parser_t parser;
    const char *file;
    int col0;               /* column offset added to marks (for --set fragments) */
    anchor *anchors; int n_anchors, cap_anchors;
    scn_error *err;
} pstate;

static scn_status parse_fail(pstate *ps, const yaml_mark_t *m, const char *fmt, const char *arg)
{
    scn_error *e = ps->err;
    e->status = SCN_E_DATA;
    snprintf(e->file, sizeof e->file, "%s", ps->file);
    e->line = (int)m->line + 1;
    e->col = (int)m->column + 1 + ps->col0;
    e->path[0] = 0;
    snprintf(e->msg, sizeof e->msg, fmt, arg ? arg : "");
    return SCN_E_DATA;
}

static int next_event(pstate *ps, yaml_event_t *ev)
{
    if (yaml_parser_parse(&ps->parser, ev)) return 0;
    const char *prob = ps->parser.problem ? ps->parser.problem : "malformed YAML";
    parse_fail(ps, &ps->parser.problem_mark, "YAML syntax error: %s", prob);
    return -1;
}

static int remember_anchor(pstate *ps, const yaml_char_t *name, scn_node *nd)
{
    if (!name) return 0;
    if (ps->n_anchors == ps->cap_anchors) {
        int cap = ps->cap_anchors ? ps->cap_anchors * 2 : 8;
        anchor *a = realloc(ps->anchors, sizeof(anchor) * (size_t)cap);
        if (!a) return -1;
        ps->anchors = a; ps->cap_anchors = cap;
    }
    ps->anchors[ps->n_anchors].name = scn_doc_strdup(ps->doc, (const char *)name);
    ps->anchors[ps->n_anchors++].node = nd;
    return 0;
}

static scn_node *parse_node(pstate *ps, yaml_event_t *ev);

/* Parses the children of a mapping or sequence whose start event has been consumed. */
static int parse_children(pstate *ps, scn_node *nd)
{
    for (;;) {
        yaml_event_t ev;
        if (next_event(ps, &ev)) return -1;
        if (ev.type == YAML_MAPPING_END_EVENT || ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return 0;
        }
        scn_node *key = NULL, *val;
        if (nd->kind == SCN_NODE_MAP) {
            if (ev.type != YAML_SCALAR_EVENT) {
                parse_fail(ps, &ev.start_mark, "mapping keys must be plain strings%s", "");
                yaml_event_delete(&ev);
                return -1;
            }
            key = parse_node(ps, &ev);
            yaml_event_delete(&ev);
            if (!key) return -1;
            if (scn_map_index(nd, key->text) >= 0) {
                scn_fail(ps->err, SCN_E_DATA, key, key->text, "duplicate key");
                return -1;
            }
            if (next_event(ps, &ev)) return -1;
        }
        val = parse_node(ps, &ev);
        yaml_event_delete(&ev);
        if (!val || scn_node_append(ps->doc, nd, key, val)) return -1;
    }
}

static scn_node *parse_node(pstate *ps, yaml_event_t *ev)
{
    int line = (int)ev->start_mark.line + 1, col = (int)ev->start_mark.column + 1 + ps->col0;
    scn_node *nd;
    switch (ev->type) {
    case YAML_ALIAS_EVENT:
        for (int i = 0; i < ps->n_anchors; i++)
            if (strcmp(ps->anchors[i].name, (const char *)ev->data.alias.anchor) == 0)
                return ps->anchors[i].node;
        parse_fail(ps, &ev->start_mark, "unknown alias *%s", (const char *)ev->data.alias.anchor);
        return NULL;
    case YAML_SCALAR_EVENT:
        nd = scn_node_new(ps->doc, SCN_NODE_SCALAR, ps->file, line, col);
        if (!nd) return NULL;
        nd->text = scn_doc_strdup(ps->doc, (const char *)ev->data.scalar.value);
        nd->quoted = ev->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
                     ev->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
        if (remember_anchor(ps, ev->data.scalar.anchor, nd)) return NULL;
        return nd;
    case YAML_MAPPING_START_EVENT:
    case YAML_SEQUENCE_START_EVENT:
        nd = scn_node_new(ps->doc, ev->type == YAML_MAPPING_START_EVENT ? SCN_NODE_MAP : SCN_NODE_SEQ,
                          ps->file, line, col);
        if (!nd) return NULL;
        if (remember_anchor(ps, ev->type == YAML_MAPPING_START_EVENT ? ev->data.mapping_start.anchor
                                                                    : ev->data.sequence_start.anchor, nd))
            return NULL;
        return parse_children(ps, nd) ? NULL : nd;
    default:
        parse_fail(ps, &ev->start_mark, "unexpected YAML event%s", "");
        return NULL;
    }
}

/* Parses one document; an empty stream yields an empty mapping. */
static scn_node *parse_stream(pstate *ps)
{
    yaml_event_t ev;
    scn_node *root = NULL;
    int depth = 0;  /* 0: expect stream start, 1: doc start, 2: root, 3: doc end */
    for (;;) {
        if (next_event(ps, &ev)) break;
        yaml_event_type_t t = ev.type;
        if (t == YAML_STREAM_START_EVENT || t == YAML_DOCUMENT_START_EVENT) { depth++; yaml_event_delete(&ev); continue; }
        if (t == YAML_DOCUMENT_END_EVENT) { yaml_event_delete(&ev); continue; }
        if (t == YAML_STREAM_END_EVENT) {
            yaml_event_delete(&ev);
            if (!root) root = scn_node_new(ps->doc, SCN_NODE_MAP, ps->file, 1, 1 + ps->col0);
            break;
        }
        if (root) {
            parse_fail(ps, &ev.start_mark, "only one YAML document per file is supported%s", "");
            yaml_event_delete(&ev);
            return NULL;
        }
        root = parse_node(ps, &ev);
        yaml_event_delete(&ev);
        if (!root) break;
    }
    (void)depth;
    return ps->err->status ? NULL : root;
}

static scn_node *parse_with(scn_doc *d, const char *label, int col0, scn_error *err,
                            FILE *fp, const char *text)
{
    pstate ps = { .doc = d, .file = scn_doc_strdup(d, label), .col0 = col0, .err = err };
    err->status = SCN_OK;
    if (!yaml_parser_initialize(&ps.parser)) {
        scn_fail(err, SCN_E_INTERNAL, NULL, "", "libyaml: parser initialisation failed");
        return NULL;
    }
    if (fp) yaml_parser_set_input_file(&ps.parser, fp);
    else yaml_parser_set_input_string(&ps.parser, (const unsigned char *)text, strlen(text));
    scn_node *root = parse_stream(&ps);
    yaml_parser_delete(&ps.parser);
    free(ps.anchors);
    if (!root && err->status == SCN_OK) scn_fail(err, SCN_E_INTERNAL, NULL, "", "out of memory");
    return root;
}

scn_node *scn_doc_parse_file(scn_doc *d, const char *path, scn_error *err)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        err->status = SCN_E_NOINPUT;
        snprintf(err->file, sizeof err->file, "%s", path);
        err->line = err->col = 0; err->path[0] = 0;
        snprintf(err->msg, sizeof err->msg, "cannot open: %s", strerror(errno));
        return NULL;
    }
    scn_node *root = parse_with(d, path, 0, err, fp, NULL);
    if (!root && err->status == SCN_OK && ferror(fp))
        scn_fail(err, SCN_E_NOINPUT, NULL, "", "read error");
    fclose(fp);
    return root;
}

scn_node *scn_doc_parse_string(scn_doc *d, const char *text, const char *label, int col0,
                               scn_error *err)
{
    return parse_with(d, label, col0, err, NULL, text);
}
