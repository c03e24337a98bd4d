/* scn_load.c: turns a scenario file into a scn_scenario.
 *
 * Steps: parse the file; fold in `extends` bases; replace the `model` and `hardware`
 * references (library names, paths, or {hf_config: path}) by the mappings they name; apply
 * --set overrides in order; resolve again (an override may name another library entry); bind.
 * Every step keeps node positions, so any later error points into the file that caused it. */
#define _XOPEN_SOURCE 700   /* realpath */
#include "scn_bind.h"

#include <dirent.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DEPTH 16

/* The file a library name stands for: <library>/<kind>/<name>.yaml, else the same in the user's
 * data directory (where `calibrate` writes profiles). When neither exists, the library path. */
static void library_path(const char *kind, const char *name, char *path, size_t n)
{
    char dir[PATH_MAX - 300], user[PATH_MAX - 300];
    scn_library_dir(dir, sizeof dir);
    snprintf(path, n, "%s/%s/%.255s.yaml", dir, kind, name);
    if (access(path, F_OK) == 0 || scn_user_dir(kind, user, sizeof user)) return;
    char alt[PATH_MAX];
    snprintf(alt, sizeof alt, "%s/%.255s.yaml", user, name);
    if (access(alt, F_OK) == 0) snprintf(path, n, "%s", alt);
}

typedef struct {
    scn_ctx c;
    const char *stack[MAX_DEPTH]; /* files being loaded, for cycle detection */
    int depth;
} loader;

/* Resolves `name` relative to the directory of `from` (a file path). */
static void relative_to(char *out, size_t n, const char *from, const char *name)
{
    if (name[0] == '/' || !from || !from[0]) { snprintf(out, n, "%s", name); return; }
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", from);
    snprintf(out, n, "%s/%s", dirname(tmp), name);
}

static bool looks_like_path(const char *s)
{
    size_t n = strlen(s);
    return strchr(s, '/') || (n > 5 && !strcmp(s + n - 5, ".yaml")) || (n > 5 && !strcmp(s + n - 5, ".json"));
}

/* Suggests the library entry nearest to `name` in dir, into buf. */
static void nearest_entry(const char *dir, const char *name, char *buf, size_t n)
{
    buf[0] = 0;
    DIR *d = opendir(dir);
    if (!d) return;
    int best = 99;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".yaml")) continue;
        char stem[256];
        snprintf(stem, sizeof stem, "%.*s", (int)(l - 5), e->d_name);
        int dist = scn_edit_distance(name, stem);
        if (dist < best) { best = dist; snprintf(buf, n, "%s", stem); }
    }
    closedir(d);
    if (best > 1 + (int)strlen(name) / 3) buf[0] = 0;
}

static scn_node *load_file(loader *L, const char *path, const scn_node *ref, const char *field);

/* Folds `extends: NAME` into m: the base's fields, overridden by m's. `kind` is the library
 * folder to look in ("models", "hardware") or NULL for paths relative to the file. */
static scn_node *apply_extends(loader *L, scn_node *m, const char *kind, const char *field)
{
    scn_node *ext = scn_map_get(m, "extends");
    if (!ext) return m;
    char p[256];
    scn_path_join(p, sizeof p, field, "extends");
    if (ext->kind != SCN_NODE_SCALAR) {
        scn_fail(L->c.err, SCN_E_DATA, ext, p, "expected the name or path of a file to extend");
        return NULL;
    }
    char path[PATH_MAX];
    if (kind && !looks_like_path(ext->text))
        library_path(kind, ext->text, path, sizeof path);
    else
        relative_to(path, sizeof path, m->file, ext->text);
    scn_node *base = load_file(L, path, ext, p);
    if (!base) return NULL;
    base = apply_extends(L, base, kind, field);
    if (!base) return NULL;
    L->depth--;
    scn_map_remove(m, "extends");
    if (base->kind != SCN_NODE_MAP) {
        scn_fail(L->c.err, SCN_E_DATA, base, p, "the extended file must hold a mapping");
        return NULL;
    }
    scn_node *fresh = scn_node_new(L->c.doc, SCN_NODE_MAP, m->file, m->line, m->col);
    if (!fresh || !scn_node_merge(L->c.doc, fresh, base) || !scn_node_merge(L->c.doc, fresh, m)) {
        scn_fail(L->c.err, SCN_E_INTERNAL, m, p, "out of memory");
        return NULL;
    }
    return fresh;
}

