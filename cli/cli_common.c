/* cli_common.c: flag handling, scenario loading and exit codes shared by the subcommands. */
#include "cli.h"
#include "../loader/scn_locate.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kvplan %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see 'kvplan %s --help')\n", cmd);
    va_end(ap);
    return CLI_EX_USAGE;
}

/* What cli_flag_value returns for a flag given without its value: an address no argument
 * has, so the state travels with the value itself (no flag kept between calls). Writable, so
 * no compiler can fold it into an equal "" literal elsewhere. */
static char missing_value[1];

int cli_flag_missing_value(const char *v) { return v != NULL && v == missing_value; }

int cli_is_flag(const char *arg) { return arg[0] == '-' && arg[1] != 0; }

const char *cli_flag_value(int argc, char **argv, int *i, const char *flag)
{
    size_t n = strlen(flag);
    const char *a = argv[*i];
    if (strncmp(a, flag, n) || (a[n] != 0 && a[n] != '=')) return NULL;
    if (a[n] == '=') return a + n + 1;
    if (*i + 1 >= argc) {
        fprintf(stderr, "kvplan: %s needs a value\n", flag);
        return missing_value;
    }
    return argv[++*i];
}

const char *cli_usage_of(const char *name)
{
    for (int i = 0; i < CLI_N_COMMANDS; i++)
        if (!strcmp(CLI_COMMANDS[i].name, name)) return CLI_COMMANDS[i].usage;
    return "";
}

int cli_common_flag(cli_common *c, int argc, char **argv, int *i, int *help)
{
    const char *a = argv[*i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { *help = 1; return 1; }
    const char *v;
    if ((v = cli_flag_value(argc, argv, i, "--format"))) {
        if (cli_flag_missing_value(v)) return -1;
        if (out_format_parse(v, &c->format)) {
            fprintf(stderr, "kvplan: --format takes table, json or csv, not %s\n", v);
            return -1;
        }
        return 1;
    }
    if ((v = cli_flag_value(argc, argv, i, "--set"))) {
        if (cli_flag_missing_value(v)) return -1;
        if (c->n_sets == CLI_MAX_SETS) { fprintf(stderr, "kvplan: at most %d --set flags\n", CLI_MAX_SETS); return -1; }
        c->sets[c->n_sets++] = v;
        return 1;
    }
    return 0;
}

void cli_locate_message(const cli_common *c, const char *file, const char *msg, char *out, size_t n)
{
    /* The message's leading field path, as scn_locate_message reads it. */
    size_t k = 0;
    while (msg[k] && (islower((unsigned char)msg[k]) || isdigit((unsigned char)msg[k]) || msg[k] == '_' || msg[k] == '.')) k++;
    if (k > 0 && msg[k] == ':') {
        for (int i = c->n_sets - 1; i >= 0; i--) {
            const char *a = c->sets[i], *eq = strchr(a, '=');
            size_t p = eq ? (size_t)(eq - a) : 0;
            /* The --set's PATH is the field or one of its parents (then a dot follows in msg). */
            if (p == 0 || p > k || strncmp(a, msg, p) || (p < k && msg[p] != '.')) continue;
            snprintf(out, n, "--set:1:%d: %s", (int)p + 2, msg);
            return;
        }
    }
    scn_locate_message(file, msg, out, n);
}

int cli_parse_long(const char *flag, const char *v, long lo, long hi, long *out)
{
    if (cli_flag_missing_value(v)) return -1;   /* "needs a value" was already said */
    char *end;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || end == v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "kvplan: %s takes a whole number from %ld to %ld%s%s%s\n", flag, lo, hi,
                v ? ", not '" : "", v ? v : "", v ? "'" : "");
        return -1;
    }
    *out = x;
    return 0;
}

int cli_exit_for(scn_status st)
{
    switch (st) {
    case SCN_OK: return CLI_OK;
    case SCN_E_DATA: return CLI_EX_DATA;
    case SCN_E_NOINPUT: return CLI_EX_NOINPUT;
    case SCN_E_USAGE: return CLI_EX_USAGE;
    default: return CLI_EX_INTERNAL;
    }
}

int cli_load(const cli_common *c, scn_scenario *s)
{
    scn_error err;
    scn_status st = scn_scenario_load(c->scenario, c->sets, c->n_sets, s, &err);
    if (st == SCN_OK) return CLI_OK;
    char msg[1500];
    scn_error_format(&err, msg, sizeof msg);
    fprintf(stderr, "kvplan: %s\n", msg);
    return cli_exit_for(st);
}

void cli_kv_budget(out_doc *d, double budget, const char *key, const char *label, const char *none_key,
                   const char *short_key)
{
    if (budget > 0) { out_kv_num(d, key, label, budget, OUT_BYTES); return; }
    /* Weights, activations and runtime exceed the usable memory: there is no cache, and the
     * negative remainder is the shortfall, which is what a user needs to size the fix. */
    out_kv_str(d, none_key, label, "none: the model does not fit");
    out_kv_num(d, short_key, "  short by", -budget, OUT_BYTES);
}

int cli_emit(const out_doc *d, out_format f)
{
    if (out_doc_print(d, f, stdout) != 0 || fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "kvplan: could not write the report: %s\n", strerror(errno));
        return CLI_EX_INTERNAL;
    }
    return CLI_OK;
}
