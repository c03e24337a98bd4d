/* scn_bind_util.c: the typed field readers every binder uses (see scn_bind.h). */
#include "scn_bind.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *scn_path_join(char *buf, size_t n, const char *parent, const char *key)
{
    if (parent && parent[0]) snprintf(buf, n, "%s.%s", parent, key);
    else snprintf(buf, n, "%s", key);
    return buf;
}

static const char *kind_name(scn_node_kind k)
{
    return k == SCN_NODE_MAP ? "a mapping" : k == SCN_NODE_SEQ ? "a list" : "a scalar";
}

int scn_expect_map(scn_ctx *c, const scn_node *nd, const char *path)
{
    if (nd->kind == SCN_NODE_MAP) return 0;
    scn_fail(c->err, SCN_E_DATA, nd, path, "expected a mapping of fields, found %s", kind_name(nd->kind));
    return -1;
}

int scn_check_keys(scn_ctx *c, const scn_node *m, const char *path, const char *const *known)
{
    for (int i = 0; i < m->n; i++) {
        const char *k = m->keys[i]->text;
        bool found = false;
        for (const char *const *p = known; *p && !found; p++) found = !strcmp(*p, k);
        if (found) continue;
        /* Unknown: the nearest known key, for the message (only now: loading pays no distances). */
        const char *best = NULL;
        int bestd = 99;
        for (const char *const *p = known; *p; p++) {
            int d = scn_edit_distance(k, *p);
            if (d < bestd) { bestd = d; best = *p; }
        }
        char full[256];
        scn_path_join(full, sizeof full, path, k);
        /* Suggest only near misses: at most a third of the key's letters changed. */
        if (best && bestd <= 1 + (int)strlen(k) / 3)
            scn_fail(c->err, SCN_E_DATA, m->keys[i], full, "unknown field '%s'; did you mean '%s'?", k, best);
        else {
            char list[400] = "";
            size_t used = 0;
            for (const char *const *p = known; *p && used < sizeof list; p++)
                used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", *p);
            scn_fail(c->err, SCN_E_DATA, m->keys[i], full, "unknown field '%s'; expected one of: %s", k, list);
        }
        return -1;
    }
    return 0;
}

static bool is_null(const scn_node *v)
{
    return v->kind == SCN_NODE_SCALAR && !v->quoted &&
           (!strcmp(v->text, "null") || !strcmp(v->text, "~") || !v->text[0]);
}

bool scn_has(const scn_node *m, const char *key)
{
    const scn_node *v = scn_map_get(m, key);
    return v && !is_null(v);
}

int scn_require(scn_ctx *c, const scn_node *m, const char *path, const char *key)
{
    if (scn_has(m, key)) return 0;
    char full[256];
    scn_fail(c->err, SCN_E_DATA, m, scn_path_join(full, sizeof full, path, key), "missing required field");
    return -1;
}

/* Returns the scalar value for key, NULL when absent/null, or sets *bad when not a scalar. */
static const scn_node *scalar_of(scn_ctx *c, const scn_node *m, const char *path, const char *key,
                                 char *full, size_t n, int *bad)
{
    *bad = 0;
    scn_path_join(full, n, path, key);
    const scn_node *v = scn_map_get(m, key);
    if (!v || is_null(v)) return NULL;
    if (v->kind != SCN_NODE_SCALAR) {
        /* A list where one value belongs is most often a deployment setting meant as a choice. */
        bool choice = v->kind == SCN_NODE_SEQ && !strncmp(full, "deployment.", 11);
        scn_fail(c->err, SCN_E_DATA, v, full, "expected a single value, found %s%s", kind_name(v->kind),
                 choice ? " (to compare several, list them under options, e.g. options.tensor_parallel: [4, 8])" : "");
        *bad = 1;
        return NULL;
    }
    return v;
}

int scn_parse_int(scn_ctx *c, const scn_node *v, const char *path, long lo, long hi, long *out)
{
    if (v->kind != SCN_NODE_SCALAR) {
        scn_fail(c->err, SCN_E_DATA, v, path, "expected a whole number, found %s", kind_name(v->kind));
        return -1;
    }
    const char *s = v->text;
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (end == s || *end || errno) {
        scn_fail(c->err, SCN_E_DATA, v, path, "expected a whole number, found '%s'", s);
        return -1;
    }
    if (x < lo || x > hi) {
        if (x < lo && lo == 1)
            scn_fail(c->err, SCN_E_DATA, v, path, "must be at least 1, found %ld", x);
        else if (x < lo)
            scn_fail(c->err, SCN_E_DATA, v, path, "must be at least %ld, found %ld", lo, x);
        else
            scn_fail(c->err, SCN_E_DATA, v, path, "must be at most %ld, found %ld", hi, x);
        return -1;
    }
    *out = x;
    return 0;
}

int scn_get_long(scn_ctx *c, const scn_node *m, const char *path, const char *key,
                 long lo, long hi, long *out)
{
    char full[256];
    int bad;
    const scn_node *v = scalar_of(c, m, path, key, full, sizeof full, &bad);
    if (!v) return bad ? -1 : 0;
    return scn_parse_int(c, v, full, lo, hi, out);
}