/* Parses a file, refusing cycles; the caller pops L->depth once done with extends. */
static scn_node *load_file(loader *L, const char *path, const scn_node *ref, const char *field)
{
    char real[PATH_MAX];
    if (!realpath(path, real)) snprintf(real, sizeof real, "%s", path);
    for (int i = 0; i < L->depth; i++) {
        if (!strcmp(L->stack[i], real)) {
            scn_fail(L->c.err, SCN_E_DATA, ref, field, "reference cycle: '%s' is already being loaded", path);
            return NULL;
        }
    }
    if (L->depth == MAX_DEPTH) {
        scn_fail(L->c.err, SCN_E_DATA, ref, field, "references nest deeper than %d files", MAX_DEPTH);
        return NULL;
    }
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        if (ref) scn_fail(L->c.err, SCN_E_NOINPUT, ref, field, "'%s' is a directory, not a file", path);
        else scn_fail(L->c.err, SCN_E_NOINPUT, NULL, "", "'%s' is a directory, not a file", path);
        if (!ref) snprintf(L->c.err->file, sizeof L->c.err->file, "%s", path);
        return NULL;
    }
    scn_node *root = scn_doc_parse_file(L->c.doc, path, L->c.err);
    if (!root) {
        /* A missing referenced file is reported where it was referenced. */
        if (L->c.err->status == SCN_E_NOINPUT && ref) {
            char msg[sizeof L->c.err->msg];
            snprintf(msg, sizeof msg, "%s", L->c.err->msg);
            scn_fail(L->c.err, SCN_E_NOINPUT, ref, field, "cannot read '%s': %s", path, msg);
        }
        return NULL;
    }
    L->stack[L->depth++] = scn_doc_strdup(L->c.doc, real);
    return root;
}

/* Replaces root[field] (a library name, a path, or a mapping, possibly {hf_config: path}) by
 * the mapping it stands for. `kind` is the library folder. */
static int resolve_ref(loader *L, scn_node *root, const char *field, const char *kind)
{
    scn_node *v = scn_map_get(root, field);
    if (!v) return 0;
    scn_node *m = NULL;
    if (v->kind == SCN_NODE_SCALAR) {
        char path[PATH_MAX];
        bool lib = !looks_like_path(v->text);
        if (lib) library_path(kind, v->text, path, sizeof path);
        else relative_to(path, sizeof path, v->file, v->text);
        if (lib && access(path, F_OK) != 0) {
            char near[256], lib_dir[PATH_MAX - 64], dir[PATH_MAX];
            scn_library_dir(lib_dir, sizeof lib_dir);
            snprintf(dir, sizeof dir, "%s/%s", lib_dir, kind);
            nearest_entry(dir, v->text, near, sizeof near);
            if (near[0])
                scn_fail(L->c.err, SCN_E_DATA, v, field, "unknown %s '%s'; did you mean '%s'? (library: %s)",
                         field, v->text, near, dir);
            else
                scn_fail(L->c.err, SCN_E_DATA, v, field, "unknown %s '%s' (library: %s; `kvplan list` shows it)",
                         field, v->text, dir);
            return -1;
        }
        int depth0 = L->depth;
        m = load_file(L, path, v, field);
        if (!m) return -1;
        if (m->kind == SCN_NODE_MAP && !scn_map_get(m, "name") && lib) {
            scn_node *nm = scn_node_new(L->c.doc, SCN_NODE_SCALAR, v->file, v->line, v->col);
            if (!nm) return -1;
            nm->text = v->text;
            scn_map_set(L->c.doc, m, "name", nm);
        }
        if (m->kind == SCN_NODE_MAP) m = apply_extends(L, m, kind, field);
        L->depth = depth0;
        if (!m) return -1;
    } else if (v->kind == SCN_NODE_MAP) {
        m = apply_extends(L, v, kind, field);
        if (!m) return -1;
    } else {
        scn_fail(L->c.err, SCN_E_DATA, v, field, "expected a library name, a file path or a mapping");
        return -1;
    }
    if (scn_expect_map(&L->c, m, field)) return -1;
    scn_node *hf = scn_map_get(m, "hf_config");
    if (hf) {
        char p[256], path[PATH_MAX];
        scn_path_join(p, sizeof p, field, "hf_config");
        if (hf->kind != SCN_NODE_SCALAR) {
            scn_fail(L->c.err, SCN_E_DATA, hf, p, "expected the path of a config.json");
            return -1;
        }
        relative_to(path, sizeof path, hf->file, hf->text);
        int depth0 = L->depth;
        scn_node *cfg = load_file(L, path, hf, p);
        L->depth = depth0;
        if (!cfg) return -1;
        scn_node *t = scn_hf_translate(&L->c, cfg, p);
        if (!t) return -1;
        scn_map_remove(m, "hf_config");
        if (!scn_node_merge(L->c.doc, t, m)) return -1; /* inline fields override the config */
        m = t;
    }
    return scn_map_set(L->c.doc, root, field, m);
}

