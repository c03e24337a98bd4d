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

/* ---- a string-keyed index ----
 * Open addressing from key text to an int, for lookups that would otherwise be linear per
 * item and so quadratic per document: duplicate keys in a large mapping, aliases among many
 * anchors, and merging one large mapping onto another. */
typedef struct { const char **key; int *val; size_t cap, n; } str_index;

static size_t str_hash(const char *s)
{
    size_t h = 1469598103934665603ULL & (size_t)-1;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * (size_t)1099511628211ULL;
    return h;
}

static void index_free(str_index *x) { free(x->key); free(x->val); memset(x, 0, sizeof *x); }

/* Slot of key, or of the empty slot where it would go. */
static size_t index_slot(const str_index *x, const char *key)
{
    size_t i = str_hash(key) & (x->cap - 1);
    while (x->key[i] && strcmp(x->key[i], key)) i = (i + 1) & (x->cap - 1);
    return i;
}

/* Sets key to val (replacing); -1 on out of memory. Keys are borrowed, not copied. */
static int index_put(str_index *x, const char *key, int val)
{
    if (2 * (x->n + 1) > x->cap) {
        str_index g = {calloc(x->cap ? 2 * x->cap : 16, sizeof(char *)), malloc(sizeof(int) * (x->cap ? 2 * x->cap : 16)),
                       x->cap ? 2 * x->cap : 16, 0};
        if (!g.key || !g.val) { index_free(&g); return -1; }
        for (size_t i = 0; i < x->cap; i++)
            if (x->key[i]) { size_t j = index_slot(&g, x->key[i]); g.key[j] = x->key[i]; g.val[j] = x->val[i]; g.n++; }
        index_free(x);
        *x = g;
    }
    size_t i = index_slot(x, key);
    if (!x->key[i]) { x->key[i] = key; x->n++; }
    x->val[i] = val;
    return 0;
}

