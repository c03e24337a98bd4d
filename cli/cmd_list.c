/* cmd_list.c: `kvplan list`: the library entries a scenario can name. */
#include "cli.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Adds one row per .yaml file in dir/sub (sub "" = the library root). */
static int list_dir(out_doc *d, const char *kind, const char *sub)
{
    char lib[1000], dir[1200];
    scn_library_dir(lib, sizeof lib);
    snprintf(dir, sizeof dir, "%s%s%s", lib, sub[0] ? "/" : "", sub);
    DIR *dp = opendir(dir);
    if (!dp) { fprintf(stderr, "kvplan list: cannot open %s\n", dir); return -1; }
    char *names[512];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dp)) && n < 512) {
        size_t l = strlen(e->d_name);
        if (l > 5 && !strcmp(e->d_name + l - 5, ".yaml")) names[n++] = strdup(e->d_name);
    }
    closedir(dp);
    qsort(names, (size_t)n, sizeof names[0], by_name);
    for (int i = 0; i < n; i++) {
        char stem[256], path[1500];
        snprintf(stem, sizeof stem, "%.*s", (int)strlen(names[i]) - 5, names[i]);
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        out_cell_str(d, kind);
        out_cell_str(d, stem);
        out_cell_str(d, path);
        free(names[i]);
    }
    return 0;
}

int cmd_list(int argc, char **argv)
{
    cli_common c = {.format = OUT_TABLE};
    int help = 0;
    const char *what = NULL;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_flag(&c, argc, argv, &i, &help);
        if (r < 0) return CLI_EX_USAGE;
        if (r) continue;
        if (cli_is_flag(argv[i])) return cli_usage_error("list", "unknown option '%s'", argv[i]);
        if (what) return cli_usage_error("list", "unexpected argument '%s'", argv[i]);
        what = argv[i];
    }
    if (help) { fputs(cli_usage_of("list"), stdout); return CLI_OK; }
    if (c.n_sets) return cli_usage_error("list", "--set needs a scenario; list takes none");
    if (what && strcmp(what, "models") && strcmp(what, "hardware") && strcmp(what, "engines") && strcmp(what, "scenarios"))
        return cli_usage_error("list", "expected models, hardware, engines or scenarios, not '%s'", what);
    out_doc *d = out_doc_init();
    if (!d) return CLI_EX_INTERNAL;
    static const out_col cols[] = {{"kind", "kind", OUT_STR}, {"name", "name", OUT_STR}, {"file", "file", OUT_STR}};
    out_table(d, "entries", "", 3, cols);
    int rc = 0;
    if (!what || !strcmp(what, "models")) rc |= list_dir(d, "model", "models");
    if (!what || !strcmp(what, "hardware")) rc |= list_dir(d, "hardware", "hardware");
    if (!what || !strcmp(what, "engines")) rc |= list_dir(d, "engine", "engines");
    if (!what || !strcmp(what, "scenarios")) rc |= list_dir(d, "scenario", "");
    if (rc) { out_doc_free(d); return CLI_EX_NOINPUT; }
    rc = cli_emit(d, c.format);
    out_doc_free(d);
    return rc;
}
