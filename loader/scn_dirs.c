/* scn_dirs.c: where kvplan's files live. Shipped data (the YAML library, the chart libraries)
 * is found in one order: an environment variable, then the installed share directory next to
 * the executable (<prefix>/bin/kvplan -> <prefix>/share/kvplan), then the source tree the
 * binary was built from. User output (calibrated profiles, databases, reports) goes to the XDG
 * data directory, never into the shipped data. */
#define _XOPEN_SOURCE 700   /* realpath */
#include "scn.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef KVPLAN_SRCDIR
#define KVPLAN_SRCDIR "."
#endif

static int exists(const char *dir, const char *probe)
{
    char p[PATH_MAX + 256];
    struct stat st;
    if (snprintf(p, sizeof p, "%s/%s", dir, probe) >= (int)sizeof p) return 0;
    return stat(p, &st) == 0;
}

/* The first of $env, <exe>/../share/kvplan/<name>, <source tree>/<name> that holds `probe`;
 * the environment's value is taken as given. -1 when none does. */
static int shipped(const char *env, const char *name, const char *probe, char *buf, size_t n)
{
    const char *e = getenv(env);
    if (e && e[0]) return snprintf(buf, n, "%s", e) < (int)n ? 0 : -1;
    char exe[PATH_MAX];
    ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (l > 0) {
        exe[l] = 0;
        char p[PATH_MAX + 64];
        snprintf(p, sizeof p, "%s/../share/kvplan/%s", dirname(exe), name);
        char real[PATH_MAX];
        if (exists(p, probe) && realpath(p, real)) return snprintf(buf, n, "%s", real) < (int)n ? 0 : -1;
    }
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", KVPLAN_SRCDIR, name);
    if (!exists(p, probe)) return -1;
    return snprintf(buf, n, "%s", p) < (int)n ? 0 : -1;
}

int scn_library_dir(char *buf, size_t n)
{
    if (shipped("KVPLAN_LIBRARY", "scenarios", "models", buf, n) == 0) return 0;
    /* Nothing found: name the build's folder anyway, so errors say where the library was sought. */
    snprintf(buf, n, "%s/scenarios", KVPLAN_SRCDIR);
    return -1;
}

int scn_assets_dir(char *buf, size_t n) { return shipped("KVPLAN_ASSETS", "node_modules", "vega/build/vega.min.js", buf, n); }

int scn_user_dir(const char *sub, char *buf, size_t n)
{
    const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    int w;
    /* The XDG base directory spec: a relative XDG_DATA_HOME is invalid and ignored. */
    if (xdg && xdg[0] == '/') w = snprintf(buf, n, "%s/kvplan%s%s", xdg, sub && sub[0] ? "/" : "", sub ? sub : "");
    else if (home && home[0]) w = snprintf(buf, n, "%s/.local/share/kvplan%s%s", home, sub && sub[0] ? "/" : "", sub ? sub : "");
    else return -1;
    return w > 0 && w < (int)n ? 0 : -1;
}

int scn_mkdirs(const char *dir)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return -1;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s) continue;
        char c = *s;
        *s = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) return -1;
        if (!c) return 0;
        *s = c;
    }
}
