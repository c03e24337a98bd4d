/* plan_reader.h: the located error of the planner's table readers (plan_published.c reads
 * published.tsv, plan_kernels.c the H200 measurement CSVs): "file:line:col: field: message",
 * the form every input error in kvplan takes (DESIGN.md, "Errors"). */
#ifndef KVPLAN_PLAN_READER_H
#define KVPLAN_PLAN_READER_H

#include <stddef.h>

typedef struct {
    const char *path;   /* the file being read */
    long line;          /* 1-based line of the row being read */
    char *err;          /* the caller's message buffer */
    size_t n;           /* its size */
} plan_reader;

/* Writes the located message for column `col` (1-based) of the current line into rd->err;
 * returns -1 so a reader can `return plan_reader_bad(...)`. */
int plan_reader_bad(plan_reader *rd, int col, const char *field, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

#endif