int scn_get_int(scn_ctx *c, const scn_node *m, const char *path, const char *key,
                long lo, long hi, int *out)
{
    long x = *out;
    if (hi > INT_MAX) hi = INT_MAX;
    if (scn_get_long(c, m, path, key, lo, hi, &x)) return -1;
    *out = (int)x;
    return 0;
}

int scn_get_qty(scn_ctx *c, const scn_node *m, const char *path, const char *key,
                scn_unit_kind kind, bool allow_zero, double *out)
{
    char full[256], msg[400];
    int bad;
    const scn_node *v = scalar_of(c, m, path, key, full, sizeof full, &bad);
    if (!v) return bad ? -1 : 0;
    double x;
    if (scn_quantity_parse(v->text, kind, &x, msg, sizeof msg)) {
        scn_fail(c->err, SCN_E_DATA, v, full, "%s", msg);
        return -1;
    }
    if (x < 0 || (!allow_zero && x == 0)) {
        scn_fail(c->err, SCN_E_DATA, v, full, "must be %s, found '%s'",
                 allow_zero ? "zero or more" : "greater than zero", v->text);
        return -1;
    }
    *out = x;
    return 0;
}

int scn_parse_bool(scn_ctx *c, const scn_node *v, const char *path, bool *out)
{
    static const char *const T[] = {"true", "on", "yes", NULL}, *const F[] = {"false", "off", "no", NULL};
    if (v->kind == SCN_NODE_SCALAR) {
        for (int i = 0; T[i]; i++) if (!strcmp(v->text, T[i])) { *out = true; return 0; }
        for (int i = 0; F[i]; i++) if (!strcmp(v->text, F[i])) { *out = false; return 0; }
    }
    scn_fail(c->err, SCN_E_DATA, v, path, "expected true/false (or on/off), found '%s'",
             v->kind == SCN_NODE_SCALAR ? v->text : kind_name(v->kind));
    return -1;
}

int scn_get_bool(scn_ctx *c, const scn_node *m, const char *path, const char *key, bool *out)
{
    char full[256];
    int bad;
    const scn_node *v = scalar_of(c, m, path, key, full, sizeof full, &bad);
    if (!v) return bad ? -1 : 0;
    return scn_parse_bool(c, v, full, out);
}

int scn_get_str(scn_ctx *c, const scn_node *m, const char *path, const char *key, char *buf, size_t n)
{
    char full[256];
    int bad;
    const scn_node *v = scalar_of(c, m, path, key, full, sizeof full, &bad);
    if (!v) return bad ? -1 : 0;
    if (strlen(v->text) >= n) {
        scn_fail(c->err, SCN_E_DATA, v, full, "longer than %zu characters", n - 1);
        return -1;
    }
    snprintf(buf, n, "%s", v->text);
    return 0;
}

int scn_parse_enum(scn_ctx *c, const scn_node *v, const char *path, const char *const *names, int *out)
{
    if (v->kind == SCN_NODE_SCALAR)
        for (int i = 0; names[i]; i++)
            if (!strcmp(v->text, names[i])) { *out = i; return 0; }
    /* Unknown: the nearest name, for the message (only now: loading pays no distances). */
    char list[300] = "";
    size_t used = 0;
    const char *best = NULL;
    int bestd = 99;
    if (v->kind == SCN_NODE_SCALAR)
        for (int i = 0; names[i]; i++) {
            int d = scn_edit_distance(v->text, names[i]);
            if (d < bestd) { bestd = d; best = names[i]; }
        }
    for (int i = 0; names[i] && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", names[i]);
    if (best && bestd <= 1 + (int)strlen(v->text) / 3)
        scn_fail(c->err, SCN_E_DATA, v, path, "unknown value '%s'; did you mean '%s'? (one of: %s)",
                 v->text, best, list);
    else
        scn_fail(c->err, SCN_E_DATA, v, path, "expected one of: %s; found '%s'", list,
                 v->kind == SCN_NODE_SCALAR ? v->text : kind_name(v->kind));
    return -1;
}

int scn_get_enum(scn_ctx *c, const scn_node *m, const char *path, const char *key,
                 const char *const *names, int *out)
{
    char full[256];
    int bad;
    const scn_node *v = scalar_of(c, m, path, key, full, sizeof full, &bad);
    if (!v) return bad ? -1 : 0;
    return scn_parse_enum(c, v, full, names, out);
}

int scn_get_dtype(scn_ctx *c, const scn_node *m, const char *path, const char *key, scn_dtype *out)
{
    char full[256];
    int bad;
    const scn_node *v = scalar_of(c, m, path, key, full, sizeof full, &bad);
    if (!v) return bad ? -1 : 0;
    if (scn_dtype_parse(v->text, out) == 0) return 0;
    int idx;
    if (scn_parse_enum(c, v, full, SCN_DTYPE_NAMES, &idx)) return -1;
    *out = (scn_dtype)idx;
    return 0;
}
