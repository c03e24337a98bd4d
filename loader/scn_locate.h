/* scn_locate.h: where a field sits in a scenario file, for errors found after loading (a
 * request whose KV cannot fit a decode instance, a model that does not fit a pool): the
 * simulator leads such a message with the field responsible ("deployment.disaggregation.decode:
 * ..."), and the caller turns it into the file:line:col: field: message form every loader error
 * has (DESIGN.md). */
#ifndef KVPLAN_LOADER_SCN_LOCATE_H
#define KVPLAN_LOADER_SCN_LOCATE_H

#include <stdbool.h>
#include <stddef.h>

/* The line and column of the deepest node along `path` (dotted keys) that `file` gives; false
 * when the file cannot be read or gives not even the path's first key. */
bool scn_locate(const char *file, const char *path, int *line, int *col);

/* Writes "file:line:col: msg" when msg begins with a dotted field path and a colon and the file
 * gives that field (or a parent of it), else "file: msg". */
void scn_locate_message(const char *file, const char *msg, char *out, size_t n);

#endif
