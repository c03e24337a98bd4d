/* plan_reader.c: see plan_reader.h. */
#include "plan_reader.h"

#include <stdarg.h>
#include <stdio.h>

int plan_reader_bad(plan_reader *rd, int col, const char *field, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(rd->err, rd->n, "%s:%ld:%d: %s: %s", rd->path, rd->line, col, field, msg);
    return -1;
}