/* The engine defaults to vllm; options.engine lists library names (or mappings) to resolve. */
static int resolve_engines(loader *L, scn_node *root)
{
    if (!scn_map_get(root, "engine")) {
        scn_node *nm = scn_node_new(L->c.doc, SCN_NODE_SCALAR, root->file, root->line, root->col);
        if (!nm) return -1;
        nm->text = "vllm";
        if (scn_map_set(L->c.doc, root, "engine", nm)) return -1;
    }
    if (resolve_ref(L, root, "engine", "engines")) return -1;
    scn_node *opt = scn_map_get(root, "options");
    scn_node *list = opt && opt->kind == SCN_NODE_MAP ? scn_map_get(opt, "engine") : NULL;
    if (!list) return 0;
    /* Each item is resolved as a one-field mapping so resolve_ref can be reused. */
    int n = list->kind == SCN_NODE_SEQ ? list->n : 1;
    for (int i = 0; i < n; i++) {
        scn_node *item = list->kind == SCN_NODE_SEQ ? list->vals[i] : list;
        scn_node *holder = scn_node_new(L->c.doc, SCN_NODE_MAP, item->file, item->line, item->col);
        if (!holder || scn_map_set(L->c.doc, holder, "engine", item) || resolve_ref(L, holder, "engine", "engines"))
            return -1;
        if (list->kind == SCN_NODE_SEQ) list->vals[i] = scn_map_get(holder, "engine");
        else if (scn_map_set(L->c.doc, opt, "engine", scn_map_get(holder, "engine"))) return -1;
    }
    return 0;
}

/* options.hardware: each item (a library name, a path or a mapping) resolved as `hardware` is,
 * so the planner can compare hardware profiles. */
static int resolve_hw_options(loader *L, scn_node *root)
{
    scn_node *o = scn_map_get(root, "options");
    scn_node *l = o && o->kind == SCN_NODE_MAP ? scn_map_get(o, "hardware") : NULL;
    if (!l) return 0;
    int n = l->kind == SCN_NODE_SEQ ? l->n : 1;
    for (int i = 0; i < n; i++) {
        scn_node *item = l->kind == SCN_NODE_SEQ ? l->vals[i] : l;
        char key[64];
        snprintf(key, sizeof key, "options.hardware[%d]", i);
        scn_node *tmp = scn_node_new(L->c.doc, SCN_NODE_MAP, item->file, item->line, item->col);
        if (!tmp || scn_map_set(L->c.doc, tmp, key, item) || resolve_ref(L, tmp, key, "hardware")) return -1;
        scn_node *m = scn_map_get(tmp, key);
        if (l->kind == SCN_NODE_SEQ) l->vals[i] = m;
        else if (scn_map_set(L->c.doc, o, "hardware", m)) return -1;
    }
    return 0;
}

/* options.speculative: a draft method's `model` (a library name, a path or a mapping) is
 * resolved as the scenario's model is. */
static int resolve_spec_models(loader *L, scn_node *root)
{
    scn_node *o = scn_map_get(root, "options");
    scn_node *l = o && o->kind == SCN_NODE_MAP ? scn_map_get(o, "speculative") : NULL;
    if (!l) return 0;
    int n = l->kind == SCN_NODE_SEQ ? l->n : 1;
    for (int i = 0; i < n; i++) {
        scn_node *item = l->kind == SCN_NODE_SEQ ? l->vals[i] : l;
        if (item->kind == SCN_NODE_MAP && scn_map_get(item, "model") && resolve_ref(L, item, "model", "models"))
            return -1;
    }
    return 0;
}

/* deployment.disaggregation.{prefill,decode}.hardware: resolved as `hardware` is. */
static int resolve_pool_hardware(loader *L, scn_node *root)
{
    scn_node *d = scn_map_get(root, "deployment");
    scn_node *g = d && d->kind == SCN_NODE_MAP ? scn_map_get(d, "disaggregation") : NULL;
    if (!g || g->kind != SCN_NODE_MAP) return 0;
    static const char *const POOLS[] = {"prefill", "decode"};
    for (int i = 0; i < 2; i++) {
        scn_node *pool = scn_map_get(g, POOLS[i]);
        scn_node *item = pool && pool->kind == SCN_NODE_MAP ? scn_map_get(pool, "hardware") : NULL;
        if (!item) continue;
        char key[64];
        snprintf(key, sizeof key, "deployment.disaggregation.%s.hardware", POOLS[i]);
        scn_node *tmp = scn_node_new(L->c.doc, SCN_NODE_MAP, item->file, item->line, item->col);
        if (!tmp || scn_map_set(L->c.doc, tmp, key, item) || resolve_ref(L, tmp, key, "hardware") ||
            scn_map_set(L->c.doc, pool, "hardware", scn_map_get(tmp, key)))
            return -1;
    }
    return 0;
}

