/* out.h: a command's report, built once and rendered as a table, JSON or CSV.
 *
 * A report is a list of sections: key/value sections and tables. Values carry a display kind
 * (bytes, seconds, ...) used only by the table renderer; JSON and CSV print raw SI numbers
 * (bytes, seconds) exactly, so scripts never parse "2.00 GiB". CSV prints the report's main
 * table (the first table section); JSON prints everything. */
#ifndef KVPLAN_OUT_H
#define KVPLAN_OUT_H

#include <stdio.h>

typedef enum { OUT_TABLE, OUT_JSON, OUT_CSV } out_format;
typedef enum { OUT_STR, OUT_INT, OUT_NUM, OUT_BYTES, OUT_SECONDS, OUT_FRAC, OUT_FLOPS, OUT_RATE, OUT_COUNT } out_kind;

typedef struct {
    const char *key;    /* JSON/CSV name, snake_case with its unit */
    const char *label;  /* table header */
    out_kind kind;
} out_col;

typedef struct out_doc out_doc;

out_doc *out_doc_init(void);
void out_doc_free(out_doc *d);
int out_format_parse(const char *s, out_format *f);

/* Starts a key/value section; subsequent out_kv_* calls add to it. */
int out_section(out_doc *d, const char *name, const char *title);
int out_kv_str(out_doc *d, const char *key, const char *label, const char *v);
int out_kv_num(out_doc *d, const char *key, const char *label, double v, out_kind kind);

/* Starts a table section with ncols columns; rows are added cell by cell. */
int out_table(out_doc *d, const char *name, const char *title, int ncols, const out_col *cols);
int out_cell_str(out_doc *d, const char *v);
int out_cell_num(out_doc *d, double v);

/* Adds a free-text note printed under the table view (and as "notes" in JSON). */
int out_note(out_doc *d, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

int out_doc_print(const out_doc *d, out_format f, FILE *fp);

/* Human rendering of one value, as the table view shows it. */
void out_format_value(char *buf, size_t n, double v, out_kind kind);

#endif
