/* scn_tree.h: a YAML document as a tree of nodes that remember where they came from.
 *
 * Internal to loader/. All nodes and strings live in one arena owned by a scn_doc, so trees
 * from several files (a scenario, its library entries, --set fragments) can be merged by pointer
 * and freed together. */
#ifndef KVPLAN_SCN_TREE_H
#define KVPLAN_SCN_TREE_H

#include "scn.h"

typedef enum { SCN_NODE_SCALAR, SCN_NODE_MAP, SCN_NODE_SEQ } scn_node_kind;

typedef struct scn_node scn_node;
struct scn_node {
    scn_node_kind kind;
    const char *file;      /* arena string */
    int line, col;         /* 1-based */
    const char *text;      /* scalar text */
    bool quoted;           /* scalar was quoted: a string, never a number */
    int n, cap;            /* children */
    scn_node **keys;       /* map: key scalars; NULL for sequences */
    scn_node **vals;       /* map values, or sequence items */
    long weight;           /* nodes in this subtree with aliases expanded (set by the parser) */
};

/* Limits that keep every walk over a tree bounded: nesting depth (each walk recurses once per
 * level) and the size of a document with its aliases expanded (an alias chain doubles it per
 * level, the "billion laughs" pattern). No scenario, library entry or config.json comes near. */
#define SCN_MAX_NESTING 64
#define SCN_MAX_EXPANDED 1000000L

typedef struct scn_doc scn_doc;

scn_doc *scn_doc_init(void);
void scn_doc_free(scn_doc *d);
/* Arena allocation and string interning; NULL on out of memory. */
void *scn_doc_alloc(scn_doc *d, size_t n);
const char *scn_doc_strdup(scn_doc *d, const char *s);

/* Parses a file (file_label names it in errors) or a string into a tree. */
scn_node *scn_doc_parse_file(scn_doc *d, const char *path, scn_error *err);
scn_node *scn_doc_parse_string(scn_doc *d, const char *text, const char *label, int col0,
                               scn_error *err);

scn_node *scn_node_new(scn_doc *d, scn_node_kind kind, const char *file, int line, int col);
int scn_node_append(scn_doc *d, scn_node *parent, scn_node *key, scn_node *val);
/* Map lookup by key text; NULL when absent or when m is not a map. */
scn_node *scn_map_get(const scn_node *m, const char *key);
int scn_map_index(const scn_node *m, const char *key);
/* Sets (replacing or appending) key to val in map m. */
int scn_map_set(scn_doc *d, scn_node *m, const char *key, scn_node *val);
void scn_map_remove(scn_node *m, const char *key);
/* Deep-merges overlay onto base (overlay wins; maps merge recursively) and returns base. */
scn_node *scn_node_merge(scn_doc *d, scn_node *base, const scn_node *overlay);

/* Fills err for a node: status, position and path. Returns err->status. */
scn_status scn_fail(scn_error *err, scn_status st, const scn_node *at, const char *path,
                    const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

#endif