/* The value for key, or -1 when absent. */
static int index_get(const str_index *x, const char *key)
{
    if (!x->cap) return -1;
    size_t i = index_slot(x, key);
    return x->key[i] ? x->val[i] : -1;
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
    /* Small merges look keys up directly; large ones through an index of the base's keys. */
    str_index x = {0};
    bool indexed = (long)base->n * ov->n > 4096;
    for (int i = 0; indexed && i < base->n; i++)
        if (index_put(&x, base->keys[i]->text, i)) { index_free(&x); return NULL; }
    for (int i = 0; i < ov->n; i++) {
        int j = indexed ? index_get(&x, ov->keys[i]->text) : scn_map_index(base, ov->keys[i]->text);
        scn_node *v = j >= 0 ? scn_node_merge(d, base->vals[j], ov->vals[i]) : ov->vals[i];
        if (!v) { index_free(&x); return NULL; }
        if (j >= 0) { base->vals[j] = v; base->keys[j] = ov->keys[i]; continue; }
        if (scn_node_append(d, base, ov->keys[i], v) || (indexed && index_put(&x, ov->keys[i]->text, base->n - 1))) {
            index_free(&x);
            return NULL;
        }
    }
    index_free(&x);
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
/* An anchor is usable by aliases only once its node is complete: an alias inside the node it
 * names would make the tree a cycle, which no walk over it could finish. */
typedef struct { const char *name; scn_node *node; bool complete; } anchor;

typedef struct {
    scn_doc *doc;
    yaml_parser_t parser;
    const char *file;
    int col0;               /* column offset added to marks (for --set fragments) */
    anchor *anchors; int n_anchors, cap_anchors;
    str_index anchor_ix;    /* name -> latest definition in anchors */
    int depth;              /* containers open around the current event */
    long expanded;          /* nodes so far, aliases counted at their expanded size */
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

/* Records an anchor; returns its index, -1 when there is none, -2 on out of memory. */
static int remember_anchor(pstate *ps, const yaml_char_t *name, scn_node *nd, bool complete)
{
    if (!name) return -1;
    if (ps->n_anchors == ps->cap_anchors) {
        int cap = ps->cap_anchors ? ps->cap_anchors * 2 : 8;
        anchor *a = realloc(ps->anchors, sizeof(anchor) * (size_t)cap);
        if (!a) return -2;
        ps->anchors = a; ps->cap_anchors = cap;
    }
    anchor *a = &ps->anchors[ps->n_anchors];
    a->name = scn_doc_strdup(ps->doc, (const char *)name);
    a->complete = complete;
    a->node = nd;
    if (!a->name || index_put(&ps->anchor_ix, a->name, ps->n_anchors)) return -2;
    return ps->n_anchors++;
}

/* Counts n more nodes against the expansion limit. */
static int count_nodes(pstate *ps, long n, const yaml_mark_t *m)
{
    ps->expanded += n;
    if (ps->expanded <= SCN_MAX_EXPANDED) return 0;
    char lim[32];
    snprintf(lim, sizeof lim, "%ld", SCN_MAX_EXPANDED);
    parse_fail(ps, m, "the document expands to more than %s nodes (through aliases); refusing it", lim);
    return -1;
}

static scn_node *parse_node(pstate *ps, yaml_event_t *ev);
static int parse_children_into(pstate *ps, scn_node *nd, str_index *seen);

/* Parses the children of a mapping or sequence whose start event has been consumed. */
static int parse_children(pstate *ps, scn_node *nd)
{
    str_index seen = {0};   /* this mapping's keys, so a large one is checked in linear time */
    int rc = parse_children_into(ps, nd, &seen);
    index_free(&seen);
    return rc;
}

static int parse_children_into(pstate *ps, scn_node *nd, str_index *seen)
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
            if (index_get(seen, key->text) >= 0) {
                scn_fail(ps->err, SCN_E_DATA, key, key->text, "duplicate key");
                return -1;
            }
            if (index_put(seen, key->text, nd->n)) return -1;
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
    {
        /* The latest definition of a name wins (YAML 1.2, 3.2.2.2). */
        int i = index_get(&ps->anchor_ix, (const char *)ev->data.alias.anchor);
        if (i < 0) {
            parse_fail(ps, &ev->start_mark, "unknown alias *%s", (const char *)ev->data.alias.anchor);
            return NULL;
        }
        if (!ps->anchors[i].complete) {
            parse_fail(ps, &ev->start_mark, "alias *%s refers to a node that contains it; recursive "
                       "structures are not supported", (const char *)ev->data.alias.anchor);
            return NULL;
        }
        if (count_nodes(ps, ps->anchors[i].node->weight, &ev->start_mark)) return NULL;
        return ps->anchors[i].node;
    }
    case YAML_SCALAR_EVENT:
        if (count_nodes(ps, 1, &ev->start_mark)) return NULL;
        nd = scn_node_new(ps->doc, SCN_NODE_SCALAR, ps->file, line, col);
        if (!nd) return NULL;
        nd->weight = 1;
        nd->text = scn_doc_strdup(ps->doc, (const char *)ev->data.scalar.value);
        nd->quoted = ev->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
                     ev->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
        if (remember_anchor(ps, ev->data.scalar.anchor, nd, true) == -2) return NULL;
        return nd;
    case YAML_MAPPING_START_EVENT:
    case YAML_SEQUENCE_START_EVENT: {
        if (ps->depth == SCN_MAX_NESTING) {
            char lim[16];
            snprintf(lim, sizeof lim, "%d", SCN_MAX_NESTING);
            parse_fail(ps, &ev->start_mark, "mappings and lists nest deeper than %s levels", lim);
            return NULL;
        }
        long before = ps->expanded;
        if (count_nodes(ps, 1, &ev->start_mark)) return NULL;
        nd = scn_node_new(ps->doc, ev->type == YAML_MAPPING_START_EVENT ? SCN_NODE_MAP : SCN_NODE_SEQ,
                          ps->file, line, col);
        if (!nd) return NULL;
        int a = remember_anchor(ps, ev->type == YAML_MAPPING_START_EVENT ? ev->data.mapping_start.anchor
                                                                        : ev->data.sequence_start.anchor, nd, false);
        if (a == -2) return NULL;
        ps->depth++;
        int bad = parse_children(ps, nd);
        ps->depth--;
        if (bad) return NULL;
        nd->weight = ps->expanded - before;
        if (a >= 0) ps->anchors[a].complete = true;
        return nd;
    }
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
    index_free(&ps.anchor_ix);
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
