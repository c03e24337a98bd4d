/* scn_units.c: parses quantities with units ("80 GiB", "3.35 TB/s", "50 ms") with PCRE2.
 *
 * One pattern splits a quantity into number and unit; a table per kind maps the unit to its
 * SI factor. A unit that belongs to another kind, a missing unit, or an ambiguous one ("KB") is
 * reported with the list of units the field accepts: the loader never guesses. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "scn.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <pcre2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { const char *unit; double factor; } unit_def;

/* Each table ends with a NULL unit. Factors convert to bytes, bytes/s, ops/s, s, 1/s. */
static const unit_def BYTES[] = {
    {"B", 1}, {"kB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
    {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
    {NULL, 0}};
static const unit_def BANDWIDTH[] = {
    {"B/s", 1}, {"kB/s", 1e3}, {"MB/s", 1e6}, {"GB/s", 1e9}, {"TB/s", 1e12},
    {"KiB/s", 1024.0}, {"MiB/s", 1048576.0}, {"GiB/s", 1073741824.0}, {"TiB/s", 1099511627776.0},
    {NULL, 0}};
static const unit_def COMPUTE[] = {
    {"FLOPS", 1}, {"GFLOPS", 1e9}, {"TFLOPS", 1e12}, {"PFLOPS", 1e15},
    {"FLOP/s", 1}, {"GFLOP/s", 1e9}, {"TFLOP/s", 1e12}, {"PFLOP/s", 1e15},
    {"OPS", 1}, {"GOPS", 1e9}, {"TOPS", 1e12}, {"POPS", 1e15},
    {NULL, 0}};
static const unit_def TIME[] = {
    {"ns", 1e-9}, {"us", 1e-6}, {"\xc2\xb5s", 1e-6}, {"ms", 1e-3}, {"s", 1}, {"min", 60}, {"h", 3600},
    {NULL, 0}};
static const unit_def RATE[] = {
    {"/s", 1}, {"/min", 1.0 / 60}, {"/h", 1.0 / 3600},
    {"req/s", 1}, {"req/min", 1.0 / 60}, {"req/h", 1.0 / 3600},
    {NULL, 0}};
static const unit_def FRACTION[] = { {"%", 0.01}, {NULL, 0} };

static const unit_def *const TABLES[] = {BYTES, BANDWIDTH, COMPUTE, TIME, RATE, FRACTION};
static const char *const KIND_NAMES[] = {"a byte size", "a bandwidth", "a compute rate",
                                         "a duration", "a rate", "a fraction"};
static const char *const EXAMPLES[] = {"80 GiB", "3.35 TB/s", "989 TFLOPS", "50 ms", "8/s", "0.9 or 90%"};

const char *scn_unit_kind_name(scn_unit_kind k) { return KIND_NAMES[k]; }

static pcre2_code *re_quantity;
static pthread_once_t re_once = PTHREAD_ONCE_INIT;

static void compile_patterns(void)
{
    int code;
    PCRE2_SIZE off;
    /* number (sign, decimals, exponent), optional blanks, unit (anything but blanks). */
    re_quantity = pcre2_compile((PCRE2_SPTR) "^\\s*([-+]?(?:\\d+(?:\\.\\d*)?|\\.\\d+)(?:[eE][-+]?\\d+)?)"
                                "\\s*(\\S+)?\\s*$",
                                PCRE2_ZERO_TERMINATED, PCRE2_UTF, &code, &off, NULL);
}

static const unit_def *find_unit(const unit_def *t, const char *u)
{
    for (; t->unit; t++) if (strcmp(t->unit, u) == 0) return t;
    return NULL;
}

static void list_units(scn_unit_kind kind, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = 0;
    for (const unit_def *t = TABLES[kind]; t->unit && used < n; t++) {
        if (t->unit[0] == '\xc2') continue;  /* µs is an alias of us */
        used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? ", " : "", t->unit);
    }
}

int scn_quantity_parse(const char *text, scn_unit_kind kind, double *out, char *msg, size_t n)
{
    pthread_once(&re_once, compile_patterns);
    if (!re_quantity) { snprintf(msg, n, "internal: unit pattern failed to compile"); return -1; }
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re_quantity, NULL);
    if (!md) { snprintf(msg, n, "out of memory"); return -1; }
    int rc = pcre2_match(re_quantity, (PCRE2_SPTR)text, PCRE2_ZERO_TERMINATED, 0, 0, md, NULL);
    char units[200];
    list_units(kind, units, sizeof units);
    if (rc < 2) {
        pcre2_match_data_free(md);
        snprintf(msg, n, "'%s' is not %s; expected a number and a unit, e.g. '%s'", text,
                 KIND_NAMES[kind], EXAMPLES[kind]);
        return -1;
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    char unit[32] = "";
    /* The pattern matched the number, so strtod reads exactly that span; a longer read (a
     * hexadecimal "0x1p3" spelled without blanks) is refused rather than taken. */
    char *end;
    errno = 0;
    double v = strtod(text + ov[2], &end);
    bool exact = end == text + ov[3], range = errno == ERANGE;
    if (rc >= 3 && ov[4] != PCRE2_UNSET) {
        size_t ul = ov[5] - ov[4];
        if (ul >= sizeof unit) ul = sizeof unit - 1;
        memcpy(unit, text + ov[4], ul);
    }
    pcre2_match_data_free(md);
    if (!exact) {
        snprintf(msg, n, "'%s' is not %s; expected a number and a unit, e.g. '%s'", text, KIND_NAMES[kind],
                 EXAMPLES[kind]);
        return -1;
    }
    /* Overflow to infinity and underflow to zero or a subnormal both lose the value written. */
    if (!isfinite(v) || range || (v != 0 && fabs(v) < DBL_MIN)) {
        snprintf(msg, n, "'%s' is out of range", text);
        return -1;
    }
    if (!unit[0]) {
        if (kind == SCN_UNIT_FRACTION) { *out = v; return 0; }
        snprintf(msg, n, "'%s' has no unit; %s needs one of: %s (e.g. '%s')", text,
                 KIND_NAMES[kind], units, EXAMPLES[kind]);
        return -1;
    }
    const unit_def *u = find_unit(TABLES[kind], unit);
    if (u) {
        double x = v * u->factor;
        if (!isfinite(x) || (x != 0 && fabs(x) < DBL_MIN)) { snprintf(msg, n, "'%s' is out of range", text); return -1; }
        *out = x;
        return 0;
    }
    if (kind == SCN_UNIT_BYTES && (strcmp(unit, "KB") == 0 || strcmp(unit, "K") == 0)) {
        snprintf(msg, n, "'%s' is ambiguous: write kB (1000 bytes) or KiB (1024 bytes)", text);
        return -1;
    }
    for (int k = 0; k < (int)(sizeof TABLES / sizeof TABLES[0]); k++) {
        if (k != (int)kind && find_unit(TABLES[k], unit)) {
            snprintf(msg, n, "'%s' is %s, but this field is %s; use one of: %s", text,
                     KIND_NAMES[k], KIND_NAMES[kind], units);
            return -1;
        }
    }
    snprintf(msg, n, "unknown unit '%s' in '%s'; %s takes one of: %s", unit, text,
             KIND_NAMES[kind], units);
    return -1;
}

/* ---- dtypes ---- */
static const double DTYPE_BYTES[SCN_DTYPE_COUNT] = {4, 2, 2, 1, 1, 0.5, 0.5};

const char *scn_dtype_name(scn_dtype d) { return d < SCN_DTYPE_COUNT ? SCN_DTYPE_NAMES[d] : "?"; }
double scn_dtype_bytes(scn_dtype d) { return d < SCN_DTYPE_COUNT ? DTYPE_BYTES[d] : 0; }

int scn_dtype_parse(const char *s, scn_dtype *out)
{
    for (int i = 0; i < SCN_DTYPE_COUNT; i++)
        if (strcmp(s, SCN_DTYPE_NAMES[i]) == 0) { *out = (scn_dtype)i; return 0; }
    /* Accepted spellings from Hugging Face configs and vLLM flags. */
    if (!strcmp(s, "float16") || !strcmp(s, "half")) { *out = SCN_DTYPE_FP16; return 0; }
    if (!strcmp(s, "bfloat16")) { *out = SCN_DTYPE_BF16; return 0; }
    if (!strcmp(s, "float32")) { *out = SCN_DTYPE_FP32; return 0; }
    if (!strcmp(s, "fp8_e4m3") || !strcmp(s, "fp8_e5m2")) { *out = SCN_DTYPE_FP8; return 0; }
    return -1;
}

int scn_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 99;
    int row[64];
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int sub = diag + (a[i - 1] != b[j - 1]);
            int best = up + 1 < row[j - 1] + 1 ? up + 1 : row[j - 1] + 1;
            row[j] = sub < best ? sub : best;
            diag = up;
        }
    }
    return row[lb];
}
