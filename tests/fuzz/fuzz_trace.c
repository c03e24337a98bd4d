/* fuzz_trace.c: the CSV trace reader (sim/workload.c), through the workload generator as the
 * engine drives it. Oracle: every request it hands out has a finite arrival time that never goes
 * backwards and lengths of at least one token; it stops (end or a located error) within one
 * request per line. */
#include "fuzz_common.h"
#include "../../loader/scn.h"
#include "../../sim/workload.h"

#include <math.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static scn_scenario base;

static void load_base(void)
{
    char lib[1024], path[1200];
    scn_library_dir(lib, sizeof lib);
    snprintf(path, sizeof path, "%s/chat.yaml", lib);
    scn_error err;
    if (scn_scenario_load(path, NULL, 0, &base, &err) != SCN_OK) { fprintf(stderr, "%s\n", err.msg); abort(); }
    base.workload.arrival = SCN_ARRIVAL_TRACE;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!base.workload.trace[0]) load_base();
    const char *path = fuzz_file(0, "trace.csv", data, size);
    snprintf(base.workload.trace, sizeof base.workload.trace, "%s", path);
    int noinput = 0;
    char err[512] = "";
    sim_workload *w = sim_workload_init(&base, 1, &noinput, err, sizeof err);
    if (!w) abort();   /* the file exists: only reading it may fail */
    long lines = 1;
    for (size_t i = 0; i < size; i++) lines += data[i] == '\n';
    double last = 0;
    long got = 0;
    sim_req_spec r;
    int rc;
    while ((rc = sim_workload_next(w, &r, err, sizeof err)) == 0) {
        if (!isfinite(r.arrival) || r.arrival < last || r.prompt < 1 || r.output < 0) abort();
        last = r.arrival;
        if (++got > lines) abort();
    }
    if (rc < 0 && !err[0]) abort();
    sim_workload_free(w);
    return 0;
}
