/* db_import.h: measurements from serving systems people already run, turned into kvplan's
 * metric names: vLLM's benchmark_serving result JSON, and Prometheus text scraped from a vLLM
 * /metrics endpoint (latency histograms, KV cache usage, prefix cache hits, preemptions). */
#ifndef KVPLAN_DB_IMPORT_H
#define KVPLAN_DB_IMPORT_H

#include "../sim/sim.h"

#define DB_IMPORT_MAX 64

typedef struct {
    const char *format;                     /* "vllm-benchmark" or "prometheus" */
    int n;
    sim_metric_kv m[DB_IMPORT_MAX];         /* names point into `names` or static strings */
    char names[DB_IMPORT_MAX][48];
} db_import;

/* Parses a file, detecting its format. 0 on success; -1 for malformed or truncated data and -2
 * for an unreadable file, with the reason (file:line where it applies) in err. */
int db_import_file(const char *path, db_import *out, char *err, size_t n);
/* The same from text already in memory (label names the source in messages). */
int db_import_text(const char *text, const char *label, db_import *out, char *err, size_t n);

#endif
