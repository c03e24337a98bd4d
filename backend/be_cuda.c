/* be_cuda.c: finds and opens the CUDA plugin (see be_cuda.h). Only dlopen and dlsym are used
 * here, so nothing of CUDA runs until a command calls into the table. */
#include "be_cuda.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef KVPLAN_PLUGINDIR
#define KVPLAN_PLUGINDIR ""
#endif

/* The opened plugin is process-wide by nature (one dlopen'd library), like the dynamic
 * loader's own list; it is written once, from the first caller. */
static struct {
    int tried;
    const be_cuda_plugin *table;
    char path[PATH_MAX];
    char why[1024];
} loaded;

/* What the plugin borrows from the binary. */
static const be_cuda_host HOST = {sim_token_id};

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Candidate paths in search order; returns how many were written. */
static int candidates(char out[][PATH_MAX], int max)
{
    int k = 0;
    const char *env = getenv("KVPLAN_CUDA_PLUGIN");
    if (env && *env) {
        snprintf(out[k++], PATH_MAX, "%.4000s", env);
        return k;   /* an explicit choice is the only one tried */
    }
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            if (k < max) snprintf(out[k++], PATH_MAX, "%.4000s/%s", exe, BE_CUDA_PLUGIN_FILE);
            if (k < max) snprintf(out[k++], PATH_MAX, "%.4000s/../lib/kvplan/%s", exe, BE_CUDA_PLUGIN_FILE);
        }
    }
    if (KVPLAN_PLUGINDIR[0] && k < max) {
        snprintf(out[k], PATH_MAX, "%.4000s/%s", KVPLAN_PLUGINDIR, BE_CUDA_PLUGIN_FILE);
        int seen = 0;   /* the binary may sit in its own build folder */
        for (int i = 0; i < k; i++) seen |= !strcmp(out[i], out[k]);
        if (!seen) k++;
    }
    return k;
}

static void try_load(void)
{
    loaded.tried = 1;
    char paths[4][PATH_MAX];
    int k = candidates(paths, 4);
    const char *found = NULL;
    for (int i = 0; i < k && !found; i++)
        if (file_exists(paths[i])) found = paths[i];
    if (!found) {
        size_t used = (size_t)snprintf(loaded.why, sizeof loaded.why, "the CUDA plugin (%s) is not installed; looked in", BE_CUDA_PLUGIN_FILE);
        for (int i = 0; i < k && used < sizeof loaded.why; i++)
            used += (size_t)snprintf(loaded.why + used, sizeof loaded.why - used, "%s %.300s", i ? "," : "", paths[i]);
        if (used < sizeof loaded.why)
            snprintf(loaded.why + used, sizeof loaded.why - used, " (build it with nvcc present: make CUDA=1)");
        return;
    }
    snprintf(loaded.path, sizeof loaded.path, "%.4000s", found);
    /* RTLD_LOCAL: the plugin's symbols stay its own; it exports only the table anyway. */
    void *h = dlopen(found, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(loaded.why, sizeof loaded.why, "the CUDA plugin %.300s does not load: %.600s", found, dlerror());
        return;
    }
    const be_cuda_plugin *t = dlsym(h, BE_CUDA_PLUGIN_SYMBOL);
    if (!t) {
        snprintf(loaded.why, sizeof loaded.why, "%.300s has no %s table: not a kvplan CUDA plugin", found, BE_CUDA_PLUGIN_SYMBOL);
        dlclose(h);
        return;
    }
    if (t->abi != BE_CUDA_PLUGIN_ABI || t->config_size != sizeof(be_config) || t->batch_size != sizeof(sim_batch_seq)) {
        snprintf(loaded.why, sizeof loaded.why,
                 "the CUDA plugin %.300s was built for another kvplan (interface %d, expected %d): rebuild it with this tree (make)",
                 found, t->abi, BE_CUDA_PLUGIN_ABI);
        dlclose(h);
        return;
    }
    t->bind(&HOST);
    loaded.table = t;   /* never closed: its code may be referenced until exit */
}

const be_cuda_plugin *be_cuda_plugin_load(char *why, size_t n)
{
    if (!loaded.tried) try_load();
    if (!loaded.table && why) snprintf(why, n, "%s", loaded.why);
    return loaded.table;
}

int be_cuda_plugin_describe(char *msg, size_t n)
{
    const be_cuda_plugin *p = be_cuda_plugin_load(msg, n);
    if (p) {
        snprintf(msg, n, "plugin %.600s (%.100s; loads; devices are probed by `kvplan selftest`)", loaded.path, p->build);
        return 1;
    }
    return loaded.path[0] ? -1 : 0;
}

int be_cuda_built(void) { return be_cuda_plugin_load(NULL, 0) != NULL; }

int be_cuda_device_count(char *msg, size_t n)
{
    const be_cuda_plugin *p = be_cuda_plugin_load(msg, n);
    return p ? p->device_count(msg, n) : -1;
}