static int resolve_all(loader *L, scn_node *root)
{
    return resolve_ref(L, root, "model", "models") || resolve_ref(L, root, "hardware", "hardware") ||
           resolve_engines(L, root) || resolve_hw_options(L, root) ||
           resolve_spec_models(L, root) || resolve_pool_hardware(L, root);
}

/* Applies one "a.b.c=value" override. */
static int apply_set(loader *L, scn_node *root, const char *arg)
{
    const char *eq = strchr(arg, '=');
    scn_error *err = L->c.err;
    if (!eq || eq == arg || !eq[1]) {
        scn_fail(err, SCN_E_USAGE, NULL, "", "--set '%s': expected PATH=VALUE, e.g. workload.requests=100", arg);
        snprintf(err->file, sizeof err->file, "--set");
        return -1;
    }
    char path[256];
    /* Every segment of PATH names a field: an empty one ("a..b", ".a", "a.") would be skipped
     * by the split below and the override silently lost. */
    size_t plen = (size_t)(eq - arg);
    bool empty_seg = arg[0] == '.' || eq[-1] == '.';
    for (const char *q = arg; q + 1 < eq && !empty_seg; q++) empty_seg = q[0] == '.' && q[1] == '.';
    if (plen >= sizeof path || empty_seg) {
        scn_fail(err, SCN_E_USAGE, NULL, "", "--set '%.*s': %s", (int)(plen > 80 ? 80 : plen), arg,
                 empty_seg ? "PATH has an empty field name (write fields joined by single dots, e.g. workload.requests)"
                           : "PATH is longer than 255 characters");
        snprintf(err->file, sizeof err->file, "--set");
        return -1;
    }
    snprintf(path, sizeof path, "%.*s", (int)plen, arg);
    scn_node *val = scn_doc_parse_string(L->c.doc, eq + 1, "--set", (int)(eq - arg) + 1, err);
    if (!val) { err->status = SCN_E_USAGE; snprintf(err->path, sizeof err->path, "%s", path); return -1; }
    scn_node *cur = root;
    char *save = NULL, walked[256] = "";
    char *tok = strtok_r(path, ".", &save);
    while (tok) {
        char *next = strtok_r(NULL, ".", &save);
        char p[256];
        scn_path_join(p, sizeof p, walked, tok);
        snprintf(walked, sizeof walked, "%s", p);
        if (!next) return scn_map_set(L->c.doc, cur, tok, val);
        scn_node *child = scn_map_get(cur, tok);
        if (child && child->kind == SCN_NODE_SCALAR && cur == root &&
            (!strcmp(tok, "model") || !strcmp(tok, "hardware") || !strcmp(tok, "engine"))) {
            if (resolve_ref(L, root, tok, !strcmp(tok, "model") ? "models" : !strcmp(tok, "engine") ? "engines" : "hardware"))
                return -1;
            child = scn_map_get(cur, tok);
        }
        if (!child) {
            child = scn_node_new(L->c.doc, SCN_NODE_MAP, "--set", 1, 1);
            if (!child || scn_map_set(L->c.doc, cur, tok, child)) return -1;
        } else if (child->kind != SCN_NODE_MAP) {
            scn_fail(err, SCN_E_USAGE, child, p, "--set cannot descend into this field: it is not a mapping");
            return -1;
        }
        cur = child;
        tok = next;
    }
    return 0;
}

scn_status scn_scenario_load(const char *path, const char *const *sets, int n_sets,
                             scn_scenario *out, scn_error *err)
{
    memset(err, 0, sizeof *err);
    loader L = {.c = {.doc = scn_doc_init(), .err = err}};
    if (!L.c.doc) return scn_fail(err, SCN_E_INTERNAL, NULL, "", "out of memory");
    scn_scenario *s = calloc(1, sizeof *s);
    scn_node *root = s ? load_file(&L, path, NULL, "") : NULL;
    if (root && root->kind == SCN_NODE_MAP) root = apply_extends(&L, root, NULL, "");
    if (!root) goto err;
    L.depth = 0;
    if (resolve_all(&L, root)) goto err;
    for (int i = 0; i < n_sets; i++)
        if (apply_set(&L, root, sets[i])) goto err;
    if (resolve_all(&L, root) || scn_bind_scenario(&L.c, root, s)) goto err;
    *out = *s;
    free(s);
    scn_doc_free(L.c.doc);
    return SCN_OK;
err:
    if (err->status == SCN_OK) scn_fail(err, SCN_E_INTERNAL, NULL, "", "out of memory");
    free(s);
    scn_doc_free(L.c.doc);
    return err->status;
}
