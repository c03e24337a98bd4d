/* helpers.c: temp files, scenario loading and running the CLI, for the suites. */
#include "tests.h"
#include "../sim/sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[256];

static const char *dir(void)
{
    if (!tmpdir[0]) {
        snprintf(tmpdir, sizeof tmpdir, "/tmp/kvplan-test-XXXXXX");
        if (!mkdtemp(tmpdir)) { perror("mkdtemp"); abort(); }
    }
    return tmpdir;
}

const char *t_write(const char *name, const char *text)
{
    static char paths[8][512];
    static int slot;
    char *p = paths[slot++ % 8];
    snprintf(p, 512, "%s/%s", dir(), name);
    FILE *f = fopen(p, "w");
    ck_assert_msg(f != NULL, "cannot write %s", p);
    fputs(text, f);
    fclose(f);
    return p;
}

scn_status t_load(const char *text, const char *const *sets, int n_sets, scn_scenario *s, scn_error *e)
{
    return scn_scenario_load(t_write("scenario.yaml", text), sets, n_sets, s, e);
}

void t_library_file(const char *file, const char *const *sets, int n_sets, scn_scenario *s)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", getenv("KVPLAN_LIBRARY"), file);
    scn_error e;
    scn_status st = scn_scenario_load(path, sets, n_sets, s, &e);
    char msg[1500];
    scn_error_format(&e, msg, sizeof msg);
    ck_assert_msg(st == SCN_OK, "loading %s: %s", file, msg);
}

void t_library_engine(const char *model, const char *hardware, const char *engine, scn_scenario *s)
{
    char m[128], h[128], e[128];
    snprintf(m, sizeof m, "model=%s", model);
    snprintf(h, sizeof h, "hardware=%s", hardware);
    snprintf(e, sizeof e, "engine=%s", engine ? engine : "");
    const char *sets[] = {m, h, e};
    t_library_file("chat.yaml", sets, engine ? 3 : 2, s);
}

void t_library(const char *model, const char *hardware, scn_scenario *s)
{
    t_library_engine(model, hardware, NULL, s);
}

static void slurp(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    size_t got = f ? fread(buf, 1, n - 1, f) : 0;
    buf[got] = 0;
    if (f) fclose(f);
}

int t_run(const char *args, char *out, size_t nout, char *err, size_t nerr)
{
    char cmd[4096], o[512], e[512];
    snprintf(o, sizeof o, "%s/stdout", dir());
    snprintf(e, sizeof e, "%s/stderr", dir());
    snprintf(cmd, sizeof cmd, "%s %s >%s 2>%s", getenv("KVPLAN_BIN"), args, o, e);
    int rc = system(cmd);
    slurp(o, out, nout);
    slurp(e, err, nerr);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* A hand-computable clock: every step takes one second, and KV room is never the limit. */
static int one_second(void *ctx, const sim_batch *b, double *seconds, char *err, size_t n)
{
    (void)ctx; (void)b; (void)err; (void)n;
    *seconds = 1.0;
    return 0;
}

static long many_blocks(void *ctx, int replica)
{
    (void)ctx; (void)replica;
    return 1000;
}

sim_executor t_one_second_executor(void)
{
    return (sim_executor){.name = "one-second", .run = one_second, .kv_blocks = many_blocks};
}
