/* scn_bind.h: typed field readers for binding a node tree to the scenario structs.
 *
 * Internal to loader/. Each reader returns 0 when the field is valid or absent-and-optional
 * (leaving *out untouched, so callers set defaults first) and -1 after filling the error with
 * the node's position and the dotted path. */
#ifndef KVPLAN_SCN_BIND_H
#define KVPLAN_SCN_BIND_H

#include "scn_tree.h"

typedef struct {
    scn_doc *doc;
    scn_error *err;
} scn_ctx;

/* Joins parent and key into buf ("workload" + "rate" -> "workload.rate"). */
const char *scn_path_join(char *buf, size_t n, const char *parent, const char *key);

int scn_expect_map(scn_ctx *c, const scn_node *nd, const char *path);
/* Rejects keys not in the NULL-terminated list, suggesting the nearest one. */
int scn_check_keys(scn_ctx *c, const scn_node *m, const char *path, const char *const *known);
/* Fails with "missing required field" at the map when key is absent. */
int scn_require(scn_ctx *c, const scn_node *m, const char *path, const char *key);
/* True when the key is present and not null. */
bool scn_has(const scn_node *m, const char *key);

int scn_get_int(scn_ctx *c, const scn_node *m, const char *path, const char *key,
                long lo, long hi, int *out);
int scn_get_long(scn_ctx *c, const scn_node *m, const char *path, const char *key,
                 long lo, long hi, long *out);
int scn_get_qty(scn_ctx *c, const scn_node *m, const char *path, const char *key,
                scn_unit_kind kind, bool allow_zero, double *out);
int scn_get_bool(scn_ctx *c, const scn_node *m, const char *path, const char *key, bool *out);
int scn_get_str(scn_ctx *c, const scn_node *m, const char *path, const char *key,
                char *buf, size_t n);
/* Matches the scalar against the NULL-terminated names; *out is the index. */
int scn_get_enum(scn_ctx *c, const scn_node *m, const char *path, const char *key,
                 const char *const *names, int *out);
int scn_get_dtype(scn_ctx *c, const scn_node *m, const char *path, const char *key, scn_dtype *out);

/* Node-level parsers, for list items. */
int scn_parse_int(scn_ctx *c, const scn_node *v, const char *path, long lo, long hi, long *out);
int scn_parse_enum(scn_ctx *c, const scn_node *v, const char *path, const char *const *names, int *out);
int scn_parse_bool(scn_ctx *c, const scn_node *v, const char *path, bool *out);

/* Binders for each section (scn_bind_library.c, scn_bind_scenario.c). */
int scn_bind_model(scn_ctx *c, const scn_node *m, const char *path, scn_model *out);
int scn_bind_hardware(scn_ctx *c, const scn_node *m, const char *path, scn_hardware *out);
int scn_bind_scenario(scn_ctx *c, const scn_node *root, scn_scenario *out);
int scn_bind_engine(scn_ctx *c, const scn_node *m, const char *path, scn_engine *out);
/* deployment.disaggregation under the deployment mapping `dep` (scn_bind_disagg.c); after the
 * model, hardware, engine and the rest of the deployment are bound. */
int scn_bind_disagg(scn_ctx *c, const scn_node *dep, const char *dpath, scn_scenario *s);
/* options.disaggregation: [off, on] (or one value) under the options mapping m. */
int scn_bind_disagg_option(scn_ctx *c, const scn_node *m, scn_options *o);

/* Translates a Hugging Face config.json tree into a kvplan model mapping (scn_hf.c). */
scn_node *scn_hf_translate(scn_ctx *c, const scn_node *cfg, const char *path);

#endif
